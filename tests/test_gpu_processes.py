"""The GPU processes of a timeline (readers/ranks.py `gpu_processes`), against pandas."""

from __future__ import annotations

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from nsdiag.readers.ranks import gpu_processes

launch = st.tuples(
    st.sampled_from(["kernel", "memcpy", "runtime"]),
    st.integers(1, 70_000),  # process id
    st.integers(0, 7),  # device
    st.integers(0, 10**12),  # start
)


def _expected(timeline: pd.DataFrame) -> pd.DataFrame:
    """Each process that launched a kernel, its busiest device (the lowest of a tie) and its
    first kernel's start."""
    kernels = timeline[timeline["kind"] == "kernel"]
    counts = kernels.groupby(["process_id", "device"]).size().rename("n").reset_index()
    busiest = counts.sort_values(["process_id", "n", "device"], ascending=[True, False, True])
    busiest = busiest.drop_duplicates("process_id").set_index("process_id")["device"]
    first = kernels.groupby("process_id")["start_ns"].min()
    return pd.DataFrame(
        {"process_id": first.index, "device": busiest[first.index].to_numpy(), "first_ns": first}
    ).reset_index(drop=True)


@given(st.lists(launch, min_size=1, max_size=60))
def test_processes_are_pandas_groupby(rows: list[tuple[str, int, int, int]]) -> None:
    timeline = pd.DataFrame(rows, columns=["kind", "process_id", "device", "start_ns"])
    found = gpu_processes(timeline)
    if not (timeline["kind"] == "kernel").any():
        assert found.empty
        return
    expected = _expected(timeline)
    assert found["process_id"].tolist() == expected["process_id"].tolist()
    assert found["device"].tolist() == expected["device"].tolist()
    assert found["first_ns"].tolist() == expected["first_ns"].tolist()
