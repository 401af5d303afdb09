"""`nsdiag profile` stopped by SIGTERM or SIGINT in phase 1 or phase 2 (fake ncu and nsys that
hang), --budget end to end, and --verbose's breakdown: the folder always explains itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsdiag.cli import main
from nsdiag.cli.signals import interrupts_as_keyboard
from nsdiag.collect import cost
from nsdiag.errors import SignalInterrupt

ROOT = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _interrupt(
    fakes: dict[str, Path], tmp_path: Path, sig: signal.Signals, hang: str
) -> tuple[subprocess.CompletedProcess[str], Path, list[int]]:
    """Run `nsdiag profile` with the fake tool `hang` (FAKE_NSYS or FAKE_TARGETED) hanging, send
    `sig` once it hangs; the finished process, the session folder, the children it had."""
    pids, root = tmp_path / "pids", tmp_path / "session"
    env = {**os.environ, hang: "hang", "FAKE_PIDS": str(pids)}
    argv = [sys.executable, "-m", "nsdiag", "profile", "-o", str(root)]
    argv += ["--ncu", str(fakes["ncu"]), "--nsys", str(fakes["nsys"]), str(fakes["script"])]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids.exists(), proc.communicate(timeout=5)
    time.sleep(0.3)  # every fake child started
    children = [int(p) for p in pids.read_text().split() if _alive(int(p))]
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    time.sleep(0.2)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), root, children


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_in_phase_2_keeps_a_timeline_only_session(
    fakes: dict[str, Path], tmp_path: Path, sig: signal.Signals
) -> None:
    done, root, children = _interrupt(fakes, tmp_path, sig, "FAKE_TARGETED")
    assert done.returncode == 128 + sig.value, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"interrupted by {sig.name} during phase 2 (ncu), running 2-targeted-1" in done.stderr
    assert "the partial session is kept in" in done.stderr
    assert children and not any(_alive(p) for p in children)  # ncu's process group stopped
    assert (root / "session.json").is_file()
    status = json.loads((root / "status.json").read_text())
    assert status["complete"] is False
    assert status["interrupted"] == {"signal": sig.name, "phase": "phase2", "step": "2-targeted-1"}
    assert status["error"].startswith(f"interrupted by {sig.name} during phase 2")
    assert any(m.startswith("kernel metrics (interrupted by") for m in status["missing"])
    assert any("planned kernel signature(s)" in m for m in status["missing"])
    stopped = status["steps"][-1]
    assert stopped["name"] == "2-targeted-1" and stopped["interrupted"] == sig.name
    assert status["breakdown"]["ncu_runs"][-1]["ok"] is False
    assert status["estimate"]["total_s"] > 0  # told before phase 2 started
    explained = CliRunner().invoke(main, ["explain", str(root)])
    assert explained.exit_code == 0, explained.output
    words = " ".join(explained.output.split())  # the warning wraps at the text's width
    assert "warning: the profile in" in words and " is incomplete " in words, explained.output


def test_sigterm_in_phase_1_says_nothing_was_recorded(
    fakes: dict[str, Path], tmp_path: Path
) -> None:
    done, root, children = _interrupt(fakes, tmp_path, signal.SIGTERM, "FAKE_NSYS")
    assert done.returncode == 143 and done.stderr.count("\n") == 1, done.stderr
    assert "interrupted by SIGTERM during phase 1 (timeline)" in done.stderr
    assert "nothing was recorded" in done.stderr
    assert children and not any(_alive(p) for p in children)
    # phase 2's program, started beside phase 1 and held by ncu, is ended too
    waiting = list(fakes["calls"].parent.glob("fake-ncu-*.waiting"))
    assert waiting and not any(_alive(int(w.read_text())) for w in waiting)
    assert not (root / "session.json").exists()  # no timeline: nothing to tabulate
    status = json.loads((root / "status.json").read_text())
    assert (
        status["interrupted"]["signal"] == "SIGTERM" and status["interrupted"]["phase"] == "phase1"
    )
    assert any(m.startswith("timeline (interrupted by SIGTERM") for m in status["missing"])
    assert any(m.startswith("kernel metrics (interrupted by SIGTERM") for m in status["missing"])
    explained = CliRunner().invoke(main, ["explain", str(root)])
    assert explained.exit_code != 0 and "Traceback" not in explained.output
    assert explained.output.count("\n") == 1, explained.output
    assert "recorded nothing to explain" in explained.output
    assert "interrupted by SIGTERM during phase 1" in explained.output


def test_sigterm_becomes_a_keyboard_interrupt_once() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SignalInterrupt) as info, interrupts_as_keyboard():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert info.value.signame == "SIGTERM" and isinstance(info.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is before
    with interrupts_as_keyboard():  # a second signal while saving is ignored
        with pytest.raises(SignalInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)


def _cli(fakes: dict[str, Path], out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        main,
        [
            "profile",
            "-o",
            str(out),
            "--ncu",
            str(fakes["ncu"]),
            "--nsys",
            str(fakes["nsys"]),
            "--coverage",
            "1",
            "--region",
            "all",
            *extra,
            str(fakes["script"]),
        ],
    )
    return result.exit_code, result.output


def test_budget_leaves_out_the_least_valuable_and_says_so(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 10 s per launch: the launches, not the fake program's start, decide what fits
    monkeypatch.setitem(cost.SECONDS_PER_PASS, "rules", 10 / 24)
    code, output = _cli(fakes, tmp_path / "whole", "-v")
    assert code == 0, output
    whole = json.loads((tmp_path / "whole/status.json").read_text())
    assert whole["budget"] is None and len(whole["plan"]["signatures"]) == 2
    assert "phase 2 estimate: about" in output and "where the time went:" in output
    assert "ncu run 2-targeted-1:" in output and "38 passes each" in output
    code, output = _cli(fakes, tmp_path / "cut", "--budget", "25")
    assert code == 0, output
    status = json.loads((tmp_path / "cut/status.json").read_text())
    kept, left = status["plan"]["signatures"], status["budget"]["left_out"]
    assert [s["name"] for s in kept] == [whole["plan"]["signatures"][0]["name"]]
    assert [s["name"] for s in left] == [whole["plan"]["signatures"][1]["name"]]
    assert status["estimate"]["total_s"] <= 25 < status["budget"]["whole_plan_estimated_s"]
    assert status["complete"] is False
    assert any("left out by --budget 25 s" in m for m in status["missing"])
    assert "--budget 25 s leaves out 1 of 2 planned signatures" in output
    explained = CliRunner().invoke(main, ["explain", str(tmp_path / "cut")])
    assert explained.exit_code == 0 and "left out by --budget 25 s" in explained.output


def test_budget_and_full_do_not_go_together(fakes: dict[str, Path], tmp_path: Path) -> None:
    code, output = _cli(fakes, tmp_path / "s", "--full", "--budget", "60")
    assert code == 2 and "--budget" in output
