"""alk.stats.sequential, the gate of `alk compare --until-decided`: the spending function
against scipy's normal law, the looks' schedule and bookkeeping by hand, the decisions against
scipy's Fisher and statsmodels' Newcombe interval; and benchmarks/gate.py's arithmetic on a
tiny seeded run.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import fisher_exact as scipy_fisher
from scipy.stats import norm
from statsmodels.stats.proportion import confint_proportions_2indep

from alk.stats import sequential
from alk.stats.gate_rule import Change
from alk.stats.sequential import Design, newcombe_at, spent

BENCHMARK = Path(__file__).resolve().parents[3] / "benchmarks" / "gate.py"


@pytest.mark.parametrize("alpha", [0.05, 0.01])
@pytest.mark.parametrize("t", [0.05, 0.2, 1 / 3, 0.5, 0.8, 0.99])
def test_the_spending_function_is_obrien_fleming_type(alpha: float, t: float) -> None:
    expected = 2 * (1 - norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(t)))
    assert spent(alpha, t) == pytest.approx(expected, rel=1e-9)


def test_the_spending_function_ends_at_alpha_and_starts_at_zero() -> None:
    assert spent(0.05, 1.0) == 0.05 and spent(0.05, 0.0) == 0.0
    values = [spent(0.05, k / 10) for k in range(11)]
    assert values == sorted(values)


def test_the_looks_and_their_increments() -> None:
    design = Design(0.05, 0.1, 20, 100, 10, scenarios=14)
    assert design.looks() == (20, 30, 40, 50, 60, 70, 80, 90, 100)
    increments = [design.increment(j) for j in range(9)]
    assert math.fsum(increments) == pytest.approx(0.05, abs=1e-15)
    assert increments[0] == pytest.approx(spent(0.05, 0.2))
    assert design.boundary(3) == pytest.approx((spent(0.05, 0.5) - spent(0.05, 0.4)) / 14)
    assert Design(0.05, 0.1, 20, 55, 10, 1).looks() == (20, 30, 40, 50, 55)
    assert Design(0.05, 0.1, 20, 20, 10, 1).looks() == (20,)
    assert Design(0.05, 0.1, 20, 20, 10, 1).increment(0) == 0.05
    with pytest.raises(ValueError):
        Design(0.05, 0.1, 20, 100, 0, 1)


def test_a_look_decides_keeps_and_counts() -> None:
    design = Design(0.05, 0.1, 20, 60, 20, scenarios=3)
    ledger = sequential.start(design)
    # Look 1 (t = 1/3): a 20/20 → 0/20 fall reaches even its tiny boundary; 20/20 → 14/20 not.
    ledger = sequential.look(ledger, [(20, 20, 0, 20), (20, 20, 14, 20), None], [0, 0, 0])
    first = design.boundary(0)
    assert scipy_fisher([[0, 20], [20, 0]], alternative="less").pvalue <= first
    assert scipy_fisher([[14, 6], [20, 0]], alternative="less").pvalue > first
    assert [d.change for d in ledger.decisions] == [Change.REGRESSED, Change.INCONCLUSIVE,
                                                    Change.INCONCLUSIVE]
    assert ledger.decisions[0].look == 0 and ledger.open() == (1, 2)
    assert ledger.looks_taken == 1 and ledger.spent == pytest.approx(spent(0.05, 1 / 3))
    # Look 2: the decided scenario keeps its decision whatever its table says now.
    ledger = sequential.look(ledger, [(40, 40, 40, 40), (40, 40, 28, 40), (40, 40, 40, 40)],
                             [0, 0, 1])
    assert ledger.decisions[0].change is Change.REGRESSED
    assert scipy_fisher([[28, 12], [40, 0]], alternative="less").pvalue <= design.boundary(1)
    assert ledger.decisions[1].change is Change.REGRESSED and ledger.decisions[1].look == 1
    assert ledger.decisions[2].change is Change.INCONCLUSIVE
    assert ledger.spent == pytest.approx(spent(0.05, 2 / 3)) and not ledger.finished
    # 60/60 both fits ±10 at the last look's level, but one void repeat: never unchanged.
    last = confint_proportions_2indep(60, 60, 60, 60, method="newcomb", compare="diff",
                                      alpha=2 * design.increment(2))
    assert -0.1 <= last[0] and last[1] <= 0.1
    ledger = sequential.look(ledger, [(60, 60, 1, 60)] * 2 + [(60, 60, 60, 60)], [0, 0, 1])
    assert ledger.decisions[2].change is Change.INCONCLUSIVE
    assert ledger.finished and ledger.spent == pytest.approx(0.05)
    with pytest.raises(ValueError, match="every look"):
        sequential.look(ledger, [None] * 3, [0] * 3)


def test_unchanged_is_the_interval_at_the_looks_level_within_the_margin() -> None:
    design = Design(0.05, 0.1, 100, 200, 100, scenarios=1)
    # Look 2 spends 0.05 − α(1/2); each side of the interval holds that much.
    level = design.increment(1)
    low, high = confint_proportions_2indep(90, 100, 90, 100, method="newcomb", compare="diff",
                                           alpha=2 * design.increment(0))
    assert low < -0.1 and high > 0.1
    ledger = sequential.look(sequential.start(design), [(90, 100, 90, 100)], [0])
    assert ledger.decisions[0].change is Change.INCONCLUSIVE
    ledger = sequential.look(ledger, [(200, 200, 200, 200)], [0])
    low, high = confint_proportions_2indep(200, 200, 200, 200, method="newcomb",
                                           compare="diff", alpha=2 * level)
    assert -0.1 <= low and high <= 0.1
    assert ledger.decisions[0].change is Change.UNCHANGED


@pytest.mark.parametrize("table", [(20, 20, 12, 20), (7, 30, 19, 25), (40, 40, 39, 41)])
@pytest.mark.parametrize("alpha", [0.05, 0.001])
def test_newcombe_at_any_level_is_statsmodels(table: tuple[int, int, int, int],
                                              alpha: float) -> None:
    passed_a, n_a, passed_b, n_b = table
    got = newcombe_at(*table, z=norm.ppf(1 - alpha / 2))
    low, high = confint_proportions_2indep(passed_b, n_b, passed_a, n_a, method="newcomb",
                                           compare="diff", alpha=alpha)
    assert (got.low, got.high) == pytest.approx((low, high), abs=1e-9)


def test_the_benchmark_runs_and_its_baseline_is_the_old_rule() -> None:
    spec = importlib.util.spec_from_file_location("gate_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # The old rule: 20/20 → 12/20 alone regressed; 20/20 → 15/20 among 13 did not (Holm).
    assert bench.old_gate([(20, 20, 12, 20)])
    assert not bench.old_gate([(20, 20, 15, 20)] + [(20, 20, 20, 20)] * 12)
    assert bench.fixed_gate([(20, 20, 15, 20)] + [(20, 20, 20, 20)] * 12)
    rates = bench.simulate(bench.ONE, 0.3, 20, 10, np.random.default_rng(1))
    assert all(0 <= r <= 1 for r in rates[:3]) and 20 <= rates[3] <= 20
    flagged, mean = bench.sequential_gate([1.0, 1.0], [0.0, 1.0], 40, np.random.default_rng(2))
    # 20/20 → 0/20: p = 1/C(40, 20), under even the first look's boundary; the run stops there.
    assert 1 / math.comb(40, 20) <= sequential.Design(0.05, 0.1, 20, 40, 10, 2).boundary(0)
    assert flagged and mean == 20
