"""Issue 38: which of the plan's metrics cost the replay passes (about 20 ms each on the H200,
tools/probes/probe_replay_memory.py: 0.48 s a launch for a 64 MB add with the plan's 23 passes).
The plan's sections with one group of its metrics (decode_phase2/ncu_args.json) at a time, or
all but one group; ncu profiles 3 adds of two 64 MB tensors each; the passes and the seconds per
profiled launch of each variant go to OUTDIR/summary.txt.

    python3 tools/probes/probe_metric_passes.py OUTDIR   (on the H200)

With a second argument `sections`, the variants are instead which sections go with the metrics
(SpeedOfLight alone costs 10 of the 23 passes): LaunchStats + Occupancy with all the metrics, with
all but the per-instruction tensor paths, alone, and all the metrics without any section.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

PROGRAM = r"""
import torch
a = torch.ones(16 * 2**20, device="cuda"); b = torch.ones_like(a)
for _ in range(8):
    c = a + b
torch.cuda.synchronize()
"""

GROUPS = {  # a metric belongs to the first group whose pattern it matches
    "tensor_paths": r"^sm__ops_path_tensor",
    "sass": r"__sass_",
    "stalls": r"^smsp__average_warps_issue_stalled",
    "pipes": r"^sm__(pipe|inst_executed_pipe)",
    "l1_shared_local": r"^l1tex__",
    "l2_atomics": r"^lts__",
    "dram": r"^dram__",
    "rest": r".",
}

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
argv = json.loads((Path(__file__).parent / "decode_phase2" / "ncu_args.json").read_text())
metrics = argv[argv.index("--metrics") + 1].split(",")
grouped: dict[str, list[str]] = {g: [] for g in GROUPS}
for m in metrics:
    grouped[next(g for g, p in GROUPS.items() if re.search(p, m))].append(m)
variants: dict[str, list[str]] = {"sections_only": [], "all": metrics}
variants |= {f"only_{g}": ms for g, ms in grouped.items()}
variants |= {f"all_but_{g}": [m for m in metrics if m not in ms] for g, ms in grouped.items()}
SECTIONS = ["SpeedOfLight", "LaunchStats", "Occupancy"]
if sys.argv[2:] == ["sections"]:
    SECTIONS = ["LaunchStats", "Occupancy"]
    per_instruction = [m for m in grouped["tensor_paths"] if re.search(r"_op_[hi][gm]ma_", m)]
    variants = {
        "launch_occupancy_only": [],
        "launch_occupancy_all": metrics,
        "launch_occupancy_but_op_paths": [m for m in metrics if m not in per_instruction],
    }
(out / "program.py").write_text(PROGRAM)
(out / "groups.json").write_text(json.dumps(grouped, indent=1))
summary = []
if sys.argv[2:] == ["sections"]:  # and no section at all
    variants["no_section_all"] = metrics
for label, chosen in variants.items():
    ncu = [a for s in SECTIONS for a in ("--section", s)] if label != "no_section_all" else []
    if chosen:
        ncu += ["--metrics", ",".join(chosen)]
    ncu += ["--kernel-name-base", "demangled", "-k", "regex:CUDAFunctor_add"]
    ncu += ["--launch-skip", "1", "--launch-count", "4", "--clock-control", "none"]
    ncu += ["--import-source", "no", "-f"]
    t0 = time.monotonic()
    proc = subprocess.run(
        ["stdbuf", "-oL", "ncu", *ncu, "-o", str(out / label), "python3", str(out / "program.py")],
        capture_output=True, text=True,
    )  # fmt: skip
    wall = time.monotonic() - t0
    text = proc.stdout + proc.stderr
    (out / f"{label}.log").write_text(text)
    passes = re.findall(r"(\d+) pass", text)
    found = sorted(set(passes))
    summary.append(f"{label:22s} {len(chosen):4d} metrics, passes {found}, {wall:.1f} s")
    print(summary[-1], flush=True)
(out / "summary.txt").write_text("\n".join(summary) + "\n")
