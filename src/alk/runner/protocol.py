"""Protocol v1, the harness side: messages to the worker, and the checks on every line it writes.

Pure: bytes in, messages and violations out. `ProtocolState` follows one worker through the
handshake and the run, and keeps in bounded memory what attribution needs later. Everything a
worker sends is bounded here, where it enters: nesting depth, numbers (JSON has no NaN or
Infinity), the length of every name alk keeps, and the bytes of what it remembers per repeat.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Mapping

from alk import untrusted_json
from alk.records import Violation
from alk.redaction import Redactor
from alk.worker import CHANNELS, PROTOCOL_VERSION

HARNESS_CHANNEL = "harness"
# Bounds on what a worker can make the harness remember, whatever it sends.
MAX_VIOLATIONS_KEPT = 20
# Violations an attempt's transcript records one by one, each with a redacted quote of its
# line; past them they are counted (the exit event's `violations`) and never quoted: 32 MiB of
# binary noise is 130,000 "lines", whose quoting alone kept alk from reading the pipe at speed.
MAX_VIOLATIONS_RECORDED = 1_000
MAX_TOOL_NAMES = 1_000
MAX_FAULTS = 1_000
# A longer name (a tool's, an event type's, a fault point's) is a violation for a type, and is
# kept as its head and a digest of the whole for the others, so that names stay distinct while
# 1,000 names of 1 MiB each cannot fill the harness's memory or the result document.
MAX_NAME_CHARS = 128
# Deeper JSON is a violation: every later stage (redaction, hashing, encoding) may then walk
# what it is given without a recursion limit to hit.
MAX_JSON_DEPTH = untrusted_json.MAX_DEPTH
# More JSON values on one line is a violation, counted before it is parsed: a 1 MiB line of
# `{}` is 350,000 objects, tens of MiB in alk once parsed, and eight workers write at once.
MAX_LINE_VALUES = 20_000
# Per repeat: the tool trajectory and the event path, in characters of their steps.
MAX_TRAJECTORY_CHARS = 8 * 1024
MAX_PATH_CHARS = 8 * 1024
MAX_PACKAGE_PATHS = 64
MAX_PATH_NAME_CHARS = 4096
# A model turn's number, as `model/script_exhausted` gives it: a 32-bit count.
MAX_TURN = 2**31 - 1
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
    # ASCII: a message may quote what a worker sent (an abort's reason), lone surrogates too.
    return (json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
            + "\n").encode("ascii")


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


def decode_line(raw: bytes, cut: bool = False, redactor: Redactor = _NO_SECRETS,
                quote: bool = True) -> WorkerEvent | tuple[str, str]:
    """One stdout line → an event, or `(violation kind, detail)`. Details quote the line, with
    the lane's secrets redacted before the quote is cut (no prefix of a secret survives);
    without `quote` (a violation that will not be recorded), they name the kind alone."""
    if not quote:
        redactor = _UNQUOTED
    if cut:
        return "line_too_long", f"line longer than the limit, cut: {_excerpt(raw, redactor)}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid_utf8", f"line is not UTF-8: {_excerpt(raw, redactor)}"
    try:
        message = untrusted_json.parse(text, max_depth=MAX_JSON_DEPTH,
                                       max_values=MAX_LINE_VALUES)
    except untrusted_json.Rejected as exc:
        if exc.kind == "not_json":
            return "not_json", f"line is not JSON: {_excerpt(raw, redactor)}"
        return exc.kind, f"{exc}: {_excerpt(raw, redactor)}"
    if not isinstance(message, dict):
        return "not_object", f"line is JSON but not an object: {_excerpt(raw, redactor)}"
    channel, kind, payload = message.get("channel"), message.get("type"), message.get("payload", {})
    if channel == HARNESS_CHANNEL:
        return "harness_channel", (f"worker claimed the harness channel (type "
                                   f"{_name(kind, redactor)}); ignored")
    if channel not in CHANNELS:
        return "unknown_channel", (f"channel must be one of {', '.join(CHANNELS)}, got "
                                   f"{_name(channel, redactor)}")
    if not isinstance(kind, str) or not kind or len(kind) > MAX_NAME_CHARS:
        return "bad_type", (f"'type' must be a non-empty string of at most {MAX_NAME_CHARS} "
                            f"characters, got {_name(kind, redactor)}")
    if not isinstance(payload, dict):
        return "bad_payload", f"'payload' must be an object, got {type(payload).__name__}"
    return WorkerEvent(channel, kind, payload)


class ProtocolState:
    """Follows one worker's lines; remembers only bounded facts."""

    def __init__(self, workspace: str = "", redactor: Redactor = _NO_SECRETS) -> None:
        # Each repeat's workspace has its own path; it must not make equal runs look different.
        self.workspace = workspace
        self.redactor = redactor
        self.phase = Phase.AWAIT_READY
        self.ready: dict[str, Any] | None = None
        self.result: dict[str, Any] | None = None
        self.bad_result: str | None = None
        self.tool_calls: dict[str, int] = {}
        self.faults_fired: set[tuple[str, int]] = set()
        self.model_turns = 0  # `model/turn` events: scripted turns the framework consumed
        # The first valid `model/script_exhausted`: (turn asked for, scripted turns).
        self.script_exhausted: tuple[int, int] | None = None
        # The run's normalized event path: what happened, in order, without what differs by
        # nature (ids, times); equal paths mean the framework did the same thing. The hash
        # covers every event; the steps kept for a report are bounded.
        self.path_hash = hashlib.sha256()
        self.path: list[str] = []
        self._path_chars = 0
        # Calls to names past MAX_TOOL_NAMES: not counted by name, but never forgotten, so that
        # flooding junk names cannot hide a call the lane forbids.
        self.uncounted_tool_calls = 0
        self.trajectory: list[str] = []
        self.trajectory_hash = hashlib.sha256()
        self._trajectory_chars = 0
        self.violations: list[Violation] = []
        self.violation_count = 0
        self.lines = 0

    def name(self, value: str) -> str:
        """A worker-chosen name as alk keeps it: redacted and at most MAX_NAME_CHARS."""
        return self.redactor.bounded(value, MAX_NAME_CHARS)

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
            self.ready = self._ready(event.payload)
            self.phase = Phase.READY
            return event
        if self.phase is Phase.AWAIT_READY:
            return self.violate("before_ready", f"{event.channel}/{self.name(event.type)} before "
                                                "framework_ready; the first line must be it")
        if self.phase is not Phase.STARTED:
            return self.violate("before_start", f"{event.channel}/{self.name(event.type)} before "
                                                "alk sent start; wait for start() first")
        self._follow(event)
        if event.channel == "model" and event.type == "turn":
            self.model_turns += 1
        elif event.channel == "model" and event.type == "script_exhausted":
            self._script_exhausted(event.payload)
        if event.channel == "framework" and event.type == "fault":
            self._fault(event.payload)
        elif event.channel == "tool":
            self._tool(event)
        elif event.channel == "agent" and event.type == "result":
            self._result(event.payload)
        return event

    def _ready(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """What alk keeps of framework_ready: the identity, bounded, and a bounded list of
        package paths (the gate judges the payload as sent; attribution reads the paths for
        every frame of a traceback)."""
        paths = payload.get("package_paths")
        kept = ([p for p in paths[:MAX_PACKAGE_PATHS]
                 if isinstance(p, str) and len(p) <= MAX_PATH_NAME_CHARS]
                if isinstance(paths, list) else [])
        identity = {key: self.name(value) if isinstance(value, str) else None
                    for key in ("framework", "framework_version")
                    for value in (payload.get(key),)}
        return {**identity, "package_paths": kept}

    def _follow(self, event: WorkerEvent) -> None:
        text = json.dumps([event.channel, event.type, normalized(event.payload)],
                          sort_keys=True, ensure_ascii=False, default=str)
        if self.workspace:
            text = text.replace(self.workspace, "<workspace>")
        data = text.encode("utf-8", "surrogatepass")
        self.path_hash.update(data + b"\n")
        if self._path_chars < MAX_PATH_CHARS:
            name = event.payload.get("name")
            label = f"{event.channel}/{self.name(event.type)}" + (
                f" {self.name(name)}" if isinstance(name, str) else "")
            step = f"{label}@{hashlib.sha256(data).hexdigest()[:8]}"
            self.path.append(step)
            self._path_chars += len(step)

    def _fault(self, payload: Mapping[str, Any]) -> None:
        point, occurrence = payload.get("point"), payload.get("occurrence", 1)
        if (isinstance(point, str) and type(occurrence) is int and 0 < occurrence < 2**31
                and len(self.faults_fired) < MAX_FAULTS):
            self.faults_fired.add((self.name(point), occurrence))

    def _script_exhausted(self, payload: Mapping[str, Any]) -> None:
        """The framework asked for a model turn past the script. Only the first is kept: it is
        where the run left the script; later ones are the same fact again."""
        turn, scripted = payload.get("turn"), payload.get("script_turns")
        # Exact ints (a bool is an int too), and a turn past the script, or it says nothing.
        if not (type(turn) is int and type(scripted) is int and 0 <= scripted < turn <= MAX_TURN):
            self.violate("bad_script_exhausted",
                         "model/script_exhausted needs integers 0 <= script_turns < turn <= "
                         f"{MAX_TURN}, got turn {_name(turn, self.redactor)}, script_turns "
                         f"{_name(scripted, self.redactor)}")
        elif self.script_exhausted is None:
            self.script_exhausted = (turn, scripted)

    def _tool(self, event: WorkerEvent) -> None:
        name = event.payload.get("name")
        if not isinstance(name, str):
            self.violate("bad_tool_event", f"tool/{self.name(event.type)} without a string 'name'")
            return
        name = self.name(name)
        if event.type == "call":
            if name in self.tool_calls or len(self.tool_calls) < MAX_TOOL_NAMES:
                self.tool_calls[name] = self.tool_calls.get(name, 0) + 1
            else:
                self.uncounted_tool_calls += 1
        elif event.type == "result":
            # Only a real boolean true is success: the string "false" is truthy.
            step = f"{name}:{'ok' if event.payload.get('ok') is True else 'error'}"
            self.trajectory_hash.update(step.encode("utf-8", "surrogatepass") + b"\n")
            if self._trajectory_chars < MAX_TRAJECTORY_CHARS:
                self.trajectory.append(step)
                self._trajectory_chars += len(step)

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


def result_problem(payload: Mapping[str, Any]) -> str | None:
    if not isinstance(payload.get("output"), str):
        return f"result.output must be a string, got {type(payload.get('output')).__name__}"
    if not isinstance(payload.get("stop_reason"), str):
        return (f"result.stop_reason must be a string, got "
                f"{type(payload.get('stop_reason')).__name__}")
    if not isinstance(payload.get("end_state", {}), dict):
        return "result.end_state must be an object"
    return None


def _name(value: Any, redactor: Redactor) -> str:
    """A worker's value quoted in a violation's detail, bounded."""
    if isinstance(value, str):
        return repr(redactor.bounded(value, MAX_NAME_CHARS))
    return redactor.cut(repr(value), MAX_NAME_CHARS)


class _Unquoted(Redactor):
    """Stands in for the redactor where no quote is wanted: every quote is left out."""

    def excerpt(self, raw: bytes, limit: int) -> str:
        return "(not quoted)"

    def bounded(self, name: str, limit: int) -> str:
        return "(not quoted)"

    def cut(self, text: str, limit: int, **_: bool) -> str:
        return "(not quoted)"


_UNQUOTED = _Unquoted()


def _excerpt(raw: bytes, redactor: Redactor) -> str:
    if redactor is _UNQUOTED:
        return "(not quoted)"
    kept = redactor.excerpt(raw, EXCERPT_CHARS)
    return repr(kept[:-1]) + "…" if kept.endswith("…") else repr(kept)
