"""A stand-in ncu for the tests (conftest.py's `fakes`): it logs its argv, runs the program,
prints progress lines as ncu does and writes a report; exports print recorded CSV pages.

Environment: FAKE_CALLS (argv log), FAKE_RAW / FAKE_DETAILS (recorded pages), FAKE_HEADER (a
full-set export whose header lists the metrics), FAKE_QUERY=fail, FAKE_<KIND>=mode for the run
kinds export, targeted, durations and full (ok, refuse, perm, hang, nogpu, nokernels, appfail),
FAKE_PIDS (where a hanging run writes its pids), FAKE_KERNELS (launches), FAKE_NCU_BANNER,
FAKE_LAUNCH=die (a `--mode launch` program that ends before any attach), FAKE_ATTACH=fail,
FAKE_STALL_AFTER=N (a targeted run prints N progress lines, writes its pids to FAKE_PIDS and
waits, as ncu does while the program's later launches are none it was asked for, until SIGTERM
or SIGINT, on which it keeps its report), FAKE_NAMES=other (the progress lines name kernels the
filter did not list, as ncu's other name bases print them).

`--mode launch` holds the program until an `--mode attach` run on its port says it attached
(files beside FAKE_CALLS), as ncu holds it at its first CUDA call; the attached run then waits
for the launcher to end instead of running the program, and on SIGTERM keeps its report and
leaves the program running (what ncu 2025.3.1 did, tools/probes/probe_ncu_attach.py).
"""

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BANNER = (
    "NVIDIA (R) Nsight Compute Command Line Profiler\n"
    "Copyright (c) 2018-2025 NVIDIA Corporation\n"
    "Version 2025.3.1.0 (build 36398880) (public-release)"
)
PERMISSION = (
    "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
    "Performance Counters on the target device 0. For instructions on enabling permissions and to "
    "get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)

args = sys.argv[1:]
if args == ["--version"]:
    print(os.environ.get("FAKE_NCU_BANNER", BANNER))
    sys.exit(0)
if args[0] == "--query-metrics":  # the H200's metric base names, as the full-set header has them
    if os.environ.get("FAKE_QUERY") == "fail":
        print("==ERROR== Failed to query metrics.")
        sys.exit(1)
    with gzip.open(os.environ["FAKE_HEADER"], "rt") as f:
        header = f.readline().strip().strip('"').split('","')
    print('"Metric name","Metric type","Metric unit","Metric description","NVIDIA H200"')
    for base in sorted({h.split(".")[0] for h in header if "__" in h}):
        print(f'"{base}","Counter","","","1"')
    sys.exit(0)
mode_arg = args[args.index("--mode") + 1] if "--mode" in args else None
if mode_arg is not None:
    port = args[args.index("--port") + 1]
    meeting = Path(os.environ["FAKE_CALLS"]).parent
    waiting, attached = meeting / f"fake-ncu-{port}.waiting", meeting / f"fake-ncu-{port}.attached"
if mode_arg == "launch":
    with open(os.environ["FAKE_CALLS"], "a") as f:
        f.write(json.dumps(args) + "\n")
    program = args[args.index("--max-connections") + 2 :]
    if os.environ.get("FAKE_LAUNCH") == "die":
        sys.exit(1)
    waiting.write_text(str(os.getpid()))
    print(f"==PROF== Waiting for profiler to attach on ports {port}", flush=True)
    deadline = time.monotonic() + 120
    while not attached.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    sys.exit(subprocess.call(program))
kind = (
    "export"
    if "-i" in args
    else "targeted"
    if "--section" in args
    else "durations"
    if "--metrics" in args
    else "full"
)
mode = os.environ.get("FAKE_" + kind.upper(), "ok")
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(json.dumps(args) + "\n")
if mode == "refuse" and "--metrics" in args:
    print("==ERROR== Failed to find metric sm__imaginary.sum")
    sys.exit(1)
if kind == "export":
    page = args[args.index("--page") + 1]
    with gzip.open(os.environ["FAKE_RAW" if page == "raw" else "FAKE_DETAILS"], "rt") as f:
        text = f.read()
    if "--print-kernel-base" in args:  # stand-in mangled names: one per distinct demangled name
        import csv
        import io

        rows = list(csv.reader(io.StringIO(text)))
        top = next(i for i, row in enumerate(rows) if "Kernel Name" in row)
        col = rows[top].index("Kernel Name")
        for row in rows[top + 2 :]:
            if len(row) > col:
                row[col] = "_Z" + "".join(ch for ch in row[col] if ch.isalnum())
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL).writerows(rows)
        text = out.getvalue()
    sys.stdout.write(text)
    sys.exit(0)
out = args[args.index("-o") + 1]
program = args[args.index("-o") + 2 :]
if mode_arg == "attach":
    if not waiting.exists() or os.environ.get("FAKE_ATTACH") == "fail":
        print("==ERROR== No attachable process found on host 127.0.0.1.")
        sys.exit(1)
    attached.write_text("")
    launcher = int(waiting.read_text())
print(f"==PROF== Connected to process 4242 ({program[0] if program else 'attached'})", flush=True)
if mode == "perm":
    print(PERMISSION)
    sys.exit(1)


class Launcher:
    """The attached program: the launcher's process, waited for by polling."""

    pid = launcher if mode_arg == "attach" else 0

    def wait(self) -> int:
        while Path(f"/proc/{launcher}").exists() and "Z" not in _state(launcher):
            time.sleep(0.02)
        return 0

    def terminate(self) -> None:
        pass  # ncu's attached run leaves the program running


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return stat[stat.rfind(")") + 2 :].split()[0]


child = Launcher() if mode_arg == "attach" else subprocess.Popen(program)


def shut_down(signum: int, frame: object) -> None:
    """As ncu 2025.3.1 answers SIGTERM (tools/probes/probe_ncu_stop.py): end the program, keep
    the launches profiled so far."""
    print("==PROF== Trying to shutdown target application", flush=True)
    child.terminate()
    Path(out + ".ncu-rep").write_bytes(b"fake report")
    print("==PROF== Report: " + out + ".ncu-rep", flush=True)
    sys.exit(0)


stall_after = int(os.environ.get("FAKE_STALL_AFTER", "-1")) if kind == "targeted" else -1
if mode != "hang":
    signal.signal(signal.SIGTERM, shut_down)
if stall_after >= 0:  # ncu finishes its report on SIGINT too (runner.stop_group sends it first)
    signal.signal(signal.SIGINT, shut_down)
if mode == "hang":
    with open(os.environ["FAKE_PIDS"], "w") as f:
        f.write(f"{os.getpid()} {child.pid}\n")
    time.sleep(600)
code = child.wait()
if mode == "nogpu":
    print("RuntimeError: Found no NVIDIA driver on your system.")
    print("==WARNING== No kernels were profiled.")
    print("==ERROR== The application returned an error code (1).")
    sys.exit(1)
if mode == "nokernels":
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
names = ["kernel_0", "kernel_1", "kernel_2"]
kernels = args[args.index("-k") + 1] if "-k" in args else ""
if kernels.startswith("regex:^("):  # ncu prints names in the filter's base
    import re

    names = [re.sub(r"\\(.)", r"\1", n) for n in kernels[len("regex:^(") : -2].split("|")]
if os.environ.get("FAKE_NAMES") == "other":
    names = [f"unplanned_kernel_{i}" for i in range(3)]
# a program that fails under ncu fails before its planned launches (else nsdiag ends it first)
for i in range(0 if mode == "appfail" else int(os.environ.get("FAKE_KERNELS", "3"))):
    if i == stall_after:
        break
    name = names[i % len(names)]
    print(f'==PROF== Profiling "{name}" - {i}: 0%....50%....100% - 38 passes', flush=True)
if stall_after >= 0:
    if "FAKE_PIDS" in os.environ:
        Path(os.environ["FAKE_PIDS"]).write_text(f"{os.getpid()}\n")
    time.sleep(600)
if mode == "appfail" or code:
    print(f"==ERROR== The application returned an error code ({code or 3}).")
Path(out + ".ncu-rep").write_bytes(b"fake report")
print("==PROF== Disconnected from process 4242")
print("==PROF== Report: " + out + ".ncu-rep")
sys.exit(code or (3 if mode == "appfail" else 0))
