"""Whose a failure is, and what to do about it: the catalogue's `framework_finding` (what `alk
check-worker` lists without failing), and alk.causes.advice, which fits a fault's advice to
where alk's own detail says it was injected."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from helpers.observations import observed

from alk.attribution.outcome import attribute
from alk.causes import CATALOGUE, Cause
from alk.causes.advice import FaultSite, advice, fault_sites
from alk.records import Check, Outcome
from alk.served_model import ModelSeen

WRONG_STOP = (Check("stop_reason", False, "accepted", "error:RuntimeError"),)
RETRY_AFTER = "Retry-After"
DOCS = Path(__file__).resolve().parents[2] / "docs"


def detail_after(**fields) -> str:
    """The detail alk's attribution gives a run that stopped with an error after `fields`."""
    found = attribute(observed(**fields), WRONG_STOP)
    assert found.cause == Cause.FAULT_UNRECOVERED
    return found.detail


def wire(faults_fired: tuple[str, ...] = ("http_429@call1",)) -> ModelSeen:
    return ModelSeen(calls=1, faults_fired=faults_fired, recovered=False, mode="script")


# --- whose it is ----------------------------------------------------------------------------


def test_a_finding_about_the_framework_is_always_a_scored_framework_failure() -> None:
    findings = {cause for cause, info in CATALOGUE.items() if info.framework_finding}
    assert findings and all(CATALOGUE[c].outcome is Outcome.FRAMEWORK_RUNTIME for c in findings)


def test_what_the_framework_made_of_alks_injuries_is_a_finding_not_the_workers() -> None:
    # Each follows a fault, a kill or an answer alk served (alk.attribution.layers).
    for cause in (Cause.FAULT_UNRECOVERED, Cause.FAULT_MISHANDLED, Cause.EFFECT_REPEATED,
                  Cause.STATE_LOST, Cause.ANSWER_DROPPED):
        assert CATALOGUE[cause].framework_finding, cause


def test_docs_causes_md_names_the_findings_the_catalogue_marks() -> None:
    text = " ".join((DOCS / "causes.md").read_text(encoding="utf-8").split())
    start = text.index("Some codes are the framework's own handling")
    named = re.findall(r"`([a-z_]+)`", text[start:text.index("No change to a", start)])
    assert named == [c.value for c, info in CATALOGUE.items() if info.framework_finding]


def test_the_protocol_and_the_adapter_are_the_workers_to_fix() -> None:
    for cause in (Cause.PROTOCOL_VIOLATION, Cause.BAD_RESULT, Cause.NO_RESULT,
                  Cause.WORKER_EXCEPTION, Cause.NONZERO_EXIT, Cause.TIMEOUT,
                  Cause.IDENTITY_CHANGED, Cause.FAULT_NOT_FIRED, Cause.KILL_NOT_FIRED,
                  # Right answers served, no injury: the adapter's reporting is suspect first.
                  Cause.SCRIPT_NOT_FOLLOWED,
                  # The worker may be the one to report it: its claim cannot make its own
                  # crash a finding about the framework.
                  Cause.SCRIPT_EXHAUSTED):
        assert not CATALOGUE[cause].framework_finding, cause


# --- what to do about it --------------------------------------------------------------------


def test_a_tool_that_raised_is_not_told_of_retry_after() -> None:
    detail = detail_after(faults_fired=frozenset({("tool", 2)}))
    assert fault_sites(detail) == (FaultSite.TOOL,)
    said = advice("fault_unrecovered", detail)
    assert "tool's error back to the model" in said and RETRY_AFTER not in said


def test_a_fault_on_the_wire_is_told_of_retries_and_retry_after() -> None:
    detail = detail_after(model=wire())
    assert fault_sites(detail) == (FaultSite.WIRE,)
    assert RETRY_AFTER in advice("fault_unrecovered", detail)


def test_a_fault_at_a_tool_alk_serves_is_told_of_the_mcp_client_not_retry_after() -> None:
    detail = detail_after(model=wire(faults_fired=("timeout@write_report#1",)))
    assert fault_sites(detail) == (FaultSite.SERVED_TOOL,)
    said = advice("fault_unrecovered", detail)
    assert "MCP client's timeout" in said and RETRY_AFTER not in said
    both = detail_after(model=wire(faults_fired=("http_429@call1", "timeout@write_report#1")))
    assert fault_sites(both) == (FaultSite.WIRE, FaultSite.SERVED_TOOL)


def test_a_model_call_the_worker_made_raise_is_told_of_retrying_the_call() -> None:
    detail = detail_after(faults_fired=frozenset({("before_model", 1)}))
    said = advice("fault_unrecovered", detail)
    assert "model call raised" in said and "tool" not in said


def test_a_wire_and_a_tool_fault_get_both_advices_in_order() -> None:
    obs = dataclasses.replace(observed(model=wire()), faults_fired=frozenset({("tool", 1)}))
    detail = attribute(obs, WRONG_STOP).detail
    assert fault_sites(detail) == (FaultSite.WIRE, FaultSite.TOOL)
    said = advice("fault_unrecovered", detail)
    assert said.index(RETRY_AFTER) < said.index("A tool raised")


def test_a_point_that_names_neither_a_tool_nor_a_model_gets_the_catalogues_action() -> None:
    detail = detail_after(faults_fired=frozenset({("db", 1)}))
    assert fault_sites(detail) == ()
    assert advice("fault_unrecovered", detail) == CATALOGUE[Cause.FAULT_UNRECOVERED].action


def test_only_alks_own_words_before_the_first_then_are_read() -> None:
    """After "; then " comes the failure in its own words, a worker's output among them: a
    worker cannot choose its advice by writing alk's."""
    detail = ("the gateway injected http_429@call1 and no model call after it was answered "
              "in full; then wrong_output: got \"; the worker injected tool#1\"")
    assert fault_sites(detail) == (FaultSite.WIRE,)


def test_a_cause_without_fault_advice_gets_its_action_and_an_unknown_code_none() -> None:
    assert advice("effect_repeated", "the worker injected tool#1; then x") == \
        CATALOGUE[Cause.EFFECT_REPEATED].action
    assert advice("no_result") == CATALOGUE[Cause.NO_RESULT].action
    assert advice("not_a_code", "the worker injected tool#1") == ""


def test_no_other_cause_changes_its_advice_by_fault() -> None:
    detail = "the gateway injected x; the worker injected tool#1; then y"
    for cause in Cause:
        if cause is not Cause.FAULT_UNRECOVERED:
            assert advice(cause, detail) == CATALOGUE[cause].action, cause
