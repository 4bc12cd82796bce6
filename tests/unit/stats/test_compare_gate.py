"""alk.stats.gate, gate_power and gate_rule, the regression gate of `alk compare`: every p
against scipy or statsmodels, the stratified law and the power against brute-force
enumeration, Holm–Tarone against hand-worked families and statsmodels' Holm.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom
from scipy.stats import fisher_exact as scipy_fisher
from statsmodels.stats.contingency_tables import StratifiedTable
from statsmodels.stats.multitest import multipletests

from alk.stats import gate_power
from alk.stats.gate import (
    fisher_greater,
    fisher_less,
    holm_tarone,
    least_p_pair,
    stratified,
    tarone_k,
)
from alk.stats.gate_power import (
    cutoffs,
    detectable_drop,
    lane_detectable_drop,
    power,
    repeats_for_power,
)
from alk.stats.gate_rule import Change, judge

SIZES = (1, 3, 8, 20)


def scipy_less(passed_a: int, n_a: int, passed_b: int, n_b: int) -> float:
    # B's row first: an odds ratio below 1 is B passing less often.
    return scipy_fisher([[passed_b, n_b - passed_b], [passed_a, n_a - passed_a]],
                        alternative="less").pvalue


@pytest.mark.parametrize("n_a,n_b", list(itertools.product(SIZES, SIZES)))
def test_one_sided_fisher_is_scipys(n_a: int, n_b: int) -> None:
    for passed_a in range(n_a + 1):
        for passed_b in range(n_b + 1):
            table = (passed_a, n_a, passed_b, n_b)
            assert fisher_less(*table) == pytest.approx(scipy_less(*table), rel=1e-12), table
            greater = scipy_fisher([[passed_b, n_b - passed_b], [passed_a, n_a - passed_a]],
                                   alternative="greater").pvalue
            assert fisher_greater(*table) == pytest.approx(greater, rel=1e-12), table


@pytest.mark.parametrize("table", [(9_990, 10_000, 9_950, 10_100), (7, 30_000, 0, 40)])
def test_one_sided_fisher_of_big_tables_is_scipys(table: tuple[int, int, int, int]) -> None:
    assert fisher_less(*table) == pytest.approx(scipy_less(*table), rel=1e-6)


def test_the_issues_tables_by_hand() -> None:
    # 20/20 → 15/20: 35 passes, 5 failures; B holds all 5 failures with chance
    # C(35,15)/C(40,20), and that is the only table as extreme.
    assert fisher_less(20, 20, 15, 20) == pytest.approx(
        math.comb(35, 15) / math.comb(40, 20), rel=1e-12)
    assert fisher_less(20, 20, 15, 20) < 0.025  # two-sided it is 0.047
    assert fisher_less(20, 20, 20, 20) == 1.0


@pytest.mark.parametrize("n_a,n_b", [(5, 7), (20, 20), (3, 12)])
def test_least_attainable_p_is_the_least_over_every_table(n_a: int, n_b: int) -> None:
    for passed in range(n_a + n_b + 1):
        tables = [(passed - y, n_a, y, n_b) for y in range(max(0, passed - n_a),
                                                         min(passed, n_b) + 1)]
        less, greater = least_p_pair(*tables[0])
        assert less == pytest.approx(min(scipy_less(*t) for t in tables), rel=1e-12)
        assert greater == pytest.approx(min(fisher_greater(*t) for t in tables), rel=1e-12)
    assert least_p_pair(20, 20, 20, 20) == (1.0, 1.0)


def test_the_stratified_test_of_one_table_is_fishers() -> None:
    for table in [(19, 20, 14, 20), (3, 7, 5, 9), (20, 20, 20, 20)]:
        got = stratified([table])
        assert got.p_less == pytest.approx(scipy_less(*table), rel=1e-12)
        assert got.p_greater == pytest.approx(fisher_greater(*table), rel=1e-12)


def test_the_stratified_law_is_brute_force_enumeration() -> None:
    tables = [(4, 5, 2, 4), (3, 3, 1, 4), (2, 6, 3, 5), (6, 6, 6, 6)]
    # Every combination of tables with these margins, weighted by its hypergeometric chance.
    supports = []
    for passed_a, n_a, passed_b, n_b in tables:
        passed = passed_a + passed_b
        ys = range(max(0, passed - n_a), min(passed, n_b) + 1)
        supports.append([(y, math.comb(passed, y) * math.comb(n_a + n_b - passed, n_b - y)
                          / math.comb(n_a + n_b, n_b)) for y in ys])
    observed = sum(t[2] for t in tables)
    less = greater = 0.0
    least = 1.0
    for combo in itertools.product(*supports):
        total, chance = sum(y for y, _ in combo), math.prod(c for _, c in combo)
        less += chance if total <= observed else 0.0
        greater += chance if total >= observed else 0.0
    least = math.prod(s[0][1] for s in supports)
    got = stratified(tables)
    assert (got.p_less, got.p_greater) == pytest.approx((less, greater), rel=1e-12)
    assert got.least_less == pytest.approx(least, rel=1e-12)
    assert got.strata == 3  # 6/6 and 6/6 admit one table


def test_the_stratified_test_agrees_with_cochran_mantel_haenszel_at_large_n() -> None:
    # Where the normal curve holds, the exact tail is statsmodels' CMH p (continuity-
    # corrected, halved: one side).
    tables = [(450, 500, 430, 500), (300, 400, 290, 400), (800, 1000, 790, 1000)]
    cmh = StratifiedTable([np.array([[b, n_b - b], [a, n_a - a]]) for a, n_a, b, n_b in tables])
    expected = cmh.test_null_odds(correction=True).pvalue / 2
    assert stratified(tables).p_less == pytest.approx(expected, rel=0.03)


def test_tarone_k_by_hand() -> None:
    # α = 0.05: least p's 0.001, 0.001, 0.03, 0.3, 1. k = 1: 3 reach 0.05 (> 1); k = 2: 2
    # reach 0.025 (<= 2). With 0.02 for 0.03, 3 reach 0.025, and k = 3 (2 reach 0.0167).
    assert tarone_k([0.001, 0.001, 0.03, 0.3, 1.0], 0.05) == 2
    assert tarone_k([0.001, 0.001, 0.02, 0.3, 1.0], 0.05) == 3
    assert tarone_k([1.0] * 13, 0.05) == 1
    assert tarone_k([0.0] * 4, 0.05) == 4


def test_holm_tarone_by_hand() -> None:
    p = [0.004, 0.02, 0.04, 0.5, 1.0]
    least = [0.001, 0.001, 0.03, 0.3, 1.0]
    got = holm_tarone(p, least, 0.05)
    # Step 1: K = 2, {0, 1} tested at 0.025: 0.004 rejected. Step 2: of {1, 2, 3, 4}, K = 2
    # (only 1 reaches 0.025): 0.02 <= 0.025 rejected. Step 3: of {2, 3, 4}: K = 1, only 2
    # reaches 0.05: 0.04 rejected. Step 4: of {3, 4}: K = 1, none reaches: stop.
    assert [t.rejected for t in got] == [True, True, True, False, False]
    assert [t.level for t in got] == [0.025, 0.025, 0.05, None, None]
    # Holm alone holds 0.02 to 0.05/4 and stops there.
    assert list(multipletests(p, alpha=0.05, method="holm")[0]) == [True, False, False,
                                                                    False, False]


@pytest.mark.parametrize("seed", range(5))
def test_holm_tarone_with_every_hypothesis_able_is_holm(seed: int) -> None:
    p = list(np.random.default_rng(seed).uniform(0, 0.06, size=9))
    got = holm_tarone(p, [0.0] * 9, 0.05)
    expected = multipletests(p, alpha=0.05, method="holm")[0]
    assert [t.rejected for t in got] == list(expected)


def brute_power(rate_a: float, n_a: int, rate_b: float, n_b: int, level: float) -> float:
    return sum(binom.pmf(x, n_a, rate_a) * binom.pmf(y, n_b, rate_b)
               for x in range(n_a + 1) for y in range(n_b + 1)
               if scipy_less(x, n_a, y, n_b) <= level)


@pytest.mark.parametrize("case", [(0.95, 20, 0.75, 20, 0.05), (1.0, 12, 0.6, 9, 0.01),
                                  (0.7, 15, 0.4, 18, 0.025), (0.5, 6, 0.5, 6, 0.05)])
def test_power_is_brute_force_enumeration(case: tuple[float, int, float, int, float]) -> None:
    assert power(*case) == pytest.approx(brute_power(*case), abs=1e-12)


def test_the_cutoffs_are_scipys_rejections() -> None:
    for x, c in enumerate(cutoffs(20, 20, 0.05)):
        rejected = [y for y in range(21) if scipy_less(x, 20, y, 20) <= 0.05]
        assert c == (max(rejected) if rejected else -1)
        assert rejected == list(range(c + 1))


def test_the_detectable_drop_is_the_least_with_enough_power() -> None:
    drop = detectable_drop(0.95, 20, 20, 0.05)
    assert drop is not None and 0.3 < drop < 0.4
    assert brute_power(0.95, 20, 0.95 - drop, 20, 0.05) >= 0.8
    assert brute_power(0.95, 20, 0.95 - drop + 2e-4, 20, 0.05) < 0.8
    # 3 repeats a run: not even 3/3 → 0/3 reaches 0.01.
    assert detectable_drop(1.0, 3, 3, 0.01) is None


def test_repeats_for_power_reach_it() -> None:
    n = repeats_for_power(0.95, 0.2, 0.05)
    assert n is not None
    assert brute_power(0.95, n, 0.75, n, 0.05) >= 0.8
    assert brute_power(0.95, n - 1, 0.75, n - 1, 0.05) < 0.8
    assert repeats_for_power(0.1, 0.2, 0.05) is None  # a rate cannot fall below 0


def test_the_lane_drop_is_the_normal_approximation() -> None:
    # One scenario, n a side: the shift n/2·d over sqrt(n/2·p̄(1 − p̄)) reaches z_α + z_β.
    drop = lane_detectable_drop([0.9], [200], [200], 0.05)
    assert drop is not None
    pooled = 0.9 - drop / 2
    z = 100 * drop / math.sqrt(100 * pooled * (1 - pooled))
    assert z == pytest.approx(1.6448536 + 0.8416212, abs=1e-3)
    assert gate_power.lane_detectable_drop([0.0], [20], [20], 0.05) is None


# --- the rule over counts ---------------------------------------------------------------------

FRAMEWORK_LANE = [(20, 20, 20, 20)] * 10 + [(0, 20, 0, 20)] * 2 + [(15, 20, 16, 20)]


def test_the_issues_case_is_regressed_one_sided() -> None:
    # 20/20 → 15/20 among 12 other scenarios at 20/20: two-sided Fisher with Holm read it
    # inconclusive; one-sided with Tarone (the others spend nothing) it is regressed.
    judged = judge([(20, 20, 15, 20)] + [(20, 20, 20, 20)] * 12, [0] * 13, alpha=0.05,
                   margin=0.1)
    first = judged.scenarios[0]
    assert first.change is Change.REGRESSED
    assert first.level_worse == 0.05 and first.p_worse == fisher_less(20, 20, 15, 20)
    assert judged.change is Change.REGRESSED and judged.lane is None
    assert all(v.level_worse is None for v in judged.scenarios[1:])


def test_a_regression_spread_thin_is_the_lanes() -> None:
    # Eight scenarios each 19/20 → 17/20: none alone is near significance, together they are.
    tables = [(19, 20, 17, 20)] * 8 + [(20, 20, 20, 20)] * 6
    judged = judge(tables, [0] * 14, alpha=0.05, margin=0.1)
    assert all(v.change is Change.INCONCLUSIVE for v in judged.scenarios)
    assert judged.lane is not None and judged.lane.regressed and judged.lane.strata == 8
    assert judged.change is Change.REGRESSED and "lane test across 8 scenarios" in judged.reason
    assert judged.lane.p_worse == pytest.approx(stratified(tables).p_less)


def test_the_done_when_case_says_what_it_could_see() -> None:
    # 19/20 → 14/20 in a framework-shaped lane: inconclusive at 20 repeats, and its share of
    # α is what the detectable drop is computed at.
    judged = judge([(19, 20, 14, 20)] + FRAMEWORK_LANE, [0] * 14, alpha=0.05, margin=0.1)
    first = judged.scenarios[0]
    assert first.change is Change.INCONCLUSIVE and judged.change is Change.INCONCLUSIVE
    # The family: this scenario, `sampled` and the lane test can reach 0.05/3.
    assert first.share == pytest.approx(0.05 / 3)
    assert first.p_worse == pytest.approx(scipy_less(19, 20, 14, 20), rel=1e-12)


def test_improved_unchanged_and_void() -> None:
    judged = judge([(12, 20, 20, 20), (40, 40, 40, 40), (40, 40, 39, 40), None],
                   [0, 0, 1, 0], alpha=0.05, margin=0.1)
    changes = [v.change for v in judged.scenarios]
    assert changes == [Change.IMPROVED, Change.UNCHANGED, Change.INCONCLUSIVE,
                       Change.INCONCLUSIVE]
    assert "void" in judged.scenarios[2].reason and judged.change is Change.IMPROVED
