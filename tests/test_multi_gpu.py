"""Distributed runs: ranks read from one trace or one report per rank, the per-rank breakdown,
rank-imbalance and exposed-communication, on the two-GPU DDP recordings (tests/data/multi_gpu)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.collect import argv as cmd
from nsdiag.model import store
from nsdiag.model.launches import duration_groups, kernel_launches, signatures
from nsdiag.model.rank_variables import RANK_VARIABLES
from nsdiag.model.ranks import is_communication, overlaps_communication
from nsdiag.readers import ranks as rank_reader
from nsdiag.render.html import render_html
from nsdiag.render.markdown import render_markdown
from nsdiag.render.text import render_text

DATA = Path(__file__).parent / "data" / "multi_gpu"
BALANCED = DATA / "ddp_balanced.sqlite.gz"
STRAGGLER = DATA / "ddp_straggler.sqlite.gz"
SINGLE_BUCKET = DATA / "ddp_single_bucket.sqlite.gz"
PER_RANK = [DATA / "ddp_straggler_rank0.sqlite.gz", DATA / "ddp_straggler_rank1.sqlite.gz"]


@pytest.fixture(scope="module")
def diagnoses() -> dict[str, object]:
    return {
        name: diagnose(nsdiag.load(paths))
        for name, paths in {
            "balanced": BALANCED,
            "straggler": STRAGGLER,
            "single_bucket": SINGLE_BUCKET,
            "per_rank": PER_RANK,
        }.items()
    }


def test_one_trace_has_a_rank_per_process() -> None:
    session = nsdiag.load(STRAGGLER)
    ranks = session.meta.ranks or ()
    assert [(r.rank, r.device, r.rank_from) for r in ranks] == [
        (0, 0, "process-order"),
        (1, 1, "process-order"),
    ]
    assert ranks[0].process_id < ranks[1].process_id
    kernels = session.timeline[session.timeline["kind"] == "kernel"]
    assert set(kernels["rank"]) == {0, 1}
    assert (kernels.groupby("rank")["device"].nunique() == 1).all()


def test_per_rank_reports_merge_by_rank_from_the_environment() -> None:
    # given in reverse order: the rank comes from RANK in the recorded environment
    session = nsdiag.load(list(reversed(PER_RANK)))
    ranks = session.meta.ranks or ()
    assert [(r.rank, r.device, r.rank_from, r.host) for r in ranks] == [
        (0, 0, "env", "vm"),
        (1, 1, "env", "vm"),
    ]
    assert [Path(r.source).name for r in ranks] == [p.name for p in PER_RANK]


def test_per_rank_reports_share_one_time_axis() -> None:
    """Each report counts from its own start; aligned on the UTC starts, the k-th all-reduce
    ends within 100 us on both ranks (a collective ends together everywhere)."""
    session = nsdiag.load(PER_RANK)
    t = session.timeline
    ends = {
        r: t[(t["rank"] == r) & t["name"].str.contains("AllReduce")]["end_ns"].to_numpy()
        for r in (0, 1)
    }
    assert len(ends[0]) == len(ends[1]) == 61
    assert abs(ends[0] - ends[1]).max() < 100_000


def test_rank_from_file_name_then_order(tmp_path: Path) -> None:
    names = [Path("rep_12.sqlite"), Path("rep_3.sqlite")]
    empty = [nsdiag.Session(), nsdiag.Session()]
    assert rank_reader.file_ranks(empty, names) == ([12, 3], "file-name")
    assert rank_reader.file_ranks(empty, [Path("a.sqlite"), Path("b.sqlite")]) == (
        [0, 1],
        "file-order",
    )
    assert rank_reader.name_rank(Path("train_rank7.nsys-rep")) == 7


def test_reports_read_in_worker_processes(tmp_path: Path) -> None:
    """Enough reports go through the process pool; the result equals reading them in turn."""
    copies = []
    for i in range(rank_reader.PARALLEL_FROM):
        target = tmp_path / f"rep_{i}.sqlite.gz"
        shutil.copy(PER_RANK[i % 2], target)
        copies.append(target)
    from nsdiag.readers import reader_for

    jobs = [(reader_for(p), p) for p in copies]
    pooled = rank_reader.read_reports(jobs, workers=2)
    serial = [reader(p) for reader, p in jobs]
    assert [len(s.timeline) for s in pooled] == [len(s.timeline) for s in serial]
    assert pooled[3].meta.rank_env == serial[3].meta.rank_env


def test_a_bad_report_among_many_is_one_clear_error(tmp_path: Path) -> None:
    paths = []
    for i in range(rank_reader.PARALLEL_FROM):
        target = tmp_path / f"rep_{i}.sqlite"
        if i == 5:
            target.write_text("not a database")
        else:
            shutil.copy(PER_RANK[i % 2], target.with_suffix(".sqlite.gz"))
            target = target.with_suffix(".sqlite.gz")
        paths.append(target)
    with pytest.raises(nsdiag.NsdiagError) as err:
        nsdiag.load(paths)
    assert "rep_5.sqlite" in err.value.message and err.value.hint


def test_nccl_kernels_are_communication() -> None:
    names = pd.Series(
        [
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)",
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
            "void at::native::vectorized_elementwise_kernel<4, ...>",
            "sm90_xmma_gemm_bf16bf16_bf16f32",
        ]
    )
    assert is_communication(names).tolist() == [True, True, False, False]


def _steps(diagnosis: object) -> dict[int, object]:
    return {s.rank.rank: s for s in diagnosis.ranks.steps}  # type: ignore[attr-defined]


def test_breakdown_adds_up(diagnoses: dict[str, object]) -> None:
    """Per rank: computation + exposed communication + idle = the step."""
    for diagnosis in diagnoses.values():
        for step in _steps(diagnosis).values():
            total = step.compute_ns + step.exposed_ns + step.idle_ns
            assert total == pytest.approx(step.wall_ns, rel=1e-6)
            assert 0 <= step.wait_ns <= step.exposed_ns + 1
            assert step.exposed_ns <= step.communication_ns + 1


@pytest.mark.parametrize("name", ["straggler", "per_rank"])
def test_straggler_first_finding_names_rank_1(diagnoses: dict[str, object], name: str) -> None:
    diagnosis = diagnoses[name]
    first = diagnosis.top_findings(1)[0][1]  # type: ignore[attr-defined]
    assert first.cause == "rank-imbalance"
    assert first.message.startswith("Rank 1 (device 1")
    assert "'load_batch'" in first.message
    per_step = first.saved_ns / diagnosis.iterations  # type: ignore[attr-defined]
    # rank 1 sleeps 12 ms per step; under nsys the step grows by 14.8 ms over the balanced run
    assert 12e6 <= per_step <= 17.5e6
    steps = _steps(diagnosis)
    assert steps[1].late and not steps[0].late
    assert steps[0].wait_ns > 10 * max(steps[1].wait_ns, 1.0)


def test_balanced_first_finding_is_not_imbalance(diagnoses: dict[str, object]) -> None:
    diagnosis = diagnoses["balanced"]
    causes = [f.cause for _, f in diagnosis.top_findings(10)]  # type: ignore[attr-defined]
    assert causes[0] != "rank-imbalance"
    assert "rank-imbalance" not in causes
    assert "exposed-communication" not in causes


def test_single_bucket_exposes_the_all_reduce(diagnoses: dict[str, object]) -> None:
    found = [
        f
        for f in diagnoses["single_bucket"].program_findings  # type: ignore[attr-defined]
        if f.cause == "exposed-communication"
    ]
    assert len(found) == 1
    finding = found[0]
    iterations = diagnoses["single_bucket"].iterations  # type: ignore[attr-defined]
    assert finding.saved_ns / iterations > 0.8e6  # the ~1 ms all-reduce of every gradient
    overlapped = next(e.value for e in finding.evidence if e.metric == "overlapped_fraction")
    assert overlapped < 0.05
    assert "AllReduce x1" in finding.message
    # the balanced run overlaps most of its transfers with the backward pass
    balanced = _steps(diagnoses["balanced"])
    transfer = sum(s.communication_ns - s.wait_ns for s in balanced.values())
    exposed = sum(s.exposed_transfer_ns for s in balanced.values())
    assert exposed / transfer < 0.5


def test_nccl_time_is_not_idle(diagnoses: dict[str, object]) -> None:
    """Rank 0 waits ~17 ms per step inside the all-reduce: no idle-gap finding claims it."""
    for f in diagnoses["straggler"].program_findings:  # type: ignore[attr-defined]
        if f.cause == "gpu-idle-gaps":
            assert f.details["rank"] == 1


def test_reports_show_the_ranks(diagnoses: dict[str, object]) -> None:
    diagnosis = diagnoses["straggler"]
    text = render_text(diagnosis)  # type: ignore[arg-type]
    assert "Ranks" in text and "straggler" in text
    md = render_markdown(diagnosis)  # type: ignore[arg-type]
    assert "### Ranks" in md and "| 1 | 1 | vm |" in md
    data = json.loads(json.dumps(diagnosis.to_json()))  # type: ignore[attr-defined]
    assert data["ranks"]["late_rank"] == 1
    assert [r["late"] for r in data["ranks"]["ranks"]] == [False, True]
    html = render_html(diagnosis, nsdiag.load(STRAGGLER))  # type: ignore[arg-type]
    assert 'id="ranks"' in html and 'class="straggler"' in html
    assert "rank 1 · stream 7 · kernels" in html  # a lane per rank and stream (chart JSON: UTF-8)


def test_session_folder_keeps_the_ranks(tmp_path: Path) -> None:
    session = nsdiag.load(PER_RANK)
    store.save(session, tmp_path / "s")
    again = store.load(tmp_path / "s")
    assert again.meta.ranks == session.meta.ranks
    assert (again.timeline["rank"].to_numpy() == session.timeline["rank"].to_numpy()).all()
    assert diagnose(again).ranks.late_rank == 1  # type: ignore[union-attr]


def test_single_process_sessions_have_no_ranks() -> None:
    session = nsdiag.load(Path(__file__).parent / "data" / "nsys" / "sync_heavy.sqlite.gz")
    assert session.meta.ranks is None and "rank" not in session.timeline
    assert diagnose(session).ranks is None


def test_ncu_argv_runs_inside_the_chosen_ranks_worker_under_torchrun() -> None:
    """torchrun is rewritten so each worker starts through rank_exec, which puts ncu around
    the chosen rank's command only (attaching ncu to the launcher hung on the H200 pair)."""
    argv = cmd.ncu_targeted(
        "ncu", "out", ["python3", "-m", "torch.distributed.run", "--nproc-per-node", "2",
                       "t.py", "--iters", "3"],
        names=["_Z3fooi"], launch_count=1, metrics=["m"], devices=(1,), rank=1,
    )  # fmt: skip
    assert argv[:5] == ["python3", "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    assert argv[5] == "--no-python"
    i = argv.index("nsdiag.collect.rank_exec")
    assert argv[i + 1] == "1"
    ncu = json.loads(argv[i + 2])
    assert ncu[0] == "ncu" and "--devices" not in ncu and ncu[-2:] == ["-o", "out"]
    assert argv[i + 3 :] == ["--", "python3", "t.py", "--iters", "3"]
    # A launcher nsdiag does not rewrite keeps ncu following its processes on the rank's GPU.
    srun = cmd.ncu_targeted(
        "ncu", "out", ["srun", "-n", "2", "python3", "t.py"],
        names=["_Z3fooi"], launch_count=1, metrics=["m"], devices=(1,),
    )  # fmt: skip
    j = srun.index("--target-processes")
    assert srun[j : j + 4] == ["--target-processes", "all", "--devices", "1"]
    assert srun[-5:] == ["srun", "-n", "2", "python3", "t.py"]
    full = cmd.ncu_full("ncu", "out", ["torchrun", "--standalone", "-m", "pkg.train"], devices=(0,))
    inner = json.loads(full[full.index("nsdiag.collect.rank_exec") + 2])
    assert inner[inner.index("-k") + 1] == "regex:^(?!nccl)"
    assert full[: full.index("--no-python")] == ["torchrun", "--standalone"]
    assert full[-3:] == [sys.executable, "-m", "pkg.train"]
    assert "--devices" not in cmd.ncu_full("ncu", "out", ["python3", "t.py"])


@pytest.mark.parametrize(
    ("environment", "ran"),
    [
        ({"RANK": "1"}, "ncu"),
        ({"RANK": "0"}, "worker"),
        ({"SLURM_PROCID": "1"}, "ncu"),
        ({}, "worker"),
    ],
)
def test_rank_exec_wraps_only_the_chosen_rank(
    environment: dict[str, str], ran: str, tmp_path: Path
) -> None:
    """rank_exec execs ncu around the command on the chosen rank, the command alone elsewhere
    (here `ncu` is a script that records that it ran)."""
    fake_ncu = tmp_path / "ncu"
    fake_ncu.write_text('#!/bin/sh\necho ncu > "$MARK"\nexec "$@"\n')
    fake_ncu.chmod(0o755)
    mark = tmp_path / "mark"
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARIABLES}
    env.update(environment, MARK=str(mark))
    command = ["sh", "-c", 'test -e "$MARK" || echo worker > "$MARK"']
    result = subprocess.run(
        [sys.executable, "-m", "nsdiag.collect.rank_exec", "1", json.dumps([str(fake_ncu)]), "--",
         *command],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert mark.read_text().strip() == ran


def test_phase1_plans_on_the_chosen_rank() -> None:
    from nsdiag.collect.options import ProfileOptions
    from nsdiag.collect.phase1 import one_rank

    class State:
        options = ProfileOptions(rank=1)
        devices: tuple[int, ...] = ()

        class status:
            rank = None

        class progress:
            @staticmethod
            def note(text: str) -> None:
                State.noted = text

    session = nsdiag.load(STRAGGLER)
    rows = one_rank(State, session)  # type: ignore[arg-type]
    assert set(rows["rank"]) == {1}
    assert not is_communication(rows["name"]).any()
    assert State.devices == (1,)
    State.options = ProfileOptions(rank=5)
    with pytest.raises(nsdiag.NsdiagError, match="--rank 5"):
        one_rank(State, session)  # type: ignore[arg-type]


def test_reader_records_where_a_report_was_made() -> None:
    session = nsdiag.load(PER_RANK[1])
    assert session.meta.host == "vm"
    assert (session.meta.rank_env or {})["RANK"] == 1
    assert isinstance(session.meta.session_start_utc_ns, int)
    assert session.meta.ranks is None  # one process: nothing to number


def test_json_follows_the_schema(diagnoses: dict[str, object]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[1] / "docs/diagnosis.schema.json").read_text())
    for diagnosis in diagnoses.values():
        jsonschema.validate(json.loads(json.dumps(diagnosis.to_json())), schema)  # type: ignore[attr-defined]


@pytest.mark.parametrize("check", ["verify", "verify2", "verify3"])
def test_profile_under_torchrun_end_to_end_session(check: str) -> None:
    """`nsdiag profile -- python3 -m torch.distributed.run ... --straggler-rank 1` on the H200
    pair (tests/data/multi_gpu/verify; verify2 with phase 1 tracing CUDA and NVTX only; verify3
    with contended launches planned with their twins): both ranks in the timeline, ncu ran
    inside rank 0's worker only (its kernels carry metrics), and the first finding names
    rank 1."""
    root = DATA / check / "ddp_straggler"
    session = nsdiag.load(root)
    status = json.loads((root / "status.json").read_text())
    assert status["rank"]["rank"] == 0
    # verify2 missed four GEMM groups that only ran slower beside the all-reduce (fixed since:
    # test_launches_beside_a_collective_are_no_duration_group); its status says so
    missing = {m["name"] for m in status["coverage"]["missing"]}
    assert status["complete"] or (
        check == "verify2" and len(missing) == 4 and all(n.startswith("nvjet") for n in missing)
    )
    assert {r.rank for r in session.meta.ranks or ()} == {0, 1}
    assert len(session.kernels) >= 50  # rank 0's computation kernels, profiled
    assert not session.kernels["name"].astype(str).str.startswith("nccl").any()
    diagnosis = diagnose(session)
    first = diagnosis.top_findings(1)[0][1]
    assert first.cause == "rank-imbalance" and first.message.startswith("Rank 1 (device 1")
    # rank 1 sleeps 12 ms a step; under nsys its host is slower besides (verify3: 23.9 ms)
    assert 12e6 <= first.saved_ns / diagnosis.iterations <= 25e6
    if check == "verify3":  # every planned signature profiled, the GEMMs beside NCCL included
        assert status["complete"] and status["coverage"]["planned"] == 29


def test_launches_beside_a_collective_are_no_duration_group() -> None:
    """DDP's backward GEMMs ran 1.85x as long beside NCCL's all-reduce (54 against 29 us) in the
    end-to-end straggler run; phase 2 planned them as a second duration group that ncu, which
    replays each launch alone, never saw (four signatures, 9% of GPU time missing). Contended
    launches now join their uncontended twins' group."""
    timeline = nsdiag.load(DATA / "verify2" / "ddp_straggler").timeline
    name = "nvjet_sm90_tst_128x160_64x5_4x1_v_bz_NTT"
    contended = overlaps_communication(timeline)
    mine = (timeline["rank"] == 0).to_numpy() & ~is_communication(timeline["name"].astype(str))
    rank0 = timeline.assign(contended=contended)[mine]
    gemm = (rank0["name"].astype(str) == name).to_numpy()
    assert 0 < rank0["contended"][gemm].sum() < gemm.sum()
    planned = [s for s in signatures(kernel_launches(rank0)) if s.name == name]
    assert len(planned) == 1 and planned[0].launches == gemm.sum()
    blind = [
        s for s in signatures(kernel_launches(rank0.assign(contended=False))) if s.name == name
    ]
    assert len(blind) == 2  # as phase 2 planned it before


def test_duration_groups_place_contended_launches_by_their_twins() -> None:
    # two real groups (10 and 30 us), and contended copies of the first slowed to 16.5-17 us
    durations = [10e3, 10.5e3, 30e3, 31e3, 16.5e3, 17e3]
    contended = [False, False, False, False, True, True]
    assert duration_groups(durations, contended=contended) == [0, 0, 1, 1, 0, 0]
    assert duration_groups(durations) == [0, 0, 2, 2, 1, 1]
    assert duration_groups([18e3, 19e3], contended=[True, True]) == [0, 0]
