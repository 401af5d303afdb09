"""Find the data folders (rules/, templates/, reference_kernels/) in a wheel or a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """In a wheel the folder sits inside the package; in a checkout (editable install) beside it."""
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"nsdiag data folder {name!r} not found next to {_PACKAGE_DIR}")


def rules_dir() -> Path:
    return data_dir("rules")


def templates_dir() -> Path:
    return data_dir("templates")


def reference_kernels_dir() -> Path:
    return data_dir("reference_kernels")
