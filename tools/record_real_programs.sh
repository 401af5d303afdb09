#!/usr/bin/env bash
# Record the realistic programs of benchmarks/programs on the H200 (repository root, .devdeps
# carried; see tests/data/README.md for what each recording is). Two parts, one device call each:
#   tools/record_real_programs.sh A   GEMM calibration pair (timings, ncu --set full), the LM
#                                     training step profiled with the full set, and nsys timelines
#                                     of every program's fixed variant (plain timings of step_range)
#   tools/record_real_programs.sh B   `nsdiag profile` of every program as written, and of the
#                                     channels_last CNN with the full set
#   tools/record_real_programs.sh C   the check after issue 12/13's changes: `nsdiag profile` as a
#                                     user runs it (auto region, steady-state launches) on four
#                                     programs, and plain timings of the CNN's fixes
#   tools/record_real_programs.sh D   the compiled CNN's timeline; the DataLoader step re-profiled
#   tools/record_real_programs.sh E   (two GPUs, nvidia-h200-x2) DDP training timelines: balanced,
#                                     a straggler rank, one gradient bucket; one report for all
#                                     ranks and one per rank; ncu under the launcher; the
#                                     host<->device pipeline probe; two runs of one program
#   tools/record_real_programs.sh F   before/after pairs for `nsdiag diff`: the reference kernels
#                                     (naive, float4, serial pageable, stream-split after its fix)
#                                     and two fixes nsdiag recommended (--pad-vocab, --compile),
#                                     each a `nsdiag profile` session; the pipeline probe again
# Steps run in order within a time budget; each step's files are packed into $OUT as it ends, so
# a call cut short still returns what was done.
set -u
PART=${1:?part A or B}
OUT=${OUT:?set by the device tool}
BUDGET=${BUDGET:-560}
. tools/device_env.sh  # PYTHONPATH, no NVLink multicast, libdw for nsys, NSYS
R=/tmp/rec-$PART; mkdir -p "$R"
T0=$(date +%s)
P=benchmarks/programs

pack() {  # sessions and logs without the big binary reports, in parts of at most 15 MB
  rm -f "$OUT"/rec-"$PART".tgz.part-*
  tar czf - -C "$R" --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.qdstrm' . |
    split -b 15M - "$OUT/rec-$PART.tgz.part-"
}

step() {  # step NAME MIN_SECONDS_LEFT TIMEOUT CMD...: run if the budget allows, log, pack
  local name=$1 need=$2 limit=$3; shift 3
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt "$need" ]; then echo "SKIP $name ($left s left)"; return; fi
  local t=$(date +%s)
  timeout "$limit" bash -c '"$@"' _ "$@" > "$R/$name.log" 2>&1
  local rc=$?
  echo "$name: rc=$rc $(( $(date +%s) - t ))s | $(grep -h NSDIAG_RESULT "$R/$name.log" | cut -c1-160)"
  pack
}

timeline() {  # timeline NAME ARGS...: phase-1 nsys flags, whole run, then the SQLite export
  local name=$1; shift
  "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw none -s none --cuda-graph-trace node -f true \
    -o "$R/$name" python3 "$@" && "$NSYS" export --type sqlite -f true -o "$R/$name.sqlite" "$R/$name.nsys-rep"
}

ncu_full_once() {  # the GEMM calibration pair: every GEMM launch of the profiled region, full set
  ncu --set full --clock-control none --import-source no --profile-from-start off --nvtx -f \
    -o "$R/gemm_shapes" python3 $P/gemm_shapes.py --profile-once --reps 3 &&
  ncu -i "$R/gemm_shapes.ncu-rep" --csv --page raw --print-units base | gzip > "$R/gemm_shapes.raw.csv.gz" &&
  ncu -i "$R/gemm_shapes.ncu-rep" --csv --page details --print-details all --print-units base \
    | gzip > "$R/gemm_shapes.details.csv.gz"
}

export R NSYS P
export -f timeline ncu_full_once
echo "== $(nvidia-smi -L) | $(python3 -c 'import torch; print(torch.__version__)') | $(ncu --version | tail -1)"
case $PART in
  A)
    step gemm_timing 60 120 python3 $P/gemm_shapes.py
    step gemm_ncu 120 180 ncu_full_once
    step lm_train_full 200 300 python3 -m nsdiag profile --sections full --coverage 0.8 \
      -o "$R/lm_train_full" $P/lm_train.py --iters 3
    step tl_train_loader_fixed 60 120 timeline train_loader_fixed $P/train_loader.py --workers 8 --pin-memory
    step tl_infer_cnn_fixed 50 120 timeline infer_cnn_fixed $P/infer_cnn.py --channels-last
    step tl_step_range_fixed 40 90 timeline step_range_fixed $P/step_range.py --cuda-graph
    step tl_elementwise_fixed 60 150 timeline elementwise_fixed $P/elementwise.py --compile
    step tl_lm_train_fixed 50 120 timeline lm_train_fixed $P/lm_train.py --pad-vocab
    step plain_step_range 20 60 python3 $P/step_range.py
    step plain_step_range_fixed 20 60 python3 $P/step_range.py --cuda-graph
    step plain_lm_train 30 90 python3 $P/lm_train.py
    step plain_lm_train_fixed 30 90 python3 $P/lm_train.py --pad-vocab
    ;;
  B)
    step prof_elementwise 90 200 python3 -m nsdiag profile -o "$R/elementwise" $P/elementwise.py
    step prof_infer_cnn 90 200 python3 -m nsdiag profile -o "$R/infer_cnn" $P/infer_cnn.py
    step prof_step_range 90 200 python3 -m nsdiag profile -o "$R/step_range" $P/step_range.py
    step prof_train_loader 100 220 python3 -m nsdiag profile -o "$R/train_loader" $P/train_loader.py
    step prof_infer_cl_full 100 240 python3 -m nsdiag profile --sections full --coverage 0.8 \
      -o "$R/infer_cnn_cl_full" $P/infer_cnn.py --channels-last --iters 5
    step plain_elementwise 20 60 python3 $P/elementwise.py
    step plain_infer 20 60 python3 $P/infer_cnn.py
    step plain_infer_fixed 20 60 python3 $P/infer_cnn.py --channels-last
    ;;
  C)
    prof() { local name=$1; shift; python3 -m nsdiag profile -o "$R/$name" "$@" && python3 -m nsdiag explain "$R/$name" --top-kernels 3 --top 2; }
    export -f prof
    step verify_lm_train 120 200 prof lm_train $P/lm_train.py --iters 6
    step verify_step_range 60 150 prof step_range $P/step_range.py --iters 50
    step verify_elementwise 60 120 prof elementwise $P/elementwise.py
    step plain_infer 30 90 python3 $P/infer_cnn.py
    step plain_infer_cl 30 90 python3 $P/infer_cnn.py --channels-last
    step plain_infer_compile 100 240 python3 $P/infer_cnn.py --compile
    step verify_train_loader 120 240 prof train_loader $P/train_loader.py --iters 8
    ;;
  D)  # after the fixes C pointed at: the compiled CNN's timeline, and the DataLoader step again
    prof() { local name=$1; shift; python3 -m nsdiag profile -o "$R/$name" "$@" && python3 -m nsdiag explain "$R/$name" --top-kernels 3 --top 2; }
    export -f prof
    step tl_infer_cnn_compiled 60 120 timeline infer_cnn_compiled $P/infer_cnn.py --compile
    step verify_train_loader 60 200 prof train_loader $P/train_loader.py --iters 8
    ;;
  E)  # two GPUs
    TR="python3 -m torch.distributed.run --nproc-per-node 2"
    ddp() {  # ddp NAME ARGS...: one nsys report following the launcher's children, SQLite export
      local name=$1; shift
      "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw none -s none -f true -o "$R/$name" \
        $TR $P/ddp_train.py --warmup 3 --iters 8 "$@" &&
      "$NSYS" export --type sqlite -f true -o "$R/$name.sqlite" "$R/$name.nsys-rep"
    }
    ddp_ranks() {  # ddp_ranks NAME ARGS...: one nsys report per rank, as srun/torchrun users do
      local name=$1; shift
      $TR --no-python "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw none -s none -f true \
        -o "$R/${name}_rank%q{RANK}" python3 $P/ddp_train.py --warmup 3 --iters 8 "$@" &&
      for f in "$R/${name}"_rank*.nsys-rep; do
        "$NSYS" export --type sqlite -f true -o "${f%.nsys-rep}.sqlite" "$f" || return 1
      done
    }
    ncu_all() {  # ncu following every rank, NCCL kernels left out of replay
      ncu --target-processes all --clock-control none --metrics gpu__time_duration.sum \
        -k 'regex:^(?!nccl)' --launch-skip 300 --launch-count 6 -f -o "$R/ncu_all" \
        $TR $P/ddp_train.py --warmup 3 --iters 4 &&
      ncu -i "$R/ncu_all.ncu-rep" --csv --page raw --print-units base | gzip > "$R/ncu_all.raw.csv.gz"
    }
    ncu_rank0() {  # ncu on rank 0 only, the other rank runs plain
      $TR --no-python bash -c 'if [ "$RANK" = 0 ]; then exec ncu --clock-control none \
        --metrics gpu__time_duration.sum -k "regex:^(?!nccl)" --launch-skip 300 --launch-count 6 \
        -f -o "$R/ncu_rank0" python3 "$@"; else exec python3 "$@"; fi' _ \
        $P/ddp_train.py --warmup 3 --iters 4 &&
      ncu -i "$R/ncu_rank0.ncu-rep" --csv --page raw --print-units base | gzip > "$R/ncu_rank0.raw.csv.gz"
    }
    export TR; export -f ddp ddp_ranks ncu_all ncu_rank0
    step probe_pipeline 60 150 python3 tools/probes/probe_pipeline.py
    step plain_ddp 30 90 $TR $P/ddp_train.py
    step plain_ddp_straggler 30 90 $TR $P/ddp_train.py --straggler-rank 1
    step ddp_balanced 60 120 ddp ddp_balanced
    step ddp_straggler 60 120 ddp ddp_straggler --straggler-rank 1
    step ddp_straggler_ranks 60 150 ddp_ranks ddp_straggler --straggler-rank 1
    step ddp_single_bucket 60 120 ddp ddp_single_bucket --single-bucket
    step ncu_rank0 60 150 ncu_rank0
    step ncu_all 60 150 ncu_all
    step tl_elementwise_run1 30 60 timeline elementwise_run1 $P/elementwise.py
    step tl_elementwise_run2 30 60 timeline elementwise_run2 $P/elementwise.py
    ;;
  F)  # before/after pairs for nsdiag diff
    prof() { local name=$1; shift; python3 -m nsdiag profile -o "$R/$name" "$@" && python3 -m nsdiag explain "$R/$name" --top-kernels 3 --top 2; }
    ref() { local name=$1; shift; prof "$name" -- python3 reference_kernels/run_all.py --profile-region "$@"; }
    export -f prof ref
    step probe_pipeline 60 150 python3 tools/probes/probe_pipeline.py
    step bench_reference 40 120 python3 benchmarks/bench_reference_kernels.py --json "$R/bench.json"
    step ref_naive 50 150 ref ref_naive --variants naive --iters 10
    step ref_float4 50 150 ref ref_float4 --variants float4 --iters 10
    step ref_serial_pageable 50 150 ref ref_serial_pageable --variants serial_pageable --iters 10
    step ref_stream_split 50 150 ref ref_stream_split --variants stream_split --iters 10
    step fix_lm_train 120 200 prof lm_train_padded $P/lm_train.py --iters 6 --pad-vocab
    step fix_elementwise 80 150 prof elementwise_compiled $P/elementwise.py --compile
    ;;
esac
ls -la "$OUT"; echo "total $(( $(date +%s) - T0 ))s"
