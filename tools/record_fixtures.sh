#!/usr/bin/env bash
# Records the real-profiler fixtures under tests/data on the H200 test machine.
# Usage (repository root, on the GPU machine): bash tools/record_fixtures.sh PART OUTDIR
#   PART = reference | calibration
# Each step is independent: a failing step is logged and the rest still run.
set -u
PART=${1:?part}; OUT=${2:?outdir}
W=/tmp/nsdiag-record/$PART; mkdir -p "$W"
NCU=${NCU:-ncu}
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
NCU_FULL=("$NCU" --set full --clock-control none --import-source no -f)
export PYTHONUNBUFFERED=1

step() { echo; echo "=== $(date +%T) $*"; }
run() { local t=$1; shift; timeout "$t" "$@"; local rc=$?; [ $rc -ne 0 ] && echo "!!! rc=$rc: $*"; return 0; }

export_ncu() {  # export_ncu NAME: CSV pages of $W/NAME.ncu-rep
  local n=$1
  "$NCU" -i "$W/$n.ncu-rep" --csv --page raw --print-units base > "$W/${n}_raw.csv" 2> "$W/${n}_export.err"
  "$NCU" -i "$W/$n.ncu-rep" --csv --page raw --print-units auto > "$W/${n}_raw_auto.csv" 2>> "$W/${n}_export.err"
  "$NCU" -i "$W/$n.ncu-rep" --csv --page details --print-details all --print-units base > "$W/${n}_details.csv" 2>> "$W/${n}_export.err"
  "$NCU" -i "$W/$n.ncu-rep" --csv --page details --print-details all --print-units base --print-metric-name name > "$W/${n}_details_names.csv" 2>> "$W/${n}_export.err"
  wc -c "$W/${n}"_*.csv
}

nsys_setup() {
  mkdir -p /tmp/dw
  for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/dw; done
}
nsys_run() {  # nsys_run NAME cmd...: timeline + sqlite + stats CSVs
  local n=$1; shift
  LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw none -s none -f true -o "$W/$n" "$@" > "$W/${n}_nsys.log" 2>&1 || echo "!!! nsys profile $n failed"
  LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} "$NSYS" export --type sqlite -f true -o "$W/$n.sqlite" "$W/$n.nsys-rep" >> "$W/${n}_nsys.log" 2>&1
  LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} "$NSYS" stats --report cuda_gpu_kern_sum --report cuda_gpu_trace --report cuda_api_sum --report nvtx_sum --format csv --output "$W/${n}_stats" "$W/$n.sqlite" >> "$W/${n}_nsys.log" 2>&1 || echo "!!! nsys stats $n failed"
  tail -3 "$W/${n}_nsys.log"; ls -la "$W/$n".* 2>/dev/null
}

step "machine"
"$NSYS" stats --help > "$W/nsys_stats_help.log" 2>&1 || true
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
"$NCU" --version | tail -1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
nsys_setup; LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu "$NSYS" --version

if [ "$PART" = reference ] || [ "$PART" = reference-kernels-only ]; then
  step "reference kernels: correctness"
  if [ "$PART" = reference ]; then run 300 python3 reference_kernels/check.py
  else run 300 python3 reference_kernels/check.py --variants fused,float4,stream_split; fi
  step "reference kernels: benchmark"
  run 240 python3 benchmarks/bench_reference_kernels.py --json "$W/bench_reference_kernels.json"
  step "reference kernels: ncu --set full"
  run 300 "${NCU_FULL[@]}" --nvtx --profile-from-start off -o "$W/reference" python3 reference_kernels/run_all.py --profile-region --copy-ceiling
  export_ncu reference
  # A small report for the .ncu-rep reader: the float4 kernel alone, filtered out of the big one.
  ls -la "$W"/*.ncu-rep
  step "reference pipeline: nsys"
  [ "$PART" = reference ] && nsys_run pipeline python3 reference_kernels/run_all.py --variants stream_split,serial_pageable
else
  step "calibration: build"
  run 180 nvcc -O3 -arch=sm_90 -lineinfo -Xptxas -v -o "$W/calib" tests/calibration/calib.cu 2>&1 | grep -E "error|Function properties|spill|Used" | head -80
  step "calibration: ncu --set full"
  run 420 "${NCU_FULL[@]}" -k 'regex:_(bad|good)$' -o "$W/calib" "$W/calib"
  export_ncu calib
  step "calibration: a small full-set .ncu-rep (two kernels of a tiny program)"
  run 120 "${NCU_FULL[@]}" -k 'regex:^(dram_bandwidth_saturated|uncoalesced_global_access)_bad$' -o "$W/calib_small" "$W/calib" dram-bandwidth-saturated uncoalesced-global-access
  export_ncu calib_small; ls -la "$W/calib_small.ncu-rep"
  step "pytorch cases: ncu --set full"
  run 300 "${NCU_FULL[@]}" --profile-from-start off -o "$W/torch_cases" python3 tests/calibration/pytorch_cases.py
  export_ncu torch_cases
  step "console CSV straight from a run (program output and ==PROF== lines mixed in)"
  run 180 "$NCU" --set basic --clock-control none -c 12 --csv --page raw python3 tests/calibration/timeline_cases.py sync-heavy > "$W/console_basic_raw.csv" 2> "$W/console_basic.err"
  run 180 "$NCU" --metrics gpu__time_duration.sum --clock-control none -c 40 --csv --page raw --print-units auto python3 tests/calibration/timeline_cases.py tiny-burst > "$W/console_duration_raw.csv" 2> "$W/console_duration.err"
  head -c 600 "$W/console_basic_raw.csv"; echo; wc -l "$W"/console_*.csv
  step "timeline cases: nsys"
  nsys_run tiny_burst python3 tests/calibration/timeline_cases.py tiny-burst
  nsys_run sync_heavy python3 tests/calibration/timeline_cases.py sync-heavy
fi

step "pack"
cd "$W" && rm -f ./*.qdstrm && gzip -9 -k -f ./*.csv ./*.sqlite ./*.json 2>/dev/null
tar czf "$OUT/$PART-fixtures.tgz" ./*.gz ./*.err ./*.log $(ls ./*.ncu-rep 2>/dev/null | grep -v -E '^\./(reference|calib|torch_cases)\.ncu-rep$') 2>/dev/null
for big in reference calib torch_cases; do [ -f "$big.ncu-rep" ] && [ "$(stat -c %s "$big.ncu-rep")" -lt 16000000 ] && cp "$big.ncu-rep" "$OUT/"; done
ls -la "$OUT"
