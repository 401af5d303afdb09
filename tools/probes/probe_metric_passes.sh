#!/usr/bin/env bash
# Which of the rules' metrics cost replay passes: ncu on one elementwise launch with the whole
# list nsdiag requests (nsdiag.collect.metric_set on this GPU's --query-metrics) and with one group
# left out at a time; then the wall time of 5 launches for the whole list and the lean candidate.
# Repository root on the H200.
set -u
OUT=${1:?outdir}; W=/tmp/passes; mkdir -p "$W" "$OUT"
P=(python3 tools/probes/section_probe.py)
COMMON=(--clock-control none --profile-from-start off -k regex:elementwise --import-source no -f)
BASE=(--section SpeedOfLight --section LaunchStats --section Occupancy)
python3 - "$W" <<'PY'
import re, sys
from pathlib import Path
from nsdiag.collect import metric_set, tools
listing = tools.query_metrics(tools.find_tool("ncu").path)
every = metric_set.rule_metrics(metric_set.parse_query(listing or ""))
groups = {
    "tensor_paths": r"^sm__ops_path_tensor_",
    "tensor_sparsity_split": r"^sm__ops_path_tensor_.*_sparsity_(on|off)\.",
    "stall_reasons": r"^smsp__average_warps_issue_stalled_",
    "sass_counts": r"^(smsp|sm)__sass_",
    "pipes": r"^sm__(pipe_|inst_executed_pipe_)",
    "l1tex": r"^l1tex__",
    "lts_dram": r"^(lts|dram)__",
}
out = Path(sys.argv[1])
(out / "all.txt").write_text(",".join(every))
for name, pattern in groups.items():
    kept = [m for m in every if not re.search(pattern, m)]
    (out / f"without_{name}.txt").write_text(",".join(kept))
lean = [m for m in every if not re.search(groups["tensor_sparsity_split"], m)]
(out / "lean.txt").write_text(",".join(lean))
print(f"{len(every)} metrics; lean candidate {len(lean)}")
PY
passes() { timeout 120 ncu "$@" --launch-count 1 "${COMMON[@]}" -o "$W/x" "${P[@]}" 2>&1 | grep -oE '[0-9]+ pass(es)?|==ERROR==.*' | head -2 | tr '\n' ' '; }
for f in "$W"/all.txt "$W"/without_*.txt "$W"/lean.txt; do
  n=$(basename "$f" .txt); m=$(cat "$f")
  echo "$n ($(tr ',' '\n' < "$f" | wc -l) metrics): metrics only $(passes --metrics "$m"); with the 3 sections $(passes "${BASE[@]}" --metrics "$m")"
done
start=$(date +%s.%N); "${P[@]}" > /dev/null; echo "plain wall: $(python3 -c "import time; print(round(time.time() - $start, 2))") s"
for n in all lean; do
  start=$(date +%s.%N)
  res=$(timeout 200 ncu "${BASE[@]}" --metrics "$(cat "$W/$n.txt")" --launch-count 5 "${COMMON[@]}" -o "$W/t_$n" "${P[@]}" 2>&1 | grep -oE '[0-9]+ passes|==ERROR==.*' | sort | uniq -c | tr '\n' ' ')
  echo "$n + 3 sections: 5 launches, wall $(python3 -c "import time; print(round(time.time() - $start, 2))") s; $res"
done
