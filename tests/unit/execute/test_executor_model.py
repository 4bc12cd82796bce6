"""The executor with alk's model gateway: what a lane's [model] adds to a repeat's request, what
every attempt's view of the model adds up to, the model_calls check, wire faults never fired,
and what the result document keeps. A real gateway serves (on the host's loopback); the runner
is scripted and answers with what the gateway would have seen."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone

import pytest
from helpers.scripted import PASSING, ScriptedRunner

from alk.causes import Cause
from alk.cost import TokenBudget, TokenCost, TokenTotals
from alk.errors import LaneError
from alk.execute.executor import execute
from alk.gateway import proxy
from alk.plan import build_plan
from alk.records import Expectations, Fault, KillAt, Outcome, Scenario
from alk.redaction import Redactor
from alk.result.document import ModelTotals, build_document
from alk.served_model import ModelSeen, ModelSetup, WireFault

pytestmark = pytest.mark.usefixtures("private_temp")

SCRIPT = ({"tool": "lookup_order", "args": {"order": "742"}}, {"text": "done"})
SEEN = ModelSeen(calls=3, turns=2, retries=1, prompt_tokens=30, completion_tokens=4,
                 faults_fired=("http_429@call1",), recovered=True,
                 steps=("429:http_429", "200:lookup_order", "200:text"))


def lane_of(make_lane, *scenarios: Scenario, setup: ModelSetup = ModelSetup("script")):
    return make_lane(scenarios=scenarios, model=setup)


def run(make_lane, tmp_path, *answers, scenario: Scenario | None = None, repeats: int = 1):
    scenario = scenario or Scenario("a", "t", expect=Expectations(output_equals="hi"),
                                    script=SCRIPT)
    plan = build_plan(lane_of(make_lane, scenario), "run-1", repeats=repeats, seed=5)
    runner = ScriptedRunner(PASSING, *answers)
    execution = execute(plan, tmp_path, Redactor(), runner=runner, environ={"PATH": "/bin"})
    return plan, runner, execution


def checks(tmp_path, result) -> list[dict]:
    lines = (tmp_path / result.transcript).read_text().splitlines()
    return [e["payload"] for e in map(json.loads, lines)
            if e["channel"] == "harness" and e["type"] == "check"]


def test_a_repeat_reaches_the_gateway_through_its_environment_and_start(make_lane, tmp_path):
    _, runner, _ = run(make_lane, tmp_path, dataclasses.replace(PASSING, model=SEEN))
    probe, repeat = runner.requests
    # The probe has a session of its own and the same variables: a worker cannot tell it
    # from a repeat before start (which it is never sent).
    assert probe.start is None and probe.gateway is not None
    assert probe.gateway is not repeat.gateway and probe.gateway.key != repeat.gateway.key
    assert sorted(probe.env) == sorted(repeat.env)
    assert probe.env["OPENAI_API_KEY"] == probe.gateway.key
    model = repeat.start["model"]
    assert set(model) == {"base_url", "api_key", "mode", "name", "base_urls"}
    assert (model["mode"], model["name"]) == ("script", "alk-script")
    assert model["api_key"].startswith("alk-") and len(model["api_key"]) > 20
    # No network namespace here: the gateway listens on alk's own loopback.
    assert model["base_url"] == f"http://127.0.0.1:{repeat.gateway.port}/v1"
    assert repeat.env["OPENAI_BASE_URL"] == repeat.env["OPENAI_API_BASE"] == model["base_url"]
    assert repeat.env["OPENAI_API_KEY"] == model["api_key"]
    # Every family's client finds it too, with the same key, its base URL as it takes one.
    root = f"http://127.0.0.1:{repeat.gateway.port}"
    assert model["base_urls"] == {"openai": model["base_url"], "anthropic": root,
                                  "gemini": root}
    assert (repeat.env["ANTHROPIC_BASE_URL"], repeat.env["GOOGLE_GEMINI_BASE_URL"]) == (root, root)
    assert {repeat.env[name] for name in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY",
                                          "GOOGLE_API_KEY")} == {model["api_key"]}
    assert repeat.gateway is not None and repeat.gateway_port is None


def test_each_attempt_has_its_own_token(make_lane, tmp_path):
    resuming = Scenario("a", "t", expect=Expectations(output_equals="hi"), script=SCRIPT,
                        kill_at=KillAt("tool", "call"), max_attempts=2)
    killed = dataclasses.replace(PASSING, kill_fired=True, model=SEEN)
    _, runner, _ = run(make_lane, tmp_path, killed, dataclasses.replace(PASSING, model=SEEN),
                       scenario=resuming)
    first, second = (r.start["model"]["api_key"] for r in runner.requests[1:])
    assert first != second
    # Each session serves its attempt of its repeat: the scenario's script, the repeat's seed
    # (what sampled turns are drawn from), and where a resumed attempt starts.
    seed = runner.requests[1].start["seed"]
    for attempt, request in enumerate(runner.requests[1:], start=1):
        session = request.gateway
        assert (session.scenario, session.seed, session.attempt, session.repeat) == (
            resuming, seed, attempt, 1)


def test_what_the_gateway_saw_of_every_attempt_adds_up(make_lane, tmp_path):
    resuming = Scenario("a", "t", expect=Expectations(output_equals="hi"), script=SCRIPT,
                        kill_at=KillAt("tool", "call"), max_attempts=2,
                        wire_faults=(WireFault(1, "http_429"),))
    killed = dataclasses.replace(PASSING, kill_fired=True, model=SEEN)
    resumed = dataclasses.replace(PASSING, model=ModelSeen(
        calls=2, turns=1, retries=0, prompt_tokens=5, completion_tokens=1, recovered=True,
        steps=("200:text",)))
    _, _, execution = run(make_lane, tmp_path, killed, resumed, scenario=resuming)
    [result] = execution.repeats
    assert (result.outcome, result.cause) == (Outcome.PASS, Cause.PASSED), result.detail
    # Calls, retries, tokens and faults add up; turns are the last attempt's.
    assert result.model == {"calls": 5, "turns": 1, "retries": 1, "prompt_tokens": 35,
                            "completion_tokens": 5, "faults": ["http_429@call1"],
                            "cost": None}


@pytest.mark.parametrize("first, second, cause", [
    # The upstream failed in the killed attempt: the repeat that then failed is void.
    ({"provider_error": "refused"}, {}, Cause.PROVIDER_UNAVAILABLE),
    ({}, {"provider_error": "refused"}, Cause.PROVIDER_UNAVAILABLE),
    ({"unmatched": "call 1: differs"}, {}, Cause.REPLAY_MISMATCH),
    # Recovery is the last attempt's: the fault fired in the killed one, and the resumed
    # one's calls were answered (what failed then is alk's kill's, docs/causes.md).
    ({"recovered": False}, {}, Cause.STATE_LOST),
    ({}, {"recovered": False}, Cause.FAULT_UNRECOVERED),
])
def test_which_attempts_view_decides(make_lane, tmp_path, first, second, cause):
    resuming = Scenario("a", "t", expect=Expectations(stop_reason="accepted"), script=SCRIPT,
                        kill_at=KillAt("tool", "call"), max_attempts=2,
                        wire_faults=(WireFault(1, "http_500"),))
    killed = dataclasses.replace(PASSING, kill_fired=True, model=dataclasses.replace(
        SEEN, **{"faults_fired": ("http_500@call1",), **first}))
    resumed = dataclasses.replace(PASSING, model=dataclasses.replace(
        SEEN, **{"faults_fired": (), **second}))
    _, _, execution = run(make_lane, tmp_path, killed, resumed, scenario=resuming)
    [result] = execution.repeats
    assert result.cause == cause, result.detail


@pytest.mark.parametrize("calls, bounds, expected, ok", [
    (3, (3, 3), "3", True), (2, (3, 3), "3", False), (4, (3, 3), "3", False),
    (2, (2, 4), "2 to 4", True), (4, (2, 4), "2 to 4", True), (5, (2, 4), "2 to 4", False),
    (1, (2, 4), "2 to 4", False),
])
def test_model_calls_is_checked_against_what_the_gateway_served(make_lane, tmp_path, calls,
                                                                 bounds, expected, ok):
    scenario = Scenario("a", "t", expect=Expectations(model_calls=bounds), script=SCRIPT)
    answer = dataclasses.replace(PASSING, model=dataclasses.replace(SEEN, calls=calls))
    _, _, execution = run(make_lane, tmp_path, answer, scenario=scenario)
    [result] = execution.repeats
    assert checks(tmp_path, result) == [{"name": "model_calls", "ok": ok, "expected": expected,
                                         "actual": calls}]
    assert result.cause == (Cause.PASSED if ok else Cause.WRONG_MODEL_CALLS)
    assert result.outcome == (Outcome.PASS if ok else Outcome.AGENT)


def test_with_no_view_of_the_model_no_call_was_served(make_lane, tmp_path):
    scenario = Scenario("a", "t", expect=Expectations(model_calls=(1, 1)), script=SCRIPT)
    _, _, execution = run(make_lane, tmp_path, PASSING, scenario=scenario)
    [result] = execution.repeats
    assert checks(tmp_path, result)[0]["actual"] == 0 and result.model is None


@pytest.mark.parametrize("fired, cause", [
    (("http_500@call2",), Cause.PASSED),
    ((), Cause.FAULT_NOT_FIRED),
    (("http_500@call3",), Cause.FAULT_NOT_FIRED),
])
def test_a_wire_fault_never_fired_voids_a_repeat_whose_checks_held(make_lane, tmp_path, fired,
                                                                   cause):
    scenario = Scenario("a", "t", expect=Expectations(output_equals="hi"), script=SCRIPT,
                        wire_faults=(WireFault(2, "http_500"),))
    answer = dataclasses.replace(PASSING, model=dataclasses.replace(SEEN, faults_fired=fired))
    _, _, execution = run(make_lane, tmp_path, answer, scenario=scenario)
    [result] = execution.repeats
    assert result.cause == cause, result.detail
    if cause is Cause.FAULT_NOT_FIRED:
        assert "http_500@call2" in result.detail


@pytest.mark.parametrize("reported, cause", [
    ({("tool", 1)}, Cause.FAULT_UNRECOVERED),       # declared: its failure is the fault's
    ({("tool", 2)}, Cause.WRONG_STOP_REASON),       # not declared: the worker's word only
    ({("tool", 1), ("db", 1)}, Cause.FAULT_UNRECOVERED),
])
def test_only_a_declared_fault_makes_a_failure_the_faults(make_lane, tmp_path, reported,
                                                          cause):
    scenario = Scenario("a", "t", expect=Expectations(stop_reason="accepted"),
                        faults=(Fault("tool", 1),))
    answer = dataclasses.replace(PASSING, faults_fired=frozenset(reported))
    _, _, execution = run(make_lane, tmp_path, answer, scenario=scenario)
    [result] = execution.repeats
    assert result.cause == cause, result.detail
    if cause is Cause.FAULT_UNRECOVERED:
        assert "the worker injected tool#1;" in result.detail and "db#1" not in result.detail


def test_the_document_keeps_each_repeats_view_and_the_scenarios_totals(make_lane, tmp_path):
    # Only the provider's usage is a cost: the other repeat's (estimated) tokens are not in it.
    other = ModelSeen(calls=1, turns=1, retries=0, prompt_tokens=7, completion_tokens=2,
                      cost=TokenCost("provider", 7, 2, calls=1, clamped=1))
    plan, _, execution = run(make_lane, tmp_path, dataclasses.replace(PASSING, model=SEEN),
                             dataclasses.replace(PASSING, model=other), repeats=2)
    document = build_document(plan, execution, status="complete",
                              started_at=datetime.now(timezone.utc), finished_at=None,
                              harness_peak_rss_mb=1.0)
    [scenario] = document.scenarios
    assert scenario.model == ModelTotals(repeats=2, calls=4, retries=1, tokens=43,
                                         cost=TokenTotals("provider", 7, 2, 1, clamped=1))
    assert sorted(r.model["calls"] for r in scenario.repeats) == [1, 3]
    assert {tuple(r.model) for r in scenario.repeats} == {
        ("calls", "turns", "retries", "prompt_tokens", "completion_tokens", "faults", "cost")}


def test_a_lane_without_model_keeps_no_view(make_lane, tmp_path):
    plan = build_plan(make_lane(scenarios=(Scenario("a", "t"),)), "run-1", repeats=1, seed=5)
    execution = execute(plan, tmp_path, Redactor(), runner=ScriptedRunner(PASSING, PASSING),
                        environ={"PATH": "/bin"})
    document = build_document(plan, execution, status="complete",
                              started_at=datetime.now(timezone.utc), finished_at=None,
                              harness_peak_rss_mb=1.0)
    [scenario] = document.scenarios
    assert scenario.model is None and scenario.repeats[0].model is None


def test_a_proxy_without_alks_key_voids_the_run_before_anything_starts(make_lane, tmp_path):
    setup = ModelSetup("proxy", upstream="http://127.0.0.1:9/v1", key_env="ALK_UPSTREAM_KEY")
    plan = build_plan(lane_of(make_lane, Scenario("a", "t"), setup=setup), "run-1", repeats=1,
                      seed=5)
    runner = ScriptedRunner()
    execution = execute(plan, tmp_path, Redactor(), runner=runner, environ={"PATH": "/bin"})
    assert execution.void is not None and execution.void.cause == Cause.ENV_MISSING
    assert "model.key_env names ALK_UPSTREAM_KEY" in execution.void.detail
    assert runner.requests == []


def test_a_cassette_that_cannot_be_read_voids_the_run_saying_where(make_lane, tmp_path):
    cassette = tmp_path / "broken.jsonl"
    cassette.write_text('{"api": "chat"}\n')
    setup = ModelSetup("replay", cassette=cassette)
    plan = build_plan(lane_of(make_lane, Scenario("a", "t"), setup=setup), "run-1", repeats=1,
                      seed=5)
    runner = ScriptedRunner()
    execution = execute(plan, tmp_path, Redactor(), runner=runner, environ={"PATH": "/bin"})
    assert execution.void is not None and execution.void.cause == Cause.HARNESS_ERROR
    assert execution.void.detail.startswith(
        f"the model gateway could not start: {cassette} line 1: 'request' must be an object")
    assert runner.requests == []


def test_a_recording_whose_folder_cannot_be_made_is_the_lanes_error(make_lane, tmp_path):
    (tmp_path / "taken").write_text("")  # a file where the cassette's folder would be
    setup = ModelSetup("proxy", name="m", upstream="http://127.0.0.1:9/v1", key_env="K",
                       record=tmp_path / "taken" / "run.jsonl")
    lane = lane_of(make_lane, Scenario("a", "t"), setup=setup)
    runner = ScriptedRunner()
    with pytest.raises(LaneError) as caught:
        execute(build_plan(lane, "run-1", repeats=1, seed=5), tmp_path, Redactor(),
                runner=runner, environ={"PATH": "/bin", "K": "key"})
    assert str(caught.value).startswith(f"{lane.path}: model.record: cannot record the "
                                        f"cassette {tmp_path}/taken/run.jsonl (File exists")
    assert runner.requests == []


def test_a_run_void_before_it_starts_leaves_the_recorded_cassette_whole(make_lane, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(proxy, "first_check", lambda gateway: ("upstream", "nothing answered"))
    cassette = tmp_path / "cassettes" / "run.jsonl"
    cassette.parent.mkdir()
    cassette.write_text("the calls recorded last time\n")
    setup = ModelSetup("proxy", name="m", upstream="http://127.0.0.1:9/v1", key_env="K",
                       record=cassette)
    plan = build_plan(lane_of(make_lane, Scenario("a", "t"), setup=setup), "run-1", repeats=1,
                      seed=5)
    execution = execute(plan, tmp_path, Redactor(), runner=ScriptedRunner(),
                        environ={"PATH": "/bin", "K": "key"})
    assert execution.void is not None and execution.void.cause == Cause.PROVIDER_UNAVAILABLE
    assert cassette.read_text() == "the calls recorded last time\n"
    assert [p.name for p in cassette.parent.iterdir()] == ["run.jsonl"]


def test_the_gateway_holds_alks_key_and_the_runs_redactor(make_lane, tmp_path, monkeypatch):
    """In proxy mode the gateway reads the key from alk's own environment, and redacts with
    the run's redactor (which holds that key)."""
    monkeypatch.setattr(proxy, "first_check", lambda gateway: None)  # no upstream here
    key = "sk-upstream-0123456789abcdef"
    setup = ModelSetup("proxy", upstream="http://127.0.0.1:9/v1", key_env="ALK_UPSTREAM_KEY")
    plan = build_plan(lane_of(make_lane, Scenario("a", "t"), setup=setup), "run-1", repeats=1,
                      seed=5)
    runner = ScriptedRunner(PASSING, PASSING)
    execute(plan, tmp_path, Redactor([key]), runner=runner,
            environ={"PATH": "/bin", "ALK_UPSTREAM_KEY": key})
    gateway = runner.requests[1].gateway.gateway
    assert gateway.upstream_key == key
    assert key not in gateway.redactor.redact(f"Bearer {key}")
    assert key not in json.dumps(runner.requests[1].start)


def test_model_calls_is_checked_beside_the_other_expectations(make_lane, tmp_path):
    scenario = Scenario("a", "t", expect=Expectations(output_equals="hi", model_calls=(3, 3)),
                        script=SCRIPT)
    answer = dataclasses.replace(PASSING, model=SEEN)
    _, _, execution = run(make_lane, tmp_path, answer, scenario=scenario)
    [result] = execution.repeats
    assert [c["name"] for c in checks(tmp_path, result)] == ["output_equals", "model_calls"]


def test_worker_and_wire_faults_never_fired_are_named_together(make_lane, tmp_path):
    scenario = Scenario("a", "t", expect=Expectations(output_equals="hi"), script=SCRIPT,
                        faults=(Fault("tool", 1),), wire_faults=(WireFault(2, "http_500"),))
    answer = dataclasses.replace(PASSING, model=dataclasses.replace(SEEN, faults_fired=()))
    _, _, execution = run(make_lane, tmp_path, answer, scenario=scenario)
    [result] = execution.repeats
    assert result.cause == Cause.FAULT_NOT_FIRED
    assert "tool#1, http_500@call2" in result.detail


def test_without_a_network_the_gateway_listens_at_its_fixed_port_in_the_namespace(make_lane,
                                                                                    tmp_path):
    from alk.gateway.server import NAMESPACE_PORT
    from alk.runner.isolation import PROCESS_GROUP_ONLY, Network

    class Offline(ScriptedRunner):
        isolation = dataclasses.replace(PROCESS_GROUP_ONLY, networks=(Network.NONE,))

    scenario = Scenario("a", "t", expect=Expectations(output_equals="hi"), script=SCRIPT)
    plan = build_plan(lane_of(make_lane, scenario), "run-1", repeats=1, seed=5)
    runner = Offline(PASSING, PASSING)
    execute(plan, tmp_path, Redactor(), runner=runner, environ={"PATH": "/bin"})
    repeat = runner.requests[1]
    url = f"http://127.0.0.1:{NAMESPACE_PORT}/v1"
    assert (repeat.network, repeat.gateway_port) == (Network.NONE, NAMESPACE_PORT)
    assert repeat.start["model"]["base_url"] == repeat.env["OPENAI_BASE_URL"] == url
    assert repeat.gateway.port is None  # nothing listens on alk's own loopback


# --- the run's token budget ---------------------------------------------------------------------


def spending(tokens: int):
    """A passing repeat whose calls the provider counted as `tokens` (a replayed cost)."""
    return dataclasses.replace(PASSING, model=ModelSeen(
        calls=1, turns=1, mode="replay", cost=TokenCost("replayed", tokens - 1, 1, calls=1)))


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_run_budget_starts_no_repeat_once_the_tokens_reach_it(make_lane, tmp_path, jobs):
    cassette = tmp_path / "empty.jsonl"
    cassette.write_text("")
    setup = ModelSetup("replay", cassette=cassette, max_tokens=TokenBudget(run=25))
    plan = build_plan(lane_of(make_lane, Scenario("a", "t"), Scenario("b", "t"), setup=setup),
                      "run-1", repeats=4, seed=5)
    # Each repeat is counted before the next is taken: with -j 1, the third (30 ≥ 25) is
    # the last; with -j 2 the one already running beside it may finish too (whether it had
    # begun is the machine's timing), and no other.
    execution = execute(plan, tmp_path, Redactor(), jobs=jobs, environ={"PATH": "/bin"},
                        runner=ScriptedRunner(PASSING, *[spending(10)] * 8))
    ran = len(execution.repeats)
    assert ran == 3 if jobs == 1 else ran in (3, 4)
    assert execution.interrupted
    assert execution.budget_spent == (
        f"stopped: token budget reached ({ran * 10} of max_tokens.run = 25 provider tokens) "
        f"after {ran} of 8 repeats; raise max_tokens.run, or resume (alk run --resume run-1) "
        "for another 25")
    document = build_document(plan, execution, status="interrupted",
                              started_at=datetime.now(timezone.utc), finished_at=None,
                              harness_peak_rss_mb=1.0)
    assert document.cost.stopped == execution.budget_spent
    assert document.cost.totals == TokenTotals("replayed", ran * 9, ran, ran)
    assert (document.cost.max_tokens_run, document.cost.max_tokens_repeat) == (25, None)


def test_a_resumed_run_gets_a_budget_of_its_own(make_lane, tmp_path):
    cassette = tmp_path / "empty.jsonl"
    cassette.write_text("")
    setup = ModelSetup("replay", cassette=cassette, max_tokens=TokenBudget(run=25))
    plan = build_plan(lane_of(make_lane, Scenario("a", "t"), setup=setup), "run-1",
                      repeats=5, seed=5)
    first = execute(plan, tmp_path, Redactor(), environ={"PATH": "/bin"},
                    runner=ScriptedRunner(PASSING, *[spending(10)] * 5))
    assert len(first.repeats) == 3 and first.interrupted
    resumed = execute(plan, tmp_path, Redactor(), environ={"PATH": "/bin"}, done=first.repeats,
                      runner=ScriptedRunner(PASSING, *[spending(10)] * 2))
    assert len(resumed.repeats) == 5
    assert not resumed.interrupted and resumed.budget_spent is None
