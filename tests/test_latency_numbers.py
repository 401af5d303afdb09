"""Issue 39, item 2, seventh pass: text counted by its numbers instead of hashed again, regions
sliced instead of copied, stretches counted in integers; each gives what the code it replaced
gives, value for value."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nsdiag
from nsdiag.analysis.program import layout
from nsdiag.analysis.program.code import _Idle, _most_first
from nsdiag.analysis.program.timeline import waits
from nsdiag.analysis.program.timeline.overlap import STAGES, stage_numbers
from nsdiag.analysis.region.sequence import MIN_MATCH, _fewest_matches, _periodic_stretches
from nsdiag.model import store
from nsdiag.model.tables import rows_where
from nsdiag.model.text_codes import distinct_pairs, factorize_all, factorize_text
from nsdiag.render import text_layout
from tests.test_latency_sequence import _convolved

DATA = Path(__file__).parent / "data"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 300)), max_size=200))
def test_distinct_pairs_are_numpy_unique(pairs: list[tuple[int, int]]) -> None:
    first = np.array([p[0] for p in pairs], dtype=np.int64)
    second = np.array([p[1] for p in pairs], dtype=np.int64)
    width = int(second.max()) + 1 if len(second) else 1
    unique, row, count = np.unique(first * width + second, return_inverse=True, return_counts=True)
    firsts, seconds, rows, counts = distinct_pairs(first, second)
    assert firsts.tolist() == (unique // width).tolist()
    assert seconds.tolist() == (unique % width).tolist()
    assert rows.tolist() == row.reshape(-1).tolist()
    assert counts.tolist() == count.tolist()
    assert all(a.dtype == np.int64 for a in (firsts, seconds, rows, counts))


def test_fewest_matches_is_the_share_threshold() -> None:
    for period in range(1, 5000):
        fewest = _fewest_matches(period)
        assert fewest / period >= MIN_MATCH
        assert (fewest - 1) / period < MIN_MATCH


MIXED = pd.DataFrame(
    {
        "start_ns": np.arange(12, dtype="int64") * 10,
        "name": pd.Series([f"k{i % 3}" for i in range(12)], dtype="str"),
        "bytes": np.linspace(0, 1, 12),
        "flag": np.arange(12) % 2 == 0,
    },
    index=np.arange(100, 112),
)


@pytest.mark.parametrize(
    "rows",
    [[], [0], [3, 4, 5, 6], list(range(12)), [0, 2], [1, 2, 3, 9, 10], [11]],
    ids=["none", "first", "one run", "all", "two", "two runs", "last"],
)
def test_rows_where_are_the_masked_rows(rows: list[int]) -> None:
    mask = np.zeros(len(MIXED), dtype=bool)
    mask[rows] = True
    expected = MIXED[mask].reset_index(drop=True)
    pd.testing.assert_frame_equal(rows_where(MIXED, mask), expected, check_exact=True)
    pd.testing.assert_frame_equal(rows_where(MIXED, list(mask)), expected, check_exact=True)


def _work(idle: pd.DataFrame) -> SimpleNamespace:
    codes, functions = factorize_text(idle["outer"])
    return SimpleNamespace(idle=idle, idle_functions=(codes, functions), idled_in=set(functions))


@pytest.mark.parametrize("seed", range(10))
def test_idle_by_function_is_the_groupby_of_the_gaps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    functions = np.array(["torch.optim.AdamW.step", "forward", "", "b", "a"], dtype=object)
    idle = pd.DataFrame(
        {
            "outer": pd.Series(functions[rng.integers(0, len(functions), n)], dtype="str"),
            "inner": pd.Series(functions[rng.integers(0, len(functions), n)], dtype="str"),
            "launch": rng.random(n) * 1e4,
            "cpu": rng.random(n) * 1e3,
            "sync_ns": rng.integers(0, 10**6, n).astype("float64"),
        }
    )
    for columns in (("launch",), ("cpu", "launch"), ("sync_ns", "cpu", "launch")):
        part = _Idle(_work(idle), columns)  # type: ignore[arg-type]
        grouped = part.frame.groupby("outer")["saved"].sum()
        got = part.by_function()
        assert got.index.tolist() == grouped.index.tolist()
        assert got.to_numpy().tobytes() == grouped.to_numpy().tobytes()  # bit for bit
        assert part.functions() == set(idle["outer"])
        assert len(part) == len(part.frame)


def test_idle_with_a_missing_function_is_grouped_as_pandas_groups_it() -> None:
    idle = pd.DataFrame(
        {"outer": pd.Series(["f", None, "g", "f"], dtype="str"), "launch": [1.0, 2.0, 3.0, 4.0]}
    )
    part = _Idle(_work(idle), ("launch",))  # type: ignore[arg-type]
    assert part.by_function().to_dict() == {"f": 5.0, "g": 3.0}
    assert part.functions() == {"f", "g"}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefghij"), st.sampled_from([0.0, 1.0, 2.0, 7.5])))
def test_most_first_is_the_series_sort(weights: dict[str, float]) -> None:
    series = pd.Series(weights, dtype=float)
    ranked, total = _most_first(weights)
    assert ranked == list(series.sort_values(ascending=False).items())
    assert total == float(series.sum())
    assert _most_first(series) == (ranked, total)


def test_layout_conversions_found_by_number_are_those_isin_finds() -> None:
    names = [
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(int)",
        "void at::native::elementwise_kernel<128, 4>(int)",
        "void at::native::batch_norm_transform_input_channels_last_kernel<float>(int)",
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>(int)",
        "transpose_readWrite_alignment_kernel",
    ]
    rng = np.random.default_rng(0)
    launches = pd.DataFrame(
        {"name": pd.Series([names[i] for i in rng.integers(0, len(names), 300)], dtype="str")}
    )
    ctx = SimpleNamespace(launches=launches, kernels=())
    # no profiled kernels: no strided copies, the names alone decide
    marked = {n for n in launches["name"].unique() if layout.named_conversion(n)}
    expected = launches[launches["name"].isin(marked)]
    found = layout._conversions(ctx)  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(found, expected)
    assert 0 < len(found) < len(launches)


@pytest.mark.parametrize("seed", range(5))
def test_stage_numbers_are_the_categorical_codes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool = np.array(["kernel", "h2d", "d2h", "", "kernel"], dtype=object)
    stages = pool[rng.integers(0, len(pool), int(rng.integers(0, 500)))]
    with warnings.catch_warnings():  # pandas 3 warns of values outside the categories
        warnings.simplefilter("ignore")
        expected = pd.Categorical(stages, categories=list(STAGES)).codes.astype("int64")
    assert stage_numbers(stages).tolist() == expected.tolist()


def _stretches_by_groupby(rows: list[pd.DataFrame], names: object) -> pd.DataFrame:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(waits, "_one_per_stretch", lambda joined, keys: None)
        return waits._stretches(rows, names)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name",
    ["programs/train_loader", "third_party/vit_fp32", "idioms/optim_step", "idioms/copy_feed"],
)
def test_stretches_are_those_the_groupby_gives(name: str) -> None:
    """The CPU stretches sorted on their process, thread and start are the seven-key groupby's
    (value for value, in its order), on recordings whose hosts compute between launches."""
    from nsdiag.analysis.engine import _view
    from nsdiag.analysis.region.choose import choose_region
    from nsdiag.analysis.region.scope import restrict

    session = nsdiag.load([str(DATA / name)])
    region = choose_region(session.timeline, session.api_calls, session.nvtx_ranges)
    scoped = restrict(session, region)
    view = _view(scoped, region)
    assert view is not None
    seen: list[tuple[list[pd.DataFrame], object]] = []
    real = waits._stretches

    def keep(rows: list[pd.DataFrame], names: object) -> pd.DataFrame:
        seen.append((rows, names))
        return real(rows, names)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(waits, "_stretches", keep)
        account = waits.account(view, scoped.api_calls, region)
    assert len(seen) == 1 and len(account.cpu_stretches)
    rows, names = seen[0]
    expected = _stretches_by_groupby(rows, names)
    pd.testing.assert_frame_equal(account.cpu_stretches, expected, check_exact=True)


def test_a_stretch_twice_is_summed_as_the_groupby_sums_it() -> None:
    row = {
        "process_id": [1], "thread_id": [7], "start_ns": [10], "end_ns": [20],
        "idle_ns": [1.5], "before": [0], "after": [0], "after_copy": [False],
    }  # fmt: skip
    rows = [pd.DataFrame(row), pd.DataFrame({**row, "idle_ns": [2.0]})]
    names = waits._Names(np.array(["cudaLaunchKernel"], dtype=object))
    got = waits._stretches(rows, names)
    assert got["idle_ns"].tolist() == [3.5]
    pd.testing.assert_frame_equal(got, _stretches_by_groupby(rows, names))


WORDS = st.sampled_from(
    ["kernel", "at::native::vectorized_elementwise_kernel<…>", "->", "2.59", "ms", "µs", "(",
     "threshold", "<=", "16)", "launches,", "step;", "saved:", "done.", "x" * 130, "(grid", "\n",
     "  ", "\u00a0", "1,216", "GB/s", "a", "of"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.lists(WORDS, min_size=0, max_size=900),
    st.integers(1, 6),
    st.booleans(),
    st.sampled_from([60, 100, 140]),
    st.sampled_from(["", "    why: ", "  NSD410 "]),
)
def test_a_clipped_paragraph_wraps_as_its_whole_text_does(
    words: list[str], lines: int, whole_sentence: bool, width: int, prefix: str
) -> None:
    text = " ".join(words)
    got = text_layout.wrap(text, width, prefix, lines, whole_sentence)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_layout, "_enough", lambda text, needed: text)
        whole = text_layout.wrap(text, width, prefix, lines, whole_sentence)
    assert got == whole


def test_a_long_message_is_wrapped_from_its_start() -> None:
    text = " -> ".join(f"at::native::kernel_{i}<float>" for i in range(3000))
    assert len(text_layout._enough(text, 500)) < 2000 < len(text)
    assert text_layout._enough("short text", 500) == "short text"


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=12),
    st.integers(1, 30),
    st.lists(st.integers(0, 400), max_size=12),
    st.integers(1, 14),
    st.integers(1, 4),
)
def test_stretches_skipped_by_their_count_are_none(
    body: list[int], repeats: int, strays: list[int], period: int, least: int
) -> None:
    """A loop body repeated, with stray launches put in: the periods whose matches the count
    rules out have no stretch by the convolution's definition either."""
    codes = body * repeats
    for at in strays:
        codes.insert(min(at, len(codes)), 9)
    array = np.asarray(codes, dtype="int64")
    assert _periodic_stretches(array, period, least) == _convolved(array, period, least)


def test_wide_text_read_once_only_where_the_first_pass_reads_it_as_text(tmp_path: Path) -> None:
    """Text that looks like numbers or true/false, or that has a cell missing, is read in a
    pass of its own; a table whose text is all whole text is read once; either as the one-pass
    read gives it."""
    from tests.test_latency_arrays import _one_pass

    dtypes = {f"m{i}": "float64" for i in range(120)} | {
        "name": "str", "flag": "str", "count": "str", "gone": "str",
    }  # fmt: skip
    rows = [
        {**{f"m{i}": str(i) for i in range(120)},
         "name": "k<1>", "flag": "True", "count": "3", "gone": ""},
        {**{f"m{i}": "" for i in range(120)},
         "name": "k <2>", "flag": "False", "count": "4", "gone": store.MISSING},
    ]  # fmt: skip
    path = tmp_path / "raw.csv.gz"
    pd.DataFrame(rows).to_csv(path, index=False)
    numeric = {c for c in dtypes if dtypes[c] != "str"}
    first = pd.read_csv(path, keep_default_na=False, na_values=["", store.MISSING])
    assert store._read_as_text(first, ["name"])
    for unsure in ("flag", "count", "gone"):
        assert not store._read_as_text(first, ["name", unsure])
    two = store._read_wide(path, numeric, dtypes, {})
    assert two is not None
    assert two["flag"].tolist() == ["True", "False"] and two["count"].tolist() == ["3", "4"]
    assert two["gone"].tolist()[0] == "" and pd.isna(two["gone"].tolist()[1])
    pd.testing.assert_frame_equal(two, _one_pass(path, dtypes), check_exact=True)
    whole = {c: t for c, t in dtypes.items() if c in numeric or c == "name"}
    pd.DataFrame(rows)[list(whole)].to_csv(path, index=False)
    reads: list[object] = []
    real = pd.read_csv

    def counted(*args: object, **kwargs: object) -> pd.DataFrame:
        reads.append(kwargs.get("usecols"))
        return real(*args, **kwargs)  # type: ignore[call-overload, no-any-return]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store.pd, "read_csv", counted)
        once = store._read_wide(path, numeric, whole, {})
    assert once is not None and reads == [None]  # the first pass alone
    assert once["name"].tolist() == ["k<1>", "k <2>"]
    pd.testing.assert_frame_equal(once, _one_pass(path, whole), check_exact=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["a", "b", "x" * 60, ""]), st.none()), max_size=60))
def test_factorize_all_numbers_missing_values_as_pandas_does(values: list[object]) -> None:
    array = np.array(values, dtype=object)
    codes, uniques = pd.factorize(array, use_na_sentinel=False)
    got_codes, got_uniques = factorize_all(array)
    assert got_codes.tolist() == codes.tolist()
    assert [u is None or u != u for u in got_uniques] == [u is None or u != u for u in uniques]
    assert [u for u in got_uniques if isinstance(u, str)] == [
        u for u in uniques if isinstance(u, str)
    ]
