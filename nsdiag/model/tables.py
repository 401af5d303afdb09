"""Typed access to the tidy tables: rows as dicts keyed by column name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # annotations only: the rule loader runs without pandas
    import pandas as pd


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per row (column name -> value; native Python scalars)."""
    return cast(list[dict[str, Any]], frame.to_dict("records"))
