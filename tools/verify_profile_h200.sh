#!/usr/bin/env bash
# Smoke test of `nsdiag profile` / `nsdiag doctor` on the H200 (repository root, .devdeps carried).
set -u
OUT=${1:?outdir}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p /tmp/dw; for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/dw; done
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
step() { echo; echo "=== $(date +%T) $*"; }
step "doctor"; python3 -m nsdiag doctor; echo "rc=$?"
step "profile the reference kernels"; /usr/bin/time -f "wall %e s" timeout 300 python3 -m nsdiag profile -o /tmp/ref; echo "rc=$?"
cat /tmp/ref/status.json; ls /tmp/ref /tmp/ref/reports
step "explain the session"; python3 -m nsdiag explain /tmp/ref --top-kernels 6 | head -60
python3 -m nsdiag explain /tmp/ref --json > "$OUT/ref-diagnosis.json"
step "the program fails half-way (exit 3), session path with spaces"
timeout 200 python3 -m nsdiag profile -o "/tmp/out dir/fail" -- python3 -c \
  "import torch; torch.ones(4, device='cuda').sum().item(); raise SystemExit(3)"; echo "rc=$?"
head -c 400 "/tmp/out dir/fail/status.json"; echo; python3 -m nsdiag explain "/tmp/out dir/fail" | head -12
step "a script in a folder with spaces"
mkdir -p "/tmp/my project"; cp benchmarks/workloads/tiny_transformer.py "/tmp/my project/train step.py"
timeout 300 python3 -m nsdiag profile -o "/tmp/out dir/spaces" --coverage 0.5 --profile-from-start off \
  "/tmp/my project/train step.py" --layers 1 --foreach > /tmp/spaces.log 2>&1; echo "rc=$?"; tail -4 /tmp/spaces.log
step "an unprivileged user (counter access is for admins unless the driver allows it)"
chmod -R a+rX "$PWD" /tmp/dw; mkdir -p /tmp/perm && chmod 777 /tmp/perm
timeout 200 runuser -u nobody -- env HOME=/tmp/perm PYTHONPATH="$PWD" python3 -m nsdiag profile -o /tmp/perm/s -- \
  python3 -c "import torch; print(torch.ones(4, device='cuda').sum().item())"; echo "rc=$?"
step "no kernel launched"; timeout 120 python3 -m nsdiag profile -o /tmp/nok -- python3 -c 'print(1)'; echo "rc=$?"
step "Ctrl-C half-way"; timeout -s INT 25 python3 -m nsdiag profile -o /tmp/int benchmarks/workloads/tiny_transformer.py; echo "rc=$?"
# process names, not command lines: this script's own command line names ncu and nsys
sleep 2; pgrep -a -x 'ncu|nsys|python3|python3\.[0-9]+' || echo "no profiler or program left running"; head -c 600 /tmp/int/status.json
# a time limit's SIGTERM in phase 2 (after ~25 s) and in phase 1 (after 5 s): the folder explains itself
for t in 25 5; do
  step "SIGTERM after $t s"; timeout -s TERM $t python3 -m nsdiag profile -v -o /tmp/term$t \
    benchmarks/workloads/tiny_transformer.py; echo "rc=$?"
  sleep 2; pgrep -a -x 'ncu|nsys|python3|python3\.[0-9]+' || echo "no profiler or program left running"
  python3 -c "import json; s=json.load(open('/tmp/term$t/status.json')); print(s['interrupted'], s['missing'], s['breakdown'])"
  python3 -m nsdiag explain /tmp/term$t | head -5; echo "explain rc=${PIPESTATUS[0]}"
done
step "--budget 30 -v"; timeout 300 python3 -m nsdiag profile -v --budget 30 -o /tmp/budget \
  benchmarks/workloads/tiny_transformer.py | tail -15; echo "rc=${PIPESTATUS[0]}"
cd /tmp && tar czf "$OUT/ref-session.tgz" ref nok/status.json int/status.json term25/status.json term5/status.json budget/status.json 2>/dev/null; ls -la "$OUT"
