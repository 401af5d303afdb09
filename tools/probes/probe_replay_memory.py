"""Issue 38: does a replay pass cost more the more device memory the process holds? ncu's kernel
replay saves and restores device memory around each pass; a PyTorch program's caching allocator
keeps freed blocks reserved. A small program holds (or frees into the allocator's cache) HOLD GB,
then adds two 64 MB tensors 12 times; ncu, with the plan's sections and metrics
(decode_phase2/ncu_args.json), profiles 6 of the adds. Each output line is stamped, so the gaps
between profiled launches compare the variants:
  none       nothing held
  held       HOLD GB held in live tensors
  cached     HOLD GB allocated, then freed into the caching allocator (still reserved)
  uncached   as cached, with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (freed memory is returned)

    python3 tools/probes/probe_replay_memory.py OUTDIR HOLD_GB   (on the H200)
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

PROGRAM = r"""
import sys, torch
mode, gb = sys.argv[1], float(sys.argv[2])
keep = []
if mode in ("held", "cached", "uncached"):
    keep = [torch.empty(int(gb * 2**30) // 8, dtype=torch.float64, device="cuda")]
    if mode != "held":
        keep.clear()
torch.cuda.synchronize()
print("reserved GB", torch.cuda.memory_reserved() / 2**30, flush=True)
a = torch.ones(16 * 2**20, device="cuda"); b = torch.ones_like(a)
for _ in range(12):
    c = a + b
torch.cuda.synchronize()
"""

out = Path(sys.argv[1])
hold = sys.argv[2]
out.mkdir(parents=True, exist_ok=True)
argv = json.loads((Path(__file__).parent / "decode_phase2" / "ncu_args.json").read_text())
metrics = argv[argv.index("--metrics") + 1]
ncu = [
    "--section", "SpeedOfLight", "--section", "LaunchStats", "--section", "Occupancy",
    "--metrics", metrics, "--kernel-name-base", "demangled", "-k", "regex:CUDAFunctor_add",
    "--launch-skip", "2", "--launch-count", "6", "--clock-control", "none",
    "--import-source", "no", "-f",
]  # fmt: skip
(out / "program.py").write_text(PROGRAM)
summary = []
for mode in ("none", "held", "cached", "uncached"):
    env = dict(os.environ)
    if mode == "uncached":
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["stdbuf", "-oL", "-eL", "ncu", *ncu, "-o", str(out / mode), "python3",
         str(out / "program.py"), mode, hold],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    stamps = []
    with open(out / f"{mode}.log", "w") as f:
        for line in proc.stdout:  # type: ignore[union-attr]
            now = time.monotonic() - t0
            f.write(f"{now:8.2f} {line[:300]}")
            if re.search(r"==PROF== Profiling", line):
                stamps.append(now)
    proc.wait()
    gaps = [round(b - a, 2) for a, b in itertools.pairwise(stamps)]
    summary.append(f"{mode:9s} HOLD {hold} GB: {len(stamps)} profiled, gaps {gaps}, {now:.1f} s")
    print(summary[-1], flush=True)
(out / "summary.txt").write_text("\n".join(summary) + "\n")
