"""The interval exact over an adaptive run's stopping points (alk.stats.stopped_interval): its
stopping distribution against every outcome sequence enumerated one by one, its ends against
their defining equations, Clopper–Pearson's at a fixed number of repeats, and summary.py giving
it to a sampled scenario of an adaptive run."""

from __future__ import annotations

import functools
import itertools
import math

import pytest

from alk.estimate import clopper_pearson_interval
from alk.execute.adaptive import stop_reason
from alk.stats.stopped_interval import StopRule, stopped_interval, stopping_points, tail_chances
from alk.stats.summary import summarize_scenarios

from helpers.results import reps

# Rounds of 5 to at most 20, stopping once the Wilson interval is under 0.35 wide: it can stop
# at 10, 15 and 20 repeats, so the rule is truly sequential.
SMALL = StopRule(round_size=5, ci_width=0.35, max_repeats=20)
DEFAULT = StopRule(round_size=5, ci_width=0.2, max_repeats=100)


@functools.cache
def sequences(rule: StopRule) -> dict[tuple[int, int], dict[int, int]]:
    """Every sequence of max_repeats outcomes (the bits of an integer, repeat 1 the lowest),
    one by one, with alk's own stop rule evaluated at each round's end: where it stops → how
    many of the sequences that stop there have each number of passes in all."""
    ends = list(range(rule.round_size, rule.max_repeats, rule.round_size)) + [rule.max_repeats]
    stops = functools.cache(lambda x, n: stop_reason(
        x, n - x, n, max_repeats=rule.max_repeats, ci_width=rule.ci_width, sampled=True))
    found: dict[tuple[int, int], dict[int, int]] = {}
    for sequence in range(1 << rule.max_repeats):
        for n in ends:
            x = (sequence & ((1 << n) - 1)).bit_count()
            if stops(x, n) is not None:
                by_total = found.setdefault((n, x), {})
                total = sequence.bit_count()
                by_total[total] = by_total.get(total, 0) + 1
                break
    return found


def brute_force(rule: StopRule, p: float) -> dict[tuple[int, int], float]:
    """The chance of stopping at each point, summed over the sequences that stop there."""
    return {point: math.fsum(count * p ** t * (1 - p) ** (rule.max_repeats - t)
                             for t, count in by_total.items())
            for point, by_total in sequences(rule).items()}


def distribution(rule: StopRule, p: float) -> dict[tuple[int, int], float]:
    return {(n, x): c * p ** x * (1 - p) ** (n - x) for n, x, c in stopping_points(rule)}


@pytest.mark.parametrize("p", [0.03, 0.3, 0.5, 0.77, 0.99])
def test_the_stopping_distribution_is_that_of_every_sequence_enumerated(p: float) -> None:
    expected = brute_force(SMALL, p)
    found = distribution(SMALL, p)
    assert {n for n, _ in expected} == {10, 15, 20}
    assert found.keys() == expected.keys()
    for point, chance in expected.items():
        assert found[point] == pytest.approx(chance, abs=1e-12), point
    assert sum(found.values()) == pytest.approx(1.0, abs=1e-12)


def test_a_last_round_cut_short_by_the_maximum_is_counted_right() -> None:
    rule = StopRule(round_size=4, ci_width=0.4, max_repeats=14)  # rounds 4, 8, 12, then 2
    found = distribution(rule, 0.4)
    assert max(n for n, _ in found) == 14
    assert sum(found.values()) == pytest.approx(1.0, abs=1e-12)
    # Every sequence that reaches 14 is counted once: the counts add up to 2ⁿ over the rounds.
    assert sum(c * 2 ** (14 - n) for n, _, c in stopping_points(rule)) == 2 ** 14


@pytest.mark.parametrize("rule", [SMALL, DEFAULT])
def test_each_end_is_where_its_one_sided_test_has_a_chance_of_two_and_a_half_percent(
        rule: StopRule) -> None:
    for n, x, _ in stopping_points(rule):
        low, high = stopped_interval(x, n, rule)
        assert 0 <= low < x / n < high <= 1 or (x in (0, n) and low <= x / n <= high)
        if x > 0:
            assert tail_chances(x, n, rule, low)[0] == pytest.approx(0.025, abs=1e-9), (x, n)
        else:
            assert low == 0.0
        if x < n:
            assert tail_chances(x, n, rule, high)[1] == pytest.approx(0.025, abs=1e-9), (x, n)
        else:
            assert high == 1.0


def test_the_tails_are_monotone_in_the_rate_so_bisection_finds_the_one_root() -> None:
    grid = [i / 200 for i in range(1, 200)]
    for n, x, _ in stopping_points(DEFAULT)[::7]:
        upper, lower = zip(*(tail_chances(x, n, DEFAULT, p) for p in grid))
        assert all(b >= a - 1e-12 for a, b in itertools.pairwise(upper)), (x, n)
        assert all(b <= a + 1e-12 for a, b in itertools.pairwise(lower)), (x, n)


@pytest.mark.parametrize("round_size, maximum", [(5, 20), (7, 20), (1, 9), (20, 20)])
def test_a_rule_that_can_only_stop_at_the_maximum_gives_clopper_pearson(
        round_size: int, maximum: int) -> None:
    never_narrow = StopRule(round_size, 0.0, maximum)  # no interval is narrower than 0
    assert {n for n, _, _ in stopping_points(never_narrow)} == {maximum}
    for x in range(maximum + 1):
        assert stopped_interval(x, maximum, never_narrow) == pytest.approx(
            clopper_pearson_interval(x, maximum), abs=1e-9), x


def test_void_repeats_lower_the_maximum() -> None:
    assert stopped_interval(7, 18, SMALL, void=2) == stopped_interval(
        7, 18, SMALL._replace(max_repeats=18))
    with pytest.raises(ValueError, match="need 0 <= passed <= scored"):
        stopped_interval(3, 2, SMALL)


def test_it_holds_the_truth_at_least_95_percent_of_the_time_at_every_rate() -> None:
    for p in [i / 100 for i in range(1, 100)]:
        cover = sum(chance for (n, x), chance in distribution(SMALL, p).items()
                    if (ci := stopped_interval(x, n, SMALL))[0] <= p <= ci[1])
        assert cover >= 0.95 - 1e-9, p


def repeats(scenario: str, passed: int, failed: int, void: int = 0):
    return reps(*["pass"] * passed, *["agent"] * failed, *["lane_infra"] * void,
                scenario=scenario)


def test_summary_gives_a_sampled_adaptive_scenario_the_interval_over_its_stopping_points():
    runs = {"sampled": repeats("sampled", 12, 3, void=1), "scripted": repeats("scripted", 12, 3)}
    sampled, scripted = summarize_scenarios(runs, 16, exact=set(runs),
                                            stopped={"sampled": SMALL})
    assert sampled.ci_method == "exact-stopped"
    assert sampled.ci == stopped_interval(12, 15, SMALL, void=1)
    assert sampled.ci != pytest.approx(clopper_pearson_interval(12, 15), abs=1e-6)
    assert scripted.ci_method == "clopper-pearson"
    assert scripted.ci == clopper_pearson_interval(12, 15)
    assert sampled.pass_rate == scripted.pass_rate == 12 / 15
    assert not math.isnan(sampled.ci[0])
