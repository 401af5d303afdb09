#!/usr/bin/env bash
# Smoke test of `nsdiag profile` / `nsdiag doctor` on the H200 (repository root, .devdeps carried).
set -u
OUT=${1:?outdir}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p /tmp/dw; for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/dw; done
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
step() { echo; echo "=== $(date +%T) $*"; }
step "doctor"; python3 -m nsdiag doctor; echo "rc=$?"
step "probe: is the kernel name part of ncu's per-launch-config key?"
timeout 150 ncu --metrics gpu__time_duration.sum --kernel-name-base function -k 'regex:^(fused_kernel|copy_float4_kernel)$' \
  --filter-mode per-launch-config --launch-count 1 --profile-from-start off --clock-control none -f -o /tmp/probe \
  python3 reference_kernels/run_all.py --profile-region --copy-ceiling --variants fused 2>&1 | grep -E '==PROF==|ERROR'
step "profile the reference kernels"; /usr/bin/time -f "wall %e s" timeout 300 python3 -m nsdiag profile -o /tmp/ref; echo "rc=$?"
cat /tmp/ref/status.json; ls /tmp/ref /tmp/ref/reports
step "explain the session"; python3 -m nsdiag explain /tmp/ref --top-kernels 6 | head -60
python3 -m nsdiag explain /tmp/ref --json > "$OUT/ref-diagnosis.json"
step "no kernel launched"; timeout 120 python3 -m nsdiag profile -o /tmp/nok -- python3 -c 'print(1)'; echo "rc=$?"
step "Ctrl-C half-way"; timeout -s INT 25 python3 -m nsdiag profile -o /tmp/int benchmarks/workloads/tiny_transformer.py; echo "rc=$?"
sleep 2; pgrep -af 'ncu|nsys|tiny_transformer' || echo "no profiler or program left running"; head -c 600 /tmp/int/status.json
cd /tmp && tar czf "$OUT/ref-session.tgz" ref nok/status.json int/status.json 2>/dev/null; ls -la "$OUT"
