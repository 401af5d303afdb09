"""One program analysis, declared once: `ProgramAnalysis`.

The records are in analysis/program/analyses.py, each naming its function by module and name
(`function_ref`, "nsdiag.analysis.program.fusion:fusion_candidates"): the function stays in its
module, which imports its record, and is imported when the analysis first runs (`function`).
analysis/program/registry.py collects the records into one dict, which the rule loader
(analysis/ruleset.py) checks program rules against and the diagnosis dispatches on
(program/dispatch.py); neither the loader nor `nsdiag rules` imports an analysis module
(pandas, numpy) to do so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from nsdiag.analysis.records.findings import Finding
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.analysis.rules.template import render
from nsdiag.lazy import resolve

if TYPE_CHECKING:  # annotations only: the context holds pandas tables, the rule loader none
    from nsdiag.analysis.program.context import ProgramContext

# What the session must hold for the analysis to run: kernels (ncu data), a timeline (nsys),
# launches (either: the analysis works on names and durations alone, better with ncu data), or
# ranks (a timeline of two ranks or more: analysis/program/ranks.py).
Needs = Literal["kernels", "launches", "timeline", "ranks"]
# The nsys tables an analysis reads besides the GPU activities: an export without one
# (readers/nsys_sqlite.py lists it in meta.missing_tables) cannot tell absent from unknown.
Table = Literal["kernels", "api_calls"]
TABLE_WORDS: dict[str, str] = {"kernels": "kernel table", "api_calls": "CUDA API table"}

SAVED_MS = "The time the fix would save in the analysed region, ms."
MIN_IMPACT = "The smallest saving reported, as a share of the analysed region's wall time."
# The template values every timeline finding has, besides its analysis's own
# (timeline/findings.py range_values gives them).
RANGE_VALUES: dict[str, str] = {
    "range_label": "The NVTX range as a message names it (\"NVTX range 'step'\"), or 'work "
    "outside NVTX ranges'.",
    "range": "The NVTX range's name ('' outside ranges).",
    "device": "The GPU's device id.",
    "saved_ms": SAVED_MS,
}


@dataclass(frozen=True)
class Param:
    """A threshold a program rule's `[params]` may set: its default and what it means."""

    default: float
    meaning: str


@dataclass(frozen=True)
class ProgramAnalysis:
    """What the registry, the rule loader and the diagnosis know of one program analysis."""

    name: str  # what a rule file's `analysis = "..."` names
    # "module:function": `function(rule, ctx) -> list[Finding]`, in a module of analysis/program/
    function_ref: str
    needs: Needs
    # The values the analysis gives its rule's `message` and `fix` templates (numbers in the unit
    # their name says, `_ms`, `_us`, `_mb`, `_pct`; a text value is a few words computed in code
    # where the wording depends on what was found), each with its meaning.
    values: Mapping[str, str]
    params: Mapping[str, Param]  # the rule's `[params]`: a key not here is refused at load
    tables: tuple[Table, ...] = ()
    # Analyses that count only what this one leaves: the time this one claims (saved by its
    # fix) is taken out of theirs first, so that no saving is counted twice
    # (timeline/attribution.py says how the time is split).
    claims_before: tuple[str, ...] = ()
    # "module:function" of a check `(rule, ctx) -> str | None` that holds back a finding whose
    # size qualifies when its evidence does not, and says why (listed with the skipped rules:
    # never dropped silently); None: it does not hold back.
    held_back_ref: str | None = None

    @property
    def function(self) -> Callable[[RuleSpec, ProgramContext], list[Finding]]:
        """The analysis function (its module imported on first use)."""
        return resolve(self.function_ref)  # type: ignore[no-any-return]

    @property
    def held_back(self) -> Callable[[RuleSpec, ProgramContext], str | None] | None:
        """The hold-back check, or None."""
        return None if self.held_back_ref is None else resolve(self.held_back_ref)

    @property
    def defaults(self) -> dict[str, float]:
        return {key: float(param.default) for key, param in self.params.items()}

    def params_of(self, rule: RuleSpec) -> dict[str, float]:
        """The thresholds the analysis runs with: its defaults, overlaid by the rule's `[params]`
        (the loader refuses a key the analysis does not declare; so does this)."""
        unknown = sorted(set(rule.params) - set(self.params))
        if unknown:
            raise ValueError(f"{rule.id}: analysis {self.name} has no parameter(s) {unknown}")
        return {**self.defaults, **rule.params}

    def text(self, rule: RuleSpec, values: Mapping[str, Any]) -> tuple[str, str]:
        """A finding's message and fix: the rule's templates over the analysis's values, which
        must be exactly the declared ones (a mismatch is a bug in nsdiag)."""
        if values.keys() != self.values.keys():
            odd = sorted(values.keys() ^ self.values.keys())
            raise ValueError(f"analysis {self.name} gives values {odd} unlike its record")
        return render(rule.message, values), render(rule.fix, values)
