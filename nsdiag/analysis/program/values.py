"""The values a program rule's `message` and `fix` templates may use, for its documentation.

Each analysis declares its values (and their meanings) in its own record, next to its code
(analysis/program/record.py, collected in registry.PROGRAM_ANALYSES); the values every timeline
finding shares are timeline/findings.py's RANGE_VALUES. This module only looks them up for
`nsdiag rules show` (render/ruledoc.py); nothing in the analyses imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from nsdiag.analysis.program.registry import PROGRAM_ANALYSES

if TYPE_CHECKING:
    from nsdiag.analysis.rules.spec import RuleSpec


def template_names(rule: RuleSpec) -> Mapping[str, str]:
    """The values a program rule's templates may name, with what each means."""
    analysis = PROGRAM_ANALYSES.get(rule.analysis)
    return analysis.values if analysis is not None else {}
