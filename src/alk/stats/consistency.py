"""Consistency: how much a scenario's repeats agree with one another, each figure with its 95%
interval.

The metrics are those of Rabanser, Kapoor et al., "Towards a Science of AI Agent Reliability"
(arXiv 2602.16666, 2026), as the HAL harness computes them (princeton-pli/hal-harness,
`reliability_eval/metrics/consistency.py` and `robustness.py`). The harness gives points only;
alk adds an interval to each:

- outcome consistency C_out = 1 - 4·p(1-p) = (2p - 1)^2 (the harness's current formula): 1 when
  every repeat agrees, 0 at a pass rate of 50%. Interval: the Wilson interval of p mapped
  through the formula, not a bootstrap (see `outcome_consistency`).
- tool-use consistency: 1 - the mean Jensen-Shannon distance (base 2, so in [0, 1]) between the
  tool-use frequencies of two repeats, over all pairs of repeats. The harness has used the
  distance with natural logarithms (at most 0.83, so its consistency never falls below 0.17)
  and, later, the divergence (the distance squared, which reads higher); alk takes the base-2
  distance: a metric, 0 for the same frequencies and 1 for tools that never overlap.
- step consistency: the mean over pairs of repeats of 1 - Levenshtein(a, b) / max(|a|, |b|), on
  their sequences of steps (a tool and its outcome, e.g. "lookup_order:ok"); two empty
  sequences are alike.
- resource consistency exp(-mean coefficient of variation) over the resources given (duration,
  CPU seconds, peak memory, model calls); the CV uses the sample standard deviation, as the
  harness does.
- fault robustness R = pass rate under injected faults / pass rate without; over a lane's
  scenarios, `pooled_fault_robustness` draws scenarios, then repeats.

Where alk departs from the harness, and why:
- The harness compares the trajectories of passing repeats only (its C_traj^+) and drops
  repeats without a tool call. These functions compare whichever trajectories they are given,
  and a repeat without a tool call is as far as can be (distance 1, similarity 0) from one with
  some: a worker that sometimes gives up without calling a tool is not consistent. A repeat
  whose steps were not recorded is passed as None and left out.
- The harness clamps R to at most 1; alk does not (see `fault_robustness`).

The other intervals are percentile bootstraps (resampling repeats, or for a lane, scenarios).
Where a resample has at most BOOTSTRAP_DRAWS possible outcomes (up to 6 repeats; a trajectory
metric's counts of a few distinct trajectories, e.g. 3 among 10 repeats; two small pools) it is
the exact bootstrap distribution, every outcome weighed by its chance; else BOOTSTRAP_DRAWS
seeded draws: multinomial up to 200 values, Poisson (each value drawn Poisson(1) times) for
sums of up to MAX_RESAMPLE, m-out-of-n past it. The same inputs and seed give the same estimate.
A trajectory metric's resample leaves out its pairs that are one repeat drawn twice (which the
data never has, and which would all count as alike), and n repeats all alike are not taken as
proof that the next one matches (see `_unanimous`): over every sample of 10 repeats from four
trajectories of known chances, the intervals hold the truth 96% of the time, where counting
those pairs left them above it 13% of the time.
The work stays bounded however many repeats there are and however a lane lays them out: a
trajectory metric works on the distinct trajectories and their counts, within budgets of
distinct trajectories, pairs and table cells (see `_budget`, `_kept` and `_pair_plan`). The
`*_consistencies` forms take a lane's scenarios at once, computing what they share once.

Pure functions: nothing here reads files or starts processes. numpy is imported inside the
functions, as in `alk.stats.summary`, so that `import alk` stays fast.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from alk.estimate import Estimate, wilson_interval

if TYPE_CHECKING:
    import numpy as np

BOOTSTRAP_DRAWS = 1000
# Distinct trajectories a scenario compares exactly; past it, the most common half of that and
# a seeded sample of the others (see `_kept`).
MAX_DISTINCT = 200
# Work allowed for a scenario's pairs of distinct trajectories, in table cells (Levenshtein:
# |a|·|b| a pair; Jensen-Shannon: both frequencies' tools): past it, a seeded share of the
# pairs is compared, each weighted by the inverse of that share.
MAX_PAIR_CELLS = 5_000_000
# A lane's scenarios share a budget of pairs and cells, so that the work stays bounded however
# its repeats are laid out (500 scenarios of 200 distinct trajectories would otherwise compare
# 10 million pairs); a scenario keeps at least MIN_DISTINCT.
LANE_PAIRS = 500_000
LANE_PAIR_CELLS = 50_000_000
MIN_DISTINCT = 10
# A bootstrap over more values than this draws this many each time (m-out-of-n), and the
# interval's spread around the point is scaled by sqrt(m / n).
MAX_RESAMPLE = 2_000
# Up to this many values, a bootstrap's resamples are made once per seed and number of values
# (a lane's scenarios mostly have the same number of repeats); past it, the sums of resources
# and of a lane's scenarios take Poisson resamples, one table for every number of values.
_SHARED_UP_TO = MAX_DISTINCT
# A batch's bootstrap tables, in numbers (4 MB): bounds the memory a lane of many scenarios
# takes, in few enough batches.
_BATCH_CELLS = 2 ** 19
# Independent streams of one seed: the resampled repeats, and the choice of what to compare.
_RESAMPLE, _CHOICE = 0, 1


def _rng(seed: int, stream: int) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng((seed, stream))


def _certain(value: float) -> Estimate:
    return Estimate(value, value, value)


@dataclass(frozen=True, slots=True)
class _Resamples:
    """Resamples of n values: how often each is taken (resamples x n), and each resample's
    probability (None: equally likely)."""

    counts: np.ndarray
    weights: np.ndarray | None


@lru_cache(maxsize=8)
def _resamples(seed: int, n: int) -> _Resamples:
    """Every resample of n values with its multinomial probability when there are no more than
    BOOTSTRAP_DRAWS of them (n <= 6: the exact bootstrap distribution, which no seed changes),
    else BOOTSTRAP_DRAWS seeded ones. Read-only, cached."""
    import numpy as np

    if math.comb(2 * n - 1, n) <= BOOTSTRAP_DRAWS:
        counts = np.array([np.bincount(c, minlength=n)
                           for c in itertools.combinations_with_replacement(range(n), n)])
        weights = np.array([math.factorial(n) / math.prod(map(math.factorial, row)) / n ** n
                            for row in counts.tolist()])
        weights.flags.writeable = False
    else:
        draws = _rng(seed, _RESAMPLE).integers(0, n, size=(BOOTSTRAP_DRAWS, n))
        rows = np.arange(BOOTSTRAP_DRAWS)[:, None] * n
        counts = np.bincount((rows + draws).ravel(), minlength=BOOTSTRAP_DRAWS * n)
        counts, weights = counts.reshape(BOOTSTRAP_DRAWS, n), None
    counts = counts.astype(float)
    counts.flags.writeable = False
    return _Resamples(counts, weights)


@lru_cache(maxsize=64)
def _compositions(n: int, d: int) -> np.ndarray | None:
    """Every way n repeats can fall into d items (compositions x d: a multinomial draw's
    outcomes), or None when there are more than BOOTSTRAP_DRAWS of them."""
    import numpy as np

    if math.comb(n + d - 1, d - 1) > BOOTSTRAP_DRAWS:
        return None
    bars = np.array(list(itertools.combinations(range(n + d - 1), d - 1)), dtype=np.int64)
    edges = np.hstack([np.full((bars.shape[0], 1), -1), bars.reshape(-1, d - 1),
                       np.full((bars.shape[0], 1), n + d - 1)])
    parts = (np.diff(edges, axis=1) - 1).astype(float)
    parts.flags.writeable = False
    return parts


def _multinomial(n: int, outcomes: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """The chance of each outcome (outcomes x d) of a multinomial draw of n with each row of
    `shares` (rows x d): rows x outcomes."""
    import numpy as np

    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])
    ways = log_factorial[n] - log_factorial[outcomes.astype(np.int64)].sum(axis=1)
    return np.exp(ways[None, :] + np.log(shares) @ outcomes.T)


@lru_cache(maxsize=2)
def _poisson_counts(seed: int) -> np.ndarray:
    """How often each of MAX_RESAMPLE values is taken in BOOTSTRAP_DRAWS Poisson resamples (each
    value Poisson(1) times, independently: the multinomial bootstrap's large-n twin, whose
    draws need not know n). A table of n values takes the first n columns. Read-only, cached."""
    counts = _rng(seed, _RESAMPLE).poisson(1.0, size=(BOOTSTRAP_DRAWS, MAX_RESAMPLE))
    counts = counts.astype(float)
    counts.flags.writeable = False
    return counts


def _resampled_sums(table: np.ndarray, seed: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, float]:
    """Bootstrap sums of each row of a rows x n table and of its squares (rows x resamples
    each), each resample's number of values, their probabilities (None: equally likely), and
    the spread's scale: up to _SHARED_UP_TO values, multinomial resamples (`_resamples`); up
    to MAX_RESAMPLE, Poisson ones; past it, m-out-of-n with m = MAX_RESAMPLE."""
    import numpy as np

    n, rows = table.shape[1], table.shape[0]
    if n <= MAX_RESAMPLE:
        if n <= _SHARED_UP_TO:
            resamples = _resamples(seed, n)
            counts, weights = resamples.counts, resamples.weights
            sizes = np.full(counts.shape[0], float(n))
        else:
            counts, weights = _poisson_counts(seed)[:, :n], None
            sizes = counts.sum(axis=1)
        both = np.vstack([table, table * table]) @ counts.T
        return both[:rows], both[rows:], sizes, weights, 1.0
    indices = _rng(seed, _RESAMPLE).integers(0, n, size=(BOOTSTRAP_DRAWS, MAX_RESAMPLE))
    sums, squares = np.empty((2, rows, BOOTSTRAP_DRAWS))
    for row, values in enumerate(table):
        drawn = values[indices]
        sums[row], squares[row] = drawn.sum(axis=1), np.einsum("bm,bm->b", drawn, drawn)
    sizes = np.full(BOOTSTRAP_DRAWS, float(MAX_RESAMPLE))
    return sums, squares, sizes, None, math.sqrt(MAX_RESAMPLE / n)


def _intervals(points: np.ndarray, draws: np.ndarray, weights: np.ndarray | None = None,
               scale: float = 1.0) -> list[Estimate]:
    """Each row's percentile interval of its bootstrap draws (the 2.5% and 97.5% points of
    their distribution, no interpolation; `weights`: the draws' probabilities, the same for
    every row or one row each), nan draws
    dropped; the spread around the point scaled by `scale` (m-out-of-n), and widened where
    needed to hold the point."""
    import numpy as np

    rows = np.arange(draws.shape[0])
    if weights is None:
        weights = np.full(draws.shape[1], 1.0 / draws.shape[1])
        if not np.isnan(draws).any():  # order statistics, without sorting every row
            ranks = [max(0, math.ceil(q * draws.shape[1]) - 1) for q in (0.025, 0.975)]
            ends = np.partition(draws, ranks, axis=1)[:, ranks]
            return _estimates(points, ends[:, 0], ends[:, 1], scale)
    order = np.argsort(draws, axis=1)  # nan last, weighing nothing
    ordered = draws[rows[:, None], order]
    weights = np.take_along_axis(np.broadcast_to(weights, draws.shape), order, axis=1)
    cumulative = np.cumsum(np.where(np.isnan(ordered), 0.0, weights), axis=1)
    total = cumulative[:, -1:] * (1 - 1e-9)  # the share reached, give or take rounding
    low = ordered[rows, (cumulative >= 0.025 * total).argmax(axis=1)]
    high = ordered[rows, (cumulative >= 0.975 * total).argmax(axis=1)]
    return _estimates(points, low, high, scale)


def _estimates(points: np.ndarray, low: np.ndarray, high: np.ndarray,
               scale: float) -> list[Estimate]:
    out = []
    for value, lo, hi in zip(points.tolist(), low.tolist(), high.tolist()):
        if math.isnan(lo):  # no draw had a value
            lo = hi = value
        if scale != 1.0:
            lo, hi = value + (lo - value) * scale, value + (hi - value) * scale
        out.append(Estimate.covering(value, lo, hi))
    return out


# ---------------------------------------------------------------------------------------------
# Outcome consistency


def outcome_consistency(passed: int, scored: int) -> Estimate | None:
    """C_out = 1 - 4·p(1-p) for `passed` of `scored` repeats; None with fewer than 2 scored
    repeats (one repeat cannot disagree with itself).

    The interval is the Wilson interval [lo, hi] of p mapped through the formula: from the
    smaller of (2·lo - 1)^2 and (2·hi - 1)^2 (0 when 50% lies within [lo, hi]) to the larger.
    C_out is a function of p alone, so this holds C_out at least as often as Wilson's holds p.
    A bootstrap would not: at 20/20 every draw passes 20 times, and its interval [1, 1] would
    claim a certainty 20 repeats cannot give (Wilson: p >= 0.839, so C_out >= 0.46)."""
    if not 0 <= passed <= scored:
        raise ValueError(f"outcome_consistency needs 0 <= passed <= scored, got {passed}/{scored}")
    if scored < 2:
        return None
    lo, hi = wilson_interval(passed, scored)
    ends = ((2 * lo - 1) ** 2, (2 * hi - 1) ** 2)
    low = 0.0 if lo <= 0.5 <= hi else min(ends)
    return Estimate((2 * passed / scored - 1) ** 2, low, max(ends))


# ---------------------------------------------------------------------------------------------
# Trajectory consistency

Trajectories = Sequence[Sequence[str] | None]


def step_tools(step: str, *, gateway: bool = False) -> tuple[str, ...]:
    """The tools a trajectory step used. A worker's step is "tool:ok" or "tool:error" (the
    tool is what comes before the last ':'); a step alk's model gateway recorded is
    "status:tool,tool", "status:text" or "status:<fault>", where a text reply and a fault count
    as an action of their own."""
    if gateway:
        return tuple(step.partition(":")[2].split(","))
    head, colon, _ = step.rpartition(":")
    return (head if colon else step,)


def tool_use_consistency(trajectories: Trajectories, *, gateway: bool = False,
                         seed: int = 0) -> Estimate | None:
    """1 - the mean Jensen-Shannon distance (base 2) between two repeats' tool-use frequencies,
    over all pairs of repeats, with a bootstrap interval. A trajectory is a repeat's steps
    (`gateway`: as alk's model gateway records them, see `step_tools`), None when they were not
    recorded. None with fewer than 2 recorded trajectories."""
    return tool_use_consistencies([trajectories], gateway=gateway, seed=seed)[0]


def tool_use_consistencies(scenarios: Sequence[Trajectories], *, gateway: bool = False,
                           seed: int = 0) -> list[Estimate | None]:
    """`tool_use_consistency` of each of a lane's scenarios (see `_pairwise_consistencies`)."""
    tools: dict[str, tuple[str, ...]] = {}

    def frequencies(steps: tuple[str, ...]) -> tuple[tuple[str, float], ...]:
        counts: Counter[str] = Counter()
        for step, count in Counter(steps).items():
            if step not in tools:
                tools[step] = step_tools(step, gateway=gateway)
            for tool in tools[step]:
                counts[tool] += count
        total = sum(counts.values())
        return tuple(sorted((tool, c / total) for tool, c in counts.items()))

    # A pair's work: both frequencies' entries, matched to find the tools they share.
    return _pairwise_consistencies(scenarios, frequencies, _js_distances,
                                   lambda sizes: (len(sizes) - 1) * sum(sizes),
                                   distance=True, seed=seed)


def sequence_consistency(trajectories: Trajectories, *, seed: int = 0) -> Estimate | None:
    """The mean normalized Levenshtein similarity 1 - d(a, b) / max(|a|, |b|) between two
    repeats' step sequences, over all pairs of repeats, with a bootstrap interval; two empty
    sequences count as alike. Trajectories that are None (not recorded) are left out; None
    with fewer than 2 left."""
    return sequence_consistencies([trajectories], seed=seed)[0]


def sequence_consistencies(scenarios: Sequence[Trajectories], *,
                           seed: int = 0) -> list[Estimate | None]:
    """`sequence_consistency` of each of a lane's scenarios (see `_pairwise_consistencies`)."""
    # A pair's work: the cells of its table, sum over pairs of |a|·|b|.
    return _pairwise_consistencies(scenarios, lambda steps: steps, _similarities,
                                   lambda sizes: (sum(sizes) ** 2 - sum(x * x for x in sizes)) / 2,
                                   distance=False, seed=seed)


def _unanimous(n: int) -> Estimate:
    """n repeats alike: 1, and as low as another repeat might have differed unseen. A bootstrap
    would say [1, 1], as it cannot see what it never drew; the Wilson bound q of a share of 0
    in n is how often a repeat may still differ, and two repeats are then alike at least
    (1 - q)^2 of the time (0.70 at 20 repeats, 0.93 at 100)."""
    unseen = wilson_interval(0, n)[1]
    return Estimate(1.0, (1.0 - unseen) ** 2, 1.0)


@dataclass(frozen=True, slots=True)
class _Plan:
    """A scenario compared on a sample (see `_pair_plan`): its repeats' counts by kept item,
    the last count gathering the items not kept; the pairs i < j of kept items compared and
    their weights; the same-item pairs of repeats; the share the items not kept would have of
    them among repeats drawn from them."""

    index: int
    counts: np.ndarray
    first: np.ndarray
    second: np.ndarray
    weights: np.ndarray
    same_pairs: float
    rest_share: float


@dataclass(frozen=True, slots=True)
class _Budget:
    """What each scenario of a batch may compare: distinct items, and table cells."""

    distinct: int
    cells: float


def _budget(scenarios: int) -> _Budget:
    """A scenario's share of the lane's budget, within MIN_DISTINCT, MAX_DISTINCT and
    MAX_PAIR_CELLS: one scenario has MAX_DISTINCT and MAX_PAIR_CELLS."""
    share = max(1, scenarios)
    distinct = int(math.sqrt(2 * LANE_PAIRS / share))
    return _Budget(max(MIN_DISTINCT, min(MAX_DISTINCT, distinct)),
                   min(MAX_PAIR_CELLS, LANE_PAIR_CELLS / share))


def _pairwise_consistencies(scenarios: Sequence[Trajectories], key: Callable[[tuple], Hashable],
                            values_of: Callable[[list, np.ndarray, np.ndarray], np.ndarray],
                            work: Callable[[list[int]], float], *,
                            distance: bool, seed: int) -> list[Estimate | None]:
    """Per scenario, the mean of a pairwise similarity (or 1 - the mean of a distance) over the
    ordered pairs of repeats i != j, from its distinct items (trajectories mapped by `key`)
    and their counts: pairs of repeats with the same item contribute 1 (similarity) or 0
    (distance) and are counted exactly; `values_of(items, a, b)` compares the items of index
    a[p] and b[p] for every p, and `work` says how many table cells comparing every pair of
    items of the given sizes takes. The bootstrap draws the counts (a multinomial draw: the
    same as resampling repeats).

    A lane's scenarios are worked out together: pairs they share are compared once, and
    scenarios of up to _SHARED_UP_TO repeats compared in full are bootstrapped at once, by
    number of repeats and of items; the others, one by one."""
    import numpy as np

    results: list[Estimate | None] = [None] * len(scenarios)
    compared = []
    for index, trajectories in enumerate(scenarios):
        sequences = Counter(tuple(t) for t in trajectories if t is not None)
        if sum(sequences.values()) >= 2:
            compared.append((index, sequences))
    budget = _budget(sum(len(sequences) > 1 for _, sequences in compared))
    ids: dict[Hashable, int] = {}
    items: list[Hashable] = []

    def item_id(item: Hashable) -> int:
        if item not in ids:
            ids[item] = len(items)
            items.append(item)
        return ids[item]

    together: dict[tuple[int, int], list[tuple[int, list[int], list[int]]]] = {}
    alone: list[tuple[_Plan, np.ndarray]] = []
    for index, sequences in compared:
        # Trajectories with the same key are one item; past the distinct ones a scenario
        # compares, only the keys of those compared are worked out (`_kept` samples).
        merge = len(sequences) <= budget.distinct
        groups: Counter[Hashable] = Counter()
        for steps, count in sequences.items():
            groups[key(steps) if merge else steps] += count
        n, local = sum(groups.values()), list(groups)
        if len(local) == 1:
            results[index] = _unanimous(n)
            continue
        sizes = [len(item) for item in local]
        if (n <= _SHARED_UP_TO and len(local) <= budget.distinct
                and work(sizes) <= budget.cells):
            together.setdefault((n, len(local)), []).append(
                (index, list(groups.values()), [item_id(item) for item in local]))
            continue
        plan, kept = _pair_plan(index, sizes, np.fromiter(groups.values(), dtype=float), work,
                                budget, seed)
        kept_items = [local[i] for i in kept.tolist()]
        alone.append((plan, np.array([item_id(item if merge else key(item))
                                      for item in kept_items], dtype=np.int64)))

    # Every pair of items to compare, each once.
    firsts, seconds = [], []
    for (_, d), group in together.items():
        first, second = np.triu_indices(d, 1)
        item_ids = np.array([i for _, _, i in group], dtype=np.int64)
        firsts.append(item_ids[:, first].ravel())
        seconds.append(item_ids[:, second].ravel())
    for plan, item_ids in alone:
        firsts.append(item_ids[plan.first])
        seconds.append(item_ids[plan.second])
    same = 0.0 if distance else 1.0
    values = np.empty(0)
    if firsts:
        a, b = np.concatenate(firsts), np.concatenate(seconds)
        pairs, inverse = np.unique(np.minimum(a, b) * len(items) + np.maximum(a, b),
                                   return_inverse=True)
        a, b = pairs // len(items), pairs % len(items)
        values = values_of(items, a, b)[inverse]

    def consistency(n: int, same_pairs: np.ndarray, other_pairs: np.ndarray,
                    repeated: np.ndarray | float = 0.0) -> np.ndarray:
        """`repeated`: the pairs of a resample that are one repeat drawn twice (expected, given
        the items' counts), left out as the data has none: counted, they would all be alike
        and lift the interval above the point (at 10 repeats, 1 pair in 10 of a resample). A
        resample of a single repeat, with no other pair, keeps them."""
        repeated = np.where(repeated < n * (n - 1), repeated, 0.0)
        mean = (same * (same_pairs - repeated) + other_pairs) / (n * (n - 1) - repeated)
        return np.clip(1.0 - mean if distance else mean, 0.0, 1.0)

    at = 0
    for (n, d), group in together.items():
        compositions = _compositions(n, d)
        if compositions is None:
            resamples = _resamples(seed, n)
            # A resample's count of an item: how often the repeats holding it were drawn, the
            # repeats taken in item order (as `_drawn_counts` does).
            drawn = np.zeros((n + 1, resamples.counts.shape[0]))
            np.cumsum(resamples.counts.T, axis=0, out=drawn[1:])
        first, second = np.triu_indices(d, 1)
        step = max(1, _BATCH_CELLS // (BOOTSTRAP_DRAWS * d))
        for start in range(0, len(group), step):
            part = group[start:start + step]
            counts = np.array([c for _, c, _ in part], dtype=float)
            table = np.zeros((len(part), d, d))
            table[:, first, second] = values[at:at + len(part) * first.size].reshape(len(part), -1)
            at += len(part) * first.size
            table += table.transpose(0, 2, 1)  # ordered pairs; the diagonal is counted apart
            points = consistency(n, (counts * (counts - 1)).sum(axis=1),
                                 np.einsum("sk,skl,sl->s", counts, table, counts))
            if compositions is None:
                ends = np.cumsum(counts, axis=1).astype(np.int64)
                w = drawn[ends] - drawn[ends - counts.astype(np.int64)]  # scenario, item, draw
                twice = w * (w - 1)
                draws = consistency(n, twice.sum(axis=1), (np.matmul(table, w) * w).sum(axis=1),
                                    (twice / counts[..., None]).sum(axis=1))
                weights = resamples.weights
            else:  # every resample's item counts, each with its multinomial chance
                w = compositions
                twice = w * (w - 1)
                draws = consistency(n, twice.sum(axis=1)[None, :],
                                    (np.matmul(w[None], table) * w).sum(axis=2),
                                    (twice[None] / counts[:, None, :]).sum(axis=2))
                weights = _multinomial(n, w, counts / n)
            for (index, _, _), estimate in zip(part, _intervals(points, draws, weights)):
                results[index] = estimate
    for plan, _ in alone:
        k, n = plan.counts.size - 1, int(plan.counts.sum())
        table = np.zeros((k, k))
        table[plan.first, plan.second] = values[at:at + plan.first.size] * plan.weights
        at += plan.first.size
        table += table.T
        drawn, weights = _drawn_counts(plan.counts, seed)
        w, others = drawn[:, :-1], drawn[:, -1]
        counts = plan.counts[None, :-1]
        point = consistency(n, np.array([plan.same_pairs]), ((counts @ table) * counts).sum(1))
        rest = plan.counts[-1]
        twice = w * (w - 1)
        draws = consistency(n, twice.sum(axis=1) + others * (others - 1) * plan.rest_share,
                            ((w @ table) * w).sum(axis=1),
                            (twice / plan.counts[:-1]).sum(axis=1)
                            + (others * (others - 1) / rest if rest else 0.0))
        results[plan.index] = _intervals(point, draws[None, :], weights)[0]
    return results


def _pair_plan(index: int, sizes: list[int], counts: np.ndarray,
               work: Callable[[list[int]], float], budget: _Budget, seed: int
               ) -> tuple[_Plan, np.ndarray]:
    """What a scenario compares, and which of its items (see `_kept`): every pair of kept items
    while their work is within the budget's cells, else a seeded share q of the pairs, each
    weighing 1/q."""
    import numpy as np

    rng = _rng(seed, _CHOICE)
    kept, factors, rest = _kept(counts, budget.distinct, rng)
    first, second = np.triu_indices(kept.size, 1)
    total = work([sizes[i] for i in kept.tolist()])
    share = min(1.0, budget.cells / total) if total > 0 else 1.0
    if share < 1.0:
        chosen = rng.random(first.size) < share
        first, second = first[chosen], second[chosen]
    rest_counts = counts[rest]
    rest_share = (float(((rest_counts / rest_counts.sum()) ** 2).sum()) if rest.size else 0.0)
    plan = _Plan(index, np.append(counts[kept], rest_counts.sum()), first, second,
                 factors[first, second] / share, float((counts * (counts - 1)).sum()),
                 rest_share)
    return plan, kept


def _kept(counts: np.ndarray, distinct: int, rng: np.random.Generator
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which distinct items are compared, each pair's weight, and the others.

    Up to `distinct`, all of them, each pair weighing 1. Past it, the most common half of that
    (ties in first-seen order) and a seeded uniform sample of the rest, each pair weighted by
    the inverse of the chance that it was sampled (Horvitz-Thompson): the estimate stays
    unbiased, and the interval leaves out the variation of that sample."""
    import numpy as np

    d = counts.size
    if d <= distinct:
        return np.arange(d), np.ones((d, d)), np.arange(0)
    order = np.argsort(-counts, kind="stable")
    heads = distinct // 2
    head, tail = order[:heads], order[heads:]
    size = distinct - heads
    chosen = np.zeros(tail.size, dtype=bool)
    chosen[rng.choice(tail.size, size=size, replace=False)] = True
    one = size / tail.size
    both = size * (size - 1) / (tail.size * (tail.size - 1))
    factors = np.ones((distinct, distinct))
    factors[:heads, heads:] = factors[heads:, :heads] = 1 / one
    factors[heads:, heads:] = 1 / both
    return np.concatenate([head, tail[chosen]]), factors, tail[~chosen]


def _drawn_counts(counts: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Bootstrap resamples (resamples x categories) of the repeats in `counts`, and their
    probabilities (None: equally likely)."""
    import numpy as np

    n = int(counts.sum())
    if n <= _SHARED_UP_TO:
        resamples = _resamples(seed, n)
        categories = np.repeat(np.arange(counts.size), counts.astype(int))
        return resamples.counts @ np.eye(counts.size)[categories], resamples.weights
    # Category by category, each a binomial draw from the repeats left.
    rng, drawn = _rng(seed, _RESAMPLE), np.empty((BOOTSTRAP_DRAWS, counts.size))
    left, share_left = np.full(BOOTSTRAP_DRAWS, n), 1.0
    for i, count in enumerate(counts[:-1].tolist()):
        share = count / n
        drawn[:, i] = rng.binomial(left, min(1.0, share / share_left)) if share_left > 0 else 0
        left = left - drawn[:, i].astype(np.int64)
        share_left -= share
    drawn[:, -1] = left
    return drawn, None


def _js_distances(items: list[tuple[tuple[str, float], ...]], a: np.ndarray,
                  b: np.ndarray) -> np.ndarray:
    """Jensen-Shannon distances (base 2) between the tool frequencies items[a[p]] and items[b[p]]
    (sorted tuples of (tool, share)).

    JSD(p, q) = 1 + 1/2·sum over the tools both use of p·log2(p/(p+q)) + q·log2(q/(p+q)): a
    tool only one of them uses adds what it would to frequencies that never overlap, so only
    the tools a pair shares are looked at, found for all pairs at once by matching (pair, tool)
    numbers. No tools at all share nothing: distance 1 to any other."""
    import numpy as np

    used = np.unique(np.concatenate([a, b]))
    tools: dict[str, int] = {}
    tool_of, share_of, sizes = [], [], np.zeros(len(items), dtype=np.int64)
    for i in used.tolist():
        tool_of.extend(tools.setdefault(tool, len(tools)) for tool, _ in items[i])
        share_of.extend(share for _, share in items[i])
        sizes[i] = len(items[i])
    starts = np.zeros(len(items), dtype=np.int64)
    starts[used] = np.cumsum(sizes[used]) - sizes[used]
    tool_of, share_of = np.array(tool_of, dtype=np.int64), np.array(share_of, dtype=float)
    width = max(1, len(tools))

    def entries(which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The entries of each pair's item `which`, as pair·width + tool, and their shares."""
        lengths = sizes[which]
        before = np.repeat(np.cumsum(lengths) - lengths, lengths)
        at = np.arange(int(lengths.sum())) - before + np.repeat(starts[which], lengths)
        return np.repeat(np.arange(which.size), lengths) * width + tool_of[at], share_of[at]

    out = np.empty(a.size)
    # Pairs in blocks of about MAX_PAIR_CELLS entries, to bound the temporary arrays.
    step = max(1, MAX_PAIR_CELLS // max(1, int(sizes.max(initial=0)) * 2))
    for start in range(0, a.size, step):
        (ka, p), (kb, q) = entries(a[start:start + step]), entries(b[start:start + step])
        _, in_a, in_b = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
        p, q = p[in_a], q[in_b]
        terms = p * np.log2(p / (p + q)) + q * np.log2(q / (p + q))
        sums = np.bincount(ka[in_a] // width, weights=terms, minlength=min(step, a.size - start))
        divergence = np.clip(1.0 + 0.5 * sums, 0.0, 1.0)
        # The same frequencies leave a rounding error of 1e-16, which the root would make 1e-8.
        out[start:start + step] = np.sqrt(np.where(divergence < 1e-12, 0.0, divergence))
    return out


def js_distance(p: Sequence[float], q: Sequence[float]) -> float:
    """Jensen-Shannon distance (base 2) between two frequency vectors over the same tools
    (counts or probabilities); two all-zero vectors are alike, one is at distance 1 from any
    other."""
    import numpy as np

    pair = [tuple((str(i), v / sum(vector)) for i, v in enumerate(vector) if v > 0)
            for vector in (p, q)]
    if pair == [(), ()]:
        return 0.0
    return float(_js_distances(pair, np.array([0]), np.array([1]))[0])


def levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    """Edit distance between two sequences of steps (insert, delete, substitute: 1 each)."""
    import numpy as np

    return int(_similarities([tuple(a), tuple(b)], np.array([0]), np.array([1]),
                             distances=True)[0])


def _edit_distances(a: np.ndarray, b: np.ndarray, rows: np.ndarray,
                    cols: np.ndarray) -> np.ndarray:
    """Levenshtein distances of pairs of coded sequences a[p, :rows[p]] and b[p, :cols[p]],
    one table row of every pair at a time.

    Row i from row i-1: cell j is the lesser of a substitution (diagonal) and a deletion
    (above); then insertions run along the row: cell j = min over j' <= j of cell j' + j - j',
    which is j + the running minimum of (cell - j). A pair's distance is read at its own last
    row and column, which the cells past them (padding) never reach."""
    import numpy as np

    j = np.arange(b.shape[1] + 1)
    prev, cur = np.tile(j, (a.shape[0], 1)), np.empty((a.shape[0], j.size), dtype=np.int64)
    out = cols.copy()  # pairs with an empty sequence
    for i in range(1, a.shape[1] + 1):
        cur[:, 0] = i
        np.minimum(prev[:, :-1] + (b != a[:, i - 1:i]), prev[:, 1:] + 1, out=cur[:, 1:])
        np.minimum.accumulate(cur - j, axis=1, out=prev)
        prev += j
        done = np.flatnonzero(rows == i)
        out[done] = prev[done, cols[done]]
    return out


def _similarities(items: list[tuple[str, ...]], a: np.ndarray, b: np.ndarray, *,
                  distances: bool = False) -> np.ndarray:
    """1 - Levenshtein / max length between the sequences items[a[p]] and items[b[p]] (1 for
    two empty ones), or the distances themselves.

    The shorter sequence of each pair walks the rows. Pairs go in batches of like sizes (their
    lengths rounded up to a power of 2), each within MAX_PAIR_CELLS table cells: few batches,
    and little padding."""
    import numpy as np

    if a.size == 0:
        return np.empty(0)
    used = np.unique(np.concatenate([a, b]))
    lengths = np.zeros(len(items), dtype=np.int64)
    lengths[used] = [len(items[i]) for i in used.tolist()]
    codes: dict[str, int] = {}
    row_of = np.zeros(len(items), dtype=np.int64)
    row_of[used] = np.arange(used.size)
    coded = np.full((used.size, int(lengths.max(initial=0))), -1, dtype=np.int64)
    for row, i in enumerate(used.tolist()):
        coded[row, :lengths[i]] = [codes.setdefault(step, len(codes)) for step in items[i]]
    short = np.where(lengths[a] <= lengths[b], a, b)
    long_ = np.where(lengths[a] <= lengths[b], b, a)
    rows, cols = lengths[short], lengths[long_]
    sizes = np.ceil(np.log2(rows + 1)) * 64 + np.ceil(np.log2(cols + 1))
    order = np.argsort(sizes, kind="stable")
    bounds = np.flatnonzero(np.diff(sizes[order])) + 1
    out = np.empty(a.size)
    for batch in np.split(order, bounds):
        height, width = int(rows[batch].max()), int(cols[batch].max())
        step = max(1, MAX_PAIR_CELLS // ((height + 1) * (width + 1)))
        for start in range(0, batch.size, step):
            part = batch[start:start + step]
            out[part] = _edit_distances(coded[row_of[short[part]], :height],
                                        coded[row_of[long_[part]], :width], rows[part],
                                        cols[part])
    if distances:
        return out
    return np.where(cols > 0, 1.0 - out / np.maximum(cols, 1), 1.0)


# ---------------------------------------------------------------------------------------------
# Resource consistency


def _stacked(scenarios: list[Mapping[str, Sequence[float | None]]]) -> np.ndarray:
    """Scenarios' resources (the same names, the same number of repeats) as one scenarios x
    resources x repeats table, None as nan; a resource no coefficient of variation exists for
    (fewer than 2 values, or a mean of 0) is all nan. Raises ValueError on a negative or
    infinite value."""
    import numpy as np

    stack = np.array([list(resources.values()) for resources in scenarios], dtype=float)
    present = ~np.isnan(stack)
    wrong = present & ~(np.isfinite(stack) & (stack >= 0))
    if wrong.any():
        s, r, i = (int(x[0]) for x in np.nonzero(wrong))
        raise ValueError(f"resource {list(scenarios[s])[r]!r}: values must be finite and >= 0, "
                         f"got {stack[s, r, i]} (repeat {i + 1} of {stack.shape[2]})")
    unusable = (present.sum(axis=2) < 2) | (np.where(present, stack, 0.0).sum(axis=2) <= 0)
    stack[unusable] = np.nan
    return stack


def _lengths_checked(resources: Mapping[str, Sequence[float | None]]) -> int:
    lengths = {name: len(values) for name, values in resources.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"resource consistency needs one value (or None) per repeat for every "
                         f"resource, in the same order; got lengths {lengths}")
    return next(iter(lengths.values()), 0)


def usable_resources(resources: Mapping[str, Sequence[float | None]]) -> tuple[str, ...]:
    """The resources that resource consistency uses: those with at least 2 values (None or nan:
    not measured in that repeat) and a mean above 0, so that a coefficient of variation exists.
    Raises ValueError when the sequences differ in length or hold a negative or infinite
    value."""
    import numpy as np

    if not _lengths_checked(resources):
        return ()
    usable = ~np.isnan(_stacked([resources])[0]).all(axis=1)
    return tuple(name for name, use in zip(resources, usable.tolist()) if use)


def resource_consistency(resources: Mapping[str, Sequence[float | None]], *,
                         seed: int = 0) -> Estimate | None:
    """exp(-mean coefficient of variation) over the usable resources (see `usable_resources`),
    each given as one value per repeat (e.g. duration_s, cpu_s, peak_rss_mb, model_calls);
    None when no resource is usable. 1 means every repeat used the same; 0.37, a CV of 1.

    The bootstrap resamples repeats, the same draw for every resource; a resource whose draw
    has fewer than 2 values or a zero mean is left out of that draw's mean. Past MAX_RESAMPLE
    repeats, a draw takes MAX_RESAMPLE of them (m-out-of-n), and the interval's spread around
    the point is scaled by sqrt(m/n). Read it for a scenario whose cost or time must be
    predictable; it says nothing of whether the repeats passed.

    With few repeats the interval is approximate, and optimistic: a sample's CV runs low, and
    its bootstrap lower still. Drawing 10 lognormal durations (CV 0.42) again and again, the
    interval held the truth 71% of the time, above it the rest; 86% at 50 repeats, 90% at
    200 (a bias-corrected interval, BCa, would narrow the gap, not close it)."""
    return resource_consistencies([resources], seed=seed)[0]


def resource_consistencies(scenarios: Sequence[Mapping[str, Sequence[float | None]]], *,
                           seed: int = 0) -> list[Estimate | None]:
    """`resource_consistency` of each scenario's resources, scenarios with the same resources
    and number of repeats bootstrapped together."""
    import numpy as np

    results: list[Estimate | None] = [None] * len(scenarios)
    groups: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for index, resources in enumerate(scenarios):
        n = _lengths_checked(resources)
        if n:
            groups.setdefault((n, tuple(resources)), []).append(index)
    for (n, names), indices in groups.items():
        step = max(1, _BATCH_CELLS // (2 * len(names) * BOOTSTRAP_DRAWS))
        for at in range(0, len(indices), step):
            part = indices[at:at + step]
            stack = _stacked([scenarios[i] for i in part])
            usable = ~np.isnan(stack).all(axis=2).all(axis=1)
            if usable.any():
                estimates = iter(_resource_estimates(stack[usable], seed))
                for index in np.array(part)[usable].tolist():
                    results[index] = next(estimates)
    return results


def _resource_estimates(stack: np.ndarray, seed: int) -> list[Estimate]:
    """Resource consistency of scenarios x resources x repeats (nan: not measured; a resource
    all nan is left out)."""
    import numpy as np

    scenarios, rows, n = stack.shape
    present = ~np.isnan(stack)
    with np.errstate(divide="ignore", invalid="ignore"):
        counts = present.sum(axis=2)
        means = np.where(present, stack, 0.0).sum(axis=2) / counts
        # Centred first: variances from sums of squares stay exact however small the CV.
        centred = np.where(present, stack - means[..., None], 0.0)
        cv = np.sqrt((centred * centred).sum(axis=2) / (counts - 1)) / means
        points = np.exp(-_mean_of_numbers(cv, axis=1))
        complete = bool(present.all())
        table = centred if complete else np.concatenate([centred, present], axis=1)
        sums, squares, drawn, weights, scale = _resampled_sums(table.reshape(-1, n), seed)
        sums = sums.reshape(scenarios, 2 * rows if not complete else rows, -1)
        squares = squares.reshape(scenarios, sums.shape[1], -1)[:, :rows]
        if complete:  # in place, the tables being the bulk of a lane's work
            variance, spread = squares, np.multiply(sums, sums)
            spread /= drawn
            variance -= spread
            np.maximum(variance, 0.0, out=variance)
            variance /= drawn - 1
            mean = sums
            mean /= drawn  # the draw's mean, less the data's
            mean += means[..., None]
            cv = np.sqrt(variance, out=variance)
            cv /= mean
            draws = np.exp(-cv.mean(axis=1))
        else:
            sizes, sums = sums[:, rows:], sums[:, :rows]
            mean = means[..., None] + sums / sizes
            variance = np.maximum(squares - sums * sums / sizes, 0.0) / (sizes - 1)
            cv = np.sqrt(variance) / mean
            cv[(sizes < 2) | ~(mean > 0)] = np.nan
            draws = np.exp(-_mean_of_numbers(cv, axis=1))
    return _intervals(points, draws, weights, scale)


def _mean_of_numbers(values: np.ndarray, axis: int) -> np.ndarray:
    """The mean of the values that are not nan along an axis (nan where there are none)."""
    import numpy as np

    number = ~np.isnan(values)
    return np.where(number, values, 0.0).sum(axis=axis) / number.sum(axis=axis)


# ---------------------------------------------------------------------------------------------
# Fault robustness


def fault_robustness(faulted_passed: int, faulted_scored: int, baseline_passed: int,
                     baseline_scored: int, *, seed: int = 0) -> Estimate | None:
    """R = pass rate under injected faults / pass rate without; None when either pool is empty
    or no baseline repeat passed.

    R is not clamped to 1 (the harness clamps it): above 1, the faulted repeats passed more
    often, which is chance, not a benefit; read it as "no harm measured", and the interval as
    how much harm the data still allow. The interval bootstraps both pools, each a binomial
    draw (every pair of outcomes with its probability when there are at most BOOTSTRAP_DRAWS
    of them); a draw whose baseline never passed has no bounded ratio, so when such draws
    weigh more than 2.5%, the upper bound is math.inf: the baseline is too low to bound R."""
    import numpy as np

    for passed, scored in ((faulted_passed, faulted_scored), (baseline_passed, baseline_scored)):
        if not 0 <= passed <= scored:
            raise ValueError(f"fault_robustness needs 0 <= passed <= scored in each pool, got "
                             f"{passed}/{scored}")
    if faulted_scored == 0 or baseline_scored == 0 or baseline_passed == 0:
        return None
    rate_f, rate_b = faulted_passed / faulted_scored, baseline_passed / baseline_scored
    weights = None
    if (faulted_scored + 1) * (baseline_scored + 1) <= BOOTSTRAP_DRAWS:
        outcomes = [(np.arange(n + 1) / n,
                     np.array([math.comb(n, k) * rate ** k * (1 - rate) ** (n - k)
                               for k in range(n + 1)]))
                    for n, rate in ((faulted_scored, rate_f), (baseline_scored, rate_b))]
        drawn_f, drawn_b = (x.ravel() for x in np.meshgrid(outcomes[0][0], outcomes[1][0],
                                                           indexing="ij"))
        weights = np.outer(outcomes[0][1], outcomes[1][1]).ravel()
    else:
        rng = _rng(seed, _RESAMPLE)
        drawn_f = rng.binomial(faulted_scored, rate_f, BOOTSTRAP_DRAWS) / faulted_scored
        drawn_b = rng.binomial(baseline_scored, rate_b, BOOTSTRAP_DRAWS) / baseline_scored
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(drawn_b > 0, drawn_f / drawn_b, np.inf)
    return _intervals(np.array([rate_f / rate_b]), ratios[None, :], weights)[0]


def pooled_fault_robustness(faulted: Sequence[tuple[int, int]],
                            baseline: Sequence[tuple[int, int]], *,
                            seed: int = 0) -> Estimate | None:
    """R over a lane: the pooled pass rate of its scenarios with injected faults ÷ that of its
    scenarios without, each given as (passed, scored) per scenario; None as for
    `fault_robustness`, of the pooled counts.

    Scenarios differ in how often they pass (the ICC), so a binomial draw of the pooled counts
    makes the interval too narrow. This bootstrap draws in two stages: the scenarios of each
    pool (with replacement), then each drawn scenario's repeats (a binomial draw at its own
    rate). With one scenario a pool it is the binomial bootstrap; with identical scenarios,
    about as narrow. The pools' scenarios are different tasks: R says how the faulted ones fare
    against the others, which measures the faults only as far as the tasks are alike."""
    import numpy as np

    pools = [np.array(pool, dtype=np.int64).reshape(-1, 2) for pool in (faulted, baseline)]
    for pool in pools:
        if (pool < 0).any() or (pool[:, 0] > pool[:, 1]).any():
            raise ValueError(f"pooled_fault_robustness needs 0 <= passed <= scored for every "
                             f"scenario, got {pool.tolist()}")
    (passed_f, scored_f), (passed_b, scored_b) = (pool.sum(axis=0).tolist() for pool in pools)
    if scored_f == 0 or scored_b == 0 or passed_b == 0:
        return None
    rng = _rng(seed, _RESAMPLE)
    rates = []
    for pool in pools:
        pool = pool[pool[:, 1] > 0]
        drawn = pool[rng.integers(0, len(pool), size=(BOOTSTRAP_DRAWS, len(pool)))]
        passes = rng.binomial(drawn[..., 1], drawn[..., 0] / drawn[..., 1])
        rates.append(passes.sum(axis=1) / drawn[..., 1].sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(rates[1] > 0, rates[0] / rates[1], np.inf)
    point = (passed_f / scored_f) / (passed_b / scored_b)
    return _intervals(np.array([point]), ratios[None, :])[0]


# ---------------------------------------------------------------------------------------------
# A lane


def lane_mean(estimates: Sequence[Estimate | None], *, seed: int = 0) -> Estimate | None:
    """A lane's figure for one metric: the mean of its scenarios' points (None ones left out),
    each scenario weighing the same, as the literature averages per-task metrics; None when no
    scenario has one.

    The interval resamples scenarios: it says how the mean would vary over other scenarios like
    these, so it holds when the scenarios are a sample of the tasks that matter. It is widened,
    where needed, to the mean of the scenarios' own bounds: scenarios that all read 1 would
    otherwise give [1, 1], though each one's repeats leave it uncertain. With one scenario, the
    lane's figure is that scenario's estimate. Past MAX_RESAMPLE scenarios, m-out-of-n."""
    import numpy as np

    given = [e for e in estimates if e is not None]
    if len(given) <= 1:
        return given[0] if given else None
    points = np.array([[e.value for e in given]])
    sums, _, drawn, weights, scale = _resampled_sums(points, seed)
    spread = _intervals(points.mean(axis=1), sums / drawn, weights, scale)[0]
    own_low = math.fsum(e.low for e in given) / len(given)
    own_high = math.fsum(e.high for e in given) / len(given)
    return Estimate.covering(spread.value, min(spread.low, own_low), max(spread.high, own_high))
