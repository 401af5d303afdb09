#!/usr/bin/env bash
# Interrupts, --budget and the time breakdown of `nsdiag profile` on the H200 (repository root,
# .devdeps carried; OUT set by the device tool): Ctrl-C and SIGTERM in phase 2, SIGTERM in phase
# 1, a budget, then the plain run and a default profile of the same workload with --verbose.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p /tmp/dw; for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/dw; done
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
step() { echo; echo "=== $(date +%T) $*"; }
step "Ctrl-C after 25 s"; timeout -s INT 25 python3 -m nsdiag profile -o /tmp/int benchmarks/workloads/tiny_transformer.py > /tmp/int.log 2>&1; echo "rc=$?"; tail -3 /tmp/int.log
sleep 2; pgrep -a -x 'ncu|nsys|python3|python3\.[0-9]+' || echo "no profiler or program left running"
python3 -c "import json; s=json.load(open('/tmp/int/status.json')); print(s.get('interrupted'), s.get('missing'))"; python3 -m nsdiag explain /tmp/int | head -4; echo "explain rc=${PIPESTATUS[0]}"
for t in 25 5; do
  step "SIGTERM after $t s"; timeout -s TERM $t python3 -m nsdiag profile -v -o /tmp/term$t benchmarks/workloads/tiny_transformer.py > /tmp/term$t.log 2>&1; echo "rc=$?"; tail -3 /tmp/term$t.log
  sleep 2; pgrep -a -x 'ncu|nsys|python3|python3\.[0-9]+' || echo "no profiler or program left running"
  ls /tmp/term$t; python3 -c "import json; s=json.load(open('/tmp/term$t/status.json')); print(s.get('interrupted'), s.get('missing'), json.dumps(s.get('breakdown'))[:600])"
  python3 -m nsdiag explain /tmp/term$t 2>&1 | head -4; echo "explain rc=${PIPESTATUS[0]}"
done
step "--budget 20 -v"; /usr/bin/time -f "wall %e s" timeout 200 python3 -m nsdiag profile -v --budget 20 -o /tmp/budget benchmarks/workloads/tiny_transformer.py 2>&1 | grep -v "━\|%|" | tail -25; echo "rc=${PIPESTATUS[0]}"
step "plain"; /usr/bin/time -f "wall %e s" python3 benchmarks/workloads/tiny_transformer.py 2>&1 | tail -2
step "full default profile -v"; /usr/bin/time -f "wall %e s" timeout 200 python3 -m nsdiag profile -v -o /tmp/default benchmarks/workloads/tiny_transformer.py 2>&1 | grep -v "━\|%|" | tail -25
cd /tmp && tar czf "$OUT/int.tgz" int/status.json term25/status.json term5/status.json budget/status.json default/status.json *.log 2>/dev/null; ls -la $OUT
