"""alk.attribution.layers: whose failure a failed check is (docs/causes.md, "Whose failure it
is"). Each rule on an observation built by hand: alk's kill (effect repeated, state lost), a
wire fault the framework went past, the lane's mistake served, a turn alk served meaning it
right (a tool call dropped, the script not followed), and a model alk did not serve."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from helpers.observations import AGENT, INFRA, PASSING, RUNTIME, observed, verdict

from alk.causes import CATALOGUE, Cause
from alk.records import Check, Observation, Outcome
from alk.served_model import ModelSeen

TWICE = (Check("files[lab-output/effects.json].json_length", False, 1, 2),)
TWICE_IS = "files[lab-output/effects.json].json_length: expected 1, got 2"
CALLED_TWICE = (Check("tool_calls.write_report", False, 1, 2),)
MISSING = (Check("files[lab-output/effects.json].json_length", False, 1, "missing"),)
MISSING_IS = 'files[lab-output/effects.json].json_length: expected 1, got "missing"'
NEVER_CALLED = (Check("tool_calls.write_report", False, 1, 0),)
NEVER_CALLED_IS = "tool_calls.write_report: expected 1, got 0"
# Three turns served in full: lookup_order, write_report, the final text.
SCRIPTED = {"mode": "script", "calls": 3, "turns": 3,
            "steps": ("200:lookup_order", "200:write_report", "200:text")}


def served(obs: Observation, **seen: Any) -> Observation:
    """The run as alk's gateway served it from the script (SCRIPTED, with `seen` changed)."""
    return dataclasses.replace(obs, model=ModelSeen(**{**SCRIPTED, **seen}))


def resumed(**fields: Any) -> Observation:
    """A run alk killed at its kill_at event and resumed: two attempts."""
    return observed(kill_fired=True, attempts=2, **fields)


# --- 1. alk's kill: the framework's ------------------------------------------------------------


@pytest.mark.parametrize("checks", [TWICE, CALLED_TWICE], ids=["file", "tool calls"])
def test_an_effect_counted_again_after_alks_kill_and_resume_is_effect_repeated(checks) -> None:
    outcome, cause, detail = verdict(resumed(), checks)
    assert (outcome, cause) == (RUNTIME, "effect_repeated")
    assert detail.startswith(f"alk killed the worker at its kill_at event and resumed it (2 "
                             f"attempts); {checks[0].name} counted 2, 1 expected: the resumed "
                             f"run did it again; then ")


def test_without_the_gateway_the_kill_alone_makes_it_the_frameworks() -> None:
    """No model served (a worker playing its own model, as tests/lanes/no_idempotency.toml):
    the same file check without alk's kill is the agent's."""
    assert verdict(resumed(), TWICE)[:2] == (RUNTIME, "effect_repeated")
    assert verdict(observed(), TWICE)[:2] == (AGENT, "wrong_files")


def test_another_failure_after_alks_kill_is_state_lost() -> None:
    outcome, cause, detail = verdict(resumed(), MISSING)
    assert (outcome, cause) == (RUNTIME, "state_lost")
    assert detail == ("alk killed the worker at its kill_at event and resumed it (2 attempts); "
                      f"what the killed attempt did was lost; then wrong_files: {MISSING_IS}")


def test_a_count_below_the_scenarios_after_a_kill_is_not_a_repeated_effect() -> None:
    assert verdict(resumed(), NEVER_CALLED)[1] == "state_lost"
    # Nor a boolean taken for a count (True is an int in Python).
    assert verdict(resumed(), (Check("tool_calls.x", False, 0, True),))[1] == "state_lost"


def test_the_kill_comes_before_the_lanes_mistake() -> None:
    """An injury alk caused explains the failure first: a mistake served in the same repeat
    does not make a repeated effect the agent's."""
    obs = served(resumed(), mistakes=(1,))
    assert verdict(obs, TWICE)[:2] == (RUNTIME, "effect_repeated")


def test_after_a_kill_a_pass_stays_a_pass_and_a_crash_a_crash() -> None:
    assert verdict(resumed(), PASSING)[:2] == (Outcome.PASS, "passed")
    assert verdict(resumed(exit_code=2), TWICE)[:2] == (RUNTIME, "nonzero_exit")


# --- 1. a wire fault the framework went past, under a served model -----------------------------


def test_a_check_failed_past_a_recovered_wire_fault_under_a_script_is_fault_mishandled() -> None:
    obs = served(observed(), calls=4, faults_fired=("bad_tool_args@call2",), recovered=True)
    outcome, cause, detail = verdict(obs, CALLED_TWICE)
    assert (outcome, cause) == (RUNTIME, "fault_mishandled")
    assert detail == ("the gateway injected bad_tool_args@call2; the framework went on past it "
                      "and the run failed; then wrong_tool_calls: tool_calls.write_report: "
                      "expected 1, got 2")


def test_past_a_recovered_fault_a_live_models_answer_is_still_the_agents() -> None:
    obs = served(observed(), mode="proxy", faults_fired=("http_429@call1",), recovered=True)
    assert verdict(obs, NEVER_CALLED)[:2] == (AGENT, "wrong_tool_calls")


def test_a_fault_never_recovered_from_is_still_fault_unrecovered() -> None:
    obs = served(observed(), calls=1, steps=("200:write_report",),
                 faults_fired=("bad_tool_args@call1",), recovered=False)
    assert verdict(obs, NEVER_CALLED)[:2] == (RUNTIME, "fault_unrecovered")


# --- 2. the lane's mistake, served by alk: the agent's ---------------------------------------


def test_a_failure_after_the_lanes_mistake_was_served_is_the_agents() -> None:
    obs = served(observed(), calls=2, turns=2, steps=("200:lookup_order", "200:text"),
                 mistakes=(1,))
    outcome, cause, detail = verdict(obs, NEVER_CALLED)
    assert (outcome, cause) == (AGENT, "wrong_tool_calls")
    assert detail == (f"{NEVER_CALLED_IS}; the model's mistake: alk served turn 2 as the "
                      "choice the lane marks mistake = true")


def test_the_same_turn_not_marked_a_mistake_is_the_frameworks() -> None:
    obs = served(observed(), calls=2, turns=2, steps=("200:lookup_order", "200:text"))
    outcome, cause, detail = verdict(obs, NEVER_CALLED)
    assert (outcome, cause) == (RUNTIME, "script_not_followed")
    assert detail == ("alk's scripted model gave the turns the lane meant to be right; then "
                      f"wrong_tool_calls: {NEVER_CALLED_IS}")


def test_a_mistake_served_in_a_run_that_passed_leaves_the_pass() -> None:
    assert verdict(served(observed(), mistakes=(1,)), PASSING)[:2] == (Outcome.PASS, "passed")


# --- 3. a turn alk served meaning it right: the framework's ----------------------------------


def test_a_run_that_ended_on_a_proposed_tool_call_dropped_it() -> None:
    """LangGraph's malformed-output: the first answer proposes lookup_order with arguments that
    do not parse; the framework takes it for an empty answer and the run ends there."""
    obs = served(observed(), calls=1, turns=1, steps=("200:lookup_order",))
    outcome, cause, detail = verdict(obs, MISSING)
    assert (outcome, cause) == (RUNTIME, "answer_dropped")
    assert detail == ("alk's scripted model proposed lookup_order at call 1, and the run ended "
                      f"there, never back at the model; then wrong_files: {MISSING_IS}")


@pytest.mark.parametrize("steps, calls", [
    (("200:lookup_order", "200:text"), 2),  # it ended on the final answer
    (("200:lookup_order", "503:-"), 2),  # the last call was not answered in full
    (("200:lookup_order",), 2),  # a call past the recorded ones: the last is unknown
], ids=["text", "refused", "unrecorded"])
def test_only_a_run_that_ended_on_a_tool_call_answered_in_full_dropped_it(steps, calls) -> None:
    obs = served(observed(), calls=calls, turns=1, steps=steps)
    assert verdict(obs, MISSING)[:2] == (RUNTIME, "script_not_followed")


def test_a_run_that_ended_on_the_scripts_last_turn_dropped_nothing() -> None:
    """smolagents' malformed-output: its answer is a call of its final_answer tool (the lane's
    answer_tool), the script's last turn; the run failed on an extra tool call before it."""
    steps = ("200:lookup_order", "200:lookup_order", "200:write_report", "200:final_answer")
    checks = (Check("tool_calls.lookup_order", False, 1, 2),)
    obs = served(observed(), calls=4, turns=4, steps=steps, script_turns=4)
    assert verdict(obs, checks)[:2] == (RUNTIME, "script_not_followed")
    # Ended on the same tool call a turn before the script's end: that call was dropped.
    obs = served(observed(), calls=3, turns=3, steps=steps[1:], script_turns=4)
    assert verdict(obs, checks)[:2] == (RUNTIME, "answer_dropped")


def test_a_run_that_never_called_the_model_is_told_so() -> None:
    """smolagents' MCP client failing to import: the run ends with an error before any model
    call, so no served turn was there to be followed, and the detail says what happened."""
    obs = served(observed(), calls=0, turns=0, steps=())
    outcome, cause, detail = verdict(obs, MISSING)
    assert (outcome, cause) == (RUNTIME, "script_not_followed")
    assert detail == ("the framework never called alk's scripted model: the run ended before "
                      f"its first model call; then wrong_files: {MISSING_IS}")


def test_a_replayed_cassette_is_served_meaning_it_right_too() -> None:
    obs = served(observed(), mode="replay")
    outcome, cause, detail = verdict(obs, MISSING)
    assert (outcome, cause) == (RUNTIME, "script_not_followed")
    assert detail.startswith("alk's replayed model gave the turns")


# --- 4. a model alk did not serve: the agent's -------------------------------------------------


@pytest.mark.parametrize("obs", [
    observed(),  # the worker plays its model itself
    served(observed(), mode="proxy"),  # a live model behind alk's proxy
    observed(model_turns=3),  # a worker's own script: its report of turns is its claim
], ids=["no gateway", "proxy", "worker script"])
def test_a_model_alk_did_not_serve_leaves_the_check_the_agents(obs) -> None:
    assert verdict(obs, NEVER_CALLED) == (AGENT, "wrong_tool_calls", NEVER_CALLED_IS)


# --- void stays exactly as it was -------------------------------------------------------------


def test_no_rule_here_makes_a_repeat_void_or_scores_a_void_one() -> None:
    """Every cause these rules give is a scored failure, whatever the worker reports or the
    gateway saw; a repeat void before it (its kill never came, its gate failed) stays void."""
    for cause in (Cause.EFFECT_REPEATED, Cause.STATE_LOST, Cause.FAULT_MISHANDLED,
                  Cause.ANSWER_DROPPED, Cause.SCRIPT_NOT_FOLLOWED):
        assert CATALOGUE[cause].outcome is RUNTIME
    never_ready = served(observed(ready=None, started=False, exit_code=1), mistakes=(0,))
    assert verdict(never_ready, TWICE)[:2] == (INFRA, "exited_before_ready")
    not_fired = served(observed(kill_missing=True), mistakes=(0,))
    assert verdict(not_fired, PASSING)[:2] == (INFRA, "kill_not_fired")
