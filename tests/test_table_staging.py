"""The timeline's tables written while ncu runs (collect/table_staging.py) and the save that
uses them (model/store.py): the same session folder as a save without them, a table changed
since staging written afresh, and no staging folder left behind."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import nsdiag
from nsdiag.collect import table_staging
from nsdiag.collect.profile import profile
from nsdiag.model import store
from tests.conftest import DATA
from tests.test_collect_profile import options

RECORDING = DATA / "programs" / "nvtx_phases.sqlite.gz"  # a real H200 timeline, four phases


@pytest.fixture(scope="module")
def timeline() -> nsdiag.Session:
    return nsdiag.load(RECORDING)


def _tables(folder: Path) -> dict[str, bytes]:
    return {p.name: gzip.decompress(p.read_bytes()) for p in sorted((folder / "tables").iterdir())}


def test_a_save_with_staged_tables_writes_the_same_session(
    timeline: nsdiag.Session, tmp_path: Path
) -> None:
    store.save(timeline, tmp_path / "plain")
    stager = table_staging.TableStager(timeline, tmp_path / "staged")
    staged = stager.take()
    assert set(staged) == set(table_staging.TIMELINE_TABLES)
    store.save(timeline, tmp_path / "staged", staged=staged)
    stager.discard()
    assert _tables(tmp_path / "staged") == _tables(tmp_path / "plain")
    assert not (tmp_path / "staged" / table_staging.STAGING).exists()
    assert all(not path.exists() for _, path in staged.values())  # moved into place, not copied
    again = nsdiag.load(tmp_path / "staged")
    assert len(again.timeline) == len(timeline.timeline) > 0


def test_a_table_changed_since_it_was_staged_is_written_afresh(
    timeline: nsdiag.Session, tmp_path: Path
) -> None:
    stager = table_staging.TableStager(timeline, tmp_path / "s")
    staged = stager.take()
    changed = timeline.api_calls.iloc[:-1]  # one call fewer than the staged table holds
    session = nsdiag.Session(
        timeline=timeline.timeline, api_calls=changed, nvtx_ranges=timeline.nvtx_ranges
    )
    store.save(session, tmp_path / "s", staged=staged)
    stager.discard()
    assert len(nsdiag.load(tmp_path / "s").api_calls) == len(changed)
    assert not (tmp_path / "s" / table_staging.STAGING).exists()


def test_only_a_large_timeline_read_into_a_session_is_staged(
    timeline: nsdiag.Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert table_staging.stage(RECORDING, tmp_path) is None  # not read yet: nothing to write
    rows = sum(len(getattr(timeline, n)) for n in table_staging.TIMELINE_TABLES)
    monkeypatch.setattr(table_staging, "MIN_ROWS", rows + 1)
    assert table_staging.stage(timeline, tmp_path) is None
    monkeypatch.setattr(table_staging, "MIN_ROWS", rows)
    stager = table_staging.stage(timeline, tmp_path)
    assert stager is not None
    stager.discard()
    assert not (tmp_path / table_staging.STAGING).exists()


def test_profile_stages_the_timeline_and_leaves_no_staging_folder(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_staging, "MIN_ROWS", 0)  # the fakes' timeline is small
    made: list[table_staging.TableStager] = []
    real = table_staging.TableStager.__init__

    def recording(self, timeline, root):  # type: ignore[no-untyped-def]
        real(self, timeline, root)
        made.append(self)

    monkeypatch.setattr(table_staging.TableStager, "__init__", recording)
    result = profile(
        [str(fakes["script"]), "0"], options(fakes, tmp_path), nsdiag_argv=["nsdiag", "profile"]
    )
    root = result.session_dir
    assert len(made) == 1 and made[0].folder.parent == root
    assert not (root / table_staging.STAGING).exists()
    session = nsdiag.load(root)
    assert session.has_timeline() and len(session.kernels) > 0
