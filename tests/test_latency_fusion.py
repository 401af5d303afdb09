"""Issue 30, the fusion analysis's steps: found with array operations on the whole launch
sequence, the same chains to the last bit as the rule's per-step definition, and Python objects
made only for the steps of a chain (a BERT timeline has 68,766 steps and 9,198 in chains)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.program import fusion

DATA = Path(__file__).parent / "data"


def _calls(name: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """What the fusion analysis passed to `chains` and got back, diagnosing a recording."""
    seen: list[tuple[Any, ...]] = []
    real = fusion.chains

    def spy(sequence: pd.DataFrame, params: Mapping[str, float], claimed: Any = None) -> Any:
        found = real(sequence, params, claimed)
        seen.append((sequence, params, claimed, found))
        return found

    monkeypatch.setattr(fusion, "chains", spy)
    diagnose(nsdiag.load([str(DATA / name)]))
    assert seen
    return seen


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
    for sequence, params, claimed, found in _calls(name, monkeypatch):
        got = [[_key(step) for step in chain] for chain in found]
        assert got == _by_definition(sequence, params, claimed)
        assert got


def test_objects_only_for_the_steps_of_chains(monkeypatch: pytest.MonkeyPatch) -> None:
    """BERT served under a CUDA graph: 68,766 steps, a FusionStep each before issue 30's fix
    (1.1 s of its 2.8 s explain); now one per step of a chain."""
    made = itertools.count()
    real = fusion.FusionStep

    def counted(*args: Any, **kwargs: Any) -> fusion.FusionStep:
        next(made)
        return real(*args, **kwargs)

    monkeypatch.setattr(fusion, "FusionStep", counted)
    [(sequence, _, _, found)] = _calls("third_party/bert_serve_graph.sqlite.gz", monkeypatch)
    in_chains = sum(len(chain) for chain in found)
    assert len(sequence) > 80_000 and in_chains > 5_000
    assert next(made) == in_chains
