"""Wild-input cases (issue 27) for the csv side, added to tests/bad_input_corpus.CASES.

Same contract as tests/bad_input_corpus.py: each case is built from a real H200 recording
(cut, edited or re-saved), or is a small synthetic file made from the documented format."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bad_input_corpus import (
    DURATION,
    INCOMPLETE_SESSION,
    PIPELINE,
    REFERENCE_DETAILS,
    REFERENCE_RAW,
    Answered,
    Case,
    Refused,
    all_of,
    launches,
    plain_copy,
    reference_total_ns,
    rows_of,
    session_copy,
    text_of,
    total_close_to,
    write_rows,
)

# ------------------------------------------------------------------------------ old ncu formats

# What `nv-nsight-cu-cli` (Nsight Compute 2019.x-2020.x) printed, from public exports of it:
# https://github.com/peihunglin/XPlacer-ML-DataPlacement (README.md: a details page of
# nv-nsight-cu-cli on a V100, CUDA 10.2, "2020-May-29"). Its header has only these identity
# columns (no NVTX, Block Size, Grid Size, Device or CC; no Body Item Label or rule columns),
# its Speed Of Light section is "GPU Speed Of Light" with the labels below, times are in
# "nsecond"/"usecond", clocks in "cycle/second", and numbers carry no thousands separators.
OLD_IDENTITY = [
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
]
OLD_DETAILS_COLUMNS = [*OLD_IDENTITY, "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
OLD_SECTIONS = {"GPU Speed Of Light Throughput": "GPU Speed Of Light"}
OLD_LABELS = {  # today's label -> the 2019/2020 one, in the Speed Of Light section
    "DRAM Throughput": "SOL FB",
    "Memory Throughput": "Memory [%]",
    "Compute (SM) Throughput": "SM [%]",
    "L2 Cache Throughput": "SOL L2",
    "L1/TEX Cache Throughput": "SOL TEX",
    "DRAM Frequency": "Memory Frequency",
}
OLD_UNITS = {"ns": "nsecond", "hz": "cycle/second", "us": "usecond"}


def old_details_rows(
    source: Path = REFERENCE_DETAILS, time_unit: str = "nsecond"
) -> list[list[str]]:
    """A current details page (ncu 2025.3.1, H200) re-spelled as nv-nsight-cu-cli 2019/2020
    printed it (the names above; chart rows and rule rows, which it did not print, dropped).
    `time_unit` "usecond" rescales the durations as its default units did."""
    rows = rows_of(source)
    header = rows[0]
    at = {name: header.index(name) for name in header}
    out = [list(OLD_DETAILS_COLUMNS)]
    for row in rows[1:]:
        if len(row) <= at["Metric Value"] or not row[0].isdigit():
            continue  # section tables printed inside the CSV (--print-details all)
        row = row + [""] * (len(header) - len(row))  # ncu leaves empty trailing cells out
        if row[at["Body Item Label"]] or row[at["Rule Name"]] or not row[at["Metric Name"]]:
            continue
        section = row[at["Section Name"]]
        label = row[at["Metric Name"]]
        if section in OLD_SECTIONS:
            label = OLD_LABELS.get(label, label)
        unit = OLD_UNITS.get(row[at["Metric Unit"]], row[at["Metric Unit"]])
        value = row[at["Metric Value"]].replace(",", "")
        if unit == "nsecond" and time_unit == "usecond":
            unit, value = "usecond", repr(float(value) / 1000)
        out.append(
            [row[at[c]] for c in OLD_IDENTITY]
            + [OLD_SECTIONS.get(section, section), label, unit, value]
        )
    return out


def old_details(time_unit: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return [
            str(write_rows(tmp / "nv_nsight_cu_cli.csv", old_details_rows(time_unit=time_unit)))
        ]

    return build


def old_details_with_trace(tmp: Path) -> list[str]:
    """The old details page given with an nsys trace (launches are matched by grid and block,
    which the old page lacks)."""
    return [*old_details("nsecond")(tmp), str(plain_copy(PIPELINE, tmp / "pipeline.sqlite"))]


def old_raw(tmp: Path) -> list[str]:
    """The reference raw page as nv-nsight-cu-cli 2019/2020 printed it: the old identity columns
    only (no NVTX, Block Size, Grid Size, Device, CC), times in nsecond, no thousands separators."""
    rows = rows_of(REFERENCE_RAW)
    header = rows[0]
    identity = {"Block Size", "Grid Size", "Device", "CC"}
    keep = [
        i
        for i, name in enumerate(header)
        if name not in identity and not name.startswith(("thread Domain", "Id:Domain"))
    ]
    units = [OLD_UNITS.get(rows[1][i], rows[1][i]) for i in keep]
    body = [[row[i].replace(",", "") for i in keep] for row in rows[2:]]
    return [str(write_rows(tmp / "old_raw.csv", [[header[i] for i in keep], units, *body]))]


def reference_details_durations() -> float:
    """Sum of the reference details page's Duration rows (ns), from the file itself."""
    rows = rows_of(REFERENCE_DETAILS)
    header = rows[0]
    name, value, unit = (header.index(c) for c in ("Metric Name", "Metric Value", "Metric Unit"))
    section = header.index("Section Name")
    total = 0.0
    for row in rows[1:]:
        if len(row) > value and row[name] == "Duration" and row[section].startswith("GPU"):
            assert row[unit] == "ns", row[unit]
            total += float(row[value].replace(",", ""))
    return total


def old_details_read(doc: dict[str, Any]) -> None:
    """The old page gives what today's does: durations, DRAM throughput (SOL FB), launch shape."""
    total_close_to(reference_details_durations)(doc)
    kernels = doc["kernels"]
    assert kernels and all(k["duration_ns"] for k in kernels), kernels[:1]
    assert any(k.get("bound") for k in kernels), [k.get("bound") for k in kernels]


# ------------------------------------------------------------------------------ edited exports


def rows_past_memory(tmp: Path) -> list[str]:
    """The reference raw page's first launch row repeated to 1.5 GB (94,000 launches of 2,240
    metrics) in 10 MB of gzip: more than a 3 GB address space holds once parsed."""
    lines = text_of(REFERENCE_RAW).split("\n")
    member = gzip.compress((lines[2] + "\n").encode() * 2000, 9)
    path = tmp / "many_rows.csv.gz"
    path.write_bytes(gzip.compress(("\n".join(lines[:2]) + "\n").encode()) + member * 47)
    return [str(path)]


def duplicated_kernel_name(tmp: Path) -> list[str]:
    rows = rows_of(REFERENCE_RAW)
    column = rows[0].index("Kernel Name")
    for row in rows:
        row.insert(column + 1, row[column])
    return [str(write_rows(tmp / "two_names.csv", rows))]


def raw_with_details_appended(tmp: Path) -> list[str]:
    """The reference raw page, then the details page of the same capture pasted below it."""
    path = tmp / "both.csv"
    path.write_text(text_of(REFERENCE_RAW) + text_of(REFERENCE_DETAILS))
    return [str(path)]


def raw_with_unit(unit: str) -> Callable[[Path], list[str]]:
    """The reference raw page with the duration column's unit (units row) replaced."""

    def build(tmp: Path) -> list[str]:
        rows = rows_of(REFERENCE_RAW)
        rows[1][rows[0].index(DURATION)] = unit
        return [str(write_rows(tmp / f"unit_{unit.replace('/', '_')}.csv", rows))]

    return build


def kernel_name_edit(edit: Callable[[str], str], name: str) -> Callable[[Path], list[str]]:
    """The reference raw page with the first launch's kernel name edited."""

    def build(tmp: Path) -> list[str]:
        rows = rows_of(REFERENCE_RAW)
        column = rows[0].index("Kernel Name")
        rows[2][column] = edit(rows[2][column])
        return [str(write_rows(tmp / name, rows))]

    return build


def _long_identifier(name: str, length: int = 100_000) -> str:
    """`name` with the identifier before its first '<' or '(' repeated to `length` characters."""
    cut = min(i for i in (name.find("<"), name.find("("), len(name)) if i >= 0)
    head = name[:cut]
    start = max(head.rfind(" "), head.rfind(":")) + 1
    ident = head[start:] or "kernel"
    longer = (ident * (length // len(ident) + 1))[:length]
    return name[:start] + longer + name[cut:]


def name_kept(doc: dict[str, Any]) -> None:
    launches(42)(doc)
    assert max(len(k["demangled"]) for k in doc["kernels"]) >= 100_000


def newline_kept(doc: dict[str, Any]) -> None:
    all_of(launches(42), total_close_to(reference_total_ns))(doc)


# ------------------------------------------------------------------------------ sessions


def status_missing_number(tmp: Path) -> list[str]:
    folder = session_copy(INCOMPLETE_SESSION, tmp / "session")
    status = json.loads((folder / "status.json").read_text())
    status["missing"] = 5
    (folder / "status.json").write_text(json.dumps(status))
    return [str(folder)]


# ------------------------------------------------------------------------------ settings


def nsys_with(*options: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return [str(plain_copy(PIPELINE, tmp / "pipeline.sqlite")), *options]

    return build


def raw_with(*options: str) -> Callable[[Path], list[str]]:
    return lambda tmp: [str(REFERENCE_RAW), *options]


def setting(words: str, **env: str) -> Refused:
    return Refused(words, env=env, names_file=False)


CASES: tuple[Case, ...] = (
    # ncu 2019/2020 (nv-nsight-cu-cli) exports
    Case("ncu 2020 details page", old_details("nsecond"), Answered("", old_details_read)),
    Case("ncu 2020 details page, usecond", old_details("usecond"), Answered("", old_details_read)),
    Case(
        "ncu 2020 details page with an nsys trace",
        old_details_with_trace,
        Answered("", total_close_to(reference_details_durations)),
    ),
    # tracebacks
    Case(
        "duplicated Kernel Name column",
        duplicated_kernel_name,
        Refused("Kernel Name"),
    ),
    Case("--region nan:inf", nsys_with("--region", "nan:inf"), setting("--region")),
    Case("--region 0:inf", nsys_with("--region", "0:inf"), setting("--region")),
    Case("--region 1e300:2e300", nsys_with("--region", "1e300:2e300"), setting("--region")),
    Case("--max-input-mb nan", raw_with("--max-input-mb", "nan"), setting("--max-input-mb")),
    Case("--max-input-mb inf", raw_with("--max-input-mb", "inf"), setting("--max-input-mb")),
    Case(
        "NSDIAG_MAX_INPUT_MB=nan",
        raw_with(),
        setting("NSDIAG_MAX_INPUT_MB", NSDIAG_MAX_INPUT_MB="nan"),
    ),
    Case("status.json missing: 5", status_missing_number, Answered("incomplete")),
    Case(
        "1.5 GB of launches under a 3 GB address space",
        rows_past_memory,
        Refused("out of memory", isolated=True, names_file=False),
    ),
    # wrong answers with exit 0
    Case(
        "raw page with the details page appended",
        raw_with_details_appended,
        Answered("fewer cells", all_of(launches(42), total_close_to(reference_total_ns))),
    ),
    Case(
        "units row says furlong",
        raw_with_unit("furlong"),
        Answered("cannot convert", lambda doc: doc["total_gpu_time_ns"] in (0, None)),
    ),
    Case("--top -1", raw_with("--top", "-1"), setting("--top")),
    Case("--top-kernels -1", raw_with("--top-kernels", "-1"), setting("--top-kernels")),
    Case(
        "region after the trace",
        nsys_with("--region", "100000:200000"),
        setting("the trace spans"),
    ),
    # slow or refused
    Case(
        "kernel name of 100,000 characters",
        kernel_name_edit(_long_identifier, "long_name.csv"),
        Answered("", name_kept, isolated=True),
    ),
    Case(
        "newline inside a quoted kernel name",
        kernel_name_edit(lambda n: n.replace(" ", "\n", 1), "newline.csv"),
        Answered("", newline_kept),
    ),
)
