"""Kernel-name parsing speed: nsdiag.model.kernel_facts.parse_kernel_name on every recorded name
(tests/data/kernel_names.txt, the cache emptied each round) and on names of 100,000+ characters,
against a baseline measured in the same run: one pass of a simple tokenising regex over the same
names (what any parse costs at least).

    python benchmarks/bench_kernel_names.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_kernel_facts import HUGE_NAMES, NAMES  # noqa: E402

from nsdiag.model import kernel_facts  # noqa: E402

_TOKENS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _timed(names: Sequence[str], parse: Callable[[str], object], repeat: int) -> float:
    """Median seconds per name over `repeat` rounds."""
    rounds = []
    for _ in range(repeat):
        kernel_facts._parse.cache_clear()
        start = time.perf_counter()
        for name in names:
            parse(name)
        rounds.append((time.perf_counter() - start) / len(names))
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for label, names in (("recorded names", NAMES), ("huge names", HUGE_NAMES)):
        parsed = _timed(names, kernel_facts.parse_kernel_name, args.repeat)
        baseline = _timed(names, _TOKENS.findall, args.repeat)
        print(
            f"{label} ({len(names)}): parse {parsed * 1e6:.1f} us a name, tokenising regex "
            f"{baseline * 1e6:.1f} us: {parsed / baseline:.1f}x"
        )


if __name__ == "__main__":
    main()
