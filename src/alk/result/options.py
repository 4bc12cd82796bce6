"""What a run is asked (`RunOptions`): how many repeats of which scenarios, the seed, a timeout
and limit overrides, adaptive repeats (`Adaptive`, with why a scenario stops: `StopReason`), and
the rule that sets the exit code. The one record of it: the API and the CLI make it, the plan is
made from it, and the journal and a run of several lanes' group.json keep it, so that a resumed
run is planned again exactly; result.json keeps what it resolved to (`Settings` in
`alk.result.document`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping

from alk.errors import UsageError
from alk.estimate import Z_95
from alk.result.rule import PassRule

# Adaptive repeats (`alk run --repeats auto`, alk.execute.adaptive): the options, and why a
# scenario stopped.
MAX_REPEATS = 100
CI_WIDTH = 0.2
# Small enough that a flaky scenario stops after a handful of repeats, large enough that a
# round keeps `-j 8` busy over a few scenarios.
ROUND_SIZE = 5


class StopReason(StrEnum):
    """Why an adaptive run stopped sampling a scenario (`Execution.stopped`)."""

    FLAKY = "flaky"  # a pass and a scored failure seen
    CI_WIDTH = "ci_width"  # the 95% Wilson interval narrower than the target
    MAX_REPEATS = "max_repeats"  # the maximum ran, void repeats included
    INTERRUPTED = "interrupted"  # the run stopped (Ctrl-C, a signal) before the rule did


@dataclass(frozen=True, slots=True)
class Adaptive:
    """An adaptive run's options: at most `max_repeats` a scenario, stopping once the 95% Wilson
    interval is narrower than `ci_width`, in rounds of `round_size` repeats."""

    max_repeats: int = MAX_REPEATS
    ci_width: float = CI_WIDTH
    round_size: int = ROUND_SIZE

    def check(self) -> Adaptive:
        """These options, or a UsageError that says how to fix them. Checked where a run is
        planned, not where a record is read: a saved run stays readable if the rules change."""
        if self.max_repeats < 1:
            raise UsageError(f"--max-repeats must be at least 1, got {self.max_repeats}")
        if not 0 < self.ci_width < 1:
            raise UsageError(f"--ci-width must be between 0 and 1 (the width of an interval "
                             f"of pass rates), got {self.ci_width}")
        if self.round_size < 1:
            raise UsageError(f"the round size must be at least 1, got {self.round_size}")
        # The narrowest interval n repeats can give is that of n agreeing ones, z²/(n + z²).
        narrowest = Z_95**2 / (self.max_repeats + Z_95**2)
        if narrowest >= self.ci_width:
            needed = math.floor(Z_95**2 * (1 - self.ci_width) / self.ci_width) + 1
            raise UsageError(
                f"--ci-width {self.ci_width} is out of reach of --max-repeats "
                f"{self.max_repeats}: even {self.max_repeats} agreeing repeats give a 95% "
                f"interval {narrowest:.3f} wide; raise --max-repeats to at least {needed}, "
                "or ask for a wider interval")
        return self


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What a run is asked, None (or empty) where the lane decides: `repeats` a scenario (the
    lane's `repeats`; with `adaptive`, the maximum is the adaptive one's), `scenarios` to run
    (every one), the run `seed` (drawn when the run starts, then kept), `timeout_s` a repeat
    (the lane's), `limits` over the lane's [limits], and the `rule` that sets the exit code,
    never what is measured."""

    repeats: int | None = None
    scenarios: tuple[str, ...] = ()
    seed: int | None = None
    timeout_s: float | None = None
    limits: Mapping[str, int] = field(default_factory=dict)
    adaptive: Adaptive | None = None
    rule: PassRule = PassRule()

    def __post_init__(self) -> None:
        # Whatever sequence and mapping they were given, kept as a tuple and a dict of their own.
        object.__setattr__(self, "scenarios", tuple(self.scenarios))
        object.__setattr__(self, "limits", dict(self.limits or {}))

    def to_json(self) -> dict[str, Any]:
        """As the journal and group.json hold it: flat, the adaptive options and the rule as
        objects."""
        return {"repeats": self.repeats, "scenarios": list(self.scenarios), "seed": self.seed,
                "timeout_s": self.timeout_s, "limits": dict(self.limits),
                "adaptive": (dataclasses.asdict(self.adaptive)
                             if self.adaptive is not None else None),
                "rule": dataclasses.asdict(self.rule)}

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> RunOptions:
        """The options a journal's or group.json's record holds (a rule of None, as a rerun's
        journal has it, is the default rule). Raises TypeError or ValueError for a record that
        is not one."""
        adaptive, rule = record.get("adaptive"), record.get("rule")
        return cls(repeats=record["repeats"], scenarios=tuple(record["scenarios"]),
                   seed=record["seed"], timeout_s=record["timeout_s"],
                   limits=dict(record["limits"]),
                   adaptive=Adaptive(**adaptive) if adaptive is not None else None,
                   rule=PassRule(**rule) if rule else PassRule())
