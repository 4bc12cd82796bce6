"""alk.compare: every statistic against an independent computation (statsmodels, scipy, hand-
worked values), then `compare_runs` over result records alk made itself (tests/unit/documents.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path

import msgspec
import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import binom
from scipy.stats import fisher_exact as scipy_fisher
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep

from alk.compare import Change, compare_runs
from alk.errors import UsageError
from alk.result.document import RunDocument
from alk.stats import gate_power, two_runs
from alk.stats.two_runs import (
    fisher_exact,
    holm,
    median_difference,
    newcombe_interval,
    repeats_to_settle,
)

from helpers import documents

# ---------------------------------------------------------------------------------------------
# The statistics, over plain numbers

SIZES = (1, 2, 7, 20, 30)


@pytest.mark.parametrize("n_a,n_b", list(itertools.product(SIZES, SIZES)))
def test_newcombe_interval_is_statsmodels_newcomb(n_a: int, n_b: int) -> None:
    for passed_a in range(n_a + 1):
        for passed_b in range(n_b + 1):
            got = newcombe_interval(passed_a, n_a, passed_b, n_b)
            # statsmodels' interval is for p1 − p2: B first, for B − A.
            low, high = confint_proportions_2indep(passed_b, n_b, passed_a, n_a,
                                                   method="newcomb", compare="diff")
            assert got.value == pytest.approx(passed_b / n_b - passed_a / n_a, abs=1e-15)
            assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12), (
                passed_a, n_a, passed_b, n_b)


def test_newcombe_interval_of_the_issue_excludes_zero() -> None:
    # 20/20 then 12/20: Wilson for 12/20 is [0.386582, 0.781193], for 20/20 [0.838875, 1];
    # low = −0.4 − √((0.6 − 0.386582)² + (1 − 1)²),
    # high = −0.4 + √((0.781193 − 0.6)² + (1 − 0.838875)²).
    got = newcombe_interval(20, 20, 12, 20)
    assert got.value == pytest.approx(-0.4)
    assert got.low == pytest.approx(-0.613418, abs=1e-6)
    assert got.high == pytest.approx(-0.4 + math.hypot(0.181193, 0.161125), abs=1e-6)
    assert got.high == pytest.approx(-0.157529, abs=1e-6)


@pytest.mark.parametrize("n_a,n_b", list(itertools.product(SIZES, SIZES)))
def test_fisher_exact_is_scipys(n_a: int, n_b: int) -> None:
    for passed_a in range(n_a + 1):
        for passed_b in range(n_b + 1):
            expected = scipy_fisher([[passed_a, n_a - passed_a],
                                     [passed_b, n_b - passed_b]]).pvalue
            assert fisher_exact(passed_a, n_a, passed_b, n_b) == pytest.approx(
                expected, rel=1e-9), (passed_a, n_a, passed_b, n_b)


def test_fisher_exact_of_the_issue_by_hand() -> None:
    # 32 passes, 8 failures, 20 repeats a side: the two most extreme tables (all 8 failures in
    # B, or all in A) are the only ones as unlikely as 20/20 vs 12/20, each C(32,20)/C(40,20).
    assert fisher_exact(20, 20, 12, 20) == 2 * math.comb(32, 20) / math.comb(40, 20)
    assert fisher_exact(20, 20, 20, 20) == 1.0


@pytest.mark.parametrize("table", [(5000, 10000, 5200, 10000), (50_000, 100_000, 51_000, 100_000),
                                   (99_990, 100_000, 99_950, 100_000), (7, 30_000, 0, 40)])
def test_fisher_exact_of_big_tables_is_scipys(table: tuple[int, int, int, int]) -> None:
    passed_a, n_a, passed_b, n_b = table
    expected = scipy_fisher([[passed_a, n_a - passed_a], [passed_b, n_b - passed_b]]).pvalue
    assert fisher_exact(*table) == pytest.approx(expected, rel=1e-6)


def test_fishers_float_path_agrees_on_small_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # The log-space path, forced on tables the exact one handles; in the last two, terms that
    # are equal come out of lgamma a few ulps apart, and only the tolerance counts them both.
    monkeypatch.setattr(two_runs, "FISHER_EXACT_TOTAL", 0)
    for table in [(20, 20, 12, 20), (10, 20, 10, 20), (3, 7, 5, 9), (0, 5, 5, 5), (1, 1, 0, 1),
                  (0, 20, 12, 20), (3, 20, 6, 20)]:
        exact = scipy_fisher([[table[0], table[1] - table[0]],
                              [table[2], table[3] - table[2]]]).pvalue
        assert fisher_exact(*table) == pytest.approx(exact, rel=1e-9), table


def test_fisher_exact_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="need 0 <= passed <= n"):
        fisher_exact(3, 2, 0, 5)
    with pytest.raises(ValueError):
        fisher_exact(0, 0, 0, 5)
    with pytest.raises(ValueError, match="need 0 <= passed <= n"):
        newcombe_interval(0, 5, 6, 5)


@pytest.mark.parametrize("p_values", [
    [0.01, 0.04, 0.03, 0.2], [0.001], [0.5, 0.5, 0.01, 0.01], [0.04, 0.9, 0.02, 0.02, 0.3],
    list(np.random.default_rng(3).uniform(0, 0.1, size=12))])
def test_holm_is_statsmodels(p_values: list[float]) -> None:
    expected = multipletests(p_values, alpha=0.05, method="holm")[1]
    assert holm(p_values) == pytest.approx(tuple(expected), abs=1e-15)


def test_holm_of_nothing_is_nothing() -> None:
    assert holm([]) == ()


def test_bootstrap_medians_of_odd_samples_follow_the_exact_law() -> None:
    # A resample of n values has its median at or below the j-th smallest value exactly when
    # at least (n + 1)/2 of its n draws fall among the j smallest: Binomial(n, j/n) >= k.
    values = np.array([0.3, 0.5, 0.8, 1.1, 1.7, 2.0, 4.2])
    n, k = len(values), 4
    medians = two_runs._resampled_medians(values, np.random.default_rng(11), 200_000)
    for j in range(1, n + 1):
        exact = binom.sf(k - 1, n, j / n)
        assert (medians <= values[j - 1]).mean() == pytest.approx(exact, abs=0.005)


def test_bootstrap_medians_of_even_samples_match_resampling() -> None:
    values = np.array([0.3, 0.3, 0.9, 1.2, 5.0, 5.1])
    rng = np.random.default_rng(5)
    medians = two_runs._resampled_medians(values, rng, 200_000)
    brute = np.median(values[rng.integers(0, len(values), size=(200_000, len(values)))], axis=1)
    for value in np.union1d(medians, brute):
        assert (medians == value).mean() == pytest.approx((brute == value).mean(), abs=0.005)


def test_median_difference_is_seeded_and_brackets_the_point() -> None:
    a = [1.0, 1.1, 1.2, 1.25, 1.3, 1.4, 2.0]
    b = [1.5, 1.6, 1.65, 1.7, 1.8, 2.2, 2.5, 3.0]
    got = median_difference(a, b, seed=3)
    assert got.value == pytest.approx(np.median(b) - np.median(a))
    assert 0 < got.low <= got.value <= got.high
    assert median_difference(a, b, seed=3) == got
    assert median_difference(a, b, seed=4) != got
    with pytest.raises(ValueError, match="at least 2"):
        median_difference([1.0], b, seed=0)


def test_repeats_to_settle_by_hand() -> None:
    # 100% against 100%: the interval is ±(1 − n/(n + z²)), within ±0.1 once n >= 9z² = 34.6.
    assert repeats_to_settle(1.0, 1.0, 0.1) == 35
    assert repeats_to_settle(1.0, 1.0, 0.2) == 16  # n >= 4z² = 15.4
    assert repeats_to_settle(0.5, 0.6, 0.1) is None  # a difference of the margin never fits


@pytest.mark.parametrize("rates", [(0.5, 0.5), (0.9, 0.95), (0.2, 0.25)])
def test_repeats_to_settle_is_the_fewest_that_fit(rates: tuple[float, float]) -> None:
    n = repeats_to_settle(*rates, 0.1)
    assert n is not None

    def fits(m: int) -> bool:
        interval = two_runs._newcombe(rates[0], m, rates[1], m)
        return -0.1 <= interval.low and interval.high <= 0.1

    assert fits(n) and not fits(n - 1)


# ---------------------------------------------------------------------------------------------
# Two runs, as alk records them

NEWER = {"framework": "pydantic-ai", "framework_version": "1.1.0"}


def newer(observations: list) -> list:
    """The same repeats, from a worker reporting pydantic-ai 1.1.0."""
    return [dataclasses.replace(o, ready=NEWER) for o in observations]


def renamed(document: RunDocument, run_id: str) -> RunDocument:
    return dataclasses.replace(document, run_id=run_id)


@pytest.fixture
def regression(tmp_path: Path, private_temp: None) -> tuple[RunDocument, RunDocument]:
    """The issue's case: nominal went from 20/20 to 12/20 between 1.0.3 and 1.1.0; the two
    other scenarios stayed at 20/20."""
    a = documents.made(tmp_path / "a", documents.observation(0.3), nominal=documents.passing(20),
                       tool_error=documents.passing(20, 0.92), remote=documents.passing(20))
    b = documents.made(tmp_path / "b", newer([documents.observation(0.3)])[0],
                       nominal=newer(documents.passing(12, 1.5) + [documents.CRASHED] * 6
                                     + [documents.WRONG] * 2),
                       tool_error=newer(documents.passing(20, 0.92)),
                       remote=newer(documents.passing(20)))
    return a, renamed(b, "20261130-093000-cd34e5")


def test_the_issues_regression_is_flagged(regression: tuple[RunDocument, RunDocument]) -> None:
    comparison = compare_runs(*regression)
    nominal = comparison.scenarios[0]
    assert nominal.id == "nominal"
    assert nominal.change is Change.REGRESSED
    assert nominal.p is not None and nominal.level is not None
    assert nominal.p == pytest.approx(scipy_fisher([[12, 8], [20, 0]], alternative="less")
                                      .pvalue, rel=1e-12)
    assert nominal.p <= nominal.level
    assert nominal.difference is not None and nominal.difference.high < 0
    assert nominal.difference.value == pytest.approx(-0.4)
    assert comparison.change is Change.REGRESSED


def test_only_scenarios_that_can_reach_significance_spend_alpha(
        regression: tuple[RunDocument, RunDocument]) -> None:
    comparison = compare_runs(*regression)
    # tool_error and remote are 20/20 in both runs: their margins admit one table, so
    # Holm–Tarone tests nominal alone, at the whole α.
    assert comparison.scenarios[0].level == 0.05
    assert [s.level for s in comparison.scenarios[1:]] == [None, None]
    assert comparison.lane is None  # one informative scenario: the lane test would repeat it


def test_the_same_change_the_other_way_is_an_improvement(
        regression: tuple[RunDocument, RunDocument]) -> None:
    a, b = regression
    comparison = compare_runs(b, a)
    assert comparison.scenarios[0].change is Change.IMPROVED
    assert comparison.change is Change.IMPROVED


def test_twenty_repeats_cannot_show_unchanged(
        regression: tuple[RunDocument, RunDocument]) -> None:
    tool_error = compare_runs(*regression).scenarios[1]
    assert tool_error.change is Change.INCONCLUSIVE
    assert tool_error.difference is not None and tool_error.difference.value == 0.0
    assert (tool_error.difference.low, tool_error.difference.high) == pytest.approx(
        (-0.161, 0.161), abs=1e-3)
    assert "wider than ±10 points" in tool_error.reason
    assert tool_error.repeats_to_settle == 35
    # What it could not see, at its share of α (one more member than the family: 0.05/2).
    assert tool_error.detectable_drop == gate_power.detectable_drop(1.0, 20, 20, 0.025)
    assert tool_error.reason.startswith(
        f"a drop of up to {math.ceil(tool_error.detectable_drop * 100)} points could go unseen "
        "here at 20 repeats")
    assert tool_error.repeats_for_drop is not None and tool_error.repeats_for_drop > 20


def test_enough_repeats_show_unchanged(tmp_path: Path, private_temp: None) -> None:
    a = documents.made(tmp_path / "a", documents.observation(0.3), repeats=40,
                       nominal=documents.passing(40))
    b = documents.made(tmp_path / "b", documents.observation(0.3), repeats=40,
                       nominal=documents.passing(40))
    comparison = compare_runs(a, b)
    assert comparison.scenarios[0].change is Change.UNCHANGED
    assert comparison.scenarios[0].repeats_to_settle is None
    assert comparison.change is Change.UNCHANGED


def test_void_repeats_are_never_unchanged(tmp_path: Path, private_temp: None) -> None:
    a = documents.made(tmp_path / "a", documents.observation(0.3), repeats=40,
                       nominal=documents.passing(40), remote=[documents.NEVER_READY] * 40)
    b = documents.made(tmp_path / "b", documents.observation(0.3), repeats=40,
                       nominal=[documents.NEVER_READY] * 2 + documents.passing(38),
                       remote=documents.passing(40))
    nominal, remote = compare_runs(a, b).scenarios
    assert nominal.change is Change.INCONCLUSIVE and "2 void repeats" in nominal.reason
    assert (nominal.b.void, nominal.b.completed, nominal.b.void_rate) == (2, 40, 0.05)
    assert (nominal.a.void, nominal.a.void_rate) == (0, 0.0)
    # Nothing scored in A: nothing to test, and no p to adjust.
    assert remote.change is Change.INCONCLUSIVE and remote.difference is None
    assert remote.p is None and remote.level is None
    assert remote.reason == "no scored repeat in A: all void"
    assert (remote.a.void_rate, remote.a.rate) == (1.0, None)


def test_failures_paths_and_durations_before_and_after(
        regression: tuple[RunDocument, RunDocument]) -> None:
    nominal = compare_runs(*regression).scenarios[0]
    assert dict(nominal.a.causes) == {"passed": 20}
    assert dict(nominal.b.causes) == {"passed": 12, "nonzero_exit": 6, "wrong_output": 2}
    assert dict(nominal.b.layers) == {"pass": 12, "framework_runtime": 6, "agent": 2}
    # Every repeat took the one tool path: the distributions are the same.
    assert (nominal.a.trajectories, nominal.b.trajectories) == (1, 1)
    assert nominal.trajectory_distance == 0.0
    assert nominal.a.median_s == pytest.approx(np.median([r.duration_s for r in
                                                          regression[0].scenarios[0].repeats]))
    # tool_error's repeats are alike in both runs; remote's took 1.21 s, then 1.21 s again.
    assert compare_runs(*regression).scenarios[1].duration_change is not None


def test_a_slower_run_and_new_paths_are_measured(tmp_path: Path, private_temp: None) -> None:
    a = documents.made(tmp_path / "a", documents.observation(0.3),
                       nominal=[documents.observation(1.0 + 0.013 * i) for i in range(20)])
    b = documents.made(tmp_path / "b", documents.observation(0.3),
                       nominal=[documents.observation(1.9 + 0.017 * i) for i in range(10)]
                       + [documents.OTHER_PATH] * 10)
    nominal = compare_runs(a, b, seed=1).scenarios[0]
    assert nominal.duration_change is not None and nominal.duration_change.low > 0
    assert nominal.duration_change == median_difference(
        [r.duration_s for r in a.scenarios[0].repeats],
        [r.duration_s for r in b.scenarios[0].repeats], seed=1)
    assert compare_runs(a, b, seed=2).scenarios[0].duration_change != nominal.duration_change
    assert (nominal.a.trajectories, nominal.b.trajectories) == (1, 2)
    # Half of B's repeats took a path A never took.
    assert nominal.trajectory_distance == pytest.approx(
        float(jensenshannon([20, 0], [10, 10], base=2)))


def test_an_interrupted_runs_void_rate_is_of_the_repeats_that_ran(tmp_path: Path,
                                                                    private_temp: None) -> None:
    a = documents.made(tmp_path / "a", documents.observation(0.3), nominal=documents.passing(20))
    # Ctrl-C during the sixth repeat: 5 ran of the 20 asked for, one of them void.
    b = documents.made(tmp_path / "b", documents.observation(0.3),
                       nominal=[documents.NEVER_READY] + documents.passing(4)
                       + [KeyboardInterrupt()])
    comparison = compare_runs(a, b)
    side = comparison.scenarios[0].b
    assert (side.void, side.completed, side.void_rate, side.scored) == (1, 5, 0.2, 4)
    assert "run B is interrupted: its rates rest on the 5 repeats that finished" in (
        comparison.notes)


def test_notes_say_what_differs(regression: tuple[RunDocument, RunDocument]) -> None:
    a, b = regression
    b = dataclasses.replace(b, settings=dataclasses.replace(b.settings, seed=8),
                            lane=dataclasses.replace(b.lane, sha256="f" * 64),
                            status="interrupted")
    a = dataclasses.replace(a, lane=dataclasses.replace(a.lane, sha256="e" * 64))
    notes = "\n".join(compare_runs(a, b).notes)
    assert "pydantic-ai 1.0.3 in A, pydantic-ai 1.1.0 in B" in notes
    assert "seeds differ: 7 in A, 8 in B" in notes
    assert "sha256 eeeeeeeeeeee in A, ffffffffffff in B" in notes
    assert "run B is interrupted" in notes
    assert compare_runs(a, renamed(a, "20261130-093000-cd34e5")).notes == ()
    assert compare_runs(a, a).notes == (f"A and B are the same run, {documents.RUN}",)


@pytest.mark.parametrize("option", [{"alpha": 0.0}, {"alpha": 1.0}, {"margin": 0.0},
                                    {"margin": 1.5}])
def test_alpha_and_margin_are_rates(regression: tuple[RunDocument, RunDocument],
                                    option: dict[str, float]) -> None:
    with pytest.raises(UsageError, match=f"--{next(iter(option))} must be between 0 and 1"):
        compare_runs(*regression, **option)


def test_scenarios_in_one_run_only_are_listed_not_compared(tmp_path: Path,
                                                          private_temp: None) -> None:
    a = documents.made(tmp_path / "a", documents.observation(0.3), nominal=documents.passing(20),
                       old=documents.passing(20))
    b = documents.made(tmp_path / "b", documents.observation(0.3), nominal=documents.passing(20),
                       new=documents.passing(20))
    comparison = compare_runs(a, b)
    assert [s.id for s in comparison.scenarios] == ["nominal"]
    assert (comparison.only_a, comparison.only_b) == (("old",), ("new",))
    assert "only in A, not compared: old" in comparison.notes
    assert "only in B, not compared: new" in comparison.notes
    assert comparison.pooled_a.scored == 20  # the pooled counts are the compared scenarios'


def test_runs_with_no_scenario_in_common_are_refused(tmp_path: Path,
                                                      private_temp: None) -> None:
    a = documents.made(tmp_path / "a", documents.observation(0.3), old=documents.passing(2),
                       repeats=2)
    b = renamed(documents.made(tmp_path / "b", documents.observation(0.3),
                               new=documents.passing(2), repeats=2), "20261130-093000-cd34e5")
    with pytest.raises(UsageError) as caught:
        compare_runs(a, b)
    message = str(caught.value)
    assert documents.RUN in message and "20261130-093000-cd34e5" in message
    assert "share no scenario" in message and "old" in message and "new" in message


def test_the_pooled_difference(regression: tuple[RunDocument, RunDocument]) -> None:
    comparison = compare_runs(*regression)
    assert (comparison.pooled_a.passed, comparison.pooled_a.scored) == (60, 60)
    assert (comparison.pooled_b.passed, comparison.pooled_b.scored) == (52, 60)
    assert comparison.pooled_difference == newcombe_interval(60, 60, 52, 60)
    assert comparison.pooled_p == pytest.approx(
        scipy_fisher([[60, 0], [52, 8]]).pvalue, rel=1e-9)


def test_a_comparison_is_json(regression: tuple[RunDocument, RunDocument]) -> None:
    value = json.loads(json.dumps(msgspec.to_builtins(compare_runs(*regression))))
    assert value["change"] == "regressed"
    assert value["a"]["version"] == "1.0.3" and value["b"]["version"] == "1.1.0"
    nominal = value["scenarios"][0]
    assert nominal["change"] == "regressed"
    assert nominal["difference"]["high"] < 0
    assert set(nominal) >= {"p", "p_better", "level", "reason", "trajectory_distance",
                            "duration_change", "repeats_to_settle", "detectable_drop",
                            "repeats_for_drop"}
