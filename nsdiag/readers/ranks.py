"""Sessions of a distributed run: the processes of one trace as ranks, and one report per rank
merged into one session on one time axis.

One trace holding several processes that did GPU work (`nsys profile torchrun ...` follows the
launcher's children) has a rank per process, numbered in process-id order (launchers start
ranks in order; the trace does not record the children's environment). One report per rank
(`srun nsys profile -o rep_%q{SLURM_PROCID}`, `torchrun --no-python nsys profile -o
rep_%q{RANK}`) takes its rank from the launcher's variables in the environment nsys recorded
(RANK, OMPI_COMM_WORLD_RANK, ...: model/rank_variables.py), else from a number in the file name
(`rep_rank3`, `rep_3`), else from the order of the files. Each report counts time from its own
start; the reports are put on one axis by their recorded UTC start times.

Many reports are read in parallel worker processes of this interpreter (the standard library's
ProcessPoolExecutor), so a few hundred ranks read in seconds on a machine with a few cores.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from nsdiag.errors import InputError
from nsdiag.model.meta import Rank, SessionMeta
from nsdiag.model.rank_variables import RANK_DIGITS, global_rank
from nsdiag.model.session import Session
from nsdiag.readers import source

# Two reports of one run launch mostly the same kernels: below this share of kernel names in
# common with the first report, a report looks like another program's.
SHARED_KERNEL_NAMES = 0.5
PARALLEL_FROM = 8  # reports: fewer are read one after another (a worker costs ~0.2 s to start)
_RANK_IN_NAME = re.compile(r"(?:rank|proc|procid|task|r)[_\-.]?(\d+)", re.IGNORECASE)
_TRAILING_NUMBER = re.compile(r"(\d+)$")
_TIME_COLUMNS = {
    "timeline": ("start_ns", "end_ns", "api_start_ns", "api_end_ns"),
    "api_calls": ("start_ns", "end_ns"),
    "nvtx_ranges": ("start_ns", "end_ns"),
}


def gpu_processes(timeline: pd.DataFrame) -> pd.DataFrame:
    """The processes that launched kernels: process_id, device (the one most of its kernels ran
    on) and first kernel start, in process-id order."""
    if not len(timeline) or "process_id" not in timeline:
        return pd.DataFrame(columns=["process_id", "device", "first_ns"])
    is_kernel = (timeline["kind"] == "kernel").to_numpy()
    if not is_kernel.any():
        return pd.DataFrame(columns=["process_id", "device", "first_ns"])
    pid = pd.to_numeric(timeline["process_id"], errors="coerce").to_numpy("int64")[is_kernel]
    device = pd.to_numeric(timeline["device"], errors="coerce").to_numpy("int64")[is_kernel]
    start = pd.to_numeric(timeline["start_ns"], errors="coerce").to_numpy("int64")[is_kernel]
    # the distinct (process, device) pairs in (process, device) order, numbered as one integer
    # each: np.unique along an axis sorts the pairs as records, 20x slower on 10^5 launches
    low_pid, low_device = pid.min(), device.min()
    span = int(device.max() - low_device) + 1
    keys, counts = np.unique((pid - low_pid) * span + (device - low_device), return_counts=True)
    pairs = np.stack([keys // span + low_pid, keys % span + low_device])
    # per process, its busiest device (pairs are sorted by process id)
    order = np.lexsort((-counts, pairs[0]))
    first_of = np.unique(pairs[0][order], return_index=True)[1]
    busiest = order[first_of]
    pids = pairs[0][busiest]
    firsts = np.array([start[pid == p].min() for p in pids], dtype="int64")
    return pd.DataFrame({"process_id": pids, "device": pairs[1][busiest], "first_ns": firsts})


def assign_ranks(session: Session, first_rank: int = 0, rank_from: str = "") -> Session:
    """A trace's GPU processes as ranks (`first_rank` upward, in process-id order): a `rank`
    column on its tables and meta.ranks. A trace with one GPU process is left as it is unless
    `rank_from` says where its rank comes from (a per-rank report)."""
    processes = gpu_processes(session.timeline)
    if len(processes) < 2 and not rank_from:
        return session
    host = session.meta.host or ""
    source = _source(session)
    how = rank_from or "process-order"
    ranks = [
        Rank(first_rank + i, int(pid), int(device), host, source, how)
        for i, (pid, device) in enumerate(
            zip(
                processes["process_id"].to_numpy("int64"),
                processes["device"].to_numpy("int64"),
                strict=True,
            )
        )
    ]
    by_process = {r.process_id: r.rank for r in ranks}
    for name in _TIME_COLUMNS:
        frame: pd.DataFrame = getattr(session, name)
        if "process_id" in frame:
            mapped = frame["process_id"].map(by_process)
            frame["rank"] = mapped.fillna(-1).astype("int64").to_numpy()
    session.meta = replace(session.meta, ranks=tuple(ranks))
    return session


def _source(session: Session) -> str:
    return session.meta.sources[0].path if session.meta.sources else ""


def env_rank(meta: SessionMeta) -> int | None:
    return global_rank(meta.rank_env or {})


def name_rank(path: Path) -> int | None:
    stem = path.name.split(".")[0]
    found = _RANK_IN_NAME.findall(stem) or _TRAILING_NUMBER.findall(stem)
    # a long number in a name is a date or a job id, not a rank
    return int(found[-1]) if found and len(found[-1]) <= RANK_DIGITS else None


def file_ranks(sessions: Sequence[Session], paths: Sequence[Path]) -> tuple[list[int], str]:
    """Each report's rank and where the numbers come from: the environment, else the file
    names, else the file order (the first way that numbers every report differently)."""
    for how, ranks in (
        ("env", [env_rank(s.meta) for s in sessions]),
        ("file-name", [name_rank(p) for p in paths]),
    ):
        numbers = [r for r in ranks if r is not None]
        if len(numbers) == len(sessions) and len(set(numbers)) == len(numbers):
            return numbers, how
    return list(range(len(sessions))), "file-order"


def rank_warnings(sessions: Sequence[Session], paths: Sequence[Path], how: str) -> list[str]:
    """What makes a merge of reports by rank doubtful: two reports that say they are the same
    rank, reports without start times (each counts from its own start), and reports whose
    kernels look like another program's."""
    warnings = []
    env = [env_rank(s.meta) for s in sessions]
    repeated = sorted({r for r in env if r is not None and env.count(r) > 1})
    if repeated and how != "env":
        both = [str(p) for p, r in zip(paths, env, strict=True) if r == repeated[0]]
        warnings.append(
            f"{', '.join(both)} each say they are rank {repeated[0]} (their environment's "
            f"RANK or SLURM_PROCID); they are numbered by {how.replace('-', ' ')} instead: are "
            "they reports of one run?"
        )
    unaligned = [str(p) for p, s in zip(paths, sessions, strict=True) if not _has_start(s)]
    if unaligned:
        warnings.append(
            f"{', '.join(unaligned)} carry no start time (nsys stats traces do not): the "
            f"{len(sessions)} reports are put on one timeline as ranks, each counting from its "
            "own start; diagnose each alone if they are not one run"
        )
    names = [_kernel_names(s) for s in sessions]
    foreign = [
        str(p)
        for p, n in zip(paths[1:], names[1:], strict=True)
        if _shared(names[0], n) < SHARED_KERNEL_NAMES
    ]
    if foreign:
        warnings.append(
            f"{', '.join(foreign)} launch mostly other kernels than {paths[0]}: reports of "
            "different programs? They are merged as ranks of one run; diagnose each alone if not"
        )
    return warnings


def _has_start(session: Session) -> bool:
    return isinstance(session.meta.session_start_utc_ns, int)


def _kernel_names(session: Session) -> set[str]:
    timeline = session.timeline
    if not len(timeline):
        return set()
    names = timeline["name"].to_numpy()[(timeline["kind"] == "kernel").to_numpy()]
    return {str(n) for n in pd.unique(names)}  # hashed in C: a rank's launches are many


def _shared(a: set[str], b: set[str]) -> float:
    """The share of distinct kernel names the two have in common (1 when both have none)."""
    return len(a & b) / len(a | b) if a | b else 1.0


def distinct_reports(
    sessions: Sequence[Session], paths: Sequence[Path]
) -> tuple[list[Session], list[Path], list[str]]:
    """The reports with each trace once: two copies of one report (same start, host and
    activities) are one rank, not two; a warning for each repeat."""
    seen: dict[tuple[object, ...], Path] = {}
    kept: list[Session] = []
    kept_paths: list[Path] = []
    warnings: list[str] = []
    for session, path in zip(sessions, paths, strict=True):
        key = _trace_key(session)
        if key is not None and key in seen:
            warnings.append(
                f"{path} holds the same trace as {seen[key]} (the same report given twice?); "
                "it is counted once"
            )
            continue
        if key is not None:
            seen[key] = path
        kept.append(session)
        kept_paths.append(path)
    return kept, kept_paths, warnings


def _trace_key(session: Session) -> tuple[object, ...] | None:
    """What tells one recorded trace from another: its start and host, and the count and
    start times of its activities and calls (None: no timeline)."""
    timeline = session.timeline
    if not len(timeline):
        return None
    starts = pd.to_numeric(timeline["start_ns"], errors="coerce").fillna(0).to_numpy("int64")
    return (
        session.meta.session_start_utc_ns,
        session.meta.host,
        len(timeline),
        len(session.api_calls),
        len(session.nvtx_ranges),
        int(starts.sum(dtype="int64")),
        int(starts.min()),
        int(starts.max()),
    )


def merge_rank_reports(sessions: Sequence[Session], paths: Sequence[Path]) -> Session:
    """Reports of one run, one (or a few) ranks each, as one session on one time axis."""
    numbers, how = file_ranks(sessions, paths)
    doubts = rank_warnings(sessions, paths, how)
    order = np.argsort(numbers, kind="stable")
    starts = [s.meta.session_start_utc_ns for s in sessions]
    aligned = all(isinstance(t, int) for t in starts)
    origin = min(int(t) for t in starts if isinstance(t, int)) if aligned else 0
    tables: dict[str, list[pd.DataFrame]] = {name: [] for name in _TIME_COLUMNS}
    ranks: list[Rank] = []
    next_rank = 0
    for i in order:
        session, number = sessions[int(i)], numbers[int(i)]
        several = len(gpu_processes(session.timeline)) > 1
        first = next_rank if several else number
        assign_ranks(session, first, "" if several else how)
        shift = int(starts[int(i)]) - origin if aligned else 0  # type: ignore[arg-type]
        for name in _TIME_COLUMNS:
            frame: pd.DataFrame = getattr(session, name)
            if len(frame):
                tables[name].append(_shifted(frame, _TIME_COLUMNS[name], shift))
        ranks.extend(session.meta.ranks or ())
        next_rank = max(r.rank for r in ranks) + 1 if ranks else next_rank + 1
    meta = _merged_meta(sessions, ranks, aligned, doubts)
    base = Session()
    return Session(
        timeline=_concat(tables["timeline"], base.timeline, ordered=True),
        api_calls=_concat(tables["api_calls"], base.api_calls),
        nvtx_ranges=_concat(tables["nvtx_ranges"], base.nvtx_ranges),
        meta=meta,
    )


def _shifted(frame: pd.DataFrame, columns: tuple[str, ...], shift: int) -> pd.DataFrame:
    """Times moved onto the common axis, in place (the frame was just read; -1, 'unknown',
    stays -1)."""
    if not shift:
        return frame
    for column in columns:
        if column in frame:
            values = pd.to_numeric(frame[column], errors="coerce").to_numpy()
            frame[column] = np.where(values < 0, values, values + shift)
    return frame


def _concat(frames: list[pd.DataFrame], empty: pd.DataFrame, ordered: bool = False) -> pd.DataFrame:
    """The frames one after another (rank by rank); `ordered`: sorted by start as one trace's
    timeline is (the CUDA calls and NVTX ranges stay in rank order: their users sort them)."""
    if not frames:
        return empty
    merged = pd.concat(frames, ignore_index=True)
    if ordered and "start_ns" in merged:
        order = np.argsort(merged["start_ns"].to_numpy(), kind="stable")
        merged = merged.iloc[order].reset_index(drop=True)
    return merged


def _merged_meta(
    sessions: Sequence[Session], ranks: list[Rank], aligned: bool, doubts: list[str]
) -> SessionMeta:
    """The first report's meta, with every report's sources, ranks and warnings (one report's
    host, start and environment are not the run's)."""
    first = sessions[0].meta
    hosts = sorted({r.host for r in ranks} - {""})
    unaligned = "unaligned: a report lacks its start time; each counts from its own"
    return replace(
        first,
        sources=tuple(src for s in sessions for src in s.meta.sources),
        warnings=tuple(dict.fromkeys([*(w for s in sessions for w in s.meta.warnings), *doubts])),
        ranks=tuple(sorted(ranks, key=lambda r: r.rank)),
        rank_env=None,
        session_start_utc_ns=None,
        host=None,
        hosts=tuple(hosts) if hosts else first.hosts,
        rank_time_axis=first.rank_time_axis if aligned else unaligned,
    )


Reader = Callable[[Path], Session]


Limits = tuple[float | None, float | None]  # the caller's --max-input-mb and row limit


def _read_one(job: tuple[Reader, Path, Limits]) -> Session | tuple[str, str]:
    """A worker's read, under the caller's input limits (a worker does not inherit them); an
    input error comes back as (message, hint) (an exception's pickle would lose the hint)."""
    reader, path, limits = job
    try:
        with source.input_limit(*limits):
            return reader(path)
    except InputError as exc:
        return exc.message, exc.hint


def _checked(result: Session | tuple[str, str]) -> Session:
    if isinstance(result, tuple):
        raise InputError(*result)
    return result


def read_reports(jobs: Sequence[tuple[Reader, Path]], workers: int | None = None) -> list[Session]:
    """Each (reader, path) read, in worker processes when there are many."""
    if len(jobs) < PARALLEL_FROM:
        return [reader(path) for reader, path in jobs]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers < 2:
        return [reader(path) for reader, path in jobs]
    from concurrent.futures import ProcessPoolExecutor  # 10 ms of every start-up otherwise

    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            limits = source.chosen_limits()
            results = list(
                pool.map(
                    _read_one,
                    [(reader, path, limits) for reader, path in jobs],
                    chunksize=max(1, len(jobs) // (4 * workers)),
                )
            )
    except (OSError, RuntimeError):  # no worker can be started here: read them in turn
        return [reader(path) for reader, path in jobs]
    return [_checked(r) for r in results]


def is_rank_set(sessions: Sequence[Session]) -> bool:
    """Several reports that each hold a timeline (and no ncu kernels): one run's ranks."""
    return len(sessions) > 1 and all(s.has_timeline() and not s.has_kernels() for s in sessions)
