"""The launchers' rank variables, listed once (model/rank_variables.py): their precedence under
nested launchers, what a recorded environment keeps, and rank_exec's light imports."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from nsdiag.model.meta import SessionMeta
from nsdiag.model.rank_variables import RANK_VARIABLES, global_rank
from nsdiag.readers.nsys_environment import recording
from nsdiag.readers.ranks import env_rank
from nsdiag.readers.sqlite_query import schema_of


@pytest.mark.parametrize(
    ("env", "rank"),
    [
        ({"SLURM_PROCID": "7"}, 7),  # srun alone
        ({"SLURM_PROCID": "1", "RANK": "5", "LOCAL_RANK": "1"}, 5),  # srun torchrun
        (
            {"SLURM_PROCID": "0", "OMPI_COMM_WORLD_RANK": "3", "PMIX_RANK": "3"},
            3,
        ),  # mpirun in a job
        (
            {"SLURM_PROCID": "0", "PMIX_RANK": "0", "PMI_RANK": "2"},
            2,
        ),  # hydra under srun --mpi=pmix
        ({"PMIX_RANK": "4"}, 4),
        ({"RANK": "x", "SLURM_PROCID": "4"}, 4),  # not a number: the next variable
        ({"RANK": "\u00b2"}, None),  # a digit to str.isdigit, not to int()
        ({"RANK": "1" * 10}, None),  # no rank has ten digits
        ({"RANK": 3}, 3),  # a session's rank_env holds numbers
        ({"RANK": True}, None),
        ({"LOCAL_RANK": "1", "WORLD_SIZE": "2"}, None),  # the rank on a node is not the rank
        ({}, None),
    ],
)
def test_the_nearest_launcher_gives_the_rank(env: dict[str, object], rank: int | None) -> None:
    assert global_rank(env) == rank


def test_a_report_keeps_the_rank_variables_of_its_environment_and_nothing_else() -> None:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE META_DATA_CAPTURE (name TEXT, value TEXT)")
    env = ";".join(f"{name}={i}" for i, name in enumerate(RANK_VARIABLES))
    con.execute(
        "INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_ENVIRONMENT_VARIABLE', ?)",
        (f"HOME=/root;API_TOKEN=12345;{env};NOT_RANK=9",),
    )
    _, _, found = recording(con, schema_of(con))
    assert found == {name: i for i, name in enumerate(RANK_VARIABLES)}
    assert env_rank(SessionMeta(rank_env=found)) == 0  # RANK, the first of them


def test_rank_exec_imports_no_pandas() -> None:
    """It runs as every worker of a launch, before the worker's own program."""
    code = (
        "import sys, nsdiag.collect.rank_exec; print(sorted({'pandas', 'numpy'} & {*sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
