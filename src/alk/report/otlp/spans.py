"""One repeat as one OpenTelemetry trace, from its saved record and transcript: a root span for
the repeat, a span per attempt (a kill and resume makes two), and under each attempt a span per
model call the gateway served and per tool call the worker reported, with faults, kills and the
harness's checks as span events.

The names follow the GenAI semantic conventions (`SEMCONV_VERSION`, still in Development):
`invoke_agent` for the repeat, `chat`/`generate_content` for a model call, `execute_tool` for a
tool call. Everything else alk knows is under `alk.*`. A span holds only bounded scalars taken
from the transcript, which alk redacted when it wrote it; no payload is exported whole (the
start line's gateway key, for one, never is).
"""

from __future__ import annotations

import collections
import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from alk.records import Outcome, RepeatResult
from alk.redaction import Redactor

SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
# A hostile worker may fill its transcript (up to its lane's cap) with tool events: a trace
# keeps the first spans and events up to these bounds and says how many it left out.
MAX_SPANS = 1_000
MAX_EVENTS = 128
MAX_TEXT_BYTES = 4_096
# A trace's spans in bytes, about: past it, spans are left out as past MAX_SPANS (a collector
# refuses a large request; the Collector's default limit is 20 MiB).
MAX_TRACE_BYTES = 4 * 1024 * 1024
# Times from a transcript that may have been changed: past this many seconds (the year 2096;
# a uint64 of nanoseconds holds twice it, an anchor and an offset) a value is taken as none,
# rather than a number protobuf cannot hold.
MAX_SECONDS = 4e9

# A model call's wire format, as the gateway names it, and its provider and operation names.
_PROVIDERS = {"chat": ("openai", "chat"), "responses": ("openai", "chat"),
              "messages": ("anthropic", "chat"), "gemini": ("gcp.gemini", "generate_content")}
# Harness events that shape the spans themselves rather than becoming span events.
_STRUCTURAL = frozenset({"spawn", "hello", "start", "exit", "attribution"})


@dataclass
class _Attempt:
    span: Span
    # Tool calls not yet answered: the worker's by name (first in, first out), alk's own by
    # their call number.
    open_tools: dict[Any, collections.deque[Span]] = field(
        default_factory=lambda: collections.defaultdict(collections.deque))


@dataclass
class RepeatTrace:
    """The spans of one repeat, root first, and what the bounds left out."""

    spans: list[Span]
    dropped_spans: int = 0
    dropped_events: int = 0


def repeat_trace(run_id: str, lane: str, entry: RepeatResult, events: Iterable[dict[str, Any]],
                 run_started: str, *, intact: bool) -> RepeatTrace:
    """The trace of one repeat. `events` are its transcript's (none when it is missing);
    `run_started` (the run's ISO time) anchors the clock of a transcript whose spawn event
    gives no wall time; `intact`: the transcript still hashes to the recorded sha256."""
    trace_id = hashlib.sha256(f"{run_id}/{entry.scenario}/{entry.repeat}".encode()).digest()[:16]
    builder = _Builder(trace_id)
    root = builder.span(f"invoke_agent {lane}", None, Span.SPAN_KIND_INTERNAL)
    _attributes(root, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": lane,
        "alk.run_id": run_id, "alk.scenario": entry.scenario, "alk.repeat": entry.repeat,
        "alk.seed": entry.seed, "alk.outcome": entry.outcome.value, "alk.cause": entry.cause,
        "alk.detail": entry.detail, "alk.attempts": entry.attempts,
        "alk.transcript": entry.transcript, "alk.transcript.intact": intact,
        "alk.trajectory": " > ".join(entry.trajectory)})
    _judged(root, entry)
    anchor: float | None = None
    attempt: _Attempt | None = None
    last_t = 0.0
    for event in events:
        t = _number(event.get("t"))
        last_t = max(last_t, t)
        kind, channel = event.get("type"), event.get("channel")
        # What alk wrote as its own (source harness) is told from what the worker said: a
        # worker's line on the model channel is no model call the gateway served.
        by_harness = event.get("source") == "harness"
        payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
        if kind == "start" and channel == "harness" and by_harness:
            model = payload.get("model") if isinstance(payload.get("model"), dict) else {}
            if isinstance(model.get("api_key"), str):  # the attempt's key, never exported
                builder.redactor = Redactor([*builder.keys, model["api_key"]])
                builder.keys.append(model["api_key"])
            continue
        if channel == "harness" and not by_harness:
            continue
        if kind == "spawn" and channel == "harness":
            if anchor is None:
                anchor = _number(payload.get("unix_time"), None)
                anchor = anchor - t if anchor is not None else None
            if attempt is not None:
                _end_attempt(builder, attempt, t)
            attempt = _Attempt(builder.span("alk.attempt", root, Span.SPAN_KIND_INTERNAL))
            attempt.span.start_time_unix_nano = _ns(t)
            _attributes(attempt.span, {"alk.attempt": builder.attempts,
                                       "process.pid": payload.get("pid")})
            continue
        parent = attempt.span if attempt is not None else root
        if channel == "model" and kind == "call" and by_harness:
            builder.model_call(parent, payload, t)
        elif channel == "tool" and attempt is not None:
            builder.tool_event(attempt, kind, payload, t, by_harness)
        elif channel == "harness" and kind == "exit" and attempt is not None:
            _attributes(attempt.span, {"process.exit.code": payload.get("exit_code"),
                                       "alk.signal": payload.get("signal"),
                                       "alk.timed_out": payload.get("timed_out")})
            _end_attempt(builder, attempt, t)
            attempt = None
        elif channel == "harness" and kind == "preflight" and attempt is not None:
            _attributes(attempt.span, {"alk.framework": payload.get("framework"),
                                       "alk.framework.version": payload.get("version")})
        elif channel == "harness" and kind not in _STRUCTURAL:
            builder.event(root if kind == "check" else parent, f"alk.{kind}", t, payload)
    if attempt is not None:
        _end_attempt(builder, attempt, last_t)
    root.start_time_unix_nano = 0
    root.end_time_unix_nano = _ns(max(last_t, _number(entry.duration_s)))
    _attributes(root, {"alk.time_anchor": "spawn" if anchor is not None else "run_start"})
    offset = anchor if anchor is not None else _iso_seconds(run_started)
    for span in builder.spans:
        if builder.keys:  # the attempts' keys, wherever a worker echoed them
            _redacted(span, builder.redactor)
        span.start_time_unix_nano += _ns(offset)
        span.end_time_unix_nano = max(span.end_time_unix_nano + _ns(offset),
                                      span.start_time_unix_nano)
        for item in span.events:
            item.time_unix_nano += _ns(offset)
    if builder.dropped_spans or builder.dropped_events:
        _attributes(root, {"alk.dropped_spans": builder.dropped_spans,
                           "alk.dropped_events": builder.dropped_events})
    return RepeatTrace(builder.spans, builder.dropped_spans, builder.dropped_events)


class _Builder:
    """Makes a trace's spans, with ids that depend on the repeat and the span's place alone:
    exporting a run twice gives the same ids, so a receiver sees one trace, not two."""

    def __init__(self, trace_id: bytes) -> None:
        self.trace_id = trace_id
        self.spans: list[Span] = []
        self.attempts = 0
        self.dropped_spans = self.dropped_events = 0
        self.redactor, self.keys = Redactor(), []  # the attempts' gateway keys
        self._scratch = Span()  # what a span past the bound is built into, then dropped
        self._bytes = 0  # of the spans before the last

    def span(self, name: str, parent: Span | None, kind: int) -> Span:
        if self.spans:
            self._bytes += self.spans[-1].ByteSize()
        if parent is not None and (len(self.spans) >= MAX_SPANS
                                   or self._bytes > MAX_TRACE_BYTES):
            self.dropped_spans += 1
            self._scratch.Clear()
            return self._scratch
        if name == "alk.attempt":
            self.attempts += 1
        index = len(self.spans)
        span = Span(trace_id=self.trace_id, name=_text(name), kind=kind,
                    span_id=hashlib.sha256(self.trace_id + index.to_bytes(4, "big")).digest()[:8])
        if parent is not None:
            span.parent_span_id = parent.span_id
        self.spans.append(span)
        return span

    def model_call(self, parent: Span, payload: dict[str, Any], t: float) -> None:
        provider, operation = _PROVIDERS.get(str(payload.get("api")), ("openai", "chat"))
        model = payload.get("model")
        span = self.span(f"{operation} {model}" if model else operation, parent,
                         Span.SPAN_KIND_CLIENT)
        took = _number(payload.get("ms")) / 1000
        span.start_time_unix_nano, span.end_time_unix_nano = _ns(max(t - took, 0.0)), _ns(t)
        tokens = payload.get("tokens") if isinstance(payload.get("tokens"), dict) else {}
        status, fault = payload.get("status"), payload.get("fault")
        _attributes(span, {
            "gen_ai.operation.name": operation, "gen_ai.provider.name": provider,
            "gen_ai.request.model": model, "gen_ai.usage.input_tokens": tokens.get("prompt"),
            "gen_ai.usage.output_tokens": tokens.get("completion"),
            "http.response.status_code": status, "alk.call": payload.get("call"),
            "alk.turn": payload.get("turn"), "alk.retry": payload.get("retry"),
            "alk.fault": fault, "alk.observed_by": "harness"})
        failed = fault or not isinstance(status, int) or status >= 400
        if failed:
            _attributes(span, {"error.type": str(fault or status)})
            span.status.code = Status.STATUS_CODE_ERROR
        if fault:
            self.event(span, "alk.fault", t, {"fault": fault})

    def tool_event(self, attempt: _Attempt, kind: Any, payload: dict[str, Any],
                   t: float, by_harness: bool) -> None:
        name = str(payload.get("name"))
        key = ("harness", payload.get("call")) if by_harness else ("worker", name)
        if kind == "call":
            span = self.span(f"execute_tool {name}", attempt.span, Span.SPAN_KIND_INTERNAL)
            if span is self._scratch:
                return
            span.start_time_unix_nano = span.end_time_unix_nano = _ns(t)
            # alk's own record of a tool it served, or the worker's word for one it ran.
            args = payload.get("args")
            _attributes(span, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                               "gen_ai.tool.call.arguments": args if isinstance(args, str)
                               else _json(args), "alk.fault": payload.get("fault"),
                               **({"alk.observed_by": "harness"} if by_harness else
                                  {"alk.reported_by": "worker"})})
            attempt.open_tools[key].append(span)
        elif kind == "result":
            waiting = attempt.open_tools.get(key)
            if not waiting:
                return
            span = waiting.popleft()
            span.end_time_unix_nano = _ns(t)
            ok = payload.get("ok") is True
            output = payload.get("result") if by_harness else payload.get(
                "output" if ok else "error")
            _attributes(span, {"gen_ai.tool.call.result":
                               output if isinstance(output, str) else _json(output)})
            if not ok:
                _attributes(span, {"error.type": "tool_error"})
                span.status.code = Status.STATUS_CODE_ERROR

    def event(self, span: Span, name: str, t: float, payload: dict[str, Any]) -> None:
        if len(span.events) >= MAX_EVENTS:
            self.dropped_events += 1
            return
        item = span.events.add(name=_text(name), time_unix_nano=_ns(t))
        scalars = {f"alk.{key}": value for key, value in list(payload.items())[:16]
                   if isinstance(key, str)}
        for key, value in scalars.items():
            if not isinstance(value, (str, int, float, bool)) and value is not None:
                scalars[key] = _json(value)
        item.attributes.extend(_key_values(scalars))


def _end_attempt(builder: _Builder, attempt: _Attempt, t: float) -> None:
    attempt.span.end_time_unix_nano = _ns(t)
    for waiting in attempt.open_tools.values():  # calls that were never answered
        for span in waiting:
            span.end_time_unix_nano = _ns(t)
            _attributes(span, {"alk.unanswered": True})
    attempt.open_tools.clear()


def _redacted(span: Span, redactor: Redactor) -> None:
    span.name = redactor.redact(span.name)
    for attributes in (span.attributes, *(item.attributes for item in span.events)):
        for item in attributes:
            if item.value.WhichOneof("value") == "string_value":
                item.value.string_value = redactor.redact(item.value.string_value)


def _judged(root: Span, entry: RepeatResult) -> None:
    """The verdict as the span's status: a failure is an error whose message names its cause;
    a void repeat (never scored) is left unset, and its layer says why."""
    if entry.outcome is Outcome.PASS:
        root.status.code = Status.STATUS_CODE_OK
        return
    _attributes(root, {"alk.layer": entry.outcome.value})
    if entry.outcome is not Outcome.LANE_INFRA:  # a void repeat is no error: never scored
        _attributes(root, {"error.type": entry.cause})
        root.status.code = Status.STATUS_CODE_ERROR
        root.status.message = _text(f"{entry.outcome.value}: {entry.cause}")


def _attributes(span: Span, values: dict[str, Any]) -> None:
    span.attributes.extend(_key_values(values))


def _key_values(values: dict[str, Any]) -> list[KeyValue]:
    """Scalars as OTLP attributes; None is left out (an attribute with no value is none)."""
    out = []
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            any_value = AnyValue(bool_value=value)
        elif isinstance(value, int) and -2**63 <= value < 2**63:
            any_value = AnyValue(int_value=value)
        elif isinstance(value, float):
            any_value = AnyValue(double_value=value)
        else:
            any_value = AnyValue(string_value=_text(str(value)))
        out.append(KeyValue(key=key, value=any_value))
    return out


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, default=str)


def _text(text: str) -> str:
    """Cut to MAX_TEXT_BYTES of UTF-8, on a character boundary."""
    data = text.encode("utf-8", "replace")
    if len(data) <= MAX_TEXT_BYTES:
        return text
    return data[:MAX_TEXT_BYTES - 3].decode("utf-8", "ignore") + "..."


def _number(value: Any, default: float | None = 0.0) -> Any:
    if (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        return float(value)
    return default


def _ns(seconds: float) -> int:
    return max(0, round(seconds * 1e9))


def _iso_seconds(text: str) -> float:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0
