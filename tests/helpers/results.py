"""Repeat results made by hand, outcome by outcome, for the statistics' tests.
"""

from __future__ import annotations

from alk.records import Outcome, RepeatResult

DEFAULT_CAUSE = {
    Outcome.PASS: "passed",
    Outcome.LANE_INFRA: "spawn_failed",
    Outcome.FRAMEWORK_RUNTIME: "nonzero_exit",
    Outcome.AGENT: "wrong_output",
}


def rep(
    outcome: Outcome | str,
    *,
    scenario: str = "s1",
    repeat: int = 1,
    cause: str | None = None,
    trajectory: tuple[str, ...] | list[str] = (),
    duration: float = 1.0,
) -> RepeatResult:
    outcome = Outcome(outcome)
    return RepeatResult(
        scenario=scenario,
        repeat=repeat,
        seed=repeat,
        outcome=outcome,
        cause=cause or DEFAULT_CAUSE[outcome],
        detail="",
        duration_s=duration,
        exit_code=0,
        signal=None,
        timed_out=False,
        peak_rss_mb=None,
        cpu_s=None,
        containment=None,
        network=None,
        filesystem=None,
        attempts=1,
        path_hash="",
        violations=0,
        trajectory=tuple(trajectory),
        claimed=None,
        transcript="",
        sha256="",
    )


def reps(*outcomes: str, scenario: str = "s1") -> list[RepeatResult]:
    return [rep(o, scenario=scenario, repeat=i) for i, o in enumerate(outcomes, start=1)]
