"""alk.attribution.outcome's rules for what alk's gateway saw of the model: a provider that failed
behind the proxy, a request a cassette did not hold, a fault that fired with no recovery after
it, and the `model_calls` check. Observations are built by hand, as in test_attribution."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from helpers.observations import AGENT, INFRA, PASSING, RUNTIME, observed, verdict

from alk.cost import TokenCost
from alk.records import Check, Observation, Outcome
from alk.served_model import ModelSeen

# Failures of each kind, and how attribute names them without the gateway.
WRONG_OUTPUT = (Check("output_equals", False, "x", "hello"),)
WRONG_OUTPUT_IS = 'wrong_output: output_equals: expected "x", got "hello"'
WRONG_STOP = (Check("stop_reason", False, "accepted", "error"),)
WRONG_STOP_IS = 'wrong_stop_reason: stop_reason: expected "accepted", got "error"'
WRONG_FILES = (Check("files[out.json].exists", False, True, False),)
CRASH = {"exit_code": 2, "stderr_tail": "giving up\n"}
CRASH_IS = "nonzero_exit: exit code 2; stderr: giving up"
HANG = {"timed_out": True, "duration_s": 2.0, "result": None}
HANG_IS = "timeout: no exit within the timeout (2.0 s run)"
FRAMEWORK = {"exit_code": 1, "ready": {"framework": "fw", "framework_version": "1.0",
                                       "package_paths": ["/fw"]},
             "stderr_tail": 'Traceback (most recent call last):\n  File "/fw/core.py", line 3, '
                            'in run\nRuntimeError: boom\n'}
FRAMEWORK_IS = ("framework_exception: exit code 1; RuntimeError: boom; raised at "
                "/fw/core.py:3")
MEMORY = {"exit_code": 1, "limits": {"memory_mb": 256}, "stderr_tail": "MemoryError\n"}
SIGNAL = {"exit_code": None, "signal": 11}
BAD_RESULT = {"bad_result": "result.output must be a string"}

PROVIDER = "the upstream answered 503"
UNMATCHED = "call 2: messages[1].content differs"
WIRE_UNRECOVERED = ("the gateway injected http_500@call2 and no model call after it was "
                    "answered in full; then ")


def with_model(obs: Observation, **seen: Any) -> Observation:
    return dataclasses.replace(obs, model=ModelSeen(**seen))


def unrecovered(**fields: Any) -> Observation:
    """A run in which the gateway's fault at call 2 fired and no later call was answered."""
    return with_model(observed(**fields), calls=2, faults_fired=("http_500@call2",),
                      recovered=False)


def worker_fault(**fields: Any) -> Observation:
    """A run in which the worker reported injecting its declared fault (alk cannot see past)."""
    return observed(faults_fired=frozenset({("tool", 1)}), **fields)


# --- provider_unavailable: the upstream failed behind alk's proxy ---------------------------


def test_a_provider_error_in_a_run_that_passed_stays_a_pass() -> None:
    obs = with_model(observed(), provider_error=PROVIDER)
    assert verdict(obs, PASSING)[:2] == (Outcome.PASS, "passed")


@pytest.mark.parametrize("fields, checks, then", [
    pytest.param({}, WRONG_OUTPUT, WRONG_OUTPUT_IS, id="wrong_output"),
    pytest.param(CRASH, (), CRASH_IS, id="nonzero_exit"),
    pytest.param(HANG, (), HANG_IS, id="timeout"),
    # A limit, too: the provider's failure is why the run went where it did.
    pytest.param(MEMORY, (), "memory_limit: limit memory_mb = 256: exit code 1; stderr: "
                             "MemoryError", id="memory_limit"),
    pytest.param({"faults_missing": ("tool#1",)}, PASSING,
                 "fault_not_fired: declared fault(s) never reported as injected: tool#1",
                 id="void-stays-void"),
])
def test_a_provider_error_voids_a_run_that_did_not_pass(fields: dict[str, Any],
                                                        checks: tuple[Check, ...],
                                                        then: str) -> None:
    obs = with_model(observed(**fields), provider_error=PROVIDER)
    assert verdict(obs, checks) == (INFRA, "provider_unavailable", f"{PROVIDER}; then {then}")


def test_a_provider_error_is_named_before_a_replay_mismatch_or_a_fault() -> None:
    obs = dataclasses.replace(unrecovered(), model=dataclasses.replace(
        unrecovered().model, provider_error=PROVIDER, unmatched=UNMATCHED))
    assert verdict(obs, WRONG_OUTPUT)[:2] == (INFRA, "provider_unavailable")


# --- upstream_refused: the upstream refused the worker's own request -------------------------

REFUSED = "call 1: the upstream answered 403 to the worker's request, while alk's own check " \
          "was answered (GET u/models/m answered 200)"


@pytest.mark.parametrize("fields, checks, then", [
    pytest.param({}, WRONG_OUTPUT, WRONG_OUTPUT_IS, id="wrong_output"),
    pytest.param(CRASH, (), CRASH_IS, id="nonzero_exit"),
    pytest.param(HANG, (), HANG_IS, id="timeout"),
])
def test_a_refusal_of_the_workers_own_request_is_a_scored_failure(
        fields: dict[str, Any], checks: tuple[Check, ...], then: str) -> None:
    obs = with_model(observed(**fields), upstream_refused=REFUSED)
    assert verdict(obs, checks) == (RUNTIME, "upstream_refused", f"{REFUSED}; then {then}")


def test_a_refusal_the_framework_got_past_is_still_a_pass() -> None:
    assert verdict(with_model(observed(), upstream_refused=REFUSED), PASSING)[:2] == (
        Outcome.PASS, "passed")


def test_a_failing_provider_outranks_a_refusal_of_the_workers_request() -> None:
    obs = with_model(observed(), upstream_refused=REFUSED, provider_error=PROVIDER)
    assert verdict(obs, WRONG_OUTPUT)[:2] == (INFRA, "provider_unavailable")


# --- token_budget: the repeat's budget was spent and the gateway refused a call ---------------

SPENT = TokenCost("provider", input_tokens=900, output_tokens=150, calls=3, refused=1)
SPENT_IS = ("the gateway refused 1 call(s) past the repeat's token budget (1,050 provider "
            "tokens used); then ")


@pytest.mark.parametrize("fields, checks, then", [
    pytest.param({}, WRONG_OUTPUT, WRONG_OUTPUT_IS, id="wrong_output"),
    pytest.param(CRASH, (), CRASH_IS, id="nonzero_exit"),
    pytest.param(HANG, (), HANG_IS, id="timeout"),
    pytest.param(BAD_RESULT, (), "bad_result: result.output must be a string", id="bad_result"),
])
def test_a_refusal_past_the_token_budget_is_the_agents_scored_failure(
        fields: dict[str, Any], checks: tuple[Check, ...], then: str) -> None:
    obs = with_model(observed(**fields), mode="proxy", cost=SPENT)
    assert verdict(obs, checks) == (AGENT, "token_budget", f"{SPENT_IS}{then}")


def test_the_token_budget_leaves_a_pass_a_void_and_an_unrefused_repeat_alone() -> None:
    assert verdict(with_model(observed(), cost=SPENT), PASSING)[:2] == (Outcome.PASS, "passed")
    void = with_model(observed(faults_missing=("tool#1",)), cost=SPENT)
    assert verdict(void, PASSING)[1] == "fault_not_fired"
    unrefused = dataclasses.replace(SPENT, refused=0)
    assert verdict(with_model(observed(), cost=unrefused), WRONG_OUTPUT)[1] == "wrong_output"
    # A provider shown failing by alk's own check still voids: no worker can choose that.
    failing = with_model(observed(), cost=SPENT, provider_error=PROVIDER)
    assert verdict(failing, WRONG_OUTPUT)[:2] == (INFRA, "provider_unavailable")
    # A resource limit is the kernel's word on why the run ended: it stays over the refusal.
    limited = with_model(observed(**MEMORY), mode="proxy", cost=SPENT)
    assert verdict(limited)[1] == "memory_limit"


# --- replay_mismatch: the run left the recorded path ----------------------------------------


@pytest.mark.parametrize("fields, checks, then", [
    pytest.param({}, WRONG_OUTPUT, WRONG_OUTPUT_IS, id="wrong_output"),
    pytest.param(CRASH, (), CRASH_IS, id="nonzero_exit"),
    pytest.param(SIGNAL, (), "killed_by_signal: killed by SIGSEGV", id="killed_by_signal"),
])
def test_an_unmatched_request_and_a_failure_is_a_replay_mismatch(fields: dict[str, Any],
                                                                 checks: tuple[Check, ...],
                                                                 then: str) -> None:
    obs = with_model(observed(**fields), unmatched=UNMATCHED)
    assert verdict(obs, checks) == (RUNTIME, "replay_mismatch", f"{UNMATCHED}; then {then}")


@pytest.mark.parametrize("fields, checks, cause", [
    pytest.param({}, PASSING, "passed", id="passed"),
    pytest.param({"faults_missing": ("tool#1",)}, PASSING, "fault_not_fired", id="void"),
    pytest.param(MEMORY, (), "memory_limit", id="memory_limit"),
])
def test_an_unmatched_request_explains_no_pass_void_or_limit(fields: dict[str, Any],
                                                             checks: tuple[Check, ...],
                                                             cause: str) -> None:
    assert verdict(with_model(observed(**fields), unmatched=UNMATCHED), checks)[1] == cause


def test_a_replay_mismatch_is_named_before_a_fault() -> None:
    obs = dataclasses.replace(unrecovered(), model=dataclasses.replace(
        unrecovered().model, unmatched=UNMATCHED))
    assert verdict(obs, WRONG_OUTPUT)[:2] == (RUNTIME, "replay_mismatch")


# --- fault_unrecovered: a fault fired and the run failed without getting past it -----------


@pytest.mark.parametrize("fields, checks, then", [
    pytest.param({}, WRONG_OUTPUT, WRONG_OUTPUT_IS, id="wrong_output"),
    pytest.param({}, WRONG_FILES, "wrong_files: files[out.json].exists: expected true, got "
                                  "false", id="wrong_files"),
    pytest.param(CRASH, (), CRASH_IS, id="nonzero_exit"),
    pytest.param(HANG, (), HANG_IS, id="timeout"),
    pytest.param(SIGNAL, (), "killed_by_signal: killed by SIGSEGV", id="killed_by_signal"),
    pytest.param(BAD_RESULT, (), "bad_result: result.output must be a string", id="bad_result"),
])
def test_a_wire_fault_with_no_recovery_names_the_fault_and_the_failure(
        fields: dict[str, Any], checks: tuple[Check, ...], then: str) -> None:
    assert verdict(unrecovered(**fields), checks) == (
        RUNTIME, "fault_unrecovered", WIRE_UNRECOVERED + then)


def test_a_recovered_wire_fault_leaves_the_failure_as_it_was() -> None:
    obs = with_model(observed(), calls=3, faults_fired=("http_429@call2",), recovered=True)
    outcome, cause, detail = verdict(obs, WRONG_OUTPUT)
    assert (outcome, f"{cause}: {detail}") == (AGENT, WRONG_OUTPUT_IS)


def test_many_wire_faults_name_the_first_four() -> None:
    fired = tuple(f"http_503@call{n}" for n in range(1, 7))
    obs = with_model(observed(), calls=6, faults_fired=fired, recovered=False)
    assert verdict(obs, WRONG_OUTPUT)[2] == (
        "the gateway injected http_503@call1, http_503@call2, http_503@call3, http_503@call4 "
        f"and no model call after it was answered in full; then {WRONG_OUTPUT_IS}")


@pytest.mark.parametrize("fields, cause", [
    pytest.param(MEMORY, "memory_limit", id="memory_limit"),
    pytest.param({"exit_code": None, "signal": 24, "limits": {"cpu_s": 5}}, "cpu_limit",
                 id="cpu_limit"),
])
def test_a_fault_never_replaces_a_resource_limit(fields: dict[str, Any], cause: str) -> None:
    assert verdict(unrecovered(**fields))[1] == cause
    assert verdict(worker_fault(**fields))[1] == cause


@pytest.mark.parametrize("obs", [
    pytest.param(unrecovered(), id="wire"),
    pytest.param(worker_fault(), id="worker"),
])
def test_a_fault_never_replaces_a_pass(obs: Observation) -> None:
    assert verdict(obs, PASSING)[:2] == (Outcome.PASS, "passed")


def test_a_fault_never_replaces_a_void_repeat() -> None:
    obs = unrecovered(faults_missing=("db#1",))
    assert verdict(obs, PASSING)[:2] == (INFRA, "fault_not_fired")


@pytest.mark.parametrize("fields, checks, then", [
    pytest.param({}, WRONG_STOP, WRONG_STOP_IS, id="wrong_stop_reason"),
    pytest.param(CRASH, (), CRASH_IS, id="nonzero_exit"),
    pytest.param(FRAMEWORK, (), FRAMEWORK_IS, id="framework_exception"),
    pytest.param(HANG, (), HANG_IS, id="timeout"),
])
def test_a_worker_fault_explains_a_run_it_could_have_ended(fields: dict[str, Any],
                                                           checks: tuple[Check, ...],
                                                           then: str) -> None:
    assert verdict(worker_fault(**fields), checks) == (
        RUNTIME, "fault_unrecovered", f"the worker injected tool#1; then {then}")


@pytest.mark.parametrize("fields, checks, cause", [
    pytest.param({}, WRONG_FILES, "wrong_files", id="wrong_files"),
    pytest.param({}, WRONG_OUTPUT, "wrong_output", id="wrong_output"),
    pytest.param(SIGNAL, (), "killed_by_signal", id="killed_by_signal"),
    pytest.param(BAD_RESULT, (), "bad_result", id="bad_result"),
])
def test_a_worker_fault_does_not_explain_other_failures(fields: dict[str, Any],
                                                        checks: tuple[Check, ...],
                                                        cause: str) -> None:
    # A wrong file is not what a fault the worker injected ends a run with.
    assert verdict(worker_fault(**fields), checks)[1] == cause


def test_worker_faults_are_named_in_order_and_bounded() -> None:
    fired = frozenset({("tool", 2), ("db", 1), ("tool", 1), ("api", 3), ("zeta", 9)})
    obs = observed(faults_fired=fired, **CRASH)
    assert verdict(obs)[2] == (
        f"the worker injected api#3, db#1, tool#1, tool#2; then {CRASH_IS}")


def test_a_wire_and_a_worker_fault_are_both_named() -> None:
    obs = dataclasses.replace(unrecovered(**CRASH), faults_fired=frozenset({("tool", 1)}))
    assert verdict(obs) == (RUNTIME, "fault_unrecovered",
                            f"{WIRE_UNRECOVERED[:-len('; then ')]}; the worker injected "
                            f"tool#1; then {CRASH_IS}")


@pytest.mark.parametrize("obs", [
    pytest.param(unrecovered(script_exhausted=(3, 2)), id="wire"),
    pytest.param(worker_fault(script_exhausted=(3, 2)), id="worker"),
])
def test_an_unrecovered_fault_is_named_before_an_exhausted_script(obs: Observation) -> None:
    assert verdict(obs, WRONG_STOP)[1] == "fault_unrecovered"
    # Without the fault, the exhausted script is named.
    plain = dataclasses.replace(obs, model=None, faults_fired=frozenset())
    assert verdict(plain, WRONG_STOP)[1] == "script_exhausted"


# --- wrong_model_calls: the executor's check of how many calls the gateway served -----------


@pytest.mark.parametrize("expected, actual", [("3", 5), ("1 to 2", 0)])
def test_a_failed_model_calls_check_is_the_agents(expected: str, actual: int) -> None:
    obs = with_model(observed(), calls=actual)
    assert verdict(obs, (Check("model_calls", False, expected, actual),)) == (
        AGENT, "wrong_model_calls", f'model_calls: expected "{expected}", got {actual}')


def test_a_model_calls_check_that_held_passes() -> None:
    obs = with_model(observed(), calls=3)
    assert verdict(obs, (Check("model_calls", True, "3", 3),))[:2] == (Outcome.PASS, "passed")
