"""The CSV exports of phase 2's ncu reports: the raw and details pages of each, side by side."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from nsdiag.collect import argv as cmd
from nsdiag.collect.run_state import RunState

Job = tuple[Path, str, list[str], Path]  # (report, page, argv, CSV written)


def csv_for(report: Path, page: str) -> Path:
    """Where a report's page is exported: `targeted-1.ncu-rep` -> `targeted-1.raw.csv`."""
    return report.with_name(f"{report.name.removesuffix('.ncu-rep')}.{page}.csv")


def _step(out: Path) -> str:
    return f"export-{out.stem.replace('.', '-')}"


def export_reports(state: RunState, reports: Sequence[Path]) -> None:
    """The raw and details pages of every report as CSV. The exports run side by side: each is
    an ncu process reading one report on the CPU, a few seconds each, independent of the others."""
    jobs: list[Job] = [
        (report, page, argv, csv_for(report, page))
        for report in reports
        for page, argv in (
            ("raw", cmd.ncu_export_raw(state.ncu.path, report)),
            ("details", cmd.ncu_export_details(state.ncu.path, report)),
        )
    ]
    if not jobs:
        return
    pool = ThreadPoolExecutor(max_workers=min(len(jobs), 4))
    try:
        results = list(pool.map(lambda job: state.run_export(_step(job[3]), job[2], job[3]), jobs))
    except KeyboardInterrupt:
        # an interrupt starts no further export; the running ones end within seconds
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
    written: dict[Path, dict[str, Path | None]] = {}
    # steps recorded in job order
    for (report, page, _, out), result in zip(jobs, results, strict=True):
        state.status.step(_step(out), result.ok, result.wall_s, result.log)
        written.setdefault(report, {})[page] = (
            out if result.ok and out.is_file() and out.stat().st_size else None
        )
    for report, pages in written.items():
        if pages["raw"] is None:
            state.status.lacks(f"the CSV export of {report.name}")
        else:
            state.exported.append((pages["raw"], pages["details"]))
