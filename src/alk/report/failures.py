"""A scenario's failed and void repeats, grouped by what happened to them: the one grouping the
terminal's why-sections, report.md and report.html's "needs attention" all show, so that each
names the actual failure (its detail) the same way, not only its cause's advice.

Repeats that failed the same way are one group: the same outcome, cause and detail, details
that differ only in a duration counting as one (shown with the range: "10.1–10.4 s run").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from alk.records import Outcome, RepeatResult
from alk.result.document import ScenarioResult


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Repeats of one scenario that did not pass in the same way, in repeat order."""

    outcome: Outcome
    cause: str
    detail: str  # the first repeat's, each duration in it shown as the range the group spans
    repeats: tuple[RepeatResult, ...]

    @property
    def label(self) -> str:
        """"repeat 3", "repeats 4, 7", "repeats 1, 2, 3, 4, 5 … (20 in all)"."""
        numbers = [str(r.repeat) for r in self.repeats]
        if len(numbers) == 1:
            return f"repeat {numbers[0]}"
        more = f" … ({len(numbers)} in all)" if len(numbers) > 5 else ""
        return f"repeats {', '.join(numbers[:5])}{more}"

    @property
    def layer(self) -> str:
        """The layer it is blamed on, as the reports say it: a lane_infra repeat is void."""
        return "void" if self.outcome == Outcome.LANE_INFRA else str(self.outcome)


def failure_groups(scenario: ScenarioResult) -> list[FailureGroup]:
    """The scenario's repeats that did not pass, grouped; scored failures before void repeats
    (they explain a verdict better), then the commonest first, then the earliest."""
    groups: dict[tuple[Outcome, str, str], list[RepeatResult]] = {}
    for repeat in sorted(scenario.repeats, key=lambda r: r.repeat):
        if repeat.outcome != Outcome.PASS:
            key = (repeat.outcome, repeat.cause, _SECONDS.sub("# s", repeat.detail))
            groups.setdefault(key, []).append(repeat)
    made = [FailureGroup(outcome, cause, _with_ranges([r.detail for r in members]),
                         tuple(members))
            for (outcome, cause, _), members in groups.items()]
    return sorted(made, key=lambda g: (g.outcome == Outcome.LANE_INFRA, -len(g.repeats),
                                       g.repeats[0].repeat))


# A duration in a detail ("10.2 s run"): repeats that differ only in it failed the same way.
_SECONDS = re.compile(r"\d+(?:\.\d+)? s\b")


def _with_ranges(details: Sequence[str]) -> str:
    """One detail for repeats whose details differ only in their durations: each duration
    shown as the range it spans ("10.1–10.4 s")."""
    spans = [[(float(m.group()[:-2]), m.group()[:-2]) for m in _SECONDS.finditer(d)]
             for d in details]
    shown = iter(f"{min(values)[1]} s" if min(values)[0] == max(values)[0] else
                 f"{min(values)[1]}–{max(values)[1]} s" for values in zip(*spans))
    return _SECONDS.sub(lambda m: next(shown, m.group()), details[0])
