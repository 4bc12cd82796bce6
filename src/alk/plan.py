"""Turns a lane and the run's options into a plan of repeats. Pure, but for the order below.

Repeats are interleaved (repeat 1 of every scenario, then repeat 2, ...) so that drift in the
machine over a long run spreads across scenarios instead of landing on one. Within each round
the scenarios come in an order drawn afresh from the OS's randomness, which `--seed` does not
fix: a worker that times its starts (from the SDK folder's age, say) could otherwise tell which
scenario a start is before the version gate, and void the ones it would fail.

An adaptive run (`alk run --repeats auto`, `alk.execute.adaptive`) has a plan of its maximum
repeats, of which the executor runs a prefix of each scenario's.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from typing import Callable, Mapping, Sequence

from alk.errors import UsageError
from alk.limits import NAMES as LIMIT_NAMES
from alk.limits import with_overrides
from alk.records import Lane, Plan, RepeatSpec, Scenario
from alk.result.options import Adaptive

_UNPREDICTABLE = secrets.SystemRandom()


def repeat_seed(seed: int, scenario_id: str, repeat: int) -> int:
    """Each repeat's seed depends only on the run seed, the scenario and the repeat number, so
    `--seed` reproduces every repeat whatever else the run selects."""
    digest = hashlib.sha256(f"{seed}:{scenario_id}:{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def build_plan(lane: Lane, run_id: str, *, repeats: int | None = None,
               scenario_ids: Sequence[str] = (), seed: int | None = None,
               timeout_s: float | None = None, limits: Mapping[str, int] | None = None,
               adaptive: Adaptive | None = None,
               shuffle: Callable[[list[Scenario]], None] = _UNPREDICTABLE.shuffle) -> Plan:
    """`limits` override the lane's `[limits]` by name (0 lifts one); `shuffle` orders each
    round (tests pass one that does nothing). With `adaptive`, the plan holds its
    `max_repeats` repeats a scenario (`repeats`, if given, must say the same)."""
    if adaptive is not None:
        adaptive.check()
        if repeats not in (None, adaptive.max_repeats):
            raise UsageError(f"--repeats {repeats} and adaptive repeats exclude each other: "
                             "give a number, or `--repeats auto` with --max-repeats")
        repeats = adaptive.max_repeats
    repeats = lane.repeats if repeats is None else repeats
    if repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {repeats}")
    if timeout_s is not None and not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise UsageError(f"--timeout must be a positive number of seconds, got {timeout_s}")
    known = {scenario.id: scenario for scenario in lane.scenarios}
    unknown = [sid for sid in scenario_ids if sid not in known]
    if unknown:
        raise UsageError(f"lane '{lane.name}' has no scenario {', '.join(map(repr, unknown))}; "
                         f"its scenarios: {', '.join(known)}")
    chosen = [known[sid] for sid in dict.fromkeys(scenario_ids)] or list(lane.scenarios)
    seed = secrets.randbelow(2**31) if seed is None else seed
    items: list[RepeatSpec] = []
    for number in range(1, repeats + 1):
        round_ = list(chosen)
        shuffle(round_)
        items += [RepeatSpec(scenario, number, repeat_seed(seed, scenario.id, number))
                  for scenario in round_]
    unknown_limits = sorted(set(limits or {}) - set(LIMIT_NAMES))
    if unknown_limits:
        raise UsageError(f"--limit {unknown_limits[0]!r} is not a limit; limits: "
                         f"{', '.join(LIMIT_NAMES)}")
    return Plan(run_id=run_id, lane=lane, scenarios=tuple(chosen), repeats=repeats, seed=seed,
                timeout_s=timeout_s or lane.timeout_s, items=tuple(items),
                limits=with_overrides(lane.limits, limits or {}))
