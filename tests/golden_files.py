"""Golden text files under tests/golden/: a test's output compared with the stored one, or
stored afresh where NSDIAG_REGEN_GOLDEN=1 (then review `git diff tests/golden` and commit)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
REGEN = "NSDIAG_REGEN_GOLDEN"


def check(relative: str, text: str) -> None:
    """Fail with a unified diff where `text` differs from tests/golden/<relative>."""
    path = GOLDEN / relative
    if os.environ.get(REGEN) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no golden file {path}: run the test with {REGEN}=1 to write it")
    stored = path.read_text(encoding="utf-8")
    if text != stored:
        diff = difflib.unified_diff(
            stored.splitlines(), text.splitlines(), f"golden/{relative}", "now", lineterm=""
        )
        pytest.fail(
            f"{relative} differs from its golden file ({REGEN}=1 rewrites it):\n" + "\n".join(diff)
        )
