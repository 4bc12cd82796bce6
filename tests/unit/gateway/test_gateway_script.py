"""alk.gateway.script's `sampled_turn`: what the scripted model says at each turn. Plain turns
as written, nothing past the script, and a turn with choices drawn by weight from the repeat's
seed and the turn's place alone, so that `--seed` reproduces a run in any process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from alk.gateway.script import sampled_turn

YES, NO = {"text": "yes"}, {"tool": "refund", "args": {"order": "742"}}
CHOICE = {"choices": [{"weight": 0.8, **YES}, {"weight": 0.2, **NO}]}
EVEN = {"choices": [{"weight": 1, "text": "heads"}, {"weight": 1, "text": "tails"}]}
SCRIPT = ({"tool": "lookup", "args": {"order": "742"}}, CHOICE, {"text": "done"})
SEEDS = range(2000)


def test_plain_turns_are_served_as_written() -> None:
    for index in (0, 2):
        assert sampled_turn(SCRIPT, index, seed=7) is SCRIPT[index]


@pytest.mark.parametrize("index", [3, 4, 100])
def test_past_the_script_there_is_no_turn(index: int) -> None:
    assert sampled_turn(SCRIPT, index, seed=7) is None
    assert sampled_turn((), 0, seed=7) is None


def test_a_choice_is_one_of_its_turns_without_its_weight() -> None:
    drawn = [sampled_turn(SCRIPT, 1, seed) for seed in range(200)]
    assert all(turn in (YES, NO) for turn in drawn)
    assert all("weight" not in turn for turn in drawn)
    # The lane's own script is left as it was.
    assert CHOICE["choices"][0] == {"weight": 0.8, "text": "yes"}


def test_the_same_seed_and_place_give_the_same_turn() -> None:
    for seed in range(50):
        assert sampled_turn(SCRIPT, 1, seed) == sampled_turn(SCRIPT, 1, seed)


def draws_in_child(hash_seed: str, pairs: list[tuple[int, int]]) -> list[str]:
    """The texts a fresh interpreter, with its own string hashing, draws for (seed, index)."""
    code = ("import json, sys; from alk.gateway.script import sampled_turn;"
            f"script = ({json.dumps(EVEN)},) * 4;"
            "pairs = json.loads(sys.argv[1]);"
            "print(json.dumps([sampled_turn(script, i, s)['text'] for s, i in pairs]))")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(pairs)], check=True,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": hash_seed})
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_seed_draws_the_same_turns_in_another_process() -> None:
    # String hashing is randomized per process: a draw that depended on it would differ here.
    pairs = [(seed, index) for seed in range(50) for index in range(4)]
    here = [sampled_turn((EVEN,) * 4, index, seed)["text"] for seed, index in pairs]
    assert draws_in_child("1", pairs) == here
    assert draws_in_child("2", pairs) == here


def test_the_draw_depends_on_the_seed_and_on_the_turns_place() -> None:
    script = (EVEN, EVEN)
    first = [sampled_turn(script, 0, seed)["text"] for seed in range(200)]
    second = [sampled_turn(script, 1, seed)["text"] for seed in range(200)]
    assert set(first) == {"heads", "tails"}  # seeds differ in what they draw
    agree = sum(a == b for a, b in zip(first, second))
    assert 60 < agree < 140  # two places of one seed are drawn independently


@pytest.mark.parametrize("weights", [(0.8, 0.2), (0.2, 0.8), (1, 2, 7), (3, 3, 3, 1)])
def test_choices_are_drawn_in_proportion_to_their_weights(weights: tuple[float, ...]) -> None:
    turn = {"choices": [{"weight": w, "text": str(i)} for i, w in enumerate(weights)]}
    counts = Counter(sampled_turn((turn,), 0, seed)["text"] for seed in SEEDS)
    total = sum(weights)
    for i, weight in enumerate(weights):
        share = weight / total
        # Four and a half standard deviations of a binomial over 2,000 draws: 0.8 gives
        # 0.76..0.84. The draws are seeded, so the test never flakes either way.
        bound = 4.5 * (share * (1 - share) / len(SEEDS)) ** 0.5
        assert abs(counts[str(i)] / len(SEEDS) - share) <= bound, (weights, counts)


def test_a_single_choice_is_always_drawn() -> None:
    only = {"choices": [{"weight": 0.001, "text": "only"}]}
    assert {sampled_turn((only,), 0, seed)["text"] for seed in range(100)} == {"only"}
