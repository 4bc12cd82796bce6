"""Where each statistic of a run means something: the rule every report applies before it
shows one (docs/reports.md, "Statistics where they mean something").

- the ICC, its design effect and the clustered interval treat the scenarios as a sample of
  tasks: they need at least `MIN_SCENARIOS` scenarios with `MIN_REPEATS` scored repeats each;
- consistency compares a scenario's repeats with each other: it needs a scenario with
  `MIN_REPEATS` scored repeats, and a scenario is listed on its own only with as many;
- fault robustness needs faulted scenarios (the statistics record is None without them).
"""

from __future__ import annotations

from typing import Sequence

from alk.result.document import RunDocument, ScenarioResult

MIN_SCENARIOS = 3
MIN_REPEATS = 5


def _scored(scenarios: Sequence[ScenarioResult]) -> list[int]:
    return [s.stats.counts.scored for s in scenarios if s.stats.counts.scored]


def clustered_shown(scenarios: Sequence[ScenarioResult]) -> bool:
    """Do the ICC, the design effect and the clustered interval mean something here?"""
    return sum(1 for n in _scored(scenarios) if n >= MIN_REPEATS) >= MIN_SCENARIOS


def consistency_shown(scenarios: Sequence[ScenarioResult]) -> bool:
    """Does consistency mean something here: a scenario with enough repeats to compare?"""
    return max(_scored(scenarios), default=0) >= MIN_REPEATS


def withheld(doc: RunDocument) -> list[str]:
    """The figures the rule withholds from this run, each with why."""
    scenarios = doc.scenarios
    reasons = []
    if not clustered_shown(scenarios):
        enough = sum(1 for n in _scored(scenarios) if n >= MIN_REPEATS)
        reasons.append(f"ICC, design effect and clustered interval (they need "
                       f"{MIN_SCENARIOS} scenarios of {MIN_REPEATS}+ scored repeats; "
                       f"the run has {enough})")
    if not consistency_shown(scenarios):
        most = max(_scored(scenarios), default=0)
        reasons.append(f"consistency (it needs a scenario of {MIN_REPEATS}+ scored repeats; "
                       f"the most here is {most})")
    if doc.aggregate.fault_robustness is None:
        reasons.append("fault robustness (no faulted scenario to set beside its twin)")
    return reasons
