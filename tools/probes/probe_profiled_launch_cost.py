"""Issue 38: why each profiled launch of the decode loop costs ~5 s (tools/probes/
probe_decode_phase2.py: 37 launches at 4.5-15 s each, 23 passes, tiny elementwise kernels and
GEMVs alike). The plan's ncu argv (decode_phase2/ncu_args.json) with its skip set to 0, run in
variants until N launches are profiled (then the process group is ended), each output line
stamped, so the gaps between profiled launches compare the variants:
  base        the plan's sections and metrics (23 passes)
  no_sass     without the smsp__sass_* metrics (SASS-patched kernels)
  cache_none  base with --cache-control none (no cache flush before each pass)
  time_only   --metrics gpu__time_duration.sum alone (one pass, no sections)

    python3 tools/probes/probe_profiled_launch_cost.py OUTDIR N PROGRAM [ARGS...]   (on the H200)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

out = Path(sys.argv[1])
n = int(sys.argv[2])
program = sys.argv[3:]
out.mkdir(parents=True, exist_ok=True)
base = json.loads((Path(__file__).parent / "decode_phase2" / "ncu_args.json").read_text())
base[base.index("--launch-skip-before-match") + 1] = "0"


def replaced(argv: list[str], flag: str, value: str | None) -> list[str]:
    i = argv.index(flag)
    return [*argv[:i], *([flag, value] if value is not None else []), *argv[i + 2 :]]


metrics = base[base.index("--metrics") + 1]
no_sections = [a for i, a in enumerate(base) if a != "--section" and base[i - 1] != "--section"]
variants = {
    "base": base,
    "no_sass": replaced(
        base, "--metrics", ",".join(m for m in metrics.split(",") if "__sass_" not in m)
    ),
    "cache_none": [*base, "--cache-control", "none"],
    "time_only": replaced(no_sections, "--metrics", "gpu__time_duration.sum"),
}
for label, argv in variants.items():
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["stdbuf", "-oL", "-eL", "ncu", *argv, "-o", str(out / label), "python3", *program],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen = 0
    with open(out / f"{label}.log", "w") as f:
        for line in proc.stdout:  # type: ignore[union-attr]
            f.write(f"{time.monotonic() - t0:8.2f} {line[:300]}")
            f.flush()
            seen += "==PROF== Profiling" in line
            if seen > n or time.monotonic() - t0 > 90:
                break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"{label}: {seen} profiled in {time.monotonic() - t0:.1f} s", flush=True)
