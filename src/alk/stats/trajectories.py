"""Tool-use and step consistency: how alike a scenario's repeats are in the tools they use and
the steps they take, each with a bootstrap interval (`alk.stats.bootstrap`).

- tool-use consistency: 1 - the mean Jensen-Shannon distance between the tool-use frequencies
  of two repeats, over all pairs of repeats (`alk.stats.distances`);
- step consistency: the mean over pairs of repeats of 1 - Levenshtein(a, b) / max(|a|, |b|), on
  their sequences of steps (a tool and its outcome, e.g. "lookup_order:ok").

The HAL harness compares the trajectories of passing repeats only (its C_traj^+) and drops
repeats without a tool call. These functions compare whichever trajectories they are given, and
a repeat without a tool call is as far as can be (distance 1, similarity 0) from one with some:
a worker that sometimes gives up without calling a tool is not consistent. A repeat whose steps
were not recorded is passed as None and left out.

A resample leaves out its pairs that are one repeat drawn twice (which the data never has, and
which would all count as alike), and n repeats all alike are not taken as proof that the next
one matches (see `_unanimous`): over every sample of 10 repeats from four trajectories of known
chances, the intervals hold the truth 96% of the time, where counting those pairs left them
above it 13% of the time. The work stays bounded however many repeats there are and however a
lane lays them out: a scenario works on its distinct trajectories and their counts, within
budgets of distinct trajectories, pairs and table cells (see `_budget`, `_kept` and
`_pair_plan`). The `*_consistencies` forms take a lane's scenarios at once, computing what they
share once.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from alk.estimate import Estimate, wilson_interval
from alk.stats import bootstrap, distances
from alk.stats.distances import js_distances, similarities

if TYPE_CHECKING:
    import numpy as np


# Distinct trajectories a scenario compares exactly; past it, the most common half of that and
# a seeded sample of the others (see `_kept`).
MAX_DISTINCT = 200
# A lane's scenarios share a budget of pairs and cells, so that the work stays bounded however
# its repeats are laid out (500 scenarios of 200 distinct trajectories would otherwise compare
# 10 million pairs); a scenario keeps at least MIN_DISTINCT.
LANE_PAIRS = 500_000
LANE_PAIR_CELLS = 50_000_000
MIN_DISTINCT = 10


Trajectories = Sequence[Sequence[str] | None]


def step_tools(step: str, *, gateway: bool = False) -> tuple[str, ...]:
    """The tools a trajectory step used. A worker's step is "tool:ok" or "tool:error" (the
    tool is what comes before the last ':'); a step alk's model gateway recorded is
    "status:tool,tool", "status:text" or "status:<fault>", where a text reply and a fault count
    as an action of their own, and a call of a tool alk served is "tool:NAME:OUTCOME", an
    action of its own too (the call's answer, beside the model's asking for it)."""
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
    return _pairwise_consistencies(scenarios, frequencies, js_distances,
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
    return _pairwise_consistencies(scenarios, lambda steps: steps, similarities,
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
    distances.MAX_PAIR_CELLS: one scenario has MAX_DISTINCT and MAX_PAIR_CELLS."""
    share = max(1, scenarios)
    distinct = int(math.sqrt(2 * LANE_PAIRS / share))
    return _Budget(max(MIN_DISTINCT, min(MAX_DISTINCT, distinct)),
                   min(distances.MAX_PAIR_CELLS, LANE_PAIR_CELLS / share))


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
    scenarios of up to SHARED_UP_TO repeats compared in full are bootstrapped at once, by
    number of repeats and of items; the others, one by one. numpy is imported only when a
    scenario's repeats differ: a run whose repeats all agree (or that never started) is
    reported without it."""
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
        if (n <= bootstrap.SHARED_UP_TO and len(local) <= budget.distinct
                and work(sizes) <= budget.cells):
            together.setdefault((n, len(local)), []).append(
                (index, list(groups.values()), [item_id(item) for item in local]))
            continue
        import numpy as np

        plan, kept = _pair_plan(index, sizes, np.fromiter(groups.values(), dtype=float), work,
                                budget, seed)
        kept_items = [local[i] for i in kept.tolist()]
        alone.append((plan, np.array([item_id(item if merge else key(item))
                                      for item in kept_items], dtype=np.int64)))
    if not together and not alone:
        return results
    import numpy as np

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
        compositions = bootstrap.compositions(n, d)
        if compositions is None:
            resamples = bootstrap.resamples(seed, n)
            # A resample's count of an item: how often the repeats holding it were drawn, the
            # repeats taken in item order (as `_drawn_counts` does).
            drawn = np.zeros((n + 1, resamples.counts.shape[0]))
            np.cumsum(resamples.counts.T, axis=0, out=drawn[1:])
        first, second = np.triu_indices(d, 1)
        step = max(1, bootstrap.BATCH_CELLS // (bootstrap.BOOTSTRAP_DRAWS * d))
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
                weights = bootstrap.multinomial(n, w, counts / n)
            for (index, _, _), estimate in zip(part, bootstrap.intervals(points, draws, weights)):
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
        results[plan.index] = bootstrap.intervals(point, draws[None, :], weights)[0]
    return results


def _pair_plan(index: int, sizes: list[int], counts: np.ndarray,
               work: Callable[[list[int]], float], budget: _Budget, seed: int
               ) -> tuple[_Plan, np.ndarray]:
    """What a scenario compares, and which of its items (see `_kept`): every pair of kept items
    while their work is within the budget's cells, else a seeded share q of the pairs, each
    weighing 1/q."""
    import numpy as np

    rng = bootstrap.rng(seed, bootstrap.CHOICE)
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
    if n <= bootstrap.SHARED_UP_TO:
        resamples = bootstrap.resamples(seed, n)
        categories = np.repeat(np.arange(counts.size), counts.astype(int))
        return resamples.counts @ np.eye(counts.size)[categories], resamples.weights
    # Category by category, each a binomial draw from the repeats left.
    rng = bootstrap.rng(seed, bootstrap.RESAMPLE)
    drawn = np.empty((bootstrap.BOOTSTRAP_DRAWS, counts.size))
    left, share_left = np.full(bootstrap.BOOTSTRAP_DRAWS, n), 1.0
    for i, count in enumerate(counts[:-1].tolist()):
        share = count / n
        drawn[:, i] = rng.binomial(left, min(1.0, share / share_left)) if share_left > 0 else 0
        left = left - drawn[:, i].astype(np.int64)
        share_left -= share
    drawn[:, -1] = left
    return drawn, None
