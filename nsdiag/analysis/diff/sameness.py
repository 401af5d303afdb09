"""Whether BEFORE and AFTER are one program: a diff of two unrelated programs matches their
kernels as one regrouping and reports a change of -99% that means nothing (issue 27).

Two signs, either one enough for a warning:
- the profiled command lines (sessions `nsdiag profile` wrote keep them) run different scripts;
- few kernels in common: under MIN_SAME of each side's kernel time runs the same kernels (same
  name), and more than MOST of each side's is regrouped, gone or new. A fix that fuses a whole
  program into one kernel (torch.compile of elementwise.py) is a fusion, not a regrouping, and
  passes; two transformers on cuBLAS (their GEMMs matched by role) pass too: the command lines
  are the only sign there.

Measured on the H200 recordings: related pairs (the fixes under tests/data/programs and
third_party) have 10-94% of their time in the same kernels or fused; unrelated ones (ViT
against Llama, ResNet-50 inference against ResNet-18 training, elementwise.py against the GPT)
0-10%, with 69-100% regrouped, gone or new.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from nsdiag.analysis.diff.kernels import KernelMatch
from nsdiag.analysis.diff.side import Side

MIN_SAME = 0.15  # of a side's kernel time, in kernels of the same name on the other side
MOST = 0.5  # of a side's kernel time, regrouped, gone or new
SAME = ("signature", "name")
UNPAIRED = ("regrouped", "split", "replaced", "gone", "new")


def program_warnings(before: Side, after: Side, matches: Sequence[KernelMatch]) -> tuple[str, ...]:
    out = []
    scripts = _script(before), _script(after)
    if None not in scripts and scripts[0] != scripts[1]:
        out.append(
            f"BEFORE ran {scripts[0]} and AFTER {scripts[1]}: not the same program, so the "
            "kernel matches and the change say little"
        )
    same = _shares(matches, SAME)
    rest = _shares(matches, UNPAIRED)
    if max(same) < MIN_SAME and min(rest) > MOST:
        out.append(
            f"the two sides have few kernels in common ({same[0]:.0%} of BEFORE's kernel time "
            f"and {same[1]:.0%} of AFTER's run the same kernels; {rest[0]:.0%} and "
            f"{rest[1]:.0%} are regrouped, gone or new): are they recordings of one program?"
        )
    return tuple(out)


def _shares(matches: Sequence[KernelMatch], methods: tuple[str, ...]) -> tuple[float, float]:
    """The share of each side's kernel time in matches made by `methods`."""
    out = []
    for side in ("before", "after"):
        times = [(m.method, m.before_ns if side == "before" else m.after_ns) for m in matches]
        total = sum(t for _, t in times)
        out.append(sum(t for m, t in times if m in methods) / total if total > 0 else 0.0)
    return out[0], out[1]


def _script(side: Side) -> str | None:
    return script_of(side.command)


def script_of(command: Sequence[str] | str | None) -> str | None:
    """The program a profiled command line ran: the script or `-m` module after the
    interpreter (the executable itself where there is none)."""
    if not command:
        return None
    words = command.split() if isinstance(command, str) else list(command)
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            return words[i + 1]
        name = PurePath(word).name
        if i == 0 and name.startswith("python"):
            continue
        if not word.startswith("-"):
            return name
    return None
