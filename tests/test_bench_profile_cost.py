"""benchmarks/bench_profile_cost.py without a GPU: its programs, the summary of the recorded
H200 call (one line a program), and --within stopping what runs too long."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT, load_benchmark


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return load_benchmark("bench_profile_cost")


def test_the_nine_programs_exist(bench) -> None:  # type: ignore[no-untyped-def]
    assert list(bench.PROGRAMS)[:6] == [
        "vit_fp32",
        "vit_bf16",
        "loader_cnn",
        "bert_b1",
        "bert_graph",
        "llama",
    ]
    assert bench.PROGRAMS["decode"] == ["benchmarks/programs/decode.py"]
    assert bench.PROGRAMS["loader_cnn50"][1:] == ["--model", "resnet50"]
    assert bench.PROGRAMS["optim_foreach"] == ["benchmarks/programs/optim_step.py"]
    for program in bench.PROGRAMS.values():
        assert (ROOT / program[0]).is_file(), program


def test_the_summary_is_one_line_a_program(bench, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bench.summary(DATA / "profile/cost", [])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + 6 + 1 and lines[-1] == "median 2.95x, max 3.59x over 6"
    loader = next(line for line in lines if line.startswith("loader_cnn "))
    assert "p1 19 s, p2 45 s [36 s/28, 9 s/8 ended early]; complete False" in loader
    # a run the watch ended says how; a call stopped at --within says so
    recorded = json.loads((DATA / "profile/cost/bert_b1.json").read_text())
    recorded["breakdown"]["ncu_runs"][0]["ended_by"] = "stalled"
    recorded["stopped_at_within"] = True
    (tmp_path / "bert_b1.json").write_text(json.dumps(recorded))
    bench.summary(tmp_path, [])
    line = capsys.readouterr().out.splitlines()[1]
    assert "[6 s/7 stalled]" in line and line.endswith("STOPPED at --within")


def test_within_stops_a_program_running_past_it(bench, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wall, code, stopped = bench._timed(
        [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "log", 0.5
    )
    assert stopped and code != 0 and wall < 30
    wall, code, stopped = bench._timed([sys.executable, "-c", "pass"], tmp_path / "log", 30)
    assert not stopped and code == 0
    bench.run(tmp_path / "out", ["decode"], 5.0, warm_up=False)  # less than MIN_START_S
    assert "decode         not started: 5 s left of --within" in capsys.readouterr().out
    assert not list((tmp_path / "out").glob("*.json"))
