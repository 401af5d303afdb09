"""A stand-in nsys for the tests (conftest.py's `fakes`): `profile` logs its argv, runs the program
and writes a report; `export` writes the recorded SQLite database.

Environment: FAKE_CALLS (argv log), FAKE_SQLITE (a gzipped recorded export), FAKE_NSYS=mode (ok,
hang, noimport, compile: with --pytorch=functions-trace the program fails as torch.compile did
under it on the H200, tests/data/idioms/logs/tl_decode_static.log), FAKE_PIDS (where a hanging
run writes its pids).
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.3.1.0-253666467616v0")
    sys.exit(0)
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(json.dumps(["nsys", *args]) + "\n")
mode = os.environ.get("FAKE_NSYS", "ok")
out = args[args.index("-o") + 1]
if args[0] == "export":
    with gzip.open(os.environ["FAKE_SQLITE"], "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    sys.exit(0)
child = subprocess.Popen(args[args.index("-o") + 2 :])
if mode == "hang":
    with open(os.environ["FAKE_PIDS"], "w") as f:
        f.write(f"{os.getpid()} {child.pid}\n")
    import time

    time.sleep(600)
code = child.wait()
if mode == "compile" and "--pytorch=functions-trace" in args:
    print('  File "<frozen importlib._bootstrap>", line 1324, in _find_and_load_unlocked')
    print(
        "torch._dynamo.exc.InternalTorchDynamoError: ModuleNotFoundError: "
        "No module named 'nsys_nvtx_annotations'"
    )
    code = 1  # the program's traceback; nsys writes its report all the same
if mode == "noimport":
    Path(out + ".qdstrm").write_bytes(b"raw")
    print("Importer error status: The importer binary and its dependencies were not found.")
    sys.exit(0)
Path(out + ".nsys-rep").write_bytes(b"fake")
# nsys 2025.3.1 on the H200 writes the report, says nothing of the program's failure and exits
# with the program's code (tools/verify_profile_h200.sh, tests/data/profile/verify-profile.log)
print("Generated:\n    " + out + ".nsys-rep")
sys.exit(code)
