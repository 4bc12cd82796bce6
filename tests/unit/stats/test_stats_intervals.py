"""The intervals of alk.stats.summary and alk.estimate against independent computations: the F
quantile against scipy, Wilson against statsmodels, the ICC's interval against McGraw & Wong written
out with scipy, Kish's design effect and the repeats needed to see a failure by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import f as f_dist
from scipy.stats import norm
from scipy.stats import t as t_dist
from statsmodels.stats.proportion import proportion_confint

from alk.estimate import Estimate, f_quantile, wilson_bounds, wilson_estimate
from alk.records import RepeatResult
from alk.stats.icc import FEW_SCENARIOS, icc1
from alk.stats.records import RepeatsNeeded
from alk.stats.summary import repeats_to_see, summarize_lane, summarize_scenario

from helpers.results import reps


def repeats(scenario: str, passed: int, failed: int = 0, void: int = 0) -> list[RepeatResult]:
    return reps(*["pass"] * passed, *["agent"] * failed, *["lane_infra"] * void,
                scenario=scenario)


def lane_of(*scenarios: tuple[int, int]):
    """A lane whose scenarios passed and failed these many scored repeats."""
    return summarize_lane([summarize_scenario(f"s{i}", repeats(f"s{i}", p, f), p + f)
                           for i, (p, f) in enumerate(scenarios)])


def wilson(count: float, n: float) -> tuple[float, float]:
    return proportion_confint(count, n, alpha=0.05, method="wilson")


# -- the F quantile ------------------------------------------------------------------------------

# Small, fractional and large degrees of freedom: an ICC's are a − 1 and N − a, past 10,000
# scenarios and 1,000,000 repeats; fractional ones check the code does not assume integers.
DEGREES = (0.5, 1, 1.5, 2, 3, 4.7, 10, 19, 57.3, 99, 1234.5, 9999, 99_990, 123_456.7,
           1_000_000.5)


@pytest.mark.parametrize("d1", DEGREES)
def test_f_quantile_matches_scipy(d1: float) -> None:
    for d2, q in itertools.product(DEGREES, (0.025, 0.5, 0.975, 0.999)):
        assert f_quantile(q, d1, d2) == pytest.approx(f_dist.ppf(q, d1, d2), rel=1e-10), (d2, q)


@pytest.mark.parametrize("q,d1,d2", [(0.0, 1, 1), (1.0, 1, 1), (0.5, 0, 1), (0.5, 1, -2)])
def test_f_quantile_refuses_what_has_none(q: float, d1: float, d2: float) -> None:
    with pytest.raises(ValueError, match="need 0 < q < 1 and positive degrees of freedom"):
        f_quantile(q, d1, d2)


# -- Wilson and Estimate -------------------------------------------------------------------------


@pytest.mark.parametrize("rate,n", [(0.5, 6.0), (0.3, 2.297), (0.0, 3.5), (1.0, 1.2),
                                    (0.41, 123.4)])
def test_wilson_at_a_fractional_n_matches_statsmodels(rate: float, n: float) -> None:
    assert wilson_bounds(rate, n) == pytest.approx(wilson(rate * n, n), abs=1e-12)


def test_an_estimate_is_widened_to_hold_its_point() -> None:
    assert Estimate.covering(0.0, 0.003, 0.84) == Estimate(0.0, 0.0, 0.84)
    assert Estimate.covering(0.9, 0.1, 0.8) == Estimate(0.9, 0.1, 0.9)
    assert Estimate.covering(0.5, 0.1, 0.8) == Estimate(0.5, 0.1, 0.8)
    with pytest.raises(ValueError, match="low <= value <= high"):
        Estimate(0.5, 0.6, 0.7)


# -- void rate -----------------------------------------------------------------------------------


def test_void_rate_per_scenario_and_lane_is_wilson() -> None:
    a = summarize_scenario("a", repeats("a", 15, 2, void=3), 20)
    b = summarize_scenario("b", repeats("b", 19, 0, void=1), 20)
    lane = summarize_lane([a, b])
    # Shaped as the pass rate is: a float, and its interval beside it.
    for stats in (a, b, lane):
        assert type(stats.void_rate) is type(stats.pass_rate) is float
        assert type(stats.void_ci) is type(stats.ci) is tuple
    assert a.void_rate == 3 / 20
    assert a.void_ci == pytest.approx(wilson(3, 20), abs=1e-12)
    assert b.void_ci == pytest.approx(wilson(1, 20), abs=1e-12)
    assert lane.void_rate == 4 / 40
    assert lane.void_ci == pytest.approx(wilson(4, 40), abs=1e-12)
    # Nothing ran: no rate, rather than 0/0.
    nothing = summarize_scenario("c", [], 20)
    assert nothing.void_rate is None and nothing.void_ci is None
    assert wilson_estimate(0, 0) is None


# -- ICC(1) and its interval ---------------------------------------------------------------------


def mcgraw_wong(groups: list[list[int]]) -> tuple[float, float, float]:
    """ICC(1) and its 95% interval written out from the ANOVA table with scipy's F quantiles
    (McGraw & Wong 1996, case 1; k0 for unequal sizes)."""
    a = len(groups)
    sizes = np.array([len(g) for g in groups], dtype=float)
    big_n = sizes.sum()
    allx = np.concatenate([np.asarray(g, dtype=float) for g in groups])
    ssw = sum(((np.asarray(g) - np.mean(g)) ** 2).sum() for g in groups)
    ssb = ((allx - allx.mean()) ** 2).sum() - ssw
    msb, msw = ssb / (a - 1), ssw / (big_n - a)
    k0 = (big_n - (sizes**2).sum() / big_n) / (a - 1)
    f0 = msb / msw
    f_low = f0 / f_dist.ppf(0.975, a - 1, big_n - a)
    f_high = f0 * f_dist.ppf(0.975, big_n - a, a - 1)
    return ((f0 - 1) / (f0 + k0 - 1), (f_low - 1) / (f_low + k0 - 1),
            (f_high - 1) / (f_high + k0 - 1))


@pytest.mark.parametrize("groups", [
    [[1, 1, 1, 0], [0, 0, 1, 0], [1, 1, 1, 1]],  # equal sizes
    [[1, 1, 1, 1], [0, 0], [1, 0]],  # unequal: k0
    [[1, 0], [0, 1]],  # a negative ICC
    [[1] * 19 + [0], [1] * 10 + [0] * 10, [0] * 3 + [1] * 17, [1] * 20, [0, 1] * 10],
])
def test_icc_interval_matches_mcgraw_wong_with_scipy(groups: list[list[int]]) -> None:
    icc = icc1(groups)
    value, low, high = mcgraw_wong(groups)
    assert icc.value == pytest.approx(value, rel=1e-12, abs=1e-12)
    assert icc.ci == pytest.approx((low, high), rel=1e-9, abs=1e-12)
    assert icc.ci[0] <= icc.value <= icc.ci[1]


def test_icc_interval_on_random_lanes_of_many_scenarios() -> None:
    rng = np.random.default_rng(12)
    for _ in range(20):
        a = int(rng.integers(2, 300))
        groups = [list((rng.uniform(size=int(rng.integers(2, 60))) < rng.uniform(0.05, 0.95))
                       .astype(int)) for _ in range(a)]
        if all(len(set(g)) == 1 for g in groups):
            continue
        value, low, high = mcgraw_wong(groups)
        icc = icc1(groups)
        assert icc.value == pytest.approx(value, rel=1e-9, abs=1e-12)
        assert icc.ci == pytest.approx((low, high), rel=1e-9, abs=1e-12)


def test_the_lane_computes_its_icc_from_counts_as_from_repeats() -> None:
    pairs = [(19, 1), (10, 10), (17, 3), (20, 0), (10, 10), (5, 2)]
    lane = lane_of(*pairs)
    direct = icc1([[1] * p + [0] * f for p, f in pairs])
    for name in ("value", "ci", "k0", "cluster_size", "msb", "msw", "design_effect",
                 "effective_n"):
        assert getattr(lane.icc, name) == pytest.approx(getattr(direct, name), rel=1e-12), name


def test_an_all_or_nothing_lane_has_icc_one_and_no_interval() -> None:
    # The issue's lane: 3 scenarios at 20/20 and 3 at 0/20. MSW = 0, so ICC = MSB/MSB = 1 and
    # F0 = MSB/MSW has no finite value: McGraw & Wong's interval would be [1, 1], a certainty
    # six scenarios cannot give.
    lane = lane_of(*[(20, 0)] * 3, *[(0, 20)] * 3)
    assert lane.icc.value == 1.0 and lane.icc.ci is None
    assert lane.icc.note == ("every scenario passed all or none of its repeats: ICC is 1, and "
                             "its F interval needs some variation within a scenario")


def test_few_scenarios_are_noted() -> None:
    assert icc1([[1, 0, 1], [0, 0, 1]]).note == "only 2 scenarios: the interval is wide"
    many = [[1, 0, 1], [0, 0, 1], [1, 1, 1], [0, 1, 1], [0, 0, 0]]
    assert len(many) == FEW_SCENARIOS and icc1(many).note is None


# -- Kish's design effect and the clustered interval ---------------------------------------------


def test_kish_design_effect_never_counts_more_units_than_scenarios() -> None:
    # Sizes 1, 20, 20, 2 with ICC = 1 (each scenario all pass or all fail). N = 43,
    # sum(n²) = 1 + 400 + 400 + 4 = 805, m~ = 805/43; design effect 1 + (m~ - 1)·1 = 805/43;
    # effective n = 43/(805/43) = 1849/805 = 2.297, at most the 4 scenarios. (k0 = (43 -
    # 805/43)/3 = 8.09 gave 43/8.09 = 5.3, more units than scenarios.)
    lane = lane_of((1, 0), (20, 0), (0, 20), (0, 2))
    assert lane.icc.value == 1.0
    assert lane.icc.cluster_size == pytest.approx(805 / 43)
    assert lane.icc.design_effect == pytest.approx(805 / 43)
    assert lane.icc.effective_n == pytest.approx(1849 / 805)
    assert lane.icc.effective_n <= 4


def clustered_by_hand(pairs: list[tuple[int, int]]) -> tuple[float, float]:
    """The clustered interval written out with numpy, scipy and statsmodels: the one-way ANOVA
    of the 0/1 repeats, McGraw & Wong's upper bound of the ICC, Kish's design effect at that
    bound (m̃ when the ICC has no interval), and statsmodels' Wilson at N / D with the alpha
    whose normal quantile is t(0.975, m − 1)."""
    groups = [np.array([1.0] * p + [0.0] * f) for p, f in pairs]
    a, sizes = len(groups), np.array([len(g) for g in groups], dtype=float)
    big_n = sizes.sum()
    grand = np.concatenate(groups).mean()
    msb = sum(len(g) * (g.mean() - grand) ** 2 for g in groups) / (a - 1)
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (big_n - a)
    k0 = (big_n - (sizes ** 2).sum() / big_n) / (a - 1)
    m_tilde = (sizes ** 2).sum() / big_n
    if msw > 0:
        f_high = msb / msw * f_dist.ppf(0.975, big_n - a, a - 1)
        design = max(1.0, 1 + (m_tilde - 1) * (f_high - 1) / (f_high + k0 - 1))
    else:
        design = m_tilde
    alpha = 2 * (1 - norm.cdf(t_dist.ppf(0.975, a - 1)))
    n_eff = big_n / design
    return proportion_confint(grand * n_eff, n_eff, alpha=alpha, method="wilson")


@pytest.mark.parametrize("pairs", [
    [(20, 0)] * 3 + [(0, 20)] * 3,  # the README's lane: no variation within, m̃ = 20
    [(19, 1), (10, 10), (17, 3), (20, 0), (12, 8)],
    [(1, 1), (1, 1), (1, 1)],  # a negative ICC: its upper bound still counts
    [(20, 0), (20, 0), (20, 0)],  # nothing varied: m̃
    [(15, 5), (9, 1), (30, 10), (18, 2)],  # unequal sizes
    [(20, 0)] * 45 + [(19, 1)] * 5,
])
def test_the_clustered_interval_is_wilson_at_the_icc_upper_bound_with_t(pairs) -> None:
    lane = lane_of(*pairs)
    assert lane.clustered_method == "kish-upper-t"
    assert lane.clustered_rate.value == pytest.approx(
        sum(p for p, _ in pairs) / sum(p + f for p, f in pairs))
    assert (lane.clustered_rate.low, lane.clustered_rate.high) == pytest.approx(
        clustered_by_hand(pairs), abs=1e-9)


def test_the_issues_lane_gets_a_clustered_interval_six_scenarios_wide() -> None:
    lane = lane_of(*[(20, 0)] * 3, *[(0, 20)] * 3)
    # Pooled: 60/120 with Wilson, [41.2%, 58.8%]: right for these six scenarios only.
    assert lane.ci == pytest.approx(wilson(60, 120), abs=1e-12)
    assert (round(lane.ci[0] * 100, 1), round(lane.ci[1] * 100, 1)) == (41.2, 58.8)
    # As a sample of tasks: design effect 1 + 19·1 = 20, effective n 120/20 = 6, and t on 5
    # degrees of freedom (2.571) for z: [13.8–86.2] where z gave [18.8–81.2].
    assert lane.icc.effective_n == pytest.approx(6.0)
    clustered = (lane.clustered_rate.low, lane.clustered_rate.high)
    assert [round(x * 100, 1) for x in clustered] == [13.8, 86.2]
    # Wider than the pooled one, and than the plain Kish interval.
    lane = lane_of((19, 1), (10, 10), (17, 3), (20, 0), (12, 8))
    kish = wilson(0.78 * lane.icc.effective_n, lane.icc.effective_n)
    assert lane.clustered_rate.low < kish[0] < lane.ci[0]
    assert lane.clustered_rate.high > kish[1] > lane.ci[1]
    assert lane_of((20, 0)).clustered_rate is None  # one scenario is no sample of tasks


# -- the repeats it takes to see a failure -------------------------------------------------------


@pytest.mark.parametrize("rate,expected", [
    (0.05, 59),  # ln 0.05 / ln 0.95 = 58.4
    (0.5, 5),  # 0.5⁴ = 0.0625 > 0.05 ≥ 0.5⁵ = 0.03125
    (0.01, 299),  # ln 0.05 / ln 0.99 = 298.1
    (0.95, 1),  # one repeat fails with chance 0.95 ≥ 0.95
    (1.0, 1),
])
def test_repeats_to_see_a_failure_by_hand(rate: float, expected: int) -> None:
    assert repeats_to_see(rate) == expected


def test_repeats_to_see_is_the_least_n_that_is_enough() -> None:
    for rate in np.linspace(0.001, 0.999, 333):
        n = repeats_to_see(float(rate))
        assert 1 - (1 - rate) ** n >= 0.95
        assert n == 1 or 1 - (1 - rate) ** (n - 1) < 0.95


@pytest.mark.parametrize("rate", [0.0, -0.1, 1.5])
def test_repeats_to_see_refuses_a_rate_that_is_not_one(rate: float) -> None:
    with pytest.raises(ValueError, match="need 0 < failure rate <= 1"):
        repeats_to_see(rate)


def test_repeats_needed_from_the_observed_rate_its_lower_bound_or_the_wilson_bound() -> None:
    seen = summarize_scenario("a", repeats("a", 19, 1), 20).repeats_needed
    # 1 failure in 20: statsmodels' Wilson lower bound of the failure rate, 0.0089, and the
    # least n with 1 − (1 − 0.0089)ⁿ ≥ 0.95, counted up: 336 (59 at the observed 5%).
    low = wilson(1, 20)[0]
    assert seen == RepeatsNeeded(failure_rate=0.05, observed=True, repeats=59,
                                 low_rate=pytest.approx(low, abs=1e-12), repeats_at_low=336)
    assert next(n for n in range(1, 1000) if 1 - (1 - low) ** n >= 0.95) == 336
    # 1 in 50: 845 (the audit's figure).
    assert summarize_scenario("e", repeats("e", 49, 1), 50).repeats_needed.repeats_at_low == 845
    # No failure in 20: the failure rate's Wilson upper bound, 3.84/(20 + 3.84) = 0.161, and no
    # count of repeats, which would read as one to reproduce a failure never seen.
    unseen = summarize_scenario("b", repeats("b", 20), 20).repeats_needed
    assert unseen is not None and not unseen.observed
    assert unseen.failure_rate == pytest.approx(wilson(0, 20)[1], abs=1e-12)
    assert (unseen.repeats, unseen.low_rate, unseen.repeats_at_low) == (None, None, None)
    assert summarize_scenario("c", repeats("c", 0, 0, void=2), 2).repeats_needed is None
    assert math.isclose(summarize_scenario("d", repeats("d", 0, 4), 4).repeats_needed.failure_rate,
                        1.0)


def test_an_older_files_repeats_needed_still_reads() -> None:
    import msgspec

    old = msgspec.convert({"failure_rate": 0.161, "observed": False, "repeats": 18},
                          RepeatsNeeded)
    assert (old.repeats, old.low_rate, old.repeats_at_low) == (18, None, None)


def test_the_icc_interval_is_marked_approximate_where_pass_fail_data_break_it() -> None:
    # 6 scenarios, pooled 0.5 and barely alike: the F interval holds there.
    middle = lane_of((11, 9), (9, 11), (10, 10), (12, 8), (8, 12), (10, 10)).icc
    assert middle.ci is not None and not middle.approximate
    # Pooled 106/120 = 0.883 > 0.8.
    high = lane_of((20, 0), (19, 1), (17, 3), (20, 0), (14, 6), (16, 4)).icc
    assert high.approximate and high.note.startswith(
        "approximate: the F interval, for pass/fail repeats at a pooled pass rate of 0.88")
    # Pooled 0.5 but an ICC above 0.5: scenarios at 19/20 and 1/20.
    alike = lane_of((19, 1), (1, 19), (19, 1), (1, 19), (18, 2), (2, 18)).icc
    assert alike.value >= 0.5 and alike.approximate
    assert alike.note.endswith(f"at an ICC of {alike.value:.2f}")
    # Few scenarios: both notes.
    few = lane_of((20, 0), (17, 3), (19, 1)).icc
    assert few.note.endswith("; only 3 scenarios: the interval is wide")


def test_clopper_pearson_matches_statsmodels_beta_interval() -> None:
    from alk.estimate import clopper_pearson_interval

    for n in (1, 2, 5, 16, 20, 37, 100, 1000):
        for x in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            expected = proportion_confint(x, n, alpha=0.05, method="beta")
            assert clopper_pearson_interval(x, n) == pytest.approx(expected, abs=1e-10), (x, n)
    with pytest.raises(ValueError, match="need 0 <= successes <= n"):
        clopper_pearson_interval(3, 2)


def test_an_exact_scenarios_interval_is_clopper_pearsons() -> None:
    from alk.stats.summary import summarize_scenarios

    runs = {"a": repeats("a", 14, 2), "b": repeats("b", 14, 2)}
    a, b = summarize_scenarios(runs, 16, exact={"a"})
    assert a.ci_method == "clopper-pearson" and b.ci_method == "wilson"
    assert a.ci == pytest.approx(proportion_confint(14, 16, alpha=0.05, method="beta"),
                                 abs=1e-10)
    assert b.ci == pytest.approx(wilson(14, 16), abs=1e-12)
    assert a.pass_rate == b.pass_rate == 14 / 16
