"""Cassettes: the model calls of one run, recorded from a real upstream so that later runs replay
them without it, and the calls of the lane's tools alk ran (`alk.gateway.cassette_tools`).

A cassette is a JSON-lines file, one line per model call, in the order the calls were made:
`{"api", "request", "status", "body", "stream", "events", "fault"}`, where `api` is the format
the call spoke (`chat` or `responses`: OpenAI; `messages`: Anthropic; `gemini`), `request` is the
request as `normalize` leaves it, `body` the response body's text and `events` the frames of a
streamed one. Replay serves the entries in order, and only to a request equal to the recorded one
once both are normalized and redacted; the first difference is what a mismatch reports.

A cassette is a file people commit and replay later. The writer redacts the run's secrets from
every text of an entry, the request's keys too, and keeps the file within MAX_CASSETTE_BYTES,
what replay loads: past it the recording stops, and a warning says why. A request comes from
the worker and a cassette file may have been edited by hand: both are read within bounds, and
whatever they hold is quoted redacted and cut.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from alk import untrusted_json
from alk.errors import CassetteError
from alk.gateway.cassette_tools import ToolEntry, is_tool_line, tool_entry
from alk.gateway.differences import first_difference, redacted, show, sorted_json
from alk.gateway.wire.formats import FAMILIES, wire_format
from alk.gateway.wire.request import API, TIMESTAMPS
from alk.redaction import Redactor

# Keys of a request that differ between two runs of the same script and say nothing of what the
# model is asked: the end user's and the caller's identifiers, tags, and the stream's options.
DROPPED = frozenset({"user", "metadata", "stream_options", "safety_identifier",
                     "prompt_cache_key"})
# The most a cassette holds, in bytes: replay loads no more, so recording writes no more.
MAX_CASSETTE_BYTES = 64 * 1024 * 1024
# What an entry's `api` may be: the format of the call, which says its family too.
APIS = tuple(api for apis in FAMILIES.values() for api in apis)
_NO_SECRETS = Redactor()


def normalize(api: API, body: bytes, *, model: str = "") -> dict | None:
    """The request with what varies between runs replaced or dropped, its keys sorted: tool-call
    ids become "id-1", "id-2"... in order of first appearance (the format says where its ids
    are), DROPPED keys and TIMESTAMPS go. `model`: the model the path names (Gemini's), kept
    as the request's. None when the body is not a JSON object."""
    try:
        request = untrusted_json.parse(body)
    except untrusted_json.Rejected:
        return None
    if not isinstance(request, dict):
        return None
    request = {key: value for key, value in request.items()
               if key not in DROPPED and key not in TIMESTAMPS}
    if model:
        request["model"] = model
    ids: dict[str, str] = {}

    def renamed(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return ids.setdefault(value, f"id-{len(ids) + 1}")

    return sorted_json(wire_format(api).normalized(request, renamed))


# --- cassette files ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One model call of a cassette."""
    api: str
    request: dict
    status: int
    body: str
    stream: bool
    events: tuple[str, ...]
    fault: str | None
    # Which attempt of which repeat of which scenario made the call (a recorded run's), so that
    # a replayed run serves each its own calls; empty and 0 in a cassette made by hand.
    scenario: str = ""
    repeat: int = 0
    attempt: int = 0

    @property
    def key(self) -> tuple[str, int, int]:
        return self.scenario, self.repeat, self.attempt

    def line(self) -> str:
        """The entry as its cassette line (without the newline)."""
        return json.dumps({"api": self.api, "request": self.request, "status": self.status,
                           "body": self.body, "stream": self.stream,
                           "events": list(self.events), "fault": self.fault,
                           "scenario": self.scenario, "repeat": self.repeat,
                           "attempt": self.attempt}, sort_keys=True)


_FIX = "fix the line, or record the cassette again"


def _entry(record: Any) -> Entry | str:
    """The entry a cassette line holds, or what is wrong with it."""
    if not isinstance(record, dict):
        return "expected a JSON object with api, request, status, body, stream, events, fault"
    api, request, status = record.get("api"), record.get("request"), record.get("status")
    body, stream = record.get("body"), record.get("stream", False)
    events, fault = record.get("events", []), record.get("fault")
    if api not in APIS:
        return (f"'api' must be one of {', '.join(APIS)} (the format the call spoke), got "
                f"{show(api, _NO_SECRETS)}")
    if not isinstance(request, dict):
        return f"'request' must be an object, got {show(request, _NO_SECRETS)}"
    if not (isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599):
        return f"'status' must be an HTTP status (100 to 599), got {show(status, _NO_SECRETS)}"
    if not isinstance(body, str):
        return f"'body' must be the response body's text, got {show(body, _NO_SECRETS)}"
    if not isinstance(stream, bool):
        return f"'stream' must be true or false, got {show(stream, _NO_SECRETS)}"
    if not (isinstance(events, list) and all(isinstance(event, str) for event in events)):
        return "'events' must be an array of the streamed frames' texts"
    if fault is not None and not isinstance(fault, str):
        return f"'fault' must be null or a fault's name, got {show(fault, _NO_SECRETS)}"
    scenario = record.get("scenario", "")
    repeat, attempt = record.get("repeat", 0), record.get("attempt", 0)
    if not isinstance(scenario, str):
        return f"'scenario' must be a scenario's id, got {show(scenario, _NO_SECRETS)}"
    if not all(type(n) is int and n >= 0 for n in (repeat, attempt)):
        return "'repeat' and 'attempt' must be whole numbers >= 0"
    return Entry(api=api, request=request, status=status, body=body, stream=stream,
                 events=tuple(events), fault=fault, scenario=scenario, repeat=repeat,
                 attempt=attempt)


class Cassette:
    """A loaded cassette: its entries, served in order by `match`."""

    def __init__(self, path: Path, entries: list[Entry], tools: list[ToolEntry] = ()) -> None:
        self.path = path
        self.entries = tuple(entries)
        self.tools = tuple(tools)
        self._groups: dict[tuple[bool, str, int, int], list[Any]] = {}
        for entry in (*entries, *tools):
            self._groups.setdefault((type(entry) is Entry, *entry.key), []).append(entry)

    def calls(self, scenario: str, repeat: int, attempt: int, *, tools: bool = False
              ) -> tuple[Any, ...]:
        """The calls one attempt of a repeat replays: those recorded for it; for a repeat the
        recording did not reach, those of the recorded repeats in turn; in a cassette made by
        hand (no scenario named), all of them. `tools`: its tool calls, not its model calls,
        of the same recorded repeat (a repeat that ran no tool recorded none)."""
        model = not tools
        if {key[1:] for key in self._groups if key[0] is model} <= {("", 0, 0)}:
            return self.tools if tools else self.entries
        # Chosen among the repeats that made model calls, for both kinds: an attempt's tool
        # calls must be those of the repeat whose model calls it replays.
        recorded = sorted({r for (m, s, r, a) in self._groups
                           if m and s == scenario and a == attempt})
        if not recorded:
            return ()
        chosen = repeat if repeat in recorded else recorded[(repeat - 1) % len(recorded)]
        return tuple(self._groups.get((model, scenario, chosen, attempt), ()))

    @classmethod
    def load(cls, path: Path, max_bytes: int = MAX_CASSETTE_BYTES) -> "Cassette":
        """The cassette at `path`; CassetteError when it cannot be read or a line is wrong."""
        try:
            with open(path, "rb") as file:
                data = file.read(max_bytes + 1)
        except OSError as error:
            raise CassetteError(f"{path}: cannot read the cassette ({error.strerror}); "
                                f"check the path, or record the cassette first") from None
        if len(data) > max_bytes:
            raise CassetteError(f"{path}: the cassette is larger than {max_bytes:,} bytes, the "
                                f"most alk loads; record a shorter run")
        entries, tools = [], []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue  # a blank line, the file's last one among them
            try:
                record = untrusted_json.parse(raw)
            except untrusted_json.Rejected as rejected:
                raise CassetteError(f"{path} line {number}: expected one JSON object, "
                                    f"{rejected}; {_FIX}") from None
            entry = tool_entry(record) if is_tool_line(record) else _entry(record)
            if isinstance(entry, str):
                raise CassetteError(f"{path} line {number}: {entry}; {_FIX}")
            (entries if isinstance(entry, Entry) else tools).append(entry)
        return cls(path, entries, tools)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def match(self, call: int, api: str, normalized: dict, *,
              redactor: Redactor = _NO_SECRETS,
              key: tuple[str, int, int] | None = None) -> tuple[Entry | None, str]:
        """The call-th entry (1-based) if it was recorded for this request, with ""; else None
        and why not ("call 3: messages[2].content: expected …, got …"). With `key` (scenario,
        repeat, attempt), among that attempt's calls (`calls`). Both requests are compared
        redacted: the recording holds a secret of the request as MASK, the worker sends it
        whole (and may hold another value of it than the recorded run did)."""
        entries = self.entries if key is None else self.calls(*key)
        if not 1 <= call <= len(entries):
            return None, (f"call {call}: the cassette {self.path} holds {len(entries)} "
                          f"model calls for this attempt; record it again for a run that "
                          f"makes more")
        entry = entries[call - 1]
        if entry.api != api:
            return None, f"call {call}: expected a {entry.api} request, got a {api} request"
        difference = first_difference(redacted(entry.request, redactor),
                                      redacted(normalized, redactor), redactor=redactor)
        if difference is not None:
            return None, f"call {call}: {difference}"
        return entry, ""


class CassetteWriter:
    """Writes a cassette as the calls are made, to a temporary file beside it that replaces the
    cassette at `close`: a run that dies halfway leaves the previous cassette whole. Every text
    of an entry is redacted first. The file stays within `max_bytes`: the first entry that would
    pass it and every one after are refused (counted in `refused`, `problem` says why), so that
    the cassette is the run's calls up to there, with no gap an attempt's replay would trip on."""

    def __init__(self, path: Path, redactor: Redactor = _NO_SECRETS,
                 max_bytes: int = MAX_CASSETTE_BYTES) -> None:
        self.path, self.redactor, self.max_bytes = path, redactor, max_bytes
        self.size = 0
        self.refused = 0
        self._cut_at: tuple[str, int, int] | None = None  # the first call refused
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                                 suffix=".tmp")
        self._temporary = Path(temporary)
        self._file: Any = os.fdopen(descriptor, "wb")

    def add(self, entry: Entry | ToolEntry) -> bool:
        """Writes the entry (a model call's Entry, or a tool call's ToolEntry) redacted; False
        when the cassette is full and it was refused."""
        if self._file is None:
            raise ValueError(f"{self.path}: the cassette is closed; no more entries are added")
        redact = self.redactor.redact
        if not isinstance(entry, Entry):
            entry = entry.redacted(self.redactor)
        elif self.redactor:
            entry = dataclasses.replace(
                entry, request=redacted(entry.request, self.redactor), body=redact(entry.body),
                events=tuple(map(redact, entry.events)), scenario=redact(entry.scenario),
                fault=None if entry.fault is None else redact(entry.fault))
        data = (entry.line() + "\n").encode()  # ASCII: json.dumps escapes every other character
        if self._cut_at is not None or self.size + len(data) > self.max_bytes:
            self._cut_at = self._cut_at or entry.key
            self.refused += 1
            return False
        self._file.write(data)
        self.size += len(data)
        return True

    @property
    def problem(self) -> str | None:
        """Why the cassette holds fewer calls than the run made, or None when it holds them."""
        if self._cut_at is None:
            return None
        scenario, repeat, attempt = self._cut_at
        return (f"{self.path}: the recording stopped at {self.max_bytes:,} bytes, the most a "
                f"cassette holds (replay loads no more): {self.refused} model call(s) were not "
                f"recorded, from scenario '{scenario}' repeat {repeat} attempt {attempt} on "
                f"(that attempt's replay stops where its recording did); record fewer repeats "
                f"or scenarios at a time (-n, --scenario), or calls that send less")

    def close(self) -> None:
        """Puts the cassette in place; a second call does nothing."""
        if self._file is None:
            return
        file, self._file = self._file, None
        file.flush()
        os.fsync(file.fileno())
        file.close()
        os.replace(self._temporary, self.path)
        if self.problem:
            # Where alk's warnings go, when the lane ends: the cut is the user's to fix.
            sys.stderr.write(f"warning: {self.redactor.redact(self.problem)}\n")

    def discard(self) -> None:
        """Drops what was written; the previous cassette, if any, stays."""
        if self._file is None:
            return
        file, self._file = self._file, None
        file.close()
        self._temporary.unlink(missing_ok=True)

    def __enter__(self) -> "CassetteWriter":
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()
