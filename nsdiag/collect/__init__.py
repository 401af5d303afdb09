"""Running the profilers: the only package that starts processes.

`nsdiag profile`, in the order it runs:
    options.py      what a run is asked to do, its progress protocol, its result
    program.py      the program to profile and its environment
    tools.py        finding ncu and nsys; argv.py builds their command lines (pure)
    run_state.py    the state a run's steps share, and the step runner (runner.py runs a command)
    phase1.py       the timeline (nsys), or kernel durations (ncu) without a working nsys
    signatures.py   phase 1's launches grouped into kernel signatures and duration groups
    selection.py    which signatures to profile (coverage)
    rounds.py       the ncu runs that reach them (ncu's filter replayed, the cost model)
    plan.py         the plan: signatures, rounds, notes, its JSON; nvtx_filter.py cuts to a range
    cost.py         passes and seconds per pass measured on the H200; phase 2's estimate
    budget.py       --budget: the plan's most valuable signatures that fit
    phase2.py       the targeted ncu runs (metric_set.py: the rules' metrics this GPU offers)
    exports.py      the reports' CSV pages
    finish.py       one Session, weighted by the timeline (weights.py), saved with its status
    profile.py      the steps in order, failures kept as a partial session (session_dir.py)
    interruption.py what SIGINT or SIGTERM in any phase leaves recorded
    breakdown.py    where the time went (status.json's `breakdown`)
    dry_run.py      the commands a run would start
Also: doctor.py (can this machine profile?) and nsys_export.py (a .nsys-rep to SQLite, for
nsdiag.load).
"""
