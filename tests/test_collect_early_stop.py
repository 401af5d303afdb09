"""Ending a targeted ncu run once its planned launches are profiled (collect/early_stop.py,
runner.end_early, the watch's first condition: tests/test_collect_watch.py has the others), and
pricing runs by where their last planned launch falls."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from nsdiag.collect import early_stop, runner
from nsdiag.collect.profile import profile
from nsdiag.collect.watch import Watch
from nsdiag.model.launches import Signature
from tests.test_collect_profile import options


def sig(function: str, mangled: str = "", name: str = "") -> Signature:
    return Signature(
        name=name or function,
        function=function,
        grid="(1, 1, 1)",
        block="(128, 1, 1)",
        launches=1,
        total_ns=1.0,
        share=0.1,
        first=0,
        filter_name=mangled or function,
    )


def test_a_printed_name_matches_any_of_a_signatures_names_and_ncus_cut_form() -> None:
    nvjet = sig("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT")
    assert early_stop.printed_as(nvjet, "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT")
    assert early_stop.printed_as(nvjet, "nvjet_sm90_tst_192x128_64x5_1...")  # ncu cuts long names
    assert not early_stop.printed_as(nvjet, "nvjet_sm90_tst_64x...")
    assert not early_stop.printed_as(nvjet, "...")
    add = sig("vectorized_elementwise_kernel", mangled="_ZN2at6native29vectorized_elementwise")
    assert early_stop.printed_as(add, "_ZN2at6native29vectorized_elementwise")  # mangled base
    assert early_stop.printed_as(add, "vectorized_elementwise_kernel")  # function base


def test_reach_is_the_share_of_the_run_before_the_last_planned_launch_ends() -> None:
    launches = pd.DataFrame({"start_ns": [1e9, 2e9, 3e9, 9e9], "duration_ns": [1e6, 1e6, 1e6, 1e9]})
    assert early_stop.reach(launches, [0, 1]) == pytest.approx(2.001e9 / 10e9)
    assert early_stop.reach(launches, [3]) == 1.0
    assert early_stop.reach(launches, []) == 1.0
    assert early_stop.reach(launches, [0]) == pytest.approx(max(1.001e9 / 10e9, 0.05))
    assert early_stop.reach(launches.drop(columns="start_ns"), [0]) == 1.0


CHILD = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    out = Path(sys.argv[1])
    def shut_down(*_):
        out.write_text("report written")
        print("==PROF== Trying to shutdown target application", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, shut_down)
    for i in range(1000):
        line = f'==PROF== Profiling "kernel_{i % 2}" - {i}: 0%....50%....100% - 24 passes'
        print(line, flush=True)
        time.sleep(0.05)
    """
)


def test_the_runner_ends_a_run_once_told_and_the_child_keeps_its_report(tmp_path: Path) -> None:
    script = tmp_path / "fake_ncu.py"
    script.write_text(CHILD)
    report = tmp_path / "report"
    result = runner.run(
        [sys.executable, str(script), str(report)],
        tmp_path / "run.log",
        watch=Watch(4, [sig("kernel_0"), sig("kernel_1")], [], 0.5),
    )
    # ended early, not after the child's 1,000 kernels: counted, not timed
    assert result.stopped_early and result.ok and runner.failure(result, "the run") is None
    assert result.ending is not None and result.ending.kind == "planned"
    assert 4 <= result.profiled < 20
    assert report.read_text() == "report written"  # SIGTERM, not SIGKILL: the report is kept
    assert "ending the run" in (tmp_path / "run.log").read_text()


def test_run_to_end_lets_the_program_finish(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KERNELS", "6")
    result = profile([str(fakes["script"])], options(fakes, tmp_path, run_to_end=True))
    status = json.loads((result.session_dir / "status.json").read_text())
    step = next(s for s in status["steps"] if s["name"] == "2-targeted-1")
    assert "ended_early" not in step and step["profiled"] == 6
    run = status["breakdown"]["ncu_runs"][0]
    assert "ended_early" not in run
