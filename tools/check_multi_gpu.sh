#!/usr/bin/env bash
# The end-to-end checks of issue 15 on the two-GPU machine (nvidia-h200-x2, repository root,
# .devdeps carried for nsys's libraries; one device call):
#
#   bash tools/check_multi_gpu.sh [STEP...]      (default: straggler balanced)
#
#   straggler, balanced   `nsdiag profile` of the DDP program under the launcher (--standalone),
#                         with rank 1 late / as written, then `nsdiag explain` (text and JSON)
#   balanced_port         the balanced profile with the launcher's default rendezvous (no
#                         --standalone: port 29500)
#   plain, plain_port     the program without a profiler, with and without --standalone
#   nsys_balanced         phase 1's nsys command alone over the launcher, exported to SQLite
#   nsys_compute          the same with rank 1 late through extra GPU work (--straggler-kind
#                         compute)
#   ranks_balanced        one nsys report per rank (as srun users record), then explain of them
#
# Sessions (tables, session.json, status.json), SQLite exports of the nsys-only steps and logs
# are packed into $OUT; the big binary reports are left out. `vmstat 2` runs throughout
# (cpu.log: run queue, user/system/idle and steal time), as host noise shows up as a late rank.
set -u
OUT=${OUT:?set by the device tool}
BUDGET=${BUDGET:-400}
. tools/device_env.sh  # PYTHONPATH, no NVLink multicast, libdw for nsys, NSYS
R=/tmp/check-mg; mkdir -p "$R"
T0=$(date +%s)
P=benchmarks/programs
RUN="python3 -m torch.distributed.run --nproc-per-node 2"
TR="$RUN --standalone"  # --standalone: a free port
ARGS="--warmup 3 --iters 8"

pack() {
  tar czf "$OUT/check-mg.tgz" -C "$R" --exclude='*.ncu-rep' --exclude='*.nsys-rep' \
    --exclude='*.qdstrm' --exclude='timeline.sqlite' .
}

step() {  # step NAME MIN_SECONDS_LEFT TIMEOUT CMD...
  local name=$1 need=$2 limit=$3; shift 3
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt "$need" ]; then echo "SKIP $name ($left s left)"; return; fi
  local t=$(date +%s)
  echo "== $name $(date +%T)" >> "$R/cpu.log"
  timeout "$limit" bash -c '"$@"' _ "$@" > "$R/$name.log" 2>&1
  echo "$name: rc=$? $(( $(date +%s) - t ))s | $(grep -h '^NSDIAG_RESULT' "$R/$name.log" |
    sed 's/.*"median_ms": \([0-9.]*\).*"rank": \([0-9]\).*/rank \2 median \1 ms/' | tr '\n' ' ')"
  pkill -f ddp_train.py; sleep 1  # a step cut short leaves workers holding the GPUs
  pack
}

prof() {  # prof NAME LAUNCHER ARGS...: nsdiag profile under the launcher, then explain
  local name=$1 launcher=$2; shift 2
  python3 -m nsdiag profile -o "$R/$name" -- $launcher $P/ddp_train.py $ARGS "$@" &&
  python3 -m nsdiag explain "$R/$name" --top 3 &&
  python3 -m nsdiag explain "$R/$name" --json > "$R/$name.diagnosis.json"
}
nsys_one() {  # nsys_one NAME ARGS...: phase 1's flags over the launcher, one report, SQLite
  local name=$1; shift
  "$NSYS" profile -t cuda,nvtx --cpuctxsw none -s none --cuda-graph-trace node -f true \
    -o "$R/$name" $TR $P/ddp_train.py $ARGS "$@" &&
  "$NSYS" export --type sqlite -f true -o "$R/$name.sqlite" "$R/$name.nsys-rep" &&
  python3 -m nsdiag explain "$R/$name.sqlite" --top 3
}
nsys_ranks() {  # nsys_ranks NAME ARGS...: one report per rank, then explain of all of them
  local name=$1; shift
  $TR --no-python "$NSYS" profile -t cuda,nvtx --cpuctxsw none -s none -f true \
    -o "$R/${name}_rank%q{RANK}" python3 $P/ddp_train.py $ARGS "$@" &&
  for f in "$R/${name}"_rank*.nsys-rep; do
    "$NSYS" export --type sqlite -f true -o "${f%.nsys-rep}.sqlite" "$f" || return 1
  done &&
  python3 -m nsdiag explain "$R/${name}"_rank*.sqlite --top 3
}
export R P TR RUN ARGS NSYS; export -f prof nsys_one nsys_ranks
echo "== $(nvidia-smi -L | tr '\n' ' ') | $(python3 -c 'import torch; print(torch.__version__)') | $(nproc) CPUs"
vmstat -t 2 >> "$R/cpu.log" 2>&1 & VMSTAT=$!
[ $# -gt 0 ] || set -- straggler balanced
for s in "$@"; do
  case $s in
    straggler) step straggler 150 240 prof ddp_straggler "$TR" --straggler-rank 1 ;;
    balanced) step balanced 120 200 prof ddp_balanced "$TR" ;;
    balanced_port) step balanced_port 120 200 prof ddp_balanced_port "$RUN" ;;
    plain) step plain 30 90 bash -c "$TR $P/ddp_train.py $ARGS" ;;
    plain_port) step plain_port 30 90 bash -c "$RUN $P/ddp_train.py $ARGS" ;;
    nsys_balanced) step nsys_balanced 45 120 nsys_one nsys_balanced ;;
    nsys_compute) step nsys_compute 45 120 nsys_one nsys_compute --straggler-rank 1 --straggler-kind compute ;;
    ranks_balanced) step ranks_balanced 50 120 nsys_ranks ddp_balanced ;;
    *) echo "unknown step $s" ;;
  esac
done
kill $VMSTAT; pack
grep -h "ranks:\|profiles rank\|rank-imbalance\|Rank [0-9]\|exposed-comm\|straggler" "$R"/*.log | head -30
