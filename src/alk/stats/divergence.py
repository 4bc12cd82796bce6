"""Where the repeats of a scenario part ways: a prefix tree of their tool trajectories, the steps
they all shared before the first branch, and two repeats side by side at their first difference.

Pure: records in, records out; nothing here draws (`alk.report.html.spread_charts` does) or
escapes (every step is a worker's tool name, as hostile as it was: whoever shows it escapes it).

A repeat's trajectory is kept in the document while the run's budget for steps lasts; past it
the trajectory is empty and its digest stands for it. Such a repeat is left out here and
counted as not kept. Void repeats (`lane_infra`) never ran the scenario as scored and are left
out too, as they are from the statistics.

Bounded for a scenario of 100,000 repeats with trajectories of hundreds of steps: the tree
stops at MAX_DEPTH steps (a path that goes on ends in a MORE node), keeps the MAX_BRANCHES
most common branches at each node and pools the rest in one OTHER node, and has at most
MAX_NODES nodes, expanded breadth first (a node past that budget gets one MORE child holding
all of its repeats). Identical paths are counted once before the tree is built, so the work
is in the distinct paths, not in the repeats.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

# The statistics' own test of a kept trajectory, so that the report and the consistency metrics
# never disagree on which repeats have one.
from alk.stats.summary import kept_steps

if TYPE_CHECKING:
    from alk.records import RepeatResult
    from alk.result.document import ScenarioResult

MAX_DEPTH = 40
MAX_BRANCHES = 8
MAX_NODES = 1_000

# Markers: a worker's step is always "name:status" (alk.runner.protocol), so none of these,
# having no colon, can be mistaken for one.
START = "(start)"
END = "(end)"  # the path stopped here: a branch of its own
OTHER = "(other)"  # the branches past the MAX_BRANCHES most common, pooled
MORE = "(…)"  # the path goes on past what the tree draws (MAX_DEPTH, or MAX_NODES)
MARKERS = frozenset({START, END, OTHER, MORE})


@dataclass(frozen=True, slots=True)
class Node:
    """A step some repeats took after their parent's steps: how many took it (`count`), how
    many of those passed, and where they went next. Children hold every repeat of their
    parent (their counts add up to its count), most common first; END, OTHER and MORE are
    leaves."""

    step: str
    count: int
    passed: int
    children: tuple[Node, ...] = ()


@dataclass(frozen=True, slots=True)
class Pair:
    """Two repeats that took different paths; `index` is the 0-based step where they first
    differ (the length of the shorter when one path is the other's beginning), and `shared`
    the steps both took before it."""

    a: RepeatResult
    b: RepeatResult
    index: int
    shared: tuple[str, ...]


class _Draft:
    """A node while the tree is built: its distinct paths (steps cut at MAX_DEPTH, whether
    they went on, whether the repeat passed, how many repeats) are split among its children."""

    __slots__ = ("step", "count", "passed", "items", "children")

    def __init__(self, step: str, items: list[tuple[tuple[str, ...], bool, bool, int]],
                 counts: tuple[int, int] | None = None):
        self.step = step
        self.items = items
        self.count, self.passed = counts or (sum(n for *_, n in items),
                                             sum(n for _, _, ok, n in items if ok))
        self.children: list[_Draft] = []

    def frozen(self) -> Node:
        return Node(self.step, self.count, self.passed,
                    tuple(child.frozen() for child in self.children))


def tree(paths: Sequence[tuple[Sequence[str], bool]]) -> Node:
    """The prefix tree of the paths, each a repeat's steps and whether it passed; the root is
    START, holding every path. Caps: the module docstring."""
    distinct = Counter((tuple(steps[:MAX_DEPTH]), len(steps) > MAX_DEPTH, bool(ok))
                       for steps, ok in paths)
    root = _Draft(START, [(*key, n) for key, n in distinct.items()])
    # `owed`: nodes made but not yet expanded, each of which will need one child at least (a
    # MORE, if nothing else fits): a node is expanded only while what it adds leaves room for
    # them, so that the tree never has more than MAX_NODES nodes.
    queue, made, owed = deque([(root, 0)]), 1, 1
    while queue:
        draft, depth = queue.popleft()
        # The steps all its paths take next are a chain made at once: grouping 100,000
        # distinct paths at each of 40 shared steps would take seconds.
        for step in _shared_steps(draft.items)[depth:]:
            if made + owed + 1 > MAX_NODES:
                break
            child = _Draft(step, draft.items, (draft.count, draft.passed))
            draft.children, draft.items = [child], []
            draft, depth, made = child, depth + 1, made + 1
        groups = _grouped(draft.items, depth)
        opened = sum(step not in MARKERS for step, _ in groups)
        if made + len(groups) + owed - 1 + opened > MAX_NODES:
            groups, opened = [(MORE, draft.items)], 0
        draft.children = [_Draft(step, items) for step, items in groups]
        made, owed = made + len(groups), owed - 1 + opened
        draft.items = []  # split among the children: no need to hold them twice
        queue.extend((c, depth + 1) for c in draft.children if c.step not in MARKERS)
    return root.frozen()


def _shared_steps(items: list[tuple[tuple[str, ...], bool, bool, int]]) -> tuple[str, ...]:
    """The steps every item begins with: those the least and the greatest share."""
    if not items:
        return ()
    low, high = min(item[0] for item in items), max(item[0] for item in items)
    return low[:_first_difference(low, high)]


def _grouped(items: list[tuple[tuple[str, ...], bool, bool, int]], depth: int
             ) -> list[tuple[str, list[tuple[tuple[str, ...], bool, bool, int]]]]:
    """The items by their step at `depth` (END where they stopped, MORE where they were cut),
    most repeats first (ties by step, so that the order is the same every time), the branches
    past MAX_BRANCHES pooled as OTHER (when there are two or more: an OTHER of one branch would
    hide it for nothing)."""
    groups: dict[str, list[tuple[tuple[str, ...], bool, bool, int]]] = {}
    for item in items:
        steps, cut = item[0], item[1]
        step = steps[depth] if depth < len(steps) else MORE if cut else END
        groups.setdefault(step, []).append(item)
    ranked = sorted(groups.items(), key=lambda g: (-sum(i[3] for i in g[1]), g[0]))
    if len(ranked) > MAX_BRANCHES + 1:
        rest = [item for _, items in ranked[MAX_BRANCHES:] for item in items]
        ranked = [*ranked[:MAX_BRANCHES], (OTHER, rest)]
    return ranked


def shared_prefix(node: Node) -> tuple[str, ...]:
    """The steps every repeat under `node` took before the first branch (or before they
    stopped, or before the tree stops drawing)."""
    steps = []
    while len(node.children) == 1 and node.children[0].step not in MARKERS:
        node = node.children[0]
        steps.append(node.step)
    return tuple(steps)


def kept(scenario: ScenarioResult) -> tuple[tuple[RepeatResult, ...], int]:
    """The scenario's scored repeats whose trajectory the document kept, and how many scored
    repeats it did not keep (the run's budget for steps was spent)."""
    scored = [r for r in scenario.repeats if r.scored]
    held = tuple(r for r in scored if kept_steps(r) is not None)
    return held, len(scored) - len(held)


def diverging_pair(scenario: ScenarioResult) -> Pair | None:
    """Two kept repeats that took different paths, None when every kept trajectory is alike.
    A passing and a failing one when some pair of different paths has both; of those, and
    otherwise, the two most common trajectories (by repeats; ties by the steps). `a` is the
    passing one, or the more common."""
    repeats, _ = kept(scenario)
    first: dict[tuple[str, ...], dict[bool, RepeatResult]] = {}
    counts: Counter[tuple[str, ...]] = Counter()
    for r in repeats:
        counts[r.trajectory] += 1
        first.setdefault(r.trajectory, {}).setdefault(r.passed, r)
    if len(counts) < 2:
        return None
    ranked = sorted(counts, key=lambda t: (-counts[t], t))
    rank = {t: i for i, t in enumerate(ranked)}
    passing = [t for t in ranked if True in first[t]]
    failing = [t for t in ranked if False in first[t]]
    # The best pass/fail pair of different paths: the most common passing path with the most
    # common failing one that differs, or the other way round, whichever ranks higher.
    candidates = []
    for ok_path in passing[:2]:
        for bad_path in failing[:2]:
            if ok_path != bad_path:
                candidates.append((sorted((rank[ok_path], rank[bad_path])), ok_path, bad_path))
    if candidates:
        _, ok_path, bad_path = min(candidates)
        a, b = first[ok_path][True], first[bad_path][False]
    else:
        a, b = (next(iter(first[t].values())) for t in ranked[:2])
    index = _first_difference(a.trajectory, b.trajectory)
    return Pair(a, b, index, tuple(a.trajectory[:index]))


def _first_difference(a: Sequence[str], b: Sequence[str]) -> int:
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return min(len(a), len(b))
