"""Issue 30, the wait account (analysis/program/timeline/waits.py): a gap whose samples all fall
in one run of one host category is that category without sampling it, and the iterations are
summed from one sort of the gaps; both give to the last bit what sampling every gap and scanning
every gap per iteration give (the account's definition: the sampling with the shortcut switched
off, and the per-iteration scan kept here as the reference)."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.program.timeline import waits
from nsdiag.analysis.program.timeline.waits import CATEGORIES, _Names

DATA = Path(__file__).parent / "data"


def _sampled(
    gaps: pd.DataFrame, api: pd.DataFrame, min_cpu_ns: float
) -> tuple[npt.NDArray[np.float64], pd.DataFrame]:
    """The account's definition: every gap sampled SAMPLES times on its launching thread (the
    shortcut switched off: no gap is taken as one run)."""

    def no_single_run(thread: Any, starts: Any, *args: Any) -> tuple[Any, Any]:
        return np.zeros(len(starts), "int64"), np.zeros(len(starts), bool)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(waits, "_single_run", no_single_run)
        names = _Names(api["name"].astype(str).to_numpy(dtype=object))
        return waits._host_shares(gaps, api, min_cpu_ns, names)


def _host(seed: int, n_calls: int = 400, n_gaps: int = 300) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two host threads of random CUDA calls (nested, touching, of no duration, syncs and
    allocations among them; long CPU stretches now and then) and gaps on them and on a thread
    with no calls, some of no length, some inside one call, some across many."""
    rng = np.random.default_rng(seed)
    names = np.array(
        ["cudaLaunchKernel", "cudaMemcpyAsync", "cudaMalloc", "cudaStreamSynchronize"], object
    )
    name = names[rng.choice(4, n_calls, p=[0.7, 0.1, 0.1, 0.1])]
    pause = np.where(rng.random(n_calls) < 0.05, rng.integers(500_000, 3_000_000, n_calls), 0)
    start = np.cumsum(rng.integers(0, 40_000, n_calls) + pause)
    length = rng.choice([0, 1, 5_000, 30_000, 200_000], n_calls)
    api = pd.DataFrame(
        {
            "name": name,
            "start_ns": start,
            "end_ns": start + length,
            "thread_id": rng.choice([11, 12], n_calls),
            "process_id": 1,
            "is_sync": name == "cudaStreamSynchronize",
        }
    )
    gap_start = rng.integers(-100_000, int(start[-1]) + 100_000, n_gaps)
    # mostly short gaps (inside a call or between two), some long, some sharing a call's edge
    gap_length = rng.choice([0, 1, 2_000, 20_000, 300_000, 5_000_000], n_gaps)
    edge = rng.random(n_gaps) < 0.2
    gap_start[edge] = rng.choice(np.concatenate([start, start + length]), edge.sum())
    gaps = pd.DataFrame(
        {
            "start_ns": gap_start,
            "end_ns": gap_start + gap_length,
            "idle_ns": gap_length.astype("float64") * rng.random(n_gaps),
            "thread_id": rng.choice([11, 12, 13], n_gaps),
            "process_id": 1,
        }
    ).sort_values("start_ns", kind="stable", ignore_index=True)
    return gaps, api


@pytest.mark.parametrize("seed", range(40))
def test_unsampled_gaps_are_what_sampling_gives(seed: int) -> None:
    gaps, api = _host(seed)
    for min_cpu_ns in (waits.MIN_CPU_STRETCH_NS, 25_000.0):
        shares, stretches = waits._host_shares(
            gaps, api, min_cpu_ns, _Names(api["name"].astype(str).to_numpy(dtype=object))
        )
        expected, expected_stretches = _sampled(gaps, api, min_cpu_ns)
        assert np.array_equal(shares, expected)
        pd.testing.assert_frame_equal(stretches, expected_stretches)


def test_most_gaps_of_a_launching_host_are_not_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 250,000-launch benchmark's shape: each gap between tiny kernels is read from its
    first and last sample, only the gaps where the host changes category are sampled."""
    n = 20_000
    start = np.arange(n, dtype="int64") * 10_000
    api = pd.DataFrame(
        {
            "name": "cudaLaunchKernel",
            "start_ns": start,
            "end_ns": start + 5_000,
            "thread_id": 7,
            "process_id": 1,
            "is_sync": False,
        }
    )
    gaps = pd.DataFrame(
        {
            "start_ns": start + 6_000,
            "end_ns": start + 13_000,
            "idle_ns": 7_000.0,
            "thread_id": 7,
            "process_id": 1,
        }
    )
    sampled: list[int] = []
    real = np.searchsorted

    def counting(a: Any, v: Any, *args: Any, **kwargs: Any) -> Any:
        if np.ndim(v) == 2:
            sampled.append(len(v))
        return real(a, v, *args, **kwargs)

    monkeypatch.setattr(waits.np, "searchsorted", counting)
    shares, _ = waits._host_shares(gaps, api, waits.MIN_CPU_STRETCH_NS, _Names(api["name"]))
    assert sum(sampled) <= 1  # the last gap: the host's calls stop inside it
    assert shares[:-1, CATEGORIES.index("launch")].tolist() == [1.0] * (n - 1)


def _iterations_by_scan(
    gaps: pd.DataFrame, view: Any, api: pd.DataFrame | None, region: Any
) -> pd.DataFrame:
    """The account's iterations by definition: each iteration's gaps found by a scan."""
    windows = waits._windows(region, view)
    rows = []
    syncs = api[api["is_sync"].astype(bool)] if api is not None else None
    s_start = syncs["start_ns"].to_numpy("int64") if syncs is not None else np.zeros(0, "int64")
    s_end = syncs["end_ns"].to_numpy("int64") if syncs is not None else np.zeros(0, "int64")
    for index, (start, end) in enumerate(windows):
        wall = float(end - start)
        mine = (
            gaps[gaps["iteration"] == index] if region is not None and region.iterations else gaps
        )
        idle_by_device = mine.groupby("device")["idle_ns"].sum()
        idle = float(idle_by_device.min()) if len(idle_by_device) else 0.0
        busy = max(wall - idle, 0.0)
        blocked = waits._union_inside(s_start, s_end, start, end)
        host = max(wall - blocked, 0.0)
        opened = float(mine.loc[mine["opened"], "idle_ns"].sum())
        slack = max(wall - max(host, busy), 0.0)
        rows.append(
            {
                "start_ns": start,
                "end_ns": end,
                "wall_ns": wall,
                "busy_ns": busy,
                "blocked_ns": blocked,
                "host_ns": host,
                "slack_ns": slack,
                "opened_idle_ns": opened,
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(10))
def test_iterations_from_one_sort_are_the_scanned_ones(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 5_000
    gaps = pd.DataFrame(
        {
            "device": rng.choice([0, 1, 3], n),
            "start_ns": np.sort(rng.integers(0, 10_000_000, n)),
            "idle_ns": rng.random(n) * 1e4 * rng.choice([1e-3, 1.0, 1e3], n),
            "opened": rng.random(n) < 0.3,
        }
    ).sort_values(["device", "start_ns"], kind="stable", ignore_index=True)
    bounds = np.sort(rng.choice(10_000_000, 21, replace=False))
    iterations = [
        SimpleNamespace(start_ns=int(s), end_ns=int(e))
        for s, e in itertools.pairwise(bounds)
        if rng.random() < 0.9  # some stretches between iterations
    ]
    region = SimpleNamespace(iterations=iterations, windows=[(int(bounds[0]), int(bounds[-1]))])
    gaps["iteration"] = waits._iteration_of(gaps["start_ns"].to_numpy(), region)
    api = pd.DataFrame(
        {"start_ns": [100, 5_000_000], "end_ns": [300_000, 5_100_000], "is_sync": [True, True]}
    )
    view = SimpleNamespace(spans={})
    for reg in (region, None, SimpleNamespace(iterations=[], windows=region.windows)):
        got = waits._iterations(gaps, view, api, reg)
        pd.testing.assert_frame_equal(got, _iterations_by_scan(gaps, view, api, reg))


@pytest.mark.parametrize(
    "name",
    ["programs/train_loader", "programs/step_range", "third_party/train_logging24.sqlite.gz"],
)
def test_recordings_account_as_sampling_every_gap(name: str) -> None:
    """Recorded programs with CPU-bound stretches: the account's shares and CPU stretches are
    the sampled ones."""
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{name} is not in this checkout")
    from nsdiag.analysis.engine import _view
    from nsdiag.analysis.region.choose import choose_region
    from nsdiag.analysis.region.scope import restrict

    session = nsdiag.load([str(path)])
    region = choose_region(session.timeline, session.api_calls, session.nvtx_ranges)
    scoped = restrict(session, region)
    view = _view(scoped, region)
    assert view is not None
    account = waits.account(view, scoped.api_calls, region)
    api = scoped.api_calls
    shares, stretches = _sampled(account.gaps, api, waits.MIN_CPU_STRETCH_NS)
    assert len(account.gaps)
    pd.testing.assert_frame_equal(account.cpu_stretches, stretches)
    got, _ = waits._host_shares(
        account.gaps, api, waits.MIN_CPU_STRETCH_NS, _Names(api["name"].astype(str))
    )
    assert np.array_equal(got, shares)
