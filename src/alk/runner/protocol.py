"""Protocol v1, the harness side: messages to the worker, and the checks on every line it writes.

Pure: bytes in, messages and violations out. `ProtocolState` follows one worker through the
handshake and the run, and keeps in bounded memory what attribution needs later.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Mapping

from alk.records import Violation
from alk.redaction import Redactor
from alk.worker import CHANNELS, PROTOCOL_VERSION

HARNESS_CHANNEL = "harness"
# Bounds on what a worker can make the harness remember, whatever it sends.
MAX_VIOLATIONS_KEPT = 20
MAX_TRAJECTORY_STEPS = 1_000
MAX_TOOL_NAMES = 1_000
# A longer tool name is kept as its head and a hash of the whole, so that names stay distinct
# while 1,000 names of 1 MiB each cannot fill the harness's memory or the result document.
MAX_TOOL_NAME_CHARS = 128
MAX_PATH_STEPS = 500
# Keys whose values differ from run to run by nature: left out of the normalized event path.
VOLATILE_KEYS = frozenset({"id", "ids", "run_id", "t", "ts", "time", "timestamp", "created",
                           "created_at", "duration", "duration_s", "elapsed", "elapsed_s",
                           "latency", "latency_ms", "pid", "seed", "deadline_s"})
EXCERPT_CHARS = 200


class Phase(StrEnum):
    AWAIT_READY = "await_ready"
    READY = "ready"  # framework_ready seen, start not yet sent
    STARTED = "started"
    ABORTED = "aborted"


def encode(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def hello_message(lane: str) -> dict[str, Any]:
    return {"type": "hello", "protocol": PROTOCOL_VERSION, "lane": lane}


def abort_message(reason: str) -> dict[str, Any]:
    return {"type": "abort", "reason": reason}


@dataclass(frozen=True, slots=True)
class WorkerEvent:
    channel: str
    type: str
    payload: dict[str, Any]


_NO_SECRETS = Redactor()


def decode_line(raw: bytes, cut: bool = False,
                redactor: Redactor = _NO_SECRETS) -> WorkerEvent | tuple[str, str]:
    """One stdout line → an event, or `(violation kind, detail)`. Details quote the line, with
    the lane's secrets redacted before the quote is cut (no prefix of a secret survives)."""
    if cut:
        return "line_too_long", f"line longer than the limit, cut: {_excerpt(raw, redactor)}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid_utf8", f"line is not UTF-8: {_excerpt(raw, redactor)}"
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return "not_json", f"line is not JSON: {_excerpt(raw, redactor)}"
    if not isinstance(message, dict):
        return "not_object", f"line is JSON but not an object: {_excerpt(raw, redactor)}"
    channel, kind, payload = message.get("channel"), message.get("type"), message.get("payload", {})
    if channel == HARNESS_CHANNEL:
        return "harness_channel", f"worker claimed the harness channel (type {kind!r}); ignored"
    if channel not in CHANNELS:
        return "unknown_channel", f"channel must be one of {', '.join(CHANNELS)}, got {channel!r}"
    if not isinstance(kind, str) or not kind:
        return "bad_type", f"'type' must be a non-empty string, got {kind!r}"
    if not isinstance(payload, dict):
        return "bad_payload", f"'payload' must be an object, got {type(payload).__name__}"
    return WorkerEvent(channel, kind, payload)


class ProtocolState:
    """Follows one worker's lines; remembers only bounded facts."""

    def __init__(self, workspace: str = "") -> None:
        # Each repeat's workspace has its own path; it must not make equal runs look different.
        self.workspace = workspace
        self.phase = Phase.AWAIT_READY
        self.ready: dict[str, Any] | None = None
        self.result: dict[str, Any] | None = None
        self.bad_result: str | None = None
        self.tool_calls: dict[str, int] = {}
        self.faults_fired: set[tuple[str, int]] = set()
        self.model_turns = 0  # `model/turn` events: scripted turns the framework consumed
        # The run's normalized event path: what happened, in order, without what differs by
        # nature (ids, times); equal paths mean the framework did the same thing.
        self.path_hash = hashlib.sha256()
        self.path: list[str] = []
        # Calls to names past MAX_TOOL_NAMES: not counted by name, but never forgotten, so that
        # flooding junk names cannot hide a call the lane forbids.
        self.uncounted_tool_calls = 0
        self.trajectory: list[str] = []
        self.violations: list[Violation] = []
        self.violation_count = 0
        self.lines = 0

    def violate(self, kind: str, detail: str) -> Violation:
        violation = Violation(kind, self.lines, detail)
        self.violation_count += 1
        if len(self.violations) < MAX_VIOLATIONS_KEPT:
            self.violations.append(violation)
        return violation

    def accept(self, decoded: WorkerEvent | tuple[str, str]) -> WorkerEvent | Violation:
        """Takes one decoded line; returns the event to record, or the violation it was."""
        self.lines += 1
        if isinstance(decoded, tuple):
            return self.violate(*decoded)
        event = decoded
        if event.channel == "framework" and event.type == "framework_ready":
            if self.phase is not Phase.AWAIT_READY:
                return self.violate("duplicate_ready", "framework_ready sent twice; ignored")
            self.ready = event.payload
            self.phase = Phase.READY
            return event
        if self.phase is Phase.AWAIT_READY:
            return self.violate("before_ready", f"{event.channel}/{event.type} before "
                                                "framework_ready; the first line must be it")
        if self.phase is not Phase.STARTED:
            return self.violate("before_start", f"{event.channel}/{event.type} before alk sent "
                                                "start; wait for start() first")
        self._follow(event)
        if event.channel == "model" and event.type == "turn":
            self.model_turns += 1
        if event.channel == "framework" and event.type == "fault":
            point, occurrence = event.payload.get("point"), event.payload.get("occurrence", 1)
            if isinstance(point, str) and isinstance(occurrence, int) and \
                    len(self.faults_fired) < MAX_TOOL_NAMES:
                self.faults_fired.add((point, occurrence))
        elif event.channel == "tool":
            self._tool(event)
        elif event.channel == "agent" and event.type == "result":
            self._result(event.payload)
        return event

    def _follow(self, event: WorkerEvent) -> None:
        text = json.dumps([event.channel, event.type, normalized(event.payload)],
                          sort_keys=True, ensure_ascii=False, default=str)
        if self.workspace:
            text = text.replace(self.workspace, "<workspace>")
        self.path_hash.update(text.encode("utf-8", "surrogatepass") + b"\n")
        if len(self.path) < MAX_PATH_STEPS:
            name = event.payload.get("name")
            label = f"{event.channel}/{event.type}" + (
                f" {bounded_name(name)}" if isinstance(name, str) else "")
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            self.path.append(f"{label}@{digest}")

    def _tool(self, event: WorkerEvent) -> None:
        name = event.payload.get("name")
        if not isinstance(name, str):
            self.violate("bad_tool_event", f"tool/{event.type} without a string 'name'")
            return
        name = bounded_name(name)
        if event.type == "call":
            if name in self.tool_calls or len(self.tool_calls) < MAX_TOOL_NAMES:
                self.tool_calls[name] = self.tool_calls.get(name, 0) + 1
            else:
                self.uncounted_tool_calls += 1
        elif event.type == "result" and len(self.trajectory) < MAX_TRAJECTORY_STEPS:
            # Only a real boolean true is success: the string "false" is truthy.
            self.trajectory.append(f"{name}:{'ok' if event.payload.get('ok') is True else 'error'}")

    def _result(self, payload: dict[str, Any]) -> None:
        if self.result is not None or self.bad_result is not None:
            self.bad_result = "the worker sent a second result event"
            return
        problem = result_problem(payload)
        if problem:
            self.bad_result = problem
        else:
            self.result = payload


def normalized(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A payload without its top-level keys whose values differ by nature (ids, times,
    durations). What the agent did — tool arguments, outputs — is kept whole, ids included."""
    return {k: v for k, v in payload.items()
            if k not in VOLATILE_KEYS and not k.endswith("_id")}


def bounded_name(name: str) -> str:
    if len(name) <= MAX_TOOL_NAME_CHARS:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{name[:MAX_TOOL_NAME_CHARS - 13]}…{digest}"


def result_problem(payload: Mapping[str, Any]) -> str | None:
    if not isinstance(payload.get("output"), str):
        return f"result.output must be a string, got {type(payload.get('output')).__name__}"
    if not isinstance(payload.get("stop_reason"), str):
        return (f"result.stop_reason must be a string, got "
                f"{type(payload.get('stop_reason')).__name__}")
    if not isinstance(payload.get("end_state", {}), dict):
        return "result.end_state must be an object"
    return None


def _excerpt(raw: bytes, redactor: Redactor) -> str:
    text = raw[: (EXCERPT_CHARS + redactor.longest) * 4].decode("utf-8", "replace")
    kept = redactor.cut(text, EXCERPT_CHARS)
    return repr(kept[:-1]) + "…" if kept.endswith("…") and kept != text else repr(kept)
