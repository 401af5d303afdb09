"""Which profiler table a CSV header line starts: an ncu export's raw or details page, or one of
the nsys stats reports nsdiag reads (each told by words its header always holds). Pure: lines
in, a kind out."""

from __future__ import annotations

import csv

EXPECTED_HEADERS = (
    'an ncu --csv export\'s header starts with "ID" (--page raw or --page details); an nsys '
    "stats -f csv report's names its columns (cuda_gpu_trace: Start (ns), Duration (ns), "
    "CorrId, ..., Name)"
)
# nsys stats report -> words that must all be in its header line.
NSYS_STATS_HEADERS = {
    "cuda_gpu_trace": ("Start (", "Duration (", "CorrId", "Strm", "Name"),
    "cuda_api_sum": ("Time (%)", "Num Calls", "Name"),
    "cuda_gpu_mem_size_sum": ("Operation", "Total (", "Count"),
    "cuda_gpu_mem_time_sum": ("Time (%)", "Operation", "Count"),
    "nvtx_sum": ("Time (%)", "Style", "Range"),
    "cuda_gpu_kern_sum": ("Time (%)", "Instances", "Name"),
}


def header_kind(line: str) -> str | None:
    """'ncu-raw', 'ncu-details', 'nsys-stats' for a header line nsdiag reads, else None."""
    if report_kind(line):
        return "nsys-stats"
    if not line.startswith(('"ID",', "ID,")):
        return None
    found = set(cells(line))
    if len(found) < 2:
        return None  # a line the csv module cannot split (a field over its limit) is no header
    return "ncu-details" if {"Section Name", "Metric Name"} <= found else "ncu-raw"


def report_kind(line: str) -> str | None:
    """Which nsys stats report a CSV header line belongs to (None: not one)."""
    for report, words in NSYS_STATS_HEADERS.items():
        if all(w in line for w in words):
            return report
    return None


def cells(line: str) -> list[str]:
    """The cells of one CSV line ([] for a line the csv module cannot split)."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error:  # a field over the csv module's limit: not a line nsdiag reads
        return []
