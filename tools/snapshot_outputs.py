"""Write every output nsdiag gives on every recording under tests/data into one folder, so two
versions of the code can be compared file by file (a refactoring must leave them identical).

    python tools/snapshot_outputs.py OUT_DIR [--no-reports]  # then: diff -r BEFORE AFTER

Runs the CLI in this process (click's test runner), so it measures the code on sys.path: run it
from a checkout, or with PYTHONPATH pointing at another one. HTML reports are stored without
the inlined plotly.js (identical in both and 1.3 MB each; each report's full size is in its
.report.html.log, which tools/report_sizes.py lists); the checkout's path to tests/data is
written as DATA, so two checkouts compare equal. `--no-reports`: explain (text and JSON) and
diff only, a fifth of the time.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from click.testing import CliRunner

from nsdiag.cli import main

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"

# Recordings to explain and report: session folders, and single exports.
SINGLE_SUFFIXES = (".raw.csv.gz", ".details.csv.gz", ".sqlite.gz", ".ncu-rep.gz")
SKIP_PARTS = ("logs",)

# Before/after pairs that nsdiag diff is shown on (docs/diff.md and the tests).
DIFF_PAIRS = [
    ("diff_demo/naive", "diff_demo/float4"),
    ("diff_demo/serial_pageable", "diff_demo/stream_split"),
    ("diff_demo/elementwise_run1.sqlite.gz", "diff_demo/elementwise_run2.sqlite.gz"),
    ("programs/elementwise", "diff_demo/elementwise_compiled"),
    ("programs/verify/lm_train", "diff_demo/lm_train_padded"),
    ("programs/infer_cnn", "programs/infer_cnn_compiled"),
    ("programs/step_range", "programs/step_range_fixed.sqlite.gz"),
    ("programs/train_loader", "programs/train_loader_fixed.sqlite.gz"),
    ("multi_gpu/verify/ddp_straggler", "multi_gpu/verify/ddp_balanced"),
]

_PLOTLY = re.compile(r"<script[^>]*>\s*/\*\*\s*\n\* plotly\.js.*?</script>", re.S)


def recordings() -> list[Path]:
    found: list[Path] = []
    for path in sorted(DATA.rglob("*")):
        if any(part in SKIP_PARTS for part in path.relative_to(DATA).parts):
            continue
        folder = path.is_dir() and (path / "session.json").exists()
        export = path.is_file() and path.name.endswith(SINGLE_SUFFIXES)
        if folder or (export and not any(p in found for p in path.parents)):
            found.append(path)
    # Folders of loose exports recorded together (raw + details of one capture).
    for folder in ("reference", "calib", "calib_small", "calib_extra", "torch_cases"):
        found.append(DATA / folder)
    return found


# Exports read one at a time that `recordings` leaves out (their names carry no export suffix):
# ncu's CSV as printed to the console, and each `nsys stats` report.
LOOSE_EXPORTS = ("console/*.csv.gz", "nsys/*_stats_*.csv.gz")


def loose_exports() -> list[Path]:
    return [path for pattern in LOOSE_EXPORTS for path in sorted(DATA.glob(pattern))]


def _inputs(path: Path) -> list[str]:
    if path.is_dir() and not (path / "session.json").exists():
        return [str(p) for p in sorted(path.glob("*.csv.gz"))]
    return [str(path)]


def _name(path: Path) -> str:
    return str(path.relative_to(DATA)).replace("/", "__")


def _run(runner: CliRunner, args: list[str]) -> str:
    result = runner.invoke(main, args, catch_exceptions=True)
    text = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        text += f"\nEXCEPTION {type(result.exception).__name__}: {result.exception}\n"
    return f"exit {result.exit_code}\n{text}"


def _normalise(out: Path) -> None:
    """The checkout's own paths, which differ between two checkouts, as DATA and OUT."""
    for path in out.iterdir():
        text = path.read_text()
        fixed = text
        for path_text, word in ((str(DATA), "DATA"), (str(out), "OUT")):
            # Markdown escapes the underscores of a path
            fixed = fixed.replace(path_text, word).replace(path_text.replace("_", "\\_"), word)
        if fixed != text:
            path.write_text(fixed)


def snapshot(out: Path, reports: bool = True) -> int:
    out.mkdir(parents=True, exist_ok=True)
    runner = CliRunner()
    count = 0
    for path in recordings() + loose_exports():
        name, inputs = _name(path), _inputs(path)
        (out / f"{name}.explain.txt").write_text(_run(runner, ["explain", *inputs]))
        (out / f"{name}.explain.json").write_text(_run(runner, ["explain", *inputs, "--json"]))
        for suffix in ("md", "txt", "html") if reports else ():
            target = out / f"{name}.report.{suffix}"
            log = _run(runner, ["report", *inputs, "-o", str(target)])
            if target.exists() and suffix == "html":
                log += f"size {target.stat().st_size} bytes\n"  # tools/report_sizes.py
                target.write_text(_PLOTLY.sub("<script>PLOTLY</script>", target.read_text()))
            (out / f"{name}.report.{suffix}.log").write_text(log.replace(str(out), "OUT"))
        count += 1
    for before, after in DIFF_PAIRS:
        name = f"diff__{_name(DATA / before)}__{_name(DATA / after)}"
        pair = [str(DATA / before), str(DATA / after)]
        (out / f"{name}.txt").write_text(_run(runner, ["diff", *pair]))
        target = out / f"{name}.json"
        (out / f"{name}.json.log").write_text(_run(runner, ["diff", *pair, "-o", str(target)]))
        count += 1
    _normalise(out)
    return count


if __name__ == "__main__":
    arguments = sys.argv[1:]
    with_reports = "--no-reports" not in arguments
    folders = [a for a in arguments if a != "--no-reports"]
    if len(folders) != 1:
        sys.exit("usage: python tools/snapshot_outputs.py OUT_DIR [--no-reports]")
    print(f"{snapshot(Path(folders[0]), with_reports)} recordings and pairs -> {folders[0]}")
