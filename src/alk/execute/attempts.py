"""A repeat's attempts as one observation: when alk kills a worker mid-scenario (`kill_at`) and
starts it again in the same workspace, the last attempt is judged, with what every attempt did
(tool calls, steps, faults, model calls and tokens) added up. Pure.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping

from alk.cost import combined
from alk.records import Observation, Scenario
from alk.served_model import ModelSeen


def combine_attempts(attempts: list[Observation], scenario: Scenario) -> Observation:
    """The last attempt's ending, with what all of them did: tool calls, steps, faults."""
    last = attempts[-1]
    tool_calls: dict[str, int] = {}
    for obs in attempts:
        for name, count in obs.tool_calls.items():
            tool_calls[name] = tool_calls.get(name, 0) + count
    # Only the faults the scenario declared: a worker that reports others cannot make its
    # failure the framework's handling of a fault (fault_unrecovered).
    declared = {(fault.point, fault.occurrence) for fault in scenario.faults}
    fired = frozenset().union(*(obs.faults_fired for obs in attempts)) & declared
    missing = tuple(f"{fault.point}#{fault.occurrence}" for fault in scenario.faults
                    if (fault.point, fault.occurrence) not in fired)
    model = combine_models([obs.model for obs in attempts if obs.model is not None])
    if model is not None:
        on_wire = set(model.faults_fired)
        missing += tuple(f.label for f in (*scenario.wire_faults, *scenario.tool_faults)
                         if f.label not in on_wire)
        if model.tool_calls is not None:
            # alk served the lane's tools: the calls it counted, not the worker's word.
            tool_calls = dict(model.tool_calls)
    return dataclasses.replace(
        last, tool_calls=tool_calls, faults_fired=fired, faults_missing=missing, model=model,
        trajectory=tuple(step for obs in attempts for step in obs.trajectory),
        uncounted_tool_calls=sum(obs.uncounted_tool_calls for obs in attempts),
        # The scripted turns of a killed attempt are lost with it: the last attempt is judged.
        model_turns=last.model_turns,
        violation_count=sum(obs.violation_count for obs in attempts),
        violations=tuple(v for obs in attempts for v in obs.violations)[:20],
        duration_s=sum(obs.duration_s for obs in attempts),  # the repeat's wall clock
        # A killed attempt's CPU time is lost with its wrapper; the last one is measured whole.
        cpu_s=last.cpu_s,
        peak_rss_mb=max((obs.peak_rss_mb or 0 for obs in attempts), default=0) or None,
        peak_tmpfs_mb=max((obs.peak_tmpfs_mb or 0 for obs in attempts), default=0) or None,
        kill_fired=any(obs.kill_fired for obs in attempts), attempts=len(attempts),
        # Every attempt's framework and version: a resumed one may report another.
        identities=tuple((obs.preflight.framework, obs.preflight.version)
                         for obs in attempts if obs.preflight is not None),
        trajectory_hash=joined_hash([obs.trajectory_hash for obs in attempts]),
        path=tuple(step for obs in attempts for step in obs.path),
        path_hash=joined_hash([obs.path_hash for obs in attempts]),
        kill_missing=scenario.kill_at is not None and not any(o.kill_fired for o in attempts))


def combine_models(seen: list[ModelSeen]) -> ModelSeen | None:
    """The gateway's view of every attempt: calls, retries, tokens and faults add up; the last
    attempt's turns, recovery and exhausted script are what is judged. (Its steps are each
    attempt's trajectory already, which `combine_attempts` joins.)"""
    if not seen:
        return None
    last = seen[-1]
    return dataclasses.replace(
        last, calls=sum(s.calls for s in seen), retries=sum(s.retries for s in seen),
        prompt_tokens=sum(s.prompt_tokens for s in seen),
        completion_tokens=sum(s.completion_tokens for s in seen),
        faults_fired=tuple(f for s in seen for f in s.faults_fired),
        provider_error=next((s.provider_error for s in seen if s.provider_error), None),
        upstream_refused=next((s.upstream_refused for s in seen if s.upstream_refused), None),
        over_bounds=sum(s.over_bounds for s in seen),
        mistakes=tuple(turn for s in seen for turn in s.mistakes),
        unmatched=next((s.unmatched for s in seen if s.unmatched), None),
        cost=combined(s.cost for s in seen),
        tool_calls=_summed([s.tool_calls for s in seen if s.tool_calls is not None]))


def _summed(counts: list[Mapping[str, int]]) -> dict[str, int] | None:
    if not counts:
        return None
    total: dict[str, int] = {}
    for count in counts:
        for name, calls in count.items():
            total[name] = total.get(name, 0) + calls
    return total


def joined_hash(hashes: list[str]) -> str:
    return hashes[0] if len(hashes) == 1 else hashlib.sha256("".join(hashes).encode()).hexdigest()
