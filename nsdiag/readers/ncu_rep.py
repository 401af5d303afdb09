"""Reader for `.ncu-rep` reports through NVIDIA's `ncu-report` package (no ncu install needed)."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from nsdiag.errors import InputError, MissingDependencyError
from nsdiag.model.meta import Source
from nsdiag.model.session import RULE_RESULT_COLUMNS, Session
from nsdiag.model.units import parse_unit
from nsdiag.readers import source
from nsdiag.readers.kernel_table import build_session

# The CSV export prints OK messages as INF; use its words so every input reads the same.
_RULE_TYPES: dict[object, str] = {0: "NONE", 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
_SPEEDUP_TYPES: dict[object, str] = {0: "", 1: "local", 2: "global"}


def _import_ncu_report() -> Any:
    try:
        import ncu_report
    except ImportError as exc:
        raise MissingDependencyError(
            "reading .ncu-rep files needs NVIDIA's ncu-report package",
            "pip install 'nsdiag[ncu-rep]' (or: pip install ncu-report), or export a CSV with "
            "ncu -i REPORT --csv --page raw --print-units base > report.csv",
        ) from exc
    return ncu_report


def read(path: Path) -> Session:
    ncu_report = _import_ncu_report()
    # gzipped reports (told by their first bytes) are decompressed first, bounded
    with source.plain_file(path, "ncu-rep", "report.ncu-rep") as plain:
        session = _read(plain, ncu_report, path)
    session.meta = replace(session.meta, sources=(Source(str(path), "ncu-rep"),))
    session.kernels["source"] = str(path)
    return session


def _read(path: Path, ncu_report: Any, shown: Path) -> Session:
    """`path` read, errors naming `shown` (the file the user gave)."""
    try:
        context = ncu_report.load_report(str(path))
    except Exception as exc:  # the SWIG layer raises plain Exceptions
        raise InputError(
            f"cannot open {shown} as an Nsight Compute report: {exc}",
            "check that it is a .ncu-rep file",
        ) from exc
    try:
        return _session(context, shown, ncu_report)
    except (AttributeError, TypeError, ValueError, KeyError, RuntimeError) as exc:
        # a damaged report can load and then fail on a launch's records
        raise InputError(
            f"{shown} is a damaged Nsight Compute report ({type(exc).__name__}: {exc})",
            "copy or export the report again",
        ) from exc


def _session(context: Any, path: Path, ncu_report: Any) -> Session:
    identity_rows: list[dict[str, Any]] = []
    raw_rows: list[dict[str, Any]] = []
    raw_units: dict[str, str] = {}
    rules: list[dict[str, Any]] = []
    for range_index in range(context.num_ranges()):
        report_range = context.range_by_idx(range_index)
        for action_index in range(report_range.num_actions()):
            action = report_range.action_by_idx(action_index)
            launch = len(identity_rows)
            identity_rows.append(_identity(action, ncu_report, launch))
            raw_rows.append(_metrics(action, raw_units))
            if not raw_rows[-1]:  # ncu writes every launch whole: none means the file was cut
                raise InputError(
                    f"{path} is truncated or damaged: launch {launch} has no metrics",
                    "copy or export the report again",
                )
            rules.extend(_rules(action, launch))
    if not identity_rows:
        raise InputError(
            f"{path} holds no profiled kernels (or is not an Nsight Compute report)",
            "check the file; ncu -i REPORT --page raw should list its kernels",
        )
    identity = pd.DataFrame(identity_rows)
    raw = pd.DataFrame(raw_rows)
    rule_frame = pd.DataFrame(rules, columns=list(RULE_RESULT_COLUMNS))
    return build_session(
        identity, raw, raw_units, source=str(path), fmt="ncu-rep", rule_results=rule_frame
    )


def _value(action: Any, name: str) -> Any:
    metric = action.metric_by_name(name)
    return None if metric is None else metric.value()


def _identity(action: Any, ncu_report: Any, launch: int) -> dict[str, Any]:
    grid = tuple(_value(action, f"launch__grid_dim_{axis}") for axis in "xyz")
    block = tuple(_value(action, f"launch__block_dim_{axis}") for axis in "xyz")
    major = _value(action, "device__attribute_compute_capability_major")
    minor = _value(action, "device__attribute_compute_capability_minor")
    return {
        "ncu_id": str(launch),
        "name": action.name(ncu_report.IAction.NameBase_FUNCTION),
        "demangled": action.name(ncu_report.IAction.NameBase_DEMANGLED),
        "context": str(_value(action, "launch__context_id") or ""),
        "stream": str(_value(action, "launch__stream_id") or ""),
        "grid": "({}, {}, {})".format(*grid) if None not in grid else "",
        "block": "({}, {}, {})".format(*block) if None not in block else "",
        "device": str(
            _value(action, "device__attribute_device_index")
            or _value(action, "launch__device_id")
            or "0"
        ),
        "cc": f"{major}.{minor}" if major is not None else "",
    }


def _metrics(action: Any, raw_units: dict[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        if metric is None or not metric.has_value():
            continue
        value = metric.value()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            base, factor = parse_unit(metric.unit())
            values[name] = float(value) * factor
            raw_units[name] = base
        elif isinstance(value, str):
            values[name] = value
            raw_units.setdefault(name, "")
    return values


def _as_dict(value: Any) -> dict[str, Any]:
    # ncu 2025.4 returned some of these as stringified dicts.
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return {"message": value}
    return value if isinstance(value, dict) else {}


def _flatten_links(text: str) -> str:
    """ncu's '@url:Text:Link@' and '@section:Id:Text@' markup -> Text, as the CSV export shows
    it."""
    text = re.sub(r"@url:([^:@]*):[^@]*@", r"\1", text)
    return re.sub(r"@(?:section|sass):[^:@]*:([^@]*)@", r"\1", text)


def _rules(action: Any, launch: int) -> list[dict[str, Any]]:
    rows = []
    for result in action.rule_results_as_dicts():
        message = _as_dict(result.get("rule_message", {}))
        speedup = _as_dict(result.get("speedup_estimation", {}))
        if not message.get("message"):
            continue
        rows.append(
            {
                "id": launch,
                "section": result.get("section_identifier", ""),
                "rule": result.get("rule_identifier", ""),
                "type": _RULE_TYPES.get(message.get("type"), str(message.get("type", ""))),
                "message": _flatten_links(message.get("message", "")),
                "speedup_type": _SPEEDUP_TYPES.get(speedup.get("type"), "") if speedup else "",
                "speedup": float(speedup["speedup"])
                if speedup.get("speedup") is not None
                else float("nan"),
            }
        )
    return rows
