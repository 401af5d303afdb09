"""The NVTX range an activity counts under: the program's own, never a library's.

The readers record the innermost range open on the launching thread; where that is a library's
(CUB inside an embedding backward, NCCL around a collective, PyTorch's emit_nvtx op ranges,
model/nvtx_owners.py), the activity counts as outside any range rather than splitting the step
into thousands of ranges (a transformers Llama under emit_nvtx: 10,683 distinct op ranges in one
region). Applied to the arrays the analyses group by, once per distinct name.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.model.nvtx_owners import library_of

UNNAMED = ""


def program_ranges(names: npt.ArrayLike) -> npt.NDArray[np.object_]:
    """`names` with library ranges (and missing values) as UNNAMED."""
    values = pd.Series(np.asarray(names, dtype=object))
    codes, distinct = pd.factorize(values, use_na_sentinel=True)
    mapped = np.array(
        [UNNAMED if library_of(str(n)) is not None else str(n) for n in distinct] + [UNNAMED],
        dtype=object,
    )
    return mapped[np.where(codes < 0, len(distinct), codes)]
