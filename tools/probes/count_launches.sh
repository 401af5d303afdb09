#!/usr/bin/env bash
# Kernel launches in the profiled step of the benchmark workload, per configuration (H200, .devdeps).
#   count_launches.sh OUT "--layers 2" "--layers 4 --foreach" ...
set -u
OUT=${1:?outdir}; shift; W=/tmp/count; mkdir -p "$W"
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
i=0
for cfg in "$@"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw none -s none --cuda-graph-trace node --capture-range cudaProfilerApi \
    --capture-range-end stop -f true -o "$W/c$i" python3 benchmarks/workloads/tiny_transformer.py $cfg > "$W/c$i.log" 2>&1
  "$NSYS" export --type sqlite -f true -o "$W/c$i.sqlite" "$W/c$i.nsys-rep" >> "$W/c$i.log" 2>&1
  n=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0])" "$W/c$i.sqlite")
  echo "workload $cfg: $n kernel launches"
  gzip -9c "$W/c$i.sqlite" > "$OUT/count_$i.sqlite.gz"
done
