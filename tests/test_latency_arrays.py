"""Issue 39, item 2, third pass: the array paths that replaced per-row Python and per-change
pandas calls must give what the straightforward code gives, value for value: text numbered
through a dict (model/text_codes.py), duration groups on arrays (model/launches.py), the
sequence search that leaves uncut the stretches that cannot be the main loop
(analysis/region/sequence.py), and wide session tables read in two passes (model/store.py)."""

from __future__ import annotations

import math
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import nsdiag
from nsdiag.analysis.region import scope, sequence
from nsdiag.model import store, text_codes
from nsdiag.model.launches import _duration_labels, duration_groups, kernel_launches
from nsdiag.model.signature import signature_key
from nsdiag.model.text_codes import LONG, factorize_text

LONG_NAME = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
texts = st.one_of(
    st.sampled_from(["a", "b", LONG_NAME, LONG_NAME + "x", "(1, 1, 1)", ""]),
    st.text(max_size=LONG + 8),
    st.none(),
    st.just(math.nan),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(texts, max_size=80),
    st.sampled_from(["object", "str", "array", "list"]),
    st.booleans(),
)
@example([LONG_NAME, None, "b", math.nan, LONG_NAME, "b"], "object", True)
@example([LONG_NAME, None, "b", math.nan, LONG_NAME, "b"], "object", False)
@example([LONG_NAME, None, "b", LONG_NAME], "str", True)
@example([LONG_NAME, None, "b", LONG_NAME], "str", False)
def test_factorize_text_is_pandas_factorize(values: list[object], form: str, table: bool) -> None:
    """Long text numbered by pandas' object hash table, or (`table` False: a pandas without
    it) by the dict, as pd.factorize numbers it."""
    if not table:
        with mock.patch.object(text_codes, "PyObjectHashTable", None):
            _check_factorize(values, form)
    else:
        _check_factorize(values, form)


def _check_factorize(values: list[object], form: str) -> None:
    series = pd.Series(values, dtype="object" if form != "str" else "str")
    given_as = {
        "object": series,
        "str": series,
        "array": series.to_numpy(dtype=object),
        "list": values,
    }[form]
    codes, uniques = factorize_text(given_as)
    expected_codes, expected_uniques = pd.factorize(series)
    assert codes.dtype == np.int64
    assert codes.tolist() == expected_codes.tolist()
    assert uniques == expected_uniques.tolist()


durations = st.lists(
    st.one_of(
        st.sampled_from([0.0, 1.0, 10.0, 14.0, 16.0, 30.0, 1e9]),
        st.floats(min_value=0, max_value=1e7, allow_nan=False),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(durations, st.one_of(st.none(), st.just("none"), st.just("all"), st.just("some")))
@example([10.0, 11.0, 28.0, 10.5, 27.0], None)
@example([10.0, 30.0, 31.0, 90.0], "some")
@example([10.0, 40.0, 10.5, 11.0, 900.0], "some")  # one uncontended group: all join it
@example([0.0, 5.0, 0.0, 8.0], None)
def test_duration_labels_are_duration_groups(values: list[float], slowed: str | None) -> None:
    flags = None
    if slowed is not None:
        flags = [
            {"none": False, "all": True, "some": i % 3 == 1}[slowed] for i in range(len(values))
        ]
    labels = _duration_labels(
        np.array(values, dtype="float64"), np.array(flags) if flags is not None else None
    )
    assert labels.tolist() == duration_groups(values, contended=flags)


def _every_stretch_cut(
    kernels: pd.DataFrame, synced: np.ndarray, launches: np.ndarray, least: int
) -> tuple[int, list[object]] | None:
    """sequence_iterations as it was: every periodic stretch cut, then the main loop chosen."""
    codes = sequence._signature_codes(kernels, synced)
    if len(codes) < 2 * least:
        return None
    ends = np.maximum(kernels["end_ns"].to_numpy("int64"), launches)
    host_gap = np.diff(launches, prepend=launches[0])
    found = []
    for period in sequence._candidate_periods(codes, least):
        for a, b in sequence._periodic_stretches(codes, period, least):
            iterations = sequence._cut(launches, ends, period, a, b, host_gap)
            if len(iterations) >= least:
                found.append((sum(i.wall_ns for i in iterations), period, iterations))
    if not found:
        return None
    longest = max(covered for covered, _, _ in found)
    main = [f for f in found if f[0] >= sequence.MAIN_LOOP_SHARE * longest]
    _, period, iterations = max(main, key=lambda f: (f[2][-1].start_ns, -f[1]))
    return period, iterations


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=4),
    st.lists(st.integers(min_value=2, max_value=12), min_size=1, max_size=4),
    st.randoms(use_true_random=False),
)
def test_sequence_search_finds_what_cutting_every_stretch_finds(
    bodies: list[int], repeats: list[int], rng: object
) -> None:
    """Loops of several bodies and repeat counts, with stray launches between them and uneven
    host gaps: the pruned search chooses the same period and iterations."""
    names: list[str] = []
    for n, (body, times) in enumerate(zip(bodies, repeats * len(bodies), strict=False)):
        names += [f"k{n}_{i}" for i in range(body)] * times
        names += [f"stray{n}"] * rng.randint(0, 3)  # type: ignore[attr-defined]
    gaps = [rng.randint(1, 50) for _ in names]  # type: ignore[attr-defined]
    launches = np.cumsum(np.array(gaps, dtype="int64"))
    kernels = pd.DataFrame(
        {"name": names, "grid": "(1, 1, 1)", "block": "(256, 1, 1)", "end_ns": launches + 5}
    )
    synced = np.zeros(len(names), dtype=bool)
    for least in (sequence.MIN_ITERATIONS, 2):
        assert sequence.sequence_iterations(kernels, synced, launches, least) == (
            _every_stretch_cut(kernels, synced, launches, least)
        )


DATA = Path(__file__).parent / "data"


def _one_pass(path: Path, dtypes: dict[str, str]) -> pd.DataFrame:
    numeric = [c for c, t in dtypes.items() if store._is_numeric(t)]
    return pd.read_csv(
        path,
        keep_default_na=False,
        na_values={c: ["", store.MISSING] if c in numeric else [store.MISSING] for c in dtypes},
        dtype={c: "str" for c in dtypes if c not in numeric},
        low_memory=False,
    )


def test_wide_tables_read_in_two_passes_as_in_one() -> None:
    """Every wide table of the recorded session folders (raw: 850-906 columns; kernels)."""
    compared = 0
    for manifest in sorted(DATA.rglob(store.MANIFEST)):
        folder = manifest.parent
        if not (folder / "tables").is_dir():
            continue
        meta = store._manifest(folder)
        for name in store.TABLES:
            path = folder / "tables" / f"{name}.csv.gz"
            dtypes = meta["dtypes"].get(name) or {}
            numeric = {c for c, t in dtypes.items() if store._is_numeric(t)}
            if not path.exists() or not store._is_wide(numeric, dtypes):
                continue
            two = store._read_wide(path, numeric, dtypes, {})
            assert two is not None, path
            pd.testing.assert_frame_equal(two, _one_pass(path, dtypes), check_exact=True)
            compared += 1
    assert compared >= 40


def test_wide_table_keeps_empty_text_and_falls_back_on_other_columns(tmp_path: Path) -> None:
    dtypes = {f"m{i}": "float64" for i in range(120)} | {"name": "str", "mode": "str"}
    rows = [
        {**{f"m{i}": "" if i % 7 == 0 else str(i) for i in range(120)}, "name": "", "mode": "1"},
        {**{f"m{i}": store.MISSING for i in range(120)}, "name": store.MISSING, "mode": "x"},
    ]
    path = tmp_path / "raw.csv.gz"
    pd.DataFrame(rows).to_csv(path, index=False)
    numeric = {c for c in dtypes if dtypes[c] != "str"}
    two = store._read_wide(path, numeric, dtypes, {})
    assert two is not None
    assert two["name"].tolist()[0] == "" and pd.isna(two["name"].tolist()[1])
    assert two["mode"].tolist() == ["1", "x"]  # text, not the number it looks like
    pd.testing.assert_frame_equal(two, _one_pass(path, dtypes), check_exact=True)
    other = {**dtypes, "extra": "str"}  # the manifest names a column the file lacks
    assert store._read_wide(path, numeric, other, {}) is None


@pytest.mark.parametrize(
    "recording", ["idioms/optim_step", "programs/train_loader", "profile/duration-groups/session"]
)
def test_shaped_like_by_numbers_is_shaped_like_by_rows(recording: str) -> None:
    """The launches kept for matching a profile's kernels: decided per distinct name, function
    and shape, as launch by launch."""
    session = nsdiag.load([DATA / recording])
    launches = kernel_launches(session.timeline)
    keys = [
        signature_key(n, g, b)
        for n, g, b in zip(
            session.kernels["name"].astype(str),
            session.kernels["grid"],
            session.kernels["block"],
            strict=True,
        )
    ]
    shapes, functions = {(k.grid, k.block) for k in keys}, {k.function for k in keys}
    by_numbers = scope._shaped_like(session.kernels, launches)
    assert 0 < len(by_numbers) <= len(launches)
    pd.testing.assert_frame_equal(
        by_numbers, scope._shaped_like_rows(launches, shapes, functions), check_exact=True
    )
    one_missing = launches.assign(grid=launches["grid"].where(launches.index != 0, None))
    pd.testing.assert_frame_equal(
        scope._shaped_like(session.kernels, one_missing),
        scope._shaped_like_rows(one_missing, shapes, functions),
        check_exact=True,
    )
