"""ncu's own rule stands in where a kernel rule's metrics are missing (issue 39, item 3).

The recording: tests/data/calib_small, one real H200 run of the calibration kernels, exported
three ways. Its details page (details.csv.gz) carries ncu's rule results but not the
bytes-per-sector metrics NSD103 needs (they belong to a section the details page does not
print); its raw page (raw.csv.gz) has those metrics and no rule results; the report
(report.ncu-rep.gz) has both.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import jsonschema
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.model.session import Session
from nsdiag.render.text import render_text

SCHEMA = json.loads((Path(__file__).parents[1] / "docs/diagnosis.schema.json").read_text())
SMALL = Path(__file__).parent / "data/calib_small"
NSD103_METRICS = ["global_load_bytes_per_sector", "global_store_bytes_per_sector"]
UNCOALESCED = "uncoalesced_global_access_bad"
# ncu's own result for that kernel in the recording: UncoalescedGlobalAccess, OPT, global 77.47%
NCU_SPEEDUP = 77.47


def _kernel(d: Diagnosis, name: str) -> KernelDiagnosis:
    return next(k for k in d.kernels if k.name.startswith(name))


def _nsd103(k: KernelDiagnosis) -> list:
    return [f for f in k.findings if f.rule == "NSD103"]


def _with_metrics(details: Session) -> Session:
    """The details export with NSD103's metrics from the raw export of the same run."""
    raw = nsdiag.load(SMALL / "raw.csv.gz")
    kernels = details.kernels.copy()
    assert list(raw.kernels["duration_ns"]) == list(kernels["duration_ns"])  # same launches
    for m in NSD103_METRICS:
        kernels[m] = raw.kernels[m].to_numpy()
    return dataclasses.replace(details, kernels=kernels)


def test_ncu_rule_stands_in_where_the_metric_is_missing() -> None:
    session = nsdiag.load(SMALL / "details.csv.gz")
    assert not set(NSD103_METRICS) & set(session.kernels.columns)  # the real export lacks them
    assert session.rule_results is not None and "UncoalescedGlobalAccess" in set(
        session.rule_results["rule"]
    )
    d = diagnose(session)
    k = _kernel(d, UNCOALESCED)
    [f] = _nsd103(k)
    assert f.source == "ncu-rule" and f.estimate == "ncu-rule"
    assert f.ncu_rule["rule"] == "UncoalescedGlobalAccess"
    assert f.ncu_rule["speedup_type"] == "global"
    assert f.ncu_rule["speedup"] == pytest.approx(NCU_SPEEDUP)
    assert f.message.startswith("from ncu's rule UncoalescedGlobalAccess (est. 77% speedup): ")
    assert "58720256 excessive sectors" in f.message  # ncu's own message
    # The currency: ncu's global speedup is the share of the kernel's run time saved, so the
    # saving is that share of the kernel's time in the analysed region.
    assert f.recoverable == pytest.approx(NCU_SPEEDUP / 100)
    assert f.saved_ns == pytest.approx(NCU_SPEEDUP / 100 * k.total_duration_ns)
    assert f.impact == pytest.approx(f.saved_ns / d.wall_ns)
    assert "UncoalescedGlobalAccess stands in" in f.impact_basis
    # The skipped note stays truthful: the metric is missing, and who stood in.
    notes = [s.reason for s in d.skipped_rules if s.rule == "NSD103" and s.kernel == k.name]
    assert notes == [
        "missing global_load_bytes_per_sector, global_store_bytes_per_sector; "
        "ncu's UncoalescedGlobalAccess stands in"
    ]
    # No ncu result for the other kernel: skipped, no finding.
    assert not _nsd103(_kernel(d, "dram_bandwidth_saturated_bad"))
    # The JSON carries the source and ncu's result; the text says whose rule it is.
    doc = d.to_json()
    jsonschema.validate(doc, SCHEMA)
    [j] = [
        f
        for kk in doc["kernels"]
        if kk["name"].startswith(UNCOALESCED)
        for f in kk["findings"]
        if f["rule"] == "NSD103"
    ]
    assert (j["source"], j["estimate"], j["ncu_rule"]["rule"]) == (
        "ncu-rule",
        "ncu-rule",
        "UncoalescedGlobalAccess",
    )
    text = " ".join(render_text(d, verbose=True).split())
    assert "from ncu's rule UncoalescedGlobalAccess (est. 77% speedup)" in text


def test_with_the_metric_nsdiag_decides_and_ncu_is_not_repeated() -> None:
    d = diagnose(_with_metrics(nsdiag.load(SMALL / "details.csv.gz")))
    k = _kernel(d, UNCOALESCED)
    [f] = _nsd103(k)  # once: nsdiag's, not ncu's besides
    assert f.source == "nsdiag" and f.estimate == "metrics" and not f.ncu_rule
    assert not any(g.source == "ncu-rule" for kk in d.kernels for g in kk.findings)
    assert not [s for s in d.skipped_rules if s.rule == "NSD103"]
    assert math.isfinite(f.saved_ns or math.nan)
    # ncu's result is still shown as its second opinion, not as a finding.
    assert any(r.rule == "UncoalescedGlobalAccess" for r in k.ncu_rules)
    assert all(f["source"] == "nsdiag" for kk in d.to_json()["kernels"] for f in kk["findings"])


def test_report_with_both_and_with_the_column_dropped() -> None:
    """The .ncu-rep holds metrics and rules: nsdiag's rule fires; with the metric columns
    dropped from the same real report, ncu's rule stands in."""
    pytest.importorskip("ncu_report")
    rep = nsdiag.load(SMALL / "report.ncu-rep.gz")
    [own] = _nsd103(_kernel(diagnose(rep), UNCOALESCED))
    assert own.source == "nsdiag"
    dropped = dataclasses.replace(rep, kernels=rep.kernels.drop(columns=NSD103_METRICS))
    [f] = _nsd103(_kernel(diagnose(dropped), UNCOALESCED))
    assert f.source == "ncu-rule" and f.ncu_rule["rule"] == "UncoalescedGlobalAccess"


def test_ncu_is_left_out_where_nsdiag_knows_better() -> None:
    """The reference fused_kernel: ncu's UncoalescedGlobalAccess estimates 66%, but L1 serves
    65% of its sectors and its float4 rewrite measured a few percent faster; NSD103's
    ncu_condition keeps ncu's result out, and the skipped note says why."""
    d = diagnose(nsdiag.load(Path(__file__).parent / "data/reference/details.csv.gz"))
    fused = _kernel(d, "nsdiag::fused_kernel")
    assert any(
        r.rule == "UncoalescedGlobalAccess" and (r.speedup or 0) > 50 for r in fused.ncu_rules
    )
    assert not _nsd103(fused)
    assert not any(f.source == "ncu-rule" for k in d.kernels for f in k.findings)
    assert any(
        s.rule == "NSD103"
        and "ncu's UncoalescedGlobalAccess left out: l1_hit_rate_pct < 50" in s.reason
        for s in d.skipped_rules
    )


def _rule_file(tmp_path: Path, old: str, new: str) -> Path:
    shipped = next((Path(__file__).parents[1] / "rules").glob("NSD103-*.toml"))
    text = shipped.read_text()
    assert old in text
    path = tmp_path / shipped.name
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize(
    "old, new, error",
    [
        ("ncu_rules = ['Uncoalesced", "ncu_rules = ['not an id', 'Uncoalesced", "ncu rule id"),
        (
            "ncu_rules = ['Uncoalesced",
            "ncu_rules = ['UncoalescedGlobalAccess', 'Uncoalesced",
            "twice",
        ),
        ("ncu_rules = ['UncoalescedGlobalAccess', 'MemoryCacheAccessPattern']", "", "without"),
        ("ncu_speedup >= 15", "no_such_metric >= 15", "unknown metric"),
    ],
)
def test_rule_file_ncu_keys_checked(tmp_path: Path, old: str, new: str, error: str) -> None:
    from nsdiag.analysis.ruleset import parse_rule
    from nsdiag.errors import RuleError

    with pytest.raises(RuleError, match=error):
        parse_rule(_rule_file(tmp_path, old, new))


def test_shipped_rules_name_ncu_stand_ins() -> None:
    from nsdiag.analysis.ruleset import default_rules

    named = {r.id: r.ncu_rules for r in default_rules() if r.ncu_rules}
    assert named["NSD103"] == ("UncoalescedGlobalAccess", "MemoryCacheAccessPattern")
    assert {"NSD104", "NSD105", "NSD202", "NSD205", "NSD301"} <= set(named)
