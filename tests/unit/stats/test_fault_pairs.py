"""Fault robustness over pairs of a faulted scenario and its unfaulted twin: which twin the rule
picks (alk.stats.robustness.fault_twins), the figure by hand, its interval against the exact
binomial distribution of the ratio (scipy), and the like-for-like column of the audit
(wire-* ÷ nominal) from the committed docs/frameworks.json."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import msgspec
import numpy as np
import pytest
from scipy.stats import binom

from alk.lane.load import load_lane
from alk.records import Fault, KillAt, Outcome, RepeatResult, Scenario
from alk.served_model import WireFault
from alk.stats.robustness import fault_twins, paired_fault_robustness
from alk.stats.summary import summarize_lane, summarize_scenarios

ROOT = Path(__file__).resolve().parents[3]
Z2 = 1.959963984540054 ** 2
FRAMEWORKS = ("pydantic-ai", "langgraph", "openai-agents", "smolagents", "llamaindex",
              "strands", "autogen")


def rep(scenario: str, passed: bool) -> RepeatResult:
    return RepeatResult(
        scenario=scenario, repeat=1, seed=1, outcome=Outcome.PASS if passed else Outcome.AGENT,
        cause="x", detail="", duration_s=1.0, exit_code=0, signal=None, timed_out=False,
        peak_rss_mb=None, cpu_s=None, containment=None, network=None, filesystem=None,
        attempts=1, path_hash="", violations=0, trajectory=(), claimed=None, transcript="",
        sha256="", trajectory_hash="")


def lane(counts: dict[str, tuple[int, int]], twins: dict[str, str | None], seed: int = 0):
    """A lane of scenarios id → (passed, failed); `twins`: the faulted ones → their twin."""
    repeats = {sid: [rep(sid, True)] * p + [rep(sid, False)] * f
               for sid, (p, f) in counts.items()}
    requested = {sid: p + f for sid, (p, f) in counts.items()}
    return summarize_lane(summarize_scenarios(repeats, requested, faulted=twins, seed=seed),
                          seed=seed)


def test_the_twin_is_the_baseline_named_else_the_one_alike_without_faults() -> None:
    script = ({"tool": "a", "args": {}}, {"text": "done"})
    choices = ({"choices": [{"text": "x", "weight": 1}]},)
    wire = (WireFault(call=1, kind="http_500"),)
    scenarios = [
        Scenario("nominal", "t", script=script),
        Scenario("other-input", "t", input={"x": 1}, script=script),
        Scenario("wire", "t", script=script, wire_faults=wire),
        Scenario("wire-other-input", "t", input={"x": 1}, script=script, wire_faults=wire),
        Scenario("raises", "t", script=({"text": "no"},), faults=(Fault("tool", 1),)),
        Scenario("raises-named", "t", script=({"text": "no"},), faults=(Fault("tool", 1),),
                 baseline="nominal"),
        Scenario("kill", "other task", kill_at=KillAt("tool", "result", None, 1)),
        Scenario("sampled", "t", script=choices),
        Scenario("sampled-wire", "t", script=choices, wire_faults=wire),
        # Weighted choices move its rate: left out, even with a baseline named.
        Scenario("sampled-named", "t", script=choices, wire_faults=wire, baseline="nominal"),
        Scenario("copy-a", "u"), Scenario("copy-b", "u"),
        Scenario("ambiguous", "u", kill_at=KillAt("tool", "result", None, 1)),
    ]
    assert fault_twins(scenarios) == {
        "wire": "nominal", "wire-other-input": "other-input", "raises": None,
        "raises-named": "nominal", "kill": None, "sampled-wire": None, "sampled-named": None,
        "ambiguous": None}


def test_the_figure_is_the_faulted_mean_rate_over_the_twins_mean_rate() -> None:
    stats = lane({"b1": (8, 2), "b2": (4, 6), "f1": (6, 4), "f2": (3, 7), "f3": (2, 8),
                  "fx": (0, 10), "other": (0, 10)},
                 {"f1": "b1", "f2": "b1", "f3": "b2", "fx": None})
    robustness = stats.fault_robustness
    # (0.6 + 0.3 + 0.2)/3 ÷ (0.8 + 0.8 + 0.4)/3: b1 counts once for each of its two pairs, and
    # "other" (0/10, no fault) is no one's twin.
    assert robustness.value == pytest.approx(1.1 / 2.0)
    assert robustness.low < 0.55 < robustness.high
    assert robustness.method == "paired"
    assert robustness.pairs == (("f1", "b1"), ("f2", "b1"), ("f3", "b2"))
    assert robustness.unpaired == ("fx",)
    assert json.loads(msgspec.json.encode(robustness))["pairs"] == [
        ["f1", "b1"], ["f2", "b1"], ["f3", "b2"]]


def test_no_twin_no_figure_and_no_faulted_scenario_no_record() -> None:
    none = lane({"f": (3, 7), "b": (5, 5)}, {"f": None}).fault_robustness
    assert (none.value, none.low, none.high, none.pairs, none.unpaired) == (
        None, None, None, (), ("f",))
    assert lane({"a": (3, 7), "b": (5, 5)}, {}).fault_robustness is None
    never = lane({"f": (3, 7), "b": (0, 10)}, {"f": "b"}).fault_robustness
    assert never.value is None and never.pairs == (("f", "b"),)


def test_pairs_that_never_vary_keep_the_ratio_of_their_wilson_bounds() -> None:
    # 20/20 on both sides: every draw gives 1, but Wilson leaves each rate open down to
    # 20/(20 + z²) = 0.839, so the ratio runs from 0.839/1 to 1/0.839.
    robustness = lane({"f": (20, 0), "b": (20, 0)}, {"f": "b"}).fault_robustness
    assert robustness.value == 1
    assert robustness.low == pytest.approx(20 / (20 + Z2))
    assert robustness.high == pytest.approx((20 + Z2) / 20)


def test_a_twin_that_passed_too_rarely_leaves_no_upper_bound_in_json() -> None:
    # The twin passed 1 of 10: a third of its draws pass none (0.9^10 = 0.35).
    stats = lane({"f": (5, 5), "b": (1, 9)}, {"f": "b"})
    assert stats.fault_robustness.value == pytest.approx(5.0)
    assert stats.fault_robustness.high is None
    json.dumps(json.loads(msgspec.json.encode(stats)), allow_nan=False)


def test_the_interval_holds_the_exact_bootstrap_distributions_central_95_percent() -> None:
    # f 10/20 against b 15/20: the ratio's distribution over every pair of binomial outcomes
    # at those rates, by scipy; the seeded 1,000 draws find its 2.5% and 97.5% points within
    # a step of the discrete distribution, and Wilson's ratio [0.30/0.89, 0.70/0.53] is wider.
    ratios, weights = [], []
    for kf, kb in itertools.product(range(21), range(1, 21)):
        ratios.append((kf / 20) / (kb / 20))
        weights.append(binom.pmf(kf, 20, 0.5) * binom.pmf(kb, 20, 0.75))
    order = np.argsort(ratios)
    cumulative = np.cumsum(np.array(weights)[order]) / sum(weights)
    exact_low = np.array(ratios)[order][np.searchsorted(cumulative, 0.025)]
    exact_high = np.array(ratios)[order][np.searchsorted(cumulative, 0.975)]
    estimate = paired_fault_robustness([("f", "b")], {"f": (10, 20), "b": (15, 20)}, seed=3)
    assert estimate.value == pytest.approx(2 / 3)
    assert estimate.low <= exact_low + 0.03 and estimate.high >= exact_high - 0.03
    assert estimate.low == pytest.approx(min(exact_low, 0.2993 / 0.8881), abs=0.03)


def wire_pairs(framework: str) -> tuple[list[tuple[str, str]], dict[str, tuple[int, int]],
                                         list[tuple[str, str]]]:
    data = json.loads((ROOT / "docs" / "frameworks.json").read_text(encoding="utf-8"))
    run = next(f for f in data["frameworks"] if f["lane"] == framework)
    counts = {sid: (s["passed"], s["scored"]) for sid, s in run["scenarios"].items()}
    twins = fault_twins(load_lane(ROOT / "lanes" / f"{framework}.toml").scenarios)
    pairs = [(f, b) for f, b in twins.items() if b is not None]
    return [(f, b) for f, b in pairs if f.startswith("wire-")], counts, pairs


@pytest.mark.parametrize(("framework", "audit"), [
    ("pydantic-ai", 0.88), ("langgraph", 0.75), ("openai-agents", 0.88), ("smolagents", 0.75),
    ("llamaindex", 0.62), ("strands", 0.75), ("autogen", 0.88)])
def test_the_wire_pairs_reproduce_the_audits_like_for_like_column(framework, audit) -> None:
    wire, counts, pairs = wire_pairs(framework)
    assert {b for _, b in wire} == {"nominal"} and len(wire) == 8
    assert round(paired_fault_robustness(wire, counts).value, 2) == audit
    # Every faulted scenario of the framework lanes has a twin, nominal: the run's figure is
    # their mean rate over nominal's.
    mean = math.fsum(counts[f][0] / counts[f][1] for f, _ in pairs) / len(pairs)
    nominal = counts["nominal"][0] / counts["nominal"][1]
    assert {b for _, b in pairs} == {"nominal"} and len(pairs) == 10
    assert paired_fault_robustness(pairs, counts).value == pytest.approx(mean / nominal)


def test_the_reference_lanes_kill_is_paired_with_nominal() -> None:
    twins = fault_twins(load_lane(ROOT / "lanes" / "reference.toml").scenarios)
    assert twins == {"crash-after-effect": "nominal"}


def test_an_older_files_figure_reads_as_the_pooled_one() -> None:
    from alk.stats.records import FaultRobustness

    old = msgspec.convert({"value": 0.75, "low": 0.4, "high": 1.06}, FaultRobustness)
    assert (old.method, old.pairs, old.unpaired) == ("pooled", (), ())
