"""The layers of docs/architecture.md, checked on the code's own imports: no module imports a layer
above it, directly, lazily inside a function, or through a package's __init__ (the package face
`nsdiag` reaches collect/ through `load`, so only collect/ and the CLI may import from it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nsdiag"

# Lowest first. A module may import its own layer and those below.
LAYERS: dict[str, int] = {
    "nsdiag.errors": 0,
    "nsdiag.resources": 0,
    "nsdiag.version": 0,
    "nsdiag.safe_write": 0,
    "nsdiag.lazy": 0,
    "nsdiag.model": 1,
    "nsdiag.readers": 2,
    "nsdiag.analysis": 3,
    "nsdiag.render": 4,
    "nsdiag.collect": 5,
    "nsdiag": 5,  # the face: load() exports .nsys-rep reports through collect/
    "nsdiag.cli": 6,
    "nsdiag.__main__": 7,
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    """The layer of the longest LAYERS prefix (the bare package is the face)."""
    best = ""
    for prefix in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return LAYERS[best]


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """Lines inside `if TYPE_CHECKING:` blocks: imports for annotations only, never executed."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports(path: Path, source: str | None = None) -> list[tuple[int, str, bool]]:
    """(line, imported module, at module level) for each nsdiag import that runs."""
    tree = ast.parse(path.read_text() if source is None else source)
    skipped = _type_checking_lines(tree)
    top_level = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "nsdiag":
                # `from nsdiag import load` is the face; `from nsdiag import x` of a submodule
                # is that submodule
                for alias in node.names:
                    sub = PACKAGE / f"{alias.name}.py"
                    target = f"nsdiag.{alias.name}" if sub.exists() else "nsdiag"
                    found.append((node.lineno, target, id(node) in top_level))
            elif node.module.startswith("nsdiag."):
                found.append((node.lineno, node.module, id(node) in top_level))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "nsdiag" or alias.name.startswith("nsdiag."):
                    found.append((node.lineno, alias.name, id(node) in top_level))
    return found


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _init_reach() -> dict[str, int]:
    """For each package: the highest layer its __init__ imports at module level (what importing
    anything inside the package runs)."""
    reach = {}
    for init in PACKAGE.rglob("__init__.py"):
        name = _module_name(init)
        levels = [_layer(m) for _, m, top in imports(init) if top and m != name]
        reach[name] = max([_layer(name), *levels])
    return reach


def violations(extra: dict[Path, str] | None = None) -> list[str]:
    """Upward imports in the package (and in `extra`: path -> source, modules not on disk)."""
    reach = _init_reach()
    sources: dict[Path, str | None] = dict.fromkeys(_modules())
    sources.update(extra or {})
    found = []
    for path, source in sources.items():
        me = _module_name(path)
        mine = _layer(me)
        for line, target, _ in imports(path, source):
            if _layer(target) > mine:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
                continue
            parts = target.split(".")
            for depth in range(2, len(parts)):
                package = ".".join(parts[:depth])
                if not me.startswith(package + ".") and reach.get(package, 0) > mine:
                    found.append(
                        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}, whose "
                        f"package {package} imports a higher layer in its __init__"
                    )
    return found


def test_no_module_imports_a_layer_above_it() -> None:
    assert violations() == []


def test_every_module_has_a_layer() -> None:
    """A new top-level module or package must be placed, not fall under the face's layer."""
    names = [_module_name(p) for p in _modules()]
    unplaced = [
        n
        for n in names
        if n != "nsdiag"
        and not any(n.startswith(p + ".") or n == p for p in LAYERS if p != "nsdiag")
    ]
    assert unplaced == [], "give these modules a layer in LAYERS and docs/architecture.md"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # the bug this check was written for: render reaching collect through the package face
        ("from nsdiag import __version__\n", True),
        ("from nsdiag.version import __version__\n", False),
        ("def f():\n    from nsdiag.collect import tools\n", True),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nsdiag.cli import x\n",
            False,
        ),
        ("from nsdiag.analysis.records.diagnosis import Diagnosis\n", False),
    ],
)
def test_the_check_sees_upward_imports(source: str, expected: bool) -> None:
    probe = PACKAGE / "render" / "_architecture_probe.py"  # read from `source`, never written
    hits = [v for v in violations({probe: source}) if "_architecture_probe" in v]
    assert bool(hits) is expected, hits


def test_the_paths_docs_architecture_names_exist() -> None:
    """docs/architecture.md names files and folders; each must exist (a path relative to the
    repository, to nsdiag/ or to nsdiag/analysis/; a bare file name anywhere in the package), and
    every folder of the package must be described."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`([\w./-]+\.(?:py|md|toml|json)|[\w/]+/)`", text))
    roots = (PACKAGE.parent, PACKAGE, PACKAGE / "analysis")
    files = {p.name for p in PACKAGE.rglob("*.py")}
    missing = [
        n
        for n in sorted(named)
        if "NSDnnn" not in n
        and not any((root / n).exists() for root in roots)
        and not ("/" not in n and n in files)
    ]
    assert missing == []
    folders = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*")
        if p.is_dir() and (p / "__init__.py").exists()
    }
    undescribed = [f for f in sorted(folders) if f"{f}/`" not in text]
    assert undescribed == []
