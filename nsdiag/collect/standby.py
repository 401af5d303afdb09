"""Phase 2's first program, started while phase 1 runs, so that its start-up is not paid twice.

A Python program's start-up (imports, model construction: 11-14 s of a 14-23 s run on the H200)
ran once under nsys and again under ncu. ncu can start a program and hold it at its first CUDA
call until an ncu attaches (`--mode launch`, then `--mode attach` with the filters the plan
chose): the start-up then runs beside phase 1, and the targeted run begins where the program
first touches the GPU (tools/probes/probe_ncu_attach.py on the H200, BERT batch 1: 11.2 s from
attach to the report against a 21 s plain run; the launch counts of `--launch-skip-before-match`
still start at the program's start). Held at its first CUDA call, the waiting program uses no
GPU while phase 1 measures.

Used for a Python script (one process, ncu profiling from its start) unless `--sequential`;
the first targeted run attaches, a later one starts the program as before, and a failed attach
falls back to that. Whatever happens, the waiting program is ended with the run.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nsdiag.collect import argv as cmd
from nsdiag.collect import runner

# Ports the launched program may listen on for the attaching ncu (one per injected process;
# only the program's own is injected, a few spare for a program that re-executes itself).
CONNECTIONS = 4
_PORT_RANGE = (49152, 65000)


@dataclass
class Standby:
    """The program ncu started and holds for the first targeted run."""

    proc: subprocess.Popen[bytes]
    port: int
    started: float = field(default_factory=time.monotonic)
    ended: bool = False  # attached to and ended, or ended unused

    def head_start_s(self) -> float:
        return time.monotonic() - self.started

    def waiting(self) -> bool:
        return not self.ended and self.proc.poll() is None

    def attach_argv(self, argv: Sequence[str], program: Sequence[str]) -> list[str]:
        return cmd.ncu_attach(argv, program, self.port, CONNECTIONS)

    def end(self) -> None:
        """End the program and its launcher (idempotent): after the attached run profiled what
        it planned, or when it is not needed."""
        self.ended = True
        if self.proc.poll() is None or runner.group_alive(self.proc.pid):
            runner.stop_group(self.proc, grace_s=(1.0, 2.0))


def usable(program: Sequence[str], *, profile_from_start: bool, sequential: bool) -> bool:
    """A Python script profiled from its start, not a distributed launcher: one process that
    the attaching ncu can follow."""
    if sequential or not profile_from_start or len(program) < 2:
        return False
    if not os.path.basename(program[0]).startswith("python"):
        return False
    return program[1] not in ("-m", "-c") and program[1].endswith(".py")


def start(
    ncu: Path, program: Sequence[str], log: Path, env: dict[str, str] | None
) -> Standby | None:
    """Start the program under `ncu --mode launch` on free ports; None when none are free."""
    port = free_ports(CONNECTIONS)
    if port is None:
        return None
    proc = runner.start_detached(cmd.ncu_launch(ncu, program, port, CONNECTIONS), log, env)
    return Standby(proc, port)


# Ports handed to programs this process started: an attaching ncu scans its whole range, so two
# waiting programs (this run's next one beside the one being attached to) must not share one.
_HANDED_OUT: set[int] = set()


def free_ports(count: int) -> int | None:
    """The first of `count` consecutive TCP ports on 127.0.0.1 that nothing listens on and no
    program started here was given, picked from a kernel-chosen one (so that two nsdiag runs at
    once do not meet on ncu's default 49152)."""
    for _ in range(20):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if not _PORT_RANGE[0] <= base <= _PORT_RANGE[1] - count:
            base = _PORT_RANGE[0] + base % (_PORT_RANGE[1] - _PORT_RANGE[0] - count)
        ports = range(base, base + count)
        if _HANDED_OUT.isdisjoint(ports) and all(_free(p) for p in ports):
            _HANDED_OUT.update(ports)
            return base
    return None


def _free(port: int) -> bool:
    with socket.socket() as s, contextlib.suppress(OSError):
        s.bind(("127.0.0.1", port))
        return True
    return False
