"""`nsdiag explain` as a reader sees it (issue 41): golden texts on recordings of four shapes at 80
and 140 columns, no line past the width, every sentence said once (no "Tail effect: Tail effect:",
no word twice in a row, no verdict note repeated), one unit system, evidence in words.

The golden files are tests/golden/explain/<recording>.<width>[.v].txt; after a deliberate change
of the text, regenerate them with

    NSDIAG_REGEN_GOLDEN=1 python -m pytest -p no:cacheprovider -n 0 tests/test_explain_text.py

and read the diff before committing it.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.cli import main
from nsdiag.model import quantities
from nsdiag.render import fmt, kernel_names
from nsdiag.render.text import render_text
from nsdiag.render.text_layout import wrap
from tests.conftest import DATA
from tests.test_calibration import diagnosis

ROOT = DATA.parents[1]
GOLDEN = ROOT / "tests" / "golden" / "explain"
REGENERATE = os.environ.get("NSDIAG_REGEN_GOLDEN") == "1"

# name -> the input, relative to the repository: a serving loop replayed by launches, a training
# step with a per-parameter optimizer, a CNN inference session, the reference kernels' ncu export
GOLDEN_INPUTS = {
    "bert_serve": "tests/data/third_party/bert_serve",
    "optim_step": "tests/data/idioms/optim_step",
    "infer_cnn": "tests/data/programs/infer_cnn",
    "reference": "tests/data/reference/raw.csv.gz",
}
WIDTHS = (80, 140)
GOLDEN_CASES = [
    *((name, width, False) for name in GOLDEN_INPUTS for width in WIDTHS),
    ("bert_serve", 80, True),  # --verbose: evidence in words
]


def _explain(inputs: str, width: int, verbose: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(ROOT)
    args = ["explain", inputs, *(["-v"] if verbose else [])]
    result = CliRunner().invoke(main, args, env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(("name", "width", "verbose"), GOLDEN_CASES)
def test_explain_matches_its_golden_text(
    name: str, width: int, verbose: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _explain(GOLDEN_INPUTS[name], width, verbose, monkeypatch)
    golden = GOLDEN / f"{name}.{width}{'.v' if verbose else ''}.txt"
    if REGENERATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"{golden} missing: NSDIAG_REGEN_GOLDEN=1 writes it"
    assert text == golden.read_text(encoding="utf-8"), (
        f"explain's text changed from {golden}; if on purpose, regenerate (module docstring)"
    )
    lines = text.splitlines()
    assert max(map(len, lines)) <= width, max(lines, key=len)


@pytest.mark.parametrize("width", WIDTHS)
def test_explain_follows_columns(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """COLUMNS sets the width even into a pipe (CliRunner's output is one); without it the
    text is laid out at 100 columns."""
    text = _explain(GOLDEN_INPUTS["bert_serve"], width, False, monkeypatch)
    assert max(map(len, text.splitlines())) <= width
    monkeypatch.delenv("COLUMNS", raising=False)
    plain = CliRunner().invoke(main, ["explain", GOLDEN_INPUTS["bert_serve"]])
    assert max(map(len, plain.stdout.splitlines())) <= 100 < 140


def test_at_80_columns_the_words_that_carry_the_meaning_stay() -> None:
    """Was `0% of the…`, `on #5…`, a why cut mid-word after two lines, and kernel names cut to
    `nvjet_sm9…z_bias_TNT ~1bd6`: the tile shape is what tells nvjet kernels apart."""
    d = diagnosis("third_party/bert_serve")
    text = render_text(d, width=80)
    flat = " ".join(text.split())
    assert "on #5 cudnn" in flat and "sdpa" in flat  # cuDNN's attention kernel keeps `sdpa`
    assert "3.36 µs of GPU time each against 55.8 µs of host time per launch." in flat
    table = text[text.index("Kernels by GPU time") :]
    for shape in ("64x16_64x16_2x4", "64x32", "64x64_64x13_4x2"):
        assert shape in table, shape
    for line in text.splitlines():
        if line.strip().startswith(("why:", "fix:")) or line.startswith("         "):
            assert not re.search(r"\w…$", line), line  # after a whole word, never inside one


def test_on_the_program_and_n_kernels_counts_what_it_lists() -> None:
    """Was `on 3 kernels: the program 8.53 ms, #2, #7, #6`: four items."""
    d = diagnosis("third_party/bert_serve")
    line = next(x for x in render_text(d, width=140).splitlines() if "the program 8." in x)
    listed = line.split(": ", 1)[1].split(", ")
    assert line.strip().startswith("on the program and 3 kernels:"), line
    assert len(listed) == 4


# ------------------------------------------------------------------ every recording


def _recordings() -> list[Path]:
    sys.path.insert(0, str(ROOT / "tools"))
    from snapshot_outputs import recordings

    return list(recordings())


def _diagnose(path: Path) -> Diagnosis:
    if path.is_dir() and not (path / "session.json").exists():
        import nsdiag
        from nsdiag.analysis.engine import diagnose

        return diagnose(nsdiag.load(sorted(path.glob("*.csv.gz"))))
    return diagnosis(str(path.relative_to(DATA)))


def _texts(d: Diagnosis) -> list[str]:
    """Every finding as the text prints it (rule, cause, message), every verdict with its note,
    every change's title and fix."""
    findings = [*d.program_findings, *(f for k in d.kernels for f in k.findings)]
    out = [f"{f.rule} {f.cause}: {f.message}" for f in findings]
    out += [f.fix for f in findings]
    out += [f"{k.verdict} ({k.verdict_note})" for k in d.kernels]
    out += [f"{c.title}. {c.fix}" for c in d.changes]
    return out


# `X: X:` at the start of a message or after a label (case and hyphens aside), a word twice
# `X: X:`, or a phrase of two words or more said again after its colon (`warp divergence: Warp
# divergence`); one word (`eager-attention: Attention is computed ...`) is prose
STUTTER = re.compile(r"\b([\w' ]{3,60}?): \1:|\b(\w+ [\w' ]+?): \2\b", re.IGNORECASE)
DOUBLED_WORD = re.compile(r"\b([A-Za-z]{2,})\s+\1\b", re.IGNORECASE)
# a parenthesis said twice: `(96 blocks for 132 SMs). (96 blocks for 132 SMs)`
DOUBLED_NOTE = re.compile(r"\(([^()]{5,})\)\.? \(\1\)")
OUTSIDE_RANGES = "work outside NVTX ranges"


def _normalised(text: str) -> str:
    return text.replace("-", " ")


@pytest.mark.slow
def test_no_finding_on_any_recording_says_anything_twice() -> None:
    """Every recording under tests/data: no template stutter (`NSD302 tail-effect: Tail effect:`,
    `3.41 µs each: each costs`), no word twice in a row, no verdict whose note the verbose view
    prints twice, and no `work outside NVTX ranges`
    where the program has no ranges of its own; both views fit 80 columns."""
    problems = []
    for path in _recordings():
        d = _diagnose(path)
        for text in _texts(d):
            plain = _normalised(text)
            for pattern in (STUTTER, DOUBLED_WORD):
                match = pattern.search(plain)
                if match:
                    problems.append(f"{path.name}: {match.group(0)!r} in {text[:120]!r}")
        short, verbose = render_text(d, width=80), render_text(d, width=80, verbose=True)
        note = DOUBLED_NOTE.search(" ".join(verbose.split()))
        if note:
            problems.append(f"{path.name}: {note.group(0)!r}")
        for line in (short + verbose).splitlines():
            if len(line) > 80:
                problems.append(f"{path.name}: {len(line)} columns: {line!r}")
        if not d.program_findings:
            continue
        ranged = any(f.range for f in d.program_findings)
        unranged = [f for f in d.program_findings if OUTSIDE_RANGES in f.message]
        if unranged and not ranged:
            problems.append(f"{path.name}: {unranged[0].rule} says {OUTSIDE_RANGES!r}")
    assert not problems, "\n".join(problems[:40])


def test_a_program_without_nvtx_ranges_is_not_told_about_them() -> None:
    """bert_serve has no NVTX ranges: its findings were each `work outside NVTX ranges: ...`;
    infer_cnn's work is in range `batch`, and its findings name it."""
    bert = diagnosis("third_party/bert_serve")
    assert bert.program_findings
    for f in bert.program_findings:
        assert OUTSIDE_RANGES not in f.message and not f.message.startswith(": "), f.message
        assert f.message[:1].isupper(), f.message
    cnn = diagnosis("programs/infer_cnn")
    assert any("NVTX range 'batch'" in f.message for f in cnn.program_findings)


# ------------------------------------------------------------------ units and evidence


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (512, "512 ns"),
        (4300, "4.30 µs"),
        (336_093_000, "336 ms"),
        (1_254_000_000, "1.25 s"),
        (999_700, "1.00 ms"),
        (12_000_000, "12.0 ms"),
    ],
)
def test_durations_have_three_significant_digits(ns: float, text: str) -> None:
    assert fmt.time_ns(ns) == text == quantities.duration(ns)


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [(96, "96 B"), (7_000, "7.00 kB"), (134_144, "134 kB"), (1_854_885e6, "1.85 TB")],
)
def test_sizes_never_print_zero_megabytes(nbytes: float, text: str) -> None:
    assert fmt.bytes_(nbytes) == text


def test_counts_and_plurals() -> None:
    assert fmt.count(5475) == "5,475"
    assert fmt.plural(1, "kernel signature") == "1 kernel signature"
    assert fmt.plural(7, "kernel signature") == "7 kernel signatures"
    assert fmt.plural(2628, "launch") == "2,628 launches"


def test_rule_templates_print_units_through_the_formatter() -> None:
    """A template names its value's unit (`{idle_ms:time_ms}`), the formatter picks the unit
    shown; no template writes `us` or a hand-made `ms` any more."""
    from nsdiag.analysis.rules.template import render

    assert render("waits {idle_ms:time_ms}", {"idle_ms": 336.093}) == "waits 336 ms"
    assert render("{copy_mb:size_mb}", {"copy_mb": 0.007}) == "7.00 kB"
    assert render("{launches:count} launches", {"launches": 5475}) == "5,475 launches"
    for path in sorted((ROOT / "rules").glob("*.toml")):
        for line in path.read_text().splitlines():
            if line.startswith(("message =", "fix =")):
                assert not re.search(r"\} ?(us|ns|MB)\b", line), f"{path.name}: {line[:120]}"
                assert not re.search(r"\{\w+_ms:\.\d+f\} ms", line), f"{path.name}: {line[:120]}"


def test_evidence_is_in_words_with_its_threshold() -> None:
    """Was `is_gemm_like = 0 < 1`, `theoretical_occupancy_pct = 18.8% < 50.0%`; the JSON keeps
    the machine names and carries the label beside them."""
    d = diagnosis("third_party/bert_serve")
    verbose = " ".join(render_text(d, verbose=True, width=140).split())
    assert "theoretical occupancy 18.8% (threshold < 50.0%)" in verbose
    assert "a matrix product or convolution (from its name): no" in verbose
    assert "is_gemm_like" not in verbose and "theoretical_occupancy_pct" not in verbose
    finding = next(f for k in d.kernels for f in k.findings if f.rule == "NSD301")
    document = finding.to_json()
    assert document["evidence"]["theoretical_occupancy_pct"] == pytest.approx(18.75)
    assert document["evidence_labels"]["theoretical_occupancy_pct"] == {
        "label": "theoretical occupancy",
        "unit": "pct",
    }


def test_bounded_percentages_stay_within_0_and_100() -> None:
    """A hit rate ncu reads as 100.04 (counters of different replay passes) is 100 in the
    analysis and the JSON."""
    from nsdiag.analysis.kernel.derived import BOUNDED_PCT

    for recording in ("third_party/bert_serve", "idioms/optim_step", "programs/lm_train_full"):
        for k in diagnosis(recording).kernels:
            for name in BOUNDED_PCT:
                value = k.metrics.get(name)
                if isinstance(value, float) and value == value:
                    assert 0.0 <= value <= 100.0, (recording, k.name, name, value)


def test_bandwidth_is_underused_only_below_the_stated_fraction() -> None:
    """`dram-bandwidth-underused` at 95% or 87% of the sustained bandwidth contradicted its
    name: it fires under UNDERUSED_PCT of the ceiling, and its message says so."""
    from nsdiag.analysis.ruleset import load_rules

    rule = next(r for r in load_rules() if r.id == "NSD108")
    limit = rule.params["UNDERUSED_PCT"]
    seen = 0
    for recording in (
        "reference",
        "programs/lm_train_full",
        "calib",
        "profile/targeted.raw.csv.gz",
    ):
        for k in diagnosis(recording).kernels:
            for f in k.findings:
                if f.rule == "NSD108":
                    seen += 1
                    assert k.roofline.pct_of_dram_ceiling < limit, (recording, k.name)
                    assert f"under the {limit:.0f}% below which" in f.message
    assert seen


def test_a_kernel_above_the_sustained_ceiling_is_said_to_be_at_it() -> None:
    """Was `107% of the 4.09 TB/s this GPU sustains`."""
    from nsdiag.analysis.kernel.namespace import TEXT_VALUES

    above = {"dram_pct_of_ceiling": 107.0}
    assert TEXT_VALUES["ceiling_share"].compute(above) == "at"
    assert "reads 107% of it" in TEXT_VALUES["ceiling_note"].compute(above)
    below = {"dram_pct_of_ceiling": 98.4}
    assert TEXT_VALUES["ceiling_share"].compute(below) == "98% of"
    assert TEXT_VALUES["ceiling_note"].compute(below) == ""


# ------------------------------------------------------------------ layout pieces


def test_a_long_text_is_cut_at_a_sentence_or_clause() -> None:
    text = (
        "The GPU is busy 6% of the time and waits 8.71 ms per iteration while the host issues "
        "work, one launch after another. Replaying the step as a CUDA graph would save about "
        "8.53 ms per iteration, most of the step."
    )
    rows = wrap(text, 60, "why: ", lines=2)
    assert len(rows) <= 2 and rows[-1].endswith(" …")
    joined = " ".join(r.strip() for r in rows)
    assert joined.endswith("the host issues work …"), joined  # at the comma, not mid-clause
    rows = wrap(text, 60, "why: ", lines=2, whole_sentence=True)  # a row more ends a sentence
    assert " ".join(r.strip() for r in rows).endswith("one launch after another. …"), rows


def test_kernel_names_keep_what_tells_them_apart() -> None:
    names = [
        "nvjet_sm90_hsh_64x16_64x16_2x4_h_bz_bias_TNT",
        "nvjet_sm90_hsh_64x32_64x16_2x4_h_bz_splitK_bias_TNT",
        "nvjet_sm90_hsh_64x64_64x13_4x2_h_bz_bias_TNT",
    ]
    fitted = [kernel_names.fit(n, 28, names) for n in names]
    assert len(set(fitted)) == 3 and all(len(f) <= 28 for f in fitted)
    assert "64x32" in fitted[1] and "splitK" in fitted[1]
    cudnn = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1"
    assert "sdpa" in kernel_names.fit(cudnn, 28, names)
