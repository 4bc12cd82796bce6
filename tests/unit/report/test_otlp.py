"""A repeat as an OpenTelemetry trace (alk.report.otlp), from hand-made transcripts: the spans'
shape and clock, the verdict as status, the GenAI names checked against the OpenTelemetry
project's own list of them, OTLP/JSON's hex ids, and the bounds a hostile transcript meets."""

from __future__ import annotations

import base64
import json
import socket

import pytest
from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv

from alk.errors import UsageError
from alk.report import otlp
from alk.report.otlp import spans as otlp_spans
from tests.helpers.results import rep

SPAWN_AT = 1_800_000_000.0  # the wall clock the spawn event gives


def _event(t, channel, type, payload, source="harness"):
    return {"seq": 0, "t": t, "source": source, "channel": channel, "type": type,
            "payload": payload}


def _transcript(*middle):
    return [_event(0.5, "harness", "spawn", {"pid": 7, "unix_time": SPAWN_AT + 0.5}),
            _event(0.6, "harness", "preflight", {"framework": "fw", "version": "1.0"}),
            *middle,
            _event(3.0, "harness", "exit", {"exit_code": 0, "signal": None}),
            _event(3.1, "harness", "check", {"name": "stop_reason", "ok": True})]


CALL = _event(1.25, "model", "call", {"call": 1, "api": "messages", "status": 200, "ms": 250.0,
                                      "model": "claude-x", "fault": None,
                                      "tokens": {"prompt": 11, "completion": 3}})
TOOL = [_event(1.5, "tool", "call", {"name": "write_report", "args": {"order": "742"}}, "worker"),
        _event(1.75, "tool", "result", {"name": "write_report", "ok": False, "error": "disk full"},
               "worker")]


def _attrs(span: Span) -> dict:
    out = {}
    for item in span.attributes:
        kind = item.value.WhichOneof("value")
        out[item.key] = getattr(item.value, kind)
    return out


def _trace(events, outcome="pass", cause=None):
    entry = rep(outcome, scenario="nominal", repeat=3, cause=cause, duration=2.9)
    return otlp.repeat_trace("20261203-000000-abcdef", "lane", entry, events,
                             "2026-12-03T00:00:00+00:00", intact=True)


def test_a_repeat_is_a_root_an_attempt_and_a_span_per_call_on_the_repeats_clock():
    events = _transcript(CALL, *TOOL)
    root, attempt, chat, tool = _trace(events).spans
    assert [s.name for s in (root, attempt, chat, tool)] == [
        "invoke_agent lane", "alk.attempt", "chat claude-x", "execute_tool write_report"]
    assert attempt.parent_span_id == root.span_id
    assert chat.parent_span_id == tool.parent_span_id == attempt.span_id
    assert chat.kind == Span.SPAN_KIND_CLIENT
    # t=0 is the spawn's wall clock less its t; a model call ends at its t and took its ms.
    zero = round(SPAWN_AT * 1e9)
    assert root.start_time_unix_nano == zero
    # The root ends at the transcript's last event, which comes after the record's duration_s.
    assert root.end_time_unix_nano == zero + round(events[-1]["t"] * 1e9)
    assert (chat.start_time_unix_nano, chat.end_time_unix_nano) == (zero + 1_000_000_000,
                                                                    zero + 1_250_000_000)
    assert (tool.start_time_unix_nano, tool.end_time_unix_nano) == (zero + 1_500_000_000,
                                                                    zero + 1_750_000_000)
    assert _attrs(chat)["gen_ai.provider.name"] == "anthropic"
    assert _attrs(chat)["gen_ai.usage.input_tokens"] == 11
    assert _attrs(tool)["gen_ai.tool.call.arguments"] == '{"order": "742"}'
    assert _attrs(tool)["error.type"] == "tool_error"
    assert tool.status.code == Status.STATUS_CODE_ERROR
    assert _attrs(root)["alk.time_anchor"] == "spawn"
    assert [e.name for e in root.events] == ["alk.check"]


def test_a_transcript_with_no_wall_clock_is_placed_at_the_runs_start():
    events = [dict(e, payload={"pid": 7}) if e["type"] == "spawn" else e
              for e in _transcript(CALL)]
    root = _trace(events).spans[0]
    assert _attrs(root)["alk.time_anchor"] == "run_start"
    assert root.start_time_unix_nano == 1_796_256_000 * 10**9  # 2026-12-03T00:00:00Z


@pytest.mark.parametrize("outcome, cause, code", [
    ("pass", "passed", Status.STATUS_CODE_OK),
    ("framework_runtime", "effect_repeated", Status.STATUS_CODE_ERROR),
    ("agent", "wrong_output", Status.STATUS_CODE_ERROR),
    ("lane_infra", "spawn_failed", Status.STATUS_CODE_UNSET)])  # void: never scored
def test_the_verdict_is_the_root_spans_status(outcome, cause, code):
    root = _trace(_transcript(), outcome, cause).spans[0]
    assert root.status.code == code
    if outcome != "pass":
        assert _attrs(root)["alk.layer"] == outcome
        # A void repeat is no error to a viewer: it was never scored.
        assert _attrs(root).get("error.type") == (None if outcome == "lane_infra" else cause)


def test_every_gen_ai_name_is_one_the_conventions_define():
    """Against opentelemetry-semantic-conventions' own constants, not a list of ours."""
    defined = {getattr(semconv, name) for name in dir(semconv) if name.startswith("GEN_AI_")}
    operations = {v.value for v in semconv.GenAiOperationNameValues}
    providers = {v.value for v in semconv.GenAiProviderNameValues}
    apis = [dict(CALL, payload={**CALL["payload"], "api": api})
            for api in ("chat", "responses", "messages", "gemini")]
    spans = _trace(_transcript(*apis, *TOOL)).spans
    used = {key for span in spans for key in _attrs(span) if key.startswith("gen_ai.")}
    assert used and used <= defined
    assert {_attrs(s).get("gen_ai.operation.name") for s in spans} - {None} == operations & {
        "invoke_agent", "chat", "generate_content", "execute_tool"}
    assert {_attrs(s)["gen_ai.provider.name"] for s in spans
            if "gen_ai.provider.name" in _attrs(s)} <= providers


def test_a_kill_and_resume_makes_two_attempts_with_the_kill_on_the_first():
    events = _transcript(
        _event(1.0, "harness", "kill_at", {"channel": "tool", "type": "result"}),
        _event(1.1, "harness", "kill", {"signal": "SIGKILL", "group": True}),
        _event(1.2, "harness", "exit", {"exit_code": None, "signal": 9}),
        _event(1.3, "harness", "restart", {"attempt": 2, "resume": True}),
        _event(1.4, "harness", "spawn", {"pid": 8, "unix_time": SPAWN_AT + 1.4}))
    spans = _trace(events).spans
    first, second = [s for s in spans if s.name == "alk.attempt"]
    assert [e.name for e in first.events] == ["alk.kill_at", "alk.kill"]
    assert _attrs(first)["alk.signal"] == 9 and _attrs(second)["alk.attempt"] == 2
    assert "alk.restart" in [e.name for e in spans[0].events]


def test_a_flood_of_tool_calls_is_cut_at_the_bound_and_counted():
    flood = [_event(1.0, "tool", "call", {"name": f"t{i}", "args": {}}, "worker")
             for i in range(otlp_spans.MAX_SPANS + 500)]
    checks = [_event(2.0, "harness", "check", {"name": str(i)})
              for i in range(otlp_spans.MAX_EVENTS + 7)]
    trace = _trace(_transcript(*flood, *checks))
    assert len(trace.spans) == otlp_spans.MAX_SPANS  # the root among them
    assert trace.dropped_spans == 500 + 2  # the flood past the bound; the attempt is kept
    assert trace.dropped_events == 7 + 1  # the transcript's own check past the bound too
    assert _attrs(trace.spans[0])["alk.dropped_spans"] == trace.dropped_spans


def test_a_long_or_hostile_value_is_cut_to_the_bound_and_never_breaks_the_trace():
    huge = "é" * otlp_spans.MAX_TEXT_BYTES
    events = _transcript(
        _event(1.0, "tool", "call", {"name": huge, "args": {"x": huge}}, "worker"),
        _event(-5, "model", "call", "not a payload"),
        _event("soon", "harness", "violation", {"nested": {"deep": [huge]}}))
    spans = _trace(events).spans
    for span in spans:
        for value in _attrs(span).values():
            if isinstance(value, str):
                assert len(value.encode()) <= otlp_spans.MAX_TEXT_BYTES
        assert span.end_time_unix_nano >= span.start_time_unix_nano


def test_otlp_json_writes_ids_as_hex_and_reads_back_as_the_same_request():
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    scope.spans.extend(_trace(_transcript(CALL)).spans)
    line = otlp.json_line(request)
    document = json.loads(line)
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert spans[0]["traceId"] == scope.spans[0].trace_id.hex()
    assert spans[1]["parentSpanId"] == scope.spans[0].span_id.hex()
    assert spans[0]["kind"] == Span.SPAN_KIND_INTERNAL  # enums as integers
    # Undo the one difference from protobuf's JSON mapping: the same message comes back.
    for span in spans:
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    assert Parse(json.dumps(document), ExportTraceServiceRequest()) == request


def test_the_same_repeat_exports_the_same_ids_twice():
    one, two = _trace(_transcript(CALL)), _trace(_transcript(CALL))
    assert [s.SerializeToString() for s in one.spans] == [s.SerializeToString()
                                                          for s in two.spans]


@pytest.mark.parametrize("given, url", [("http://c:4318", "http://c:4318/v1/traces"),
                                        ("http://c:4318/", "http://c:4318/v1/traces"),
                                        ("https://c/v1/traces", "https://c/v1/traces")])
def test_a_collectors_address_gets_the_traces_path(given, url):
    assert otlp.endpoint_url(given) == url


def test_an_endpoint_that_is_no_url_or_not_there_is_a_clear_error():
    with pytest.raises(UsageError, match="expected an http:// or https:// URL"):
        otlp.endpoint_url("localhost:4318")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(UsageError, match=f"127.0.0.1:{port}/v1/traces: cannot send"):
        otlp.post(f"http://127.0.0.1:{port}/v1/traces", [ExportTraceServiceRequest()])


def test_a_workers_line_on_the_model_channel_is_no_model_call():
    """Only what alk wrote as its own (source harness) is a model span: a worker may write on
    the model channel, and a forged call with its tokens must not pass for the gateway's."""
    forged = dict(CALL, source="worker", payload={**CALL["payload"], "tokens": {"prompt": 999}})
    spans = _trace(_transcript(forged)).spans
    assert [s.name for s in spans] == ["invoke_agent lane", "alk.attempt"]


def test_alks_own_tool_calls_are_paired_by_number_and_said_to_be_alks():
    call = _event(1.0, "tool", "call", {"call": 1, "name": "lookup_order", "args": '{"o": 1}'})
    result = _event(1.5, "tool", "result", {"call": 1, "name": "lookup_order", "ok": True,
                                              "result": "open"})
    _, _, tool = _trace(_transcript(call, result)).spans
    assert tool.end_time_unix_nano - tool.start_time_unix_nano == 500_000_000
    assert _attrs(tool)["alk.observed_by"] == "harness"
    assert _attrs(tool)["gen_ai.tool.call.result"] == "open"


def test_a_flood_of_results_answering_nothing_costs_no_more_than_its_lines():
    """Results are matched to their call at once (a queue a name), not by a scan."""
    names = 20_000
    calls = [_event(1.0, "tool", "call", {"name": f"t{i}"}, "worker") for i in range(names)]
    results = [_event(2.0, "tool", "result", {"name": "none", "ok": True}, "worker")] * names
    trace = _trace(_transcript(*calls, *results))
    assert len(trace.spans) == otlp_spans.MAX_SPANS


def test_a_trace_is_bounded_in_bytes_too():
    big = {"x": "y" * (otlp_spans.MAX_TEXT_BYTES - 20)}
    calls = [e for i in range(otlp_spans.MAX_SPANS) for e in (
        _event(1.0, "tool", "call", {"name": "t", "args": big}, "worker"),
        _event(1.1, "tool", "result", {"name": "t", "ok": True, "output": big}, "worker"))]
    trace = _trace(_transcript(*calls))
    size = sum(span.ByteSize() for span in trace.spans)
    assert trace.dropped_spans and size < otlp_spans.MAX_TRACE_BYTES + 64 * 1024


@pytest.mark.parametrize("t", [float("inf"), 1e300, 1e11, -1.0, "soon", None, True])
def test_a_changed_transcripts_times_never_break_the_export(t):
    events = [dict(e, t=t) for e in _transcript(CALL, *TOOL)]
    events[0] = dict(events[0], payload={"pid": 7, "unix_time": t})
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.extend(_trace(events).spans)
    json.loads(otlp.json_line(request))
    request.SerializeToString()


def test_the_attempts_gateway_key_is_masked_wherever_a_worker_echoed_it():
    key = "alk-Qm3kP9xZ2vL7wR4tN8yB5cH1"
    start = _event(0.55, "harness", "start", {"model": {"api_key": key}})
    echo = _event(1.5, "tool", "call", {"name": "lookup_order", "args": {"k": key}}, "worker")
    spans = _trace(_transcript(start, echo)).spans
    assert key not in "".join(str(span) for span in spans)
    assert "[REDACTED]" in _attrs(spans[2])["gen_ai.tool.call.arguments"]
