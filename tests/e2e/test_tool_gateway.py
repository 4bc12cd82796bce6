"""alk serves a lane's tools over MCP, through real processes: a worker with no network but the
gateway (tests/workers/mcp_tools.py: the openai client for the model, the official mcp client
for the tools) lists and calls them, alk runs them, writes their effects and records every call
itself, and each tool fault reaches the client as it would from a real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.gateway_runs import (
    CRASH_AFTER_EFFECT,
    EXPECT,
    SCRIPT,
    TOOLS,
    lane_file,
    model_calls,
    needs_offline,
    run,
    scenario,
)

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "workers" / "mcp_tools.py"

pytestmark = needs_offline
pytest.importorskip("mcp")


def _lane(tmp_path: Path, scenarios: str) -> Path:
    return lane_file(tmp_path, TOOLS + scenarios, worker=WORKER, framework="mcp-client")


def _tool_events(tmp_path: Path, repeat: dict) -> list[dict]:
    events = [json.loads(line) for line in (tmp_path / repeat["transcript"]).read_text()
              .splitlines()]
    return [e for e in events if e["channel"] == "tool"]



def test_a_lanes_tools_are_served_by_alk_and_recorded_as_its_own(tmp_path):
    document = run(tmp_path, _lane(tmp_path, f"""
[[scenarios]]
id = "nominal"
task = "Prepare the report for order 742"
{SCRIPT}
{EXPECT}
"""), "-n", "1")
    [repeat] = scenario(document, "nominal")["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("pass", "passed"), repeat["detail"]
    assert repeat["network"] == "none"
    events = _tool_events(tmp_path, repeat)
    assert {e["source"] for e in events} == {"harness"}  # alk's record, not the worker's
    assert [(e["type"], e["payload"]["name"]) for e in events] == [
        ("call", "lookup_order"), ("result", "lookup_order"),
        ("call", "write_report"), ("result", "write_report")]
    assert json.loads(events[1]["payload"]["result"]) == {"order": "742", "status": "open"}
    assert json.loads(events[3]["payload"]["result"]) == {"written": True, "effects": 1}
    assert len(model_calls(tmp_path, repeat)) == 3
    # The trajectory is alk's: the model's calls, and the tool calls it served between them.
    assert repeat["trajectory"] == ["200:lookup_order", "tool:lookup_order:ok",
                                    "200:write_report", "tool:write_report:ok", "200:text"]


@pytest.mark.parametrize("kind, fields, seen_by_client", [
    ("error", "", "failed (an injected fault)"),
    ("timeout", "", "timed out"),
    ("slow", ", seconds = 0.5", '"written": true'),
    ("malformed", "", "Error"),
    ("duplicate", "", '"effects": 2'),
])
def test_each_tool_fault_reaches_the_client(tmp_path, kind, fields, seen_by_client):
    document = run(tmp_path, _lane(tmp_path, f"""
[[scenarios]]
id = "faulted"
task = "Prepare the report for order 742"
input = {{ tool_timeout_s = 2, report = "all" }}
{SCRIPT}
tool_faults = [ {{ tool = "write_report", call = 1, kind = "{kind}"{fields} }} ]
[scenarios.expect]
stop_reason = "accepted"
"""), "-n", "1")
    [repeat] = scenario(document, "faulted")["repeats"]
    events = _tool_events(tmp_path, repeat)
    ours = [e for e in events if e["source"] == "harness" and e["payload"]["name"] ==
            "write_report"]
    assert ours[0]["type"] == "call" and ours[0]["payload"]["fault"] == f"{kind}@write_report#1"
    assert f"tool:write_report:{kind}" in repeat["trajectory"]
    # What the client made of it: its result event, as the worker reported it.
    [told] = [e["payload"]["output"] for e in events if e["source"] == "worker"
              and e["type"] == "result" and e["payload"]["name"] == "write_report"]
    assert seen_by_client in told, told
    answered = [e for e in ours if e["type"] == "result"]
    if kind == "timeout":
        assert answered == []  # alk never answered it
    else:
        [result] = answered
        assert result["payload"]["ok"] is (kind != "error")
    if kind == "slow":
        assert result["payload"]["ms"] >= 500  # alk held the answer back that long


def test_a_tool_result_alk_never_served_is_a_violation(tmp_path):
    document = run(tmp_path, _lane(tmp_path, f"""
[[scenarios]]
id = "claims"
task = "Prepare the report for order 742"
input = {{ report = "extra" }}
{SCRIPT}
{EXPECT}
"""), "-n", "1")
    [repeat] = scenario(document, "claims")["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "protocol_violation")
    assert "unserved_tool_call" in repeat["detail"] and repeat["violations"] == 1


def test_a_crash_after_the_effect_is_judged_from_alks_own_record(tmp_path):
    """The worker reports no tool call at all: the kill comes at alk's record of the effect,
    and the resumed attempt's second write is alk's observation too."""
    document = run(tmp_path, _lane(tmp_path, f"""
{CRASH_AFTER_EFFECT}"""), "-n", "1")
    [repeat] = scenario(document, "crash-after-effect")["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "effect_repeated")
    assert repeat["attempts"] == 2
    events = [json.loads(line) for line in (tmp_path / repeat["transcript"]).read_text()
              .splitlines()]
    assert not [e for e in events if e["source"] == "worker" and e["channel"] == "tool"]
    kill = next(i for i, e in enumerate(events) if e["type"] == "kill_at")
    assert (events[kill - 1]["source"], events[kill - 1]["channel"], events[kill - 1]["type"]) \
        == ("harness", "tool", "result")
    writes = [json.loads(e["payload"]["result"])["effects"] for e in events
              if e["source"] == "harness" and e["channel"] == "tool" and e["type"] == "result"
              and e["payload"]["name"] == "write_report"]
    assert writes == [1, 2]  # alk made the effect twice: once a attempt


def test_a_tool_fault_is_judged_as_a_wire_fault_is(tmp_path):
    """From alk's record: a fault the client never got past is fault_unrecovered, one the run
    never reached voids the repeat, and tool_calls counts the calls alk served (the worker
    reports none)."""
    document = run(tmp_path, _lane(tmp_path, f"""
[[scenarios]]
id = "hangs"
task = "Prepare the report for order 742"
input = {{ tool_timeout_s = 60 }}
{SCRIPT}
tool_faults = [ {{ tool = "write_report", call = 1, kind = "timeout" }} ]
[scenarios.expect]
stop_reason = "accepted"

[[scenarios]]
id = "never-reached"
task = "Prepare the report for order 742"
{SCRIPT}
tool_faults = [ {{ tool = "write_report", call = 3, kind = "error" }} ]
[scenarios.expect]
stop_reason = "accepted"
tool_calls = {{ lookup_order = 1, write_report = 1 }}
"""), "-n", "1", "--timeout", "8")
    [hangs] = scenario(document, "hangs")["repeats"]
    assert (hangs["outcome"], hangs["cause"]) == ("framework_runtime", "fault_unrecovered")
    assert "timeout@write_report#1" in hangs["detail"]
    [skipped] = scenario(document, "never-reached")["repeats"]
    assert (skipped["outcome"], skipped["cause"]) == ("lane_infra", "fault_not_fired")
    assert "error@write_report#3" in skipped["detail"]
