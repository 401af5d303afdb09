#!/usr/bin/env bash
# Where ncu's time goes on launch-heavy programs (issue 38): the same short run of a program plain
# and under ncu with filters that profile nothing, so each run's extra time is what ncu costs for
# the launches it intercepts and does not profile, by kind of filter:
#   trivial   -k regex:^nothing$ (a short regex that matches no name)
#   mangled   the plan's filter: --kernel-name-base mangled -k regex:^(24 mangled names)$,
#             per-launch-config, --launch-skip-before-match past the run's end (nothing profiled)
#   function  the same kernels by function name (--kernel-name-base function, 13-20 short names)
#   none      no -k at all, --launch-skip past the run's end
# Names: tools/probes/filter_names/NAME.{mangled,function}.txt, the filters nsdiag's planner makes
# from this session's phase-1 timelines of decode.py and optim_step.py on the H200.
#   tools/probes/probe_ncu_filter_cost.sh NAME OUT ARGS...   (NAME: decode | optim_step)
set -u
name=$1 out=$2; shift 2
mkdir -p "$out"
NEVER=1000000000
run() {  # run LABEL CMD...: wall time and the program's per-iteration times
  local label=$1; shift
  local t0; t0=$(date +%s%N)
  "$@" > "$out/$name.$label.log" 2>&1
  local rc=$?
  echo "$name $label rc=$rc wall=$(( ($(date +%s%N) - t0) / 1000000 )) ms | $(grep -h NSDIAG_RESULT "$out/$name.$label.log" | cut -c1-200)"
}
ncu_base=(ncu --metrics gpu__time_duration.sum --clock-control none -f)
run plain python3 "$@"
run trivial "${ncu_base[@]}" -o "$out/$name.trivial" -k "regex:^nsdiag_matches_nothing$" python3 "$@"
run mangled "${ncu_base[@]}" -o "$out/$name.mangled" --kernel-name-base mangled \
  -k "$(cat tools/probes/filter_names/$name.mangled.txt)" --filter-mode per-launch-config \
  --launch-skip-before-match $NEVER --launch-count 1 python3 "$@"
run function "${ncu_base[@]}" -o "$out/$name.function" --kernel-name-base function \
  -k "$(cat tools/probes/filter_names/$name.function.txt)" --filter-mode per-launch-config \
  --launch-skip-before-match $NEVER --launch-count 1 python3 "$@"
run none "${ncu_base[@]}" -o "$out/$name.none" --launch-skip $NEVER --launch-count 1 python3 "$@"
