#!/usr/bin/env bash
# Records tests/data/calib_extra on the H200: the calibration cases added to
# tests/calibration/calib.cu after tests/data/calib was recorded (uncoalesced-global-store,
# tail-effect-gemm), under ncu's full set, exported as tools/record_fixtures.sh does.
# Usage (repository root, on the GPU machine): bash tools/record_calib_extra.sh OUTDIR
set -u
OUT=${1:?outdir}
W=/tmp/nsdiag-record/calib_extra; mkdir -p "$W" "$OUT"
NCU=${NCU:-ncu}
CASES=(uncoalesced-global-store tail-effect-gemm)
step() { echo; echo "=== $(date +%T) $*"; }
step "build"
nvcc -O3 -arch=sm_90 -lineinfo -Xptxas -v -o "$W/calib" tests/calibration/calib.cu > "$W/build.log" 2>&1 \
  || { cat "$W/build.log"; exit 1; }
grep -A3 -E "(tail_effect_gemm|uncoalesced_global_store)_(bad|good)" "$W/build.log"
step "plain run (event-timed, no profiler)"
"$W/calib" "${CASES[@]}"
"$W/calib" "${CASES[@]}"
step "ncu --set full"
"$NCU" --set full --clock-control none --import-source no -f -k 'regex:_(bad|good)$' \
  -o "$W/calib_extra" "$W/calib" "${CASES[@]}"
step "exports"
"$NCU" -i "$W/calib_extra.ncu-rep" --csv --page raw --print-units base > "$OUT/raw.csv"
"$NCU" -i "$W/calib_extra.ncu-rep" --csv --page raw --print-units auto > "$OUT/raw_auto.csv"
"$NCU" -i "$W/calib_extra.ncu-rep" --csv --page details --print-details all --print-units base \
  > "$OUT/details.csv"
gzip -9 -f "$OUT"/*.csv
ls -la "$OUT"
