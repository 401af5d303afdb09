#!/usr/bin/env bash
# benchmarks/bench_profile.py on the H200, one stage per device call (repository root, .devdeps
# carried); what the summary needs goes to OUT (gzipped), the summary itself runs anywhere:
#   tools/bench_profile_h200.sh OUT targeted         plain run + `nsdiag profile` (targeted)
#   tools/bench_profile_h200.sh OUT full SKIP COUNT  `ncu --set full` on launches SKIP.. (COUNT 0: to the end)
#   tools/bench_profile_h200.sh OUT reference        `nsdiag profile` of the reference kernels, explained
# Workload: the 4-layer transformer step with PyTorch's default multi-tensor AdamW (301 launches);
# WORKLOAD_ARGS="--layers 8 --foreach" for another step (the full-set slices must use the same).
set -u
OUT=${1:?outdir}; PART=${2:?part}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p /tmp/dw; for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/dw; done
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
B=/tmp/nsdiag-bench; read -r -a WORKLOAD <<< "${WORKLOAD_ARGS:---layers 4 --foreach}"; WL=(-- "${WORKLOAD[@]}")
case $PART in
  targeted)
    python3 benchmarks/bench_profile.py targeted --out $B "${WL[@]}"
    # nsdiag never overwrites a session: a second run on a warm machine writes targeted-2, so take
    # the folder this run reports
    S=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['session'])" $B/targeted.json)
    python3 -m nsdiag explain "$S" --top-kernels 3 | head -40
    cp $B/targeted.json "$OUT/"
    (cd "$(dirname "$S")" && tar czf "$OUT/targeted-session.tgz" --exclude='*.ncu-rep' --exclude='*.nsys-rep' "$(basename "$S")");;
  full)
    python3 benchmarks/bench_profile.py full --out $B --skip "${3:?skip}" --count "${4:?count}" "${WL[@]}"
    name=full-$(printf %04d "$3")
    cp "$B/$name.json" "$OUT/"; gzip -c "$B/$name.raw.csv" > "$OUT/$name.raw.csv.gz"; tail -3 "$B/$name.log";;
  reference)
    /usr/bin/time -f "wall %e s" python3 -m nsdiag profile -o /tmp/ref > "$OUT/reference-profile.log" 2>&1
    tail -8 "$OUT/reference-profile.log"
    python3 -m nsdiag explain /tmp/ref --top-kernels 5 | head -50
    (cd /tmp && tar czf "$OUT/reference-session.tgz" --exclude='*.ncu-rep' --exclude='*.nsys-rep' ref);;
esac
