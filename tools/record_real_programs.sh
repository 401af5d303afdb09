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
#   tools/record_real_programs.sh G   why the GPU waits (issue 24): BERT served at batch 1 and the
#                                     channels_last ResNet-50, eager and as CUDA graphs; GPT-2
#                                     training with .item() per step and without; what nsys's
#                                     Python sampling and backtraces cost on the DataLoader step
#   tools/record_real_programs.sh H   one change, many kernels (issue 25): timm ViT-B/16 in fp32,
#                                     TF32 and bf16; a transformers Llama with eager and SDPA
#                                     attention
#   tools/record_real_programs.sh I   the Llama at batch 8 of 2048 tokens (GPU-bound under nsys),
#                                     eager and SDPA attention
#   tools/record_real_programs.sh J   regions (issue 23): the Llama in per-step NVTX ranges
#                                     'step_<i>' run four times; under emit_nvtx (an NVTX range per
#                                     autograd op); the ViT run four times with no NVTX
#   tools/record_real_programs.sh K   GPT-2 at batch 24 with NSD403's whole fix (no .item() per
#                                     step, pinned batches copied without blocking); the probe of
#                                     ending a program under ncu early (tools/probes/probe_ncu_stop.py)
#   tools/record_real_programs.sh M   naming the code (issue 37): the optimizer stepped one
#                                     parameter at a time and fused, a histogram by index_add_ and
#                                     by bincount, pageable and pinned+prefetched batches, GPT-2
#                                     generate() with a dynamic and a static cache, each as written
#                                     under `nsdiag profile` (PyTorch function ranges in phase 1)
#                                     and fixed under nsys; what the ranges cost; ncu's full set on
#                                     the histogram kernels; the four-phase NVTX program (issue 39);
#                                     what ncu costs per launch it does not profile (issue 38)
#   tools/record_real_programs.sh N   the steps part M had no time for (the static-cache decode
#                                     plain and under nsys; ncu on the optimizer step matching no
#                                     kernel), and what ncu's launch filters cost per launch on the
#                                     decode loop and the optimizer step (probe_ncu_filter_cost.sh)
#   tools/record_real_programs.sh O   after issues 37-38: the static-cache decode under phase 1's
#                                     flags without --pytorch (torch.compile breaks with it), and
#                                     the histogram as written under `nsdiag profile` (the L2
#                                     atomic metrics now requested)
#   tools/record_real_programs.sh L   (two GPUs, nvidia-h200-x2; issue 29) transformers GPT-2 under
#                                     DDP fed by a DataLoader (ddp_hf_train.py): balanced, a slow
#                                     loader on rank 1 and its fix, uneven sequence lengths and
#                                     their fix, as `nsdiag profile -- torchrun ...` sessions, plain
#                                     timings, and one nsys report per rank with `step_<i>` ranges
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
  tar czf - -C "$R" --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.qdstrm' \
    --exclude='./*/reports' . |
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

timeline() {  # timeline NAME ARGS...: nsys over the whole run, then the SQLite export; parts A-G
  # used the phase-1 flags of their day (with the OS-runtime trace), later parts today's
  # (collect/argv.py nsys_profile: no OS-runtime trace)
  local name=$1; shift
  local trace=cuda,nvtx,osrt
  case $PART in [A-G]) ;; *) trace=cuda,nvtx ;; esac
  "$NSYS" profile -t $trace --cpuctxsw none -s none --cuda-graph-trace node -f true \
    -o "$R/$name" python3 "$@" && "$NSYS" export --type sqlite -f true -o "$R/$name.sqlite" "$R/$name.nsys-rep"
}

timeline_pt() {  # timeline_pt NAME ARGS...: as `timeline`, with nsys's PyTorch function ranges
  # (phase 1's flags since issue 37: --pytorch=functions-trace for a PyTorch program)
  local name=$1; shift
  "$NSYS" profile -t cuda,nvtx --cpuctxsw none -s none --cuda-graph-trace node \
    --pytorch=functions-trace -f true -o "$R/$name" python3 "$@" &&
    "$NSYS" export --type sqlite -f true -o "$R/$name.sqlite" "$R/$name.nsys-rep"
}

ncu_kernels_full() {  # ncu_kernels_full NAME REGEX ARGS...: the full set on the second launch
  # of the kernels matching REGEX (the first is a warm-up), exported raw and details
  local name=$1 regex=$2; shift 2
  ncu --set full --clock-control none --import-source no -f -k "regex:$regex" --launch-skip 1 \
    --launch-count 1 -o "$R/$name" python3 "$@" &&
  ncu -i "$R/$name.ncu-rep" --csv --page raw --print-units base | gzip > "$R/$name.raw.csv.gz" &&
  ncu -i "$R/$name.ncu-rep" --csv --page details --print-details all --print-units base \
    | gzip > "$R/$name.details.csv.gz"
}

ncu_unmatched() {  # ncu_unmatched ARGS...: the program under ncu with a filter that matches no
  # kernel: what ncu costs for the launches it intercepts and does not profile
  ncu --metrics gpu__time_duration.sum --clock-control none -k "regex:^nsdiag_matches_nothing$" \
    -f -o "$R/unmatched" python3 "$@"
}

ncu_full_once() {  # the GEMM calibration pair: every GEMM launch of the profiled region, full set
  ncu --set full --clock-control none --import-source no --profile-from-start off --nvtx -f \
    -o "$R/gemm_shapes" python3 $P/gemm_shapes.py --profile-once --reps 3 &&
  ncu -i "$R/gemm_shapes.ncu-rep" --csv --page raw --print-units base | gzip > "$R/gemm_shapes.raw.csv.gz" &&
  ncu -i "$R/gemm_shapes.ncu-rep" --csv --page details --print-details all --print-units base \
    | gzip > "$R/gemm_shapes.details.csv.gz"
}

export R NSYS P
export -f timeline timeline_pt ncu_kernels_full ncu_unmatched ncu_full_once
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
  G)  # why the GPU waits
    prof() { local name=$1; shift; python3 -m nsdiag profile -o "$R/$name" "$@" && python3 -m nsdiag explain "$R/$name" --top-kernels 3 --top 3; }
    pysample() {  # pysample NAME FLAGS...: the DataLoader step under nsys with extra flags
      local name=$1; shift
      /usr/bin/time -f "WALL %e s" "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw none "$@" -f true \
        -o "$R/$name" python3 $P/train_loader.py --iters 6 &&
      "$NSYS" export --type sqlite -f true -o "$R/$name.sqlite" "$R/$name.nsys-rep" &&
      python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print("TABLES", sorted(r[0] for r in c.execute("select name from sqlite_master where type=\"table\"")))' "$R/$name.sqlite"
    }
    export -f prof pysample
    step plain_bert 30 90 python3 $P/bert_serve.py
    step plain_bert_graph 30 90 python3 $P/bert_serve.py --cuda-graph
    step prof_bert 90 200 prof bert_serve $P/bert_serve.py
    step tl_bert_graph 40 90 timeline bert_serve_graph $P/bert_serve.py --cuda-graph
    step plain_cnn_cl 30 90 python3 $P/infer_cnn.py --channels-last
    step plain_cnn_cl_graph 30 90 python3 $P/infer_cnn.py --channels-last --cuda-graph
    step tl_cnn_cl 40 90 timeline infer_cnn_cl $P/infer_cnn.py --channels-last
    step tl_cnn_cl_graph 40 90 timeline infer_cnn_cl_graph $P/infer_cnn.py --channels-last --cuda-graph
    step plain_logging 30 90 python3 $P/train_logging.py
    step plain_logging_fixed 30 90 python3 $P/train_logging.py --log-every 0
    step prof_logging 90 200 prof train_logging $P/train_logging.py
    step tl_logging_fixed 40 90 timeline train_logging_fixed $P/train_logging.py --log-every 0
    step plain_loader6 30 60 /usr/bin/time -f "WALL %e s" python3 $P/train_loader.py --iters 6
    step pysample_none 30 60 pysample pysample_none -s none
    step pysample_python 30 90 pysample pysample_python -s none --python-sampling=true --python-sampling-frequency=1000
    step pysample_backtrace 30 90 pysample pysample_backtrace -s cpu --python-sampling=true --python-backtrace=cuda --cudabacktrace=sync
    ;;
  H)  # one change across many kernels; the CNN pair and GPT-2 at batch 24 under today's flags
    prof() { local name=$1; shift; python3 -m nsdiag profile -o "$R/$name" "$@" && python3 -m nsdiag explain "$R/$name" --top-kernels 3 --top 3; }
    backtrace() {  # Python backtraces of CUDA sync calls: does it work here, what does it cost
      /usr/bin/time -f "WALL %e s" "$NSYS" profile -t cuda,nvtx --cpuctxsw none "$@" -f true \
        -o "$R/backtrace" python3 $P/train_logging.py --iters 10 &&
      "$NSYS" export --type sqlite -f true -o "$R/backtrace.sqlite" "$R/backtrace.nsys-rep" &&
      python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print("TABLES", sorted(r[0] for r in c.execute("select name from sqlite_master where type=\"table\"")))' "$R/backtrace.sqlite"
    }
    export -f prof backtrace
    step plain_vit 30 90 python3 $P/vit_train.py
    step plain_vit_tf32 30 90 python3 $P/vit_train.py --precision tf32
    step plain_vit_bf16 30 90 python3 $P/vit_train.py --precision bf16
    step prof_vit 120 200 prof vit_fp32 $P/vit_train.py
    step tl_vit_tf32 40 90 timeline vit_tf32 $P/vit_train.py --precision tf32
    step tl_vit_bf16 40 90 timeline vit_bf16 $P/vit_train.py --precision bf16
    step plain_llama 30 90 python3 $P/llama_train.py
    step plain_llama_sdpa 30 90 python3 $P/llama_train.py --attn sdpa
    step tl_llama_eager 40 90 timeline llama_eager $P/llama_train.py
    step tl_llama_sdpa 40 90 timeline llama_sdpa $P/llama_train.py --attn sdpa
    step tl_cnn_cl 30 90 timeline infer_cnn_cl $P/infer_cnn.py --channels-last
    step tl_cnn_cl_graph 30 90 timeline infer_cnn_cl_graph $P/infer_cnn.py --channels-last --cuda-graph
    step plain_logging24 25 90 python3 $P/train_logging.py --batch 24
    step plain_logging24_fixed 25 90 python3 $P/train_logging.py --batch 24 --log-every 0
    step tl_logging24 30 90 timeline train_logging24 $P/train_logging.py --batch 24
    step tl_logging24_fixed 30 90 timeline train_logging24_fixed $P/train_logging.py --batch 24 --log-every 0
    step backtrace 30 90 backtrace -s cpu --python-backtrace=cuda --cudabacktrace=sync
    ;;
  I)  # eager attention where the GPU, not the host, sets the pace
    step plain_llama_big 40 120 python3 $P/llama_train.py --batch 8 --tokens 2048 --iters 6
    step plain_llama_big_sdpa 40 120 python3 $P/llama_train.py --batch 8 --tokens 2048 --iters 6 --attn sdpa
    step tl_llama_big_eager 50 150 timeline llama_big_eager $P/llama_train.py --batch 8 --tokens 2048 --iters 6
    step tl_llama_big_sdpa 50 150 timeline llama_big_sdpa $P/llama_train.py --batch 8 --tokens 2048 --iters 6 --attn sdpa
    ;;
  J)  # the region a user means
    step tl_llama_steps4 40 120 timeline llama_steps4 $P/llama_train.py --warmup 0 --iters 4 --step-ranges
    step tl_llama_emit_nvtx 40 150 timeline llama_emit_nvtx $P/llama_train.py --iters 6 --emit-nvtx
    step tl_vit_four 40 120 timeline vit_four $P/vit_train.py --warmup 1 --iters 3
    ;;
  K)  # NSD403's whole fix, and what ncu keeps when the program is ended early
    step plain_logging24_pinned 25 90 python3 $P/train_logging.py --batch 24 --log-every 0 --pin-memory
    step tl_logging24_pinned 30 90 timeline train_logging24_pinned $P/train_logging.py --batch 24 --log-every 0 --pin-memory
    step probe_ncu_stop 60 200 python3 tools/probes/probe_ncu_stop.py "$R/probe_ncu_stop"
    ;;
  M)  # naming the code (issue 37), the four-phase program (39), ncu's per-launch cost (38)
    prof() { local name=$1; shift; python3 -m nsdiag profile -v -o "$R/$name" "$@"; }
    export -f prof
    step probe_nsys_pytorch 10 60 bash -c '"$NSYS" profile -t cuda,nvtx --pytorch=functions-trace \
      -f true -o "$R/pt_no_torch" python3 -c "print(1)"; echo "python without torch: rc=$?"; \
      "$NSYS" profile -t cuda,nvtx --pytorch=functions-trace -f true -o "$R/pt_true" /bin/true; \
      echo "/bin/true: rc=$?"; ls -la "$R"/pt_*'
    step query_metrics 10 60 bash -c 'ncu --query-metrics --csv > "$R/metrics.csv"; \
      grep -icE "atom|_red" "$R/metrics.csv"; grep -iE "atom|_red|op_red|op_atom" "$R/metrics.csv" \
      | cut -c1-200 > "$R/metrics_atomic.txt"; gzip -f "$R/metrics.csv"'
    step plain_hist_index_add 20 60 python3 $P/histogram.py
    step plain_hist_bincount 20 60 python3 $P/histogram.py --method bincount
    step prof_histogram 60 150 prof histogram $P/histogram.py
    step tl_hist_bincount 20 60 timeline_pt hist_bincount $P/histogram.py --method bincount
    step ncu_hist_index_add 25 90 ncu_kernels_full hist_index_add_full 'indexFunc|scatter_gather' \
      $P/histogram.py --warmup 1 --iters 1
    step ncu_hist_bincount 25 90 ncu_kernels_full hist_bincount_full 'kernelHistogram|indexFunc' \
      $P/histogram.py --method bincount --warmup 1 --iters 1
    step plain_optim 25 90 python3 $P/optim_step.py
    step plain_optim_fused 25 90 python3 $P/optim_step.py --optimizer fused
    step prof_optim 80 200 prof optim_step $P/optim_step.py
    step tl_optim_fused 25 90 timeline_pt optim_fused $P/optim_step.py --optimizer fused
    step tl_optim_nsys 25 90 timeline optim_nsys_only $P/optim_step.py
    step plain_copy 20 60 python3 $P/copy_feed.py
    step plain_copy_prefetch 20 60 python3 $P/copy_feed.py --copies pinned_prefetch
    step prof_copy 60 150 prof copy_feed $P/copy_feed.py
    step tl_copy_prefetch 20 60 timeline_pt copy_prefetch $P/copy_feed.py --copies pinned_prefetch
    step tl_nvtx_phases 25 90 timeline_pt nvtx_phases $P/nvtx_phases.py
    step plain_nvtx_phases 20 60 python3 $P/nvtx_phases.py
    step plain_decode 25 90 python3 $P/decode.py --iters 4
    step tl_decode 25 90 timeline_pt decode $P/decode.py --iters 4
    step tl_decode_nsys 25 90 timeline decode_nsys_only $P/decode.py --iters 4
    step plain_decode_short 15 60 python3 $P/decode.py --warmup 1 --iters 2
    step ncu_unmatched_decode 40 150 ncu_unmatched $P/decode.py --warmup 1 --iters 2
    step ncu_unmatched_optim 40 150 ncu_unmatched $P/optim_step.py
    step plain_decode_static 60 180 python3 $P/decode.py --iters 4 --cache static
    step tl_decode_static 60 180 timeline_pt decode_static $P/decode.py --iters 4 --cache static
    ;;
  N)  # what part M left, and ncu's per-launch cost by kind of filter (issue 38)
    step probe_filter_decode 100 200 bash tools/probes/probe_ncu_filter_cost.sh decode \
      "$R/probe_filters" $P/decode.py --warmup 1 --iters 2
    step probe_filter_optim 80 200 bash tools/probes/probe_ncu_filter_cost.sh optim_step \
      "$R/probe_filters" $P/optim_step.py --warmup 2 --iters 3
    step plain_decode_static 60 200 python3 $P/decode.py --iters 4 --cache static
    step tl_decode_static 60 200 timeline_pt decode_static $P/decode.py --iters 4 --cache static
    ;;
  O)  # after issues 37-38
    step tl_decode_static 60 150 timeline decode_static $P/decode.py --iters 4 --cache static
    step prof_histogram 40 120 python3 -m nsdiag profile -v -o "$R/histogram" $P/histogram.py
    ;;
  L)  # two GPUs, a program nobody here wrote: stragglers as users meet them
    TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
    H="$P/ddp_hf_train.py --warmup 3 --iters 12"
    prof2() { local name=$1; shift; python3 -m nsdiag profile -v -o "$R/$name" -- $TR $H "$@" && python3 -m nsdiag explain "$R/$name"; }
    ranks2() {  # one nsys report per rank, per-iteration range names, NCCL's own ranges
      local name=$1; shift
      $TR --no-python "$NSYS" profile -t cuda,nvtx --cpuctxsw none -s none -f true \
        -o "$R/${name}_rank%q{RANK}" python3 $H --step-ranges "$@" &&
      for f in "$R/${name}"_rank*.nsys-rep; do
        "$NSYS" export --type sqlite -f true -o "${f%.nsys-rep}.sqlite" "$f" || return 1
      done
    }
    export TR H; export -f prof2 ranks2
    step plain_hf_balanced 40 120 $TR $H
    step plain_hf_slow_loader 40 120 $TR $H --slow-loader-rank 1
    step plain_hf_uneven 40 120 $TR $H --uneven-lengths
    step plain_hf_uneven_fixed 40 120 $TR $H --uneven-lengths --pad-to-max
    step prof_hf_balanced 90 240 prof2 hf_balanced
    step prof_hf_slow_loader 90 240 prof2 hf_slow_loader --slow-loader-rank 1
    step prof_hf_uneven 90 240 prof2 hf_uneven --uneven-lengths
    step prof_hf_uneven_fixed 90 240 prof2 hf_uneven_fixed --uneven-lengths --pad-to-max
    step ranks_hf_slow_loader 60 150 ranks2 hf_slow_loader --slow-loader-rank 1
    ;;
esac
ls -la "$OUT"; echo "total $(( $(date +%s) - T0 ))s"
