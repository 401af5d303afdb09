"""`pandas.factorize` for columns of text, by pandas' object hash table.

A timeline's name column holds 10^5 launches' kernel names of a few hundred characters each
(templated C++ names), and a diagnosis numbers it in a dozen places. `pd.factorize` numbers
text in its string hash table, which hashes every character of every string on each call: 20
ms for 50,000 names (idioms/optim_step). Its object hash table (the one it uses for values
that are not all text) uses the hash each string object keeps after its first use, and a name
read from a table is one object per distinct value, compared by identity: 2.1 ms, and no slower
on short text (grids, blocks: 2.1 against 2.1-3.8 ms) or on text whose every value is new.
`pandas._libs` is not public API: where it lacks the table, long repeated text goes through a
Python dict (4.9 ms for those names) and the rest through `pd.factorize`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

try:  # not in pandas-stubs
    from pandas._libs.hashtable import PyObjectHashTable  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - a pandas without it: the dict below
    PyObjectHashTable = None

IntArray = npt.NDArray[np.int64]
LONG = 48  # characters: without the table, text this long is hashed faster by the dict
SAMPLE = 64  # values looked at to tell long, repeated text from the rest


def factorize_text(
    values: pd.Series | pd.Index | npt.NDArray[Any] | Iterable[Any],
) -> tuple[IntArray, list[Any]]:
    """`pandas.factorize(values)`'s codes and uniques (as a list): each distinct value numbered
    in order of first appearance, a missing value -1. For columns of strings: values that are
    equal are one (as in pandas, where 1 and 1.0 would be one too)."""
    if not isinstance(values, pd.Series | pd.Index | np.ndarray):
        values = np.array(list(values), dtype=object)
    objects = _objects(values)
    if PyObjectHashTable is not None and objects is not None:
        # missing values (None, NaN, NA) -1 and left out of the uniques, as pd.factorize
        distinct, numbers = PyObjectHashTable(len(objects)).factorize(objects)
        return numbers.astype(np.int64, copy=False), distinct.tolist()
    # spread over the column: a timeline's first launches may be short-named warm-up kernels
    step = max(len(values) // SAMPLE, 1)
    seen = (values.iloc[::step] if isinstance(values, pd.Series) else values[::step]).tolist()
    long = any(isinstance(v, str) and len(v) >= LONG for v in seen)
    if not long or _mostly_new(seen):
        codes, uniques = pd.factorize(objects if objects is not None else values)
        return codes.astype(np.int64, copy=False), uniques.tolist()
    index: dict[Any, int] = {}
    number = index.setdefault
    codes = np.array([number(v, len(index)) for v in values.tolist()], dtype=np.int64)
    keys = list(index)
    gone = [type(k) is not str and _missing(k) for k in keys]  # text is never missing
    if not any(gone):
        return codes, keys
    # missing values (NaN, None, NA: each NaN object its own key) are -1, the others renumbered
    renumbered = np.cumsum(np.logical_not(gone)) - 1
    renumbered[np.asarray(gone)] = -1
    return renumbered[codes].astype(np.int64), [k for k, g in zip(keys, gone, strict=True) if not g]


def factorize_all(
    values: pd.Series | pd.Index | npt.NDArray[Any],
) -> tuple[IntArray, list[Any]]:
    """`pandas.factorize(values, use_na_sentinel=False)`: as `factorize_text`, a missing value
    numbered too (among the uniques where pandas puts it)."""
    codes, uniques = factorize_text(values)
    if not (codes < 0).any():
        return codes, uniques
    codes, with_missing = pd.factorize(values, use_na_sentinel=False)
    return codes.astype(np.int64, copy=False), with_missing.tolist()


def _objects(values: pd.Series | pd.Index | npt.NDArray[Any]) -> npt.NDArray[Any] | None:
    """The values as a one-dimensional object array where they are text or objects (a str
    column's own array, not a copy); None for numbers and the like, which pandas numbers."""
    if isinstance(values, np.ndarray):
        return values if values.dtype == object and values.ndim == 1 else None
    if values.dtype == object or isinstance(values.dtype, pd.StringDtype):
        return values.to_numpy(dtype=object)
    return None


def _mostly_new(sample: list[Any]) -> bool:
    """Whether most of the sampled values differ (each kernel name recurs every iteration; an
    op range's name carries its sequence number)."""
    try:
        return len(set(sample)) > len(sample) // 2
    except TypeError:  # an unhashable value: pandas says what it makes of it
        return True


def _missing(value: Any) -> bool:
    found = pd.isna(value)
    return bool(found) if isinstance(found, bool | np.bool_) else False


def distinct_pairs(
    first: IntArray, second: IntArray
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """The distinct (first, second) pairs of two columns' numbers (none negative), sorted: each
    pair's first and second number, each row's pair and each pair's rows. Two columns are
    numbered once as one, instead of hashing tuples row by row."""
    width = int(second.max()) + 1 if len(second) else 1
    # numbered by a hash table, then the few distinct pairs sorted: `np.unique` sorts every row
    # (2.8 against 1.1 ms on 50,000 launches)
    numbers, found = pd.factorize(first.astype(np.int64) * width + second)
    order = np.argsort(found)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    pairs, row = found[order], rank[numbers]
    count = np.bincount(row, minlength=len(pairs)).astype(np.int64)
    return pairs // width, pairs % width, row, count
