"""`.nsys-rep` reports: the nsys export command, and `nsdiag.load` exporting a report with the
nsys it finds (nsdiag.collect runs it; the readers only read the SQLite export)."""

from __future__ import annotations

import gzip
import stat
from pathlib import Path

import pytest

from nsdiag import load
from nsdiag.collect import nsys_export
from nsdiag.collect.argv import nsys_export_sqlite
from nsdiag.errors import MissingDependencyError
from nsdiag.model.meta import Source
from nsdiag.readers import nsys_rep, reader_for


def test_export_argv_is_a_list_and_missing_nsys_says_how_to_export(
    tmp_path: Path, monkeypatch
) -> None:
    nsys = tmp_path / "bin dir" / "nsys"
    # The one export command line (collect/argv.py), a list: paths with spaces stay one argument.
    argv = nsys_export_sqlite(nsys, tmp_path / "my report.nsys-rep", tmp_path / "out.sqlite")
    assert argv == [
        str(nsys),
        "export",
        "--type",
        "sqlite",
        "-f",
        "true",
        "-o",
        str(tmp_path / "out.sqlite"),
        str(tmp_path / "my report.nsys-rep"),
    ]
    from nsdiag.collect import tools

    monkeypatch.setattr(tools, "INSTALL_GLOBS", {"nsys": (), "ncu": ()})
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for var in ("NSYS", "NCU", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    report = tmp_path / "r.nsys-rep"
    report.write_bytes(b"x")
    assert reader_for(report) is nsys_rep.read
    with pytest.raises(MissingDependencyError) as missing:
        load(report)
    assert "nsys export --type sqlite report.nsys-rep" in missing.value.hint


def test_nsys_rep_is_exported_with_the_nsys_found(
    tmp_path: Path, monkeypatch, data_dir: Path
) -> None:
    """A stand-in nsys (a script that writes the export) found through $NSYS."""
    export = tmp_path / "recorded.sqlite"
    export.write_bytes(gzip.decompress((data_dir / "nsys" / "sync_heavy.sqlite.gz").read_bytes()))
    fake = tmp_path / "fake nsys"
    fake.write_text(
        f"#!/bin/sh\n# args: export --type sqlite -f true -o OUT REP (or --version)\n"
        '[ "$1" = --version ] && echo "NVIDIA Nsight Systems version 2025.3.1.0" && exit 0\n'
        f'cp "{export}" "$7"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("NSYS", str(fake))
    assert nsys_export.find_nsys() == fake
    report = tmp_path / "my run.nsys-rep"
    report.write_bytes(b"report")
    session = load(report)
    assert session.meta.sources == (Source(str(report), "nsys-rep"),)
    assert len(session.timeline) == 1043
