"""Does ncu keep what it profiled when the program is ended early? (issue 26: end the program
once the last planned launch is profiled.) Run on the H200 from the repository root:

    python3 tools/probes/probe_ncu_stop.py OUT_DIR

A 300-iteration elementwise loop (about 16 s plain) is profiled by ncu in four ways, each
printing its wall time, ncu's exit code, the processes under ncu when the stop was sent, and
how many launches the report holds afterwards:

- plain: the program alone;
- stop-term: global --launch-count 3; after the third progress line the program (every process
  under ncu that is not ncu's own) gets SIGTERM;
- stop-kill: the same with SIGKILL;
- kill-yes-global: ncu's own `--kill yes` with a global --launch-count 3;
- kill-yes-per-config: `--kill yes` with --filter-mode per-launch-config --launch-count 1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PROGRAM = """
import time, torch
x = torch.randn(1 << 22, device="cuda")
for i in range(300):
    y = x * 2.0
    z = y + 1.0
    torch.cuda.synchronize()
    time.sleep(0.05)
    if i % 100 == 0:
        print("iter", i, flush=True)
print("done", flush=True)
"""
NCU = "ncu"
BASE = [NCU, "--metrics", "gpu__time_duration.sum,dram__bytes.sum", "-k", "regex:elementwise"]


def children_of(pid: int) -> dict[int, int]:
    """pid -> ppid of every process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            table[int(entry.name)] = int(stat[stat.rfind(")") + 2 :].split()[1])
    return table


def descendants(pid: int) -> list[int]:
    table = children_of(pid)
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, pp in table.items() if pp == parent]
        found += kids
        frontier += kids
    return found


def describe(pid: int) -> str:
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError as exc:
        return f"{pid}: ({exc})"
    return f"{pid}: exe={exe} args={args}"


def launches_in(report: Path) -> int:
    if not report.is_file():
        return -1
    out = subprocess.run(
        [NCU, "-i", str(report), "--csv", "--page", "raw"], capture_output=True, text=True
    ).stdout
    return max(len([ln for ln in out.splitlines() if ln.startswith('"')]) - 2, 0)


def run(name: str, argv: list[str], out: Path, stop_after: int = 0, sig: int = 0) -> None:
    log = out / f"{name}.log"
    start = time.monotonic()
    with log.open("w") as f:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen = 0
        assert proc.stdout is not None
        for line in proc.stdout:
            f.write(line)
            if line.startswith("==PROF== Profiling"):
                seen += 1
                if stop_after and seen == stop_after:
                    under = descendants(proc.pid)
                    f.write("[probe] under ncu: " + " | ".join(describe(p) for p in under) + "\n")
                    ncu_dir = str(Path(os.readlink(f"/proc/{proc.pid}/exe")).parents[1])
                    targets = [
                        p for p in under if not describe(p).split("exe=")[-1].startswith(ncu_dir)
                    ]
                    f.write(f"[probe] ncu dir {ncu_dir}; signal {sig} to {targets}\n")
                    for p in targets:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(p, sig)
        code = proc.wait()
    wall = time.monotonic() - start
    report = out / f"{name}.ncu-rep"
    print(
        f"{name}: wall {wall:.1f} s, exit {code}, progress lines {seen}, "
        f"report launches {launches_in(report) if argv[0] == NCU else 'n/a'}"
    )
    tail = log.read_text().splitlines()[-6:]
    for ln in tail:
        print("   ", ln[:200])


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    prog = out / "prog.py"
    prog.write_text(PROGRAM)
    py = [sys.executable, str(prog)]
    run("plain", py, out)
    o = ["-f", "-o"]
    run(
        "stop-term",
        [*BASE, "--launch-count", "3", *o, str(out / "stop-term"), *py],
        out,
        3,
        signal.SIGTERM,
    )
    run(
        "stop-kill",
        [*BASE, "--launch-count", "3", *o, str(out / "stop-kill"), *py],
        out,
        3,
        signal.SIGKILL,
    )
    run(
        "kill-yes-global",
        [*BASE, "--launch-count", "3", "--kill", "yes", *o, str(out / "kill-yes-global"), *py],
        out,
    )
    run(
        "kill-yes-per-config",
        [
            *BASE,
            "--filter-mode",
            "per-launch-config",
            "--launch-count",
            "1",
            "--kill",
            "yes",
            *o,
            str(out / "kill-yes-per-config"),
            *py,
        ],
        out,
    )


if __name__ == "__main__":
    main()
