"""Typed access to the tidy tables: rows as dicts keyed by column name."""

from __future__ import annotations

from typing import Any, cast

import pandas as pd


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per row (column name -> value; native Python scalars)."""
    return cast(list[dict[str, Any]], frame.to_dict("records"))
