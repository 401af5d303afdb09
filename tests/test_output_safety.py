"""Writing outputs never damages what was at the path: `report -o` and `load -o` refuse what is
not a regular file (or folder), never replace a symbolic link, keep a replaced file's mode (a new
one gets the umask's), stay atomic, and say what went wrong in one line with exit code 2."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import nsdiag
from nsdiag.errors import OutputError
from nsdiag.model import store
from nsdiag.render.output import write_report

ROOT = Path(__file__).resolve().parents[1]
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def nsdiag_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "nsdiag", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsdiag: error: "), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ------------------------------------------------------------------ write_report (report -o)


def test_new_report_gets_the_umask_mode(tmp_path: Path) -> None:
    """Was 0600 for every report (the temporary file's mode)."""
    old = os.umask(0o022)
    try:
        write_report(tmp_path / "r.html", "<p>x</p>")
        assert _mode(tmp_path / "r.html") == 0o644
        os.umask(0o077)
        write_report(tmp_path / "private.html", "<p>x</p>")
        assert _mode(tmp_path / "private.html") == 0o600
    finally:
        os.umask(old)


def test_replaced_report_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    target.write_text("old")
    target.chmod(0o664)
    write_report(target, "new")
    assert target.read_text() == "new" and _mode(target) == 0o664
    target.chmod(0o640)
    write_report(target, "newer")
    assert target.read_text() == "newer" and _mode(target) == 0o640


def test_symlink_is_refused_and_left_alone(tmp_path: Path) -> None:
    real = tmp_path / "real.html"
    real.write_text("mine")
    link = tmp_path / "link.html"
    link.symlink_to(real)
    with pytest.raises(OutputError, match="symbolic link"):
        write_report(link, "new")
    assert link.is_symlink() and real.read_text() == "mine"
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "nowhere.html")
    with pytest.raises(OutputError, match="symbolic link"):
        write_report(dangling, "new")
    assert dangling.is_symlink() and not (tmp_path / "nowhere.html").exists()


def test_fifo_and_folder_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="named pipe"):
        write_report(fifo, "x")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    with pytest.raises(OutputError, match="folder"):
        write_report(tmp_path, "x")


def test_failed_write_leaves_the_old_report_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "r.html"
    target.write_text("old report")

    def full_disk(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OutputError, match="No space left"):
        write_report(target, "new report")
    assert target.read_text() == "old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


def test_permission_denied_is_an_output_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root cannot be refused a folder, the refusal is simulated where the file is created."""

    def denied(*_: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("nsdiag.safe_write.os.open", denied)
    with pytest.raises(OutputError, match=r"Permission denied.*permissions"):
        write_report(tmp_path / "r.html", "x")
    assert list(tmp_path.iterdir()) == []


def test_read_only_report_is_not_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report one may not write stays (as root os.access says yes: simulated then)."""
    target = tmp_path / "keep.html"
    target.write_text("mine")
    target.chmod(0o444)
    if IS_ROOT:
        monkeypatch.setattr("nsdiag.safe_write.os.access", lambda *_: False)
    with pytest.raises(OutputError, match="read-only"):
        write_report(target, "new")
    assert target.read_text() == "mine"


# ------------------------------------------------------------------ as a user runs it


@pytest.fixture(scope="module")
def small_input() -> Path:
    return ROOT / "tests/data/calib_small/raw.csv.gz"


def test_report_onto_a_device_node_is_refused(small_input: Path) -> None:
    """Was: /dev/null replaced by a regular file (as root) or a traceback."""
    before = os.lstat("/dev/null")
    result = nsdiag_cli("report", str(small_input), "-o", "/dev/null", "--format", "html")
    assert_one_line_error(result, "/dev/null", "device")
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_report_onto_a_symlink_or_fifo_is_refused(tmp_path: Path, small_input: Path) -> None:
    real = tmp_path / "keep.html"
    real.write_text("mine")
    (tmp_path / "link.html").symlink_to(real)
    result = nsdiag_cli("report", str(small_input), "-o", str(tmp_path / "link.html"))
    assert_one_line_error(result, "link.html", "symbolic link")
    assert (tmp_path / "link.html").is_symlink() and real.read_text() == "mine"
    os.mkfifo(tmp_path / "pipe.md")
    result = nsdiag_cli("report", str(small_input), "-o", str(tmp_path / "pipe.md"))
    assert_one_line_error(result, "pipe.md", "named pipe")


def test_report_keeps_mode_end_to_end(tmp_path: Path, small_input: Path) -> None:
    target = tmp_path / "shared.json"
    target.write_text("{}")
    target.chmod(0o644)
    result = nsdiag_cli("report", str(small_input), "-o", str(target))
    assert result.returncode == 0, result.stderr
    assert _mode(target) == 0o644 and target.read_text().startswith("{")


def test_report_into_a_missing_folder_or_through_a_file(tmp_path: Path, small_input: Path) -> None:
    result = nsdiag_cli("report", str(small_input), "-o", str(tmp_path / "no" / "r.html"))
    assert_one_line_error(result, "does not exist")
    (tmp_path / "file").write_text("x")
    result = nsdiag_cli("report", str(small_input), "-o", str(tmp_path / "file" / "r.html"))
    assert_one_line_error(result, "r.html")
    assert (tmp_path / "file").read_text() == "x"


# ------------------------------------------------------------------ store.save (load -o)


def test_load_onto_an_existing_file_is_refused(tmp_path: Path, small_input: Path) -> None:
    """Was a FileExistsError traceback."""
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    result = nsdiag_cli("load", str(small_input), "-o", str(target))
    assert_one_line_error(result, "notes.txt", "not a folder")
    assert target.read_text() == "mine"


def test_load_onto_an_existing_session_is_refused(tmp_path: Path, small_input: Path) -> None:
    target = tmp_path / "s"
    assert nsdiag_cli("load", str(small_input), "-o", str(target)).returncode == 0
    manifest = (target / "session.json").read_bytes()
    other = ROOT / "tests/data/reference/raw.csv.gz"
    result = nsdiag_cli("load", str(other), "-o", str(target))
    assert_one_line_error(result, "already holds a session")
    assert (target / "session.json").read_bytes() == manifest


def test_load_into_a_read_only_place(tmp_path: Path, small_input: Path) -> None:
    """/proc refuses new folders even to root."""
    result = nsdiag_cli("load", str(small_input), "-o", "/proc/nsdiag-session")
    assert_one_line_error(result, "/proc/nsdiag-session")


@pytest.mark.skipif(IS_ROOT, reason="root writes into read-only folders")
def test_load_into_a_read_only_folder(tmp_path: Path, small_input: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = nsdiag_cli("load", str(small_input), "-o", str(folder / "s"))
        assert_one_line_error(result, "Permission denied")
    finally:
        folder.chmod(0o755)


def test_save_never_writes_through_a_symlinked_table(tmp_path: Path, small_input: Path) -> None:
    """A table file that is a symbolic link is refused, and its target is left alone."""
    target = tmp_path / "s"
    (target / "tables").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    (target / "tables" / "kernels.csv.gz").symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link"):
        store.save(nsdiag.load(small_input), target)
    assert victim.read_text() == "mine"
    assert not (target / "session.json").exists()


def test_saved_session_files_get_the_umask_mode(tmp_path: Path, small_input: Path) -> None:
    old = os.umask(0o022)
    try:
        store.save(nsdiag.load(small_input), tmp_path / "s")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "s" / "session.json") == 0o644
    assert _mode(tmp_path / "s" / "tables" / "kernels.csv.gz") == 0o644
