"""Repeats of given tool trajectories, and a scenario's result of them, as the document stores them.
"""

from __future__ import annotations

import dataclasses
import hashlib

from alk.records import Outcome, RepeatResult
from alk.result.document import ScenarioResult
from alk.stats.summary import summarize_scenario


def repeat(number: int, trajectory: tuple[str, ...], passed: bool = True, *,
           outcome: Outcome | None = None, kept: bool = True, scenario: str = "s",
           duration_s: float = 1.0, model: dict | None = None) -> RepeatResult:
    """A repeat as the document stores it; `kept=False`: the run's budget for steps was spent,
    its trajectory is empty and its digest stands for it."""
    outcome = outcome or (Outcome.PASS if passed else Outcome.AGENT)
    digest = hashlib.sha256("".join(f"{s}\n" for s in trajectory).encode()).hexdigest()
    return RepeatResult(
        scenario=scenario, repeat=number, seed=number, outcome=outcome,
        cause="passed" if outcome is Outcome.PASS else
        "wrong_output" if outcome is Outcome.AGENT else "nonzero_exit"
        if outcome is Outcome.FRAMEWORK_RUNTIME else "exited_before_ready",
        detail="", duration_s=duration_s, exit_code=0, signal=None, timed_out=False,
        peak_rss_mb=40.0, cpu_s=0.5, containment=None, network=None, filesystem=None,
        attempts=1, path_hash="", violations=0, trajectory=trajectory if kept else (),
        claimed=None, transcript=f"t/{scenario}/{number}.jsonl", sha256="",
        trajectory_hash=digest, model=model)


def scenario_of(*repeats: RepeatResult, sid: str = "s") -> ScenarioResult:
    repeats = tuple(dataclasses.replace(r, scenario=sid) for r in repeats)
    stats = summarize_scenario(sid, repeats, len(repeats))
    return ScenarioResult(id=sid, scripted=False, stats=stats, repeats=tuple(repeats))
