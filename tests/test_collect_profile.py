"""`nsdiag profile` end to end with fake ncu and nsys (collect/profile.py and its steps:
phase1.py, phase2.py, exports.py, finish.py): the session written, fallbacks, failures that keep a
partial session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import nsdiag
from nsdiag.collect import argv
from nsdiag.collect.options import NullProgress, ProfileOptions
from nsdiag.collect.profile import profile
from nsdiag.collect.program import resolve_program
from nsdiag.errors import InputError, MissingDependencyError, ProfilerError
from tests.conftest import (
    DATA,
    calls,
    unattached,
)


def options(fakes: dict[str, Path], tmp_path: Path, **kw: object) -> ProfileOptions:
    settings: dict = {
        "output": tmp_path / "sessions" / "my session",
        "ncu": str(fakes["ncu"]),
        "nsys": str(fakes["nsys"]),
    }
    return ProfileOptions(**{**settings, **kw})


def two_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plan made of two rounds: its first, and the same again as round 2."""
    from dataclasses import replace

    from nsdiag.collect import phase2

    real = phase2.plan_launches

    def two(launches, settings, argv_for=None, chosen=None):  # type: ignore[no-untyped-def]
        plan = real(launches, settings, argv_for, chosen)
        first = plan.rounds[0]
        second = replace(first, argv=tuple(argv_for(2, first, plan.name_base)))
        return replace(plan, rounds=(first, second))

    monkeypatch.setattr(phase2, "plan_launches", two)


def test_profile_end_to_end_with_fakes(fakes: dict[str, Path], tmp_path: Path) -> None:
    notes: list[str] = []

    class Recorder:
        def phase(self, title, total):
            notes.append(f"phase {title} {total}")

        def advance(self, done, label):
            notes.append(f"done {done}")
            labels.append(label)

        def output(self, line):
            notes.append(line)

        def note(self, text):
            notes.append(f"note {text}")

    labels: list[str] = []
    result = profile(
        [str(fakes["script"]), "0"],
        options(fakes, tmp_path),
        Recorder(),
        nsdiag_argv=["nsdiag", "profile"],
    )
    # the progress bar names kernels by their short names, not the mangled ones ncu prints
    assert labels and set(labels) <= {s.function for s in result.plan.signatures} | {
        "kernel_0",
        "kernel_1",
        "kernel_2",
    }
    assert not any(label.startswith("_Z") for label in labels)
    root = result.session_dir
    assert root == tmp_path / "sessions/my session"
    made = calls(fakes, launched=True)
    # phase 2's program was started first, held by ncu until the first targeted run attached
    launched = [c for c in made if c[:2] == ["--mode", "launch"]]
    assert len(launched) == 1 and launched[0][-3:] == [sys.executable, str(fakes["script"]), "0"]
    port = int(launched[0][launched[0].index("--port") + 1])
    made = [c for c in made if c not in launched]
    assert made[0][:2] == ["nsys", "profile"] and made[1][:2] == ["nsys", "export"]
    targeted = [c for c in made if "--section" in c]
    program = [sys.executable, str(fakes["script"]), "0"]  # spaces survive as one argument
    assert targeted[0] == argv.ncu_attach(result.plan.rounds[0].argv, program, port, 4)[1:]
    assert targeted[1:] == [list(r.argv[1:]) for r in result.plan.rounds[1:]]
    assert list(result.plan.rounds[0].argv[-3:]) == program
    # the fake prints 3 progress lines: the run ends once the planned launches are among them
    planned = result.plan.rounds[0].launches
    assert "step 1 loss 2.5" in notes and f"done {min(planned, 3)}" in notes
    status = json.loads((tmp_path / "sessions/my session/status.json").read_text())
    step = next(s for s in status["steps"] if s["name"] == "2-targeted-1")
    assert step.get("ended_early", False) == (planned < 3), (planned, step)
    assert step["attached_after_s"] > 0 and status["breakdown"]["ncu_runs"][0]["attached_after_s"]
    for name in (
        "command.json",
        "env.json",
        "device.json",
        "status.json",
        "session.json",
        "reports/timeline.sqlite",
        "reports/targeted-1.ncu-rep",
        "reports/targeted-1.raw.csv",
        "reports/targeted-1.details.csv",
        "logs/1-timeline.log",
        "logs/2-targeted-1.log",
        "logs/2-standby.log",
    ):
        assert (root / name).exists(), name
    status = json.loads((root / "status.json").read_text())
    assert status["error"] is None and status["plan"]["rounds"][0]["launch_count"] == 1
    assert (
        status["plan"]["name_base"] == "mangled"
        and targeted[0][targeted[0].index("--kernel-name-base") + 1] == "mangled"
    )
    # the rules' metrics by name, checked against the chip's listing, with the three base sections
    requested = targeted[0][targeted[0].index("--metrics") + 1].split(",")
    assert status["rule_metrics"] == len(requested) >= 110 and targeted[0].count("--section") == 3
    assert json.loads((root / "command.json").read_text())["program"][1] == str(fakes["script"])
    session = nsdiag.load(root)
    assert len(session.kernels) > 0 and session.has_timeline() and len(session.rule_results) > 0
    assert "timeline_total_ns" in session.kernels
    from nsdiag.analysis.engine import diagnose

    assert diagnose(session).kernels


def test_sequential_starts_the_program_once_per_phase(
    fakes: dict[str, Path], tmp_path: Path
) -> None:
    result = profile([str(fakes["script"]), "0"], options(fakes, tmp_path, sequential=True))
    made = calls(fakes)
    assert not [c for c in made if "--mode" in c]
    targeted = [c for c in made if "--section" in c]
    assert targeted == [list(r.argv[1:]) for r in result.plan.rounds]
    status = json.loads((result.session_dir / "status.json").read_text())
    assert all("attached_after_s" not in s for s in status["steps"])


def test_each_round_attaches_to_a_program_started_during_the_one_before(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan of two ncu runs: the second run's program starts (and waits) while the first
    runs, so neither pays the program's start-up after phase 1."""
    two_rounds(monkeypatch)
    result = profile([str(fakes["script"]), "0"], options(fakes, tmp_path))
    launched = [c for c in calls(fakes, launched=True) if c[:2] == ["--mode", "launch"]]
    ports = [c[c.index("--port") + 1] for c in launched]
    assert len(launched) == 2 and len(set(ports)) == 2
    attached = [c for c in calls(fakes) if c[:2] == ["--mode", "attach"]]
    assert [c[c.index("--port") + 1] for c in attached] == ports
    assert [unattached(c) for c in attached] == [list(r.argv[1:-3]) for r in result.plan.rounds]
    status = json.loads((result.session_dir / "status.json").read_text())
    runs = [s for s in status["steps"] if s["name"] in ("2-targeted-1", "2-targeted-2")]
    assert len(runs) == 2 and all(s["attached_after_s"] > 0 for s in runs)
    root = result.session_dir
    assert (root / "logs/2-standby.log").is_file() and (root / "logs/2-standby-2.log").is_file()
    assert (root / "reports/targeted-2.ncu-rep").is_file()


@pytest.mark.parametrize("fault", ["FAKE_ATTACH", "FAKE_LAUNCH"])
def test_a_failed_attach_starts_the_program_again(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The attach fails, or the waiting program ended before phase 2 (it failed at start-up
    under ncu's launcher, say): the round starts the program as before."""
    monkeypatch.setenv(fault, "fail" if fault == "FAKE_ATTACH" else "die")
    notes: list[str] = []

    class Recorder(NullProgress):
        def note(self, text: str) -> None:
            notes.append(text)

    result = profile([str(fakes["script"]), "0"], options(fakes, tmp_path), Recorder())
    status = json.loads((result.session_dir / "status.json").read_text())
    names = [s["name"] for s in status["steps"] if s["name"].startswith("2-")]
    if fault == "FAKE_ATTACH":  # tried, then started again
        assert names[:2] == ["2-targeted-1", "2-targeted-1-restarted"]
        assert any("attaching to the waiting program failed" in n for n in notes), notes
    else:  # nothing waiting any more: started at once
        assert names[0] == "2-targeted-1" and "attached_after_s" not in status["steps"][2]
    targeted = [c for c in calls(fakes) if "--section" in c]
    assert targeted[-len(result.plan.rounds) :] == [list(r.argv[1:]) for r in result.plan.rounds]
    # what the fake's recorded export lacks, as without the fault; nothing about the attach
    assert status["error"] is None and not any("profiled none" in m for m in status["missing"])
    assert len(nsdiag.load(result.session_dir).kernels) > 0


def test_the_waiting_program_is_ended_when_phase_2_does_not_run(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Phase 1 fails (the program exits non-zero under nsys): the program ncu holds is ended,
    not left waiting for an attach that never comes."""
    with pytest.raises(ProfilerError):
        profile([str(fakes["script"]), "5"], options(fakes, tmp_path))
    launched = [c for c in calls(fakes, launched=True) if c[:2] == ["--mode", "launch"]]
    assert len(launched) == 1
    port = launched[0][launched[0].index("--port") + 1]
    waiting = fakes["calls"].parent / f"fake-ncu-{port}.waiting"
    pid = int(waiting.read_text())
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("query, targeted", [("fail", "ok"), ("ok", "refuse")])
def test_profile_collects_sections_when_the_metric_list_fails(
    fakes: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    query: str,
    targeted: str,
) -> None:
    monkeypatch.setenv("FAKE_QUERY", query)
    monkeypatch.setenv("FAKE_TARGETED", targeted)
    notes: list[str] = []
    progress = type(
        "Notes",
        (),
        {
            "phase": lambda *a: None,
            "advance": lambda *a: None,
            "output": lambda *a: None,
            "note": lambda self, text: notes.append(text),
        },
    )()
    result = profile([str(fakes["script"])], options(fakes, tmp_path), progress)
    runs = [c for c in calls(fakes) if "--section" in c]
    assert runs[-1].count("--section") == 12 and "--metrics" not in runs[-1]
    assert len(runs) == (2 if targeted == "refuse" else 1)
    assert any(
        ("did not list" if query == "fail" else "refused the metric list") in n for n in notes
    )
    assert result.session is not None and len(result.session.kernels)
    assert not any("profiled none" in m for m in result.missing)


def test_profile_falls_back_to_ncu_durations_without_an_nsys_report(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NSYS", "noimport")
    monkeypatch.setenv("FAKE_RAW", str(DATA / "console/duration_raw.csv.gz"))
    result = profile([str(fakes["script"])], options(fakes, tmp_path))
    made = calls(fakes)
    assert made[0][:2] == ["nsys", "profile"] and made[1][:2] == [
        "--metrics",
        "gpu__time_duration.sum",
    ]
    assert any("timeline" in m for m in result.missing)
    assert (
        result.plan is not None
        and result.plan.signatures[0].function == "vectorized_elementwise_kernel"
    )
    # the duration report exported again with mangled names: phase 2 filters on them, one run
    assert made[3][-2:] == ["--print-kernel-base", "mangled"] and result.plan.name_base == "mangled"
    targeted = [c for c in made if "--section" in c]
    assert len(targeted) == 1 and targeted[0][targeted[0].index("-k") + 1].startswith(
        "regex:^(_Zvoidvectorized"
    )


@pytest.mark.parametrize(
    "mode, message, hint",
    [
        ("perm", "ERR_NVGPUCTRPERM", "NVreg_RestrictProfilingToAdminUsers=0"),
        ("nogpu", "no usable NVIDIA GPU", "nvidia-smi"),
        ("appfail", "the program exited with code 3", "run it without nsdiag"),
    ],
)
def test_profile_failures_keep_a_partial_session(
    fakes: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    message: str,
    hint: str,
) -> None:
    monkeypatch.setenv("FAKE_TARGETED", mode)
    with pytest.raises(ProfilerError) as info:
        profile([str(fakes["script"])], options(fakes, tmp_path))
    assert message in info.value.message and hint in info.value.hint and info.value.exit_code == 1
    root = tmp_path / "sessions/my session"
    status = json.loads((root / "status.json").read_text())
    assert status["complete"] is False and message in status["error"]
    assert nsdiag.load(root).has_timeline()  # phase 1's tables are kept
    if mode == "perm":
        assert (
            "https://developer.nvidia.com/ERR_NVGPUCTRPERM" in info.value.hint
            and "sudo" in info.value.hint
        )


def test_profile_program_fails_in_phase_1(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ProfilerError, match="exited with code 5 during the timeline run") as info:
        profile([str(fakes["script"]), "5"], options(fakes, tmp_path))
    assert "partial session is kept" in info.value.hint
    assert [c[:2] for c in calls(fakes)] == [
        ["nsys", "profile"],
        ["nsys", "export"],
    ]  # not run again under ncu
    root = tmp_path / "sessions/my session"
    status = json.loads((root / "status.json").read_text())
    assert status["complete"] is False and "exited with code 5" in status["error"]
    assert any("kernel metrics" in m for m in status["missing"])
    assert nsdiag.load(
        root
    ).has_timeline()  # what the program did before it failed can be explained
    from nsdiag.cli import main

    explained = CliRunner().invoke(main, ["explain", str(root)])
    assert explained.exit_code == 0 and "timeline" in explained.output, explained.output
    fakes["calls"].unlink()
    monkeypatch.setenv("FAKE_NSYS", "noimport")  # the same without nsys: ncu's duration pass
    with pytest.raises(ProfilerError, match="exited with code 5 during the duration pass"):
        profile([str(fakes["script"]), "5"], options(fakes, tmp_path))


def test_profile_no_kernel_launched(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NSYS", "noimport")
    monkeypatch.setenv("FAKE_DURATIONS", "nokernels")
    with pytest.raises(
        ProfilerError, match="no kernel was profiled during the duration pass"
    ) as info:
        profile([str(fakes["script"])], options(fakes, tmp_path))
    assert "--profile-from-start off" in info.value.hint


def test_missing_explicit_nsys_is_an_error(fakes: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(MissingDependencyError, match="not a working nsys"):
        profile(
            [str(fakes["script"])],
            ProfileOptions(
                output=tmp_path / "s", ncu=str(fakes["ncu"]), nsys=str(tmp_path / "missing-nsys")
            ),
        )


def test_missing_script_is_a_usage_error() -> None:
    with pytest.raises(InputError):
        resolve_program(["no_such_script.py"])


def test_waiting_programs_get_port_ranges_no_attach_scans_twice() -> None:
    """An attaching ncu scans its whole port range: the next round's waiting program, started
    beside the run attaching, must listen outside it."""
    from nsdiag.collect import standby

    bases = [standby.free_ports(standby.CONNECTIONS) for _ in range(20)]
    assert None not in bases
    ranges = [set(range(b, b + standby.CONNECTIONS)) for b in bases if b is not None]
    assert all(a.isdisjoint(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])


def test_the_start_up_before_the_first_cuda_call_is_read_off_the_timeline() -> None:
    """What a program started ahead has already run: the trace's first CUDA call (nsys starts
    its clock with the program); nothing without CUDA calls."""
    from nsdiag.collect.phase1 import _first_cuda_call_s

    session = nsdiag.load(DATA / "third_party" / "bert_serve_graph.sqlite.gz")
    assert _first_cuda_call_s(session) == pytest.approx(17.187, abs=0.01)
    session.api_calls = session.api_calls.iloc[:0]
    assert _first_cuda_call_s(session) == 0.0


def test_phase_1_runs_again_without_pytorch_ranges_when_they_break_the_program(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nsys's --pytorch=functions-trace breaks torch.compile (dynamo cannot import nsys's
    annotation module): phase 1 is recorded once more without it, the session says so, and the
    profile goes on as for any program."""
    from nsdiag.collect import program

    monkeypatch.setattr(program, "runs_pytorch", lambda argv: True)
    monkeypatch.setenv("FAKE_NSYS", "compile")
    notes: list[str] = []

    class Recorder(NullProgress):
        def note(self, text: str) -> None:
            notes.append(text)

    result = profile([str(fakes["script"])], options(fakes, tmp_path), Recorder())
    runs = [c for c in calls(fakes) if c[:2] == ["nsys", "profile"]]
    assert len(runs) == 2 and argv.PYTORCH_FUNCTIONS in runs[0]
    assert argv.PYTORCH_FUNCTIONS not in runs[1] and runs[1][2:] == [
        a for a in runs[0][2:] if a != argv.PYTORCH_FUNCTIONS
    ]
    assert any("recording the timeline again without PyTorch function ranges" in n for n in notes)
    status = json.loads((result.session_dir / "status.json").read_text())
    ranges = status["pytorch_ranges"]
    assert ranges["asked"] is True and ranges["recorded"] is False
    assert "nsys_nvtx_annotations" in ranges["reason"] and ranges["log"].endswith("1-timeline.log")
    steps = [s["name"] for s in status["steps"]]
    assert steps[:3] == ["1-timeline", "1-timeline-without-pytorch", "1-timeline-export"]
    assert status["breakdown"]["timeline_s"] == status["steps"][1]["wall_s"]
    assert status["error"] is None and len(nsdiag.load(result.session_dir).kernels) > 0
    # a program that fails for its own reasons under nsys is not run again
    fakes["calls"].unlink()
    monkeypatch.setenv("FAKE_NSYS", "ok")
    with pytest.raises(ProfilerError, match="exited with code 5 during the timeline run"):
        profile([str(fakes["script"]), "5"], options(fakes, tmp_path / "again"))
    assert len([c for c in calls(fakes) if c[:2] == ["nsys", "profile"]]) == 1
    fakes["calls"].unlink()
    ok = profile([str(fakes["script"])], options(fakes, tmp_path / "ok"))
    status = json.loads((ok.session_dir / "status.json").read_text())
    assert status["pytorch_ranges"] == {"asked": True, "recorded": True}
