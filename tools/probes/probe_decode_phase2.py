"""Issue 38: where phase 2's 225 s went on the decode loop (35 launches profiled, 23 passes each,
27,275 launches skipped). The plan's own ncu argv (decode_phase2/ncu_args.json, from the
session's 2-targeted-1.log) is run three ways, each cut at LIMIT s, every output line stamped
with the seconds since its start, so the gap before the first profiled launch and between
profiled launches shows which part costs:
  launch       ncu starts the program (as a later targeted run does)
  no_sass      the same without the smsp__sass_* metrics (SASS-patched: instrumented kernels)
  attach       ncu --mode launch, then --mode attach with the argv (as the first run does)

    python3 tools/probes/probe_decode_phase2.py OUTDIR LIMIT PROGRAM [ARGS...]   (on the H200)

Run once on 2026-12-02 (tests/data/idioms/logs/probe_phase2/plan_late_launch.log): only its first
variant is clean. Ending ncu at LIMIT left its program running (and profiling) beside the next
variants, so no_sass and attach ran on a shared GPU; probe_profiled_launch_cost.py ends the
whole process group instead.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

out = Path(sys.argv[1])
limit = float(sys.argv[2])
program = sys.argv[3:]
out.mkdir(parents=True, exist_ok=True)
args = json.loads((Path(__file__).parent / "decode_phase2" / "ncu_args.json").read_text())


def without_sass(argv: list[str]) -> list[str]:
    i = argv.index("--metrics")
    kept = [m for m in argv[i + 1].split(",") if "__sass_" not in m]
    return [*argv[: i + 1], ",".join(kept), *argv[i + 2 :]]


def stamped(label: str, argv: list[str], t0: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        ["stdbuf", "-oL", "-eL", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )

    def pump() -> None:
        with open(out / f"{label}.log", "a") as f:
            for line in proc.stdout:  # type: ignore[union-attr]
                f.write(f"{time.monotonic() - t0:8.2f} {line[:400]}")
                f.flush()

    threading.Thread(target=pump, daemon=True).start()
    return proc


def finish(procs: list[subprocess.Popen[str]], t0: float, label: str) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        procs[-1].wait(timeout=max(1.0, limit - (time.monotonic() - t0)))
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
    time.sleep(1)
    print(f"{label}: {time.monotonic() - t0:.1f} s", flush=True)


for label in ("launch", "no_sass"):
    argv = args if label == "launch" else without_sass(args)
    t0 = time.monotonic()
    p = stamped(label, ["ncu", *argv, "-o", str(out / label), "python3", *program], t0)
    finish([p], t0, label)

t0 = time.monotonic()
held = stamped("attach_target", ["ncu", "--mode", "launch", "python3", *program], t0)
time.sleep(20)  # the program's imports, up to its first CUDA call
with open(out / "attach.log", "a") as f:
    f.write(f"{time.monotonic() - t0:8.2f} attaching\n")
att = stamped(
    "attach",
    ["ncu", "--mode", "attach", "--hostname", "127.0.0.1", *args, "-o", str(out / "attach")],
    t0,
)
finish([held, att], t0, "attach")
