"""`pandas.factorize` for columns of text, long names through a Python dict.

A timeline's name column holds 10^5 launches' kernel names of a few hundred characters each
(templated C++ names), and a diagnosis numbers it in a dozen places. pandas' string hash table
hashes every character of every string on each call; a dict uses the hash each string object
keeps after its first use: 4 ms against 15 ms for 50,000 names (idioms/optim_step). On short
text (grids, blocks, function names) pandas is faster, and numbers it; so it is where every
value is a new one (an emit_nvtx trace's 69,000 op ranges: 9 ms against 14), which hashes
each string once either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

IntArray = npt.NDArray[np.int64]
LONG = 48  # characters: text this long, or longer, is hashed faster by the dict
SAMPLE = 64  # values looked at to tell long, repeated text from the rest


def factorize_text(
    values: pd.Series | pd.Index | npt.NDArray[Any] | Iterable[Any],
) -> tuple[IntArray, list[Any]]:
    """`pandas.factorize(values)`'s codes and uniques (as a list): each distinct value numbered
    in order of first appearance, a missing value -1. For columns of strings: values that are
    equal are one (as in pandas, where 1 and 1.0 would be one too)."""
    if not isinstance(values, pd.Series | pd.Index | np.ndarray):
        values = np.array(list(values), dtype=object)
    # spread over the column: a timeline's first launches may be short-named warm-up kernels
    step = max(len(values) // SAMPLE, 1)
    seen = (values.iloc[::step] if isinstance(values, pd.Series) else values[::step]).tolist()
    long = any(isinstance(v, str) and len(v) >= LONG for v in seen)
    if not long or _mostly_new(seen):
        if isinstance(values, pd.Series | pd.Index) and isinstance(values.dtype, pd.StringDtype):
            values = values.to_numpy(dtype=object)  # pandas numbers str arrays 2x slower
        codes, uniques = pd.factorize(values)
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
    pairs, row, count = np.unique(
        first.astype(np.int64) * width + second, return_inverse=True, return_counts=True
    )
    return pairs // width, pairs % width, row.reshape(-1).astype(np.int64), count.astype(np.int64)
