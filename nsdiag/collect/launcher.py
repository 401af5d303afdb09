"""ncu on one rank of a distributed run started by a launcher.

Attaching ncu to the launcher (`--target-processes all --devices D`) hung on the H200 pair: under
the rules' multi-pass metrics no kernel was profiled in 150 s (tools/check_multi_gpu.sh, issue
15). Running ncu in the chosen rank's process only, with the other ranks plain, completed
(tools/record_real_programs.sh E, `ncu_rank0`): the launcher starts `rank_exec` as each worker,
and it execs ncu around the worker command on the chosen rank and the worker command alone on
the others. The peers wait in NCCL while that rank's kernels replay. torchrun (and
`python -m torch.distributed.run`) is rewritten so; other launchers keep the attach form.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# torchrun's options that take no value; every other option takes one (or is --opt=value).
_FLAGS = frozenset(
    {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
     "--virtual-local-rank", "--virtual_local_rank"}
)  # fmt: skip
_NO_PYTHON = frozenset({"--no-python", "--no_python"})
_MODULE = frozenset({"-m", "--module"})
_DROPPED = frozenset({"-m", "--module", "--run-path", "--run_path"})


def _launcher_head(program: Sequence[str]) -> int:
    """How many leading words start torchrun: 1 (`torchrun`), 3 (`python -m torch.distributed.run`),
    0 (not torchrun)."""
    if program and os.path.basename(program[0]) == "torchrun":
        return 1
    if len(program) >= 3 and program[1] == "-m" and program[2] in TORCHRUN_MODULES:
        return 3
    return 0


def split_torchrun(program: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """(the launcher with its options and --no-python, the command each worker runs), or None
    when `program` is not torchrun."""
    head = _launcher_head(program)
    if not head:
        return None
    python = program[0] if head == 3 else sys.executable
    options: list[str] = []
    i = head
    while i < len(program) and program[i].startswith("-"):
        word = program[i]
        options.append(word)
        if word not in _FLAGS and "=" not in word and i + 1 < len(program):
            options.append(program[i + 1])
            i += 1
        i += 1
    if i >= len(program):
        return None  # no script: let torchrun say so
    script, args = program[i], list(program[i + 1 :])
    if _NO_PYTHON & set(options):
        worker = [script, *args]
    elif _MODULE & set(options):
        worker = [python, "-m", script, *args]
    else:
        worker = [python, script, *args]
    kept = [o for o in options if o not in _DROPPED and o not in _NO_PYTHON]
    return [*program[:head], *kept, "--no-python"], worker


def ncu_on_one_rank(ncu_argv: Sequence[str], program: Sequence[str], rank: int) -> list[str] | None:
    """The launcher's argv with `ncu_argv` (ending before the program) around rank `rank`'s
    worker only; None when the launcher is not one this module rewrites."""
    split = split_torchrun(program)
    if split is None:
        return None
    launcher, worker = split
    wrapper = [
        sys.executable,
        "-m",
        "nsdiag.collect.rank_exec",
        str(rank),
        json.dumps(list(ncu_argv)),
    ]
    return [*launcher, *wrapper, "--", *worker]
