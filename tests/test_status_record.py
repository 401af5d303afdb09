"""status.json, one record (model/status.py): every recorded status reads, the collector writes
what earlier versions wrote, and a status nsdiag did not write is refused with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nsdiag.collect import session_dir
from nsdiag.errors import InputError
from nsdiag.model.status import STATUS, ProfileStatus
from nsdiag.readers.session_folder import read_status
from tests.conftest import DATA

RECORDED = sorted(DATA.glob("**/status.json"))


def _written(status: ProfileStatus) -> str:
    """The text collect/session_dir.py's write_json gives a status."""
    return json.dumps(status.to_json(), indent=1, default=str) + "\n"


def test_the_corpus_holds_statuses_of_several_versions() -> None:
    key_sets = {tuple(json.loads(p.read_text())) for p in RECORDED}
    assert len(RECORDED) >= 30 and len(key_sets) >= 4, key_sets


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: str(p.parent.relative_to(DATA)))
def test_every_recorded_status_reads_and_keeps_what_it_said(path: Path) -> None:
    recorded = json.loads(path.read_text())
    status = read_status(path.parent)
    assert status is not None and status.extra == {}
    written = status.to_json()
    assert {k: v for k, v in written.items() if k in recorded} == recorded
    assert [k for k in written if k in recorded] == list(recorded)  # in the order it had them
    # what a version before a key existed lacks reads as unset
    assert all(written[k] is None for k in written if k not in recorded)
    if written.keys() <= recorded.keys():  # written by this version: the same bytes again
        assert _written(status) == path.read_text()


def test_the_collector_writes_the_keys_this_version_recorded(tmp_path: Path) -> None:
    newest = next(
        json.loads(p.read_text())
        for p in RECORDED
        if "breakdown" in json.loads(p.read_text()) and "rank" not in json.loads(p.read_text())
    )
    folder = session_dir.SessionDir(tmp_path)
    status = session_dir.Status(missing=["kernel metrics (ncu failed)"], rule_metrics=12)
    status.step("1-timeline", True, 3.14159, tmp_path / "1.log")
    status.save(folder)
    written = json.loads((tmp_path / STATUS).read_text())
    assert list(written) == list(newest)
    assert written["complete"] is False and written["rule_metrics"] == 12
    assert written["steps"] == [
        {"name": "1-timeline", "ok": True, "wall_s": 3.14, "log": str(tmp_path / "1.log")}
    ]
    assert read_status(tmp_path) == status.record()
    status.rank = {"rank": 1}
    status.missing.clear()
    status.complete = True
    status.save(folder)
    again = json.loads((tmp_path / STATUS).read_text())
    assert list(again) == [*list(newest)[:9], "rank", *list(newest)[9:]] and again["complete"]


def test_a_key_of_a_later_version_is_kept() -> None:
    status = ProfileStatus.from_json({"schema": "nsdiag.status/2", "complete": True, "new": [1]})
    assert status.complete and status.extra == {"new": [1]}
    assert status.to_json()["new"] == [1]


def test_a_hand_edited_missing_reads_as_one_line() -> None:
    status = ProfileStatus.from_json({"schema": "nsdiag.status/1", "complete": False, "missing": 5})
    assert status.missing == ("5",)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ([1], "not a JSON object"),
        ({"complete": True}, "schema is None"),
        ({"schema": "other/1", "complete": True}, "schema is 'other/1'"),
        ({"schema": "nsdiag.status/1"}, "no 'complete'"),
        ({"schema": "nsdiag.status/1", "complete": "yes"}, "'complete' is not true or false"),
        ({"schema": "nsdiag.status/1", "complete": True, "steps": "x"}, "'steps' is not a list"),
        ({"schema": "nsdiag.status/1", "complete": True, "plan": 5}, "'plan' is not an object"),
        ({"schema": "nsdiag.status/1", "complete": True, "rule_metrics": 1.5}, "'rule_metrics'"),
    ],
)
def test_a_status_nsdiag_did_not_write_is_refused(data: Any, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        ProfileStatus.from_json(data)


def test_reading_a_folder_says_what_is_wrong_with_its_status(tmp_path: Path) -> None:
    assert read_status(tmp_path) is None  # nsdiag load's folders have none
    (tmp_path / STATUS).write_text("{oops")
    with pytest.raises(InputError, match="unreadable"):
        read_status(tmp_path)
    (tmp_path / STATUS).write_text('{"schema": "nsdiag.status/1", "complete": 1}')
    with pytest.raises(InputError, match="not a status nsdiag wrote"):
        read_status(tmp_path)


def test_the_keys_issue_38_added_are_written_only_when_set_and_read_back(tmp_path: Path) -> None:
    folder = session_dir.SessionDir(tmp_path)
    status = session_dir.Status()
    status.save(folder)
    plain = json.loads((tmp_path / STATUS).read_text())
    assert "pytorch_ranges" not in plain and "phase2_limit" not in plain
    status.pytorch_ranges = {"asked": True, "recorded": False, "reason": "torch.compile broke"}
    status.phase2_limit = {"seconds": 60.0, "source": "--budget", "reached": True}
    status.save(folder)
    written = json.loads((tmp_path / STATUS).read_text())
    assert list(written)[-2:] == ["pytorch_ranges", "phase2_limit"]
    read = read_status(tmp_path)
    assert read == status.record() and read is not None
    assert read.phase2_limit == status.phase2_limit and read.extra == {}
