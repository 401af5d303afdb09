"""The kernel signature key: what identifies a kernel signature (name + grid + block) wherever
launches are grouped or matched, in one definition.

`SignatureKey(function, grid, block, name)`: the bare function name (as ncu's `function` name
base and nsys's short name have it), grid and block as text, and the demangled name with the
spelling differences between nsys and ncu removed (`model/names.normalized`: namespace
qualifiers, casts on template integers, spaces; ncu's exports of one session print
`at::f<c10::Half>` in one report and `f<Half>` in another). Two launches are one signature when
their keys are equal, whichever tool recorded them. The same key:

- matches profiled kernels (ncu) to a timeline's signatures (nsys): model/matching.py,
  collect/weights.py; `shape` (function, grid, block) is the fallback where a timeline has one
  name for that shape;
- groups profiled launches into the signatures that are diagnosed: analysis/kernel/signatures.py;
- finds a timeline launch's profiled signature: analysis/program/launch_sequence.py.

One variant, on purpose: `exact=True` keeps the name as spelled instead of its normalised form,
and the caller may put another name in the function slot. model/launches.signatures groups one
timeline's launches with it, `function` being the name ncu's filter sees (`filter_name`): one
export spells each kernel one way, so nothing needs tolerating, and two kernels told apart only by
a namespace (`a::f` and `b::f` of one grid and block) stay two signatures to plan.

`signature_key` is the scalar form (one launch); `signature_keys` the vectorised one over a
DataFrame, each row's `SignatureKey.text`, written once per distinct name, grid and block.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.model.names import function_name, normalized
from nsdiag.model.text_codes import factorize_text

SEPARATOR = "\x1f"  # between the parts of a key's text: no kernel name holds it


class SignatureKey(NamedTuple):
    function: str  # bare function name (exact variant: what the caller put there)
    grid: str
    block: str
    name: str  # normalised demangled name (exact variant: the name as spelled)

    @property
    def shape(self) -> tuple[str, str, str]:
        """Function, grid and block: the key without the full name."""
        return self.function, self.grid, self.block

    @property
    def text(self) -> str:
        """The key as one string, what `signature_keys` gives for the same launch."""
        return SEPARATOR.join(self)


@lru_cache(maxsize=1 << 16)
def _spellings(name: str) -> tuple[str, str]:
    """A name's bare function name and its normalised form."""
    return function_name(name), normalized(name)


def signature_key(
    name: object, grid: object, block: object, *, exact: bool = False, function: object = None
) -> SignatureKey:
    """One launch's key. `exact`: keep the name as spelled; `function`: what the function slot
    holds instead of the name's bare function name."""
    text = str(name)
    bare, spelled = _spellings(text)
    return SignatureKey(
        bare if function is None else str(function),
        str(grid),
        str(block),
        text if exact else spelled,
    )


def signature_keys(
    frame: pd.DataFrame, *, exact: bool = False, function: str | None = None
) -> pd.Series:
    """Each row's key text (`SignatureKey.text`), from its `name`, `grid` and `block` columns (a
    missing grid or block column reads as ""); `function`: the column the function slot comes
    from instead of the name's bare function name."""
    codes, texts = signature_codes(frame, exact=exact, function=function)
    return pd.Series(np.array(texts, dtype=object)[codes], index=frame.index, dtype="str")


def signature_values(
    frame: pd.DataFrame, values: Mapping[str, Any], default: Any, *, exact: bool = False
) -> npt.NDArray[Any]:
    """Each row's `values[key text]` (`default` where its key is not there), looked up once per
    distinct key instead of once per row (10^5 launches of 10^2 signatures)."""
    codes, texts = signature_codes(frame, exact=exact)
    found = np.empty(len(texts), dtype=object)
    found[:] = [values.get(text, default) for text in texts]
    return found[codes]


def signature_codes(
    frame: pd.DataFrame, *, exact: bool = False, function: str | None = None
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """`signature_keys` as a number per row and the key text of each number (row i's key is
    `texts[codes[i]]`; two numbers may have one text, when two spellings normalise alike).
    A timeline has 10^5 launches of 10^2 signatures: each distinct (name, grid, block) is
    found by hashing each column once, and its key written once."""
    columns = ("name", "grid", "block", *((function,) if function is not None else ()))
    coded = [_column_codes(frame, column) for column in columns]
    combo, size = np.zeros(len(frame), dtype="int64"), 1
    for part, distinct in coded:
        if size * max(len(distinct), 1) >= 1 << 62:  # renumber before the product overflows
            combo, found = pd.factorize(combo)
            size = len(found)
        combo, size = combo * max(len(distinct), 1) + part, size * max(len(distinct), 1)
    combo, _ = pd.factorize(combo)
    # a row of each distinct combination stands for it (any: they hold the same values)
    row_of = np.zeros(int(combo.max()) + 1 if len(combo) else 0, dtype="int64")
    row_of[combo] = np.arange(len(combo))
    texts = []
    for row in row_of.tolist():
        name, grid, block, *slot = (distinct[part[row]] for part, distinct in coded)
        bare, spelled = _spellings(name)
        texts.append(
            SEPARATOR.join((slot[0] if slot else bare, grid, block, name if exact else spelled))
        )
    return combo.astype("int64", copy=False), texts


def _column_codes(frame: pd.DataFrame, column: str) -> tuple[npt.NDArray[np.int64], list[str]]:
    """A column's text (`_text`) as a number per row and the text of each number. A column of
    strings with none missing is numbered as it is, without writing each value again."""
    if column not in frame:
        return np.zeros(len(frame), dtype="int64"), [""]
    values = frame[column]
    if isinstance(values.dtype, pd.StringDtype):
        codes, distinct = factorize_text(values)
        if not (codes < 0).any():
            return codes, distinct
    return factorize_text(_text(frame, column).to_numpy(dtype=object))


def _text(frame: pd.DataFrame, column: str) -> pd.Series:
    """A column as Python strings, as `str()` writes each value (NaN as "nan", None as
    "None"), so the vectorised key equals the scalar one."""
    if column not in frame:
        return pd.Series("", index=frame.index, dtype="str")
    values = frame[column]
    text = values.astype("str")  # pandas 3 keeps missing values missing: written as str() does
    missing = text.isna()
    if missing.any():
        written = pd.Series([str(v) for v in values[missing]], index=text.index[missing])
        text = text.where(~missing, written)
    return text
