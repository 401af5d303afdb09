"""The session folder (collect/session_dir.py): never overwritten, named after the program."""

from __future__ import annotations

import sys
from pathlib import Path

from nsdiag.collect import (
    session_dir,
)
from nsdiag.collect.program import resolve_program


def test_session_folder_is_never_overwritten(tmp_path: Path) -> None:
    program = [sys.executable, "my train.py"]
    first = session_dir.create(tmp_path / "s", program)
    (first.root / "keep.txt").write_text("x")
    second = session_dir.create(tmp_path / "s", program)
    third_target = tmp_path / "s-2"
    (second.root / "f").write_text("y")
    third = session_dir.create(tmp_path / "s", program)
    assert (first.root, second.root, third.root) == (tmp_path / "s", third_target, tmp_path / "s-3")
    assert (
        (first.root / "keep.txt").read_text() == "x"
        and first.reports.is_dir()
        and first.logs.is_dir()
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert session_dir.create(empty, program).root == empty


def test_default_folder_name() -> None:
    from datetime import datetime

    when = datetime(2026, 11, 29, 13, 5, 9)
    assert session_dir.default_path(
        ["python3", "-u", "my train.py", "--epochs", "1"], when
    ) == Path("nsdiag-sessions/my-train-20261129-130509")
    assert session_dir.default_path(["./bin/app"], when).name == "app-20261129-130509"
    assert (
        session_dir.default_path(resolve_program([])[0], when).name
        == "reference-kernels-20261129-130509"
    )
