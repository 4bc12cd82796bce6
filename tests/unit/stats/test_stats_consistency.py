"""The consistency metrics in a scenario's and a lane's statistics: that alk.stats.summary hands
alk.stats.consistency the right repeats and values, checked on the points against computations of
their own (scipy's Jensen-Shannon distance, a plain Levenshtein, numpy's coefficient of
variation, fault robustness by hand). alk.stats.consistency's own tests check its intervals."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from alk.records import Outcome, RepeatResult
from alk.stats.summary import summarize_lane, summarize_scenario, summarize_scenarios

NO_STEPS = hashlib.sha256().hexdigest()


def digest(steps: tuple[str, ...]) -> str:
    return hashlib.sha256("".join(f"{s}\n" for s in steps).encode()).hexdigest()


def rep(outcome: str, steps: tuple[str, ...] = (), *, scenario: str = "s", repeat: int = 1,
        duration: float = 1.0, cpu: float | None = 0.5, rss: float | None = 50.0,
        **fields: object) -> RepeatResult:
    values: dict = dict(
        scenario=scenario, repeat=repeat, seed=repeat, outcome=Outcome(outcome), cause="x",
        detail="", duration_s=duration, exit_code=0, signal=None, timed_out=False,
        peak_rss_mb=rss, cpu_s=cpu, containment=None, network=None, filesystem=None,
        attempts=1, path_hash="", violations=0, trajectory=steps, claimed=None, transcript="",
        sha256="", trajectory_hash=digest(steps))
    values.update(fields)
    return RepeatResult(**values)


def tool_use(trajectories: list[tuple[str, ...]], tools=lambda s: [s.rpartition(":")[0]]
             ) -> float:
    """1 − the mean base-2 Jensen–Shannon distance of tool frequencies over pairs, with scipy;
    a repeat with no tool is at distance 1 from one with some, two such are alike."""
    names = sorted({t for steps in trajectories for s in steps for t in tools(s)})
    vectors = [[Counter(t for s in steps for t in tools(s))[n] for n in names]
               for steps in trajectories]
    distances = []
    for a, b in itertools.combinations(vectors, 2):
        if not any(a) or not any(b):
            distances.append(0.0 if not any(a) and not any(b) else 1.0)
        else:
            distances.append(jensenshannon(a, b, base=2))
    return 1 - float(np.mean(distances))


def levenshtein(a: tuple, b: tuple) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, start=1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def step_similarity(trajectories: list[tuple[str, ...]]) -> float:
    return float(np.mean([1.0 if not a and not b else 1 - levenshtein(a, b) / max(len(a), len(b))
                          for a, b in itertools.combinations(trajectories, 2)]))


def resource_consistency(*columns: list[float]) -> float:
    return math.exp(-np.mean([np.std(c, ddof=1) / np.mean(c) for c in columns]))


A, B, C = ("lookup:ok", "refund:ok"), ("lookup:ok", "lookup:error", "refund:ok"), ("notify:ok",)


def test_a_scenarios_consistency_is_over_its_scored_repeats() -> None:
    scored = [rep("pass", A, duration=1.0, cpu=0.4, rss=50.0),
              rep("pass", B, duration=1.5, cpu=0.5, rss=52.0),
              rep("agent", C, duration=0.8, cpu=0.2, rss=49.0),
              rep("framework_runtime", A, duration=2.0, cpu=0.9, rss=60.0)]
    # A void repeat has a trajectory and numbers that must not count.
    void = rep("lane_infra", ("zzz:ok",), duration=99.0, cpu=9.0, rss=999.0)
    stats = summarize_scenario("s", [*scored[:2], void, *scored[2:]], 5)
    c = stats.consistency
    # 2 passes of 4: C_out = 1 − 4·½·½ = 0.
    assert c.outcome is not None and c.outcome.value == 0.0
    assert c.tool_use.value == pytest.approx(tool_use([A, B, C, A]), rel=1e-9)
    assert c.steps.value == pytest.approx(step_similarity([A, B, C, A]), rel=1e-9)
    assert c.resources.value == pytest.approx(resource_consistency(
        [1.0, 1.5, 0.8, 2.0], [0.4, 0.5, 0.2, 0.9], [50.0, 52.0, 49.0, 60.0]), rel=1e-9)


def test_a_trajectory_not_kept_is_left_out_and_one_of_no_step_is_not() -> None:
    kept = [rep("pass", A), rep("pass", A)]
    # The run's budget for kept steps ran out: no steps, but the digest of some.
    unkept = dataclasses.replace(rep("pass", B), trajectory=())
    assert summarize_scenario("s", [*kept, unkept], 3).consistency.steps.value == 1.0
    # No tool call at all: the digest of no step; as far as can be from the others.
    none = rep("pass", ())
    assert none.trajectory_hash == NO_STEPS
    assert summarize_scenario("s", [*kept, none], 3).consistency.steps.value == pytest.approx(
        step_similarity([A, A, ()]))
    # Two attempts with no step: the digest of their two digests joined (alk.execute.repeat).
    twice = dataclasses.replace(none, attempts=2, trajectory_hash=hashlib.sha256(
        (NO_STEPS * 2).encode()).hexdigest())
    assert summarize_scenario("s", [*kept, twice], 3).consistency.steps.value == pytest.approx(
        step_similarity([A, A, ()]))


def test_with_alks_model_gateway_the_steps_are_the_gateways_and_calls_count() -> None:
    steps = [("200:lookup,refund", "200:text"), ("200:lookup", "429:http_429", "200:text"),
             ("200:lookup,refund", "200:text")]
    calls = [2, 3, 2]
    repeats = [rep("pass", s, model={"calls": n, "retries": 0, "prompt_tokens": 1,
                                     "completion_tokens": 1}, repeat=i)
               for i, (s, n) in enumerate(zip(steps, calls), start=1)]
    c = summarize_scenario("s", repeats, 3).consistency
    # A gateway step "status:tool,tool" used each tool; a text reply or a fault is an action.
    assert c.tool_use.value == pytest.approx(
        tool_use(steps, tools=lambda s: s.partition(":")[2].split(",")), rel=1e-9)
    assert c.resources.value == pytest.approx(resource_consistency(
        [1.0] * 3, [0.5] * 3, [50.0] * 3, calls), rel=1e-9)


def test_a_lanes_consistency_is_the_mean_over_its_scenarios() -> None:
    scenarios = [summarize_scenario("a", [rep("pass", A, scenario="a", duration=d)
                                          for d in (1.0, 1.2, 1.4)], 3),
                 summarize_scenario("b", [rep(o, B, scenario="b", duration=d)
                                          for o, d in (("pass", 1.0), ("agent", 3.0))], 2),
                 summarize_scenario("c", [rep("pass", C, scenario="c")], 1)]
    lane = summarize_lane(scenarios)
    for name in ("outcome", "tool_use", "steps", "resources"):
        points = [getattr(s.consistency, name) for s in scenarios]
        # "c" has one repeat: nothing to agree with, so no figure, and not in the mean.
        assert points[2] is None
        assert getattr(lane.consistency, name).value == pytest.approx(
            np.mean([p.value for p in points[:2]]), rel=1e-12), name


def test_every_scenario_at_once_is_each_scenario_alone() -> None:
    by_scenario = {sid: [rep(o, steps, scenario=sid, repeat=i, duration=1 + i / 10)
                         for i, (o, steps) in enumerate(pattern, start=1)]
                   for sid, pattern in (("a", [("pass", A), ("agent", B), ("pass", A)]),
                                        ("b", [("pass", C)] * 4), ("c", []))}
    together = summarize_scenarios(by_scenario, 4, faulted={"b"}, seed=3)
    alone = tuple(summarize_scenario(sid, repeats, 4, faulted=sid == "b", seed=3)
                  for sid, repeats in by_scenario.items())
    assert together == alone
    assert [s.faulted for s in together] == [False, True, False]
    # An adaptive run asks each scenario for its own number of repeats.
    asked = summarize_scenarios(by_scenario, {"a": 3, "b": 4, "c": 100})
    assert [s.counts.requested for s in asked] == [3, 4, 100]


def test_a_lanes_consistency_is_never_surer_than_its_scenarios() -> None:
    # Every scenario passed all 20: each one's outcome consistency is 1 over [(2·0.839 − 1)², 1]
    # (Wilson's lower bound of 20/20 is 0.839), and resampling scenarios alone would say [1, 1].
    lane = summarize_lane([summarize_scenario(
        f"s{i}", [rep("pass", scenario=f"s{i}", repeat=n) for n in range(1, 21)], 20)
        for i in range(3)])
    low = (2 * 20 / (20 + 1.959963984540054**2) - 1) ** 2
    assert lane.consistency.outcome.value == 1
    assert lane.consistency.outcome.low == pytest.approx(low) and low < 0.5


@pytest.mark.parametrize("n, marked", [
    (5, ("tool_use", "steps", "resources")), (19, ("tool_use", "steps", "resources")),
    (20, ("tool_use", "resources")), (49, ("tool_use", "resources")), (50, ("resources",)),
    (200, ())])
def test_a_scenarios_bootstrap_intervals_are_marked_approximate_below_where_they_hold(
        n: int, marked: tuple[str, ...]) -> None:
    # Two tool paths and two durations: every figure has a value and an interval.
    repeats = [rep("pass" if i % 3 else "agent", ("a:ok",) if i % 2 else ("a:ok", "b:ok"),
                   repeat=i, duration=1.0 + i % 2) for i in range(1, n + 1)]
    stats = summarize_scenario("s", repeats, n)
    assert stats.consistency.approximate == marked
    assert summarize_lane([stats]).consistency.approximate == ()
