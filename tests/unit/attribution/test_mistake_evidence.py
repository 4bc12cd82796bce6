"""Where the attribution learns that the lane's mistake was served: a choice marked
`mistake = true` (alk.gateway.script), drawn by alk's gateway from the repeat's seed, recorded by
the gateway as it serves it, and kept across a repeat's attempts (alk.execute.attempts). Never
from the worker: a worker can neither mark a turn nor claim one served."""

from __future__ import annotations

import pytest

from alk.execute.attempts import combine_models
from alk.gateway.script import is_mistake, sampled_turn, turn_problem
from alk.served_model import ModelSeen

RIGHT = {"weight": 0.7, "tool": "write_report", "args": {"order": "742"}}
WRONG = {"weight": 0.3, "mistake": True, "text": "No report needed"}
SCRIPT = ({"tool": "lookup_order", "args": {"order": "742"}}, {"choices": [RIGHT, WRONG]},
          {"text": "done"})
SEEDS = range(400)


def test_a_choice_may_be_marked_the_models_mistake_and_nothing_else_may() -> None:
    assert turn_problem(SCRIPT[1]) is None
    assert turn_problem({"choices": [{**WRONG, "mistake": False}]}) is None
    assert turn_problem({"choices": [{**WRONG, "mistake": "yes"}]}) == (
        "choices[0].mistake must be true or false (true: the model's mistake, meant to fail), "
        "got 'yes'")
    # A plain turn is meant to be right: only a weighted alternative is a planted mistake.
    assert turn_problem({"text": "x", "mistake": True}) == "has unknown field(s) mistake"


def test_the_turn_served_carries_neither_its_weight_nor_its_mark() -> None:
    drawn = [sampled_turn(SCRIPT, 1, seed) for seed in SEEDS]
    assert {"text": "No report needed"} in drawn
    assert all(set(turn) <= {"tool", "args", "text"} for turn in drawn)


def test_a_mistake_is_exactly_the_marked_choice_drawn() -> None:
    for seed in SEEDS:
        assert is_mistake(SCRIPT, 1, seed) == (sampled_turn(SCRIPT, 1, seed) ==
                                               {"text": "No report needed"})
    assert sum(is_mistake(SCRIPT, 1, seed) for seed in SEEDS) == pytest.approx(120, abs=30)
    assert not any(is_mistake(SCRIPT, index, 5) for index in (0, 2, 3))


def test_a_mistake_served_in_a_killed_attempt_is_kept_with_the_resumed_ones() -> None:
    seen = [ModelSeen(mode="script", turns=2, mistakes=(1,)), ModelSeen(mode="script", turns=1)]
    assert combine_models(seen).mistakes == (1,)
    assert combine_models(seen).mode == "script"
