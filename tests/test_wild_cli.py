"""Wild inputs of issue 27 on the commands other than `explain` (whose cases are in
tests/bad_input_corpus_csv.py): damage refused (a read-only report replaced by root, two
`load`s into one folder) and counts that cannot be negative."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from nsdiag.cli import main
from nsdiag.model import store
from tests.bad_input_corpus import REFERENCE_RAW, SMALL_RAW
from tests.bad_input_corpus_csv import old_raw


def _one_line_error(result: Result, words: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, (result.exit_code, result.output[-2000:])
    assert lines[0].startswith("nsdiag: error: ") and words in lines[0], lines[0]
    return lines[0]


def test_read_only_report_is_kept_for_root_too(tmp_path: Path) -> None:
    """`report -o` over a 0444 report: refused, the file as it was (as root os.access says
    writable, which is what let it through)."""
    report = tmp_path / "report.md"
    report.write_text("the report I keep\n")
    os.chmod(report, 0o444)
    result = CliRunner().invoke(main, ["report", str(SMALL_RAW), "-o", str(report)])
    _one_line_error(result, "read-only")
    assert report.read_text() == "the report I keep\n"
    assert stat.S_IMODE(report.stat().st_mode) == 0o444
    assert os.listdir(tmp_path) == ["report.md"]  # no temporary file left behind


def test_second_load_into_a_folder_being_written_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `load`s into one folder at once: the one that starts while the other writes fails
    with one line, and the session of the first is whole. (The second is run at the moment the
    first writes its first table, which is when both used to report success.)"""
    folder = tmp_path / "session"
    second: list[Result] = []
    real_replacing = store.replacing

    def replacing_and_racing(path: Path) -> Any:
        if not second:
            second.append(CliRunner().invoke(main, ["load", str(SMALL_RAW), "-o", str(folder)]))
        return real_replacing(path)

    monkeypatch.setattr(store, "replacing", replacing_and_racing)
    first = CliRunner().invoke(main, ["load", str(REFERENCE_RAW), "-o", str(folder)])
    assert first.exit_code == 0, first.output
    assert second, "the second load never ran"
    _one_line_error(second[0], "another nsdiag is writing")
    monkeypatch.undo()
    explained = CliRunner().invoke(main, ["explain", "--json", str(folder)])
    assert explained.exit_code == 0, explained.output
    assert json.loads(explained.stdout)["meta"]["kernel_launches"] == 42  # the first's
    assert not (folder / store.LOCK).exists()


def test_load_into_a_folder_that_holds_a_session_still_refused(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    assert CliRunner().invoke(main, ["load", str(SMALL_RAW), "-o", str(folder)]).exit_code == 0
    again = CliRunner().invoke(main, ["load", str(REFERENCE_RAW), "-o", str(folder)])
    _one_line_error(again, "already holds a session")
    assert not (folder / store.LOCK).exists()


@pytest.mark.parametrize("option", ["--cards"])
def test_negative_count_refused_by_report(option: str, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    result = CliRunner().invoke(main, ["report", str(SMALL_RAW), "-o", str(out), option, "-1"])
    _one_line_error(result, option)
    assert not out.exists()


def test_ncu_2020_raw_page_read(tmp_path: Path) -> None:
    """The raw page as nv-nsight-cu-cli 2019/2020 printed it (no Block Size, Grid Size,
    Device, CC columns; nsecond): the same launches and time as today's export."""
    result = CliRunner().invoke(main, ["explain", "--json", *old_raw(tmp_path)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["meta"]["kernel_launches"] == 42 and not doc["warnings"], doc["warnings"]
    today = CliRunner().invoke(main, ["explain", "--json", str(REFERENCE_RAW)])
    assert doc["total_gpu_time_ns"] == json.loads(today.stdout)["total_gpu_time_ns"]
