"""Transcripts: one JSON event a line, redacted at write time, bounded, hashed.

    {"seq": 7, "t": 0.052, "source": "worker", "channel": "tool", "type": "call", "payload": {...}}

`source` is who produced the event: `worker` for what the worker wrote (protocol lines, and its
stderr as channel `stderr`), `harness` for what alk observed and decided (channel `harness`).
When a transcript reaches its cap, the first half is kept, then a `truncated` marker, then the
most recent events up to the other half.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Mapping

from alk.errors import TranscriptError
from alk.redaction import Redactor

HARNESS = "harness"
WORKER = "worker"
TRANSCRIPTS_DIR = "transcripts"
# alk's observations that reach the disk at once, so that a transcript still says what happened
# if alk itself is killed (the worker's pid, a timeout); the rest waits for the buffer.
FLUSHED_TYPES = frozenset({"spawn", "timeout", "kill", "exit", "interrupted"})
# An event larger than this keeps only an excerpt of its payload; it bounds the tail buffer too.
MAX_EVENT_BYTES = 1024 * 1024
EXCERPT_CHARS = 2000


def run_transcripts(run_id: str) -> Path:
    """Where a run's transcripts go, relative to the output folder."""
    return Path(TRANSCRIPTS_DIR) / run_id


def probe_transcript(run_id: str) -> Path:
    return run_transcripts(run_id) / "preflight.jsonl"


def repeat_transcript(run_id: str, scenario_id: str, repeat: int) -> Path:
    return run_transcripts(run_id) / scenario_id / f"repeat-{repeat:02d}.jsonl"


class TranscriptWriter:
    def __init__(self, path: Path, cap_bytes: int, redactor: Redactor,
                 clock: Callable[[], float] = time.monotonic) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("wb")
        self._hash = hashlib.sha256()
        self._redactor = redactor
        self._clock = clock
        self._t0 = clock()
        self._seq = 0
        self._head_left = cap_bytes // 2
        self._tail_cap = cap_bytes - cap_bytes // 2
        self._max_event = max(256, min(MAX_EVENT_BYTES, cap_bytes // 4))
        self._tail: deque[tuple[int, float, bytes]] = deque()
        self._first_dropped = (0, 0.0)
        self._tail_bytes = 0
        self._dropped_events = 0
        self._dropped_bytes = 0
        self.sha256: str | None = None

    def harness(self, type: str, payload: Mapping[str, Any] | None = None) -> None:
        self._append(HARNESS, HARNESS, type, payload or {})
        if type in FLUSHED_TYPES:
            self._file.flush()

    def worker(self, channel: str, type: str, payload: Mapping[str, Any]) -> None:
        self._append(WORKER, channel, type, payload)

    def close(self) -> str:
        """Writes the tail, closes the file and returns the sha256 of its bytes."""
        if self.sha256 is not None:
            return self.sha256
        if self._dropped_events:
            # The marker stands where the dropped events stood, with the first one's seq and t,
            # so that seq and t still only grow down the file.
            seq, t = self._first_dropped
            marker = {"dropped_events": self._dropped_events,
                      "dropped_bytes": self._dropped_bytes,
                      "seqs": [seq, seq + self._dropped_events - 1]}
            self._write(self._line(seq, t, HARNESS, HARNESS, "truncated", marker))
        for _, _, line in self._tail:
            self._write(line)
        self._file.close()
        self.sha256 = self._hash.hexdigest()
        return self.sha256

    def abandon(self) -> None:
        """Closes without writing more (the file could not be written)."""
        try:
            self._file.close()
        except OSError:
            pass
        self.sha256 = ""

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------

    def _append(self, source: str, channel: str, type: str, payload: Mapping[str, Any]) -> None:
        self._seq += 1
        seq, t = self._seq, round(self._clock() - self._t0, 4)
        line = self._line(seq, t, source, channel, type, payload)
        if len(line) > self._max_event:
            # JSON escapes can triple an excerpt's size; keep it well inside the event bound.
            cut = self._redactor.cut(line.decode(), min(EXCERPT_CHARS, self._max_event // 8))
            line = self._line(seq, t, source, channel, type,
                              {"cut": True, "bytes": len(line), "excerpt": cut})
        if len(line) <= self._head_left:
            self._head_left -= len(line)
            self._write(line)
            return
        self._head_left = 0
        self._tail.append((seq, t, line))
        self._tail_bytes += len(line)
        while self._tail_bytes > self._tail_cap:
            dropped_seq, dropped_t, dropped = self._tail.popleft()
            if not self._dropped_events:
                self._first_dropped = (dropped_seq, dropped_t)
            self._tail_bytes -= len(dropped)
            self._dropped_events += 1
            self._dropped_bytes += len(dropped)

    def _line(self, seq: int, t: float, source: str, channel: str, type: str,
              payload: Mapping[str, Any]) -> bytes:
        event = {"seq": seq, "t": t, "source": source,
                 "channel": self._redactor.redact(channel), "type": self._redactor.redact(type)}
        try:
            event["payload"] = self._redactor.redact_value(payload)
            text = json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str)
        except RecursionError:
            # Nested deeper than redaction or encoding can walk: keep the event, not its body.
            event["payload"] = {"dropped": "payload nested too deeply to record"}
            text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        # Lone surrogates (from a worker's JSON) cannot be encoded; keep the line valid UTF-8.
        data = text.encode("utf-8", "backslashreplace")
        return data + b"\n"

    def _write(self, line: bytes) -> None:
        self._file.write(line)
        self._hash.update(line)


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """Reads a transcript; a last line cut by an interrupted run is dropped, any other bad line
    is an error naming the file and line."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read the transcript: {exc.strerror}") from None
    events = []
    for number, raw in enumerate(lines, start=1):
        try:
            event = json.loads(raw)
        except ValueError:
            if number == len(lines):
                break
            raise TranscriptError(f"{path}:{number}: not a JSON event line") from None
        if not isinstance(event, dict) or "type" not in event:
            raise TranscriptError(f"{path}:{number}: not a transcript event")
        events.append(event)
    return events
