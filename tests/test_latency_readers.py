"""Issue 30, reading an ncu export: the value checks copy a table only where a cell was fixed.
Under pandas 3 every `frame[column]` is a new Series, so "is this still the column I read?" by
identity was always no, and each export's ~1,500 metric columns were assigned back (calib's
three exports: 1.70 -> 1.42 s of explain)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsdiag.readers.validate import numeric_metrics


def test_a_clean_table_is_not_copied() -> None:
    raw = pd.DataFrame(
        {
            "Kernel Name": ["k_bad", "k_good"],
            "gpu__time_duration.sum": [1504.0, 812.0],
            "dram__bytes_read.sum": [2.0e8, 1.0e8],
        }
    )
    checked, warnings = numeric_metrics(raw, {"gpu__time_duration.sum": "ns"}, "raw.csv")
    assert checked is raw and warnings == []


def test_only_fixed_columns_change() -> None:
    raw = pd.DataFrame(
        {
            "Kernel Name": ["k_bad", "k_good"],
            "gpu__time_duration.sum": [1504.0, -1.0],  # a negative time: left out
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": ["12.5", "n/a"],
            "dram__bytes_read.sum": [2.0e8, 1.0e8],
        }
    )
    checked, warnings = numeric_metrics(raw, {"gpu__time_duration.sum": "ns"}, "raw.csv")
    assert checked is not raw and len(warnings) == 1
    assert np.isnan(checked["gpu__time_duration.sum"].iloc[1])
    assert checked["sm__throughput.avg.pct_of_peak_sustained_elapsed"].tolist()[0] == 12.5
    assert checked["dram__bytes_read.sum"].tolist() == [2.0e8, 1.0e8]
    assert checked["Kernel Name"].tolist() == ["k_bad", "k_good"]
