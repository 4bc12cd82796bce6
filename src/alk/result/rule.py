"""The rule that turns a run into an exit code, for CI: by default every scored repeat must pass;
with `--fail-under X`, each scenario's pass rate (or, with `--fail-under-lower`, the lower bound
of its 95% Wilson interval) must be at least X. `alk.result.verdict` applies it to a run.

Whatever the rule, a void never passes it: a scenario with no scored repeat, or any void
repeat, makes a run that no scenario failed void (exit 3), so that a worker cannot turn a
failure into a green build by getting itself voided (docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from alk.errors import UsageError
from alk.stats.records import ScenarioStats


class Judged(Protocol):
    """What the rule reads of a scenario's result (`ScenarioResult`): its statistics."""

    @property
    def stats(self) -> ScenarioStats: ...


@dataclass(frozen=True, slots=True)
class PassRule:
    """`fail_under`: None for "every scored repeat passes"; else the least pass rate a scenario
    may have. `lower`: judge the lower bound of the rate's 95% Wilson interval instead, so
    that 20/20 does not clear 0.95 (its bound is 0.84) and the threshold is one the rate is
    known to meet."""

    fail_under: float | None = None
    lower: bool = False

    def check(self) -> PassRule:
        # NaN fails both comparisons, so it is refused too.
        if self.fail_under is not None and not 0.0 <= self.fail_under <= 1.0:
            raise UsageError(f"--fail-under {self.fail_under}: expected a pass rate from 0 to "
                             "1, such as 0.95")
        if self.lower and self.fail_under is None:
            raise UsageError("--fail-under-lower judges the lower bound against --fail-under: "
                             "give both, e.g. --fail-under 0.9 --fail-under-lower")
        return self

    def describe(self) -> str:
        """The rule in one sentence, for every report."""
        if self.fail_under is None:
            judged = "every scored repeat must pass (a flaky scenario fails)"
        elif self.lower:
            judged = (f"each scenario's pass rate, at the lower bound of its 95% interval, "
                      f"must be at least {self.fail_under:.1%}")
        else:
            judged = f"each scenario's pass rate must be at least {self.fail_under:.1%}"
        return f"{judged}; else a void repeat makes the run void"

    def tag(self) -> str:
        """The rule in a few characters, for a listing: "" for the default."""
        if self.fail_under is None:
            return ""
        return f"{'lower bound' if self.lower else 'rate'} ≥ {self.fail_under:.1%}"

    def judged(self, scenario: Judged) -> float | None:
        """The number the rule compares with its threshold: the pass rate, or its lower bound
        (None when nothing was scored)."""
        stats = scenario.stats
        if stats.pass_rate is None:  # nothing scored
            return None
        if self.lower and stats.ci is not None:
            return stats.ci[0]
        return stats.pass_rate

    def holds(self, scenario: Judged) -> bool | None:
        """Does the scenario meet the rule? None when it scored nothing: no rule holds then."""
        counts = scenario.stats.counts
        if counts.scored == 0:
            return None
        if self.fail_under is None:
            return counts.passed == counts.scored
        value = self.judged(scenario)
        return value is not None and value >= self.fail_under
