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
- fault robustness R = pass rate under injected faults / pass rate without.

Where alk departs from the harness, and why:
- The harness compares the trajectories of passing repeats only (its C_traj^+) and drops
  repeats without a tool call. These functions compare whichever trajectories they are given,
  and a repeat without a tool call is as far as can be (distance 1, similarity 0) from one with
  some: a worker that sometimes gives up without calling a tool is not consistent. A repeat
  whose steps were not recorded is passed as None and left out.
- The harness clamps R to at most 1; alk does not (see `fault_robustness`).

The other intervals are seeded percentile bootstraps of BOOTSTRAP_DRAWS draws: the same inputs
and seed give the same estimate. The work stays bounded however many repeats there are: a
trajectory metric works on the distinct trajectories and their counts (see `_kept` and
`_pair_plan`), resource consistency resamples at most MAX_RESAMPLE repeats a draw. The
`*_consistencies` forms take a lane's scenarios at once, computing what they share once.

Pure functions: nothing here reads files or starts processes. numpy is imported inside the
functions, as in `alk.stats`, so that `import alk` stays fast.
"""

from __future__ import annotations

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
# Distinct trajectories compared exactly; past it, the most common HEAD_DISTINCT and a seeded
# sample of the others (see `_kept`).
MAX_DISTINCT = 200
HEAD_DISTINCT = 100
# Work allowed for a scenario's pairs of distinct trajectories, in table cells (Levenshtein:
# |a|·|b| a pair): past it, a seeded share of the pairs is compared, each weighted by the
# inverse of that share.
MAX_PAIR_CELLS = 5_000_000
# A bootstrap over more values than this draws this many each time (m-out-of-n), and the
# interval's spread around the point is scaled by sqrt(m / n).
MAX_RESAMPLE = 2_000
# Up to this many repeats, a bootstrap draws how often each repeat is taken, once per seed and
# repeat count (cached: a lane's scenarios mostly have the same number of repeats).
_SHARED_COUNTS_UP_TO = MAX_DISTINCT
# A batch's bootstrap tables, in numbers: about a megabyte, which stays in the processor's
# cache, for the memory a lane of many scenarios takes, and its speed.
_BATCH_CELLS = 2 ** 17
# Independent streams of one seed: the resampled repeats, and the choice of what to compare.
_RESAMPLE, _CHOICE = 0, 1


def _rng(seed: int, stream: int) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng((seed, stream))


def _certain(value: float) -> Estimate:
    return Estimate(value, value, value)


def _intervals(points: np.ndarray, draws: np.ndarray, scale: float = 1.0) -> list[Estimate]:
    """Each row's percentile interval (2.5% and 97.5%: order statistics, no interpolation) of
    its bootstrap draws, nan draws dropped; the spread around the point scaled by `scale`
    (m-out-of-n), and widened where needed to hold the point."""
    import numpy as np

    def ranks(size: int) -> list[int]:
        return [max(0, math.ceil(q * size) - 1) for q in (0.025, 0.975)]

    ends = np.partition(draws, ranks(draws.shape[1]), axis=1)[:, ranks(draws.shape[1])]
    gaps = np.isnan(draws).any(axis=1).tolist()
    out = []
    for row, (value, (low, high)) in enumerate(zip(points.tolist(), ends.tolist())):
        if gaps[row]:
            kept = draws[row][~np.isnan(draws[row])]
            if kept.size == 0:
                out.append(_certain(value))
                continue
            low, high = np.partition(kept, ranks(kept.size))[ranks(kept.size)].tolist()
        if scale != 1.0:
            low, high = value + (low - value) * scale, value + (high - value) * scale
        out.append(Estimate.covering(value, low, high))
    return out


@lru_cache(maxsize=8)
def _shared_counts(seed: int, n: int) -> np.ndarray:
    """How often each of n repeats is drawn, BOOTSTRAP_DRAWS rows (read-only, cached)."""
    import numpy as np

    draws = _rng(seed, _RESAMPLE).integers(0, n, size=(BOOTSTRAP_DRAWS, n))
    rows = np.arange(BOOTSTRAP_DRAWS)[:, None] * n
    counts = np.bincount((rows + draws).ravel(), minlength=BOOTSTRAP_DRAWS * n)
    counts = counts.reshape(BOOTSTRAP_DRAWS, n).astype(float)
    counts.flags.writeable = False
    return counts


def _resampled_sums(table: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Bootstrap sums of each row of a rows x n table, and of its squares (rows x draws each),
    and the spread's scale: m-out-of-n with m = MAX_RESAMPLE past it."""
    import numpy as np

    n, rows = table.shape[1], table.shape[0]
    if n <= _SHARED_COUNTS_UP_TO:
        both = np.vstack([table, table * table]) @ _shared_counts(seed, n).T
        return both[:rows], both[rows:], 1.0
    m = min(n, MAX_RESAMPLE)
    indices = _rng(seed, _RESAMPLE).integers(0, n, size=(BOOTSTRAP_DRAWS, m))
    sums, squares = np.empty((2, table.shape[0], BOOTSTRAP_DRAWS))
    for row, values in enumerate(table):
        drawn = values[indices]
        sums[row], squares[row] = drawn.sum(axis=1), np.einsum("bm,bm->b", drawn, drawn)
    return sums, squares, math.sqrt(m / n)


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
    """`tool_use_consistency` of each scenario's trajectories, the pairs they share compared
    once."""
    keys: dict[tuple[str, ...], tuple[tuple[str, float], ...]] = {}

    def frequencies(steps: tuple[str, ...]) -> tuple[tuple[str, float], ...]:
        if steps not in keys:
            counts = Counter(tool for s in steps for tool in step_tools(s, gateway=gateway))
            total = sum(counts.values())
            keys[steps] = tuple(sorted((tool, c / total) for tool, c in counts.items()))
        return keys[steps]

    # A pair's work: both frequencies' entries, matched to find the tools they share.
    return _pairwise_consistencies(scenarios, frequencies, _js_distances, lambda a, b: a + b,
                                   distance=True, seed=seed)


def sequence_consistency(trajectories: Trajectories, *, seed: int = 0) -> Estimate | None:
    """The mean normalized Levenshtein similarity 1 - d(a, b) / max(|a|, |b|) between two
    repeats' step sequences, over all pairs of repeats, with a bootstrap interval; two empty
    sequences count as alike. Trajectories that are None (not recorded) are left out; None
    with fewer than 2 left."""
    return sequence_consistencies([trajectories], seed=seed)[0]


def sequence_consistencies(scenarios: Sequence[Trajectories], *,
                           seed: int = 0) -> list[Estimate | None]:
    """`sequence_consistency` of each scenario's trajectories, the pairs they share compared
    once."""
    return _pairwise_consistencies(scenarios, lambda steps: steps, _similarities,
                                   lambda a, b: a * b, distance=False, seed=seed)


class _Keyed:
    """Items' keys, each worked out when first asked for."""

    def __init__(self, items: list, key: Callable[[tuple], Hashable]) -> None:
        self.items, self.key, self.keys = items, key, {}

    def __getitem__(self, i: int) -> Hashable:
        if i not in self.keys:
            self.keys[i] = self.key(self.items[i])
        return self.keys[i]


@dataclass(frozen=True, slots=True)
class _Plan:
    """One scenario's comparisons: its repeats' counts by kept item, the last count gathering
    the items not kept; the pairs i < j of kept items compared, their ids among the batch's
    pairs, and their weights; the same-item pairs of repeats, and the share of them the items
    not kept would have among repeats drawn from them."""

    index: int
    counts: np.ndarray
    first: np.ndarray
    second: np.ndarray
    ids: np.ndarray
    weights: np.ndarray
    same_pairs: float
    rest_share: float


def _pairwise_consistencies(scenarios: Sequence[Trajectories], key: Callable[[tuple], Hashable],
                            values_of: Callable[[list], np.ndarray],
                            cost: Callable[[float, float], float], *,
                            distance: bool, seed: int) -> list[Estimate | None]:
    """The mean of a pairwise similarity (or 1 - the mean of a distance) over the ordered pairs
    of repeats i != j, per scenario, from its distinct items (trajectories mapped by `key`) and
    their counts. Pairs of repeats with the same item contribute 1 (similarity) or 0
    (distance) and are counted exactly; `values_of` computes a list of pairs of items at once;
    `cost` is a pair's work from the items' sizes. The bootstrap draws the counts (a
    multinomial draw: the same as resampling repeats).

    Scenarios of up to _SHARED_COUNTS_UP_TO repeats whose pairs are all compared are
    bootstrapped together, by number of repeats and of items; the others one by one."""
    import numpy as np

    results: list[Estimate | None] = [None] * len(scenarios)
    pair_ids: dict[tuple[Hashable, Hashable], int] = {}
    together: dict[tuple[int, int], list[tuple[int, list[int], list[int]]]] = {}
    alone: list[_Plan] = []
    for index, trajectories in enumerate(scenarios):
        sequences = Counter(t if isinstance(t, tuple) else tuple(t)
                            for t in trajectories if t is not None)
        # Trajectories with the same key are one item; past MAX_DISTINCT trajectories, the
        # key of only those compared is worked out (`_kept` samples trajectories then).
        merge = len(sequences) <= MAX_DISTINCT
        groups: Counter[Hashable] = Counter()
        for steps, count in sequences.items():
            groups[key(steps) if merge else steps] += count
        n, items = sum(groups.values()), list(groups)
        keyed = items if merge else _Keyed(items, key)
        if n < 2:
            continue
        if len(items) == 1:
            results[index] = _certain(1.0)
            continue
        pairs = ([(i, j) for i in range(len(items)) for j in range(i + 1, len(items))]
                 if n <= _SHARED_COUNTS_UP_TO and len(items) <= MAX_DISTINCT else [])
        if pairs and sum(cost(len(items[i]), len(items[j])) for i, j in pairs) <= MAX_PAIR_CELLS:
            ids = [pair_ids.setdefault((keyed[i], keyed[j]), len(pair_ids)) for i, j in pairs]
            together.setdefault((n, len(items)), []).append((index, list(groups.values()), ids))
            continue
        plan, kept = _pair_plan(index, items, np.fromiter(groups.values(), dtype=float), cost,
                                seed)
        for p, (i, j) in enumerate(zip(plan.first.tolist(), plan.second.tolist())):
            plan.ids[p] = pair_ids.setdefault((keyed[kept[i]], keyed[kept[j]]), len(pair_ids))
        alone.append(plan)
    values = values_of(list(pair_ids))
    same = 0.0 if distance else 1.0

    def consistency(n: int, same_pairs: np.ndarray, other_pairs: np.ndarray) -> np.ndarray:
        mean = (same * same_pairs + other_pairs) / (n * (n - 1))
        return np.clip(1.0 - mean if distance else mean, 0.0, 1.0)

    for (n, d), group in together.items():
        # A draw's count of an item: how often the repeats holding it were drawn, the repeats
        # taken in item order (as `_drawn_counts` does).
        drawn = np.zeros((n + 1, BOOTSTRAP_DRAWS))
        np.cumsum(_shared_counts(seed, n).T, axis=0, out=drawn[1:])
        first, second = np.triu_indices(d, 1)
        step = max(1, _BATCH_CELLS // (BOOTSTRAP_DRAWS * d))
        for at in range(0, len(group), step):
            part = group[at:at + step]
            counts = np.array([c for _, c, _ in part], dtype=float)
            pairs = np.zeros((len(part), d, d))
            pairs[:, first, second] = values[np.array([ids for _, _, ids in part])]
            pairs += pairs.transpose(0, 2, 1)  # ordered pairs; the diagonal is counted apart
            points = consistency(n, (counts * (counts - 1)).sum(axis=1),
                                 np.einsum("sk,skl,sl->s", counts, pairs, counts))
            ends = np.cumsum(counts, axis=1).astype(np.int64)
            w = drawn[ends] - drawn[ends - counts.astype(np.int64)]  # scenarios x items x draws
            draws = consistency(n, (w * (w - 1)).sum(axis=1),
                                (np.matmul(pairs, w) * w).sum(axis=1))
            for (index, _, _), estimate in zip(part, _intervals(points, draws)):
                results[index] = estimate
    for plan in alone:
        k, n = plan.counts.size - 1, int(plan.counts.sum())
        pairs = np.zeros((k, k))
        pairs[plan.first, plan.second] = values[plan.ids] * plan.weights
        pairs += pairs.T
        drawn = _drawn_counts(plan.counts, seed)
        w, others = drawn[:, :-1], drawn[:, -1]
        counts = plan.counts[None, :-1]
        point = consistency(n, np.array([plan.same_pairs]), ((counts @ pairs) * counts).sum(1))
        draws = consistency(n, (w * (w - 1)).sum(axis=1) + others * (others - 1)
                            * plan.rest_share, ((w @ pairs) * w).sum(axis=1))
        results[plan.index] = _intervals(point, draws[None, :])[0]
    return results


def _pair_plan(index: int, items: list, counts: np.ndarray,
               cost: Callable[[float, float], float], seed: int
               ) -> tuple[_Plan, np.ndarray]:
    """What a scenario compares (see `_kept`): every pair of kept items while their work is
    within MAX_PAIR_CELLS, else a seeded share q of the pairs, each weighing 1/q."""
    import numpy as np

    rng = _rng(seed, _CHOICE)
    kept, factors, rest = _kept(counts, rng)
    first, second = np.triu_indices(kept.size, 1)
    sizes = np.array([len(items[i]) for i in kept], dtype=float)
    total = float(cost(sizes[first], sizes[second]).sum())
    share = min(1.0, MAX_PAIR_CELLS / total) if total > 0 else 1.0
    if share < 1.0:
        chosen = rng.random(first.size) < share
        first, second = first[chosen], second[chosen]
    rest_counts = counts[rest]
    rest_share = (float(((rest_counts / rest_counts.sum()) ** 2).sum()) if rest.size else 0.0)
    plan = _Plan(index, np.append(counts[kept], rest_counts.sum()), first, second,
                 np.empty(first.size, dtype=np.int64), factors[first, second] / share,
                 float((counts * (counts - 1)).sum()), rest_share)
    return plan, kept


def _kept(counts: np.ndarray, rng: np.random.Generator
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which distinct items are compared, each pair's weight, and the others.

    Up to MAX_DISTINCT, all of them, each pair weighing 1. Past it, the HEAD_DISTINCT most
    common (ties in first-seen order) and a seeded uniform sample of the rest, each pair
    weighted by the inverse of the chance that it was sampled (Horvitz-Thompson): the estimate
    stays unbiased, and the interval leaves out the variation of that sample."""
    import numpy as np

    d = counts.size
    if d <= MAX_DISTINCT:
        return np.arange(d), np.ones((d, d)), np.arange(0)
    order = np.argsort(-counts, kind="stable")
    head, tail = order[:HEAD_DISTINCT], order[HEAD_DISTINCT:]
    size = MAX_DISTINCT - HEAD_DISTINCT
    chosen = np.zeros(tail.size, dtype=bool)
    chosen[rng.choice(tail.size, size=size, replace=False)] = True
    one = size / tail.size
    both = size * (size - 1) / (tail.size * (tail.size - 1))
    factors = np.ones((MAX_DISTINCT, MAX_DISTINCT))
    factors[:HEAD_DISTINCT, HEAD_DISTINCT:] = factors[HEAD_DISTINCT:, :HEAD_DISTINCT] = 1 / one
    factors[HEAD_DISTINCT:, HEAD_DISTINCT:] = 1 / both
    return np.concatenate([head, tail[chosen]]), factors, tail[~chosen]


def _drawn_counts(counts: np.ndarray, seed: int) -> np.ndarray:
    """BOOTSTRAP_DRAWS multinomial draws (draws x categories) of the repeats in `counts`."""
    import numpy as np

    n = int(counts.sum())
    if n <= _SHARED_COUNTS_UP_TO:
        categories = np.repeat(np.arange(counts.size), counts.astype(int))
        return _shared_counts(seed, n) @ np.eye(counts.size)[categories]
    # Category by category, each a binomial draw from the repeats left.
    rng, drawn = _rng(seed, _RESAMPLE), np.empty((BOOTSTRAP_DRAWS, counts.size))
    left, share_left = np.full(BOOTSTRAP_DRAWS, n), 1.0
    for i, count in enumerate(counts[:-1].tolist()):
        share = count / n
        drawn[:, i] = rng.binomial(left, min(1.0, share / share_left)) if share_left > 0 else 0
        left = left - drawn[:, i].astype(np.int64)
        share_left -= share
    drawn[:, -1] = left
    return drawn


def _js_distances(pairs: list[tuple[tuple[tuple[str, float], ...], ...]]) -> np.ndarray:
    """Jensen-Shannon distances (base 2) between pairs of tool frequencies, each a sorted tuple
    of (tool, share).

    JSD(p, q) = 1 + 1/2·sum over the tools both use of p·log2(p/(p+q)) + q·log2(q/(p+q)): a
    tool only one of them uses adds what it would to frequencies that never overlap, so only
    the tools a pair shares are looked at, found for all pairs at once by matching (pair, tool)
    numbers. No tools at all share nothing: distance 1 to any other."""
    import numpy as np

    if not pairs:
        return np.empty(0)
    tools: dict[str, int] = {}
    vectors: dict[tuple, int] = {}
    ids: list[int] = []
    shares: list[float] = []
    offsets = [0]

    def vector(frequencies: tuple[tuple[str, float], ...]) -> int:
        if frequencies not in vectors:
            vectors[frequencies] = len(vectors)
            ids.extend(tools.setdefault(tool, len(tools)) for tool, _ in frequencies)
            shares.extend(share for _, share in frequencies)
            offsets.append(len(ids))
        return vectors[frequencies]

    sides = [np.array([vector(pair[side]) for pair in pairs], dtype=np.int64) for side in (0, 1)]
    id_of, share_of = np.array(ids, dtype=np.int64), np.array(shares, dtype=float)
    start_of = np.array(offsets, dtype=np.int64)
    width = max(1, len(tools))

    def entries(which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each pair's entries of one side, as pair·width + tool, and their shares."""
        starts, lengths = start_of[which], start_of[which + 1] - start_of[which]
        before = np.repeat(np.cumsum(lengths) - lengths, lengths)
        at = np.arange(int(lengths.sum())) - before + np.repeat(starts, lengths)
        return np.repeat(np.arange(which.size), lengths) * width + id_of[at], share_of[at]

    (a, p), (b, q) = entries(sides[0]), entries(sides[1])
    _, in_a, in_b = np.intersect1d(a, b, assume_unique=True, return_indices=True)
    p, q = p[in_a], q[in_b]
    terms = p * np.log2(p / (p + q)) + q * np.log2(q / (p + q))
    sums = np.bincount(a[in_a] // width, weights=terms, minlength=len(pairs))
    return np.sqrt(np.clip(1.0 + 0.5 * sums, 0.0, 1.0))


def js_distance(p: Sequence[float], q: Sequence[float]) -> float:
    """Jensen-Shannon distance (base 2) between two frequency vectors over the same tools
    (counts or probabilities); two all-zero vectors are alike, one is at distance 1 from any
    other."""
    pair = tuple(tuple((str(i), v / sum(vector)) for i, v in enumerate(vector) if v > 0)
                 for vector in (p, q))
    return 0.0 if pair == ((), ()) else float(_js_distances([pair])[0])


def levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    """Edit distance between two sequences of steps (insert, delete, substitute: 1 each)."""
    codes: dict[str, int] = {}
    short, long_ = sorted((a, b), key=len)
    return int(_edit_distances([_coded(short, codes)], [_coded(long_, codes)])[0])


def _coded(steps: Sequence[str], codes: dict[str, int]) -> np.ndarray:
    import numpy as np

    return np.fromiter((codes.setdefault(s, len(codes)) for s in steps), dtype=np.int64,
                       count=len(steps))


def _edit_distances(shorts: list[np.ndarray], longs: list[np.ndarray]) -> np.ndarray:
    """Levenshtein distances of pairs (shorts[p], longs[p]), one table row of every pair at a
    time (the shorter sequence of each pair walks the rows).

    Row i from row i-1: cell j is the lesser of a substitution (diagonal) and a deletion
    (above); then insertions run along the row: cell j = min over j' <= j of cell j' + j - j',
    which is j + the running minimum of (cell - j). Sequences are padded with codes no step
    has; a pair's distance is read at its own last row and column, which cells past them never
    reach."""
    import numpy as np

    size = len(shorts)
    rows, cols = (np.array([s.size for s in side], dtype=np.int64) for side in (shorts, longs))
    height, width = int(rows.max(initial=0)), int(cols.max(initial=0))
    a, b = np.full((size, height), -1), np.full((size, width), -2)
    for p in range(size):
        a[p, :rows[p]], b[p, :cols[p]] = shorts[p], longs[p]
    j = np.arange(width + 1)
    prev, cur = np.tile(j, (size, 1)), np.empty((size, width + 1), dtype=np.int64)
    out = cols.copy()  # pairs with an empty sequence
    for i in range(1, height + 1):
        cur[:, 0] = i
        np.minimum(prev[:, :-1] + (b != a[:, i - 1:i]), prev[:, 1:] + 1, out=cur[:, 1:])
        np.minimum.accumulate(cur - j, axis=1, out=prev)
        prev += j
        done = np.flatnonzero(rows == i)
        out[done] = prev[done, cols[done]]
    return out


def _similarities(pairs: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> np.ndarray:
    """1 - Levenshtein / max length for pairs of sequences (1 for two empty ones), in batches
    of pairs of like sizes whose tables stay within MAX_PAIR_CELLS."""
    import numpy as np

    if not pairs:
        return np.empty(0)
    codes: dict[str, int] = {}
    coded: dict[tuple[str, ...], np.ndarray] = {}
    shorts, longs = [], []
    for pair in pairs:
        short, long_ = sorted(pair, key=len)
        shorts.append(coded.get(short) if short in coded else
                      coded.setdefault(short, _coded(short, codes)))
        longs.append(coded.get(long_) if long_ in coded else
                     coded.setdefault(long_, _coded(long_, codes)))
    rows = np.array([s.size for s in shorts], dtype=np.int64)
    cols = np.array([s.size for s in longs], dtype=np.int64)
    order = np.lexsort((cols, rows)).tolist()
    out = np.empty(len(pairs))
    start = 0
    while start < len(order):
        stop, widest = start + 1, cols[order[start]]
        while stop < len(order):
            wider = max(widest, cols[order[stop]])
            if (rows[order[stop]] + 1) * (wider + 1) * (stop - start + 1) > MAX_PAIR_CELLS:
                break
            stop, widest = stop + 1, wider
        batch = order[start:stop]
        out[batch] = _edit_distances([shorts[p] for p in batch], [longs[p] for p in batch])
        start = stop
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
    the point is scaled by sqrt(m/n)."""
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
        step = max(1, _BATCH_CELLS // (len(names) * BOOTSTRAP_DRAWS))
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
        sums, squares, scale = _resampled_sums(table.reshape(-1, n), seed)
        sums = sums.reshape(scenarios, -1, BOOTSTRAP_DRAWS)
        squares = squares.reshape(scenarios, -1, BOOTSTRAP_DRAWS)[:, :rows]
        if complete:  # in place, the tables being the bulk of a lane's work
            size = min(n, MAX_RESAMPLE)
            mean = np.multiply(sums, 1.0 / size, out=sums)  # the draw's mean, less the data's
            squares -= np.multiply(mean, mean, out=np.empty_like(mean)) * size
            np.maximum(squares, 0.0, out=squares)
            cv = np.sqrt(np.multiply(squares, 1.0 / (size - 1), out=squares), out=squares)
            cv /= np.add(mean, means[..., None], out=mean)
            draws = np.exp(-cv.mean(axis=1))
        else:
            sizes, sums = sums[:, rows:], sums[:, :rows]
            mean = means[..., None] + sums / sizes
            variance = np.maximum(squares - sums * sums / sizes, 0.0) / (sizes - 1)
            cv = np.sqrt(variance) / mean
            cv[(sizes < 2) | ~(mean > 0)] = np.nan
            draws = np.exp(-_mean_of_numbers(cv, axis=1))
    return _intervals(points, draws, scale)


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
    how much harm the data still allow. The interval bootstraps both pools (a binomial draw
    each); a draw whose baseline never passed has no bounded ratio, so when more than 2.5% of
    the draws have none, the upper bound is math.inf: the baseline is too low to bound R."""
    import numpy as np

    for passed, scored in ((faulted_passed, faulted_scored), (baseline_passed, baseline_scored)):
        if not 0 <= passed <= scored:
            raise ValueError(f"fault_robustness needs 0 <= passed <= scored in each pool, got "
                             f"{passed}/{scored}")
    if faulted_scored == 0 or baseline_scored == 0 or baseline_passed == 0:
        return None
    rate_f, rate_b = faulted_passed / faulted_scored, baseline_passed / baseline_scored
    rng = _rng(seed, _RESAMPLE)
    drawn_f = rng.binomial(faulted_scored, rate_f, BOOTSTRAP_DRAWS) / faulted_scored
    drawn_b = rng.binomial(baseline_scored, rate_b, BOOTSTRAP_DRAWS) / baseline_scored
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(drawn_b > 0, drawn_f / drawn_b, np.inf)
    return _intervals(np.array([rate_f / rate_b]), ratios[None, :])[0]


# ---------------------------------------------------------------------------------------------
# A lane


def lane_mean(estimates: Sequence[Estimate | None], *, seed: int = 0) -> Estimate | None:
    """A lane's figure for one metric: the mean of its scenarios' points (None ones left out),
    each scenario weighing the same, as the literature averages per-task metrics; None when no
    scenario has one.

    The interval resamples scenarios: it says how the mean would vary over other scenarios like
    these, so it holds when the scenarios are a sample of the tasks that matter. It leaves out
    each scenario's own uncertainty (the scenario intervals show that); with one scenario, the
    lane's figure is that scenario's estimate. Past MAX_RESAMPLE scenarios, m-out-of-n."""
    import numpy as np

    given = [e for e in estimates if e is not None]
    if len(given) <= 1:
        return given[0] if given else None
    points = np.array([[e.value for e in given]])
    sums, _, scale = _resampled_sums(points, seed)
    drawn = sums / min(points.shape[1], MAX_RESAMPLE)
    return _intervals(points.mean(axis=1), drawn, scale)[0]
