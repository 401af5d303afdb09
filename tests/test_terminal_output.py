"""`nsdiag explain` for people (issue 28, item 3; the terminal symptoms of issue 27): the short
view fits one screen, the verbose one loses nothing, a fix is said once, look-alike kernels are
told apart, numbers carry units, messages have no n/a holes, program-supplied control characters
never reach the terminal, colour follows the terminal and NO_COLOR/FORCE_COLOR/--color, and
progress shows on a terminal only. Each test ran against the renderer before this change and
failed there."""

from __future__ import annotations

import io
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.cli import main
from nsdiag.render import fmt, kernel_names
from nsdiag.render.text import render_text
from tests.bad_input_corpus import DURATION, REFERENCE_RAW, with_cell
from tests.conftest import DATA
from tests.test_calibration import diagnosis

# The bundled GPT training recordings (tests/data/README.md: lm_train.py, a 4-layer GPT with
# GPT-2's vocabulary; train_logging.py, transformers' GPT-2).
GPT_TRAINING = ["programs/verify/lm_train", "programs/lm_train_full", "third_party/train_logging"]
# A change's why wraps to three lines (four to finish a sentence) rather than being cut mid-word
# (issue 41): one screen is 60 lines.
SCREEN_LINES, SCREEN_COLUMNS = 60, 100
E_NOTATION = re.compile(r"\d\.?\d*e[+-]\d+")


def words(text: str) -> str:
    """The text with its wrapping undone (any run of white space as one space)."""
    return " ".join(text.split())


def text_of(d: Diagnosis, verbose: bool = False, **options: Any) -> str:
    """render_text's short view as callers have always asked for it, or the verbose one."""
    return render_text(d, **options, **({"verbose": True} if verbose else {}))


def explain(*args: str, env: dict[str, str] | None = None) -> str:
    """explain's standard output (progress, if any, goes to standard error)."""
    result = CliRunner().invoke(main, ["explain", *args], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("fixture", GPT_TRAINING)
def test_gpt_training_fits_one_screen(fixture: str) -> None:
    """Was 315-320 lines at 120 columns."""
    text = explain(str(DATA / fixture))
    lines = text.splitlines()
    assert len(lines) <= SCREEN_LINES, text
    assert max(len(line) for line in lines) <= SCREEN_COLUMNS
    d = diagnosis(fixture)
    for change in d.top_changes(3):  # the top changes come first, each with its saving
        assert change.title[:40] in text and fmt.change_saving(change, d) in text
    assert text.index("What to change first") < text.index("Kernels by GPU time")


@pytest.mark.parametrize(
    "fixture", ["programs/verify/lm_train", "reference", "multi_gpu/ddp_straggler.sqlite.gz"]
)
def test_verbose_loses_nothing(fixture: str) -> None:
    """Everything the short view leaves out is in --verbose: every change (title, what it
    touches), every program finding, each listed kernel's verdict and findings with evidence,
    the tools, the timeline, the start-up and the skipped rules."""
    d = diagnosis(fixture)
    path = DATA / fixture
    target = path / "raw.csv.gz" if (path / "raw.csv.gz").is_file() else path
    text = words(explain(str(target), "--verbose"))
    names = fmt.display_names(d)
    labels = kernel_names.labels(d.kernels, names)
    for change in d.changes:
        assert words(change.title) in text
        for touch in change.touches:
            if touch.kind == "kernel" and touch.kernel_id is not None:
                assert f"#{touch.kernel_id + 1} {labels[touch.kernel_id]}" in text
    for f in d.program_findings:
        assert words(fmt.printable(f.message)) in text and f.rule in text
    for k in d.kernels[:10]:
        assert words(k.verdict) in text
        for f in k.findings[:3]:
            assert words(f.message) in text
    for fix in {f.fix for k in d.kernels[:10] for f in k.findings[:3]}:
        assert words(fix) in text  # said once, somewhere
    for warning in d.warnings:
        assert words(warning) in text
    for s in d.skipped_rules:
        assert words(f"{s.rule}: {s.reason}") in text
    if d.startup is not None:
        assert words(d.startup.line()) in text
    if d.timeline is not None:
        assert f"over {fmt.time_ns(d.timeline.span_ns)}" in text
    assert "span_ns" not in text


@pytest.mark.parametrize("fixture", ["programs/verify/lm_train", "reference", "calib"])
@pytest.mark.parametrize("verbose", [False, True])
def test_a_fix_is_printed_once(fixture: str, verbose: bool) -> None:
    """Was printed up to six times (once per kernel finding and program finding with it)."""
    d = diagnosis(fixture)
    text = words(text_of(d, verbose))
    fixes = {f.fix for k in d.kernels for f in k.findings} | {f.fix for f in d.program_findings}
    for fix in fixes:
        assert text.count(words(fix)[:80]) <= 1, fix
    if verbose:
        assert "same fix as change" in text


ROW = re.compile(r"^\s*(\d+) (.+?)\s+(?:[\d.]+ (?:ns|µs|ms|s)|–)\s+")


@pytest.mark.parametrize(
    "fixture, alike", [("programs/infer_cnn", 5), ("programs/train_loader", 4)]
)
def test_look_alike_kernels_are_told_apart(fixture: str, alike: int) -> None:
    """infer_cnn lists five signatures of at::batch_norm_transform_input_kernel in its top ten
    (train_loader: four, among nine batch_norm kernels of three names) that differ only in
    their launch shape: each name printed carries its grid, so no two kernel rows read the
    same, in either view."""
    d = diagnosis(fixture)
    short = render_text(d, kernels=len(d.kernels))
    rows = {int(m.group(1)): m.group(2) for line in short.splitlines() if (m := ROW.match(line))}
    assert len(rows) == len(d.kernels) and len(set(rows.values())) == len(rows)
    look_alikes = [k for k in d.kernels if "batch_norm_transform_input_kernel" in k.name]
    assert len(look_alikes) >= alike and all(" grid " in rows[k.id + 1] for k in look_alikes)
    top = [m.group(2) for line in render_text(d).splitlines() if (m := ROW.match(line))]
    assert len(top) == 10 and sum("grid" in name for name in top) >= 5
    verbose = render_text(d, kernels=len(d.kernels), verbose=True)
    named = [line.split(" ", 1)[1] for line in verbose.splitlines() if re.match(r"#\d+ ", line)]
    assert len(named) == len(d.kernels) and len(set(named)) == len(named)


def test_look_alikes_of_one_shape_get_a_short_hash() -> None:
    """Two signatures of one short name whose grid and block are the same too (edited from
    train_loader's two batch_norm_backward_kernel rows, #1 and #4): a hash of the full name."""
    d = diagnosis("programs/train_loader")
    first, *_ = [k for k in d.kernels if "batch_norm_backward_kernel" in k.name]
    twin = replace(
        d.kernels[3], grid=first.grid, block=first.block, demangled=first.demangled + " "
    )
    kernels = [first, twin]
    names = fmt.display_names(d)
    labels = kernel_names.labels(kernels, names)
    assert labels[first.id] != labels[twin.id]
    assert all(re.search(r"~[0-9a-f]{4}$", label) for label in labels.values())


@pytest.mark.parametrize("verbose", [False, True])
def test_numbers_carry_units_never_e_notation(verbose: bool) -> None:
    """Was `1.03e+14 FLOP/s` (NSD208's message and evidence), `132 - 128 SMs` (NSD303) and
    `local_sectors = 1.03e+05` (NSD105's evidence)."""
    for fixture in (
        "programs/verify/lm_train",
        "calib",
        "reference",
        "profile/full-0150.raw.csv.gz",
    ):
        text = text_of(diagnosis(fixture), verbose, kernels=40, top=10)
        assert not E_NOTATION.search(text), E_NOTATION.search(text)
        assert not re.search(r"\d+ - \d+ SMs", text)
    lm = words(render_text(diagnosis("programs/verify/lm_train"), verbose=True))
    assert "reaches 103 TFLOP/s" in lm and "tensor-core throughput 103 TFLOP/s" in lm
    calib = words(render_text(diagnosis("calib"), verbose=True, kernels=40))
    assert re.search(r"launches 16 blocks for 132 SMs: at most 16 of the 132 SMs get work", calib)


def test_the_readme_first_command_has_no_na_holes() -> None:
    """`nsdiag explain tests/data/reference/raw.csv.gz` printed "On tensor cores it reaches n/a
    FLOP/s, where  reach n/a FLOP/s ()." (NSD208 on a GEMM without tensor-op counts): the
    sentence whose values are missing is left out."""
    text = words(explain(str(REFERENCE_RAW), "--verbose", "--top-kernels", "20", "--top", "10"))
    assert "n/a" not in text and "where  reach" not in text
    d = diagnosis("reference")
    hits = [f for k in d.kernels for f in k.findings if f.rule == "NSD208"]
    assert hits and all("n/a" not in f.message for f in hits)
    assert any("tensor cores" not in f.message for f in hits)  # its sentence left out


HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\x1b[31mred\u202eoops\nnext"


@pytest.mark.parametrize("color", [False, True])
def test_control_characters_from_names_never_reach_the_terminal(color: bool) -> None:
    """Issue 27: escape bytes from kernel names reached the terminal. Kernel and NVTX names of
    the reference recording edited to carry a window-title sequence, a screen clear, a colour,
    a right-to-left override and a newline."""
    d = diagnosis("reference")
    kernels = tuple(replace(k, name=k.name + HOSTILE, demangled="") for k in d.kernels)
    findings = tuple(replace(f, ranges=((f.range or "") + HOSTILE,)) for f in d.program_findings)
    hostile = replace(d, kernels=kernels, program_findings=findings, changes=())
    for verbose in (False, True):
        text = text_of(hostile, verbose, **({"color": True} if color else {}))
        assert "\x07" not in text and "\x1b]" not in text and "\u202e" not in text
        assert "\x1b[2J" not in text
        assert "\\x1b]0;pwned\\x07" in text or not verbose  # the short view cuts long names
        if not color:
            assert "\x1b" not in text
        else:  # rich's own styles only (SGR sequences)
            assert "\x1b" not in re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_a_left_out_duration_is_not_nan(tmp_path: Path) -> None:
    """Issue 27: a launch whose duration cell is left out (with the right warning) was listed
    as "1x, – (nan% of GPU time)". The reference export with its first duration made `-nan`."""
    path = with_cell(tmp_path / "r.csv", REFERENCE_RAW, DURATION, 0, "-nan")
    for args in ((), ("--verbose",)):
        text = explain(str(path), *args)
        assert "nan" not in text.replace(DURATION, "").replace("'-nan'", "").lower()
        assert "warning:" in text
    assert "no duration (left out: see the warnings)" in words(explain(str(path), "--verbose"))


@pytest.mark.parametrize(
    "args, env, colored",
    [
        ((), {}, False),  # not a terminal (CliRunner's output)
        ((), {"FORCE_COLOR": "1"}, True),
        ((), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        (("--color", "always"), {"NO_COLOR": "1"}, True),
        (("--color", "never"), {"FORCE_COLOR": "1"}, False),
        (("--color", "always"), {}, True),
    ],
)
def test_colour_follows_the_terminal_and_the_environment(
    args: tuple[str, ...], env: dict[str, str], colored: bool
) -> None:
    """Was no colour at all, even on a 256-colour terminal."""
    base = {"NO_COLOR": "", "FORCE_COLOR": "", "TERM": "xterm-256color"}
    text = explain(str(REFERENCE_RAW), *args, env={**base, **env})
    assert ("\x1b[" in text) == colored
    if colored:  # the same words, with emphasis
        plain = explain(str(REFERENCE_RAW), "--color", "never")
        assert re.sub(r"\x1b\[[0-9;]*m", "", text) == plain


def test_json_is_never_coloured() -> None:
    text = explain(str(REFERENCE_RAW), "--json", "--color", "always")
    assert "\x1b" not in text and text.startswith("{")


def test_progress_shows_on_a_terminal_after_the_delay() -> None:
    """Was nothing during a 10-18 s report. Steps draws on a terminal once the work has run
    past its delay, and erases itself."""
    from nsdiag.cli.progress import Steps

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    with Steps(console, delay=0.05) as steps:
        steps.step("analysing 5 kernel launches")
        time.sleep(0.6)
    assert "analysing 5 kernel launches" in out.getvalue()


@pytest.mark.parametrize("terminal, seconds", [(False, 0.3), (True, 0.0)])
def test_no_progress_off_a_terminal_or_for_quick_work(terminal: bool, seconds: float) -> None:
    from nsdiag.cli.progress import Steps

    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=80)
    with Steps(console, delay=0.2) as steps:
        steps.step("reading")
        time.sleep(seconds)
    time.sleep(0.3)  # past the delay: a timer left running would draw now
    assert out.getvalue() == ""


def test_explain_and_report_print_no_progress_into_a_pipe(tmp_path: Path) -> None:
    runner = CliRunner()
    explained = runner.invoke(main, ["explain", str(REFERENCE_RAW)])
    assert explained.exit_code == 0 and explained.stderr == ""
    reported = runner.invoke(main, ["report", str(REFERENCE_RAW), "-o", str(tmp_path / "r.md")])
    assert reported.exit_code == 0 and reported.stderr == ""


def test_report_text_is_the_verbose_view(tmp_path: Path) -> None:
    target = tmp_path / "r.txt"
    result = CliRunner().invoke(main, ["report", str(REFERENCE_RAW), "-o", str(target)])
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert "Program findings" in text and "evidence:" in text and "\x1b" not in text
    assert "--verbose:" not in text


@pytest.mark.slow
def test_every_recording_renders_both_views() -> None:
    """Every recording under tests/data (tools/snapshot_outputs.py's list), both views: no
    traceback, lines within the width, the short view shorter than the verbose one."""
    import sys

    sys.path.insert(0, str(DATA.parents[1] / "tools"))
    from snapshot_outputs import recordings

    for path in recordings():
        loose = path.is_dir() and not (path / "session.json").exists()
        d = _folder(path) if loose else diagnosis(str(path.relative_to(DATA)))
        short, verbose = render_text(d), render_text(d, verbose=True)
        assert max(map(len, (short + verbose).splitlines()), default=0) <= SCREEN_COLUMNS, path
        assert len(short.splitlines()) <= 80 and len(short) <= len(verbose), path


def _folder(path: Path) -> Diagnosis:
    """A folder of loose exports recorded together (raw + details of one capture)."""
    import nsdiag
    from nsdiag.analysis.engine import diagnose

    return diagnose(nsdiag.load(sorted(path.glob("*.csv.gz"))))


def test_a_message_leaves_out_the_sentences_whose_values_are_missing() -> None:
    """The formatter under NSD208's message: `si` scales to an SI prefix before the unit, and
    a sentence naming a missing value is left out (render, for program texts, keeps n/a)."""
    from nsdiag.analysis.rules.template import render, render_message, spec_problem

    template = "Runs a fallback: {why}. It reaches {t:si}FLOP/s, where {src} reach {a:si}FLOP/s."
    full = {"why": "sm_75", "t": 1.03e14, "src": "aligned ones", "a": 6.47e14}
    assert render_message(template, full) == (
        "Runs a fallback: sm_75. It reaches 103 TFLOP/s, where aligned ones reach 647 TFLOP/s."
    )
    assert (
        render_message(template, {**full, "t": None, "a": float("nan")})
        == "Runs a fallback: sm_75."
    )
    assert render_message(template, {}) == ""
    assert render("{x:si}B/s {y:si}FLOP/s", {"x": 512, "y": "text"}) == "512 B/s textFLOP/s"
    assert spec_problem("si") is None and spec_problem("sik") is not None
