"""`nsdiag diff`'s text on recorded pairs at 80 and 140 columns (golden files under
tests/golden/diff/; NSDIAG_REGEN_GOLDEN=1 rewrites them), and what issue 41 asked of it: lines
within the width, no word broken, a change counted as made only where AFTER shows it made, the
prediction check's total the sum of the table's counted rows, persisting findings one line per
rule and kernel."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsdiag.analysis.diff import Diff
from nsdiag.analysis.diff.evidence import MADE, NOT_MADE
from nsdiag.cli import terminal
from nsdiag.cli.app import main
from nsdiag.cli.diff import compare_inputs
from nsdiag.render.diff.text import render_diff_text
from nsdiag.render.registry import DiffOptions
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden" / "diff"
REGEN = os.environ.get("NSDIAG_REGEN_GOLDEN") == "1"
WIDTHS = (80, 140)
# name -> (BEFORE, AFTER, BEFORE's region, AFTER's region), paths from the repository root
PAIRS = {
    # a graph replay that split cuDNN's attention into eager kernels: no rewrite was made
    "bert_graph": (
        "tests/data/third_party/bert_serve",
        "tests/data/third_party/bert_serve_graph.sqlite.gz",
        "auto",
        "auto",
    ),
    # the padded vocabulary NSD208 recommends (diff_demo)
    "lm_train_padded": (
        "tests/data/programs/verify/lm_train",
        "tests/data/diff_demo/lm_train_padded",
        "auto",
        "auto",
    ),
    # the fused optimizer (idioms) against its nsys recording
    "optim_fused": (
        "tests/data/idioms/optim_step",
        "tests/data/idioms/optim_fused.sqlite.gz",
        "auto",
        "auto",
    ),
    # the reference kernels' fusion, one NVTX range a side (diff_demo)
    "naive_float4": (
        "tests/data/diff_demo/naive",
        "tests/data/diff_demo/float4",
        "nvtx:naive",
        "nvtx:float4",
    ),
}


@cache
def _diff(name: str) -> Diff:
    before, after, before_region, after_region = PAIRS[name]
    cwd = os.getcwd()
    os.chdir(ROOT)  # the sides' sources print as given: relative to the repository root
    try:
        return compare_inputs((Path(before),), (Path(after),), before_region, after_region)
    finally:
        os.chdir(cwd)


def _text(name: str, width: int) -> str:
    return render_diff_text(_diff(name), DiffOptions(width=width))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_golden_text(name: str, width: int) -> None:
    text = _text(name, width)
    path = GOLDEN / f"{name}.{width}.txt"
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with NSDIAG_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (NSDIAG_REGEN_GOLDEN=1)"


@pytest.mark.parametrize("width", (60, *WIDTHS, 100))
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_no_line_exceeds_the_width(name: str, width: int) -> None:
    lines = _text(name, width).splitlines()
    assert max(map(len, lines)) <= width, [line for line in lines if len(line) > width]


_WORD = re.compile(r"[^\s\[\](),;:]+")


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_words_are_never_broken(name: str) -> None:
    """Each word of the 80-column text is a word of the unwrapped (very wide) one, or a name
    cut in the middle (with …, and a hash where two cuts read the same): wrapping broke
    none."""
    wide = set(_WORD.findall(_text(name, 2000)))
    narrow = set(_WORD.findall(_text(name, 80)))
    # names cut in the middle carry …; look-alikes the cut made equal, a hash (`~0ab9`)
    broken = {w for w in narrow - wide if "…" not in w and not re.fullmatch("~[0-9a-f]{4}", w)}
    assert not broken, sorted(broken)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_predicted_total_is_the_sum_of_the_counted_rows(name: str) -> None:
    d = _diff(name)
    counted = [r for r in d.by_change if r.counted]
    if d.check is None:
        assert not counted
        return
    assert d.check.predicted_ns == pytest.approx(sum(r.predicted_ns or 0.0 for r in counted))
    assert d.check.changes == len(counted)
    assert all(r.status in (MADE, "partly") for r in counted)
    # the summary line names the rows it adds up
    line = next(x for x in _text(name, 140).splitlines() if x.startswith("Prediction check"))
    assert all(f"#{r.rank}" in line for r in counted)


def test_a_library_kernel_no_one_rewrote_is_not_counted() -> None:
    """BERT as a CUDA graph: cuDNN's SDPA kernel no longer runs (the graph's attention runs in
    fifteen eager kernels), so its findings resolve; its change ('let cuDNN pick another
    kernel') was not made and its prediction is not added up. The graph was."""
    d = _diff("bert_graph")
    rows = {r.key.split(":")[0]: r for r in d.by_change}
    graph, sdpa = rows["cuda-graph"], rows["kernel-rewrite"]
    assert graph.status == MADE and "replays CUDA graphs" in graph.evidence and graph.counted
    assert sdpa.status == NOT_MADE and not sdpa.counted and sdpa.ratio is None
    assert "attention" in sdpa.evidence
    assert d.check is not None and d.check.predicted_ns == pytest.approx(graph.predicted_ns)
    assert "not made: its attention now runs in 15 other kernels" in _text("bert_graph", 140)


def test_a_precision_change_made_only_on_the_gemms_is_partly_made() -> None:
    """ViT fp32 -> TF32: the GEMMs' kernels compute in TF32, the fp32 attention kernel (which
    TF32 does not change) still in fp32: the precision change is partly made, its prediction
    the GEMMs' share."""
    from tests.conftest import DATA

    d = compare_inputs((DATA / "third_party/vit_fp32",), (DATA / "third_party/vit_tf32.sqlite.gz",))
    (row,) = [r for r in d.by_change if r.key == "precision:tf32-or-bf16"]
    assert row.status == "partly" and "fp32 -> tf32" in row.evidence
    whole = next(c for c in d.before.diagnosis.changes if c.key == row.key)
    assert row.predicted_ns is not None and whole.uncapped_ns is not None
    assert row.predicted_ns < d.before.per_iteration(whole.uncapped_ns)  # type: ignore[operator]


def test_a_timeline_rule_a_little_smaller_does_not_count_its_change() -> None:
    """The padded vocabulary leaves the step's synchronisations as they were (2.9 -> 2.88 an
    iteration) while NSD403's saving drops 29% with the shorter step: the change 'remove host
    synchronisations' was not made and is not added to the check."""
    d = _diff("lm_train_padded")
    (syncs,) = [r for r in d.by_change if "NSD403" in r.rules]
    assert syncs.status == NOT_MADE and not syncs.counted
    assert "synchronisations" in syncs.evidence


def test_persisting_findings_are_one_line_per_rule_and_kernel() -> None:
    """lm_train: NSD108 fires on eight multi_tensor_apply_kernel signatures (one short name),
    NSD107 on eight unrolled_elementwise ones: one line each, with the count."""
    text = _text("lm_train_padded", 140)
    section = text[text.index("Findings that persist") : text.index("New findings")]
    lines = [x for x in section.splitlines() if x.startswith("- ")]
    heads = [x.split(":", 1)[0] if "]" not in x else x[: x.index("]") + 1] for x in lines]
    assert len(heads) == len(set(heads)), lines
    assert any("multi_tensor_apply_kernel" in x and "findings)" in x for x in lines), lines


def test_cli_follows_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """On an 80-column terminal (COLUMNS=80) every line fits; into a pipe the width is the
    default (the same text everywhere)."""
    monkeypatch.chdir(ROOT)
    before, after, _, _ = PAIRS["bert_graph"]
    monkeypatch.setattr(terminal, "_stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "80")
    result = CliRunner().invoke(main, ["diff", before, after, "--color", "never"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= 80 and lines[0].startswith("BEFORE:")
    assert result.output == _text("bert_graph", 80)


def test_kernel_option_keeps_the_program_findings_of_both_sides() -> None:
    """`diff --kernel nvjet`: each side lists only the cuBLAS kernels, and its program findings
    (the launch-bound step BERT's graph fixes) are the whole program's, so the CUDA graph's
    row is still checked."""
    before, after, _, _ = PAIRS["bert_graph"]
    some = compare_inputs((ROOT / before,), (ROOT / after,), kernel="nvjet")
    whole = _diff("bert_graph")
    for side in ("before", "after"):
        a, b = getattr(some, side).diagnosis, getattr(whole, side).diagnosis
        assert [f.rule for f in a.program_findings] == [f.rule for f in b.program_findings]
        assert all("nvjet" in k.name for k in a.kernels)
    assert some.before.diagnosis.kernels  # (AFTER, an nsys recording, profiled none)
    assert [r.key for r in some.by_change if r.counted] == ["cuda-graph"]
