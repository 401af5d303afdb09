"""The rule table: every rule file loads and is documented; malformed rules fail here."""

from __future__ import annotations

import re
from math import nan
from pathlib import Path

import pytest

from nsdiag.analysis import ruleset
from nsdiag.analysis.records.findings import Finding, Skipped
from nsdiag.analysis.rules.evaluate import evaluate_rule
from nsdiag.analysis.ruleset import load_rules, parse_rule
from nsdiag.errors import RuleError
from nsdiag.resources import rules_dir

DOC_TABLE = """[doc]
detects = "d"
why = "w"
fix = "f"
false_positives = "p"
references = ["r"]
"""

GOOD_RULE = (
    """id = "NSD900"
cause = "dram-bandwidth-saturated"
title = "t"
scope = "kernel"
requires = ["dram_throughput_pct"]
condition = "dram_throughput_pct >= 60"
evidence = ["dram_throughput_pct"]
impact = "0.5"
message = "m {dram_throughput_pct:.0f}"
fix = "f"
"""
    + DOC_TABLE
)


def test_every_rule_loads_with_unique_ids_and_docs() -> None:
    rules = load_rules()
    assert len(rules) >= 29
    assert len({r.id for r in rules}) == len(rules)
    for rule in rules:
        for section in ("detects", "why", "fix", "false_positives", "references"):
            assert rule.doc[section], (rule.id, section)


def _rule_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "NSD900-test.toml"
    path.write_text(text)
    return path


def test_template_rule_parses(tmp_path: Path) -> None:
    rule = parse_rule(_rule_file(tmp_path, GOOD_RULE))
    assert rule.condition is not None and rule.condition.evaluate({"dram_throughput_pct": 70.0})


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            'condition = "dram_throughput_pct >= 60"',
            'condition = "dram_throughput_pc >= 60"',
            "unknown metric",
        ),
        (
            'condition = "dram_throughput_pct >= 60"',
            'condition = "dram_throughput_pct >>= 60"',
            "malformed condition",
        ),
        (
            'condition = "dram_throughput_pct >= 60"',
            "condition = \"__import__('os').system('x') or 1\"",
            "malformed condition",
        ),
        (
            'condition = "dram_throughput_pct >= 60"',
            'condition = "dram_throughput_pct.real >= 60"',
            "malformed condition",
        ),
        ('requires = ["dram_throughput_pct"]', 'requires = ["no_such_metric"]', "requires unknown"),
        (
            'evidence = ["dram_throughput_pct"]',
            'evidence = ["no_such_metric"]',
            "evidence names unknown",
        ),
        ('impact = "0.5"', 'impact = "lambda: 1"', "malformed impact"),
        ('false_positives = "p"\n', "", "documentation section"),
        ('scope = "kernel"', 'scope = "galaxy"', "scope must be"),
        ('id = "NSD900"', 'id = "NSD901"', "must start with its id"),
        ('title = "t"', 'title = ""', "missing or empty 'title'"),
    ],
)
def test_bad_rule_files_fail(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in GOOD_RULE
    with pytest.raises(RuleError, match=message):
        parse_rule(_rule_file(tmp_path, GOOD_RULE.replace(old, new)))


def test_a_users_rule_may_name_a_cause_of_its_own_a_shipped_one_may_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cause outside records/causes.py is a user's default (one change per finding); in the
    shipped rules it fails when they load, so a shipped rule's cause cannot be left out."""
    path = _rule_file(tmp_path, GOOD_RULE.replace("dram-bandwidth-saturated", "my-own-cause"))
    assert parse_rule(path).cause == "my-own-cause"
    assert load_rules(tmp_path)[0].cause == "my-own-cause"
    with pytest.raises(RuleError, match="cause 'my-own-cause' is not in analysis/records/causes"):
        parse_rule(path, shipped=True)
    monkeypatch.setattr(ruleset, "rules_dir", lambda: tmp_path)  # as if shipped
    with pytest.raises(RuleError, match="my-own-cause"):
        load_rules()


@pytest.mark.parametrize(
    ("cause", "message"),
    [("sync-heavy", "a program cause"), ("rank-imbalance", "a rank cause")],
)
def test_a_cause_of_the_table_keeps_its_scope(tmp_path: Path, cause: str, message: str) -> None:
    path = _rule_file(tmp_path, GOOD_RULE.replace("dram-bandwidth-saturated", cause))
    with pytest.raises(RuleError, match=f"{message}, and this rule's scope is 'kernel'"):
        parse_rule(path)


def test_shipped_rules_folder_is_found() -> None:
    assert (rules_dir() / "NSD101-dram-bandwidth-saturated.toml").is_file()


# ---------------------------------------------------------------- missing metrics, named constants

POLICY_RULE = GOOD_RULE.replace(
    'condition = "dram_throughput_pct >= 60"',
    'condition = "dram_throughput_pct >= SATURATED_PCT and not (l2_throughput_pct < 50)"',
)


def _evaluate(tmp_path: Path, text: str, values: dict[str, float]) -> Finding | Skipped | None:
    return evaluate_rule(parse_rule(_rule_file(tmp_path, text)), {"time_share": 0.5, **values})


def test_a_missing_name_the_condition_needs_skips_the_rule(tmp_path: Path) -> None:
    """Before the policy `not (x < 50)` passed silently when x was missing."""
    result = _evaluate(tmp_path, POLICY_RULE, {"dram_throughput_pct": 80.0})
    assert result == Skipped("NSD900", "missing l2_throughput_pct")
    result = _evaluate(
        tmp_path, POLICY_RULE, {"dram_throughput_pct": 80.0, "l2_throughput_pct": nan}
    )
    assert result == Skipped("NSD900", "missing l2_throughput_pct")
    assert isinstance(
        _evaluate(tmp_path, POLICY_RULE, {"dram_throughput_pct": 80.0, "l2_throughput_pct": 70.0}),
        Finding,
    )


def test_known_values_decide_without_the_missing_one(tmp_path: Path) -> None:
    assert _evaluate(tmp_path, POLICY_RULE, {"dram_throughput_pct": 20.0}) is None


def test_a_required_name_skips_the_rule_whatever_the_condition(tmp_path: Path) -> None:
    result = _evaluate(tmp_path, POLICY_RULE, {"l2_throughput_pct": 70.0})
    assert result == Skipped("NSD900", "missing dram_throughput_pct")


def test_a_declared_default_stands_in_for_a_missing_name(tmp_path: Path) -> None:
    text = POLICY_RULE.replace("[doc]", "[defaults]\nl2_throughput_pct = 100\n\n[doc]")
    result = _evaluate(tmp_path, text, {"dram_throughput_pct": 80.0})
    assert isinstance(result, Finding)
    # the evidence shows what was measured (nothing), not the default
    assert {e.metric: e.value for e in result.evidence}["l2_throughput_pct"] is None
    text = POLICY_RULE.replace("[doc]", "[defaults]\nl2_throughput_pct = 0\n\n[doc]")
    assert _evaluate(tmp_path, text, {"dram_throughput_pct": 80.0}) is None


def test_named_constants_read_as_their_value(tmp_path: Path) -> None:
    rule = parse_rule(_rule_file(tmp_path, POLICY_RULE))
    assert rule.condition is not None and rule.condition.constants == {"SATURATED_PCT": 60.0}
    comparisons = [(c.metric, c.op, c.threshold) for c in rule.condition.comparisons()]
    assert comparisons[0] == ("dram_throughput_pct", ">=", 60.0)


@pytest.mark.parametrize(
    "defaults, message",
    [
        ("no_such_metric = 1", "defaults name no_such_metric"),
        ("dram_throughput_pct = 1", "both required and defaulted"),
        ('l2_throughput_pct = "high"', "not a number"),
        ("l1_throughput_pct = 1", "do not read"),
    ],
)
def test_bad_defaults_fail(tmp_path: Path, defaults: str, message: str) -> None:
    text = POLICY_RULE.replace("[doc]", f"[defaults]\n{defaults}\n\n[doc]")
    with pytest.raises(RuleError, match=message):
        parse_rule(_rule_file(tmp_path, text))


def test_shipped_rules_name_the_verdict_thresholds() -> None:
    """Conditions that compare with the verdict's saturation or launch threshold use the named
    constant, so the rules and the verdict cannot drift apart."""
    for rule in load_rules():
        if rule.condition is not None:
            assert not {"60", "5000"} & set(re.findall(r"\b\d+\b", rule.condition.source)), rule.id


# ------------------------------------------------------------------ message and fix templates

PROGRAM_RULE = (
    """id = "NSD900"
cause = "gpu-idle-gaps"
title = "t"
scope = "program"
analysis = "gpu_idle_gaps"
message = "{range_label}: idle {idle_ms:.2f} ms. {host_activity}"
fix = "g {top_calls}"
"""
    + DOC_TABLE
)


def test_program_rule_templates_name_their_analysis_values(tmp_path: Path) -> None:
    rule = parse_rule(_rule_file(tmp_path, PROGRAM_RULE))
    assert rule.analysis == "gpu_idle_gaps" and "{idle_ms:.2f}" in rule.message


@pytest.mark.parametrize(
    "template, message",
    [
        ("{}", r"field \{\} is not a plain value name"),
        ("{0}", r"field \{0\} is not a plain value name"),
        ("{idle_ms.real}", "not a plain value name"),
        ("{idle_ms[0]}", "not a plain value name"),
        ("{idle_ms:1000000}", "asks for more than 64"),
        ("{idle_ms:.100f}", "asks for more than 64"),
        ("{idle_ms:{top_calls}}", "not a plain format spec"),
        ("{idle_ms!z}", "unknown conversion"),
        ("{idle_nanos:.2f}", r"unknown value \{idle_nanos\}"),
        ("{dram_throughput_pct:.0f}", "unknown value"),  # a kernel metric: not in this analysis
        ("idle {", "malformed template"),
    ],
)
def test_bad_program_templates_fail(tmp_path: Path, template: str, message: str) -> None:
    originals = {
        "message": "{range_label}: idle {idle_ms:.2f} ms. {host_activity}",
        "fix": "g {top_calls}",
    }
    for key, original in originals.items():
        text = PROGRAM_RULE.replace(f'{key} = "{original}"', f'{key} = "{template}"')
        with pytest.raises(RuleError, match=f"NSD900-test.toml: {key} template: .*{message}"):
            parse_rule(_rule_file(tmp_path, text))


@pytest.mark.parametrize(
    "template, message",
    [
        ("{SATURATED_PCT}", "unknown value"),  # constants are not among the values shown
        ("{no_such_metric:.0f}", "unknown value"),
        ("{dram_throughput_pct:2000}", "asks for more than 64"),
        ("{dram_throughput_pct[1]}", "not a plain value name"),
    ],
)
def test_bad_kernel_templates_fail(tmp_path: Path, template: str, message: str) -> None:
    text = GOOD_RULE.replace('message = "m {dram_throughput_pct:.0f}"', f'message = "{template}"')
    with pytest.raises(RuleError, match=f"NSD900-test.toml: message template: .*{message}"):
        parse_rule(_rule_file(tmp_path, text))


def test_kernel_templates_may_show_text_values(tmp_path: Path) -> None:
    text = GOOD_RULE.replace(
        'message = "m {dram_throughput_pct:.0f}"',
        'message = "{uncoalesced_side} {tail_label} {gemm_tile} {occupancy_limiter} {top_stall}"',
    )
    assert parse_rule(_rule_file(tmp_path, text)).message.startswith("{uncoalesced_side}")


def test_a_program_rule_needs_a_known_analysis(tmp_path: Path) -> None:
    text = PROGRAM_RULE.replace('analysis = "gpu_idle_gaps"', 'analysis = "gpu_naps"')
    with pytest.raises(RuleError, match="unknown analysis 'gpu_naps'"):
        parse_rule(_rule_file(tmp_path, text))


def test_a_malformed_template_in_a_rules_folder_fails_to_load(tmp_path: Path) -> None:
    for path in rules_dir().glob("NSD*.toml"):
        (tmp_path / path.name).write_text(path.read_text())
    assert len(load_rules(tmp_path)) == len(load_rules())
    broken = next(tmp_path.glob("NSD404-*.toml"))
    broken.write_text(broken.read_text().replace("{idle_ms:time_ms}", "{idle_ms:time_ms} {0}"))
    with pytest.raises(RuleError, match=f"{broken.name}: message template"):
        load_rules(tmp_path)


def test_every_analysis_has_registered_values_and_every_program_rule_uses_them() -> None:
    from nsdiag.analysis.program.registry import PROGRAM_ANALYSES
    from nsdiag.analysis.rules.template import template_fields

    assert all(analysis.values for analysis in PROGRAM_ANALYSES.values())
    for rule in load_rules():
        if rule.scope == "program":
            used = {name for name, _, _ in template_fields(rule.message)}
            assert used and used <= PROGRAM_ANALYSES[rule.analysis].values.keys(), rule.id


def test_program_text_formats_the_rule_templates_and_checks_the_values(tmp_path: Path) -> None:
    from nsdiag.analysis.program.timeline.host_wait import IDLE_OTHER

    rule = parse_rule(_rule_file(tmp_path, PROGRAM_RULE))
    values: dict[str, object] = dict.fromkeys(IDLE_OTHER.values, None)
    values.update(range_label="NVTX range 'step'", idle_ms=1.234, host_activity="")
    values["top_calls"] = "cudaMalloc x3"
    assert IDLE_OTHER.text(rule, values) == (
        "NVTX range 'step': idle 1.23 ms. ",
        "g cudaMalloc x3",
    )
    values["idle_ms"] = nan  # missing values print n/a
    assert IDLE_OTHER.text(rule, values)[0] == "NVTX range 'step': idle n/a ms. "
    with pytest.raises(ValueError, match="unlike its record"):
        IDLE_OTHER.text(rule, {**values, "extra": 1})


def test_the_formatter_never_fails() -> None:
    from nsdiag.analysis.rules.template import render

    assert render("{a:.1f} {b:.1f} {c:1000000} {d}", {"a": 2.25, "b": "text", "c": 7}) == (
        "2.2 text 7 n/a"
    )
    with pytest.raises(ValueError, match="bad field"):
        render("{a.b}", {"a": 1})


def test_rules_show_lists_the_values_a_template_may_use() -> None:
    from click.testing import CliRunner

    from nsdiag.analysis.program.timeline.host_wait import IDLE_OTHER
    from nsdiag.cli import main

    shown = CliRunner().invoke(main, ["rules", "show", "NSD404"])
    assert shown.exit_code == 0, shown.output
    assert "analysis: gpu_idle_gaps; its message and fix may use these values:" in shown.output
    assert IDLE_OTHER.values  # the record behind NSD404
    for name in IDLE_OTHER.values:
        assert f"  {{{name}}} " in shown.output
    kernel = CliRunner().invoke(main, ["rules", "show", "NSD301"])
    assert "message shows: theoretical_occupancy_pct, occupancy_limiter," in kernel.output
