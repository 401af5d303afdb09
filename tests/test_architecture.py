"""The layers of docs/architecture.md, checked on the code's own imports: no module imports a layer
above it, directly, lazily inside a function, or through a package's __init__ (the package face
`nsdiag` reaches collect/ through `load`, so only collect/ and the CLI may import from it); the
floors of analysis/ (records at the bottom, the rule loader and the engine on top), what the
renderers and collect/ take from analysis/, and no import circle anywhere in nsdiag/."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Mapping
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
    "nsdiag.mcp": 6,  # the MCP server: a front end beside the CLI, through its entry points
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


# ------------------------------------------------------------------ the floors of analysis/

# Lowest first (docs/architecture.md, "Inside analysis/"): a module of analysis/ imports its own
# floor and those below, never one above, not even for annotations (TYPE_CHECKING counts).
FLOORS: dict[str, int] = {
    "nsdiag.analysis.records": 0,  # the result records and the cause table: data only
    "nsdiag.analysis.rules": 1,  # the rule format: expressions, files, templates, evaluation
    "nsdiag.analysis.region": 1,  # which part of the timeline is analysed
    "nsdiag.analysis.marginal": 1,  # the greedy walk over budgets of time
    "nsdiag.analysis.filters": 1,  # part of a session (the CLI's --kernel, --nvtx)
    "nsdiag.analysis.kernel": 2,  # per signature: verdict, roofline, the kernel namespace
    "nsdiag.analysis.program": 3,  # across kernels and the timeline
    "nsdiag.analysis.changes": 4,  # findings grouped into changes
    "nsdiag.analysis.ruleset": 4,  # the rule loader: rules checked against kernel/, program/
    "nsdiag.analysis.engine": 5,  # one diagnosis
    "nsdiag.analysis.diff": 5,  # two diagnoses compared
}
# What the layers above take from analysis/: the records (and the comparison's, and the rule
# format for `nsdiag rules show`), and the entry points they run.
READS_FROM_ANALYSIS: dict[str, tuple[str, ...]] = {
    "nsdiag.render": (
        "nsdiag.analysis.records",
        "nsdiag.analysis.diff",
        "nsdiag.analysis.rules.spec",
        "nsdiag.analysis.rules.template",
    ),
    # phase 1 chooses the region that phase 2 profiles
    "nsdiag.collect": ("nsdiag.analysis.records", "nsdiag.analysis.region"),
}


def _prefixed(module: str, table: Mapping[str, object]) -> str | None:
    """The longest key of `table` that is `module` or a package above it."""
    keys = [k for k in table if module == k or module.startswith(k + ".")]
    return max(keys, key=len) if keys else None


def _every_import(tree: ast.Module, modules: set[str]) -> set[str]:
    """Every nsdiag module the code imports: at module level, inside functions, for annotations
    (`from package import submodule` is the submodule)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "nsdiag" or node.module.startswith("nsdiag."):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "nsdiag")
    return found & modules


def import_graph(extra: Mapping[str, str] | None = None) -> dict[str, set[str]]:
    """Module -> the nsdiag modules it imports, over the package (and `extra`: module name ->
    source, modules not on disk)."""
    sources = {_module_name(p): p.read_text() for p in _modules()}
    sources.update(extra or {})
    modules = set(sources)
    return {m: _every_import(ast.parse(src), modules) - {m} for m, src in sources.items()}


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of two modules or more (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return sorted(found)


def floor_violations(graph: Mapping[str, set[str]]) -> list[str]:
    found = []
    for module, targets in graph.items():
        mine = _prefixed(module, FLOORS)
        if mine is None:
            continue
        for target in sorted(targets):
            theirs = _prefixed(target, FLOORS)
            if theirs is not None and FLOORS[theirs] > FLOORS[mine]:
                found.append(f"{module} (floor {FLOORS[mine]}) imports {target} ({FLOORS[theirs]})")
    return found


def test_every_module_of_analysis_has_a_floor() -> None:
    unplaced = [
        m
        for m in import_graph()
        if m.startswith("nsdiag.analysis.") and _prefixed(m, FLOORS) is None
    ]
    assert unplaced == [], "give these a floor in FLOORS and docs/architecture.md"


def test_no_module_of_analysis_imports_a_floor_above_it() -> None:
    assert floor_violations(import_graph()) == []


def test_the_floor_check_sees_an_import_up() -> None:
    probe = {"nsdiag.analysis.records.probe": "from nsdiag.analysis.engine import diagnose\n"}
    assert floor_violations(import_graph(probe)) == [
        "nsdiag.analysis.records.probe (floor 0) imports nsdiag.analysis.engine (5)"
    ]


def test_no_import_circle_in_nsdiag() -> None:
    assert circles(import_graph()) == []


def test_the_circle_check_sees_a_lazy_or_annotation_circle() -> None:
    lazy = "def f():\n    from nsdiag.analysis.engine import diagnose\n"
    annotation = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from nsdiag.analysis.engine import diagnose\n"
    )
    for source in (lazy, annotation):
        graph = import_graph({"nsdiag.analysis.records.probe": source})
        graph["nsdiag.analysis.engine"].add("nsdiag.analysis.records.probe")
        assert ["nsdiag.analysis.engine", "nsdiag.analysis.records.probe"] in circles(graph)


def test_render_and_collect_read_only_records_from_analysis() -> None:
    for module, targets in import_graph().items():
        layer = _prefixed(module, READS_FROM_ANALYSIS)
        if layer is None:
            continue
        allowed = READS_FROM_ANALYSIS[layer]
        taken = [t for t in targets if t.startswith("nsdiag.analysis")]
        assert [t for t in taken if _prefixed(t, dict.fromkeys(allowed)) is None] == [], module


def test_the_records_are_data_only() -> None:
    """records/ imports nothing of analysis/ above it, nor pandas or numpy, even unused."""
    records = PACKAGE / "analysis" / "records"
    for path in records.glob("*.py"):
        tree = ast.parse(path.read_text())
        named = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        named |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        heavy = {m for m in named if m.split(".")[0] in ("pandas", "numpy")}
        assert heavy == set(), path.name
    code = (
        "import sys, pkgutil, importlib, nsdiag.analysis.records as r\n"
        "for m in pkgutil.iter_modules(r.__path__):\n"
        "    importlib.import_module(f'{r.__name__}.{m.name}')\n"
        "print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"
