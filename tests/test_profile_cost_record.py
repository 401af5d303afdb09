"""The cost of `nsdiag profile` as recorded on the H200 (issue 38; docs/profile-status.md, the
README): the median and the worst ratio over the nine programs, and the verdicts' agreement with
the plan reached inside the region, read from the measurement logs, are the figures the docs give
and meet the issue's bar."""

from __future__ import annotations

import re
import statistics

from tests.conftest import DATA

LOGS = DATA / "idioms" / "logs"
ROOT = DATA.parents[1]
LINE = re.compile(r"^(\w+)\s+([\d.]+)s\s+([\d.]+)s\s+([\d.]+)x\s+p1 (.*)$")


def _ratios(log: str) -> dict[str, tuple[float, bool]]:
    """program -> (ratio, stopped at the call's limit) from the benchmark's summary lines."""
    out = {}
    for line in (LOGS / log).read_text().splitlines():
        m = LINE.match(line)
        if m:
            out[m[1]] = (float(m[4]), "STOPPED" in m[5])
    return out


def test_the_nine_programs_profile_within_the_issues_bar() -> None:
    before, after = _ratios("measure_cost_Q.txt"), _ratios("measure_cost_R.txt")
    assert before["loader_cnn"][1]  # stopped by its call's limit: measured again in R
    merged = {**{k: v for k, v in before.items() if not v[1]}, **after}
    assert len(merged) == 9 and not any(stopped for _, stopped in merged.values())
    ratios = [r for r, _ in merged.values()]
    median, worst = statistics.median(ratios), max(ratios)
    assert median <= 3.0 and worst <= 5.0
    status = (ROOT / "docs" / "profile-status.md").read_text()
    readme = (ROOT / "README.md").read_text()
    assert f"Median **{median:.2f}x**, worst {worst:.2f}x" in status
    assert f"median {median:.2f}x" in readme and f"{min(ratios):.2f}-{worst:.2f}x" in readme


def test_the_verdicts_agree_with_the_plan_reached_inside_the_region() -> None:
    text = (LOGS / "measure_cost_R.txt").read_text()
    pairs = [(int(a), int(b)) for a, b in re.findall(r"equal on (\d+) of (\d+) signatures", text)]
    assert len(pairs) == 2
    equal, compared = map(sum, zip(*pairs, strict=True))
    assert compared >= 50 and equal / compared >= 0.95
    assert f"{equal} of {compared} in all" in (ROOT / "docs" / "profile-status.md").read_text()
