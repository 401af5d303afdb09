#!/usr/bin/env bash
# Issue 26: replay passes and wall per launch of the rules' metrics with the stall reasons read
# from warp-state sampling (smsp__pcsamp_*) instead of the per-reason counter ratios, and without
# the per-instruction tensor paths; the values of both, to compare the stall shares.
# Repository root on the H200; writes under $1.
set -u
OUT=${1:?outdir}; W=/tmp/stallprobe; mkdir -p "$W" "$OUT"
P=(python3 tools/probes/stall_probe.py)
COMMON=(--clock-control none --profile-from-start off --import-source no -f)
BASE=(--section SpeedOfLight --section LaunchStats --section Occupancy)
start=$(date +%s.%N); ncu --query-metrics > "$W/query.txt" 2>&1
echo "query-metrics: $(python3 -c "import time; print(round(time.time() - $start, 2))") s, $(wc -l < "$W/query.txt") lines, pcsamp: $(grep -c pcsamp "$W/query.txt")"
grep -o 'smsp__pcsamp[a-z_]*' "$W/query.txt" | sort -u | head -60 > "$OUT/pcsamp_listed.txt"
start=$(date +%s.%N); ncu --query-metrics --chip gh100 > /dev/null 2>&1
echo "query-metrics --chip gh100: $(python3 -c "import time; print(round(time.time() - $start, 2))") s"
python3 - "$W" <<'PY'
import re, sys
from pathlib import Path
from nsdiag.collect import metric_set
from nsdiag.model.catalogue import STALL_REASONS
w = Path(sys.argv[1])
every = metric_set.rule_metrics(metric_set.parse_query((w / "query.txt").read_text()))
stalls = re.compile(r"^smsp__average_warps_issue_stalled_")
paths = re.compile(r"^sm__ops_path_tensor_op_")
samp = ["smsp__pcsamp_sample_count"] + [f"smsp__pcsamp_warps_issue_stalled_{r}" for r in STALL_REASONS]
no_stalls = [m for m in every if not stalls.search(m)]
lean = [m for m in no_stalls if not paths.search(m)]
sets = {"A_now": every, "B_sampled": no_stalls + samp, "C_sampled_nopaths": lean + samp,
        "E_nostalls_nopaths": lean, "F_sampling_only": samp}
for name, ms in sets.items():
    (w / f"{name}.txt").write_text(",".join(ms))
    print(name, len(ms), "metrics")
PY
plain_start=$(date +%s.%N); "${P[@]}" > /dev/null; echo "plain wall: $(python3 -c "import time; print(round(time.time() - $plain_start, 2))") s"
run() {  # name, extra ncu args...
  local n=$1; shift; local start=$(date +%s.%N)
  timeout 240 ncu "${BASE[@]}" "$@" "${COMMON[@]}" -o "$W/$n" "${P[@]}" > "$W/$n.log" 2>&1
  local rc=$?
  echo "$n rc=$rc wall $(python3 -c "import time; print(round(time.time() - $start, 2))") s; passes: $(grep -oE '[0-9]+ pass(es)?' "$W/$n.log" | sort | uniq -c | tr '\n' ' '); $(grep -m2 -E '==ERROR==|==WARNING==' "$W/$n.log" | tr '\n' ' ')"
  cp "$W/$n.log" "$OUT/"
  [ -f "$W/$n.ncu-rep" ] && ncu -i "$W/$n.ncu-rep" --csv --page raw --print-units base 2>/dev/null | gzip > "$OUT/$n.raw.csv.gz"
}
for n in A_now B_sampled C_sampled_nopaths E_nostalls_nopaths F_sampling_only; do run $n --metrics "$(cat "$W/$n.txt")"; done
run D_sampled_nopaths_nocache --metrics "$(cat "$W/C_sampled_nopaths.txt")" --cache-control none
run G_sampled_section --metrics "$(cat "$W/E_nostalls_nopaths.txt")" --section WarpStateStats
