"""Rule files are validated whole when they load, and a user's rule folder (--rules DIR,
NSDIAG_RULES_DIR) adds or replaces rules with the same validation.

The corpus of bad rule files is built in tmp_path from the shipped rules (one mutation each);
every one must fail as a RuleError naming the file (and the key), never another exception, and
through the CLI as one line with exit code 2. Property tests draw expressions and templates from
a grammar: a rule built from them loads or gives a RuleError, and a rule that loads evaluates
without raising on any values."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsdiag.analysis.records.findings import Finding, Skipped
from nsdiag.analysis.rules.evaluate import evaluate_rule
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.analysis.ruleset import load_rules, parse_rule
from nsdiag.errors import RuleError
from nsdiag.resources import rules_dir
from tests.test_output_safety import assert_one_line_error, nsdiag_cli

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests/data/calib_small/raw.csv.gz"
KERNEL = "NSD105-local-memory-spill.toml"  # has requires, condition, impact, evidence
PROGRAM = "NSD404-gpu-idle-gaps.toml"  # has analysis and [params]


def shipped(name: str) -> str:
    return (rules_dir() / name).read_text()


def write_rule(folder: Path, name: str, text: str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def replace_line(text: str, key: str, new: str) -> str:
    """`text` with the top-level line `key = ...` replaced by `new` (or removed when empty)."""
    pattern = re.compile(rf"^{re.escape(key)} = .*$", re.MULTILINE)
    assert pattern.search(text), key
    return pattern.sub(lambda _: new, text, count=1)


# (name, shipped file, mutation, words the one line must hold)
CORPUS: list[tuple[str, str, object, tuple[str, ...]]] = [
    (
        "requires is a string",
        KERNEL,
        lambda t: replace_line(t, "requires", 'requires = "local_sectors"'),
        ("requires", "list"),
    ),
    (
        "condition is a number",
        KERNEL,
        lambda t: replace_line(t, "condition", "condition = 5"),
        ("condition", "string"),
    ),
    (
        "title is a table",
        KERNEL,
        lambda t: replace_line(t, "title", "title = { a = 1 }"),
        ("title",),
    ),
    (
        "evidence of numbers",
        KERNEL,
        lambda t: replace_line(t, "evidence", "evidence = [1, 2]"),
        ("evidence",),
    ),
    ("unknown key", KERNEL, lambda t: "severity = 'high'\n" + t, ("severity", "unknown key")),
    (
        "unknown doc section",
        KERNEL,
        lambda t: t.replace("[doc]", "[doc]\nseverity = 'x'"),
        ("doc", "severity"),
    ),
    ("doc is a string", KERNEL, lambda t: t.split("[doc]")[0] + 'doc = "d"\n', ("doc",)),
    (
        "references a number",
        KERNEL,
        lambda t: replace_line(t, "references", "references = 5"),
        ("references",),
    ),
    (
        "param is text",
        PROGRAM,
        lambda t: t.replace("[params]", '[params]\nodd = "sixty"'),
        ("params.odd", "number"),
    ),
    (
        "param is inf",
        PROGRAM,
        lambda t: t.replace("[params]", "[params]\nodd = inf"),
        ("params.odd", "finite"),
    ),
    (
        "param is nan",
        PROGRAM,
        lambda t: t.replace("[params]", "[params]\nodd = nan"),
        ("params.odd", "finite"),
    ),
    (
        "params is a list",
        PROGRAM,
        lambda t: t.split("[params]")[0] + "params = [1]\n[doc]" + t.split("[doc]")[1],
        ("params",),
    ),
    (
        "default is inf",
        KERNEL,
        lambda t: t.replace("[doc]", "[defaults]\nlsu_sectors = inf\n[doc]"),
        ("defaults.lsu_sectors", "finite"),
    ),
    (
        "program rule with a condition",
        PROGRAM,
        lambda t: 'condition = "duration_ns > 1"\n' + t,
        ("condition", "program rule"),
    ),
    (
        "kernel rule with an analysis",
        KERNEL,
        lambda t: 'analysis = "gpu_idle_gaps"\n' + t,
        ("analysis", "kernel rule"),
    ),
    (
        "id a prefix of the file name",
        KERNEL,
        lambda t: replace_line(t, "id", 'id = "NSD10"'),
        ("file name", "NSD10"),
    ),
    (
        "cause not a slug",
        KERNEL,
        lambda t: replace_line(t, "cause", 'cause = "Local Spill"'),
        ("cause", "slug"),
    ),
    (
        "TOML syntax",
        KERNEL,
        lambda t: replace_line(t, "title", 'title = "unterminated'),
        ("not valid TOML",),
    ),
    (
        "not UTF-8",
        KERNEL,
        lambda t: t.encode().replace(b"Local memory", b"Local \xff memory"),
        ("UTF-8", "line"),
    ),
    (
        "latin-1 file",
        KERNEL,
        lambda t: ("title2 = 'caf\u00e9'\n" + t).encode("latin-1", "replace"),
        ("UTF-8",),
    ),
    (
        "message {}",
        KERNEL,
        lambda t: replace_line(t, "message", 'message = "spills {}"'),
        ("message template", "plain value name"),
    ),
    (
        "message unbounded width",
        KERNEL,
        lambda t: replace_line(t, "message", 'message = "{local_sectors:999999999}"'),
        ("message template", "more than"),
    ),
    (
        "fix unknown name",
        KERNEL,
        lambda t: replace_line(t, "fix", 'fix = "use {no_such_value}"'),
        ("fix template", "unknown value"),
    ),
    (
        "message attribute",
        KERNEL,
        lambda t: replace_line(t, "message", 'message = "{local_sectors.real}"'),
        ("message template",),
    ),
    (
        "program message unknown name",
        PROGRAM,
        lambda t: replace_line(t, "message", 'message = "{kernels}"'),
        ("message template", "unknown value"),
    ),
    (
        "condition syntax",
        KERNEL,
        lambda t: replace_line(t, "condition", 'condition = "local_sectors >> > 0"'),
        ("malformed condition",),
    ),
    (
        "impact syntax",
        KERNEL,
        lambda t: replace_line(t, "impact", 'impact = "local_sectors / "'),
        ("malformed impact",),
    ),
    (
        "impact divides by zero",
        KERNEL,
        lambda t: replace_line(t, "impact", 'impact = "local_sectors / (1 - 1)"'),
        ("impact", "divides by zero"),
    ),
    (
        "impact constant undefined",
        KERNEL,
        lambda t: replace_line(t, "impact", 'impact = "0 % 0"'),
        ("impact",),
    ),
    (
        "infinite number",
        KERNEL,
        lambda t: replace_line(t, "condition", 'condition = "local_sectors > 1e999"'),
        ("condition", "not finite"),
    ),
    (
        "huge integer",
        KERNEL,
        lambda t: replace_line(t, "condition", f'condition = "local_sectors > 1{"0" * 400}"'),
        ("condition", "not finite"),
    ),
    (
        "min of one",
        KERNEL,
        lambda t: replace_line(t, "impact", 'impact = "min(local_sectors)"'),
        ("impact", "min takes"),
    ),
    (
        "abs of two",
        KERNEL,
        lambda t: replace_line(t, "impact", 'impact = "abs(local_sectors, 1)"'),
        ("impact", "abs takes"),
    ),
    (
        "bare function name",
        KERNEL,
        lambda t: replace_line(t, "impact", 'impact = "max + 1"'),
        ("impact", "function"),
    ),
    (
        "deep nesting",
        KERNEL,
        lambda t: replace_line(
            t, "condition", 'condition = "' + "not " * 300 + 'local_sectors > 0"'
        ),
        ("condition", "deeper"),
    ),
    (
        "long chain",
        KERNEL,
        lambda t: replace_line(t, "impact", 'impact = "' + "+".join(["local_sectors"] * 150) + '"'),
        ("impact",),
    ),
    (
        "NUL in condition",
        KERNEL,
        lambda t: replace_line(t, "condition", 'condition = "local_sectors\\u0000 > 0"'),
        ("condition",),
    ),
    (
        "param hides a metric",
        KERNEL,
        lambda t: t.replace("[doc]", "[params]\nlsu_sectors = 1\n[doc]"),
        ("params", "lsu_sectors"),
    ),
    ("huge file", KERNEL, lambda t: t + "\n# " + "x" * 300_000 + "\n", ("bytes",)),
]


@pytest.mark.parametrize("name, source, mutate, words", CORPUS, ids=[c[0] for c in CORPUS])
def test_bad_rule_file_is_one_rule_error(
    tmp_path: Path, name: str, source: str, mutate: object, words: tuple[str, ...]
) -> None:
    assert callable(mutate)
    path = write_rule(tmp_path, source, mutate(shipped(source)))
    with pytest.raises(RuleError) as caught:
        parse_rule(path)
    line = str(caught.value)
    assert str(path) in line and "\n" not in line, line
    for word in words:
        assert word in line, (word, line)


def test_corpus_mutations_change_a_rule_that_loads(tmp_path: Path) -> None:
    """The corpus's starting points load, so each failure above is its mutation's."""
    for source in (KERNEL, PROGRAM):
        assert parse_rule(write_rule(tmp_path / source, source, shipped(source))).id


def test_special_files_in_a_rule_folder_never_hang(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    os.mkfifo(folder / "NSD901-pipe.toml")
    with pytest.raises(RuleError, match="not a regular file"):
        load_rules(folder)
    (folder / "NSD901-pipe.toml").unlink()
    (folder / "NSD902-zero.toml").symlink_to("/dev/zero")
    with pytest.raises(RuleError, match="not a regular file"):
        load_rules(folder)
    (folder / "NSD902-zero.toml").unlink()
    (folder / "NSD903-folder.toml").mkdir()
    with pytest.raises(RuleError, match="not a regular file"):
        load_rules(folder)


# --------------------------------------------------------------- division by zero at run time


def _rule(tmp_path: Path, impact: str) -> RuleSpec:
    text = replace_line(shipped(KERNEL), "impact", f'impact = "{impact}"')
    return parse_rule(write_rule(tmp_path, KERNEL, text))


VALUES = {"local_sectors": 100.0, "lsu_sectors": 0.0, "mem_pct": 50.0, "compute_pct": 40.0}


@pytest.mark.parametrize(
    "impact",
    [
        "local_sectors / lsu_sectors * max(mem_pct, compute_pct) / 100",  # the shipped one
        "(local_sectors / lsu_sectors > 1) * 0.5",  # was a silent 0
        "0.5 if local_sectors / lsu_sectors else 0",  # was a silent 0
        "max(0, local_sectors / lsu_sectors - 1)",
        "local_sectors % lsu_sectors",
    ],
)
def test_impact_dividing_by_zero_gives_no_estimate_with_a_note(tmp_path: Path, impact: str) -> None:
    finding = evaluate_rule(_rule(tmp_path, impact), VALUES, kernel_ns=1e6, wall_ns=2e6)
    assert isinstance(finding, Finding)
    assert finding.saved_ns is None and finding.estimate == "none", finding
    assert finding.impact_basis.startswith("No estimate here: lsu_sectors is 0"), finding
    assert finding.to_json()["saved_ns"] is None


def test_impact_without_zero_division_still_estimates(tmp_path: Path) -> None:
    rule = _rule(tmp_path, "(local_sectors / lsu_sectors > 1) * 0.5")
    finding = evaluate_rule(rule, {**VALUES, "lsu_sectors": 10.0}, kernel_ns=1e6, wall_ns=2e6)
    assert isinstance(finding, Finding) and finding.saved_ns == pytest.approx(5e5)


# --------------------------------------------------------------- property tests of the language

# Mostly the language's own words (so that many draws load and run), some outside it.
KNOWN = ["local_sectors", "lsu_sectors", "mem_pct", "compute_pct"]
NAMES = [*KNOWN, "no_such_metric", "min", "x"]
NUMBERS = ["0", "1", "0.5", "-3", "1e308", "1e-300", "1e999", "10" * 40, "True", "nan"]
FUNCTIONS = ["min", "max", "abs", "floor", "ceil", "pow", "__import__"]
BINARY = ["+", "-", "*", "/", "%", "**", "//", "@"]
COMPARE = ["<", "<=", ">", ">=", "==", "!=", " is "]


def _rarely(usual: st.SearchStrategy[str], odd: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """`usual` nine times in ten, else `odd`."""
    return st.integers(0, 9).flatmap(lambda k: usual if k else odd)


def _mostly(good: list[str], anything: list[str]) -> st.SearchStrategy[str]:
    """One of `good` nine times in ten, else one of `anything`."""
    return _rarely(st.sampled_from(good), st.sampled_from(anything))


def expressions() -> st.SearchStrategy[str]:
    leaves = _mostly(KNOWN, NAMES) | _mostly(NUMBERS[:6], NUMBERS)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        valid = st.one_of(
            st.tuples(inner, _mostly(BINARY[:5], BINARY), inner).map(
                lambda t: f"{t[0]} {t[1]} {t[2]}"
            ),
            st.tuples(inner, _mostly(COMPARE[:6], COMPARE), inner).map("".join),
            st.tuples(inner, st.sampled_from([" and ", " or "]), inner).map("".join),
            inner.map(lambda e: f"not {e}"),
            inner.map(lambda e: f"-{e}"),
            inner.map(lambda e: f"({e})"),
            st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} if {t[1]} else {t[2]}"),
            st.tuples(_mostly(FUNCTIONS[:5], FUNCTIONS), st.lists(inner, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"
            ),
        )
        outside = st.one_of(inner.map(lambda e: f"{e}.real"), inner.map(lambda e: f"{e}[0]"))
        return _rarely(valid, outside)

    return _rarely(st.recursive(leaves, extend, max_leaves=8), st.text(max_size=30))


metric_values = st.one_of(
    st.floats(min_value=-1e3, max_value=1e3),
    st.sampled_from([0.0, -0.0, 1.0, 1e308, -1e308]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.sampled_from(["text", 10**400]),
)
all_values = st.fixed_dictionaries(dict.fromkeys(NAMES, metric_values))
LOADED: list[bool] = []


@settings(max_examples=500, deadline=None)
@given(source=expressions(), values=all_values)
def test_expressions_parse_or_fail_cleanly_and_evaluate_without_raising(
    source: str, values: dict[str, object]
) -> None:
    from nsdiag.analysis.rules.expr import ExpressionError, parse

    try:
        expression = parse(source, {"LIMIT": 60.0})
    except ExpressionError:
        return
    value = expression.evaluate(values)
    assert value is None or isinstance(value, (bool, float, int))
    assert expression.holds(values) in (True, False, None)
    expression.zero_divisors(values)
    expression.comparisons()


TEMPLATE_PARTS = [
    "text ",
    "{local_sectors}",
    "{local_sectors:.2f}",
    "{local_sectors:>999999999}",
    "{local_sectors:{mem_pct}}",
    "{}",
    "{0}",
    "{a.b}",
    "{local_sectors!r}",
    "{local_sectors!z}",
    "{",
    "}",
    "{{",
    "}}",
    "{local_sectors:,d}",
    "{local_sectors:%}",
    "{kernel_kind}",
    "{no_such_value}",
]
templates = _rarely(
    st.lists(_mostly(TEMPLATE_PARTS[:3], TEMPLATE_PARTS), min_size=1, max_size=5).map("".join),
    st.text(max_size=20),
)


def _toml_string(text: str) -> str:
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else c for c in text) + '"'


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    condition=expressions(),
    impact=expressions(),
    message=templates,
    values=all_values,
)
def test_rule_language_loads_or_fails_cleanly_and_never_raises_when_run(
    tmp_path_factory: pytest.TempPathFactory,
    condition: str,
    impact: str,
    message: str,
    values: dict[str, object],
) -> None:
    text = replace_line(shipped(KERNEL), "condition", f"condition = {_toml_string(condition)}")
    text = replace_line(text, "impact", f"impact = {_toml_string(impact)}")
    text = replace_line(text, "message", f"message = {_toml_string(message)}")
    path = write_rule(tmp_path_factory.mktemp("rule"), KERNEL, text)
    try:
        rule = parse_rule(path)
    except RuleError as error:
        assert "\n" not in str(error)
        LOADED.append(False)
        return
    LOADED.append(True)
    result = evaluate_rule(rule, values, kernel_ns=1000.0, wall_ns=2000.0)
    assert result is None or isinstance(result, (Finding, Skipped))
    if isinstance(result, Finding):
        assert len(result.message) < 10_000
        assert result.saved_ns is None or math.isfinite(result.saved_ns)


def test_the_grammar_draws_rules_that_load() -> None:
    """The property test above is only as strong as its share of rules that load and run."""
    if len(LOADED) < 100:
        pytest.skip("run with the property test")
    assert 0.05 < sum(LOADED) / len(LOADED) < 0.95, sum(LOADED) / len(LOADED)


# --------------------------------------------------------------- --rules DIR and NSDIAG_RULES_DIR


def _override_folder(tmp_path: Path) -> Path:
    """NSD101 with a new title and message, and a new rule NSD901."""
    folder = tmp_path / "my rules"
    text = shipped("NSD101-dram-bandwidth-saturated.toml")
    text = replace_line(text, "title", 'title = "My DRAM rule"')
    text = replace_line(text, "message", 'message = "mine: DRAM at {dram_throughput_pct:.0f}%"')
    write_rule(folder, "NSD101-dram-bandwidth-saturated.toml", text)
    new = replace_line(text, "id", 'id = "NSD901"')
    new = replace_line(new, "cause", 'cause = "my-dram"')
    new = replace_line(new, "title", 'title = "My new rule"')
    write_rule(folder, "NSD901-my-dram.toml", new)
    return folder


def test_rules_folder_adds_and_replaces(tmp_path: Path) -> None:
    folder = _override_folder(tmp_path)
    listing = nsdiag_cli("rules", "list", "--rules", str(folder))
    assert listing.returncode == 0, listing.stderr
    assert "My DRAM rule" in listing.stdout and "NSD901" in listing.stdout
    assert "DRAM bandwidth saturated" not in listing.stdout
    assert "note: rule NSD101" in listing.stderr and "replaces" in listing.stderr
    shown = nsdiag_cli("rules", "show", "NSD901", "--rules", str(folder))
    assert shown.returncode == 0 and "My new rule" in shown.stdout
    reference = ROOT / "tests/data/reference/raw.csv.gz"
    explained = nsdiag_cli("explain", str(reference), "--rules", str(folder), "--verbose")
    assert explained.returncode == 0, explained.stderr
    assert "mine: DRAM at" in explained.stdout and "NSD901" in explained.stdout


def test_rules_from_the_environment(tmp_path: Path) -> None:
    folder = _override_folder(tmp_path)
    empty_entry = os.pathsep.join(["", str(folder)])
    result = subprocess.run(
        [sys.executable, "-m", "nsdiag", "rules", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NSDIAG_RULES_DIR": empty_entry},
    )
    assert result.returncode == 0, result.stderr
    assert "My DRAM rule" in result.stdout and "NSD901" in result.stdout


@pytest.mark.parametrize("command", ["explain", "report", "rules"])
def test_bad_rule_folder_is_one_line(tmp_path: Path, command: str) -> None:
    folder = tmp_path / "rules"
    text = replace_line(shipped(KERNEL), "impact", "impact = 0.5")
    write_rule(folder, KERNEL, text)
    args = {
        "explain": ("explain", str(SMALL)),
        "report": ("report", str(SMALL), "-o", str(tmp_path / "r.html")),
        "rules": ("rules", "list"),
    }[command]
    result = nsdiag_cli(*args, "--rules", str(folder))
    assert_one_line_error(result, KERNEL, "impact must be a string")
    assert not (tmp_path / "r.html").exists()


def test_profile_checks_the_rules_before_it_runs_anything(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    write_rule(folder, KERNEL, replace_line(shipped(KERNEL), "condition", "condition = true"))
    result = nsdiag_cli("profile", "--rules", str(folder), "--dry-run", "--", "true")
    assert_one_line_error(result, KERNEL, "condition must be a string")


def test_missing_or_empty_rule_folder(tmp_path: Path) -> None:
    result = nsdiag_cli("rules", "list", "--rules", str(tmp_path / "nowhere"))
    assert_one_line_error(result, "nowhere", "not a folder")
    (tmp_path / "empty").mkdir()
    result = nsdiag_cli("explain", str(SMALL), "--rules", str(tmp_path / "empty"))
    assert_one_line_error(result, "no rule files")


def test_non_utf8_rule_through_the_cli(tmp_path: Path) -> None:
    """Was a UnicodeDecodeError traceback."""
    folder = tmp_path / "rules"
    write_rule(folder, KERNEL, shipped(KERNEL).encode().replace(b"Local", b"\xff\xfeLocal", 1))
    assert_one_line_error(nsdiag_cli("rules", "--rules", str(folder)), "not UTF-8")


def test_copy_of_the_shipped_rules_loads_as_a_folder(tmp_path: Path) -> None:
    for path in rules_dir().glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
    result = nsdiag_cli("rules", "list", "--rules", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("note: rule") == len(list(rules_dir().glob("*.toml")))


def test_readme_example_rule_loads_and_fires(tmp_path: Path) -> None:
    """The README's example rule is a working rule: it loads, and fires on the torch_cases
    recording's L2-bound elementwise kernel (L2 71%, DRAM 13%)."""
    readme = (ROOT / "README.md").read_text()
    example = next(b for b in re.findall(r"```toml\n(.*?)```", readme, re.S) if "NSD901" in b)
    write_rule(tmp_path / "my-rules", "NSD901-hot-l2.toml", example)
    result = nsdiag_cli(
        "explain",
        str(ROOT / "tests/data/torch_cases/raw.csv.gz"),
        "--rules",
        str(tmp_path / "my-rules"),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    rules = {f["rule"] for k in json.loads(result.stdout)["kernels"] for f in k["findings"]}
    assert "NSD901" in rules
