"""Adaptive repeats (`alk run --repeats auto`): each scenario is sampled until its verdict is
settled, so that a stable scenario costs few repeats and an unsettled one gets enough.

The rule, evaluated per scenario on its scored repeats (void ones settle nothing):
- `flaky`: a pass and a scored failure have both been seen: the verdict can no longer change.
  Not for a scenario whose model turns are drawn from weighted choices: it is meant to vary, so
  both outcomes say nothing new, and what is settled is its rate (the next rule);
- `ci_width`: the 95% Wilson interval of its pass rate is narrower than the target;
- `max_repeats`: the maximum has run, void repeats included (a worker must not keep a scenario
  running forever by voiding).

Since `flaky` comes first, the width rule only ever meets scenarios whose scored repeats all
agree, where the Wilson width is z²/(n + z²), a function of n alone: at the default 0.2 it asks
for 16 agreeing scored repeats.

Stopping is decided in fixed rounds, never as results trickle in, so that a run gives the same
repeats at any `-j` and on any engine: each round runs the next `round_size` repeats of every
scenario still open as one batch, then evaluates the rule once per scenario on all it has. The
rule is not evaluated repeat by repeat within a round: the round's other repeats have run by
then, and would either be thrown away (a cost, and a bias of its own) or kept beside a stopping
point that no longer describes the data; the price is at most `round_size - 1` repeats a
scenario. Seeds stay `repeat_seed(seed, scenario, n)`, and the state of a resumed run is
re-derived from its finished repeats, so that it continues exactly as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from alk.estimate import wilson_interval
from alk.records import Outcome, Plan, RepeatResult, RepeatSpec
from alk.result.options import Adaptive, StopReason

__all__ = ["Sampling", "stop_reason"]


def stop_reason(passed: int, failed: int, ran: int, *, max_repeats: int,
                ci_width: float, sampled: bool = False) -> StopReason | None:
    """Why a scenario stops now, or None to go on: `passed` and `failed` count its scored
    repeats, `ran` every repeat it ran (void ones too); `sampled`: its model turns are drawn
    from weighted choices, so only its rate's interval or the maximum settle it."""
    if passed and failed and not sampled:
        return StopReason.FLAKY
    scored = passed + failed
    if scored:
        low, high = wilson_interval(passed, scored)
        if high - low < ci_width:
            return StopReason.CI_WIDTH
    if ran >= max_repeats:
        return StopReason.MAX_REPEATS
    return None


@dataclass
class _Scenario:
    items: dict[int, RepeatSpec]  # repeat number -> its item, up to the maximum
    outcomes: dict[int, Outcome]  # repeat number -> outcome, as repeats finish
    round: int = 1  # the round now sampled (1-based)
    passed: int = 0  # in the rounds evaluated so far
    failed: int = 0
    sampled: bool = False  # its model turns are drawn from weighted choices


class Sampling:
    """Where each scenario of an adaptive run stands, from the repeats it has finished (a
    resumed run's included): which are settled and why (`stopped`), and what runs next."""

    def __init__(self, plan: Plan, adaptive: Adaptive, done: Iterable[RepeatResult] = ()):
        if plan.repeats != adaptive.max_repeats:
            raise ValueError(f"an adaptive plan holds max_repeats ({adaptive.max_repeats}) "
                             f"repeats a scenario, this one {plan.repeats}")
        self.adaptive = adaptive
        self.stopped: dict[str, str] = {}  # scenario -> StopReason, once settled
        self._asked: set[tuple[str, int]] = set()  # every repeat a round has asked for
        self._order = {(item.scenario.id, item.repeat): place
                       for place, item in enumerate(plan.items)}
        self._scenarios = {scenario.id: _Scenario({}, {}, sampled=scenario.sampled)
                           for scenario in plan.scenarios}
        for item in plan.items:
            self._scenarios[item.scenario.id].items[item.repeat] = item
        for result in done:
            self.add(result)

    def add(self, result: RepeatResult) -> None:
        self._scenarios[result.scenario].outcomes[result.repeat] = result.outcome

    def next_round(self) -> list[RepeatSpec]:
        """Settles every scenario whose round is complete, then the repeats still to run of the
        open scenarios' rounds, in the plan's order; empty when every scenario is settled."""
        batch = self._settle()
        keys = {(item.scenario.id, item.repeat) for item in batch}
        if again := keys & self._asked:
            # An engine hands over every repeat it was given, or raises: going on would ask
            # for the same repeats forever.
            scenario, number = min(again)
            raise RuntimeError(f"the engine returned without repeat {number} of {scenario}")
        self._asked |= keys
        return sorted(batch, key=lambda item: self._order[(item.scenario.id, item.repeat)])

    def interrupt(self) -> None:
        """Settles what can be, and marks every scenario still open as cut short."""
        self._settle()
        for scenario_id in self._scenarios:
            self.stopped.setdefault(scenario_id, StopReason.INTERRUPTED)

    def _settle(self) -> list[RepeatSpec]:
        """Evaluates the rule on every complete round not yet evaluated; returns the repeats
        the open scenarios' rounds still need."""
        needed: list[RepeatSpec] = []
        for scenario_id, state in self._scenarios.items():
            if scenario_id in self.stopped:
                continue
            first, last = self._bounds(state)
            while all(n in state.outcomes for n in range(first, last + 1)):
                reason = self._evaluate(state, first, last)
                if reason is not None:
                    self.stopped[scenario_id] = reason
                    break
                state.round += 1
                first, last = self._bounds(state)
            else:
                needed += [state.items[n] for n in range(first, last + 1)
                           if n not in state.outcomes]
        return needed

    def _bounds(self, state: _Scenario) -> tuple[int, int]:
        size = self.adaptive.round_size
        return (state.round - 1) * size + 1, min(state.round * size, self.adaptive.max_repeats)

    def _evaluate(self, state: _Scenario, first: int, last: int) -> StopReason | None:
        """The rule at the end of a complete round, on every scored repeat up to its last."""
        outcomes = [state.outcomes[n] for n in range(first, last + 1)]
        passed = sum(outcome == Outcome.PASS for outcome in outcomes)
        scored = sum(outcome != Outcome.LANE_INFRA for outcome in outcomes)
        state.passed, state.failed = state.passed + passed, state.failed + scored - passed
        return stop_reason(state.passed, state.failed, last,
                           max_repeats=self.adaptive.max_repeats,
                           ci_width=self.adaptive.ci_width, sampled=state.sampled)
