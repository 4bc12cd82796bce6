"""The bootstraps behind alk's consistency and robustness intervals: percentile intervals of
resampled repeats (or, for a lane, scenarios), exact where few outcomes are possible.

Where a resample has at most BOOTSTRAP_DRAWS possible outcomes (up to 6 repeats; a trajectory
metric's counts of a few distinct trajectories, e.g. 3 among 10 repeats; two small pools) it is
the exact bootstrap distribution, every outcome weighed by its chance; else BOOTSTRAP_DRAWS
seeded draws: multinomial up to 200 values, Poisson (each value drawn Poisson(1) times) for
sums of up to MAX_RESAMPLE, m-out-of-n past it. The same inputs and seed give the same estimate.

Pure functions: nothing here reads files or starts processes. numpy is imported inside the
functions, so that `import alk` stays fast.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from alk.estimate import Estimate

if TYPE_CHECKING:
    import numpy as np


BOOTSTRAP_DRAWS = 1000
# A bootstrap over more values than this draws this many each time (m-out-of-n), and the
# interval's spread around the point is scaled by sqrt(m / n).
MAX_RESAMPLE = 2_000
# Up to this many values, a bootstrap's resamples are made once per seed and number of values
# (a lane's scenarios mostly have the same number of repeats); past it, the sums of resources
# and of a lane's scenarios take Poisson resamples, one table for every number of values. As
# many as the distinct trajectories a scenario compares exactly (trajectories.MAX_DISTINCT).
SHARED_UP_TO = 200
# A batch's bootstrap tables, in numbers (4 MB): bounds the memory a lane of many scenarios
# takes, in few enough batches.
BATCH_CELLS = 2 ** 19
# Independent streams of one seed: the resampled repeats, and the choice of what to compare.
RESAMPLE, CHOICE = 0, 1


def rng(seed: int, stream: int) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng((seed, stream))


@dataclass(frozen=True, slots=True)
class Resamples:
    """Resamples of n values: how often each is taken (resamples x n), and each resample's
    probability (None: equally likely)."""

    counts: np.ndarray
    weights: np.ndarray | None


@lru_cache(maxsize=8)
def resamples(seed: int, n: int) -> Resamples:
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
        draws = rng(seed, RESAMPLE).integers(0, n, size=(BOOTSTRAP_DRAWS, n))
        rows = np.arange(BOOTSTRAP_DRAWS)[:, None] * n
        counts = np.bincount((rows + draws).ravel(), minlength=BOOTSTRAP_DRAWS * n)
        counts, weights = counts.reshape(BOOTSTRAP_DRAWS, n), None
    counts = counts.astype(float)
    counts.flags.writeable = False
    return Resamples(counts, weights)


@lru_cache(maxsize=64)
def compositions(n: int, d: int) -> np.ndarray | None:
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


def multinomial(n: int, outcomes: np.ndarray, shares: np.ndarray) -> np.ndarray:
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
    counts = rng(seed, RESAMPLE).poisson(1.0, size=(BOOTSTRAP_DRAWS, MAX_RESAMPLE))
    counts = counts.astype(float)
    counts.flags.writeable = False
    return counts


def resampled_sums(table: np.ndarray, seed: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, float]:
    """Bootstrap sums of each row of a rows x n table and of its squares (rows x resamples
    each), each resample's number of values, their probabilities (None: equally likely), and
    the spread's scale: up to SHARED_UP_TO values, multinomial resamples (`resamples`); up
    to MAX_RESAMPLE, Poisson ones; past it, m-out-of-n with m = MAX_RESAMPLE."""
    import numpy as np

    n, rows = table.shape[1], table.shape[0]
    if n <= MAX_RESAMPLE:
        if n <= SHARED_UP_TO:
            chosen = resamples(seed, n)
            counts, weights = chosen.counts, chosen.weights
            sizes = np.full(counts.shape[0], float(n))
        else:
            counts, weights = _poisson_counts(seed)[:, :n], None
            sizes = counts.sum(axis=1)
        both = np.vstack([table, table * table]) @ counts.T
        return both[:rows], both[rows:], sizes, weights, 1.0
    indices = rng(seed, RESAMPLE).integers(0, n, size=(BOOTSTRAP_DRAWS, MAX_RESAMPLE))
    sums, squares = np.empty((2, rows, BOOTSTRAP_DRAWS))
    for row, values in enumerate(table):
        drawn = values[indices]
        sums[row], squares[row] = drawn.sum(axis=1), np.einsum("bm,bm->b", drawn, drawn)
    sizes = np.full(BOOTSTRAP_DRAWS, float(MAX_RESAMPLE))
    return sums, squares, sizes, None, math.sqrt(MAX_RESAMPLE / n)


def intervals(points: np.ndarray, draws: np.ndarray, weights: np.ndarray | None = None,
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
