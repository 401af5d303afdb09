"""The renderer table (nsdiag/render/registry.py): every format draws every kind it claims on a
real recording, one JSON path for `explain --json` and `report -o x.json` (and for `diff`), the
one-line error for an unknown extension, and render reaching no layer above it."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

import nsdiag
from nsdiag.analysis.diff import Diff, compare
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.cli import main
from nsdiag.errors import NsdiagError
from nsdiag.model.session import Session
from nsdiag.render import registry
from nsdiag.render.registry import TABLE, Kind, extensions, format_from_path, formats
from tests.conftest import DATA, diagnosed

REFERENCE = DATA / "reference" / "raw.csv.gz"
BEFORE, AFTER = DATA / "diff_demo" / "naive", DATA / "diff_demo" / "float4"
RENDER = Path(nsdiag.__file__).parent / "render"


def reference() -> tuple[Diagnosis, Session]:
    session, found = diagnosed("reference/raw.csv.gz")
    return found, session


@cache
def naive_float4() -> Diff:
    sides = []
    for path in (BEFORE, AFTER):
        session = nsdiag.load(path)
        sides.append(((str(path),), session, diagnose(session)))
    return compare(sides[0], sides[1])


# What each format's document looks like, for a diagnosis and for a diff. A format added to the
# table without a line here fails test_every_format_is_checked.
LOOKS_RIGHT: dict[str, Callable[[str], bool]] = {
    "html": lambda doc: doc.lstrip().lower().startswith("<!doctype html>") and "</html>" in doc,
    "json": lambda doc: json.loads(doc)["schema"].startswith("nsdiag."),
    "md": lambda doc: doc.startswith(("## nsdiag: ", "# nsdiag diff")),
    "text": lambda doc: "NVIDIA H200" in doc or "BEFORE" in doc,
}


def test_every_format_is_checked() -> None:
    assert set(formats("report")) | set(formats("diff")) == set(LOOKS_RIGHT)


def test_the_table_is_consistent() -> None:
    names = [n for f in TABLE for n in (f.name, *f.aliases)]
    assert len(names) == len(set(names))
    exts = [e for f in TABLE for e in f.extensions]
    assert len(exts) == len(set(exts)) and all(e == e.lower() and e[0] == "." for e in exts)
    kinds: tuple[Kind, ...] = ("report", "diff")
    for f in TABLE:
        for kind in kinds:
            if f.renderer(kind):
                assert all(
                    format_from_path(f"out/x{e.upper()}", kind) == f.name for e in f.extensions
                )


@pytest.mark.parametrize("fmt", formats("report"))
def test_each_format_renders_a_diagnosis(fmt: str) -> None:
    diagnosis, session = reference()
    doc = registry.render(diagnosis, session, fmt)
    assert LOOKS_RIGHT[fmt](doc), doc[:200]
    for alias in next(f for f in TABLE if f.name == fmt).aliases:
        assert registry.render(diagnosis, session, alias) == doc


@pytest.mark.parametrize("fmt", formats("diff"))
def test_each_format_renders_a_diff(fmt: str) -> None:
    doc = registry.render_diff(naive_float4(), fmt)
    assert doc.strip() and LOOKS_RIGHT[fmt](doc), doc[:200]


def test_unknown_format_names_are_errors() -> None:
    diagnosis, session = reference()
    with pytest.raises(NsdiagError, match=r"unknown report format 'pdf'.*html, json, md, text"):
        registry.render(diagnosis, session, "pdf")
    with pytest.raises(NsdiagError, match="unknown report format"):
        registry.render_diff(naive_float4(), "pdf")


def test_explain_json_is_report_json(tmp_path: Path) -> None:
    runner = CliRunner()
    explained = runner.invoke(main, ["explain", str(REFERENCE), "--json"])
    assert explained.exit_code == 0, explained.output
    target = tmp_path / "x.json"
    reported = runner.invoke(main, ["report", str(REFERENCE), "-o", str(target)])
    assert reported.exit_code == 0, reported.output
    assert explained.stdout_bytes == target.read_bytes()
    forced = runner.invoke(main, ["report", str(REFERENCE), "--format", "json", "-o", "-"])
    assert forced.stdout_bytes == target.read_bytes()


def test_diff_json_is_diff_output_json(tmp_path: Path) -> None:
    runner = CliRunner()
    printed = runner.invoke(main, ["diff", str(BEFORE), str(AFTER), "--json"])
    assert printed.exit_code == 0, printed.output
    target = tmp_path / "x.json"
    written = runner.invoke(main, ["diff", str(BEFORE), str(AFTER), "-o", str(target)])
    assert written.exit_code == 0, written.output
    assert printed.stdout_bytes == target.read_bytes()
    assert json.loads(target.read_text())["schema"] == "nsdiag.diff/1"


@pytest.mark.parametrize(
    "args",
    [
        ["report", str(REFERENCE), "-o", "{out}/report.pdf"],
        ["diff", str(BEFORE), str(AFTER), "-o", "{out}/diff.pdf"],
    ],
    ids=["report", "diff"],
)
def test_an_unknown_extension_is_one_line_listing_the_known(
    tmp_path: Path, args: list[str]
) -> None:
    result = CliRunner().invoke(main, [a.format(out=tmp_path) for a in args])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("nsdiag: error: cannot tell the report format from ")
    assert "report.pdf" in line or "diff.pdf" in line
    kind: Kind = "diff" if args[0] == "diff" else "report"
    assert all(extension in line for extension in extensions(kind))
    assert "--format html|json|md|text" in line
    assert not list(tmp_path.iterdir())  # nothing written


def _imports(path: Path) -> set[str]:
    """Every module a file imports, relative imports resolved, lazy ones included."""
    package = ".".join(path.relative_to(RENDER.parent.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.parametrize(
    "path", sorted(RENDER.rglob("*.py")), ids=lambda p: str(p.relative_to(RENDER))
)
def test_render_imports_no_layer_above_it(path: Path) -> None:
    bad = sorted(
        name
        for name in _imports(path)
        if name == "nsdiag"  # the package's __init__ (its load() reaches collect)
        or name.split(".")[:2] in (["nsdiag", "collect"], ["nsdiag", "cli"])
    )
    assert not bad, f"{path} imports {bad}"
