"""Eager attention's score chains in a launch sequence: each softmax (model/kernel_facts.py kind
`softmax`, not a log-softmax, which is a loss) with a GEMM before and after it within
MAX_GAP_LAUNCHES on its stream; the chain is the kernels between the two GEMMs (scale, mask, the
upcast, the softmax, the cast back, dropout), each a pass over the S x S scores. Built once per
diagnosis (ProgramContext.attention): the eager-attention analysis reports the chains, and the
fusion analysis leaves their kernels to it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

MAX_GAP_LAUNCHES = 8  # the most launches between a softmax and the GEMM on either side
_MATRIX = ("gemm",)


def attention_rows(
    launches: pd.DataFrame, max_gap: int = MAX_GAP_LAUNCHES
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Per launch: whether it is inside an eager-attention chain (between the GEMMs around a
    softmax), and the chain's number (-1: none). Chains are found per process and stream."""
    inside = np.zeros(len(launches), dtype=bool)
    chain = np.full(len(launches), -1, dtype="int64")
    if not len(launches):
        return inside, chain
    kinds = launches["kind"].astype(str).to_numpy()
    names = launches["name"].astype(str).to_numpy()
    softmax = kinds == "softmax"
    candidates = np.flatnonzero(softmax)  # only their names are read: 10^5 launches
    softmax[candidates] = ["LogSoftMax" not in str(name) for name in names[candidates]]
    number = 0
    keys = ["process_id", "stream"]
    for _, rows in launches.groupby(keys, sort=False, dropna=False).indices.items():
        rows = np.sort(rows)
        is_gemm = np.isin(kinds[rows], list(_MATRIX))
        for found in np.flatnonzero(softmax[rows]):
            at = int(found)
            start = max(at - max_gap, 0)
            before = np.flatnonzero(is_gemm[start:at])
            after = np.flatnonzero(is_gemm[at + 1 : at + 1 + max_gap])
            if not len(before) or not len(after):
                continue
            lo = start + int(before[-1]) + 1
            hi = at + 1 + int(after[0])
            members = rows[lo:hi]
            if inside[members].any():
                continue
            inside[members] = True
            chain[members] = number
            number += 1
    return inside, chain
