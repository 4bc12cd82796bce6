"""alk.plan and alk.attribution.preflight: the order and seeds of repeats, option errors, and the
version gate on a worker's framework_ready."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from typing import Any, Callable

import pytest

from alk.attribution.preflight import check_ready
from alk.causes import Cause
from alk.errors import UsageError
from alk.layout import new_run_id
from alk.plan import build_plan, repeat_seed
from alk.records import Lane, Plan, Preflight
from alk.result.options import Adaptive

MakeLane = Callable[..., Lane]


def order(plan: Plan) -> list[tuple[str, int]]:
    return [(item.scenario.id, item.repeat) for item in plan.items]


def seeds(plan: Plan) -> dict[tuple[str, int], int]:
    return {(item.scenario.id, item.repeat): item.seed for item in plan.items}


# --- build_plan ----------------------------------------------------------------------------


def keep(scenarios: list) -> None:
    """A shuffle that leaves each round in the lane's order."""


def test_repeats_are_interleaved(make_lane: MakeLane) -> None:
    plan = build_plan(make_lane(("a", "b", "c")), "run-1", repeats=2, seed=1, shuffle=keep)
    assert order(plan) == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("c", 2)]


def test_each_round_comes_in_an_order_the_seed_does_not_fix(make_lane: MakeLane) -> None:
    """Had the order been fixed, a worker timing its starts could tell its scenario before the
    version gate; rounds stay rounds, and every scenario has its repeat n in round n."""
    lane = make_lane(("a", "b", "c", "d"))
    orders = set()
    for _ in range(30):
        plan = build_plan(lane, "r", repeats=3, seed=1)
        rounds = [order(plan)[n * 4:(n + 1) * 4] for n in range(3)]
        for number, round_ in enumerate(rounds, start=1):
            assert sorted(round_) == [(sid, number) for sid in "abcd"]
        orders.add(tuple(sid for sid, _ in order(plan)))
    assert len(orders) > 5  # 24^3 orders; 30 draws alike would be a fixed order


def test_plan_takes_the_lane_defaults(make_lane: MakeLane) -> None:
    lane = make_lane(("a", "b"), repeats=3, timeout_s=12.5)
    plan = build_plan(lane, "run-1", seed=5)
    assert (plan.run_id, plan.lane, plan.seed) == ("run-1", lane, 5)
    assert (plan.repeats, plan.timeout_s) == (3, 12.5)
    assert plan.scenarios == lane.scenarios
    assert len(plan.items) == 6


def test_options_override_the_lane(make_lane: MakeLane) -> None:
    plan = build_plan(make_lane(repeats=3, timeout_s=12.5), "r", repeats=1, timeout_s=0.5, seed=5)
    assert (plan.repeats, plan.timeout_s, len(plan.items)) == (1, 0.5, 3)


def test_selected_scenarios_run_in_the_given_order_once(make_lane: MakeLane) -> None:
    plan = build_plan(make_lane(("a", "b", "c")), "r", repeats=2, seed=1,
                      scenario_ids=["c", "a", "c"], shuffle=keep)
    assert [s.id for s in plan.scenarios] == ["c", "a"]
    assert order(plan) == [("c", 1), ("a", 1), ("c", 2), ("a", 2)]


def test_seeds_come_from_the_run_seed_scenario_and_repeat(make_lane: MakeLane) -> None:
    plan = build_plan(make_lane(("a", "b")), "r", repeats=2, seed=7)
    for item in plan.items:
        digest = hashlib.sha256(f"7:{item.scenario.id}:{item.repeat}".encode()).digest()
        assert item.seed == int.from_bytes(digest[:4], "big")
        assert item.seed == repeat_seed(7, item.scenario.id, item.repeat)
    assert len(set(seeds(plan).values())) == len(plan.items)


def test_the_same_seed_reproduces_every_repeat(make_lane: MakeLane) -> None:
    lane = make_lane(("a", "b"))
    first = build_plan(lane, "run-1", repeats=3, seed=42)
    again = build_plan(lane, "run-2", repeats=3, seed=42)
    other = build_plan(lane, "run-3", repeats=3, seed=43)
    assert seeds(first) == seeds(again)
    assert set(seeds(first).values()).isdisjoint(seeds(other).values())


def test_seeds_do_not_depend_on_the_selection(make_lane: MakeLane) -> None:
    lane = make_lane(("a", "b", "c"))
    full = seeds(build_plan(lane, "r", repeats=3, seed=9))
    only_c = seeds(build_plan(lane, "r", repeats=2, seed=9, scenario_ids=["c"]))
    assert only_c == {key: full[key] for key in [("c", 1), ("c", 2)]}


def test_a_run_without_a_seed_draws_one(make_lane: MakeLane) -> None:
    plan = build_plan(make_lane(), "r")
    assert 0 <= plan.seed < 2**31
    assert seeds(plan) == seeds(build_plan(make_lane(), "r", seed=plan.seed))


def test_unknown_scenarios_list_the_lanes_scenarios(make_lane: MakeLane) -> None:
    with pytest.raises(UsageError) as caught:
        build_plan(make_lane(("a", "b", "c")), "r", scenario_ids=["a", "zz", "yy"])
    assert str(caught.value) == "lane 'demo' has no scenario 'zz', 'yy'; its scenarios: a, b, c"


@pytest.mark.parametrize("repeats", [0, -1])
def test_repeats_below_one(make_lane: MakeLane, repeats: int) -> None:
    with pytest.raises(UsageError) as caught:
        build_plan(make_lane(), "r", repeats=repeats)
    assert str(caught.value) == f"--repeats must be at least 1, got {repeats}"


@pytest.mark.parametrize("timeout", [0, -2.5, float("nan")])
def test_timeout_not_positive(make_lane: MakeLane, timeout: float) -> None:
    with pytest.raises(UsageError) as caught:
        build_plan(make_lane(), "r", timeout_s=timeout)
    assert str(caught.value) == f"--timeout must be a positive number of seconds, got {timeout}"


def test_an_adaptive_plan_holds_its_maximum(make_lane: MakeLane) -> None:
    """The executor runs a prefix of each scenario's repeats; their seeds are a fixed run's."""
    lane = make_lane(("a", "b"), repeats=3)
    plan = build_plan(lane, "r", adaptive=Adaptive(max_repeats=40), seed=9, shuffle=keep)
    assert plan.repeats == 40 and len(plan.items) == 80
    assert order(plan)[:4] == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert seeds(plan) == seeds(build_plan(lane, "r", repeats=40, seed=9))
    # A resumed run may name its maximum again.
    again = build_plan(lane, "r", repeats=40, adaptive=Adaptive(max_repeats=40), seed=9)
    assert seeds(again) == seeds(plan)


def test_a_number_of_repeats_and_adaptive_repeats_exclude_each_other(make_lane: MakeLane
                                                                    ) -> None:
    with pytest.raises(UsageError) as caught:
        build_plan(make_lane(), "r", repeats=20, adaptive=Adaptive(max_repeats=40))
    assert str(caught.value) == ("--repeats 20 and adaptive repeats exclude each other: give a "
                                 "number, or `--repeats auto` with --max-repeats")


def test_run_ids_sort_by_time() -> None:
    run_id = new_run_id(datetime(2026, 11, 29, 12, 5, 1, tzinfo=timezone.utc))
    assert re.fullmatch(r"20261129-120501-[0-9a-f]{6}", run_id)


# --- check_ready ---------------------------------------------------------------------------


def ready(framework: Any = "fw", version: Any = "1.4.2") -> dict[str, Any]:
    return {"framework": framework, "framework_version": version}


def test_a_supported_version_passes(make_lane: MakeLane) -> None:
    assert check_ready(make_lane(), ready()) == Preflight(True, "fw", "1.4.2")


@pytest.mark.parametrize("framework, shown", [("other", "'other'"), (None, "None"), (5, "None")])
def test_framework_mismatch(make_lane: MakeLane, framework: Any, shown: str) -> None:
    found = check_ready(make_lane(), ready(framework=framework))
    assert found == Preflight(False, framework if isinstance(framework, str) else None, "1.4.2",
                              Cause.FRAMEWORK_MISMATCH,
                              f"worker reports framework {shown}, lane 'demo' expects 'fw'")


@pytest.mark.parametrize("version, shown", [("1.x.banana", "'1.x.banana'"), (None, "None"),
                                            (1.5, "None"), ("", "''")])
def test_invalid_version(make_lane: MakeLane, version: Any, shown: str) -> None:
    found = check_ready(make_lane(), ready(version=version))
    assert found == Preflight(False, "fw", version if isinstance(version, str) else None,
                              Cause.VERSION_INVALID,
                              f"framework_version {shown} is not a PEP 440 version")


@pytest.mark.parametrize("version", ["2.0", "0.9", "2.0rc1", "1.0rc1"])
def test_unsupported_version(make_lane: MakeLane, version: str) -> None:
    found = check_ready(make_lane(), ready(version=version))
    assert found == Preflight(False, "fw", version, Cause.VERSION_UNSUPPORTED,
                              f"fw {version} does not satisfy the lane's requirement '>=1.0,<2'")


@pytest.mark.parametrize("version", ["1.5rc1", "1.1.dev3", "1.9.0b2"])
def test_an_installed_prerelease_inside_the_range_passes(make_lane: MakeLane,
                                                         version: str) -> None:
    assert check_ready(make_lane(), ready(version=version)).ok is True


def test_the_frameworks_name_is_checked_before_its_version(make_lane: MakeLane) -> None:
    assert check_ready(make_lane(), ready("other", "junk")).cause == Cause.FRAMEWORK_MISMATCH


def test_limits_from_the_command_line_override_the_lane(make_lane) -> None:
    plan = build_plan(make_lane(), "r", limits={"cpu_s": 3, "memory_mb": 0})
    assert plan.limits.applied() == {"cpu_s": 3, "max_open_files": 1024, "max_file_mb": 1024,
                                     "disk_mb": 4096}
    with pytest.raises(UsageError, match="'mem' is not a limit; limits: memory_mb, cpu_s"):
        build_plan(make_lane(), "r", limits={"mem": 1})
