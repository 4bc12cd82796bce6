"""How often each of alk's 95% intervals holds the truth, measured against alk's own functions:
the coverage docs/statistics.md and the README quote.

Each section draws seeded data from a known truth, hands it to the function alk uses, and
counts how often the interval holds the truth ("coverage", nominal 95%) and how often it lies
wholly above it ("over-claims": it says the agent is more reliable than it is, nominal 2.5%).
The designs are those of the statistics audit (2026-12-01): 20 repeats a scenario, scenarios
drawn from a beta distribution of mean μ and ICC ρ (α = μ(1 − ρ)/ρ, β = (1 − μ)(1 − ρ)/ρ).
Monte Carlo error at the default 1,000 draws is about ±0.007 at 95%.

    python benchmarks/coverage.py [--draws 1000] [--seed 2026] [--only clustered,icc,...]

Sections: clustered (the lane's clustered interval, new and old), icc (the ICC's F interval),
failures (repeats to see a failure), consistency (tool use, steps, resources), robustness
(paired fault robustness), adaptive (exact, over the stop rule's stopping points).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from alk.estimate import Estimate, wilson_bounds, wilson_interval
from alk.stats.icc import clustered_interval, icc_of_tallies
from alk.stats.records import Tally

REPEATS = 20


def beta_rates(rng: np.random.Generator, mu: float, rho: float, m: int) -> np.ndarray:
    a, b = mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho
    return rng.beta(a, b, m)


def mixture_rates(rng: np.random.Generator, m: int) -> np.ndarray:
    """75% of tasks always pass, the rest pass at a rate drawn from U(0.3, 1)."""
    return np.where(rng.random(m) < 0.75, 1.0, rng.uniform(0.3, 1.0, m))


def tallies(passed: Sequence[int], n: int = REPEATS) -> list[Tally]:
    counts: dict[int, int] = {}
    for c in passed:
        counts[int(c)] = counts.get(int(c), 0) + 1
    return [Tally(n, c, j) for c, j in sorted(counts.items())]


def kish_z(passed: int, scored: int, table: list[Tally]) -> Estimate | None:
    """The clustered interval before the fix: Wilson at icc.effective_n with z."""
    icc = icc_of_tallies(table)
    if icc.effective_n is None:
        return None
    return Estimate.covering(passed / scored, *wilson_bounds(passed / scored, icc.effective_n))


def tally_row(name: str, hits: int, over: int, total: int) -> str:
    return f"{name:44} {hits / total:6.3f} {over / total:8.3f}"


def clustered(draws: int, rng: np.random.Generator) -> None:
    print("\n## clustered interval: of the population's mean rate, 20 repeats a scenario")
    print(f"{'design (scenarios)':44} {'cover':>6} {'over':>8}   old: cover  over")
    designs: list[tuple[str, float, Callable[[int], np.ndarray]]] = [
        (f"μ {mu}, ρ {rho}", mu, lambda m, mu=mu, rho=rho: beta_rates(rng, mu, rho, m))
        for mu, rho in ((0.8, 0.1), (0.8, 0.3), (0.9, 0.5), (0.5, 0.5))]
    designs.append(("75% always pass, rest U(0.3, 1)", 0.75 + 0.25 * 0.65,
                    lambda m: mixture_rates(rng, m)))
    for name, truth, draw in designs:
        for m in (3, 5, 10, 20, 50):
            new = [0, 0]
            old = [0, 0]
            for _ in range(draws):
                passed = rng.binomial(REPEATS, draw(m))
                table = tallies(passed)
                total = int(passed.sum())
                for counts, estimate in ((new, clustered_interval(total, REPEATS * m,
                                                                  icc_of_tallies(table))),
                                         (old, kish_z(total, REPEATS * m, table))):
                    assert estimate is not None
                    counts[0] += estimate.low <= truth <= estimate.high
                    counts[1] += estimate.low > truth
            print(tally_row(f"{name} ({m})", *new, draws)
                  + f"   {old[0] / draws:10.3f} {old[1] / draws:5.3f}")


def icc(draws: int, rng: np.random.Generator) -> None:
    print("\n## ICC(1) F interval: of the true ICC (beta-binomial), 20 repeats a scenario")
    print(f"{'design (scenarios)':44} {'cover':>6} {'over':>8}   marked approximate")
    for mu, rho in ((0.5, 0.05), (0.5, 0.2), (0.7, 0.2), (0.85, 0.5), (0.95, 0.3), (0.5, 0.8)):
        for m in (3, 5, 10, 20):
            hit = over = marked = total = 0
            for _ in range(draws):
                passed = rng.binomial(REPEATS, beta_rates(rng, mu, rho, m))
                value = icc_of_tallies(tallies(passed))
                if value.ci is None:
                    continue
                total += 1
                hit += value.ci[0] <= rho <= value.ci[1]
                over += value.ci[0] > rho
                marked += value.approximate
            print(tally_row(f"μ {mu}, ρ {rho} ({m})", hit, over, max(total, 1))
                  + f"   {marked / max(total, 1):.2f}")


# Tool paths of a scenario and their chances: one common path, three others (the audit's mix),
# and a near-unanimous one.
PATHS = (("a:ok", "b:ok"), ("a:ok", "a:ok", "b:ok"), ("c:ok", "b:ok"),
         ("a:error", "a:ok", "b:ok", "c:ok"))
MIXES = {"0.7 / 0.1 / 0.1 / 0.1": (0.7, 0.1, 0.1, 0.1),
         "0.4 / 0.3 / 0.2 / 0.1": (0.4, 0.3, 0.2, 0.1), "0.9 / 0.1": (0.9, 0.1, 0.0, 0.0)}
BATCH = 100  # simulated scenarios handed to alk at once, as a lane's


def tool_frequencies(steps: Sequence[str]) -> dict[str, float]:
    tools = [step.rpartition(":")[0] for step in steps]
    return {tool: tools.count(tool) / len(tools) for tool in set(tools)}


def js_distance(a: dict[str, float], b: dict[str, float]) -> float:
    from scipy.spatial.distance import jensenshannon

    keys = sorted(set(a) | set(b))
    return float(jensenshannon([a.get(k, 0.0) for k in keys], [b.get(k, 0.0) for k in keys],
                               base=2))


def levenshtein_similarity(a: Sequence[str], b: Sequence[str]) -> float:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return 1.0 - row[-1] / max(len(a), len(b), 1)


def pair_truth(chances: Sequence[float], value: Callable[[int, int], float]) -> float:
    """The expectation over two independent repeats of a pairwise figure."""
    return sum(p * q * value(i, j) for i, p in enumerate(chances)
               for j, q in enumerate(chances))


def covered(estimates: Sequence[Estimate | None], truth: float) -> tuple[int, int, int]:
    hits = sum(e is not None and e.low <= truth <= e.high for e in estimates)
    over = sum(e is not None and e.low > truth for e in estimates)
    return hits, over, sum(e is not None for e in estimates)


def consistency(draws: int, rng: np.random.Generator) -> None:
    from alk.stats.consistency import resource_consistencies
    from alk.stats.trajectories import sequence_consistencies, tool_use_consistencies

    print("\n## consistency intervals: of the figure's value for the scenario")
    print(f"{'figure, design (repeats)':44} {'cover':>6} {'over':>8}")
    frequencies = [tool_frequencies(p) for p in PATHS]
    for mix, chances in MIXES.items():
        truths = {
            "tool use": 1 - pair_truth(chances, lambda i, j: js_distance(frequencies[i],
                                                                         frequencies[j])),
            "steps": pair_truth(chances, lambda i, j: levenshtein_similarity(PATHS[i],
                                                                             PATHS[j]))}
        for n in (5, 10, 20, 50):
            found: dict[str, list[Estimate | None]] = {"tool use": [], "steps": []}
            for at in range(0, draws, BATCH):
                scenarios = [[PATHS[i] for i in rng.choice(4, size=n, p=chances)]
                             for _ in range(min(BATCH, draws - at))]
                seed = int(rng.integers(2 ** 31))
                found["tool use"] += tool_use_consistencies(scenarios, seed=seed)
                found["steps"] += sequence_consistencies(scenarios, seed=seed)
            for name, estimates in found.items():
                print(tally_row(f"{name}, {mix} ({n})", *covered(estimates, truths[name])))
    for sigma in (0.1, 0.3, 0.6):
        truth = math.exp(-math.sqrt(math.exp(sigma ** 2) - 1))  # a lognormal's CV
        for n in (5, 10, 20, 50, 200):
            estimates: list[Estimate | None] = []
            for at in range(0, draws, BATCH):
                scenarios = [{"duration_s": rng.lognormal(0.0, sigma, n).tolist()}
                             for _ in range(min(BATCH, draws - at))]
                estimates += resource_consistencies(scenarios, seed=int(rng.integers(2 ** 31)))
            print(tally_row(f"resources, lognormal σ {sigma} ({n})", *covered(estimates, truth)))


def stopping_points(p: float, sampled: bool) -> dict[tuple[int, int], float]:
    """Every (passed, scored) alk's stop rule can stop at, with its chance, at the defaults
    (rounds of 5, interval width 0.2, at most 100), enumerated exactly: the rule is evaluated
    once a round, so only a round's count of passes matters, not their order."""
    from scipy.stats import binom

    from alk.execute.adaptive import stop_reason
    from alk.result.options import CI_WIDTH, MAX_REPEATS, ROUND_SIZE

    open_states = {(0, 0): 1.0}
    stopped: dict[tuple[int, int], float] = {}
    chances = binom.pmf(np.arange(ROUND_SIZE + 1), ROUND_SIZE, p)
    while open_states:
        after: dict[tuple[int, int], float] = {}
        for (passed, failed), chance in open_states.items():
            for k, c in enumerate(chances):
                state = (passed + k, failed + ROUND_SIZE - k)
                after[state] = after.get(state, 0.0) + chance * c
        open_states = {}
        for (passed, failed), chance in after.items():
            if stop_reason(passed, failed, passed + failed, max_repeats=MAX_REPEATS,
                           ci_width=CI_WIDTH, sampled=sampled) is None:
                open_states[(passed, failed)] = chance
            else:
                stopped[(passed, passed + failed)] = chance
    return stopped


def adaptive(draws: int, rng: np.random.Generator) -> None:
    from alk.estimate import clopper_pearson_interval
    from alk.result.options import CI_WIDTH, MAX_REPEATS, ROUND_SIZE
    from alk.stats.stopped_interval import StopRule, stopped_interval

    rule = StopRule(ROUND_SIZE, CI_WIDTH, MAX_REPEATS)

    print("\n## adaptive runs (--repeats auto, defaults): exact over the stopping points")
    print(f"{'interval, scenario':44} {'min cover':>9} {'at p':>6} {'mean':>6} {'max bias':>9}")
    grid = np.round(np.arange(0.001, 1.0, 0.001), 3)
    for sampled in (False, True):
        intervals = [("Wilson", wilson_interval), (
            "Clopper–Pearson" + ("" if sampled else " (alk)"), clopper_pearson_interval)]
        if sampled:  # what alk gives a sampled scenario: exact over its rule's stopping points
            intervals.append(("exact, stopping points (alk)",
                              lambda x, n: stopped_interval(x, n, rule)))
        for name, interval in intervals:
            cover, bias = [], []
            for p in grid:
                points = stopping_points(float(p), sampled)
                cover.append(sum(c for (x, n), c in points.items()
                                 if (b := interval(x, n))[0] <= p <= b[1]))
                bias.append(sum(c * x / n for (x, n), c in points.items()) - p)
            worst = int(np.argmin(cover))
            print(f"{name + (', sampled' if sampled else ', scripted'):44} "
                  f"{cover[worst]:9.3f} {grid[worst]:6.3f} {np.mean(cover):6.3f} "
                  f"{min(bias):+9.3f}")


def robustness(draws: int, rng: np.random.Generator) -> None:
    from alk.stats.robustness import paired_fault_robustness

    print("\n## fault robustness (paired): of the scenarios' true ratio, 20 repeats each")
    print(f"{'design':44} {'cover':>6} {'over':>8}")
    designs = {  # faulted scenarios' true rates, their shared twin's
        "8 wire-like at 1.0, one at 0.0; twin 1.0": ([1.0] * 7 + [0.0], 1.0),
        "8 at 0.9; twin 0.95": ([0.9] * 8, 0.95),
        "3 at 0.5, 0.7, 0.9; twin 0.8": ([0.5, 0.7, 0.9], 0.8),
        "1 at 0.6; twin 0.9": ([0.6], 0.9),
        "10 framework-like (7 at 1, 2 at 0, 1 at 0.5); twin 1": ([1.0] * 7 + [0.0] * 2 + [0.5],
                                                                 1.0)}
    for name, (rates, twin) in designs.items():
        truth = float(np.mean(rates)) / twin
        pairs = [(f"f{i}", "b") for i in range(len(rates))]
        hits = over = total = 0
        for _ in range(draws):
            counts = {f"f{i}": (int(rng.binomial(REPEATS, r)), REPEATS)
                      for i, r in enumerate(rates)}
            counts["b"] = (int(rng.binomial(REPEATS, twin)), REPEATS)
            estimate = paired_fault_robustness(pairs, counts, seed=int(rng.integers(2 ** 31)))
            if estimate is None:
                continue
            total += 1
            hits += estimate.low <= truth <= estimate.high
            over += estimate.low > truth
        print(tally_row(name, hits, over, total))


def failures(draws: int, rng: np.random.Generator) -> None:
    from alk.stats.summary import repeats_to_see

    wilson = wilson_interval

    print("\n## repeats to see a failure: chance that N more repeats show one, after f in n")
    print(f"{'after':12} {'N at rate':>10} {'N at bound':>11} {'P(seen | N at rate)':>20} "
          f"{'P(seen | N at bound)':>21}")
    for failed, n in ((1, 20), (3, 20), (1, 50), (5, 100)):
        rate, low = failed / n, wilson(failed, n)[0]
        at_rate, at_low = repeats_to_see(rate), repeats_to_see(low)
        # Given what n repeats say of the rate (Jeffreys' posterior Beta(f + ½, n − f + ½)).
        drawn = rng.beta(failed + 0.5, n - failed + 0.5, max(draws, 1000) * 20)
        seen = [float(np.mean(1 - (1 - drawn) ** k)) for k in (at_rate, at_low)]
        print(f"{failed} in {n:<7} {at_rate:10} {at_low:11} {seen[0]:20.3f} {seen[1]:21.3f}"
              f"   (at the bound: {1 - (1 - low) ** at_rate:.2f} / {1 - (1 - low) ** at_low:.2f})")


SECTIONS: dict[str, Callable[[int, np.random.Generator], None]] = {
    "clustered": clustered, "icc": icc, "consistency": consistency, "robustness": robustness,
    "failures": failures, "adaptive": adaptive}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--only", default=",".join(SECTIONS))
    args = parser.parse_args(argv)
    print(f"coverage of alk's 95% intervals: {args.draws} draws a design, seed {args.seed}")
    for name in args.only.split(","):
        started = time.perf_counter()
        SECTIONS[name](args.draws, np.random.default_rng((args.seed, list(SECTIONS).index(name))))
        print(f"({name}: {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
