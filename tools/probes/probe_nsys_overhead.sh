#!/usr/bin/env bash
# What does phase 1's nsys cost the program, and which trace does it? One program, run plain and
# under nsys with each trace set, interleaved REPEATS times; prints each run's per-iteration
# median from the program's NSDIAG_RESULT lines (one per rank under a launcher). With KEEP set,
# each nsys run is exported to SQLite under $OUT/overhead/ (for `nsdiag explain`).
#
#   bash tools/probes/probe_nsys_overhead.sh REPEATS NAME -- COMMAND...
#
# Trace sets: full = phase 1 before 2026-11-30 (cuda,nvtx,osrt); lean = cuda,nvtx.
set -u
repeats=$1 name=$2; shift 3
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
D=/tmp/overhead; mkdir -p "$D" "${OUT:-/tmp}/overhead"
medians() { grep -h '^NSDIAG_RESULT' "$1" | sed 's/.*"median_ms": \([0-9.]*\).*/\1/' | tr '\n' ' '; }
for i in $(seq "$repeats"); do
  for mode in plain full lean; do
    log="$D/$name-$mode-$i.log"
    case $mode in
      plain) "$@" > "$log" 2>&1 ;;
      full) "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw none -s none -f true -o "$D/$name-$mode-$i" "$@" > "$log" 2>&1 ;;
      lean) "$NSYS" profile -t cuda,nvtx --cpuctxsw none -s none -f true -o "$D/$name-$mode-$i" "$@" > "$log" 2>&1 ;;
    esac
    echo "$name $mode $i: median ms per rank: $(medians "$log")"
    if [ "$mode" != plain ] && [ -n "${KEEP:-}" ]; then
      "$NSYS" export --type sqlite -f true -o "${OUT:-/tmp}/overhead/$name-$mode-$i.sqlite" \
        "$D/$name-$mode-$i.nsys-rep" > /dev/null 2>&1
    fi
    cp "$log" "${OUT:-/tmp}/overhead/"
  done
done
