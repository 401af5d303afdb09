"""The program analyses' records (analysis/program/record.py, collected in registry.py) against the
shipped rules, the rule loader and real recordings: every program rule names a registered
analysis, every record documents its values and parameters, a rule's `[params]` are checked
against its record (an unknown key refused in one line, a missing one the default, which the
analysis then runs with), and on the recordings each analysis gives every value it declares."""

from __future__ import annotations

import math
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import nsdiag
from nsdiag.analysis.diagnosis import Diagnosis
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.program.record import TABLE_WORDS, Param, ProgramAnalysis
from nsdiag.analysis.program.registry import PROGRAM_ANALYSES
from nsdiag.analysis.program.timeline.idle import GPU_IDLE_GAPS
from nsdiag.analysis.program.timeline.syncs import SYNC_HEAVY
from nsdiag.analysis.rules.spec import RuleSpec, default_rules, load_rules
from nsdiag.cli import main
from nsdiag.errors import RuleError
from nsdiag.resources import rules_dir

DATA = Path(__file__).parent / "data"
# Between them, every program analysis finds something (the rule ids each one fires) and gives
# each of its values (pipeline: pageable copies next to pinned ones, whose bandwidth it measures).
RECORDINGS: dict[str, tuple[str, ...]] = {
    "nsys/pipeline.sqlite.gz": ("NSD401", "NSD402"),
    "nsys/sync_heavy.sqlite.gz": ("NSD403", "NSD405"),
    "multi_gpu/verify/ddp_straggler": ("NSD403", "NSD404", "NSD410", "NSD420"),
    "multi_gpu/ddp_single_bucket.sqlite.gz": ("NSD421",),
    "programs/infer_cnn": ("NSD410", "NSD411"),
}
IDLE_RULE = "NSD404-gpu-idle-gaps.toml"


def program_rules() -> list[RuleSpec]:
    return [r for r in default_rules() if r.scope == "program"]


def shipped_params(rule: RuleSpec) -> dict[str, Any]:
    """The `[params]` table as the rule file writes it (the loaded rule holds the defaults too)."""
    return dict(tomllib.loads(Path(rule.path).read_text()).get("params", {}))


# ---------------------------------------------------------------- the records


def test_every_shipped_program_rule_names_a_registered_analysis_and_each_has_one() -> None:
    named = {rule.analysis for rule in program_rules()}
    assert named <= PROGRAM_ANALYSES.keys()
    assert named == PROGRAM_ANALYSES.keys(), "an analysis no shipped rule runs"


def test_each_record_is_declared_next_to_its_function() -> None:
    for name, analysis in PROGRAM_ANALYSES.items():
        assert analysis.name == name
        module = sys.modules[analysis.function.__module__]
        declared = [v for v in vars(module).values() if isinstance(v, ProgramAnalysis)]
        assert analysis in declared, f"{name}: declare the record in {module.__name__}"


def _one_line(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text


def test_every_value_and_parameter_is_documented() -> None:
    for name, analysis in PROGRAM_ANALYSES.items():
        assert analysis.values, name
        for value, meaning in analysis.values.items():
            assert value.isidentifier() and _one_line(meaning), (name, value)
        assert analysis.params, name
        for key, param in analysis.params.items():
            assert isinstance(param, Param), (name, key)
            assert key.isidentifier() and _one_line(param.meaning), (name, key)
            assert math.isfinite(param.default), (name, key)
        assert analysis.needs in ("kernels", "launches", "timeline", "ranks"), name
        assert set(analysis.tables) <= TABLE_WORDS.keys(), name


def test_every_shipped_rules_params_are_known_to_its_analysis() -> None:
    for rule in program_rules():
        analysis = PROGRAM_ANALYSES[rule.analysis]
        assert shipped_params(rule).keys() <= analysis.params.keys(), rule.id
        assert rule.params.keys() == analysis.params.keys(), rule.id  # completed by the loader


def test_claims_name_other_analyses_and_admit_an_order() -> None:
    claims = {name: a.claims_before for name, a in PROGRAM_ANALYSES.items()}
    for name, later in claims.items():
        assert set(later) <= claims.keys() - {name}, name
    placed: list[str] = []  # claimers before the analyses they claim from
    while len(placed) < len(claims):
        ready = [
            n
            for n in claims
            if n not in placed and all(n not in claims[m] for m in claims if m not in placed)
        ]
        assert ready, f"the claims form a cycle among {sorted(set(claims) - set(placed))}"
        placed += ready


def test_only_rank_imbalance_holds_findings_back() -> None:
    held = {name for name, a in PROGRAM_ANALYSES.items() if a.held_back is not None}
    assert held == {"rank_imbalance"}


def test_params_of_overlays_the_rule_on_the_defaults_and_refuses_strangers() -> None:
    rule = next(r for r in program_rules() if r.analysis == "gpu_idle_gaps")
    bare = replace(rule, params={"min_impact": 0.5})
    assert GPU_IDLE_GAPS.params_of(bare) == {"min_gap_ns": 100_000.0, "min_impact": 0.5}
    with pytest.raises(ValueError, match="no parameter"):
        GPU_IDLE_GAPS.params_of(replace(rule, params={"odd": 1.0}))


# ---------------------------------------------------------------- the loader


def _idle_rule(folder: Path, edit: str, by: str) -> Path:
    text = (rules_dir() / IDLE_RULE).read_text()
    assert edit in text
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / IDLE_RULE
    path.write_text(text.replace(edit, by))
    return path


def test_an_unknown_params_key_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _idle_rule(tmp_path, "[params]\n", "[params]\nmin_gap_us = 100\n")
    with pytest.raises(RuleError) as error:
        load_rules(tmp_path)
    line = str(error.value)
    assert _one_line(line), line
    for word in (str(path), "min_gap_us", "gpu_idle_gaps", "min_gap_ns", "min_impact"):
        assert word in line, (word, line)
    shown = CliRunner().invoke(main, ["rules", "list", "--rules", str(tmp_path)])
    assert shown.exit_code == 2, shown.output
    lines = shown.output.strip().splitlines()
    assert len(lines) == 1 and "min_gap_us" in lines[0], shown.output


def test_a_missing_params_key_takes_the_default_and_the_analysis_runs_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A default unlike the shipped rule's value, so that a literal left at a call site shows.
    monkeypatch.setitem(GPU_IDLE_GAPS.params, "min_gap_ns", Param(250_000, "patched"))
    _idle_rule(tmp_path, "min_gap_ns = 100000\n", "")
    (rule,) = load_rules(tmp_path)
    assert rule.params == {"min_impact": 0.05, "min_gap_ns": 250_000.0}
    found = diagnose(nsdiag.load(DATA / "multi_gpu/verify/ddp_straggler"), [rule])
    idle = [f for f in found.program_findings if f.rule == "NSD404"]
    assert idle
    for finding in idle:
        (largest,) = [e for e in finding.evidence if e.metric == "largest_gap_ns"]
        assert largest.threshold == 250_000.0
        assert "gaps of at least 250 us" in finding.message
        assert all(g["length_ns"] >= 250_000 for g in finding.details["largest"])


# ---------------------------------------------------------------- on real recordings


@pytest.fixture(scope="module")
def given_values() -> Iterator[tuple[dict[str, Diagnosis], dict[str, list[dict[str, Any]]]]]:
    """Each recording's diagnosis under the shipped program rules, and the values each analysis
    gave its templates (ProgramAnalysis.text sees them all)."""
    given: dict[str, list[dict[str, Any]]] = {}
    text = ProgramAnalysis.text

    def capture(self: ProgramAnalysis, rule: RuleSpec, values: dict[str, Any]) -> tuple[str, str]:
        given.setdefault(self.name, []).append(dict(values))
        return text(self, rule, values)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ProgramAnalysis, "text", capture)
        found = {name: diagnose(nsdiag.load(DATA / name), program_rules()) for name in RECORDINGS}
    yield found, given


def test_the_recordings_find_what_they_were_chosen_for(given_values: Any) -> None:
    found, _ = given_values
    for name, expected in RECORDINGS.items():
        fired = {f.rule for f in found[name].program_findings}
        assert set(expected) <= fired, (name, sorted(fired))


def _given(value: Any) -> bool:
    if value is None or value == "":
        return False
    return not (isinstance(value, float) and math.isnan(value))


def test_every_declared_value_is_given_on_a_recording(given_values: Any) -> None:
    _, given = given_values
    assert given.keys() == PROGRAM_ANALYSES.keys(), "an analysis found nothing on RECORDINGS"
    for name, analysis in PROGRAM_ANALYSES.items():
        for values in given[name]:
            assert values.keys() == analysis.values.keys(), name
        never = [v for v in analysis.values if not any(_given(g[v]) for g in given[name])]
        assert never == [], f"{name} never gives {never} on {', '.join(RECORDINGS)}"


def test_idle_time_a_sync_claims_is_not_counted_again(given_values: Any) -> None:
    """sync_heavy claims before gpu_idle_gaps: an idle gap's saving is its idle time less the
    syncs' claim."""
    assert "gpu_idle_gaps" in SYNC_HEAVY.claims_before
    found, _ = given_values
    idle = [f for d in found.values() for f in d.program_findings if f.cause == "gpu-idle-gaps"]
    assert any(f.details["attributed_to_syncs_ns"] > 0 for f in idle)
    for finding in idle:
        claimed = finding.details["idle_ns"] - finding.details["attributed_to_syncs_ns"]
        assert finding.saved_ns == pytest.approx(claimed, rel=1e-9, abs=1.0)
