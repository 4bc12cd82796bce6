"""alk.stats.summary checked against independent computations: statsmodels, scipy, brute force, by
hand."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
from fractions import Fraction

import msgspec
import numpy as np
import pytest
from scipy.stats import f_oneway
from statsmodels.stats.proportion import proportion_confint

from alk.estimate import Z_95, wilson_interval
from alk.records import RepeatResult, Verdict
from alk.stats.icc import icc1
from alk.stats.pass_k import pass_at_k, pass_hat_k, pass_hat_k_at
from alk.stats.records import (
    Counts,
    DurationStats,
    EventPaths,
    KCurve,
    LaneStats,
    ScenarioStats,
    Tally,
    TrajectoryStats,
)
from alk.stats.summary import summarize_lane, summarize_scenario

from helpers.results import rep, reps


def as_json(record: object) -> dict:
    """A record as result.json holds it."""
    return json.loads(msgspec.json.encode(record))


def scenario_from_scores(sid: str, scores: list[int]) -> list[RepeatResult]:
    return reps(*("pass" if s else "agent" for s in scores), scenario=sid)


# -- Wilson ------------------------------------------------------------------------------------


def test_z95_is_the_normal_quantile() -> None:
    from scipy.stats import norm

    assert Z_95 == pytest.approx(norm.ppf(0.975), abs=1e-15)


@pytest.mark.parametrize(
    "c,n", [(0, 1), (1, 1), (0, 10), (10, 10), (3, 10), (1, 2), (57, 100), (999, 1000), (0, 3000)]
)
def test_wilson_matches_statsmodels(c: int, n: int) -> None:
    lo, hi = wilson_interval(c, n)
    ref_lo, ref_hi = proportion_confint(c, n, alpha=0.05, method="wilson")
    assert lo == pytest.approx(ref_lo, abs=1e-12)
    assert hi == pytest.approx(ref_hi, abs=1e-12)
    assert 0.0 <= lo <= c / n <= hi <= 1.0


def test_wilson_edges_are_exact() -> None:
    assert wilson_interval(0, 7)[0] == 0.0
    assert wilson_interval(7, 7)[1] == 1.0


@pytest.mark.parametrize("c,n", [(0, 0), (-1, 3), (4, 3)])
def test_wilson_rejects_bad_counts(c: int, n: int) -> None:
    with pytest.raises(ValueError):
        wilson_interval(c, n)


# -- pass^k and pass@k -------------------------------------------------------------------------


def brute(scores: list[int], k: int) -> tuple[float, float]:
    """Fractions of k-subsets that are all-pass and that contain at least one pass."""
    subsets = list(itertools.combinations(scores, k))
    all_pass = sum(1 for s in subsets if all(s)) / len(subsets)
    any_pass = sum(1 for s in subsets if any(s)) / len(subsets)
    return all_pass, any_pass


@pytest.mark.parametrize(
    "scores", [[1, 1, 0, 1, 0, 1], [0, 0, 0, 0], [1, 1, 1], [0, 1, 0, 0, 0, 0, 1], [1]]
)
def test_pass_k_match_brute_force(scores: list[int]) -> None:
    n, c = len(scores), sum(scores)
    curve = summarize_scenario("s1", scenario_from_scores("s1", scores), n).curve
    assert curve.k == tuple(range(1, n + 1))
    for k in range(1, n + 1):
        all_pass, any_pass = brute(scores, k)
        assert pass_hat_k(n, c, k) == pytest.approx(all_pass, abs=1e-12)
        assert pass_at_k(n, c, k) == pytest.approx(any_pass, abs=1e-12)
        assert curve.pass_hat_k[k - 1] == pytest.approx(all_pass, abs=1e-12)
        assert curve.pass_at_k[k - 1] == pytest.approx(any_pass, abs=1e-12)


def test_pass_k_large_n_matches_exact_fractions() -> None:
    n, c = 3000, 2950
    for k in (1, 10, 500, 2950, 2951, 3000):
        exact_hat = Fraction(math.comb(c, k), math.comb(n, k))
        exact_at = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        assert pass_hat_k(n, c, k) == pytest.approx(float(exact_hat), rel=1e-11, abs=0)
        assert pass_at_k(n, c, k) == pytest.approx(float(exact_at), rel=1e-11, abs=0)
    stats = summarize_scenario("s1", scenario_from_scores("s1", [1] * c + [0] * (n - c)), n)
    for k in (1, 10, 501, 2512, 3000):
        i = stats.curve.k.index(k)
        assert stats.curve.pass_hat_k[i] == pass_hat_k(n, c, k)
        assert stats.curve.pass_at_k[i] == pass_at_k(n, c, k)


@pytest.mark.parametrize("n,c,k", [(3, 4, 1), (3, 1, 0), (3, 1, 4), (0, 0, 1)])
def test_pass_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# -- ICC(1) ------------------------------------------------------------------------------------


def anova_icc(groups: list[list[float]]) -> tuple[float, float, float, float]:
    """Textbook one-way ANOVA (sums of squares), computed independently of alk.stats.summary."""
    a = len(groups)
    sizes = np.array([len(g) for g in groups], dtype=float)
    big_n = sizes.sum()
    allx = np.concatenate([np.asarray(g, dtype=float) for g in groups])
    grand = allx.mean()
    ss_total = ((allx - grand) ** 2).sum()
    ss_within = sum(((np.asarray(g) - np.mean(g)) ** 2).sum() for g in groups)
    ss_between = ss_total - ss_within
    msb = ss_between / (a - 1)
    msw = ss_within / (big_n - a)
    k0 = (big_n - (sizes**2).sum() / big_n) / (a - 1)
    return (msb - msw) / (msb + (k0 - 1) * msw), msb, msw, k0


def test_icc_equal_sizes_hand_worked() -> None:
    # A=[1,1,1,0] B=[0,0,1,0] C=[1,1,1,1]: means .75 .25 1, grand 8/12 = 2/3, k0 = 4.
    # MSB = 4·((1/12)² + (5/12)² + (4/12)²)/2 = 4·(42/144)/2 = 7/12.
    # SSW = .75 + .75 + 0 = 1.5 over N-a = 9 → MSW = 1/6.
    # ICC = (7/12 - 2/12)/(7/12 + 3·2/12) = 5/13; design effect 1 + 3·5/13 = 28/13; n_eff = 39/7.
    # (Equal sizes: Kish's m~ = 48/12 = 4 = k0, so the design effect is the same either way.)
    groups = [[1, 1, 1, 0], [0, 0, 1, 0], [1, 1, 1, 1]]
    icc = icc1(groups)
    assert icc.value == pytest.approx(5 / 13)
    assert icc.msb == pytest.approx(7 / 12)
    assert icc.msw == pytest.approx(1 / 6)
    assert icc.k0 == pytest.approx(4.0) and icc.cluster_size == pytest.approx(4.0)
    assert icc.design_effect == pytest.approx(28 / 13)
    assert icc.effective_n == pytest.approx(39 / 7)
    assert (icc.groups, icc.observations, icc.reason) == (3, 12, None)
    ref = anova_icc(groups)
    assert (icc.value, icc.msb, icc.msw, icc.k0) == pytest.approx(ref)
    assert icc.msb / icc.msw == pytest.approx(f_oneway(*groups).statistic)


def test_icc_unequal_sizes_hand_worked() -> None:
    # A=[1,1,1,1] B=[0,0] C=[1,0]: N=8, a=3, means 1 0 .5, grand 5/8.
    # k0 = (8 - (16+4+4)/8)/2 = 2.5.
    # MSB = (4·(3/8)² + 2·(5/8)² + 2·(1/8)²)/2 = (88/64)/2 = 11/16.
    # SSW = 0 + 0 + .5 over N-a = 5 → MSW = 1/10.
    # ICC = (11/16 - 1/10)/(11/16 + 1.5/10) = (47/80)/(67/80) = 47/67.
    # Kish: m~ = (16+4+4)/8 = 3; design effect = 1 + 2·47/67 = 161/67; n_eff = 8·67/161 = 536/161.
    # (k0 would give 1 + 1.5·47/67 = 275/134, which understates it.)
    groups = [[1, 1, 1, 1], [0, 0], [1, 0]]
    icc = icc1(groups)
    assert icc.value == pytest.approx(47 / 67)
    assert icc.k0 == pytest.approx(2.5)
    assert icc.cluster_size == pytest.approx(3.0)
    assert icc.msb == pytest.approx(11 / 16)
    assert icc.msw == pytest.approx(1 / 10)
    assert icc.design_effect == pytest.approx(161 / 67)
    assert icc.effective_n == pytest.approx(536 / 161)
    assert (icc.value, icc.msb, icc.msw, icc.k0) == pytest.approx(anova_icc(groups))
    assert icc.msb / icc.msw == pytest.approx(f_oneway(*groups).statistic)


def test_icc_random_groups_match_anova() -> None:
    rng = np.random.default_rng(7)
    for _ in range(25):
        a = int(rng.integers(2, 8))
        groups = []
        for _ in range(a):
            p = rng.uniform(0.1, 0.9)
            groups.append(list((rng.uniform(size=int(rng.integers(2, 30))) < p).astype(int)))
        ref = anova_icc(groups)
        if not np.isfinite(ref[0]):
            continue
        icc = icc1(groups)
        assert (icc.value, icc.msb, icc.msw, icc.k0) == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_icc_negative_floors_the_design_effect_at_one() -> None:
    # Both scenarios pass half the time: MSB = 0, MSW = 1/2, k0 = 2 → ICC = -1, and
    # 1 + (k0-1)·ICC = 0; floored at 1, so the 4 repeats count as 4, never as more.
    icc = icc1([[1, 0], [0, 1]])
    assert icc.value == pytest.approx(-1.0)
    assert icc.design_effect == 1.0
    assert icc.effective_n == 4
    assert icc.reason is None


@pytest.mark.parametrize("groups", [[[1, 1, 1], [1, 1]], [[0, 0], [0, 0, 0], [0]]])
def test_icc_zero_variance(groups: list[list[int]]) -> None:
    icc = icc1(groups)
    assert icc.value is None and icc.ci is None
    assert icc.reason == "no variance: every scored repeat had the same outcome"
    assert icc.msb == 0.0 and icc.msw == 0.0
    # How alike a scenario's repeats are is unknown: the design effect takes the worst case,
    # ICC = 1, m~ = sum(n²)/N, and each scenario counts once: N/m~ = N²/sum(n²).
    sizes = [len(g) for g in groups]
    assert icc.design_effect == pytest.approx(sum(n * n for n in sizes) / sum(sizes))
    assert icc.effective_n == pytest.approx(sum(sizes) ** 2 / sum(n * n for n in sizes))
    assert icc.effective_n <= len(groups)
    assert icc.note == "design effect at its worst case, ICC = 1: each scenario counts once"


@pytest.mark.parametrize("groups", [[], [[1, 0, 1]]])
def test_icc_needs_two_groups(groups: list[list[int]]) -> None:
    icc = icc1(groups)
    assert icc.value is None
    assert icc.reason == "needs at least 2 scenarios with scored repeats"
    assert icc.groups == len(groups)


def test_icc_needs_a_repeated_group() -> None:
    icc = icc1([[1], [0], [1]])
    assert icc.value is None
    assert icc.reason == "needs more than one repeat in some scenario"
    # One repeat a scenario: m~ = 1, so each repeat is its own unit whatever the ICC.
    assert (icc.design_effect, icc.effective_n, icc.note) == (1.0, 3.0, None)


def test_icc_rejects_an_empty_group() -> None:
    with pytest.raises(ValueError):
        icc1([[1, 0], []])


# -- Scenario summary --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "outcomes,verdict",
    [
        (["pass", "pass", "lane_infra"], Verdict.PASS),
        (["agent", "framework_runtime"], Verdict.FAIL),
        (["pass", "agent", "pass"], Verdict.FLAKY),
        (["lane_infra", "lane_infra"], Verdict.VOID),
        ([], Verdict.VOID),
    ],
)
def test_verdicts(outcomes: list[str], verdict: Verdict) -> None:
    assert summarize_scenario("s1", reps(*outcomes), 3).verdict is verdict


def test_void_repeats_never_enter_the_rate() -> None:
    s = summarize_scenario("s1", reps("pass", "lane_infra", "pass", "lane_infra", "pass"), 5)
    assert s.counts == Counts(requested=5, completed=5, void=2, scored=3, passed=3)
    assert s.pass_rate == 1.0
    assert s.ci == pytest.approx(proportion_confint(3, 3, method="wilson"))
    assert s.curve.k == (1, 2, 3)
    assert dict(s.layers) == {"pass": 3, "lane_infra": 2}


def test_framework_runtime_is_a_scored_failure() -> None:
    s = summarize_scenario("s1", reps("pass", "framework_runtime", "pass", "agent"), 4)
    assert s.counts.scored == 4 and s.counts.passed == 2
    assert s.pass_rate == 0.5
    assert sorted(s.scores) == [0, 0, 1, 1]
    assert s.verdict is Verdict.FLAKY


def test_all_void_and_interrupted() -> None:
    s = summarize_scenario("s1", reps("lane_infra"), 10)
    assert s.counts == Counts(requested=10, completed=1, void=1, scored=0, passed=0)
    assert s.verdict is Verdict.VOID
    assert s.pass_rate is None and s.ci is None and s.repeats_needed is None
    assert s.curve == KCurve((), (), ())
    assert s.trajectories == TrajectoryStats(0, 0.0, None, ())
    assert s.durations == DurationStats(None, None, None, None)


def test_layers_order_and_causes_sorting() -> None:
    repeats = [
        rep("agent", repeat=1, cause="wrong_output"),
        rep("framework_runtime", repeat=2, cause="timeout"),
        rep("lane_infra", repeat=3, cause="env_missing"),
        rep("pass", repeat=4),
        rep("agent", repeat=5, cause="wrong_output"),
        rep("framework_runtime", repeat=6, cause="bad_result"),
    ]
    s = summarize_scenario("s1", repeats, 6)
    assert s.layers == (("pass", 1), ("lane_infra", 1), ("framework_runtime", 2), ("agent", 2))
    assert s.causes == (
        ("wrong_output", 2), ("bad_result", 1), ("env_missing", 1), ("passed", 1), ("timeout", 1)
    )


def test_rejects_repeats_of_another_scenario() -> None:
    with pytest.raises(ValueError):
        summarize_scenario("s1", [rep("pass", scenario="s2")], 1)


def traj(*signatures: list[str], void: int = 0) -> dict:
    repeats = [rep("pass", repeat=i, trajectory=s) for i, s in enumerate(signatures, start=1)]
    # Void repeats carry a trajectory that must not count.
    repeats += [rep("lane_infra", repeat=100 + i, trajectory=["zzz:ok"]) for i in range(void)]
    return as_json(summarize_scenario("s1", repeats, len(repeats)).trajectories)


def test_trajectory_divergence() -> None:
    assert traj(["a:ok", "b:ok"], ["a:ok", "b:error"])["first_divergence"] == 2
    assert traj(["a:ok"], ["a:ok", "b:ok"])["first_divergence"] == 2
    assert traj(["a:ok", "b:ok"], ["a:ok"], ["a:ok", "b:ok", "c:ok"])["first_divergence"] == 2
    assert traj(["a:ok"], ["x:ok"])["first_divergence"] == 1
    assert traj([], ["a:ok"])["first_divergence"] == 1
    assert traj(["a:ok", "b:ok"], ["a:ok", "b:ok"], void=2)["first_divergence"] is None
    assert traj(["a:ok", "b:ok"])["first_divergence"] is None
    assert traj([], [])["first_divergence"] is None


def test_trajectory_distinct_and_entropy() -> None:
    one = traj(["a:ok"], ["a:ok"], ["a:ok"], void=1)
    assert one["distinct"] == 1 and one["entropy_bits"] == 0.0
    assert one["signatures"] == [[["a:ok"], 3]]

    half = traj(["a:ok"], ["a:ok", "b:ok"], ["a:ok"], ["a:ok", "b:ok"])
    assert half["distinct"] == 2 and half["entropy_bits"] == pytest.approx(1.0)

    # Counts 2,1,1 of 4: H = ½·1 + ¼·2 + ¼·2 = 1.5 bits.
    mixed = traj(["b:ok"], ["a:ok", "b:error"], ["a:ok", "b:ok"], ["a:ok", "b:ok"])
    assert mixed["distinct"] == 3 and mixed["entropy_bits"] == pytest.approx(1.5)
    assert mixed["signatures"] == [[["a:ok", "b:ok"], 2], [["a:ok", "b:error"], 1], [["b:ok"], 1]]


def test_trajectory_keeps_five_most_common() -> None:
    sigs = [[f"t{i}:ok"] for i in range(7)] + [["t6:ok"], ["t6:ok"], ["t3:ok"]]
    t = traj(*sigs)
    assert t["distinct"] == 7
    assert t["entropy_bits"] == pytest.approx(
        -sum(p * math.log2(p) for p in [3 / 10, 2 / 10] + [1 / 10] * 5)
    )
    assert [steps[0] for steps, _ in t["signatures"]] == ["t6:ok", "t3:ok", "t0:ok", "t1:ok",
                                                          "t2:ok"]


def test_durations_skip_void_repeats() -> None:
    durations = [3.0, 1.0, 4.0, 1.5, 9.0]
    repeats = [rep("agent", repeat=i, duration=d) for i, d in enumerate(durations)]
    repeats.append(rep("lane_infra", repeat=99, duration=1000.0))
    d = as_json(summarize_scenario("s1", repeats, 6).durations)
    # Sorted 1, 1.5, 3, 4, 9: median 3; p95 at rank 3.8 → 4 + 0.8·(9-4) = 8.
    assert d == pytest.approx({"p50": 3.0, "p95": 8.0, "mean": 3.7, "max": 9.0})
    assert all(type(v) is float for v in d.values())
    assert (d["p50"], d["p95"]) == tuple(np.percentile(durations, [50, 95]))


@pytest.mark.parametrize("size", [1, 2, 3, 7, 20, 101])
def test_duration_percentiles_are_numpys(size: int) -> None:
    durations = list(np.random.default_rng(size).exponential(2.0, size))
    repeats = [rep("pass", repeat=i, duration=d) for i, d in enumerate(durations)]
    d = summarize_scenario("s1", repeats, size).durations
    assert d.p50 == pytest.approx(np.percentile(durations, 50), rel=1e-12)
    assert d.p95 == pytest.approx(np.percentile(durations, 95), rel=1e-12)
    assert d.mean == pytest.approx(np.mean(durations), rel=1e-12) and d.max == max(durations)


def test_scenario_json_shape_round_trips() -> None:
    s = summarize_scenario("s1", reps("pass", "agent", "lane_infra", "pass"), 5)
    d = as_json(s)
    assert list(d) == [
        "id", "verdict", "counts", "pass_rate", "ci", "void_rate", "void_ci", "curve",
        "repeats_needed",
        "faulted", "consistency", "layers", "causes", "trajectories", "durations", "paths",
        "baseline", "ci_method",
    ]
    assert d["id"] == "s1" and d["verdict"] == "flaky"
    assert "scores" not in d
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert type(d["pass_rate"]) is float and all(type(x) is float for x in d["ci"])
    assert msgspec.convert(d, ScenarioStats) == s


# -- Lane aggregate ----------------------------------------------------------------------------


def test_lane_aggregate() -> None:
    a_scores, b_scores, c_scores = [1, 1, 0, 1], [1, 0], [0, 0, 0]
    scenarios = [
        summarize_scenario("a", scenario_from_scores("a", a_scores), 4),
        summarize_scenario(
            "b", scenario_from_scores("b", b_scores) + reps("lane_infra", scenario="b"), 4
        ),
        summarize_scenario("c", scenario_from_scores("c", c_scores), 4),
        summarize_scenario("v", reps("lane_infra", "lane_infra", scenario="v"), 4),
    ]
    lane = summarize_lane(scenarios)
    d = as_json(lane)
    assert list(d) == [
        "counts", "pass_rate", "ci", "clustered_rate", "void_rate", "void_ci", "curve", "tallies",
        "consistency", "fault_robustness", "layers", "causes", "verdicts", "icc",
        "clustered_method",
    ]
    assert lane.counts == Counts(requested=16, completed=12, void=3, scored=9, passed=4)
    assert lane.pass_rate == pytest.approx(4 / 9)
    assert lane.ci == pytest.approx(proportion_confint(4, 9, method="wilson"))
    assert lane.tallies == (Tally(2, 1, 1), Tally(3, 0, 1), Tally(4, 3, 1))
    # k runs to the smallest scored count (2); each value is the per-scenario brute-force mean.
    assert lane.curve.k == (1, 2)
    for k in (1, 2):
        per = [brute(s, k) for s in (a_scores, b_scores, c_scores)]
        assert lane.curve.pass_hat_k[k - 1] == pytest.approx(np.mean([p[0] for p in per]))
        assert lane.curve.pass_at_k[k - 1] == pytest.approx(np.mean([p[1] for p in per]))
    # pass^1: (3/4 + 1/2 + 0)/3; pass^2: (C(3,2)/C(4,2) + 0 + 0)/3 = (1/2)/3.
    assert lane.curve.pass_hat_k == pytest.approx((5 / 12, 1 / 6))
    assert dict(lane.layers) == {"pass": 4, "lane_infra": 3, "agent": 5}
    assert lane.causes == (("wrong_output", 5), ("passed", 4), ("spawn_failed", 3))
    assert lane.verdicts == (("pass", 0), ("fail", 1), ("flaky", 2), ("void", 1))
    ref = anova_icc([a_scores, b_scores, c_scores])
    assert lane.icc.groups == 3 and lane.icc.observations == 9
    assert lane.icc.value == pytest.approx(ref[0])
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert msgspec.convert(d, LaneStats) == lane


def test_lane_with_nothing_scored() -> None:
    lane = summarize_lane([summarize_scenario("v", reps("lane_infra", scenario="v"), 3)])
    assert lane.pass_rate is None and lane.ci is None and lane.clustered_rate is None
    assert lane.curve == KCurve((), (), ()) and lane.tallies == ()
    assert lane.verdicts == (("pass", 0), ("fail", 0), ("flaky", 0), ("void", 1))
    assert lane.icc.value is None
    assert lane.icc.reason == "needs at least 2 scenarios with scored repeats"
    assert (lane.void_rate, lane.void_ci) == (1.0, (wilson_interval(1, 1)[0], 1.0))
    empty = summarize_lane([])
    assert empty.counts.scored == 0 and empty.void_rate is None


def test_event_paths_count_distinct_hashes_and_find_the_first_difference() -> None:
    same = ("tool/call lookup@aa", "tool/result lookup@bb", "agent/result@cc")
    other = ("tool/call lookup@aa", "tool/call write@dd", "agent/result@cc")
    repeats = [dataclasses.replace(rep("pass", repeat=i), path_hash=h, path=p)
               for i, (h, p) in enumerate([("x", same), ("x", same), ("y", other)], start=1)]
    paths = summarize_scenario("s1", repeats, 3).paths
    assert (paths.distinct, paths.first_difference) == (2, 2)
    assert paths.events_there == ("tool/call write", "tool/result lookup")
    one = summarize_scenario("s1", repeats[:2], 2).paths
    assert (one.distinct, one.first_difference) == (1, None)


# -- edges the reports rely on -------------------------------------------------------------------


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match=r"need 0 <= successes <= n and n > 0, got 4/3"):
        wilson_interval(4, 3)
    with pytest.raises(ValueError, match=r"need 0 <= c <= n and 1 <= k <= n, got n=3 c=1 k=0"):
        pass_hat_k(3, 1, 0)
    with pytest.raises(ValueError) as empty:
        icc1([[1], []])
    assert str(empty.value) == "every group needs at least one observation"
    with pytest.raises(ValueError, match=r"repeats of other scenarios passed for 's1': \['s2'\]"):
        summarize_scenario("s1", reps("pass", scenario="s2"), 1)


def test_the_stored_curve_is_the_functions_at_its_k() -> None:
    n, c = 200, 50
    curve = summarize_scenario("s1", scenario_from_scores("s1", [1] * c + [0] * (n - c)), n).curve
    assert list(curve.pass_at_k) == [pass_at_k(n, c, k) for k in curve.k]
    assert list(curve.pass_hat_k) == [pass_hat_k(n, c, k) for k in curve.k]


def test_icc_with_one_degree_of_freedom_within() -> None:
    # Two scenarios, three repeats: N - a = 1 is enough for the within mean square.
    icc = icc1([[1, 0], [1]])
    assert icc.msw == 0.5 and icc.value is not None and icc.reason is None
    undefined = icc1([[1], [0]])
    assert (undefined.value, undefined.k0, undefined.groups, undefined.observations) == (
        None, 1.0, 2, 2)
    assert undefined.msb == 0.5 and undefined.msw is None


def with_paths(*paths: tuple[str, ...]) -> list[RepeatResult]:
    return [dataclasses.replace(rep("pass", repeat=i), path=path,
                                path_hash=hashlib.sha256("|".join(path).encode()).hexdigest())
            for i, path in enumerate(paths, start=1)]


@pytest.mark.parametrize("paths, expected", [
    ((("a@1",), ("a@1",)), EventPaths(1, None, ())),
    # One repeat stopped where the other went on.
    ((("a@1",), ("a@1", "b@2")), EventPaths(2, 2, ("(end)", "b"))),
    # Different kinds of event: their names; one kind, different content: the digests.
    ((("tool/call x@y@1",), ("tool/call x@z@2",)),
     EventPaths(2, 1, ("tool/call x@y", "tool/call x@z"))),
    ((("tool/call x@1",), ("tool/call x@2",)), EventPaths(2, 1, ("tool/call x@1",
                                                                 "tool/call x@2"))),
])
def test_where_event_paths_part(paths: tuple, expected: EventPaths) -> None:
    assert summarize_scenario("s1", with_paths(*paths), len(paths)).paths == expected


def test_paths_that_differ_past_the_steps_kept_have_no_first_difference() -> None:
    repeats = [dataclasses.replace(r, path=("a@1",)) for r in with_paths(("a@1", "b@2"),
                                                                         ("a@1", "c@3"))]
    stats = summarize_scenario("s1", repeats, 2)
    assert stats.paths == EventPaths(2, None, ())
    assert as_json(stats.paths) == {"distinct": 2, "first_difference": None,
                                                "events_there": []}


def test_the_first_difference_is_written_with_what_happened_there() -> None:
    stats = summarize_scenario("s1", with_paths(("a@1",), ("b@2",)), 2)
    assert as_json(stats.paths) == {"distinct": 2, "first_difference": 1,
                                                "events_there": ["a", "b"]}


def test_a_scenario_with_one_scored_repeat_bounds_the_lanes_k() -> None:
    one = summarize_scenario("s1", reps("pass"), 1)
    three = summarize_scenario("s2", reps("pass", "agent", "pass", scenario="s2"), 3)
    lane = summarize_lane([one, three])
    assert lane.curve.k == (1,) and lane.icc.observations == 4
    assert pass_hat_k_at(lane, 1) is not None and pass_hat_k_at(lane, 2) is None
    assert pass_hat_k_at(three, 3) is not None


def test_one_trajectory_has_an_entropy_of_plus_zero() -> None:
    """-0.0 equals 0.0, but it would be written, and shown, as "-0.0"."""
    stats = summarize_scenario("s1", reps("pass", "pass"), 2)
    assert json.dumps(stats.trajectories.entropy_bits) == "0.0"


def test_no_value_is_minus_zero() -> None:
    """pass@k of a scenario that never passed is 1 − e⁰: computed carelessly, −0.0."""
    text = msgspec.json.encode(summarize_lane([
        summarize_scenario("s1", reps("agent", "agent", "agent"), 3),
        summarize_scenario("s2", reps("agent", "agent", scenario="s2"), 2)]))
    assert b"-0.0" not in text
