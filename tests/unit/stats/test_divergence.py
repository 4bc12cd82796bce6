"""alk.stats.divergence: the prefix tree of a scenario's trajectories, its shared prefix and caps,
and the two repeats shown side by side, on trajectories made by hand."""

from __future__ import annotations

import random
from typing import Iterator

from alk.records import Outcome, RepeatResult
from alk.stats import divergence
from alk.stats.divergence import END, MORE, OTHER, Node, diverging_pair, shared_prefix, tree

from helpers.trajectories import repeat, scenario_of


def numbered(*groups: tuple[int, tuple[str, ...], bool]) -> list[RepeatResult]:
    """`count` repeats of each (count, trajectory, passed), numbered from 1."""
    out: list[RepeatResult] = []
    for count, steps, passed in groups:
        out += [repeat(len(out) + 1, steps, passed) for _ in range(count)]
    return out


def walk(node: Node) -> Iterator[Node]:
    yield node
    for child in node.children:
        yield from walk(child)


def depth(node: Node) -> int:
    return 1 + max((depth(c) for c in node.children), default=0)


# -- the tree -----------------------------------------------------------------------------------


def test_the_tree_counts_each_branch_and_its_passes():
    root = tree([(("a:ok", "b:ok"), True)] * 3 + [(("a:ok", "c:error"), False)]
                + [(("x:ok",), False)])
    assert (root.step, root.count, root.passed) == (divergence.START, 5, 3)
    assert [(c.step, c.count, c.passed) for c in root.children] == [("a:ok", 4, 3),
                                                                    ("x:ok", 1, 0)]
    a = root.children[0]
    assert [(c.step, c.count, c.passed) for c in a.children] == [("b:ok", 3, 3),
                                                                 ("c:error", 1, 0)]
    # Every path stops in an END of its own.
    assert [(c.step, c.count) for c in a.children[0].children] == [(END, 3)]
    assert a.children[0].children[0].children == ()


def test_a_path_that_stops_is_a_branch_of_its_own():
    root = tree([(("a:ok",), True), (("a:ok", "b:ok"), False), (("a:ok", "b:ok"), False)])
    a = root.children[0]
    assert [(c.step, c.count, c.passed) for c in a.children] == [("b:ok", 2, 0), (END, 1, 1)]
    assert shared_prefix(root) == ("a:ok",)


def test_the_shared_prefix_is_every_step_before_the_first_branch():
    common = ("plan:ok", "search:ok", "read:ok")
    root = tree([(common + ("answer:ok",), True), (common + ("search:error",), False)])
    assert shared_prefix(root) == common
    # One path: all of it is shared; no repeat: nothing is.
    assert shared_prefix(tree([(common, True)] * 2)) == common
    assert shared_prefix(tree([])) == ()
    assert tree([]) == Node(divergence.START, 0, 0, ())


def test_an_empty_trajectory_ends_at_the_start():
    root = tree([((), True), (("a:ok",), True)])
    assert sorted((c.step, c.count) for c in root.children) == [(END, 1), ("a:ok", 1)]
    assert shared_prefix(root) == ()


def test_the_depth_is_capped_and_a_path_that_goes_on_says_so():
    steps = tuple(f"step{i}:ok" for i in range(300))
    root = tree([(steps, True), (steps[:divergence.MAX_DEPTH], False)])
    # START, MAX_DEPTH steps, then where each went: on (MORE) or nowhere (END).
    assert depth(root) == divergence.MAX_DEPTH + 2
    last = root
    for _ in range(divergence.MAX_DEPTH):
        last = last.children[0]
    assert last.step == steps[divergence.MAX_DEPTH - 1]
    assert [(c.step, c.passed) for c in last.children] == [(END, 0), (MORE, 1)]
    assert len(shared_prefix(root)) == divergence.MAX_DEPTH


def test_the_width_is_capped_the_rest_pooled_as_other():
    paths = [((f"tool{i:02}:ok",), i % 2 == 0) for i in range(20) for _ in range(i + 1)]
    root = tree(paths)
    kept = divergence.MAX_BRANCHES
    assert len(root.children) == kept + 1
    # The most common first; the rest, with their passes, in one OTHER leaf.
    assert [c.step for c in root.children[:kept]] == [f"tool{i:02}:ok"
                                                      for i in range(19, 19 - kept, -1)]
    other = root.children[-1]
    rest = range(20 - kept)
    assert (other.step, other.count, other.passed, other.children) == (
        OTHER, sum(i + 1 for i in rest), sum(i + 1 for i in rest if i % 2 == 0), ())
    # One branch past the cap is drawn: an OTHER of one would hide it for nothing.
    one_more = tree([((f"tool{i:02}:ok",), True) for i in range(kept + 1)])
    assert OTHER not in [c.step for c in one_more.children]
    assert len(one_more.children) == kept + 1
    two_more = tree([((f"tool{i:02}:ok",), True) for i in range(kept + 2)])
    assert [c.step for c in two_more.children][kept:] == [OTHER]
    assert two_more.children[-1].count == 2


def test_every_node_holds_its_childrens_repeats_within_the_node_budget():
    rng = random.Random(3)
    tools = [f"t{i}:ok" for i in range(12)]
    paths = [(tuple(rng.choice(tools) for _ in range(rng.randint(0, 60))), rng.random() < 0.7)
             for _ in range(3_000)]
    root = tree(paths)
    nodes = list(walk(root))
    assert root.count == 3_000 and root.passed == sum(ok for _, ok in paths)
    assert len(nodes) <= divergence.MAX_NODES
    assert any(n.step == MORE for n in nodes)
    for node in nodes:
        if node.children:
            assert sum(c.count for c in node.children) == node.count
            assert sum(c.passed for c in node.children) == node.passed
            assert len(node.children) <= divergence.MAX_BRANCHES + 1
        else:
            assert node.step in (END, MORE, OTHER)


def test_the_tree_does_not_depend_on_the_order_of_the_repeats():
    paths = [(("a:ok", "b:ok"), True), (("a:ok", "c:ok"), False), (("d:ok",), True)] * 2
    assert tree(paths) == tree(paths[::-1])


# -- the pair -----------------------------------------------------------------------------------


def test_repeats_that_all_took_one_path_give_no_pair():
    assert diverging_pair(scenario_of(*numbered((5, ("a:ok", "b:ok"), True)))) is None
    # Alike even when some passed and some failed.
    assert diverging_pair(scenario_of(*numbered((3, ("a:ok",), True),
                                                (2, ("a:ok",), False)))) is None
    assert diverging_pair(scenario_of()) is None


def test_the_pair_is_a_passing_and_a_failing_repeat_where_there_are_both():
    repeats = numbered((5, ("a:ok", "b:ok"), True), (3, ("a:ok", "c:ok"), True),
                       (1, ("a:ok", "b:ok", "d:error"), False))
    pair = diverging_pair(scenario_of(*repeats))
    assert pair is not None
    assert (pair.a.repeat, pair.a.passed) == (1, True)
    assert (pair.b.repeat, pair.b.passed) == (9, False)
    # One path is the other's beginning: they differ where the shorter stopped.
    assert (pair.index, pair.shared) == (2, ("a:ok", "b:ok"))


def test_without_failures_the_pair_is_the_two_most_common_paths():
    repeats = numbered((1, ("z:ok",), True), (4, ("a:ok", "c:ok"), True),
                       (6, ("a:ok", "b:ok"), True))
    pair = diverging_pair(scenario_of(*repeats))
    assert pair is not None
    assert (pair.a.trajectory, pair.b.trajectory) == (("a:ok", "b:ok"), ("a:ok", "c:ok"))
    assert (pair.index, pair.shared) == (1, ("a:ok",))


def test_a_path_that_both_passed_and_failed_pairs_with_another():
    # The most common path has passes and failures; the other only passes: the pair is the
    # other's pass beside a failure of the common path.
    repeats = numbered((5, ("a:ok",), True), (2, ("a:ok",), False), (1, ("b:ok",), True))
    pair = diverging_pair(scenario_of(*repeats))
    assert pair is not None
    assert (pair.a.trajectory, pair.a.passed) == (("b:ok",), True)
    assert (pair.b.trajectory, pair.b.passed) == (("a:ok",), False)
    assert (pair.index, pair.shared) == (0, ())


def test_repeats_whose_steps_were_not_kept_and_void_ones_are_left_out():
    repeats = [repeat(1, ("a:ok",)), repeat(2, ("a:ok",)),
               repeat(3, ("b:ok",), kept=False), repeat(4, ("c:ok",), kept=False),
               repeat(5, (), outcome=Outcome.LANE_INFRA), repeat(6, ("d:ok",),
                                                                outcome=Outcome.LANE_INFRA)]
    scenario = scenario_of(*repeats)
    held, not_kept = divergence.kept(scenario)
    assert [r.repeat for r in held] == [1, 2] and not_kept == 2
    assert diverging_pair(scenario) is None
    assert divergence.tree([(r.trajectory, r.passed)
                            for r in divergence.kept(scenario)[0]]).count == 2


def test_a_kept_trajectory_of_no_step_is_a_path_of_its_own():
    # Its digest is that of no step: it made no tool call, which is a path, not a lost one.
    repeats = [repeat(1, ()), repeat(2, ("a:ok",), passed=False)]
    scenario = scenario_of(*repeats)
    assert divergence.kept(scenario)[1] == 0
    pair = diverging_pair(scenario)
    assert pair is not None and (pair.a.repeat, pair.b.repeat, pair.index) == (1, 2, 0)
