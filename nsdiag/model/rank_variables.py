"""The environment variables launchers set to tell a process which rank it is, listed once: for
`nsdiag profile`, which worker of a launch to wrap ncu around (collect/rank_exec.py), and for the
readers, which rank a report was recorded on (readers/nsys_environment.py keeps these variables
of the environment nsys recorded, readers/ranks.py reads the rank from them).

Imports only the standard library: rank_exec runs it in every worker of a launch.

Precedence. Launchers nest, and a process inherits the variables of every launcher above it:
`srun torchrun ...` gives each worker the SLURM_PROCID of its node's torchrun, `mpirun` inside
a Slurm job gives its ranks the SLURM_PROCID of the step that started it, MPICH's mpiexec under
`srun --mpi=pmix` leaves srun's PMIX_RANK beside its own PMI_RANK. The launcher nearest the
process started it, so its variable is the rank: torchrun's RANK first (torchrun runs inside
the others, not above them); then the MPI libraries', their own before the generic ones: Open
MPI's OMPI_COMM_WORLD_RANK, PMI_RANK (MPICH's and Intel MPI's hydra, which set no other),
PMIX_RANK (srun --mpi=pmix; Open MPI 5 sets it beside its own); SLURM_PROCID last, as srun is
the outermost launcher whenever there are several. The variables one launcher sets agree, so
the order decides only between nested launchers.
"""

from __future__ import annotations

from collections.abc import Mapping

GLOBAL_RANK = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
# Also kept from a recorded environment: the rank on its node and the number of ranks.
LOCAL_RANK_AND_SIZE = (
    "LOCAL_RANK",
    "WORLD_SIZE",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
)
RANK_VARIABLES = (*GLOBAL_RANK, *LOCAL_RANK_AND_SIZE)
MAX_RANK = 10**9  # ranks are below it; a larger number is no rank (and overflows int64 tables)
RANK_DIGITS = len(str(MAX_RANK)) - 1  # the most digits a rank has


def global_rank(env: Mapping[str, object]) -> int | None:
    """The rank the first variable of GLOBAL_RANK that holds one gives (a whole number below
    MAX_RANK, as text or int), None when none does."""
    for name in GLOBAL_RANK:
        value = env.get(name)
        text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
        if text.isascii() and text.isdigit() and len(text) <= RANK_DIGITS:
            return int(text)
    return None
