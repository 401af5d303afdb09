"""Issue 26: can phase 2's program start while phase 1 runs? `ncu --mode launch` starts the
program and suspends it at its first intercepted CUDA call; `ncu --mode attach` later connects
with the filters the plan chose. This probe times each step on one program and checks that the
attached run profiles what it is told to, that launch counting starts at the program's start
(`--launch-skip-before-match`), and what SIGTERM to the attached ncu does (report kept?).

    python3 tools/probes/probe_ncu_attach.py OUTDIR PROGRAM [ARGS...]   (on the H200)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
program = sys.argv[2:]
T0 = time.monotonic()


def log(msg: str) -> None:
    line = f"{time.monotonic() - T0:7.2f} s  {msg}"
    print(line, flush=True)
    with open(out / "attach.log", "a") as f:
        f.write(line + "\n")


def follow(name: str, proc: subprocess.Popen, lines: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("==") or "NSDIAG_RESULT" in line:
            log(f"[{name}] {line.rstrip()[:160]}")


def start(name: str, argv: list[str]) -> tuple[subprocess.Popen, list[str], threading.Thread]:
    log(f"start {name}: {' '.join(argv)[:200]}")
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: list[str] = []
    t = threading.Thread(target=follow, args=(name, proc, lines), daemon=True)
    t.start()
    return proc, lines, t


def attach(tag: str, extra: list[str], stop_after: int | None) -> None:
    report = f"/tmp/att_{tag}"
    launcher, _, _lt = start(f"launch-{tag}", ["ncu", "--mode", "launch", *program])
    time.sleep(25)  # phase 1 would run meanwhile
    log(f"launcher alive after 25 s: {launcher.poll() is None}")
    argv = [
        "ncu",
        "--mode",
        "attach",
        "--hostname",
        "127.0.0.1",
        "--clock-control",
        "none",
        "--metrics",
        "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "-f",
        "-o",
        report,
        *extra,
    ]
    t_attach = time.monotonic()
    att, lines, _at = start(f"attach-{tag}", argv)
    if stop_after is not None:
        while att.poll() is None:
            if sum("==PROF== Profiling" in ln for ln in lines) >= stop_after:
                time.sleep(0.5)
                log(f"SIGTERM to attach-{tag} after {stop_after} profiled")
                os.killpg(att.pid, signal.SIGTERM)
                break
            time.sleep(0.05)
    try:
        att.wait(timeout=240)
    except subprocess.TimeoutExpired:
        log("attach did not end in 240 s; killing")
        os.killpg(att.pid, signal.SIGKILL)
    log(
        f"attach-{tag} rc={att.returncode} after {time.monotonic() - t_attach:.2f} s; "
        f"profiled {sum('==PROF== Profiling' in ln for ln in lines)}"
    )
    try:
        launcher.wait(timeout=60)
    except subprocess.TimeoutExpired:
        log("launcher still alive 60 s after attach ended; killing")
        os.killpg(launcher.pid, signal.SIGKILL)
    kept = Path(report + ".ncu-rep").exists()
    log(f"launcher-{tag} rc={launcher.returncode}; report exists: {kept}")
    if Path(report + ".ncu-rep").exists():
        done = subprocess.run(
            [
                "ncu",
                "-i",
                report + ".ncu-rep",
                "--csv",
                "--page",
                "raw",
                "--metrics",
                "gpu__time_duration.sum",
            ],
            capture_output=True,
            text=True,
        )
        rows = [ln for ln in done.stdout.splitlines()[2:] if ln.strip()]
        log(f"report rows: {len(rows)}; first: {rows[0][:200] if rows else ''}")
        (out / f"{tag}.csv").write_text(done.stdout)


p = subprocess.run(program and ["python3", "-c", "0"], capture_output=True)
t = time.monotonic()
subprocess.run(program, capture_output=True)
log(f"plain run {time.monotonic() - t:.2f} s")
attach("count", ["-k", "regex:layer_norm", "--launch-count", "3"], None)
attach(
    "before_match",
    [
        "--filter-mode",
        "per-launch-config",
        "--kernel-name-base",
        "function",
        "-k",
        "regex:^(vectorized_layer_norm_kernel|gemmSN_TN_kernel)$",
        "--launch-count",
        "1",
        "--launch-skip-before-match",
        "2000",
    ],
    None,
)
attach("sigterm", ["-k", "regex:elementwise", "--launch-count", "50"], 4)
