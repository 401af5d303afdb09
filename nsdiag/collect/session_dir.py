"""The session folder `nsdiag profile` writes: raw reports, logs, the command, the environment,
the device, a status saying what is complete, and the tidy tables (nsdiag.model.store).

    <dir>/command.json  env.json  device.json  status.json  session.json  tables/
    <dir>/reports/  timeline.nsys-rep, timeline.sqlite, targeted-1.ncu-rep, targeted-1.raw.csv, ...
    <dir>/logs/     one log per command run
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsdiag.collect import breakdown
from nsdiag.errors import InputError, NsdiagError
from nsdiag.model.session import Session
from nsdiag.model.status import STATUS, ProfileStatus

if TYPE_CHECKING:
    from nsdiag.model.store import Staged

DEFAULT_BASE = Path("nsdiag-sessions")
# Environment variables that change what a profile measures or where the tools come from.
ENV_KEYS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_LAUNCH_BLOCKING",
    "LD_LIBRARY_PATH",
    "PATH",
    "NCU",
    "NSYS",
    "PYTORCH_CUDA_ALLOC_CONF",
    "TORCH_CUDNN_V8_API_ENABLED",
    "NVIDIA_TF32_OVERRIDE",
    "OMP_NUM_THREADS",
    "CUBLAS_WORKSPACE_CONFIG",
    "TORCHINDUCTOR_CACHE_DIR",
)


@dataclass(frozen=True)
class SessionDir:
    root: Path

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def report(self, name: str) -> Path:
        return self.reports / name

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"


def program_stem(program: Sequence[str]) -> str:
    """A folder-friendly name for the program: the script for `python x.py`, else the binary."""
    words = [w for w in program if not w.startswith("-")]
    target = next((w for w in words[1:] if w.endswith(".py")), words[0] if words else "program")
    if Path(target).name == "run_all.py" and Path(target).parent.name == "reference_kernels":
        return "reference-kernels"
    stem = Path(target).stem or "program"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-") or "program"


def default_path(
    program: Sequence[str], when: datetime | None = None, base: Path = DEFAULT_BASE
) -> Path:
    when = when or datetime.now()
    return base / f"{program_stem(program)}-{when:%Y%m%d-%H%M%S}"


def free_path(path: Path) -> Path:
    """`path` itself when absent or empty, else the first `path-2`, `path-3`... that is."""

    def usable(p: Path) -> bool:
        return not p.exists() or (p.is_dir() and not any(p.iterdir()))

    if usable(path):
        return path
    n = 2
    while not usable(path.with_name(f"{path.name}-{n}")):
        n += 1
    return path.with_name(f"{path.name}-{n}")


def create(path: Path | None, program: Sequence[str], when: datetime | None = None) -> SessionDir:
    """Make the session folder; an existing non-empty folder is never written into."""
    target = free_path(path if path is not None else default_path(program, when))
    try:
        for sub in (target, target / "reports", target / "logs"):
            sub.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot create the session folder {target}: {exc.strerror or exc}",
            "pass a writable folder with -o",
        ) from exc
    return SessionDir(target)


def write_json(path: Path, data: Any) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)  # a reader never sees half a file, even after Ctrl-C
    return path


def write_command(
    sd: SessionDir, nsdiag_argv: Sequence[str], program: Sequence[str], when: datetime
) -> Path:
    return write_json(
        sd.root / "command.json",
        {
            "nsdiag": list(nsdiag_argv),
            "program": list(program),
            "cwd": os.getcwd(),
            "time": when.isoformat(timespec="seconds"),
        },
    )


def write_env(
    sd: SessionDir, tools: dict[str, dict[str, str]], env: dict[str, str] | None = None
) -> Path:
    env = dict(os.environ) if env is None else env
    from nsdiag.version import __version__

    return write_json(
        sd.root / "env.json",
        {
            "nsdiag": __version__,
            "python": sys.version.split()[0],
            "executable": sys.executable,
            "platform": platform.platform(),
            "machine": platform.machine(),
            "tools": tools,
            "env": {k: env[k] for k in ENV_KEYS if k in env},
        },
    )


def write_device(sd: SessionDir, device: dict[str, Any]) -> Path:
    return write_json(sd.root / "device.json", device)


@dataclass
class Status:
    """What the session holds, as the run goes; saved (as `record()`) after every step so an
    interrupted run still says so."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    complete: bool = False
    error: str | None = None
    plan: dict[str, Any] | None = None
    coverage: dict[str, Any] | None = None
    rule_metrics: int | None = None  # rule metrics requested by name in phase 2
    region: dict[str, Any] | None = None  # the analysed region phase 2 picked its launches in
    rank: dict[str, Any] | None = None  # a distributed run: the rank phase 2 profiled
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds per phase (breakdown)
    estimate: dict[str, Any] | None = None  # phase 2's estimate before it ran (cost.py)
    budget: dict[str, Any] | None = None  # --budget: what it kept and left out
    interrupted: dict[str, Any] | None = None  # the signal, and the phase and step it stopped
    # a PyTorch program: whether phase 1 recorded its functions' ranges (and why not)
    pytorch_ranges: dict[str, Any] | None = None
    # phase 2's wall-clock limit: its seconds, where they came from, whether it was reached and
    # which runs it skipped (early_stop.Watch)
    phase2_limit: dict[str, Any] | None = None

    def step(
        self,
        name: str,
        ok: bool,
        wall_s: float | None = None,
        log: Path | None = None,
        **extra: Any,
    ) -> None:
        entry = {
            "name": name,
            "ok": ok,
            **({"wall_s": round(wall_s, 2)} if wall_s is not None else {}),
            **({"log": str(log)} if log else {}),
            **extra,
        }
        self.steps.append(entry)

    def lacks(self, what: str) -> None:
        if what not in self.missing:
            self.missing.append(what)

    def record(self) -> ProfileStatus:
        """The status as status.json holds it (nsdiag/model/status.py)."""
        return ProfileStatus(
            complete=self.complete and not self.missing and self.error is None,
            missing=tuple(self.missing),
            error=self.error,
            steps=tuple(self.steps),
            plan=self.plan,
            coverage=self.coverage,
            rule_metrics=self.rule_metrics,
            region=self.region,
            rank=self.rank,
            estimate=self.estimate,
            budget=self.budget,
            interrupted=self.interrupted,
            breakdown=breakdown.summarise(self.steps, self.phases),
            pytorch_ranges=self.pytorch_ranges,
            phase2_limit=self.phase2_limit,
        )

    def save(self, sd: SessionDir) -> Path:
        return write_json(sd.root / STATUS, self.record().to_json())


def load_ncu_report(raw_csv: Path, details_csv: Path | None) -> Session:
    """Kernels and metrics from the raw page; ncu's rule results from the details page of the same
    report (same launches in the same order), so a launch is never counted twice."""
    from nsdiag import load
    from nsdiag.readers.merge import same_launches

    session = load(raw_csv)
    if details_csv is None or not details_csv.is_file():
        return session
    try:
        details = load(details_csv)
    except NsdiagError:
        return session
    if same_launches(session, details):
        session.rule_results = details.rule_results
    return session


def assemble(
    ncu_reports: Sequence[tuple[Path, Path | None]],
    timeline: Session | Path | None,
    meta: dict[str, Any],
) -> Session | None:
    """One Session from every ncu report (raw + details export) and the nsys SQLite export (or
    the session already read from it)."""
    from nsdiag import load
    from nsdiag.readers.merge import merge_sessions

    sessions = [load_ncu_report(raw, details) for raw, details in ncu_reports if raw.is_file()]
    if isinstance(timeline, Session):
        sessions.append(timeline)
    elif timeline is not None and timeline.is_file():
        sessions.append(load(timeline))
    if not sessions:
        return None
    merged = sessions[0] if len(sessions) == 1 else merge_sessions(sessions)
    merged.meta = replace(merged.meta, **meta)
    return merged


def save_tables(sd: SessionDir, session: Session, staged: Staged | None = None) -> Path:
    from nsdiag.model import store

    return store.save(session, sd.root, staged=staged)
