"""Run a profiler command: its own process group, output teed, progress parsed, failures named.

The child gets a new session (process group), so a Ctrl-C in the terminal reaches nsdiag only;
nsdiag then stops the whole group (ncu, nsys, the program and its children) and waits for it.
Nothing is left running whatever happens: interrupt, error, timeout.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Protocol

from nsdiag.errors import NsdiagError, ProfilerError, interrupting_signal

PERMISSION_HINT = (
    "run nsdiag as root (sudo), or allow every user to profile: set the NVIDIA driver module "
    "option NVreg_RestrictProfilingToAdminUsers=0 (a line "
    "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' "
    "in a file under /etc/modprobe.d/, then reload the driver or reboot); "
    "see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)
NO_GPU_HINT = "run on a machine with an NVIDIA GPU and its driver (nvidia-smi must list the GPU)"

# `==PROF== Profiling "name" - 12: 0%....50%....100% - 38 passes`: one line per profiled launch;
# "- 1 pass" for a one-pass collection (the duration pass). Under a global `--launch-count`,
# ncu 2025.3.1 on the H200 printed lines this pattern's first form did not match (the benchmark's
# `--set full` slices counted 0 of 180 launches, the same slice without a count 177 of 177), so
# whatever stands between the quoted name and the colon is accepted.
_PROGRESS = re.compile(
    r'^==PROF== Profiling "(?P<name>.*)"(?: - (?P<index>\d+))?[^":]*: '
    r".*?(?P<passes>\d+) pass(?:es)?\b"
)
# Known failure texts, most specific first (ncu, nsys, the CUDA runtime, PyTorch).
PROBLEMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "counter-permission",
        re.compile(r"ERR_NVGPUCTRPERM|permission to access NVIDIA GPU Performance Counters", re.I),
    ),
    (
        "no-gpu",
        re.compile(
            r"no CUDA-capable device|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE|found no NVIDIA driver"
            r"|couldn't communicate with the NVIDIA driver"
            r"|libcuda\.so[.\d]*: cannot open shared object"
            r"|CUDA driver version is insufficient|No supported GPU|no devices? (?:were )?found",
            re.I,
        ),
    ),
    ("no-kernels", re.compile(r"No kernels were profiled", re.I)),
    (
        "metric-refused",
        re.compile(r"Failed to find metric|(unknown|invalid) metric|metric\S* not found", re.I),
    ),
    (
        "nsys-import",
        re.compile(
            r"Importer error status|importer binary and its dependencies were not found"
            r"|libdw\.so\.1: cannot open shared object",
            re.I,
        ),
    ),
    # nsys's --pytorch=functions-trace breaks torch.compile: dynamo traces into the module nsys
    # injects and cannot import it (nsys 2025.3.1 on the H200, generate() with a static cache:
    # tests/data/idioms/logs/tl_decode_static.log); plain nsys records the program
    ("pytorch-annotations", re.compile(r"No module named '?nsys_nvtx_annotations")),
    ("app-error", re.compile(r"application returned an error code \((?P<code>-?\d+)\)", re.I)),
    (
        "usage",
        re.compile(
            r"^==ERROR== .*(unrecognised|unrecognized|invalid|unknown) (option|argument|value)",
            re.I,
        ),
    ),
)


class Interrupted(ProfilerError):
    """Ctrl-C or SIGTERM: the partial session is kept; `signame` says which signal."""

    exit_code = 130

    def __init__(self, message: str, hint: str = "", signame: str = "SIGINT") -> None:
        super().__init__(message, hint)
        self.signame = signame
        # 128 + the signal, as a shell reports a command the signal ended (130, 143)
        self.exit_code = 128 + int(getattr(signal, signame, signal.SIGINT))


@dataclass(frozen=True)
class Problem:
    kind: str
    line: str
    code: int | None = None


@dataclass(frozen=True)
class Ending:
    """Why nsdiag ended a run itself: `kind` planned (everything asked for was profiled),
    stalled (the planned launches stopped coming) or limit (phase 2's time was spent)."""

    kind: str
    detail: str


class Watch(Protocol):
    """What decides, while a run goes, whether to end it (collect/watch.py)."""

    poll_s: float

    def seen(self, profiled: int, printed: str) -> Ending | None:
        """After each progress line: launches profiled so far, the name ncu printed."""
        ...

    def overdue(self) -> Ending | None:
        """Polled every `poll_s`: a reason to end the run now."""
        ...

    def waiting(self) -> str | None:
        """Polled every `poll_s`: what the run waits for (the progress line)."""
        ...


# After SIGTERM a run has this long to end and write its report before its group is stopped.
END_GRACE_S = 60.0


@dataclass(frozen=True)
class RunResult:
    argv: tuple[str, ...]
    returncode: int
    wall_s: float
    log: Path
    profiled: int  # launches ncu reported as profiled
    problems: tuple[Problem, ...]
    timed_out: bool = False
    passes: tuple[int, ...] = ()  # replay passes of each profiled launch, as ncu reported them
    ending: Ending | None = None  # why nsdiag ended the run itself (its `watch`), if it did

    @property
    def stopped_early(self) -> bool:
        return self.ending is not None

    @property
    def ok(self) -> bool:
        return (self.returncode == 0 or self.stopped_early) and not self.timed_out

    def has(self, kind: str) -> bool:
        return any(p.kind == kind for p in self.problems)


def classify(line: str) -> Problem | None:
    for kind, pattern in PROBLEMS:
        match = pattern.search(line)
        if match:
            code = match.groupdict().get("code")
            return Problem(kind, line.strip(), int(code) if code is not None else None)
    return None


def run(
    argv: Sequence[str],
    log: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    on_output: Callable[[str], None] | None = None,
    on_progress: Callable[[int, str], None] | None = None,
    stdout_to: Path | None = None,
    timeout_s: float | None = None,
    watch: Watch | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> RunResult:
    """Run `argv` (a list, never a shell) to completion, writing everything it prints to `log`.

    Lines go to `on_output` except ncu's per-launch progress lines, which go to `on_progress`
    (launches done so far, kernel name). With `stdout_to`, standard output goes to that file
    instead (exports) and only standard error is logged. A `watch` is told of each progress line
    and polled from a thread of its own; when it says so the run is ended early (`end_early`):
    ncu keeps what it profiled and the program is not run to its end. What it waits for goes to
    `on_wait` as it polls.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open("ab") as log_file:
        log_file.write(f"$ {shlex.join(argv)}\n".encode())
        log_file.flush()
        out_file = stdout_to.open("wb") if stdout_to else None
        try:
            proc = _start(argv, cwd, env, out_file)
            timer = _watchdog(proc, timeout_s)
            ender = _Ender(proc, log_file)
            poller = _poll(watch, ender, on_wait)
            try:
                stream = proc.stderr if out_file else proc.stdout
                assert stream is not None

                def progress(n: int, name: str) -> None:
                    if on_progress:
                        on_progress(n, name)
                    if watch is not None and ender.ending is None:
                        ending = watch.seen(n, name)
                        if ending is not None:
                            ender.end(ending)

                passes, problems = _follow(
                    stream, log_file, None if out_file else on_output, progress
                )
                returncode = proc.wait()
            finally:
                if timer is not None:
                    timer.cancel()
                ender.finished.set()
                if poller is not None:
                    poller.join(timeout=5)
                stop_group(proc)  # children the leader left behind
        except KeyboardInterrupt as exc:
            signame = interrupting_signal(exc)
            log_file.write(f"\n[nsdiag] interrupted ({signame}): process group stopped\n".encode())
            raise Interrupted(
                f"interrupted while running {Path(argv[0]).name}", f"see {log}", signame
            ) from exc
        finally:
            if out_file:
                out_file.close()
        timed_out = bool(timer is not None and timer.fired)
        if timed_out:
            log_file.write(f"\n[nsdiag] stopped after {timeout_s:.0f} s\n".encode())
        log_file.write(f"[nsdiag] exit code {returncode}\n".encode())
    return RunResult(
        tuple(argv),
        returncode,
        time.monotonic() - start,
        log,
        len(passes),
        tuple(problems),
        timed_out,
        tuple(passes),
        ender.ending,
    )


class _Ender:
    """Ends a run once, from whichever thread decides it: SIGTERM (`end_early`), and the whole
    group stopped if it has not ended `END_GRACE_S` later."""

    def __init__(self, proc: subprocess.Popen[bytes], log_file: BinaryIO) -> None:
        self.proc, self.log_file = proc, log_file
        self.ending: Ending | None = None
        self.ended_at = 0.0
        self.finished = threading.Event()  # the run's output has ended
        self._lock = threading.Lock()

    def end(self, ending: Ending) -> None:
        with self._lock:
            if self.ending is not None:
                return
            self.ending, self.ended_at = ending, time.monotonic()
            self.log_file.write(f"[nsdiag] {ending.detail}: ending the run\n".encode())
            self.log_file.flush()
            end_early(self.proc)

    def overstayed(self) -> bool:
        return self.ending is not None and time.monotonic() - self.ended_at > END_GRACE_S


def _poll(
    watch: Watch | None, ender: _Ender, on_wait: Callable[[str], None] | None
) -> threading.Thread | None:
    """The watch's timer: every `poll_s` until the run's output ends, end the run when the watch
    says so, else tell what it waits for; stop the group if it outlives its SIGTERM."""
    if watch is None:
        return None

    def loop() -> None:
        while not ender.finished.wait(watch.poll_s):
            if ender.ending is not None:
                if ender.overstayed():
                    stop_group(ender.proc)
                    return
                continue
            ending = watch.overdue()
            if ending is not None:
                ender.end(ending)
            elif on_wait is not None and (text := watch.waiting()) is not None:
                on_wait(text)

    thread = threading.Thread(target=loop, name="nsdiag-watch", daemon=True)
    thread.start()
    return thread


def start_detached(
    argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `argv` in a process group of its own with everything it prints going straight to
    `log` (nobody reads a pipe while it runs); the caller ends it with `stop_group`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as log_file:
        log_file.write(f"$ {shlex.join(argv)}\n".encode())
        log_file.flush()
        return _popen(argv, None, env, log_file, subprocess.STDOUT)


def _start(
    argv: Sequence[str],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    out_file: BinaryIO | None,
) -> subprocess.Popen[bytes]:
    """The child in a process group of its own; its output on a pipe, or standard output into
    `out_file` and standard error on the pipe."""
    if out_file:
        return _popen(argv, cwd, env, out_file, subprocess.PIPE)
    return _popen(argv, cwd, env, subprocess.PIPE, subprocess.STDOUT)


def _popen(
    argv: Sequence[str],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    stdout: BinaryIO | int,
    stderr: int,
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    except OSError as exc:
        raise ProfilerError(
            f"cannot start {argv[0]}: {exc.strerror or exc}",
            "check the path, or pass the tool with --ncu / --nsys",
        ) from exc


def _follow(
    stream: IO[bytes],
    log_file: BinaryIO,
    on_output: Callable[[str], None] | None,
    on_progress: Callable[[int, str], None] | None,
) -> tuple[list[int], list[Problem]]:
    """Read the child's output to its end into the log: progress lines collected (one per
    launch profiled, with its replay passes), the others checked for known failures and passed
    on."""
    passes: list[int] = []
    problems: list[Problem] = []
    for raw in iter(stream.readline, b""):
        log_file.write(raw)
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        match = _PROGRESS.match(line)
        if match:
            passes.append(int(match.group("passes")))
            if on_progress:
                on_progress(len(passes), match.group("name"))
            continue
        problem = classify(line)
        if problem:
            problems.append(problem)
        if on_output:
            on_output(line)
    return passes, problems


class _Watchdog(threading.Timer):
    fired = False


def _watchdog(proc: subprocess.Popen[bytes], timeout_s: float | None) -> _Watchdog | None:
    if not timeout_s:
        return None

    def fire() -> None:
        timer.fired = True
        stop_group(proc)

    timer = _Watchdog(timeout_s, fire)
    timer.daemon = True
    timer.start()
    return timer


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is still in the group."""
    if not Path("/proc").is_dir():
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    return bool(_group_members(pgid))


_SHELLS = frozenset({"sh", "bash", "dash", "zsh"})


def end_early(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to every process of the child's group but shells (ncu's launcher script, which
    waits for ncu and returns its exit code): ncu answers "Trying to shutdown target
    application", ends the program and writes the report with every launch profiled so far
    (tools/probes/probe_ncu_stop.py on the H200, ncu 2025.3.1: 3 of 3 launches kept, exit 0, 7.0 s
    against 20.8 s plain). SIGKILL would lose the report, so the usual stop_group afterwards
    only reaches what SIGTERM left."""
    for pid in _group_members(proc.pid):
        if _command_name(pid) in _SHELLS:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of the group, from /proc (the leader alone without it)."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return [pgid]
    members = []
    for entry in proc_dir.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def stop_group(proc: subprocess.Popen[bytes], grace_s: tuple[float, float] = (3.0, 2.0)) -> None:
    """SIGINT (ncu and nsys finish their files), then SIGTERM, then SIGKILL to the whole group."""
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    for sig, wait in (
        (signal.SIGINT, grace_s[0]),
        (signal.SIGTERM, grace_s[1]),
        (signal.SIGKILL, 5.0),
    ):
        if not group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None and not group_alive(pgid):
                break
            time.sleep(0.05)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def failure(result: RunResult, what: str, session_dir: Path | None = None) -> NsdiagError | None:
    """The error to raise for a finished run, or None when it succeeded."""
    kept = f"; the partial session is kept in {session_dir}" if session_dir else ""
    log = f"see {result.log}{kept}"
    if result.has("counter-permission"):
        return ProfilerError(
            "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM)", PERMISSION_HINT
        )
    if result.has("no-gpu"):
        line = next(p.line for p in result.problems if p.kind == "no-gpu")
        return ProfilerError(f"no usable NVIDIA GPU ({line.strip('= ')})", NO_GPU_HINT)
    if result.timed_out:
        return ProfilerError(f"{what} did not finish in time and was stopped", log)
    if result.stopped_early:
        return None  # nsdiag ended the program itself, once everything planned was profiled
    app = next((p for p in result.problems if p.kind == "app-error"), None)
    if app is not None:
        return ProfilerError(
            f"the program exited with code {app.code} during {what}",
            f"run it without nsdiag to see why; {log}",
        )
    if result.has("no-kernels") and result.returncode == 0:
        return ProfilerError(
            f"no kernel was profiled during {what}",
            "the program launched no CUDA kernel in the profiled region: if it calls "
            "cudaProfilerStart/Stop use --profile-from-start off, else check --kernel and --nvtx; "
            + log,
        )
    if result.returncode != 0:
        errors = [p.line for p in result.problems] or _last_error_lines(result.log)
        detail = f": {errors[-1]}" if errors else ""
        return ProfilerError(f"{what} failed (exit code {result.returncode}){detail}", log)
    return None


def _last_error_lines(log: Path) -> list[str]:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [ln.strip() for ln in lines if "ERROR" in ln or "Error" in ln][-1:]
