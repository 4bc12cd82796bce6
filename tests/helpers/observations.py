"""Observations of a clean run for attribution's tests to break one fact of at a time, and the
verdict on one.
"""

from __future__ import annotations

from typing import Any

from alk.attribution.outcome import attribute
from alk.records import Check, Observation, Outcome, Preflight

RESULT = {"output": "hello", "stop_reason": "accepted", "end_state": {"phase": "stopped"}}
OK_PREFLIGHT = Preflight(True, "fw", "1.0")
PASSING = (Check("output_equals", True, "hello", "hello"),)


def observed(**fields: Any) -> Observation:
    """A clean run with a valid result; each test breaks what it needs."""
    values: dict[str, Any] = {
        "spawned": True, "ready": {"framework": "fw", "framework_version": "1.0"},
        "preflight": OK_PREFLIGHT, "started": True, "exit_code": 0, "duration_s": 1.0,
        "result": RESULT,
    }
    values.update(fields)
    return Observation(**values)


def verdict(obs: Observation, checks: tuple[Check, ...] = ()) -> tuple[Outcome, str, str]:
    found = attribute(obs, checks)
    return found.outcome, found.cause, found.detail


# --- every rule, in order ------------------------------------------------------------------

INFRA, RUNTIME, AGENT = Outcome.LANE_INFRA, Outcome.FRAMEWORK_RUNTIME, Outcome.AGENT
