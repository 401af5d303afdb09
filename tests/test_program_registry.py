"""The program analyses' records (analysis/program/record.py, collected in registry.py) against the
shipped rules, the rule loader and real recordings: every program rule names a registered
analysis, every record documents its values and parameters, a rule's `[params]` are checked
against its record (an unknown key refused in one line, a missing one the default, which the
analysis then runs with), and on the recordings each analysis gives every value it declares."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.program.record import TABLE_WORDS, Param, ProgramAnalysis
from nsdiag.analysis.program.registry import PROGRAM_ANALYSES
from nsdiag.analysis.program.timeline.host_wait import LAUNCH_BOUND, SYNC_BOUND
from nsdiag.analysis.program.timeline.waits import WaitAccount
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.analysis.ruleset import default_rules, load_rules
from nsdiag.cli import main
from nsdiag.errors import RuleError
from nsdiag.model import quantities
from nsdiag.readers import nsys_sqlite
from nsdiag.resources import rules_dir
from tests.test_timeline import (
    HOST_WAIT,
    PID,
    TID,
    check_host_wait_is_disjoint,
    diagnose_with_account,
    kernel,
    make_db,
)

DATA = Path(__file__).parent / "data"
# No recording has the GPU wait on host allocations (NSD404 fires on them only where the
# host is unknown: the stats trace, outside any NVTX range), on input the host prepares in an
# NVTX range, or still launch-bound while it replays CUDA graphs: a synthetic export, built here.
HOST_LOOP = "synthetic: allocate, prepare input, copy, launch, replay a graph every NVTX step"
# transformers' eager Llama (no NVTX of its own), its GPU work marked as launched inside an NVTX
# range 'train_step', so the eager-attention finding has a range to name
LLAMA_IN_A_RANGE = "third_party/llama_big_eager.sqlite.gz, work inside NVTX 'train_step'"
OPTIM_IN_A_RANGE = "idioms/optim_step, work inside NVTX 'train_step'"
# Between them, every program analysis finds something (the rule ids each one fires) and gives
# each of its values (pipeline: pageable copies next to pinned ones, whose bandwidth it
# measures; train_loader: a DataLoader in the main process, CPU-bound).
RECORDINGS: dict[str, tuple[str, ...]] = {
    "nsys/pipeline.sqlite.gz": ("NSD401", "NSD402"),
    "nsys/sync_heavy.sqlite.gz": ("NSD403", "NSD406"),
    "nsys/sync_heavy_stats_cuda_gpu_trace.csv.gz": ("NSD404",),
    "programs/verify/train_loader": ("NSD401", "NSD402", "NSD403", "NSD406", "NSD407"),
    "multi_gpu/verify/ddp_straggler": ("NSD403", "NSD406", "NSD410", "NSD420"),
    "multi_gpu/ddp_single_bucket.sqlite.gz": ("NSD421",),
    "programs/infer_cnn": ("NSD410", "NSD411"),
    HOST_LOOP: ("NSD404", "NSD406", "NSD407"),
    LLAMA_IN_A_RANGE: ("NSD412",),
    "idioms/optim_step": ("NSD406", "NSD407", "NSD413"),
    OPTIM_IN_A_RANGE: ("NSD413",),
    "idioms/decode.sqlite.gz": ("NSD406",),  # a decode loop: the forwards graphed
}
LAUNCH_RULE = "NSD406-launch-bound.toml"


def host_loop(path: Path) -> Path:
    """20 NVTX `step`s of 2 ms on one host thread: cudaMalloc (300 us), 1 ms of host work with
    no CUDA call, an async copy of the input (H2D from pinned memory, 20 us on the GPU), 300 us
    of dispatch, a kernel launch (390 us on the GPU, into the next step's cudaMalloc) and a graph
    replay whose work the export does not trace as kernels."""
    us = 1000
    strings = [
        (0, "cudaLaunchKernel_v7000"),
        (1, "void add<float>(float*)"),
        (2, "add"),
        (3, "cudaMalloc_v3020"),
        (4, "cudaGraphLaunch_v10000"),
        (5, "cudaMemcpyAsync_v3020"),
    ]
    kernels, calls, copies, nvtx = [], [], [], []
    for i in range(20):
        t0, c = 1_000_000 + i * 2000 * us, 4 * i
        nvtx.append((t0, t0 + 2000 * us, 59, "step", TID, None, 0))
        calls += [
            (t0, t0 + 300 * us, 0, TID, c + 1, 3, 0),
            (t0 + 1300 * us, t0 + 1310 * us, 0, TID, c + 2, 5, 0),
            (t0 + 1610 * us, t0 + 1615 * us, 0, TID, c + 3, 0, 0),
            (t0 + 1616 * us, t0 + 1618 * us, 0, TID, c + 4, 4, 0),
        ]
        copies.append((t0 + 1315 * us, t0 + 1335 * us, 0, 1, 7, c + 2, PID, 1 << 20, 1, 1, 2))
        kernels.append(kernel(t0 + 1620 * us, t0 + 2010 * us, c + 3))
    rows = {
        "StringIds": strings,
        "CUPTI_ACTIVITY_KIND_KERNEL": kernels,
        "CUPTI_ACTIVITY_KIND_MEMCPY": copies,
        "CUPTI_ACTIVITY_KIND_RUNTIME": calls,
        "NVTX_EVENTS": nvtx,
    }
    return make_db(path, rows)


def program_rules() -> list[RuleSpec]:
    return [r for r in default_rules() if r.scope == "program"]


def shipped_params(rule: RuleSpec) -> dict[str, Any]:
    """The `[params]` table as the rule file writes it (the loaded rule holds the defaults too)."""
    return dict(tomllib.loads(Path(rule.path).read_text()).get("params", {}))


# ---------------------------------------------------------------- the records


def test_every_shipped_program_rule_names_a_registered_analysis_and_each_has_one() -> None:
    named = {rule.analysis for rule in program_rules()}
    assert named <= PROGRAM_ANALYSES.keys()
    assert named == PROGRAM_ANALYSES.keys(), "an analysis no shipped rule runs"


def test_each_record_is_declared_next_to_its_function() -> None:
    for name, analysis in PROGRAM_ANALYSES.items():
        assert analysis.name == name
        module = sys.modules[analysis.function.__module__]
        declared = [v for v in vars(module).values() if isinstance(v, ProgramAnalysis)]
        assert analysis in declared, f"{name}: declare the record in {module.__name__}"


def test_each_record_is_declared_once_and_names_its_function() -> None:
    """The records are in analyses.py alone (no other module builds one); each names a function
    of the module it says, and that module imports the record (its params_of and text)."""
    from nsdiag.analysis.program import analyses

    package = Path(nsdiag.__file__).parent
    builders = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if re.search(r"^\w+ = ProgramAnalysis\(", path.read_text(), re.M)
    ]
    assert builders == ["analysis/program/analyses.py"]
    for name, analysis in PROGRAM_ANALYSES.items():
        assert any(v is analysis for v in vars(analyses).values()), name
        module, _, function = analysis.function_ref.partition(":")
        assert (analysis.function.__module__, analysis.function.__name__) == (module, function)
        assert analysis.held_back_ref is None or analysis.held_back_ref.startswith(module + ":")


@pytest.mark.parametrize("args", [["rules", "list"], ["rules", "show", "NSD404"]])
def test_the_rules_commands_import_no_pandas_or_numpy(args: list[str]) -> None:
    """`nsdiag rules` loads every rule (checking each program rule against its record) and
    prints them without importing an analysis module, pandas or numpy."""
    code = (
        "import sys\n"
        "from nsdiag.cli import main\n"
        f"main({args!r}, standalone_mode=False)\n"
        "print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[1],
    )
    assert run.stdout.splitlines()[-1] == "[]", run.stdout[-500:]
    assert "NSD404" in run.stdout


def _one_line(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text


def test_every_value_and_parameter_is_documented() -> None:
    for name, analysis in PROGRAM_ANALYSES.items():
        assert analysis.values, name
        for value, meaning in analysis.values.items():
            assert value.isidentifier() and _one_line(meaning), (name, value)
        assert analysis.params, name
        for key, param in analysis.params.items():
            assert isinstance(param, Param), (name, key)
            assert key.isidentifier() and _one_line(param.meaning), (name, key)
            assert math.isfinite(param.default), (name, key)
        assert analysis.needs in ("kernels", "launches", "timeline", "ranks"), name
        assert set(analysis.tables) <= TABLE_WORDS.keys(), name


def test_every_shipped_rules_params_are_known_to_its_analysis() -> None:
    for rule in program_rules():
        analysis = PROGRAM_ANALYSES[rule.analysis]
        assert shipped_params(rule).keys() <= analysis.params.keys(), rule.id
        assert rule.params.keys() == analysis.params.keys(), rule.id  # completed by the loader


def test_claims_name_other_analyses_and_admit_an_order() -> None:
    claims = {name: a.claims_before for name, a in PROGRAM_ANALYSES.items()}
    for name, later in claims.items():
        assert set(later) <= claims.keys() - {name}, name
    placed: list[str] = []  # claimers before the analyses they claim from
    while len(placed) < len(claims):
        ready = [
            n
            for n in claims
            if n not in placed and all(n not in claims[m] for m in claims if m not in placed)
        ]
        assert ready, f"the claims form a cycle among {sorted(set(claims) - set(placed))}"
        placed += ready


def test_only_rank_imbalance_holds_findings_back() -> None:
    held = {name for name, a in PROGRAM_ANALYSES.items() if a.held_back is not None}
    assert held == {"rank_imbalance"}


def test_params_of_overlays_the_rule_on_the_defaults_and_refuses_strangers() -> None:
    rule = next(r for r in program_rules() if r.analysis == "launch_bound")
    bare = replace(rule, params={"min_impact": 0.5})
    assert LAUNCH_BOUND.params_of(bare) == {
        "min_forwards": 8.0,
        "graph_node_gap_ns": 1000.0,
        "min_impact": 0.5,
    }
    gapped = replace(rule, params={"graph_node_gap_ns": 3000.0})
    assert LAUNCH_BOUND.params_of(gapped) == {
        "min_forwards": 8.0,
        "graph_node_gap_ns": 3000.0,
        "min_impact": 0.02,
    }
    with pytest.raises(ValueError, match="no parameter"):
        LAUNCH_BOUND.params_of(replace(rule, params={"odd": 1.0}))


# ---------------------------------------------------------------- the loader


def _launch_rule(folder: Path, edit: str, by: str) -> Path:
    text = (rules_dir() / LAUNCH_RULE).read_text()
    assert edit in text
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LAUNCH_RULE
    path.write_text(text.replace(edit, by))
    return path


def test_an_unknown_params_key_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _launch_rule(tmp_path, "[params]\n", "[params]\ngraph_node_gap_us = 1\n")
    with pytest.raises(RuleError) as error:
        load_rules(tmp_path)
    line = str(error.value)
    assert _one_line(line), line
    for word in (str(path), "graph_node_gap_us", "launch_bound", "graph_node_gap_ns", "min_impact"):
        assert word in line, (word, line)
    shown = CliRunner().invoke(main, ["rules", "list", "--rules", str(tmp_path)])
    assert shown.exit_code == 2, shown.output
    lines = shown.output.strip().splitlines()
    assert len(lines) == 1 and "graph_node_gap_us" in lines[0], shown.output


def test_a_missing_params_key_takes_the_default_and_the_analysis_runs_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = nsdiag.load(DATA / "nsys/tiny_burst.sqlite.gz")
    shipped = next(r for r in program_rules() if r.analysis == "launch_bound")
    before = diagnose(session, [shipped]).program_findings
    # A default unlike the shipped rule's value, so that a literal left at a call site shows.
    monkeypatch.setitem(LAUNCH_BOUND.params, "graph_node_gap_ns", Param(5000, "patched"))
    _launch_rule(tmp_path, "graph_node_gap_ns = 1000\n", "")
    (rule,) = load_rules(tmp_path)
    assert rule.params == {"min_impact": 0.02, "graph_node_gap_ns": 5000.0, "min_forwards": 8.0}
    after = diagnose(session, [rule]).program_findings
    assert {f.rule for f in after} == {f.rule for f in before} == {"NSD406"}
    assert [f.range for f in after] == [f.range for f in before]
    # The same launch-bound idle time, less 5 us instead of 1 us per idle gap (1999 of them in
    # tiny_burst's range, which alone is large enough to report).
    idle = sum(f.details["launch_idle_ns"] for f in before)
    assert sum(f.details["launch_idle_ns"] for f in after) == idle
    assert sum(f.saved_ns or 0.0 for f in before) == pytest.approx(idle - 1999 * 1000, abs=1.0)
    assert sum(f.saved_ns or 0.0 for f in after) == pytest.approx(idle - 1999 * 5000, abs=1.0)
    assert all(quantities.duration(f.saved_ns) in f.message for f in after if f.saved_ns)


# ---------------------------------------------------------------- on real recordings


@pytest.fixture(scope="module")
def given_values(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[
    tuple[dict[str, Diagnosis], dict[str, list[dict[str, Any]]], dict[str, WaitAccount | None]]
]:
    """Each recording's diagnosis under the shipped program rules, the values each analysis
    gave its templates (ProgramAnalysis.text sees them all), and the wait account the host-wait
    analyses read."""
    given: dict[str, list[dict[str, Any]]] = {}
    text = ProgramAnalysis.text

    def capture(self: ProgramAnalysis, rule: RuleSpec, values: dict[str, Any]) -> tuple[str, str]:
        given.setdefault(self.name, []).append(dict(values))
        return text(self, rule, values)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ProgramAnalysis, "text", capture)
        diagnosed = {
            name: diagnose_with_account(_load(name, tmp_path_factory), program_rules())
            for name in RECORDINGS
        }
    yield (
        {name: found for name, (found, _) in diagnosed.items()},
        given,
        {name: waits for name, (_, waits) in diagnosed.items()},
    )


def _load(name: str, tmp_path_factory: pytest.TempPathFactory) -> nsdiag.Session:
    if name == HOST_LOOP:
        return nsys_sqlite.read(host_loop(tmp_path_factory.mktemp("host_loop") / "host.sqlite"))
    if name == LLAMA_IN_A_RANGE:
        session = nsdiag.load(DATA / "third_party/llama_big_eager.sqlite.gz")
        return replace(session, timeline=session.timeline.assign(nvtx_range="train_step"))
    if name == OPTIM_IN_A_RANGE:  # one program range around the whole run, on its main thread
        session = nsdiag.load(DATA / "idioms/optim_step")
        nvtx = session.nvtx_ranges
        main = nvtx.iloc[0]
        outer = nvtx.iloc[:1].assign(
            name="train_step",
            domain="",
            depth=0,
            start_ns=int(session.timeline["start_ns"].min()) - 1,
            end_ns=int(session.timeline["end_ns"].max()) + 1,
            thread_id=main["thread_id"],
            process_id=main["process_id"],
        )
        outer["duration_ns"] = outer["end_ns"] - outer["start_ns"]
        ranges = pd.concat([outer, nvtx.assign(depth=nvtx["depth"] + 1)], ignore_index=True)
        return replace(
            session,
            nvtx_ranges=ranges,
            timeline=session.timeline.assign(nvtx_range="train_step"),
        )
    return nsdiag.load(DATA / name)


def test_the_recordings_find_what_they_were_chosen_for(given_values: Any) -> None:
    found, _, _ = given_values
    for name, expected in RECORDINGS.items():
        fired = {f.rule for f in found[name].program_findings}
        assert set(expected) <= fired, (name, sorted(fired))


def _given(value: Any) -> bool:
    if value is None or value == "":
        return False
    return not (isinstance(value, float) and math.isnan(value))


def test_every_declared_value_is_given_on_a_recording(given_values: Any) -> None:
    _, given, _ = given_values
    assert given.keys() == PROGRAM_ANALYSES.keys(), "an analysis found nothing on RECORDINGS"
    for name, analysis in PROGRAM_ANALYSES.items():
        for values in given[name]:
            assert values.keys() == analysis.values.keys(), name
        never = [v for v in analysis.values if not any(_given(g[v]) for g in given[name])]
        assert never == [], f"{name} never gives {never} on {', '.join(RECORDINGS)}"


def test_idle_time_a_sync_claims_is_not_counted_again(given_values: Any) -> None:
    """sync_bound claims before the other three host-wait analyses: on each recording the syncs'
    share of every idle gap is out of its categories, each of the four findings saves its own
    part of a device's idle time, and together never more than that idle time."""
    assert set(SYNC_BOUND.claims_before) == {"launch_bound", "cpu_bound", "gpu_idle_gaps"}
    diagnosed, _, accounts = given_values
    claimed_by_syncs = 0.0
    for name, waits in accounts.items():
        found = diagnosed[name]
        if waits is None:
            assert not [f for f in found.program_findings if f.rule in HOST_WAIT], name
            continue
        check_host_wait_is_disjoint(found, waits)
        sync = sum(f.saved_ns for f in found.program_findings if f.rule == "NSD403")
        if sync:
            claimed_by_syncs += sync
            others = [
                f for f in found.program_findings if f.rule in HOST_WAIT and f.rule != "NSD403"
            ]
            assert others, name  # the idle time the syncs left is another finding's
    assert claimed_by_syncs > 0


def test_the_synthetic_loop_waits_on_each_part_of_its_host_work(given_values: Any) -> None:
    """Each idle stretch of the step is the finding of what the host did meanwhile (32 samples
    per idle gap: within a sample, 41 us, of the time the loop spends in each part)."""
    found, _, _ = given_values
    findings = {f.rule: f for f in found[HOST_LOOP].program_findings}
    assert {findings[r].range for r in ("NSD404", "NSD406", "NSD407")} == {"step"}
    assert "NSD403" not in findings  # no sync
    us, steps = 1000, 19  # the idle gaps before the first step's copy lie outside the timeline
    idle, launch, cpu = findings["NSD404"], findings["NSD406"], findings["NSD407"]
    assert (
        idle.saved_ns
        == idle.details["alloc_idle_ns"]
        == pytest.approx(steps * 290 * us, abs=steps * 41 * us)
    )
    assert idle.details["unknown_idle_ns"] == 0 and "cudaMalloc x20" in idle.message
    assert cpu.saved_ns == pytest.approx(steps * 1000 * us, abs=steps * 41 * us)
    assert "100% of that time ends in a host-to-device copy" in cpu.message
    assert "between cudaMalloc and cudaMemcpyAsync" in cpu.message
    # 285 us of dispatch between the copy and the kernel, in 20 gaps, less 1 us each a graph
    # would still leave
    assert launch.details["launch_idle_ns"] == pytest.approx(20 * 285 * us)
    assert launch.saved_ns == pytest.approx(20 * 284 * us)
    assert launch.details["graph_launches"] == 20 and launch.details["kernel_launch_calls"] == 20
    assert "already replays CUDA graphs (20 graph launches beside 20 kernel launches)" in (
        launch.message
    )
    # the host launched 2 things a step (a kernel, a graph), not the graphs' kernels one by one;
    # the change says the graph is already there (issue 41)
    assert "2 kernel launches per iteration" in launch.message
    (change,) = [c for c in found[HOST_LOOP].changes if "NSD406" in c.rules]
    assert change.key == "idiom:graph-the-rest" and "already replays" in change.title
