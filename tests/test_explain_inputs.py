"""Issue 41, item 5: what explain (and report, diff) make of their inputs and options: a session
folder whose session.json was deleted, session folders of different programs, `--changes N`,
`--top`'s help, and `--kernel` leaving the program's findings as they are."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsdiag.cli.app import main
from tests.conftest import DATA

BERT = DATA / "third_party" / "bert_serve"
HISTOGRAM = DATA / "idioms" / "histogram"


def explain(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["explain", *args])
    return result.exit_code, result.output


def document(*args: str) -> dict[str, object]:
    code, out = explain("--json", *args)
    assert code == 0, out
    return json.loads(out)  # type: ignore[no-any-return]


# ------------------------------------------------------------ a folder without session.json


def test_folder_without_session_json_is_read_from_its_tables(tmp_path: Path) -> None:
    """A complete profile (status.json says so) whose session.json was deleted: its tables hold
    the session; the diagnosis is the one with session.json, with a warning saying what is
    gone and how to rebuild it."""
    copy = tmp_path / "bert_serve"
    shutil.copytree(BERT, copy)
    (copy / "session.json").unlink()
    assert json.loads((copy / "status.json").read_text())["complete"] is True
    without, whole = document(str(copy)), document(str(BERT))
    assert [w for w in without["warnings"] if "no session.json" in w]  # type: ignore[union-attr]
    for key in ("kernels", "program_findings", "changes"):
        assert json.dumps(without[key]) == json.dumps(whole[key]), key
    assert without["device"] == whole["device"]
    code, out = explain(str(copy))
    assert code == 0 and "recorded nothing" not in out and "nsdiag load -o" in out


@pytest.mark.parametrize("damage", ["table", "lock"])
def test_folder_without_session_json_and_incomplete_tables_says_what_is_missing(
    tmp_path: Path, damage: str
) -> None:
    copy = tmp_path / "bert_serve"
    shutil.copytree(BERT, copy)
    (copy / "session.json").unlink()
    if damage == "table":
        (copy / "tables" / "timeline.csv.gz").unlink()
    else:  # a save cut short: its tables may be of two saves
        (copy / "session.json.lock").write_text("")
    code, out = explain(str(copy))
    assert code == 2 and len(out.strip().splitlines()) == 1, out
    assert ("timeline.csv.gz" if damage == "table" else "cut short") in out
    assert "nsdiag load -o" in out and "recorded nothing" not in out


def test_folder_without_session_json_or_tables_still_says_what_happened(tmp_path: Path) -> None:
    """A folder with only status.json (a profile stopped before it recorded anything) keeps
    its one-line error."""
    copy = tmp_path / "bert_serve"
    copy.mkdir()
    shutil.copy(BERT / "status.json", copy / "status.json")
    code, out = explain(str(copy))
    assert code == 2 and "recorded nothing to explain" in out and len(out.splitlines()) == 1


# ------------------------------------------------------------------ different programs


def test_session_folders_of_different_programs_are_refused() -> None:
    code, out = explain(str(BERT), str(HISTOGRAM))
    assert code == 2 and len(out.strip().splitlines()) == 1, out
    assert "bert_serve.py" in out and "histogram.py" in out and "nsdiag diff" in out


def test_the_ranks_of_one_run_are_still_merged() -> None:
    """One report per rank carries no command line: readers/ranks.py merges them (multi-GPU
    analysis), as before."""
    ranks = [str(DATA / "multi_gpu" / f"ddp_straggler_rank{i}.sqlite.gz") for i in (0, 1)]
    d = document(*ranks)
    assert d["ranks"] is not None


# --------------------------------------------------------------------------- options


def test_changes_sets_how_many_changes_are_listed() -> None:
    def listed(*args: str) -> int:
        code, out = explain(*args, str(BERT))
        assert code == 0, out
        section = out[out.index("What to change first") : out.index("Kernels by GPU time")]
        return sum(1 for line in section.splitlines() if line[:4].strip().rstrip(".").isdigit())

    total = len(document(str(BERT))["changes"])  # type: ignore[arg-type]
    assert listed() == min(5, total)
    assert listed("--changes", "2") == 2
    assert listed("--changes", "50") == total
    code, out = explain("--changes", "-1", str(BERT))
    assert code == 2 and "--changes -1" in out


def test_help_says_what_top_and_changes_do() -> None:
    out = CliRunner().invoke(main, ["explain", "--help"]).output
    assert "--changes N" in out and "findings shown per kernel" in out
    out = CliRunner().invoke(main, ["diff", "--help"]).output
    assert "kernel matches listed" in out


@pytest.mark.parametrize(
    "path",
    # the last two lost program findings to --kernel before (fusion chains, layout
    # conversions: 4 -> 3 and 6 -> 3); the ncu export all of them (2 -> 0)
    [BERT, DATA / "programs" / "lm_train_full", DATA / "programs" / "infer_cnn",
     DATA / "reference" / "raw.csv.gz"],
)  # fmt: skip
def test_kernel_filters_kernels_not_the_program_analysis(path: Path) -> None:
    whole = document(str(path))
    kernels = whole["kernels"]
    assert isinstance(kernels, list)
    pattern = "nvjet|cutlass|gemm"  # the matrix products
    some = document("--kernel", pattern, str(path))
    assert json.dumps(some["program_findings"]) == json.dumps(whole["program_findings"])
    listed = some["kernels"]
    assert isinstance(listed, list) and 0 < len(listed) < len(kernels)
    assert all(re.search(pattern, k["name"], re.IGNORECASE) for k in listed)
    # the program's changes stay; a change of an unlisted kernel alone goes
    program = [c for c in whole["changes"] if all(t["kind"] != "kernel" for t in c["touches"])]  # type: ignore[index, union-attr]
    keys = {c["key"] for c in some["changes"]}  # type: ignore[index, union-attr]
    assert {c["key"] for c in program} <= keys


def test_kernel_matching_nothing_is_one_line() -> None:
    code, out = explain("--kernel", "no_such_kernel_xyz", str(BERT))
    assert code == 2 and "no kernel matches" in out and len(out.strip().splitlines()) == 1
