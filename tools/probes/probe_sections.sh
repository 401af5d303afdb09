#!/usr/bin/env bash
# Replay passes and metrics of each ncu section nsdiag's targeted run uses, and the wall time of
# 5 profiled launches under: the targeted sections, --set full, three cheap sections plus the
# catalogue's metrics (tools/probes/lean_metrics.txt), and that metric list alone.
# Repository root on the H200.
set -u
OUT=${1:?outdir}; W=/tmp/sections; mkdir -p "$W" "$OUT/sections"
P=(python3 tools/probes/section_probe.py)
COMMON=(--clock-control none --profile-from-start off -k regex:elementwise --import-source no -f)
SECTIONS=$(python3 -c 'from nsdiag.collect.argv import TARGETED_SECTIONS as T; print(" ".join(T))')
ncu --query-metrics --chip gh100 --csv > "$W/query.csv" 2>&1
python3 - "$W/query.csv" tools/probes/lean_metrics.txt > "$OUT/sections/lean_valid.txt" <<'PY'
import csv, sys
known = {row[0] for row in csv.reader(open(sys.argv[1])) if row}
wanted = [m.strip() for m in open(sys.argv[2]) if m.strip()]
ok = [m for m in wanted if m.split(".")[0] in known]
print("\n".join(ok))
print(f"query-metrics knows {len(known)} base names; {len(ok)} of {len(wanted)} catalogue metrics valid; dropped: "
      + " ".join(m for m in wanted if m not in ok), file=sys.stderr)
PY
LEAN=$(paste -sd, "$OUT/sections/lean_valid.txt")
for s in $SECTIONS; do
  echo "$s: $(timeout 120 ncu --section "$s" --launch-count 1 "${COMMON[@]}" -o "$W/$s" "${P[@]}" 2>&1 | grep -oE '[0-9]+ pass(es)?|==ERROR==.*' | head -3 | tr '\n' ' ')"
  ncu -i "$W/$s.ncu-rep" --csv --page raw --print-units base 2>/dev/null | head -1 | tr ',' '\n' | tr -d '"' > "$OUT/sections/$s.metrics"
done
start=$(date +%s.%N); "${P[@]}" > /dev/null; echo "plain wall: $(python3 -c "import time; print(round(time.time() - $start, 2))") s"
targ=(); for s in $SECTIONS; do targ+=(--section "$s"); done
for cfg in targeted full lean metrics; do
  case $cfg in
    full) args=(--set full);;
    targeted) args=("${targ[@]}");;
    lean) args=(--section SpeedOfLight --section LaunchStats --section Occupancy --metrics "$LEAN");;
    metrics) args=(--metrics "$LEAN");;
  esac
  start=$(date +%s.%N)
  res=$(timeout 200 ncu "${args[@]}" --launch-count 5 "${COMMON[@]}" -o "$W/t_$cfg" "${P[@]}" 2>&1 | grep -oE '[0-9]+ passes|==ERROR==.*' | sort | uniq -c | tr '\n' ' ')
  echo "$cfg: 5 launches, wall $(python3 -c "import time; print(round(time.time() - $start, 2))") s; $res"
  ncu -i "$W/t_$cfg.ncu-rep" --csv --page raw --print-units base 2>/dev/null | head -1 | tr ',' '\n' | tr -d '"' > "$OUT/sections/set_$cfg.metrics"
done
