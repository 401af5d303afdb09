#!/usr/bin/env bash
# Where `nsdiag profile`'s own (host) time goes on one program of bench_profile_cost.PROGRAMS
# (issue 38): the whole `nsdiag profile -v` process under cProfile on the H200 (repository root,
# .devdeps carried); the 40 costliest functions by cumulative and by own time, the breakdown
# and the verbose log into $OUT.
#   tools/probes/probe_profile_hotspots.sh NAME [SECONDS]
set -u
OUT=${OUT:?set by the device tool}
name=$1; limit=${2:-200}
. tools/device_env.sh
export PATH=$(dirname "$NSYS"):$PATH
argv=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import bench_profile_cost as b; print(' '.join(b.PROGRAMS['$name']))")
rm -rf "/tmp/hot_$name"
start=$SECONDS
timeout -s INT "$limit" python3 -m cProfile -o "$OUT/hot_$name.prof" -m nsdiag profile -v \
  -o "/tmp/hot_$name" $argv > "$OUT/hot_$name.log" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/hot_$name.log"
python3 - "$OUT/hot_$name.prof" > "$OUT/hot_$name.txt" <<'PY'
import pstats, sys
s = pstats.Stats(sys.argv[1])
s.sort_stats("cumulative").print_stats(60)
s.sort_stats("tottime").print_stats(40)
PY
cp "/tmp/hot_$name/status.json" "$OUT/hot_$name.status.json" 2>/dev/null
