"""One kernel signature key (model/signature.py) for matching, planning and aggregation, and the
two mean durations it lets the JSON tell apart (`region_mean_ns`, `profiled_mean_ns`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.kernel.signatures import aggregate
from nsdiag.analysis.program import launch_sequence
from nsdiag.analysis.region.scope import restrict
from nsdiag.model import quantities
from nsdiag.model.launches import kernel_launches, signatures
from nsdiag.model.names import normalized
from nsdiag.model.signature import SEPARATOR, SignatureKey, signature_key, signature_keys

DATA = Path(__file__).parent / "data"
# ncu exports, nsys exports and session folders holding both
RECORDINGS = (
    "programs/infer_cnn",
    "programs/gemm_shapes.raw.csv.gz",
    "profile/full-0000.raw.csv.gz",
    "profile/transformer_step.sqlite.gz",
    "multi_gpu/ddp_balanced.sqlite.gz",
)


def _load(name: str) -> nsdiag.Session:
    return nsdiag.load([str(DATA / name)])


def _scalar(frame: pd.DataFrame, **variant: object) -> list[str]:
    function = variant.pop("function", None)
    slots = frame[function] if isinstance(function, str) else [None] * len(frame)
    return [
        signature_key(n, g, b, function=f, **variant).text  # type: ignore[arg-type]
        for n, g, b, f in zip(frame["name"], frame["grid"], frame["block"], slots, strict=True)
    ]


@pytest.mark.parametrize("name", RECORDINGS)
def test_scalar_and_vectorised_keys_agree(name: str) -> None:
    session = _load(name)
    tables = []
    if session.has_kernels():
        tables.append(session.kernels)
    if session.has_timeline():
        tables.append(kernel_launches(session.timeline))
    assert tables
    for table in tables:
        assert len(table)
        assert signature_keys(table).tolist() == _scalar(table)
    if session.has_timeline():
        launches = tables[-1]
        exact = signature_keys(launches, exact=True, function="filter_name")
        assert exact.tolist() == _scalar(launches, exact=True, function="filter_name")


def test_key_parts() -> None:
    key = signature_key("void at::native::f<c10::Half>(int)", "(4, 1, 1)", "(128, 1, 1)")
    assert key == SignatureKey("f", "(4, 1, 1)", "(128, 1, 1)", "voidf<Half>(int)")
    assert key.shape == ("f", "(4, 1, 1)", "(128, 1, 1)")
    assert key.text == SEPARATOR.join(key)
    assert key[3] == normalized("void at::native::f<c10::Half>(int)")
    # ncu's two spellings of one kernel are one key; the exact variant keeps them apart
    other = "void f<Half>(int)"
    assert signature_key(other, "(4, 1, 1)", "(128, 1, 1)").name == key.name
    assert signature_key(other, "(4, 1, 1)", "(128, 1, 1)", exact=True).name == other


def test_missing_parts_read_as_str_writes_them() -> None:
    frame = pd.DataFrame({"name": ["k(int)", None], "grid": [1.0, float("nan")]})
    assert signature_keys(frame).tolist() == [
        signature_key("k(int)", 1.0, "").text,
        signature_key(float("nan"), float("nan"), "").text,
    ]
    assert signature_keys(frame.iloc[:0]).tolist() == []


def test_an_ncu_export_and_its_nsys_timeline_key_alike() -> None:
    """infer_cnn is one session: ncu and nsys spell most kernel names differently (cuDNN's
    `engines_precompiled::`, PyTorch's `at::` and `c10::`), and every profiled kernel's key is a
    key of the timeline."""
    session = _load("programs/infer_cnn")
    kernels, launches = session.kernels, kernel_launches(session.timeline)

    def triples(frame: pd.DataFrame) -> set[tuple[str, ...]]:
        parts = (frame[c].astype(str) for c in ("name", "grid", "block"))
        return set(zip(*parts, strict=True))

    spelled, as_ran = triples(kernels), triples(launches)
    assert len(spelled - as_ran) > len(spelled) / 2  # most spellings differ
    assert set(signature_keys(kernels)) <= set(signature_keys(launches))


@pytest.mark.parametrize("name", RECORDINGS)
def test_groupings_are_those_of_the_parts(name: str) -> None:
    """Aggregation groups by the key as it grouped by normalised name, grid and block; the plan's
    exact variant as it grouped by filter name, name, grid and block."""
    session = _load(name)

    def partition(frame: pd.DataFrame, by: pd.Series | list[str]) -> set[frozenset[int]]:
        return {frozenset(g) for g in frame.groupby(by, sort=False).indices.values()}

    if session.has_kernels():
        k = session.kernels.reset_index(drop=True)
        old = pd.DataFrame(
            {
                "name": k["name"].astype(str).map(normalized),
                "grid": k["grid"].astype(str),
                "block": k["block"].astype(str),
            }
        )
        assert partition(k, signature_keys(k)) == partition(old, ["name", "grid", "block"])
    if session.has_timeline():
        t = kernel_launches(session.timeline)
        exact = signature_keys(t, exact=True, function="filter_name")
        assert partition(t, exact) == partition(t, ["filter_name", "name", "grid", "block"])


def test_the_exact_variant_keeps_namespaces_apart() -> None:
    """One timeline's `a::f` and `b::f` of one shape are two signatures to plan (no mangled
    names: ncu filters both by `f`); a profiled `f` matches either."""
    timeline = pd.DataFrame(
        {
            "kind": "kernel",
            "name": ["void a::f(int)", "void b::f(int)", "void a::f(int)"],
            "grid": "(1, 1, 1)",
            "block": "(32, 1, 1)",
            "start_ns": [0, 10, 20],
            "end_ns": [5, 15, 25],
            "duration_ns": [5.0, 5.0, 5.0],
            "stream": 7,
        }
    )
    sigs = signatures(kernel_launches(timeline))
    assert [(s.name, s.launches) for s in sigs] == [("void a::f(int)", 2), ("void b::f(int)", 1)]
    assert sigs[0].key == sigs[1].key  # tolerant: both are `voidf(int)`
    assert sigs[0].shape == ("f", "(1, 1, 1)", "(32, 1, 1)")


def test_launch_sequence_keys_once_per_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch list of infer_cnn took one scalar key per launch (27,038 calls for 60
    signatures, issue 30); now the scalar key is computed per profiled signature (its two
    names) and the launches are keyed in one vectorised pass."""
    calls = []

    def counted(*args: object, **kwargs: object) -> SignatureKey:
        calls.append(args)
        return signature_key(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(launch_sequence, "signature_key", counted)
    d = diagnose(_load("programs/infer_cnn"))
    assert calls and len(calls) <= 2 * len(d.kernels) * 2  # fusion and layout each build it


def test_region_and_profiled_means_in_the_json() -> None:
    """infer_cnn: the region's mean launch (timeline) and the profiled launches' mean (ncu)
    differ by more than 5% on most signatures, and each JSON field holds what it is named."""
    session = _load("programs/infer_cnn")
    d = diagnose(session)
    doc = json.loads(json.dumps(d.to_json(), allow_nan=False))
    assert doc["schema"] == "nsdiag.diagnosis/4"
    assert d.region is not None
    launches = kernel_launches(restrict(session, d.region).timeline)
    in_region = launches["duration_ns"].groupby(signature_keys(launches))
    counts, totals = in_region.size().to_dict(), in_region.sum().to_dict()
    profiled = session.kernels["duration_ns"].groupby(signature_keys(session.kernels)).mean()
    apart = 0
    for k in doc["kernels"]:
        key = signature_key(k["name"], k["grid"], k["block"]).text
        assert "mean_duration_ns" not in k and "mean_duration_ns" not in k["metrics"]
        assert k["region_mean_ns"] == pytest.approx(k["duration_ns"] / k["launches"], rel=1e-9)
        assert k["metrics"]["region_mean_ns"] == pytest.approx(k["region_mean_ns"], rel=1e-9)
        assert k["profiled_mean_ns"] == pytest.approx(profiled[key], rel=1e-9)
        assert k["metrics"]["profiled_mean_ns"] == k["metrics"]["duration_ns"]
        assert k["metrics"]["profiled_mean_ns"] == pytest.approx(k["profiled_mean_ns"], rel=1e-9)
        if k["metrics"].get("duration_groups", 1) == 1:  # every launch in the region counted
            count, total = counts[key], totals[key]
            assert k["launches"] == count
            assert k["region_mean_ns"] == pytest.approx(total / count, rel=1e-9)
        apart += abs(k["region_mean_ns"] / k["profiled_mean_ns"] - 1) > 0.05
    assert apart > len(doc["kernels"]) / 2


def test_launch_rule_messages_give_the_region_mean() -> None:
    """NSD304's "N launches of about X each": N is the region's count, so X its mean."""
    d = diagnose(_load("programs/infer_cnn"))
    hits = [(k, f) for k in d.kernels for f in k.findings if f.rule == "NSD304"]
    assert hits
    for k, f in hits:
        mean = quantities.duration(k.region_mean_ns)
        assert f"{quantities.count(k.launches)} launches of about {mean} each" in f.message
        assert not math.isclose(k.region_mean_ns, k.profiled_mean_ns, rel_tol=0.05)
        shown = {e.metric: e.value for e in f.evidence}
        assert shown["region_mean_ns"] == pytest.approx(k.region_mean_ns)
        assert shown["duration_ns"] == pytest.approx(k.profiled_mean_ns)  # what was compared


def test_aggregate_without_a_timeline_has_equal_means() -> None:
    k = _load("profile/full-0000.raw.csv.gz").kernels
    out = aggregate(k)
    assert (out["region_mean_ns"] - out["profiled_mean_ns"]).abs().max() < 1e-6
    assert "mean_duration_ns" not in out
