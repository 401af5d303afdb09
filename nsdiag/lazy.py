"""Objects named "module:name" and imported when first used: a table can name a function
without importing its module (and pandas, plotly, jinja2 with it) until the function runs.

The program analyses' records (analysis/program/record.py) name their functions so, and the
output formats (render/registry.py) their renderers."""

from __future__ import annotations

import functools
import importlib
from typing import Any


@functools.cache
def resolve(ref: str) -> Any:
    """The object that `ref`, "package.module:name", names (its module imported on first use)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)
