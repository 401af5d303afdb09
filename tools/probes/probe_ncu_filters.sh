#!/usr/bin/env bash
# Which launches do ncu's filters count? (repository root on the H200; .devdeps carried)
#   1. from start, per-launch-config, count 1, mangled names: 1 result = the name is not in the
#      launch-configuration key, 2 = it is.
#   2. the same with --profile-from-start off: which of add/mul is profiled tells whether the
#      launch before cudaProfilerStart was counted.
#   3./4. global mode with --profile-from-start off: launch-count 1, then launch-skip 1.
# Then nsys's mangled names next to ncu's, for the same program.
set -u
OUT=${1:?outdir}; W=/tmp/probe; mkdir -p "$W"
P=(python3 tools/probes/filter_probe.py)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
probe() {  # probe NAME ncu-args...
  local n=$1; shift
  echo "--- $n: $*"
  timeout 120 ncu --metrics gpu__time_duration.sum --clock-control none -f -o "$W/$n" "$@" "${P[@]}" 2>&1 | grep -E '==PROF==|==ERROR==|==WARNING=='
  [ -f "$W/$n.ncu-rep" ] && ncu -i "$W/$n.ncu-rep" --csv --page raw --print-kernel-base mangled --metrics gpu__time_duration.sum \
     | cut -c1-400 | tee "$OUT/$n.csv"
}
probe p1_start_cfg --kernel-name-base mangled -k regex:elementwise --filter-mode per-launch-config --launch-count 1
probe p2_region_cfg --kernel-name-base mangled -k regex:elementwise --filter-mode per-launch-config --launch-count 1 --profile-from-start off
probe p3_region_global --kernel-name-base mangled -k regex:elementwise --launch-count 1 --profile-from-start off
probe p4_region_skip --kernel-name-base mangled -k regex:elementwise --launch-skip 1 --launch-count 1 --profile-from-start off
probe p5_region_cfg_fn -k regex:elementwise --filter-mode per-launch-config --launch-count 1 --profile-from-start off
echo "--- nsys mangled names"
LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} "$NSYS" profile -t cuda,nvtx -s none --cpuctxsw none -f true -o "$W/ns" "${P[@]}" > "$W/ns.log" 2>&1
LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} "$NSYS" export --type sqlite -f true -o "$W/ns.sqlite" "$W/ns.nsys-rep" >> "$W/ns.log" 2>&1
python3 - "$W/ns.sqlite" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
for row in con.execute("select k.start, m.value, s.value, k.gridX, k.blockX from CUPTI_ACTIVITY_KIND_KERNEL k "
                       "join StringIds m on k.mangledName = m.id join StringIds s on k.shortName = s.id order by k.start"):
    print(row)
PY
