"""Watching a targeted ncu run (collect/watch.py, runner's poll thread, targeted_runs.py): it ends
when the plan is met, when the planned launches stop coming, or at phase 2's limit, whose later
rounds are then skipped; what was profiled is kept, interrupted or not. The deadlines are
tested with a clock the test moves, or with tiny margins (no test waits many seconds)."""

from __future__ import annotations

import json
import signal
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import nsdiag
from nsdiag.collect import cost, runner
from nsdiag.collect.options import NullProgress
from nsdiag.collect.profile import profile
from nsdiag.collect.watch import Due, Limit, Watch, WatchSettings, schedule
from tests.conftest import calls
from tests.test_collect_early_stop import sig
from tests.test_collect_profile import options, two_rounds
from tests.test_profile_interrupt import _alive, _interrupt


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_schedule_adds_interception_and_replay_to_phase_1s_times() -> None:
    launches = pd.DataFrame(
        {
            "function": ["a", "b", "c", "d"],
            "start_ns": [2e9, 3e9, 3.5e9, 9e9],
            "duration_ns": [1e3] * 4,
        }
    )
    due = schedule(launches, [1, 3], 0.5, ahead_s=1.0, seconds_per_intercepted=0.01)
    assert [d.label for d in due] == ["b", "d"]
    assert due[0].due_s == pytest.approx(3.0 - 1.0 + 2 * 0.01 + 1 * 0.5)
    assert due[1].due_s == pytest.approx(9.0 - 1.0 + 4 * 0.01 + 2 * 0.5)
    # launches before the program's time ahead are due at once (plus ncu's own work)
    assert schedule(launches, [0], 0.5, ahead_s=5.0)[0].due_s == pytest.approx(
        cost.SECONDS_PER_INTERCEPTED + 0.5
    )
    assert schedule(launches.drop(columns="start_ns"), [0], 0.5) == [Due("a", None)]
    assert schedule(launches, [], 0.5) == []


def test_the_plan_met_ends_the_run_only_with_every_wanted_name_seen() -> None:
    a, b = sig("kernel_a"), sig("kernel_b")
    watch = Watch(3, [a, b], [Due("kernel_a", 1.0)] * 3, 0.5, clock=Clock())
    assert watch.seen(1, "kernel_a") is None
    assert watch.seen(3, "kernel_a") is None  # b not yet seen
    ending = watch.seen(4, "kernel_b")
    assert ending is not None and ending.kind == "planned"
    # with --run-to-end the plan met does not end it
    kept = Watch(1, [a], [Due("kernel_a", 1.0)], 0.5, planned_stop=False, clock=Clock())
    assert kept.seen(1, "kernel_a") is None


def test_a_planned_launch_overdue_by_the_margin_ends_the_run() -> None:
    clock = Clock()
    settings = WatchSettings(factor=2.0, slack_s=10.0, first_slack_s=30.0)
    due = [Due("gemv2T_kernel_val", 8.0), Due("splitKreduce_kernel", 12.0)]
    watch = Watch(2, [sig("gemv2T_kernel_val")], due, 0.5, settings=settings, clock=clock)
    # the first: 2 x its 8 s + 30 s after the run started
    assert watch.waiting() == "waiting for launch 1 of 2 (gemv2T_kernel_val), due in ~8 s"
    clock.now += 45.9
    assert watch.overdue() is None
    assert watch.waiting() == (
        "waiting for launch 1 of 2 (gemv2T_kernel_val), late: ending the run in ~0 s"
    )
    clock.now += 1.0
    assert watch.seen(1, "gemv2T_kernel_val") is None
    # the second: 2 x the 4 s predicted after the first + 10 s
    clock.now += 17.9
    assert watch.overdue() is None
    clock.now += 0.2
    ending = watch.overdue()
    assert ending is not None and ending.kind == "stalled"
    assert ending.detail.startswith("launch 2 of 2 (splitKreduce_kernel) had not come 18 s after")
    assert "ended with 1 profiled" in ending.detail
    # --run-to-end: never for a stall
    clock.now = 100.0
    patient = Watch(2, [], due, 0.5, settings=settings, planned_stop=False, clock=clock)
    clock.now += 1e6
    assert patient.overdue() is None


def test_count_reached_but_a_name_not_seen_waits_one_replay_and_the_slack() -> None:
    """ncu profiled as many launches as planned but not the wanted kernel (other shapes of its
    names, say): the run waits about one more launch's replay, then ends."""
    clock = Clock()
    settings = WatchSettings(factor=2.0, slack_s=10.0)
    due = [Due("conv_kernel", 3.0)]
    watch = Watch(1, [sig("conv_kernel")], due, 0.5, settings=settings, clock=clock)
    assert watch.seen(1, "other_conv_kernel") is None
    assert watch.waiting() == "waiting for conv_kernel (planned, not profiled yet), due in ~0 s"
    clock.now += 10.9
    assert watch.overdue() is None
    clock.now += 0.2
    ending = watch.overdue()
    assert ending is not None and ending.kind == "stalled"
    assert ending.detail.startswith("conv_kernel had not come 11 s after the last profiled")


def test_phase_2s_limit_ends_the_run_whatever_else() -> None:
    clock = Clock()
    limit = Limit(clock.now + 50.0, 60.0, "--budget")
    watch = Watch(5, [], [Due("k", None)] * 5, 0.5, limit=limit, planned_stop=False, clock=clock)
    assert watch.overdue() is None and watch.waiting() is not None
    assert "phase 2's limit in ~50 s" in (watch.waiting() or "")
    clock.now += 50.0
    ending = watch.overdue()
    assert ending is not None and ending.kind == "limit"
    assert ending.detail == (
        "phase 2's limit of 60 s (--budget) was reached with 0 of 5 planned launches profiled"
    )


CHILD = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    out = Path(sys.argv[1])
    def shut_down(*_):
        out.write_text("report written")
        sys.exit(0)
    signal.signal(signal.SIGTERM, shut_down)
    print('==PROF== Profiling "kernel_0" - 0: 0%....50%....100% - 24 passes', flush=True)
    time.sleep(60)
    """
)


def test_the_runner_polls_the_watch_and_ends_a_stalled_run(tmp_path: Path) -> None:
    script = tmp_path / "stalls.py"
    script.write_text(CHILD)
    settings = WatchSettings(factor=0.0, slack_s=0.3, first_slack_s=20.0, poll_s=0.05)
    due = [Due("kernel_0", 1.0), Due("kernel_1", 2.0)]
    watch = Watch(2, [sig("kernel_0"), sig("kernel_1")], due, 0.5, settings=settings)
    waits: list[str] = []
    result = runner.run(
        [sys.executable, str(script), str(tmp_path / "report")],
        tmp_path / "run.log",
        watch=watch,
        on_wait=waits.append,
    )
    assert result.ending is not None and result.ending.kind == "stalled", result
    assert result.ok and result.profiled == 1 and runner.failure(result, "the run") is None
    assert (tmp_path / "report").read_text() == "report written"  # SIGTERM: the report kept
    assert any(w.startswith("waiting for launch 2 of 2 (kernel_1)") for w in waits), waits
    assert "had not come" in (tmp_path / "run.log").read_text()


def test_a_run_outliving_its_sigterm_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program that ignores SIGTERM: its group is stopped END_GRACE_S after it, never left."""
    script = tmp_path / "deaf.py"
    script.write_text(
        CHILD.replace(
            "signal.signal(signal.SIGTERM, shut_down)",
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
        )
    )
    monkeypatch.setattr(runner, "END_GRACE_S", 0.2)
    settings = WatchSettings(factor=0.0, slack_s=0.1, first_slack_s=20.0, poll_s=0.05)
    watch = Watch(2, [], [Due("k", 1.0), Due("k", 2.0)], 0.5, settings=settings)
    result = runner.run([sys.executable, str(script), "x"], tmp_path / "run.log", watch=watch)
    assert result.ending is not None and result.ending.kind == "stalled"
    assert result.wall_s < 30  # not the minute the child sleeps


# --------------------------------------------------------------------- end to end, fake ncu

QUICK = WatchSettings(factor=0.0, slack_s=0.5, first_slack_s=20.0, poll_s=0.05)


def _status(root: Path) -> dict:
    return json.loads((root / "status.json").read_text())


@pytest.mark.parametrize("names, stall_after", [("other", 5), ("", 1)])
def test_a_run_whose_planned_launches_never_come_ends_and_keeps_its_metrics(
    fakes: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    names: str,
    stall_after: int,
) -> None:
    """ncu prints kernels the plan did not name (cudnn picking others under ncu), or stops
    profiling after the first: the run ends by the watch, not at the program's end, and what
    it profiled is exported."""
    monkeypatch.setenv("FAKE_NAMES", names)
    monkeypatch.setenv("FAKE_KERNELS", "5")
    monkeypatch.setenv("FAKE_STALL_AFTER", str(stall_after))
    labels: list[str] = []
    notes: list[str] = []

    class Recorder(NullProgress):
        def advance(self, done: int, label: str) -> None:
            labels.append(label)

        def note(self, text: str) -> None:
            notes.append(text)

    result = profile([str(fakes["script"])], options(fakes, tmp_path, watch=QUICK), Recorder())
    status = _status(result.session_dir)
    step = next(s for s in status["steps"] if s["name"] == "2-targeted-1")
    assert step["ok"] and step["ended_by"] == "stalled" and step["profiled"] == stall_after
    assert "had not come" in step["ended_why"]
    assert status["breakdown"]["ncu_runs"][0]["ended_by"] == "stalled"
    assert any(label.startswith("waiting for ") for label in labels), labels
    assert any("differ from phase 1's" in n for n in notes), notes
    assert any("had not profiled when it was ended" in m for m in status["missing"])
    assert status["error"] is None and status["phase2_limit"]["reached"] is False
    assert len(nsdiag.load(result.session_dir).kernels) > 0  # the report was exported


def test_a_run_past_phase_2s_limit_ends_and_the_next_round_is_skipped(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_rounds(monkeypatch)
    monkeypatch.setenv("FAKE_STALL_AFTER", "1")
    never = WatchSettings(factor=100.0, slack_s=600.0, first_slack_s=600.0, poll_s=0.05)
    settings = replace(never, default_limit_runs=0.0, min_limit_s=2.0)  # 2 s of phase 2
    result = profile([str(fakes["script"])], options(fakes, tmp_path, watch=settings))
    status = _status(result.session_dir)
    names = [s["name"] for s in status["steps"]]
    assert "2-targeted-1" in names and "2-targeted-2" not in names
    step = next(s for s in status["steps"] if s["name"] == "2-targeted-1")
    assert step["ended_by"] == "limit" and step["profiled"] == 1
    assert "phase 2's limit of 2 s" in step["ended_why"]
    limit = status["phase2_limit"]
    assert limit["seconds"] == 2.0 and limit["reached"] is True and limit["skipped_runs"] == [2]
    assert "0x phase 1's run" in limit["source"]
    assert any("ncu run 2 of 2 skipped, phase 2's limit of 2 s" in m for m in status["missing"])
    assert status["complete"] is False and status["error"] is None
    assert (result.session_dir / "reports/targeted-1.raw.csv").is_file()  # exported
    assert not [c for c in calls(fakes) if "targeted-2" in " ".join(c)]
    # the program waiting for the skipped round is not left behind
    waiting = list(fakes["calls"].parent.glob("fake-ncu-*.waiting"))
    assert waiting and not any(_alive(int(w.read_text())) for w in waiting)


def test_budget_is_the_limit_and_run_to_end_has_none(
    fakes: dict[str, Path], tmp_path: Path
) -> None:
    budgeted = profile([str(fakes["script"])], options(fakes, tmp_path / "b", budget_s=900.0))
    limit = _status(budgeted.session_dir)["phase2_limit"]
    assert limit["seconds"] == 900.0 and limit["source"] == "--budget"
    assert limit["runs_within_s"] < 900.0  # the exports' estimate is left to them
    default = profile([str(fakes["script"])], options(fakes, tmp_path / "d"))
    limit = _status(default.session_dir)["phase2_limit"]
    assert limit["seconds"] >= 30.0 and limit["source"].startswith("5x phase 1's run of")
    to_end = profile([str(fakes["script"])], options(fakes, tmp_path / "e", run_to_end=True))
    assert "phase2_limit" not in _status(to_end.session_dir)


def test_an_interrupt_in_phase_2_keeps_and_exports_what_ncu_profiled(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT while a run waits for its second launch: ncu writes its report on the signal, and
    the session holds the first launch's metrics."""
    monkeypatch.setenv("FAKE_STALL_AFTER", "1")
    done, root, children = _interrupt(fakes, tmp_path, signal.SIGINT, "FAKE_NONE")
    assert done.returncode == 130, done.stderr
    assert "interrupted by SIGINT during phase 2 (ncu)" in done.stderr
    assert children and not any(_alive(p) for p in children)
    status = _status(root)
    assert any("what ncu had profiled is kept: targeted-1.ncu-rep" in m for m in status["missing"])
    assert (root / "reports/targeted-1.raw.csv").is_file()
    assert len(nsdiag.load(root).kernels) > 0
