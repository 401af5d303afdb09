"""Turn identity columns + raw metrics (base units) into a Session; shared by the ncu readers."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from nsdiag.model.canonical import canonical_metrics, order_columns
from nsdiag.model.meta import SessionMeta, Source
from nsdiag.model.session import RULE_RESULT_COLUMNS, Session, empty_frame
from nsdiag.readers.validate import numeric_metrics

_DIMS = re.compile(r"-?\d+")


def dims_product(text: str) -> float:
    """'(256, 1, 1)' -> 256.0; NaN when there are no numbers."""
    numbers = [int(n) for n in _DIMS.findall(str(text))]
    if not numbers:
        return float("nan")
    product = 1
    for n in numbers:
        product *= n
    return float(product)


def build_session(
    identity: pd.DataFrame,
    raw: pd.DataFrame,
    raw_units: dict[str, str],
    *,
    source: str,
    fmt: str,
    rule_results: pd.DataFrame | None = None,
    extra_canonical: pd.DataFrame | None = None,
    warnings: list[str] | None = None,
) -> Session:
    """`warnings`: what the reader found wrong in the input; values that cannot be true (an
    infinite metric, a negative time or size) are left out here, with a warning each."""
    identity = identity.reset_index(drop=True).copy()
    labels = identity["ncu_id"].astype(str).tolist() if "ncu_id" in identity else None
    raw, found = numeric_metrics(raw.reset_index(drop=True), raw_units, source, labels)
    warnings = [*(warnings or []), *found]
    identity.insert(0, "id", range(len(identity)))
    if "name" not in identity:
        identity["name"] = ""
    if "demangled" not in identity:
        identity["demangled"] = identity["name"]
    identity["source"] = source
    canonical = canonical_metrics(raw)
    if extra_canonical is not None:
        extra_canonical, found = numeric_metrics(
            extra_canonical.reset_index(drop=True),
            _canonical_units(extra_canonical),
            source,
            labels,
        )
        warnings += found
        for col in extra_canonical.columns:
            if col not in canonical or canonical[col].isna().all():
                canonical[col] = extra_canonical[col].reset_index(drop=True).astype("float64")
    kernels = pd.concat([identity, canonical], axis=1)
    for dim, column in (("grid", "grid_size"), ("block", "block_size")):
        if dim not in kernels:  # ncu before 2021 printed no Grid Size / Block Size columns
            kernels[dim] = ""
        elif column not in kernels or kernels[column].isna().all():
            kernels[column] = kernels[dim].map(dims_product)
    kernels = order_columns(kernels)
    return Session(
        kernels=kernels,
        raw=raw,
        raw_units=raw_units,
        rule_results=rule_results if rule_results is not None else empty_frame(RULE_RESULT_COLUMNS),
        meta=SessionMeta(
            sources=(Source(source, fmt),),
            device=device_info(kernels, raw),
            warnings=tuple(warnings),
        ),
    )


def _canonical_units(frame: pd.DataFrame) -> dict[str, str]:
    """Catalogue names carry their unit: durations end in _ns, sizes in _bytes."""
    units = {"_ns": "ns", "_bytes": "byte"}
    return {
        str(c): next((u for suffix, u in units.items() if str(c).endswith(suffix)), "")
        for c in frame.columns
    }


def device_info(kernels: pd.DataFrame, raw: pd.DataFrame) -> dict[str, Any]:
    """Name, compute capability and SM count of the (first) profiled device."""
    info: dict[str, Any] = {}
    for col in ("device__attribute_display_name", "device__attribute_device_name"):
        if col in raw and raw[col].notna().any():
            info["name"] = str(raw[col].dropna().iloc[0])
            break
    if "cc" in kernels and (kernels["cc"].astype(str) != "").any():
        info["cc"] = str(kernels["cc"].iloc[0])
    elif "device_compute_capability_major" in kernels:
        major, minor = (
            kernels["device_compute_capability_major"].iloc[0],
            kernels["device_compute_capability_minor"].iloc[0],
        )
        if pd.notna(major):
            info["cc"] = f"{int(major)}.{int(minor) if pd.notna(minor) else 0}"
    if "sm_count" in kernels and kernels["sm_count"].notna().any():
        info["sm_count"] = int(kernels["sm_count"].dropna().iloc[0])
    return info
