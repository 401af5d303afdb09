#!/usr/bin/env bash
# What `nsdiag profile` costs against the plain run (issue 26), on the H200 (repository root,
# .devdeps carried): benchmarks/bench_profile_cost.py run on the programs named, then the
# sessions and logs packed into $OUT without the binary reports.
#   tools/measure_profile_cost_h200.sh NAME...   (names of bench_profile_cost.PROGRAMS)
set -u
OUT=${OUT:?set by the device tool}
. tools/device_env.sh
export PATH=$(dirname "$NSYS"):$PATH  # nsdiag finds this nsys (the one the notes say works)
R=/tmp/cost; mkdir -p "$R"
echo "== $(nvidia-smi -L) | $(python3 -c 'import torch; print(torch.__version__)') | $(ncu --version | tail -1)"
for name in "$@"; do  # packed after each, so a call cut short returns what was done
  python3 benchmarks/bench_profile_cost.py run --out "$R" --only "$name"
  tar czf "$OUT/cost.tgz" -C "$R" --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.qdstrm' --exclude='*.sqlite' --exclude='*.csv' .
done
python3 benchmarks/bench_profile_cost.py summary --out "$R"
ls -la "$OUT"
