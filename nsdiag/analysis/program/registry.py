"""Program-level analyses, each declared once: the registry of their records.

Every analysis is declared once, as a `ProgramAnalysis` record (analysis/program/record.py) in
analysis/program/analyses.py: its name, its function `analysis(rule, ctx)` (the rule and the
ProgramContext built once per diagnosis) by module and name, what the session must hold, the
nsys tables it reads, the values its rule's message and fix templates may use, its parameters
with their defaults, what it claims before other analyses and an optional hold-back check.
PROGRAM_ANALYSES collects the records; the rule loader (analysis/ruleset.py) checks each
program rule against its analysis's record (its name, its templates' values, its `[params]`
keys), and the diagnosis runs the rules' analyses (program/dispatch.py). This module and the
records import no analysis module (nor pandas): an analysis's module is imported when it first
runs, so loading and listing the rules (`nsdiag rules`) stays light.

To add a program analysis:
1. Write `my_analysis(rule, ctx) -> list[Finding]` in a module of analysis/program/ (a timeline
   analysis in timeline/, reporting through timeline/findings.py's per_range and make_finding).
   Read its thresholds with `params = MY_ANALYSIS.params_of(rule)` (the defaults overlaid by the
   rule file's `[params]`; never a literal default at the call site) and format the finding's
   message and fix with `MY_ANALYSIS.text(rule, values)`, importing MY_ANALYSIS from
   analyses.py.
2. In analyses.py, declare `MY_ANALYSIS = ProgramAnalysis(name="my_analysis",
   function_ref="nsdiag.analysis.program.my_module:my_analysis", ...)`: every value it gives
   the templates and every parameter, each with a one-line meaning; the tables it needs;
   `claims_before` when other analyses must count only the time it leaves them (say how in
   timeline/attribution.py, and make them subtract it); `held_back_ref` when a finding large
   enough can still be withheld with a reason.
3. Add the record to PROGRAM_ANALYSES below, and a rule file rules/NSDxxx-slug.toml with
   scope = "program", analysis = "my_analysis", its `[params]` and templates (a new cause slug
   goes in the cause table, analysis/records/causes.py: docs/architecture.md, "How to add a
   cause").
4. tests/test_program_registry.py then checks the rule against the record, and needs a recording
   under tests/data on which the analysis gives every value it declares (add it to RECORDINGS
   there).
"""

from __future__ import annotations

from nsdiag.analysis.program.analyses import (
    CPU_BOUND,
    EAGER_ATTENTION,
    EXPOSED_COMMUNICATION,
    FUSION_CANDIDATES,
    IDLE_OTHER,
    LAUNCH_BOUND,
    LAYOUT_CONVERSIONS,
    NO_COPY_COMPUTE_OVERLAP,
    PAGEABLE_MEMCPY,
    PER_PARAMETER_OPTIMIZER,
    RANK_IMBALANCE,
    SYNC_BOUND,
)
from nsdiag.analysis.program.record import ProgramAnalysis

PROGRAM_ANALYSES: dict[str, ProgramAnalysis] = {
    a.name: a
    for a in (
        EAGER_ATTENTION,
        FUSION_CANDIDATES,
        LAYOUT_CONVERSIONS,
        PAGEABLE_MEMCPY,
        NO_COPY_COMPUTE_OVERLAP,
        SYNC_BOUND,
        PER_PARAMETER_OPTIMIZER,
        LAUNCH_BOUND,
        CPU_BOUND,
        IDLE_OTHER,
        RANK_IMBALANCE,
        EXPOSED_COMMUNICATION,
    )
}
