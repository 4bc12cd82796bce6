"""How far apart two repeats are: the Jensen-Shannon distance between their tool-use frequencies,
and the Levenshtein distance between their sequences of steps, for one pair or many pairs at
once (as arrays, within a bound on the tables they build).

- Jensen-Shannon distance in base 2, so in [0, 1]: a metric, 0 for the same frequencies and 1
  for tools that never overlap. (The HAL harness has used the distance with natural logarithms,
  at most 0.83, and later the divergence, the distance squared, which reads higher.)
- Levenshtein: insert, delete and substitute cost 1 each; the similarity of two sequences is
  1 - d(a, b) / max(|a|, |b|), and two empty sequences are alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


# Work allowed for a scenario's pairs of distinct trajectories, in table cells (Levenshtein:
# |a|·|b| a pair; Jensen-Shannon: both frequencies' tools): past it, a seeded share of the
# pairs is compared, each weighted by the inverse of that share.
MAX_PAIR_CELLS = 5_000_000


def js_distances(items: list[tuple[tuple[str, float], ...]], a: np.ndarray,
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
    return float(js_distances(pair, np.array([0]), np.array([1]))[0])


def levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    """Edit distance between two sequences of steps (insert, delete, substitute: 1 each)."""
    import numpy as np

    return int(similarities([tuple(a), tuple(b)], np.array([0]), np.array([1]),
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


def similarities(items: list[tuple[str, ...]], a: np.ndarray, b: np.ndarray, *,
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
