#!/usr/bin/env bash
# Phase-1 timelines of the benchmark workload at a few depths (repository root on the H200,
# .devdeps carried): the profiled step (capture range, as `nsdiag profile` records it) and, for
# one depth, the whole program (warm-up included). Gzipped sqlite exports go to OUT.
set -u
OUT=${1:?outdir}; shift; W=/tmp/tl; mkdir -p "$W"
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
WL=benchmarks/workloads/tiny_transformer.py
for layers in "$@"; do
  echo "--- plain, $layers layers"; /usr/bin/time -f "plain wall %e s" python3 $WL --layers "$layers"
  echo "--- nsys step, $layers layers"
  "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw none -s none --cuda-graph-trace node --capture-range cudaProfilerApi \
    --capture-range-end stop -f true -o "$W/L$layers" python3 $WL --layers "$layers" > "$W/L$layers.log" 2>&1 || tail -5 "$W/L$layers.log"
  "$NSYS" export --type sqlite -f true -o "$W/L$layers.sqlite" "$W/L$layers.nsys-rep" >> "$W/L$layers.log" 2>&1
  gzip -9c "$W/L$layers.sqlite" > "$OUT/transformer_L$layers.sqlite.gz"
done
echo "--- nsys whole program, $1 layers"
"$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw none -s none --cuda-graph-trace node -f true -o "$W/whole" \
  python3 $WL --layers "$1" > "$W/whole.log" 2>&1 || tail -5 "$W/whole.log"
"$NSYS" export --type sqlite -f true -o "$W/whole.sqlite" "$W/whole.nsys-rep" >> "$W/whole.log" 2>&1
gzip -9c "$W/whole.sqlite" > "$OUT/transformer_L$1_whole.sqlite.gz"
ls -la "$OUT"
