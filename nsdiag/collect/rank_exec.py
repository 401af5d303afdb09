"""One worker of a launcher: `python -m nsdiag.collect.rank_exec RANK NCU_ARGV_JSON -- COMMAND...`
execs ncu around COMMAND on rank RANK and COMMAND alone on every other rank (collect/launcher.py
says why). The rank is read from the variables launchers set (nsdiag/model/rank_variables.py:
this runs in every worker, so it imports no more than that)."""

from __future__ import annotations

import json
import os
import sys

from nsdiag.model.rank_variables import global_rank


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print(
            "usage: python -m nsdiag.collect.rank_exec RANK NCU_ARGV_JSON -- COMMAND...",
            file=sys.stderr,
        )
        return 2
    chosen, ncu, command = int(argv[0]), json.loads(argv[1]), argv[3:]
    full = [*ncu, *command] if global_rank(os.environ) == chosen else command
    os.execvp(full[0], full)  # replaces this process: the launcher sees the worker's exit code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
