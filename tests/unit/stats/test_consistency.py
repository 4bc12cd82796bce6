"""alk.stats.consistency against independent computations: scipy's Jensen-Shannon distance, a naive
recursive Levenshtein, the plain O(n^2) mean over every pair of repeats, numpy's coefficient of
variation, statsmodels' Wilson interval, and values worked by hand."""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections import Counter

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import binom
from statsmodels.stats.proportion import proportion_confint

from alk.estimate import Estimate
from alk.stats import distances as distances_module
from alk.stats import trajectories as trajectories_module
from alk.stats.bootstrap import MAX_RESAMPLE
from alk.stats.consistency import (
    lane_mean,
    outcome_consistency,
    resource_consistencies,
    resource_consistency,
    usable_resources,
)
from alk.stats.distances import js_distance, levenshtein
from alk.stats.robustness import fault_robustness, pooled_fault_robustness
from alk.stats.trajectories import (
    sequence_consistencies,
    sequence_consistency,
    step_tools,
    tool_use_consistencies,
    tool_use_consistency,
)

STEPS = ("lookup:ok", "lookup:error", "refund:ok", "notify:ok", "a:b:ok")


# -- independent implementations ------------------------------------------------------------


@functools.cache
def naive_levenshtein(a: tuple, b: tuple) -> int:
    @functools.cache
    def d(i: int, j: int) -> int:
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return d(len(a), len(b))


def naive_sequence_mean(trajectories: list) -> float:
    kept = [t for t in trajectories if t is not None]
    sims = [1.0 if not a and not b else 1 - naive_levenshtein(a, b) / max(len(a), len(b))
            for i, a in enumerate(kept) for j, b in enumerate(kept) if i != j]
    return sum(sims) / len(sims)


def tool_vector(steps: tuple, tools: list[str]) -> list[float]:
    names = [step.rpartition(":")[0] for step in steps]
    return [names.count(tool) for tool in tools]


def naive_tool_use(trajectories: list) -> float:
    kept = [t for t in trajectories if t is not None]
    tools = sorted({s.rpartition(":")[0] for t in kept for s in t})

    @functools.cache
    def distance(a: tuple, b: tuple) -> float:
        if not a or not b:  # no tool call: alike when both, else as far as can be
            return 0.0 if not a and not b else 1.0
        return jensenshannon(tool_vector(a, tools), tool_vector(b, tools), base=2)

    distances = [distance(a, b) for i, a in enumerate(kept) for j, b in enumerate(kept)
                 if i != j]
    return 1 - sum(distances) / len(distances)


def random_trajectories(rnd: random.Random, n: int, variants: int) -> list:
    shapes = [tuple(rnd.choice(STEPS) for _ in range(rnd.randint(0, 5))) for _ in range(variants)]
    return [rnd.choice(shapes) if rnd.random() > 0.1 else None for _ in range(n)]


# -- outcome consistency --------------------------------------------------------------------


def test_outcome_consistency_by_hand() -> None:
    # 19/20: p = 0.95, C = 1 - 4·0.95·0.05 = 1 - 0.19 = 0.81 = (2·0.95 - 1)^2 = 0.9^2.
    assert outcome_consistency(19, 20).value == pytest.approx(0.81)
    # 10/20: p = 0.5, C = 0; Wilson [0.299, 0.701] holds 0.5, so the interval starts at 0 and
    # ends at (2·0.299 - 1)^2 = 0.161.
    half = outcome_consistency(10, 20)
    assert (half.value, half.low) == (0.0, 0.0)
    assert half.high == pytest.approx(0.1611, abs=1e-4)
    assert outcome_consistency(1, 1) is None and outcome_consistency(0, 0) is None


def test_outcome_interval_is_wilson_mapped_not_a_degenerate_bootstrap() -> None:
    # 20/20: every bootstrap draw passes 20 times, so a bootstrap would say [1, 1]. Wilson's
    # lower bound for p is 0.8389, and (2·0.8389 - 1)^2 = 0.4594.
    for passed, n in ((20, 20), (0, 20), (19, 20), (3, 20), (7, 9)):
        lo, hi = proportion_confint(passed, n, alpha=0.05, method="wilson")
        ends = sorted(((2 * lo - 1) ** 2, (2 * hi - 1) ** 2))
        estimate = outcome_consistency(passed, n)
        assert estimate.low == pytest.approx(0.0 if lo <= 0.5 <= hi else ends[0], abs=1e-12)
        assert estimate.high == pytest.approx(ends[1], abs=1e-12)
    assert outcome_consistency(20, 20).low == pytest.approx(0.4594, abs=1e-4)


def test_outcome_interval_holds_c_out_at_least_as_often_as_wilson_holds_p() -> None:
    # Exact coverage over every count c of Binomial(20, p), for a grid of p.
    n = 20
    estimates = [outcome_consistency(c, n) for c in range(n + 1)]
    wilson = [proportion_confint(c, n, alpha=0.05, method="wilson") for c in range(n + 1)]
    for p in np.linspace(0.01, 0.99, 99):
        target = (2 * p - 1) ** 2
        pmf = binom.pmf(range(n + 1), n, p)
        ours = sum(w for w, e in zip(pmf, estimates) if e.low <= target <= e.high)
        theirs = sum(w for w, (lo, hi) in zip(pmf, wilson) if lo <= p <= hi)
        assert ours >= theirs - 1e-9, p


# -- trajectory consistency -----------------------------------------------------------------


def test_step_tools_reads_worker_and_gateway_steps() -> None:
    assert step_tools("lookup_order:ok") == ("lookup_order",)
    assert step_tools("mcp:search:error") == ("mcp:search",)  # the part before the last ':'
    assert step_tools("200:lookup,refund", gateway=True) == ("lookup", "refund")
    assert step_tools("200:text", gateway=True) == ("text",)


def test_js_distance_matches_scipy() -> None:
    # (1/2, 1/2) against (1, 0): the mixture is (3/4, 1/4), JSD = H(3/4, 1/4) - (1 + 0)/2
    # = 0.811278 - 0.5 = 0.311278 bits, distance sqrt(0.311278) = 0.557923.
    assert js_distance([1, 1], [1, 0]) == pytest.approx(0.557923, abs=1e-6)
    rng = np.random.default_rng(1)
    for _ in range(50):
        p, q = rng.integers(0, 4, 6), rng.integers(0, 4, 6)
        if p.sum() and q.sum():
            assert js_distance(p, q) == pytest.approx(jensenshannon(p, q, base=2), abs=1e-12)
    assert js_distance([1, 0], [0, 3]) == 1.0  # no tool in common
    assert js_distance([4, 6, 4, 4, 8, 5], [4, 6, 4, 4, 8, 5]) == 0.0  # not 1e-8 from rounding
    assert js_distance([0, 0], [0, 2]) == 1.0 and js_distance([0, 0], [0, 0]) == 0.0


def test_levenshtein_matches_a_naive_recursion() -> None:
    assert levenshtein(("a", "b", "c"), ("a", "c")) == 1
    rnd = random.Random(2)
    pairs = [(tuple(rnd.choice("abc") for _ in range(rnd.randint(0, 7))),
              tuple(rnd.choice("abc") for _ in range(rnd.randint(0, 7)))) for _ in range(300)]
    for a, b in pairs:
        assert levenshtein(a, b) == naive_levenshtein(a, b), (a, b)
    # All at once, as a scenario's pairs are computed: pairs of every size in one batch.
    items = [sequence for pair in pairs for sequence in pair]
    index = np.arange(0, len(items), 2)
    similarities = distances_module.similarities(items, index, index + 1)
    for (a, b), s in zip(pairs, similarities):
        expected = 1.0 if not a and not b else 1 - naive_levenshtein(a, b) / max(len(a), len(b))
        assert s == pytest.approx(expected, abs=1e-12)


def test_grouped_means_equal_the_mean_over_every_pair_of_repeats() -> None:
    rnd = random.Random(3)
    for _ in range(40):
        trajectories = random_trajectories(rnd, rnd.randint(2, 40), rnd.randint(1, 6))
        if sum(t is not None for t in trajectories) < 2:
            continue
        steps, tools = sequence_consistency(trajectories), tool_use_consistency(trajectories)
        assert steps.value == pytest.approx(naive_sequence_mean(trajectories), abs=1e-12)
        assert tools.value == pytest.approx(naive_tool_use(trajectories), abs=1e-12)


def test_trajectory_consistency_by_hand() -> None:
    # 5 x (a, b), 3 x (a, b:error), 2 x (a): 90 ordered pairs of repeats.
    trajectories = [("a:ok", "b:ok")] * 5 + [("a:ok", "b:error")] * 3 + [("a:ok",)] * 2
    # Steps: same sequence 5·4 + 3·2 + 2·1 = 28 pairs at 1; the other 62 pairs all differ by
    # one edit over a longest of 2, 0.5 each: (28 + 31) / 90 = 0.65556.
    assert sequence_consistency(trajectories).value == pytest.approx(59 / 90)
    # Tools: the first 8 repeats use a and b once each (1/2, 1/2), the last 2 only a: 32
    # ordered pairs at distance 0.557923 (see test_js_distance_matches_scipy), the rest 0.
    expected = 1 - 32 * math.sqrt(0.8112781244591328 - 0.5) / 90
    assert tool_use_consistency(trajectories).value == pytest.approx(expected, abs=1e-12)


def test_identical_repeats_are_not_proof_that_the_next_one_matches() -> None:
    # 12 repeats alike: a repeat may still differ with a chance up to Wilson's upper bound
    # for 0/12, z^2 / (12 + z^2) = 3.8415 / 15.8415 = 0.2425; two repeats are then alike at
    # least (1 - 0.2425)^2 = 0.5738 of the time. A bootstrap would say [1, 1].
    same = [("lookup:ok", "refund:ok")] * 12
    unseen = proportion_confint(0, 12, alpha=0.05, method="wilson")[1]
    for metric in (sequence_consistency, tool_use_consistency):
        estimate = metric(same)
        assert (estimate.value, estimate.high) == (1.0, 1.0)
        assert estimate.low == pytest.approx((1 - unseen) ** 2, abs=1e-12)
        assert estimate.low == pytest.approx(0.5738, abs=1e-4)
    assert sequence_consistency([("a:ok",)] * 100_000).low > 0.9999
    # Two repeats that differ say as little: half the resamples draw one repeat twice, alike.
    assert sequence_consistency([("a:ok",), ("b:ok",)]) == Estimate(0.0, 0.0, 1.0)
    # A repeat whose steps were not recorded (None) is left out; one recorded is not enough.
    assert sequence_consistency([("a:ok",), None, None]) is None
    assert tool_use_consistency([]) is None
    # Steps in another order use the same tools as often: different sequences, same use.
    assert tool_use_consistency([("a:ok", "b:ok"), ("b:ok", "a:ok")]).value == 1.0
    assert sequence_consistency([("a:ok", "b:ok"), ("b:ok", "a:ok")]).value == 0.0


def test_gateway_trajectories_compare_the_tools_of_each_reply() -> None:
    # The same tools, answered with different statuses: the same use for the gateway form.
    trajectories = [("200:lookup", "200:text"), ("500:lookup", "200:text")]
    assert tool_use_consistency(trajectories, gateway=True).value == 1.0
    assert tool_use_consistency(trajectories).value < 1.0  # read as worker steps: 200 vs 500


def test_bootstrap_is_seeded_and_its_interval_holds_the_point() -> None:
    rnd = random.Random(4)
    for n in (8, 60, 400):  # shared resampling counts, and binomial draws past them
        trajectories = random_trajectories(rnd, n, 4)
        for metric in (sequence_consistency, tool_use_consistency):
            first, again = metric(trajectories, seed=7), metric(trajectories, seed=7)
            assert first == again
            assert first.low <= first.value <= first.high
            assert first.high - first.low > 0
            if n > 8:  # 8 repeats have few distinct draws: two seeds may well agree
                assert metric(trajectories, seed=8) != first


def test_batches_give_each_scenario_what_it_gets_alone() -> None:
    rnd = random.Random(5)
    scenarios = [random_trajectories(rnd, rnd.choice((5, 10, 10, 300)), rnd.randint(1, 4))
                 for _ in range(30)]
    for one, many in ((sequence_consistency, sequence_consistencies),
                      (tool_use_consistency, tool_use_consistencies)):
        for alone, batched in zip([one(s, seed=3) for s in scenarios], many(scenarios, seed=3)):
            assert (alone is None) == (batched is None)
            if alone is not None:
                assert batched.value == pytest.approx(alone.value, abs=1e-12)
                assert batched.low == pytest.approx(alone.low, abs=1e-12)
                assert batched.high == pytest.approx(alone.high, abs=1e-12)


@pytest.mark.slow
def test_many_distinct_trajectories_are_sampled_without_bias(monkeypatch) -> None:
    # Past MAX_DISTINCT distinct sequences, the most common are compared and a seeded sample
    # of the rest weighted by the inverse of its chance: over seeds, the estimates average to
    # the mean over every pair.
    monkeypatch.setattr(trajectories_module, "MAX_DISTINCT", 20)
    rnd = random.Random(6)
    shapes = [tuple(rnd.choice(STEPS) for _ in range(rnd.randint(1, 4))) for _ in range(40)]
    trajectories = [rnd.choice(shapes) for _ in range(150)]
    assert len(set(trajectories)) > 20
    for metric, exact, tolerance in ((sequence_consistency, naive_sequence_mean, 0.008),
                                     (tool_use_consistency, naive_tool_use, 0.02)):
        values = [metric(trajectories, seed=s).value for s in range(150)]
        assert len(set(values)) > 1
        # About three standard errors of the mean of 150 estimates.
        assert np.mean(values) == pytest.approx(exact(trajectories), abs=tolerance)


@pytest.mark.slow
def test_a_lane_shares_its_budget_of_pairs(monkeypatch) -> None:
    # LANE_PAIRS over 8 scenarios: each may compare sqrt(2·800/8) = 14 distinct sequences, so
    # a scenario of 30 is sampled in the batch (unbiased over seeds), and exact alone.
    monkeypatch.setattr(trajectories_module, "LANE_PAIRS", 800)
    rnd = random.Random(12)
    shapes = [tuple(rnd.choice(STEPS) for _ in range(rnd.randint(1, 4))) for _ in range(30)]
    lane = [[rnd.choice(shapes) for _ in range(100)] for _ in range(8)]
    exact = naive_sequence_mean(lane[0])
    assert sequence_consistency(lane[0]).value == pytest.approx(exact, abs=1e-12)
    values = [sequence_consistencies(lane, seed=s)[0].value for s in range(100)]
    assert len(set(values)) > 1
    assert np.mean(values) == pytest.approx(exact, abs=0.01)


def test_sampled_trajectories_keep_the_bootstrap_centred(monkeypatch) -> None:
    # The repeats of trajectories left out of the comparison are drawn as one count; their
    # pairs with the same trajectory (similarity 1) are added at their expected number. Here
    # 4 of 8 equally common sequences are left out: 4·50·49 of 400·399 ordered pairs, 6%.
    monkeypatch.setattr(trajectories_module, "MAX_DISTINCT", 4)
    monkeypatch.setattr(trajectories_module, "MIN_DISTINCT", 4)
    rnd = random.Random(9)
    shapes = sorted({tuple(rnd.choice(STEPS) for _ in range(3)) for _ in range(40)})[:8]
    trajectories = [shape for shape in shapes for _ in range(50)]
    offsets = [(e.low + e.high) / 2 - e.value
               for e in (sequence_consistency(trajectories, seed=s) for s in range(40))]
    assert abs(np.mean(offsets)) < 0.02


def test_long_sequences_compare_a_weighted_share_of_their_pairs(monkeypatch) -> None:
    # Past MAX_PAIR_CELLS of table, a seeded share q of the pairs, each weighing 1/q.
    monkeypatch.setattr(distances_module, "MAX_PAIR_CELLS", 60)
    rnd = random.Random(7)
    shapes = [tuple(rnd.choice(STEPS) for _ in range(rnd.randint(3, 6))) for _ in range(6)]
    trajectories = [rnd.choice(shapes) for _ in range(20)]
    values = [sequence_consistency(trajectories, seed=s).value for s in range(400)]
    assert len(set(values)) > 1
    assert np.mean(values) == pytest.approx(naive_sequence_mean(trajectories), abs=0.015)


def test_a_hundred_thousand_repeats_are_counted_exactly() -> None:
    # 60,000 x (a, b) and 40,000 x (a): pairs across differ by one edit in 2, similarity 0.5.
    n = 100_000
    trajectories = [("a:ok", "b:ok")] * 60_000 + [("a:ok",)] * 40_000
    same = 60_000 * 59_999 + 40_000 * 39_999
    expected = (same + 0.5 * (n * (n - 1) - same)) / (n * (n - 1))
    estimate = sequence_consistency(trajectories)
    assert estimate.value == pytest.approx(expected, abs=1e-12)
    assert estimate.low < estimate.value < estimate.high


# -- resource consistency -------------------------------------------------------------------


def test_resource_consistency_uses_numpy_s_coefficient_of_variation() -> None:
    rng = np.random.default_rng(8)
    duration, cpu = rng.gamma(4.0, 0.5, 30), rng.gamma(9.0, 0.1, 30)
    cvs = [np.std(x, ddof=1) / np.mean(x) for x in (duration, cpu)]
    estimate = resource_consistency({"duration_s": list(duration), "cpu_s": list(cpu)})
    assert estimate.value == pytest.approx(math.exp(-np.mean(cvs)), abs=1e-12)
    assert estimate.low < estimate.value < estimate.high
    # By hand: durations 1 and 3: mean 2, sample sd sqrt(2), CV 0.7071, exp(-0.7071) = 0.4931.
    # Its bootstrap, every resample with its chance: (1, 1) and (3, 3), 1/4 each, CV 0; (1, 3),
    # 1/2, CV 0.7071. So half the mass at 0.4931 and half at 1: the interval is [0.4931, 1].
    two = resource_consistency({"d": [1.0, 3.0]})
    assert two.value == pytest.approx(0.4931, abs=1e-4)
    assert (two.low, two.high) == (pytest.approx(two.value), 1.0)


def test_resources_without_a_cv_are_left_out_and_missing_values_skipped() -> None:
    values = [1.0, 1.2, 0.9, 1.1]
    resources = {"duration_s": values, "model_calls": [0, 0, 0, 0], "cpu_s": [None] * 3 + [1.0],
                 "peak_rss_mb": [50.0, None, 55.0, 52.0]}
    assert usable_resources(resources) == ("duration_s", "peak_rss_mb")
    rss = np.array([50.0, 55.0, 52.0])
    cvs = [np.std(values, ddof=1) / np.mean(values), np.std(rss, ddof=1) / np.mean(rss)]
    estimate = resource_consistency(resources)
    assert estimate.value == pytest.approx(math.exp(-np.mean(cvs)), abs=1e-12)
    assert estimate.low <= estimate.value <= estimate.high
    assert resource_consistency({"model_calls": [0, 0, 0]}) is None
    assert resource_consistency({}) is None


def test_resource_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="one value .* per repeat"):
        resource_consistency({"duration_s": [1.0, 2.0], "cpu_s": [1.0]})
    with pytest.raises(ValueError, match="'cpu_s'.*finite and >= 0.*repeat 2"):
        resource_consistency({"duration_s": [1.0, 2.0], "cpu_s": [1.0, -1.0]})


def test_resource_bootstrap_is_seeded_and_the_same_for_a_batch() -> None:
    rng = np.random.default_rng(9)
    scenarios = [{"duration_s": list(rng.gamma(3.0, 1.0, n)), "cpu_s": list(rng.gamma(3, 1, n))}
                 for n in (5, 5, 12, 300, 5)]
    scenarios[1]["cpu_s"][2] = None  # a missing value: its own path through the batch
    alone = [resource_consistency(s, seed=2) for s in scenarios]
    assert alone == [resource_consistency(s, seed=2) for s in scenarios]
    assert alone[2] != resource_consistency(scenarios[2], seed=3)
    for single, batched in zip(alone, resource_consistencies(scenarios, seed=2)):
        assert batched.value == pytest.approx(single.value, abs=1e-12)
        assert batched.low == pytest.approx(single.low, abs=1e-12)
        assert batched.high == pytest.approx(single.high, abs=1e-12)


def brute_force_interval(values: list, statistic) -> tuple[float, float]:
    """The 2.5% and 97.5% points of a statistic over all n^n ordered resamples of n values."""
    n = len(values)
    draws = sorted(statistic([values[i] for i in pick])
                   for pick in itertools.product(range(n), repeat=n))
    return draws[math.ceil(0.025 * len(draws)) - 1], draws[math.ceil(0.975 * len(draws)) - 1]


def test_few_repeats_get_the_exact_bootstrap_whatever_the_seed() -> None:
    # Up to 6 repeats, every resample is weighed by its chance: the same as all n^n ordered
    # resamples, each 1/n^n, and no seed changes it.
    durations = [1.0, 1.4, 0.9, 2.5, 1.1]

    def resource(sample: list) -> float:
        mean = np.mean(sample)
        return math.exp(-np.std(sample, ddof=1) / mean)

    estimate = resource_consistency({"d": durations}, seed=1)
    assert (estimate.low, estimate.high) == pytest.approx(brute_force_interval(durations,
                                                                                resource))
    assert resource_consistency({"d": durations}, seed=2) == estimate
    # A trajectory metric's resample leaves out its pairs that are one repeat drawn twice, as
    # many as expected given each trajectory's count c in the data and w in the resample:
    # w(w - 1)/c of them, each alike.
    trajectories = [("a:ok",), ("a:ok", "b:ok"), ("a:ok",), ("b:ok",), ()]
    counts = Counter(trajectories)

    def without_repeated(sample: list) -> float:
        drawn = Counter(sample)
        repeated = sum(w * (w - 1) / counts[t] for t, w in drawn.items())
        pairs = len(sample) * (len(sample) - 1)
        if repeated >= pairs:  # one repeat drawn every time: nothing else to compare
            return naive_sequence_mean(sample)
        return (naive_sequence_mean(sample) * pairs - repeated) / (pairs - repeated)

    steps = sequence_consistency(trajectories, seed=1)
    assert (steps.low, steps.high) == pytest.approx(brute_force_interval(trajectories,
                                                                          without_repeated))
    assert sequence_consistency(trajectories, seed=2) == steps


def test_trajectory_intervals_hold_the_truth_95_times_in_100() -> None:
    # Every sample of 10 repeats from four trajectories of known chances (286 of them, each
    # with its multinomial chance): the exact share whose interval holds the population's
    # mean pairwise value. Counting a resample's repeat drawn twice as a pair lifted the
    # intervals: 13% of the chance had them above the truth.
    shapes = [("a:ok", "b:ok"), ("a:ok", "b:error"), ("a:ok",), ("c:ok", "a:ok", "b:ok")]
    chances, n = np.array([0.55, 0.25, 0.12, 0.08]), 10
    samples, weights = [], []
    for bars in itertools.combinations(range(n + 3), 3):
        parts = np.diff([-1, *bars, n + 3]) - 1
        samples.append([shapes[k] for k, c in enumerate(parts) for _ in range(c)])
        weights.append(math.factorial(n) / math.prod(math.factorial(c) for c in parts)
                       * np.prod(chances ** parts))
    assert sum(weights) == pytest.approx(1.0)
    for many, naive in ((sequence_consistencies, naive_sequence_mean),
                        (tool_use_consistencies, naive_tool_use)):
        truth = sum(chances[i] * chances[j] * naive([shapes[i], shapes[j]])
                    for i in range(4) for j in range(4))
        estimates = many(samples, seed=1)
        above = sum(w for w, e in zip(weights, estimates) if truth < e.low)
        below = sum(w for w, e in zip(weights, estimates) if truth > e.high)
        assert above < 0.04 and below < 0.04, (many.__name__, above, below)


def test_many_repeats_resample_m_of_n_and_narrow_the_spread() -> None:
    # m-out-of-n: draws of MAX_RESAMPLE repeats, the spread around the point scaled by
    # sqrt(m/n); the interval still narrows like 1/sqrt(n), as a full bootstrap's would.
    rng = np.random.default_rng(10)
    values = rng.gamma(4.0, 0.5, 40 * MAX_RESAMPLE)
    small = resource_consistency({"d": list(values[:MAX_RESAMPLE])})
    large = resource_consistency({"d": list(values)})
    assert large.value == pytest.approx(math.exp(-np.std(values, ddof=1) / np.mean(values)))
    ratio = (large.high - large.low) / (small.high - small.low)
    assert ratio == pytest.approx(math.sqrt(1 / 40), rel=0.35)


# -- fault robustness -----------------------------------------------------------------------


def test_fault_robustness_by_hand() -> None:
    # 15/20 under faults, 18/20 without: R = 0.75 / 0.9 = 0.8333.
    estimate = fault_robustness(15, 20, 18, 20, seed=1)
    assert estimate.value == pytest.approx(0.75 / 0.9)
    assert estimate.low < estimate.value < estimate.high
    assert estimate == fault_robustness(15, 20, 18, 20, seed=1)
    assert fault_robustness(15, 20, 0, 20) is None
    assert fault_robustness(0, 0, 5, 20) is None and fault_robustness(5, 20, 0, 0) is None
    with pytest.raises(ValueError, match="passed <= scored"):
        fault_robustness(21, 20, 5, 20)


def test_fault_robustness_of_small_pools_is_the_exact_bootstrap() -> None:
    # 4/6 under faults, 5/6 without: 7 x 7 outcomes, each with its binomial chance.
    ratios, chances = [], []
    for f in range(7):
        for b in range(7):
            ratios.append(math.inf if b == 0 else (f / 6) / (b / 6))
            chances.append(binom.pmf(f, 6, 4 / 6) * binom.pmf(b, 6, 5 / 6))
    order = np.argsort(ratios)
    cumulative = np.cumsum(np.array(chances)[order])
    low = np.array(ratios)[order][np.argmax(cumulative >= 0.025)]
    high = np.array(ratios)[order][np.argmax(cumulative >= 0.975)]
    estimate = fault_robustness(4, 6, 5, 6, seed=1)
    assert (estimate.value, estimate.low, estimate.high) == pytest.approx((0.8, low, high))
    assert fault_robustness(4, 6, 5, 6, seed=2) == estimate


def test_fault_robustness_is_not_clamped_and_says_when_it_is_unbounded() -> None:
    # More passes under faults is chance: R = 1.0 / 0.9 = 1.11 stays above 1.
    assert fault_robustness(20, 20, 18, 20).value == pytest.approx(1 / 0.9)
    # A baseline of 2/20: a draw with no baseline pass has probability 0.9^20 = 12% > 2.5%,
    # so no upper bound can be given.
    assert fault_robustness(3, 20, 2, 20).high == math.inf


def test_pooled_fault_robustness_draws_scenarios_then_repeats() -> None:
    # Baseline scenarios that pass always or never: pooled 40/80 = 0.5, but four scenarios
    # say little. Faulted: 30/60 = 0.5, the same mix. R = 1.
    baseline = [(20, 20), (0, 20), (20, 20), (0, 20)]
    faulted = [(20, 20), (0, 20), (10, 20)]
    pooled = pooled_fault_robustness(faulted, baseline, seed=5)
    assert pooled.value == pytest.approx(1.0)
    assert pooled == pooled_fault_robustness(faulted, baseline, seed=5)
    naive = fault_robustness(30, 60, 40, 80, seed=5)  # as if 140 independent repeats
    assert pooled.high - pooled.low > 2 * (naive.high - naive.low)
    # One scenario a pool: the binomial bootstrap, about as wide as fault_robustness's.
    alone = pooled_fault_robustness([(30, 40)], [(36, 40)], seed=5)
    binomial = fault_robustness(30, 40, 36, 40, seed=5)
    assert alone.value == pytest.approx(binomial.value)
    assert alone.low == pytest.approx(binomial.low, abs=0.05)
    assert alone.high == pytest.approx(binomial.high, abs=0.05)
    assert pooled_fault_robustness([(3, 5)], [(0, 5), (0, 0)]) is None
    assert pooled_fault_robustness([], [(3, 5)]) is None
    with pytest.raises(ValueError, match="passed <= scored"):
        pooled_fault_robustness([(6, 5)], [(3, 5)])


# -- a lane ---------------------------------------------------------------------------------


def test_lane_mean_averages_scenarios_and_resamples_them() -> None:
    points = [Estimate(v, v, v) for v in (0.2, 0.5, 0.9)]
    estimate = lane_mean([points[0], None, points[1], points[2]], seed=4)
    assert estimate.value == pytest.approx(1.6 / 3)
    # Two scenarios a, b: a draw is (a, a), (a, b) or (b, b), the first and last 1/4 each, so
    # the 2.5% and 97.5% draws are a and b themselves.
    assert lane_mean(points[:2]) == Estimate(0.35, 0.2, 0.5)
    assert lane_mean([None, points[1]]) == points[1]  # one scenario: its own estimate
    assert lane_mean([None]) is None
    assert lane_mean(points, seed=4) == estimate


def test_lane_mean_of_many_scenarios_agrees_with_the_normal_interval() -> None:
    # Multinomial resamples up to 200 scenarios, Poisson ones up to MAX_RESAMPLE, m-out-of-n
    # past it: each way, the interval of a mean of k points is close to mean ± 1.96·sd/sqrt(k).
    rng = np.random.default_rng(11)
    for k in (150, 1_000, 10_000):
        values = rng.uniform(0.0, 1.0, k)
        estimate = lane_mean([Estimate(v, v, v) for v in values])
        half = 1.959964 * np.std(values, ddof=1) / math.sqrt(k)
        assert estimate.value == pytest.approx(values.mean())
        assert estimate.low == pytest.approx(values.mean() - half, abs=half * 0.2)
        assert estimate.high == pytest.approx(values.mean() + half, abs=half * 0.2)

