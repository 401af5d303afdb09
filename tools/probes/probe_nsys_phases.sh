#!/usr/bin/env bash
# Issue 26: where phase 1's time goes beyond the plain run. For one program: the plain run, nsys
# with nsdiag's arguments and variants, each with the time its output's last line arrived (the
# program's end of work) and the process end (nsys: report generation); nsys's fixed cost on
# /bin/true; ncu --query-metrics alongside a plain run. Repository root on the H200, .devdeps
# carried.   tools/probes/probe_nsys_phases.sh OUTDIR PROGRAM [ARGS...]
set -u
OUT=${1:?outdir}; shift; mkdir -p "$OUT"; W=/tmp/nsysphases; mkdir -p "$W"
. tools/device_env.sh
stamp() {  # label, command...: seconds to the last output line and to the end
  local label=$1; shift
  python3 - "$label" "$@" <<'PY'
import subprocess, sys, time
label, argv = sys.argv[1], sys.argv[2:]
t0 = time.monotonic(); last = first = None
p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for line in p.stdout:
    now = time.monotonic() - t0
    first = first if first is not None else now
    if "NSDIAG_RESULT" in line or "probe done" in line:
        last = now
p.wait()
end = time.monotonic() - t0
print(f"{label:28s} rc={p.returncode} first-line {first if first is not None else float('nan'):6.2f} s  work-done {last if last is not None else float('nan'):6.2f} s  end {end:6.2f} s")
PY
}
A=(-t cuda,nvtx --cpuctxsw none -s none --cuda-graph-trace node -f true)
stamp imports python3 -c "import time; t=time.time(); import torch, transformers, timm; print('NSDIAG_RESULT', time.time()-t)"
stamp plain python3 "$@"
stamp nsys_now "$NSYS" profile "${A[@]}" -o "$W/now" python3 "$@"
start=$(date +%s.%N); "$NSYS" export --type sqlite -f true -o "$W/now.sqlite" "$W/now.nsys-rep" > /dev/null 2>&1
echo "export sqlite: $(python3 -c "import time; print(round(time.time() - $start, 2))") s"
stamp nsys_export_inline "$NSYS" profile "${A[@]}" --export sqlite -o "$W/inline" python3 "$@"
stamp nsys_cuda_only "$NSYS" profile -t cuda --cpuctxsw none -s none --cuda-graph-trace node -f true -o "$W/cuda" python3 "$@"
stamp nsys_true "$NSYS" profile "${A[@]}" -o "$W/true" /bin/true
ncu --query-metrics > /dev/null 2>&1 &
stamp plain_with_query python3 "$@"
wait
