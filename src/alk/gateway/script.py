"""What the scripted model says: a scenario's `script` turn by turn, weighted choices sampled
from the repeat's seed, and the wire faults a scenario may declare. Pure; the lane reads its
checks from here and the server its answers."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

# What a scenario's `wire_faults` may inject (docs/gateway.md says what each sends).
FAULT_KINDS = ("http_429", "http_500", "http_503", "connection_reset", "stall",
               "truncated_stream", "malformed_json", "bad_tool_args",
               "http_408", "http_529", "stream_error", "no_usage", "finish_safety",
               "finish_max_tokens", "empty_choices", "unknown_tool")
# The HTTP status each status fault answers with (529: Anthropic's overloaded_error).
FAULT_STATUS = {"http_408": 408, "http_429": 429, "http_500": 500, "http_503": 503,
                "http_529": 529}
TURN_KINDS = ("tool", "text", "choices")
# What a weighted choice holds beside its turn: its weight, and whether the lane marks it as the
# model's mistake (a turn meant to fail, whose failure is the agent's, docs/causes.md).
_CHOICE_ONLY = ("weight", "mistake")
# What a call past the script is answered with: a final answer, so that the run can end and
# the harness's own record of the exhausted script explains what follows.
EXHAUSTED_TEXT = "(alk: the script has no more turns)"


def turn_problem(turn: Any) -> str | None:
    """Why a script turn cannot be served, or None. `choices` hold plain turns with weights."""
    if not isinstance(turn, Mapping):
        return "must be a table (one model turn)"
    if "choices" in turn:
        extra = set(turn) - {"choices"}
        if extra:
            return f"with choices holds nothing else, got {', '.join(sorted(extra))}"
        choices = turn["choices"]
        if not isinstance(choices, list) or not choices:
            return "choices must be a non-empty list of turns, each with a weight"
        for index, choice in enumerate(choices):
            if not isinstance(choice, Mapping):
                return f"choices[{index}] must be a table"
            weight = choice.get("weight")
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
                return f"choices[{index}].weight must be a positive number, got {weight!r}"
            if not isinstance(choice.get("mistake", False), bool):
                return (f"choices[{index}].mistake must be true or false (true: the model's "
                        f"mistake, meant to fail), got {choice['mistake']!r}")
            problem = _plain_problem({k: v for k, v in choice.items() if k not in _CHOICE_ONLY})
            if problem:
                return f"choices[{index}] {problem}"
        return None
    return _plain_problem(turn)


def _plain_problem(turn: Mapping[str, Any]) -> str | None:
    if "tool" in turn:
        extra = set(turn) - {"tool", "args", "raw"}
        if not isinstance(turn["tool"], str) or not turn["tool"]:
            return "tool must be a tool's name"
        if "args" in turn and "raw" in turn:
            return "holds args or raw, not both"
        if "args" in turn and not isinstance(turn["args"], Mapping):
            return "args must be a table (the call's arguments)"
        if "raw" in turn and not isinstance(turn["raw"], str):
            return "raw must be a string (the arguments' text as sent)"
    elif "text" in turn:
        extra = set(turn) - {"text"}
        if not isinstance(turn["text"], str):
            return "text must be a string"
    else:
        return "must hold tool (a tool call), text (an answer) or choices"
    if extra:
        return f"has unknown field(s) {', '.join(sorted(extra))}"
    return None


def sampled_turn(script: tuple[Mapping[str, Any], ...], index: int, seed: int
                 ) -> Mapping[str, Any] | None:
    """The `index`-th turn (0-based) as this repeat's model says it, None past the script. A
    turn with choices is drawn from the repeat's seed and the turn's place alone: the same seed
    gives the same answers (`--seed` reproduces a run), and a resumed attempt hears what the
    killed one heard."""
    drawn = _drawn(script, index, seed)
    if drawn is None or "choices" not in script[index]:
        return drawn
    return {key: value for key, value in drawn.items() if key not in _CHOICE_ONLY}


def is_mistake(script: tuple[Mapping[str, Any], ...], index: int, seed: int) -> bool:
    """Whether this repeat's `index`-th turn is a choice the lane marks `mistake = true`: the
    model's mistake, meant to make the run fail."""
    drawn = _drawn(script, index, seed)
    return drawn is not None and drawn.get("mistake") is True


def _drawn(script: tuple[Mapping[str, Any], ...], index: int, seed: int
           ) -> Mapping[str, Any] | None:
    if index >= len(script):
        return None
    turn = script[index]
    if "choices" not in turn:
        return turn
    choices = turn["choices"]
    draw = random.Random(f"alk/{seed}/{index}").random() * sum(c["weight"] for c in choices)
    for choice in choices:
        draw -= choice["weight"]
        if draw < 0:
            break
    return choice
