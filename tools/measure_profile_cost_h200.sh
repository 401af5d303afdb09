#!/usr/bin/env bash
# What `nsdiag profile` costs against the plain run (issues 26 and 38), on the H200 (repository
# root, .devdeps carried): benchmarks/bench_profile_cost.py run on the programs named, then the
# sessions and logs packed into $OUT without the binary reports.
#   tools/measure_profile_cost_h200.sh NAME...   (names of bench_profile_cost.PROGRAMS)
# The call ends within LIMIT seconds (default 560, under the device's 600 s a command): a program
# is not started with too little time left, and one still running then is stopped with SIGTERM
# (its partial session kept), so what was measured always comes back.
set -u
OUT=${OUT:?set by the device tool}
LIMIT=${LIMIT:-560}
start=$SECONDS
. tools/device_env.sh
export PATH=$(dirname "$NSYS"):$PATH  # nsdiag finds this nsys (the one the notes say works)
R=/tmp/cost; mkdir -p "$R"
echo "== $(nvidia-smi -L) | $(python3 -c 'import torch; print(torch.__version__)') | $(ncu --version | tail -1)"
pack() {  # status, breakdown and logs, without reports and tables (a decode loop's tables alone
  # packed to 30 MB on 2026-12-01, over the device's 16 MB a file: nothing came back), in parts
  rm -f "$OUT"/cost.tgz.part-*
  tar czf - -C "$R" --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.qdstrm' \
    --exclude='*.sqlite' --exclude='*.csv' --exclude='./*/tables' --exclude='./*/reports' . |
    split -b 15M - "$OUT/cost.tgz.part-"
}
warm=()
for name in "$@"; do  # packed after each, so a call cut short returns what was done
  left=$((LIMIT - (SECONDS - start) - 15))  # 15 s for packing and the summary
  python3 benchmarks/bench_profile_cost.py run --out "$R" --only "$name" --within "$left" "${warm[@]}"
  warm=(--no-warm-up)  # the imports are warm after the first program
  pack
done
python3 benchmarks/bench_profile_cost.py summary --out "$R" | tee "$R/summary.txt"
pack
ls -la "$OUT"
