"""Issue 30, the fusion analysis's steps: found with array operations on the whole launch
sequence, the same chains to the last bit as the rule's per-step definition, and Python objects
made only for the steps of a chain (a BERT timeline has 68,766 steps and 9,198 in chains)."""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.program import fusion

DATA = Path(__file__).parent / "data"


def _calls(name: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """What the fusion analysis passed to `_chain_bounds` and got back, diagnosing a
    recording, with the chains (`chains`) of that sequence."""
    seen: list[tuple[Any, ...]] = []
    real = fusion._chain_bounds

    def spy(sequence: pd.DataFrame, params: Mapping[str, float], claimed: Any = None) -> Any:
        bounds = real(sequence, params, claimed)
        seen.append((sequence, params, claimed, bounds))
        return bounds

    monkeypatch.setattr(fusion, "_chain_bounds", spy)
    diagnose(nsdiag.load([str(DATA / name)]))
    monkeypatch.setattr(fusion, "_chain_bounds", real)
    assert seen
    return [
        (seq, params, claimed, fusion.chains(seq, params, claimed), bounds)
        for seq, params, claimed, bounds in seen
    ]


def _by_definition(
    sequence: pd.DataFrame, params: Mapping[str, float], claimed: Any
) -> list[list[tuple[Any, ...]]]:
    """The chains as the module's docstring defines them, one stream, one step and one pair of
    steps at a time (each step's sums as ndarray.sum gives them)."""
    seq = sequence.copy()
    if claimed is not None and claimed.any():
        seq.loc[claimed, "kind"] = "attention"
        seq.loc[claimed, ["read_bytes", "write_bytes"]] = np.nan
    found = []
    for _, stream in seq.groupby(["process_id", "stream"], sort=False, dropna=False):
        synced = stream["synced_before"].to_numpy(dtype=bool)
        names = stream["name"].astype(str).to_numpy()
        steps: list[list[dict[str, Any]]] = []
        for i in range(len(stream)):
            if i == 0 or synced[i]:
                steps.append([])
            if not steps[-1] or names[i] != names[i - 1] or synced[i]:
                steps[-1].append({"rows": []})
            steps[-1][-1]["rows"].append(i)
        for segment in steps:
            current: list[dict[str, Any]] = []
            for step in segment:
                _describe(step, stream)
                if current and _linked(current[-1], step, params):
                    current.append(step)
                    continue
                found.append(current)
                current = [step]
            found.append(current)
    at_roof = params["at_roof_dram_pct"]
    return [
        [_key(s) for s in chain]
        for chain in found
        if len(chain) >= 2
        and (
            all(s["kind"] == "elementwise" for s in chain)
            or min(s["min_dram_pct"] for s in chain) < at_roof
        )
    ]


def _describe(step: dict[str, Any], stream: pd.DataFrame) -> None:
    rows = stream.iloc[step["rows"]]

    def values(column: str) -> np.ndarray:
        return rows[column].to_numpy(dtype="float64")

    step["name"] = str(rows["name"].iloc[0])
    step["kind"] = str(rows["kind"].iloc[0])
    step["duration_ns"] = float(np.nan_to_num(values("duration_ns")).sum())
    step["read_bytes"] = float(values("read_bytes").sum())  # NaN: no byte counts
    step["write_bytes"] = float(values("write_bytes").sum())
    step["best_bytes_per_s"] = float(np.nan_to_num(values("best_bytes_per_s")).max())
    step["min_dram_pct"] = float(np.nan_to_num(values("dram_pct")).min())
    step["tensor_pct"] = float(np.nan_to_num(values("tensor_pct")).max())
    step["heavy"] = any(b in ("compute", "launch") for b in rows["bound"])
    step["ranges"] = frozenset(str(r) for r in rows["range"])
    step["has_bytes"] = not (math.isnan(step["read_bytes"]) or math.isnan(step["write_bytes"]))


def _linked(a: dict[str, Any], b: dict[str, Any], params: Mapping[str, float]) -> bool:
    def fusable(s: dict[str, Any]) -> bool:
        if not s["has_bytes"]:
            return bool(s["kind"] == "elementwise")
        return not s["heavy"] and s["tensor_pct"] < 5.0

    if not (fusable(a) and fusable(b)):
        return False
    if a["has_bytes"] and b["has_bytes"]:
        return bool(
            a["write_bytes"] >= params["min_intermediate_bytes"]
            and b["read_bytes"] >= params["min_read_fraction"] * a["write_bytes"]
        )
    return a["kind"] == "elementwise" and b["kind"] == "elementwise"


def _key(step: Any) -> tuple[Any, ...]:
    fields = ("name", "kind", "duration_ns", "read_bytes", "write_bytes", "best_bytes_per_s")
    get = step.get if isinstance(step, dict) else lambda f: getattr(step, f)
    numbers = tuple(
        "nan" if isinstance(v, float) and math.isnan(v) else v for v in map(get, fields)
    )
    return (*numbers, get("min_dram_pct"), get("ranges"))


@pytest.mark.parametrize(
    "name",
    [
        "diff_demo/naive",  # ncu bytes; a GEMM of 16 launches back to back (pairwise sums)
        "programs/verify/lm_train",  # ncu bytes, AMP's multi-tensor kernels in long steps
        "third_party/llama_eager.sqlite.gz",  # eager attention claims its score kernels
        "programs/infer_cnn",  # 912 chains on a timeline with ncu data
    ],
)
def test_chains_are_the_definitions(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for sequence, params, claimed, found, _ in _calls(name, monkeypatch):
        got = [[_key(step) for step in chain] for chain in found]
        assert got == _by_definition(sequence, params, claimed)
        assert got


def _cost(chain: list[fusion.FusionStep], ceiling: float) -> fusion.ChainCost:
    """One chain's cost as the module's docstring defines it, step by step, added left to
    right."""

    def total(values: list[float]) -> float:
        return functools.reduce(operator.add, values)

    time_ns = total([step.duration_ns for step in chain])
    if not all(step.has_bytes for step in chain):
        longest = max(step.duration_ns for step in chain)
        return fusion.ChainCost(time_ns, np.nan, np.nan, time_ns - longest, np.nan, True)
    moved = total([step.read_bytes + step.write_bytes for step in chain])
    intermediate = total([min(a.write_bytes, b.read_bytes) for a, b in itertools.pairwise(chain)])
    remaining = max(moved - 2 * intermediate, 0.0)
    stream_bw = max(max(step.best_bytes_per_s for step in chain), ceiling)
    fused_ns = remaining / stream_bw * 1e9 if stream_bw > 0 else time_ns
    saved = max(time_ns - fused_ns, 0.0)
    return fusion.ChainCost(time_ns, moved, intermediate, saved, stream_bw, False)


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize(
    "name",
    [
        "diff_demo/naive",  # ncu bytes: every cost from bytes
        "programs/verify/lm_train",  # ncu bytes, chains of many steps
        "third_party/llama_eager.sqlite.gz",  # no ncu data: costs from names
        "programs/infer_cnn",  # 912 chains
    ],
)
@pytest.mark.parametrize("ceiling", [0.0, 3.2e12])
def test_chain_costs_at_once_are_each_chains_cost(
    name: str, ceiling: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every chain's cost found at once on arrays (what the analysis reports) is its cost
    step by step, to the last bit."""
    checked = 0
    for _, _, _, found, bounds in _calls(name, monkeypatch):
        if bounds is None:
            continue
        costs = fusion._chain_costs(*bounds, ceiling)
        assert len(found) == len(costs.saved_ns)
        for number, chain in enumerate(found):
            want, got = _cost(chain, ceiling), costs.of(number)
            assert want.by_names == got.by_names
            assert all(
                _same(getattr(want, f), getattr(got, f))
                for f in ("time_ns", "moved_bytes", "intermediate_bytes", "saved_ns")
            ), (number, want, got)
            checked += 1
    assert checked >= 10


def test_long_and_short_chains_add_left_to_right() -> None:
    """Sums of chains longer than SHORT_CHAIN and shorter, against a left-to-right loop; the
    values are chosen so that another order of adding gives another last bit."""
    rng = np.random.default_rng(7)
    values = rng.lognormal(10, 4, 5000)
    lengths = [2, 3, fusion.SHORT_CHAIN, fusion.SHORT_CHAIN + 1, 900, 7, 2]
    first = np.cumsum([0, *lengths[:-1]]) + np.arange(len(lengths))  # one step between chains
    stop = first + np.asarray(lengths)
    got = fusion._in_order(values, first, stop)
    for i, (a, b) in enumerate(zip(first, stop, strict=True)):
        assert got[i] == functools.reduce(operator.add, values[a:b].tolist())
    # numpy's reduction adds in another order: the test tells the two apart
    assert any(
        np.add.reduce(values[a:b]) != got[i]
        for i, (a, b) in enumerate(zip(first, stop, strict=True))
    )


def test_objects_only_for_the_steps_of_chains(monkeypatch: pytest.MonkeyPatch) -> None:
    """BERT served under a CUDA graph: 68,766 steps, a FusionStep each before issue 30's fix
    (1.1 s of its 2.8 s explain); then one per step of a chain; now none in the diagnosis
    (issue 39: the chains' costs are found on arrays), and `chains` (the chains as objects)
    makes one per step of a chain."""
    made = itertools.count()
    real = fusion.FusionStep

    def counted(*args: Any, **kwargs: Any) -> fusion.FusionStep:
        next(made)
        return real(*args, **kwargs)

    monkeypatch.setattr(fusion, "FusionStep", counted)
    [(sequence, _, _, found, _)] = _calls("third_party/bert_serve_graph.sqlite.gz", monkeypatch)
    in_chains = sum(len(chain) for chain in found)
    assert len(sequence) > 80_000 and in_chains > 5_000
    # the diagnosis made none (costs on arrays), `chains` one per step of a chain
    assert next(made) == in_chains


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=30),
    st.lists(
        st.one_of(
            st.floats(min_value=-1e12, max_value=1e12, allow_nan=False),
            st.sampled_from([0.0, -0.0, math.nan, 1e-300, 3.0, 0.1]),
        ),
        min_size=1,
        max_size=400,
    ),
)
@example([6], [-0.0])  # ndarray.sum of negative zeros is +0.0
@example([3, 8, 9], [0.1, 0.2, 0.3])
def test_step_sums_are_ndarray_sums(lengths: list[int], pool: list[float]) -> None:
    """_sums gives each step the sum ndarray.sum gives its values (reduceat's for one or two
    launches), to the last bit and the sign of a zero, for steps short and long."""
    values = np.array([pool[i % len(pool)] for i in range(sum(lengths))], dtype="float64")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype("int64")
    ends = starts + np.asarray(lengths, dtype="int64")
    expected = [
        float(np.add.reduceat(values[a:b], [0])[0]) if b - a <= 2 else float(values[a:b].sum())
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    got = fusion._sums(values, starts, ends).tolist()
    for e, g in zip(expected, got, strict=True):
        assert (math.isnan(e) and math.isnan(g)) or (
            e == g and math.copysign(1, e) == math.copysign(1, g)
        )
