"""alk's model gateway through real processes: a worker that is nothing but the `openai` package's
client, in alk's sandbox with no network, reaches the gateway and nothing else; every wire fault
hits the client's real HTTP stack; sampled turns vary by seed and reproduce with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.gateway_runs import (
    EXPECT,
    SCRIPT,
    lane_file,
    model_calls,
    needs_offline,
    run,
    scenario,
)

pytest.importorskip("openai")

def resumed_calls(tmp_path: Path, repeat: dict) -> list[dict]:
    """The model calls of the attempts after alk's first restart of the worker. Counted from
    the restart, not from the killed attempt's calls: the kill lands while the worker goes
    on, and it may have asked for one more turn by then."""
    events = [json.loads(line) for line in
              (tmp_path / repeat["transcript"]).read_text().splitlines()]
    restart = next(i for i, e in enumerate(events)
                   if e["source"] == "harness" and e["type"] == "restart")
    return [e["payload"] for e in events[restart:]
            if e["source"] == "harness" and e["channel"] == "model" and e["type"] == "call"]


@needs_offline
def test_the_openai_client_passes_with_no_network_and_the_harness_records_its_calls(tmp_path):
    document = run(tmp_path, lane_file(tmp_path, f"""
[[scenarios]]
id = "chat"
task = "Prepare the report for order 742"
{SCRIPT}
{EXPECT}
model_calls = 3

[[scenarios]]
id = "responses-stream"
task = "Prepare the report for order 742"
input = {{ api = "responses", stream = true }}
{SCRIPT}
{EXPECT}
model_calls = 3
"""), "-n", "1")
    for sid in ("chat", "responses-stream"):
        [repeat] = scenario(document, sid)["repeats"]
        assert (repeat["outcome"], repeat["network"]) == ("pass", "none"), repeat["detail"]
        calls = model_calls(tmp_path, repeat)
        assert [(c["call"], c["status"], c["tool_calls"]) for c in calls] == [
            (1, 200, ["lookup_order"]), (2, 200, ["write_report"]), (3, 200, [])]
        assert calls[0]["stream"] is (sid == "responses-stream")
        assert all(c["tokens"]["prompt"] > 0 for c in calls)


@needs_offline
@pytest.mark.parametrize("network, filesystem", [("none", "workspace"), ("host", "sandbox")])
def test_the_gateway_is_reached_in_every_isolation(tmp_path, network, filesystem):
    """Without the sandbox, the namespace's loopback is down until alk's init brings it up;
    with the host's network, the gateway listens on alk's own loopback."""
    document = run(tmp_path, lane_file(tmp_path, f"""
[[scenarios]]
id = "chat"
task = "Prepare the report for order 742"
{SCRIPT}
{EXPECT}
model_calls = 3
""", network=network, filesystem=filesystem), "-n", "1")
    [repeat] = scenario(document, "chat")["repeats"]
    assert (repeat["outcome"], repeat["network"], repeat["filesystem"]) == (
        "pass", network, filesystem), repeat["detail"]


# kind (extra fields), the endpoint and streaming, and what the openai client (2 retries, a
# 0.5 s timeout) does: (outcome, cause, whether call 3 is the retry of call 2).
FAULTS = [
    ("http_429", "retry_after_s = 0.2", "chat", False, "pass", "passed", True),
    ("http_500", "", "chat", False, "pass", "passed", True),
    ("http_503", "", "responses", True, "pass", "passed", True),
    ("connection_reset", "", "chat", True, "pass", "passed", True),
    ("stall", "seconds = 1.0", "chat", False, "pass", "passed", True),
    ("truncated_stream", "", "responses", False, "pass", "passed", True),
    # A stream cut after its headers is not retried: the client raises mid-read.
    ("truncated_stream", "", "chat", True, "framework_runtime", "fault_unrecovered", False),
    ("malformed_json", "", "chat", False, "framework_runtime", "fault_unrecovered", False),
    ("bad_tool_args", "", "chat", False, "framework_runtime", "fault_unrecovered", False),
]


@needs_offline
def test_each_wire_fault_reaches_the_clients_real_http_stack(tmp_path):
    blocks = []
    for kind, extra, api, stream, *_ in FAULTS:
        fields = f", {extra}" if extra else ""
        blocks.append(f"""
[[scenarios]]
id = "{kind}-{api}-{'stream' if stream else 'whole'}"
task = "Prepare the report for order 742"
input = {{ api = "{api}", stream = {str(stream).lower()}, timeout_s = 0.5 }}
{SCRIPT}
wire_faults = [ {{ call = 2, kind = "{kind}"{fields} }} ]
{EXPECT}""")
    document = run(tmp_path, lane_file(tmp_path, "".join(blocks)), "-n", "1")
    for kind, _, api, stream, outcome, cause, retried in FAULTS:
        [repeat] = scenario(document, f"{kind}-{api}-{'stream' if stream else 'whole'}")[
            "repeats"]
        assert (repeat["outcome"], repeat["cause"]) == (outcome, cause), (kind, repeat["detail"])
        calls = model_calls(tmp_path, repeat)
        assert calls[1]["fault"] == kind and calls[1]["turn"] is None, (kind, calls)
        assert (len(calls) > 2 and calls[2]["retry"]) is retried, (kind, calls)
        if retried:
            # The fault used no turn: the retry got the turn it would have had.
            assert calls[2]["tool_calls"] == ["write_report"], (kind, calls)
        if cause == "fault_unrecovered":
            assert f"{kind}@call2" in repeat["detail"]


@needs_offline
def test_a_wire_fault_the_worker_never_triggers_voids_the_repeat(tmp_path):
    document = run(tmp_path, lane_file(tmp_path, f"""
[[scenarios]]
id = "late"
task = "Prepare the report for order 742"
{SCRIPT}
wire_faults = [ {{ call = 9, kind = "http_500" }} ]
{EXPECT}
"""), "-n", "1")
    [repeat] = scenario(document, "late")["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("lane_infra", "fault_not_fired")
    assert "http_500@call9" in repeat["detail"]


@needs_offline
def test_sampled_turns_vary_across_repeats_and_a_seed_reproduces_them(tmp_path):
    lane = lane_file(tmp_path, """
[[scenarios]]
id = "sampled"
task = "Prepare the report for order 742"
script = [ { tool = "lookup_order", args = { order = "742" } },
           { choices = [ { weight = 0.5, tool = "write_report", args = { order = "742" } },
                         { weight = 0.5, mistake = true, text = "I will not write it" } ] },
           { text = "Report for order 742 written" } ]
[scenarios.expect]
files = [ { path = "lab-output/effects.json", json_length = 1 } ]
""")
    first = run(tmp_path, lane, "-n", "8", "--seed", "11")
    second = run(tmp_path, lane, "-n", "8", "--seed", "11")

    def paths(document: dict) -> list[list[str]]:
        return [[f"{c['status']}:{','.join(c['tool_calls']) or 'text'}"
                 for c in model_calls(tmp_path, r)]
                for r in scenario(document, "sampled")["repeats"]]

    assert paths(first) == paths(second)
    assert len({tuple(p) for p in paths(first)}) == 2, paths(first)
    outcomes = {r["outcome"] for r in scenario(first, "sampled")["repeats"]}
    assert outcomes == {"pass", "agent"}


@needs_offline
def test_a_worker_claiming_model_turns_the_gateway_never_served_breaks_the_protocol(tmp_path):
    document = run(tmp_path, lane_file(tmp_path, f"""
[[scenarios]]
id = "claims"
task = "Prepare the report for order 742"
input = {{ claim_turns = 5 }}
{SCRIPT}
{EXPECT}
"""), "-n", "1")
    [repeat] = scenario(document, "claims")["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "protocol_violation")
    assert "unserved_model_turn" in repeat["detail"]


@needs_offline
@pytest.mark.parametrize("durable, kill", [
    (True, 'channel = "agent", type = "checkpoint", name = "write_report"'),
    (False, 'channel = "tool", type = "result", name = "write_report"')])
def test_a_resumed_attempt_is_answered_where_its_conversation_stands(tmp_path, durable, kill):
    """alk kills the worker after its report is written and checkpointed; a worker that kept
    the conversation resumes it and the gateway answers its next turn (the final text); one
    that starts over is answered from the first turn, and writes again."""
    document = run(tmp_path, lane_file(tmp_path, f"""
[[scenarios]]
id = "resume"
task = "Prepare the report for order 742"
input = {{ durable = {str(durable).lower()} }}
{SCRIPT}
kill_at = {{ {kill} }}
[scenarios.expect]
stop_reason = "accepted"
files = [ {{ path = "lab-output/effects.json", json_length = 1 }} ]
"""), "-n", "1")
    [repeat] = scenario(document, "resume")["repeats"]
    assert repeat["attempts"] == 2
    resumed = resumed_calls(tmp_path, repeat)
    if durable:
        assert repeat["outcome"] == "pass", repeat["detail"]
        assert [(c["call"], c["turn"]) for c in resumed] == [(1, 2)]
    else:
        assert repeat["cause"] == "effect_repeated" and "got 2" in repeat["detail"]
        assert [c["turn"] for c in resumed] == [0, 1, 2]


@needs_offline
def test_an_adaptive_run_stops_a_scripted_scenario_early_and_samples_a_sampled_one_on(tmp_path):
    """`--repeats auto` through the CLI and the openai client: the fully scripted scenario is
    settled by 9 agreeing repeats at --ci-width 0.3 (3.8415/12.8415 = 0.299; rounds of 5: at
    10); the one whose turns are drawn from weighted choices is meant to vary, so both
    outcomes do not settle it and it runs on (a rate near 0.5 needs about 40 repeats for an
    interval 0.3 wide: here the maximum, 15)."""
    lane = lane_file(tmp_path, f"""
[[scenarios]]
id = "fixed"
task = "Prepare the report for order 742"
{SCRIPT}
{EXPECT}

[[scenarios]]
id = "sampled"
task = "Prepare the report for order 742"
script = [ {{ tool = "lookup_order", args = {{ order = "742" }} }},
           {{ choices = [ {{ weight = 0.5, tool = "write_report", args = {{ order = "742" }} }},
                         {{ weight = 0.5, mistake = true, text = "I will not write it" }} ] }},
           {{ text = "Report for order 742 written" }} ]
{EXPECT}
""")
    document = run(tmp_path, lane, "--repeats", "auto", "--max-repeats", "15", "--ci-width",
                   "0.3", "--seed", "3")
    assert document["settings"]["adaptive"] == {"max_repeats": 15, "ci_width": 0.3,
                                                "round_size": 5}
    fixed, sampled = scenario(document, "fixed"), scenario(document, "sampled")
    assert (fixed["stopped"], len(fixed["repeats"])) == ("ci_width", 10)
    assert fixed["stats"]["counts"]["requested"] == 10
    assert (sampled["stopped"], len(sampled["repeats"])) == ("max_repeats", 15)
    assert {r["outcome"] for r in sampled["repeats"]} == {"pass", "agent"}
