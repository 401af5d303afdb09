#!/usr/bin/env bash
# The end-to-end check of issue 15 on the two-GPU machine (nvidia-h200-x2, repository root,
# .devdeps carried for nsys's libraries; one device call): `nsdiag profile` of the DDP program
# under the launcher, balanced and with a straggler, then `nsdiag explain` of each session and
# of the per-rank reports. Sessions (tables, session.json, status.json) and logs are packed
# into $OUT; the big binary reports are left out. Steps run within a time budget, as in
# tools/record_real_programs.sh.
set -u
OUT=${OUT:?set by the device tool}
BUDGET=${BUDGET:-400}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
# No NVLink multicast on the lent machines (GPU-NOTES.md); nsdiag passes them on untouched.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/dw && for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/dw; done
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
R=/tmp/check-mg; mkdir -p "$R"
T0=$(date +%s)
P=benchmarks/programs
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"  # --standalone: a free port

pack() {
  tar czf "$OUT/check-mg.tgz" -C "$R" --exclude='*.ncu-rep' --exclude='*.nsys-rep' \
    --exclude='*.qdstrm' --exclude='*.sqlite' .
}

step() {  # step NAME MIN_SECONDS_LEFT TIMEOUT CMD...
  local name=$1 need=$2 limit=$3; shift 3
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt "$need" ]; then echo "SKIP $name ($left s left)"; return; fi
  local t=$(date +%s)
  timeout "$limit" bash -c '"$@"' _ "$@" > "$R/$name.log" 2>&1
  echo "$name: rc=$? $(( $(date +%s) - t ))s"
  pkill -f ddp_train.py; sleep 1  # a step cut short leaves workers holding the GPUs
  pack
}

prof() {  # prof NAME ARGS...: nsdiag profile under the launcher, then explain (text and JSON)
  local name=$1; shift
  python3 -m nsdiag profile -o "$R/$name" -- $TR $P/ddp_train.py --warmup 3 --iters 8 "$@" &&
  python3 -m nsdiag explain "$R/$name" --top 3 &&
  python3 -m nsdiag explain "$R/$name" --json > "$R/$name.diagnosis.json"
}
export R P TR; export -f prof
echo "== $(nvidia-smi -L | tr '\n' ' ') | $(python3 -c 'import torch; print(torch.__version__)')"
step straggler 150 240 prof ddp_straggler --straggler-rank 1
step balanced 120 200 prof ddp_balanced
grep -h "ranks:\|profiles rank\|rank-imbalance\|Rank 1\|exposed-comm" "$R"/*.log | head -20
