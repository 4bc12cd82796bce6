"""How often `alk compare` calls a run regressed: with no change (the false-regression rate)
and after a real drop (the power), for three gates side by side, seeded.

- **old**: the rule alk had before (kept here as the baseline a user had): Fisher's exact test
  two-sided, Holm's correction over the scenarios, and the 95% Newcombe interval wholly below
  0, each scenario on its own; the run regressed when one scenario did.
- **fixed**: alk's gate now (`alk.stats.gate_rule.judge`, which `alk compare` applies):
  one-sided Fisher, Holm–Tarone, the lane's exact stratified test.
- **seq**: `alk compare --until-decided` (`alk.stats.sequential`): the first look at 20
  repeats a run, then a round of 10 more in both runs for each undecided scenario, up to the
  maximum; its "n" is the maximum. `mean` is the repeats a run it spent, averaged over the
  lane's scenarios.

Designs: one scenario at 95%; a lane shaped like the framework lanes (docs/frameworks.json:
14 scenarios, ten that always pass, two that always fail, one sampled at 70%, and the one
under question at 95%). The drop is taken off the scenario under question in B; with drop 0
the figure is the false-regression rate (any scenario called regressed). Targets (issue 24):
false regressions <= 5% in every design; the sequential gate >= 80% power on a 20-point drop
in the 14-scenario lane within 100 repeats a run.

    PYTHONPATH=src python benchmarks/gate.py [--runs 1000] [--seed 24]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from alk.stats import sequential
from alk.stats.gate_rule import Change, judge
from alk.stats.two_runs import fisher_exact, holm, newcombe_interval

ALPHA, MARGIN = 0.05, 0.1
FIRST, ROUND = 20, 10
ONE = (0.95,)
FRAMEWORK = (0.95,) + (1.0,) * 10 + (0.0,) * 2 + (0.7,)
DESIGNS = (("1 scenario", ONE), ("14 scenarios", FRAMEWORK))
DROPS = (0.0, 0.1, 0.2, 0.3)
REPEATS = (20, 50, 100)


def old_gate(tables: Sequence[tuple[int, int, int, int]]) -> bool:
    """The rule alk had: two-sided Fisher, Holm over the scenarios, the interval below 0."""
    p = [fisher_exact(*t) for t in tables]
    adjusted = holm(p)
    return any(q < ALPHA and newcombe_interval(*t).high < 0 for q, t in zip(adjusted, tables))


def fixed_gate(tables: Sequence[tuple[int, int, int, int]]) -> bool:
    return judge(tables, [0] * len(tables), alpha=ALPHA, margin=MARGIN).change is \
        Change.REGRESSED


def sequential_gate(rates_a: Sequence[float], rates_b: Sequence[float], max_repeats: int,
                    rng: np.random.Generator) -> tuple[bool, float]:
    """One comparison run until decided: the regressed verdict, and the mean repeats a run
    its scenarios took."""
    m = len(rates_a)
    design = sequential.Design(ALPHA, MARGIN, min(FIRST, max_repeats), max_repeats, ROUND, m)
    points = design.looks()
    passed_a = rng.binomial(points[0], rates_a)
    passed_b = rng.binomial(points[0], rates_b)
    n = np.full(m, points[0])
    ledger = sequential.start(design)
    for j in range(len(points)):
        if j:
            grow = points[j] - points[j - 1]
            for i in ledger.open():
                passed_a[i] += rng.binomial(grow, rates_a[i])
                passed_b[i] += rng.binomial(grow, rates_b[i])
                n[i] = points[j]
        tables = [(int(a), int(k), int(b), int(k)) for a, b, k in zip(passed_a, passed_b, n)]
        ledger = sequential.look(ledger, tables, [0] * m)
        if any(d.change is Change.REGRESSED for d in ledger.decisions):
            return True, float(n.mean())
        if ledger.finished:
            break
    return False, float(n.mean())


def simulate(rates: Sequence[float], drop: float, repeats: int, runs: int,
             rng: np.random.Generator) -> tuple[float, float, float, float]:
    rates_a = np.asarray(rates)
    rates_b = rates_a.copy()
    rates_b[0] = max(0.0, rates_b[0] - drop)
    old = fixed = seq = 0
    spent = 0.0
    for _ in range(runs):
        a, b = rng.binomial(repeats, rates_a), rng.binomial(repeats, rates_b)
        tables = [(int(x), repeats, int(y), repeats) for x, y in zip(a, b)]
        old += old_gate(tables)
        fixed += fixed_gate(tables)
        flagged, mean = sequential_gate(rates_a, rates_b, repeats, rng)
        seq += flagged
        spent += mean
    return old / runs, fixed / runs, seq / runs, spent / runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated comparisons a row")
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    began = time.monotonic()
    print(f"regressed, share of {args.runs} simulated comparisons (drop 0: false regressions);"
          f" seed {args.seed}")
    print(f"{'design':<13} {'n':>4} {'drop':>5}  {'old':>6} {'fixed':>6} {'seq':>6} "
          f"{'seq mean n':>10}")
    misses = []
    for name, rates in DESIGNS:
        for repeats in REPEATS:
            for drop in DROPS:
                old, fixed, seq, mean = simulate(rates, drop, repeats, args.runs, rng)
                print(f"{name:<13} {repeats:>4} {drop * 100:>4.0f}%  {old:>6.1%} {fixed:>6.1%} "
                      f"{seq:>6.1%} {mean:>10.1f}", flush=True)
                if drop == 0 and max(fixed, seq) > ALPHA:
                    misses.append(f"false regressions above 5%: {name}, n {repeats}")
                if (name, repeats, drop) == ("14 scenarios", 100, 0.2) and seq < 0.8:
                    misses.append(f"sequential power {seq:.1%} < 80% on a 20-point drop")
    print(f"{time.monotonic() - began:.0f} s; " + ("; ".join(misses) if misses
                                                   else "every target met"))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
