"""Issue 39, item 2: `model/launches.signatures` groups launches with index arrays (a DataFrame
groupby per signature and per duration group was a third of explain on a 50k-launch step). The
records must be exactly what the straightforward groupby gives, field by field, positions too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nsdiag
from nsdiag.model.launches import Signature, duration_groups, kernel_launches, signatures
from nsdiag.model.signature import signature_keys

DATA = Path(__file__).parent / "data"


def _by_groupby(launches: pd.DataFrame) -> list[Signature]:
    """The signatures as a pandas groupby on the key and then on the duration group gives them."""
    inside = launches["in_region"].astype(bool) if "in_region" in launches else None
    keyed = launches.assign(_pos=range(len(launches)))
    if inside is not None:
        keyed = keyed[inside.to_numpy()]
    total = float(keyed["duration_ns"].sum())
    if "filter_name" not in keyed:
        keyed["filter_name"] = keyed["function"]
    parts = ["filter_name", "name", "grid", "block"]
    key = signature_keys(keyed, exact=True, function="filter_name")
    rows = []
    for _, group in keyed.groupby(key.where(keyed[parts].notna().all(axis=1)), sort=False):
        labels = duration_groups(
            group["duration_ns"].tolist(),
            contended=group["contended"].astype(bool).tolist() if "contended" in group else None,
        )
        for variant, part in group.groupby(pd.Series(labels, index=group.index), sort=True):
            ns = float(part["duration_ns"].sum())
            positions = tuple(int(p) for p in part["_pos"])
            rows.append(
                Signature(
                    str(group["name"].iloc[0]),
                    str(part["function"].iloc[0]),
                    str(group["grid"].iloc[0]),
                    str(group["block"].iloc[0]),
                    len(part),
                    ns,
                    ns / total if total else 0.0,
                    positions[0],
                    str(part["filter_name"].iloc[0]),
                    int(variant),
                    max(labels) + 1,
                    float(part["duration_ns"].median()),
                    positions,
                )
            )
    return sorted(rows, key=lambda s: (-s.total_ns, s.first))


def _fields(found: list[Signature]) -> list[tuple[object, ...]]:
    return [(*(getattr(s, f) for f in Signature.__dataclass_fields__),) for s in found]


@pytest.mark.parametrize(
    "name", ["idioms/optim_step", "programs/lm_train_full", "diff_demo/elementwise_compiled"]
)
def test_recorded_timelines_group_as_a_groupby_does(name: str) -> None:
    launches = kernel_launches(nsdiag.load([str(DATA / name)]).timeline)
    assert len(launches) > 600
    found = signatures(launches)
    assert len(found) >= 5
    assert _fields(found) == _fields(_by_groupby(launches))


def test_a_region_and_variants_and_contended_launches() -> None:
    """Launches outside the region left out, one name in two duration groups, a contended
    launch joining the nearer group, and a launch missing its grid left out."""
    rng = np.random.default_rng(7)
    n = 400
    names = rng.choice(["gemm", "relu", "add"], n)
    durations = np.where(names == "gemm", rng.choice([1000.0, 5000.0], n), rng.uniform(10, 12, n))
    launches = pd.DataFrame(
        {
            "name": names,
            "function": names,
            "filter_name": names,
            "grid": np.where(rng.uniform(size=n) < 0.02, None, "(1,1,1)"),
            "block": "(128,1,1)",
            "duration_ns": durations,
            "contended": rng.uniform(size=n) < 0.1,
            "in_region": rng.uniform(size=n) < 0.8,
        }
    )
    found = signatures(launches)
    assert {s.variants for s in found if s.name == "gemm"} == {2}
    assert all(launches["in_region"].iloc[p] for s in found for p in s.positions)
    assert _fields(found) == _fields(_by_groupby(launches))


def test_no_launch_in_the_region_gives_no_signature() -> None:
    launches = pd.DataFrame(
        {
            "name": ["k"],
            "function": ["k"],
            "grid": ["(1,1,1)"],
            "block": ["(1,1,1)"],
            "duration_ns": [5.0],
            "in_region": [False],
        }
    )
    assert signatures(launches) == _by_groupby(launches) == []
