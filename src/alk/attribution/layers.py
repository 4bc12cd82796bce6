"""Whose failure a failed check is: the framework's or the agent's. Pure.

A check of the result failed (rule 13 of docs/causes.md). Which layer failed follows from what
alk itself did and saw, never from what the worker says:

1. an injury alk caused that the framework did not recover from is the framework's: alk
   killed the worker (`kill_at`) and resumed it (`effect_repeated` when a count came out
   above the scenario's, else `state_lost`), or, under a model alk serves, alk's gateway
   injected a wire fault that the framework went past and still failed (`fault_mishandled`;
   one it never got past is `fault_unrecovered`, named before this rule);
2. a turn the lane marks as the model's mistake (a weighted choice with `mistake = true`),
   when alk's gateway served it, is the agent's: the check's own cause, outcome `agent`;
3. when alk serves the model from a script or a cassette, every other turn was meant to be
   right, so the failure is the framework's: `answer_dropped` when the run ended on a
   proposed tool call before the script's last turn, else `script_not_followed`;
4. otherwise (a live model behind alk's proxy, or a worker that plays its model itself) the
   answer was the model's or the agent code's choice: the check's cause, outcome `agent`.

Every cause here is a scored failure: no rule can make a repeat void, so a worker gains no
way to have a failure left uncounted by what it reports or leaves.
"""

from __future__ import annotations

from collections.abc import Sequence

from alk.causes import Cause
from alk.causes.advice import WIRE_FAULT
from alk.records import Check, Observation
from alk.served_model import ModelSeen

# Checks that count what a run did: above the scenario's number after a resume, the resumed run
# did again what the killed one had done.
_COUNTS = ("tool_calls.", ".json_length")
# Modes in which alk's gateway says what the model answers, turn by turn.
_SERVED = ("script", "replay")


def judge(obs: Observation, failed: Sequence[Check], cause: Cause, detail: str
          ) -> tuple[Cause, str]:
    """The cause of a repeat whose checks `failed` (the first named `cause`, all of them told
    in `detail`), by the layer the rules above name."""
    then = f"then {cause.value}: {detail}"
    if obs.kill_fired:
        resumed = ("alk killed the worker at its kill_at event"
                   + (f" and resumed it ({obs.attempts} attempts)" if obs.attempts > 1 else ""))
        over = next((c for c in failed if _counted_over(c)), None)
        if over is not None:
            return Cause.EFFECT_REPEATED, (
                f"{resumed}; {over.name} counted {over.actual}, {over.expected} expected: "
                f"the resumed run did it again; {then}")
        return Cause.STATE_LOST, f"{resumed}; what the killed attempt did was lost; {then}"
    model = obs.model
    served = model is not None and model.mode in _SERVED
    # Past a recovered fault a live model's answer is still its own; a served one was right.
    if served and model.faults_fired:
        return Cause.FAULT_MISHANDLED, (
            f"{WIRE_FAULT}{', '.join(model.faults_fired[:4])}; the framework went on "
            f"past it and the run failed; {then}")
    if model is not None and model.mistakes:
        turns = ", ".join(str(turn + 1) for turn in sorted(set(model.mistakes))[:4])
        return cause, (f"{detail}; the model's mistake: alk served turn {turns} as the "
                       "choice the lane marks mistake = true")
    if served and not model.calls:
        # Nothing was served to be carried out: the framework failed before it asked.
        return Cause.SCRIPT_NOT_FOLLOWED, (
            f"the framework never called alk's {model.mode}ed model: the run ended before its "
            f"first model call; {then}")
    if served:
        dropped = _dropped_call(model)
        if dropped:
            return Cause.ANSWER_DROPPED, (
                f"alk's scripted model proposed {dropped} at call {len(model.steps)}, and the "
                f"run ended there, never back at the model; {then}")
        return Cause.SCRIPT_NOT_FOLLOWED, (
            f"alk's {model.mode}ed model gave the turns the lane meant to be right; {then}")
    return cause, detail


def _counted_over(check: Check) -> bool:
    """A count check whose count came out above the scenario's."""
    return (any(part in check.name for part in _COUNTS)
            and isinstance(check.actual, int) and not isinstance(check.actual, bool)
            and isinstance(check.expected, int) and check.actual > check.expected)


def _dropped_call(model: ModelSeen) -> str:
    """The tool call(s) of the last answer, when the last call the gateway answered (all of
    them recorded) was a tool call answered in full and none came after it; else "". The
    script's last turn ends the run whatever it is: a lane's answer tool (`answer_tool`,
    smolagents' final_answer) is a tool call that is the answer."""
    if not model.steps or len(model.steps) != model.calls:
        return ""
    if model.script_turns and model.turns >= model.script_turns:
        return ""
    status, _, named = model.steps[-1].partition(":")
    if status != "200" or named in ("", "-", "text"):
        return ""
    return named
