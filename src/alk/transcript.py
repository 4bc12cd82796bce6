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
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Mapping

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


# What a stderr line's event adds to its text, at most (seq, t and the fixed keys): the tail's
# size is counted with it before the event is encoded.
STDERR_EVENT_BYTES = 120
_STDERR_PREFIX = b',"source":"worker","channel":"stderr","type":"line","payload":{"text":'


class TranscriptWriter:
    """Writes one transcript. Events go to the file as they come until half the cap is used
    (the head); then the most recent ones are held in a tail of the other half, which is
    written at `close` after a `truncated` marker. A stderr line bound for the tail is held as
    the bytes the worker wrote and encoded only if it is still there at the end: past the cap,
    a flood costs alk a count, not the encoding of every line."""

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
        self._tail: deque[_Batch] = deque()
        self._first_dropped = (0, 0.0)
        self._tail_bytes = 0
        self._dropped_events = 0
        self._dropped_bytes = 0
        self._encoder = json.JSONEncoder(ensure_ascii=True, allow_nan=False,
                                         separators=(",", ":"), default=str)
        self.sha256: str | None = None

    def harness(self, type: str, payload: Mapping[str, Any] | None = None) -> None:
        self._append(HARNESS, HARNESS, type, payload or {})
        if type in FLUSHED_TYPES:
            self._file.flush()

    def worker(self, channel: str, type: str, payload: Mapping[str, Any]) -> None:
        self._append(WORKER, channel, type, payload)

    @property
    def head_full(self) -> bool:
        """Past the head: what comes now goes to the tail (see `stderr_block`)."""
        return not self._head_left

    def stderr_lines(self, lines: list[tuple[bytes, bool]]) -> None:
        """The worker's stderr lines as (bytes, cut) from the line splitter, one event each."""
        t = round(self._clock() - self._t0, 4)
        index = 0
        while index < len(lines) and self._head_left:
            self._seq += 1
            raw, cut = lines[index]
            self._place(self._seq, t, self._stderr_line(self._seq, t, raw, cut))
            index += 1
        if index < len(lines):
            rest = lines[index:] if index else lines
            size = sum(map(len, map(itemgetter(0), rest))) + STDERR_EVENT_BYTES * len(rest)
            self._hold(_Batch(self._seq + 1, t, size, len(rest), items=rest))
            self._seq += len(rest)

    def stderr_block(self, block: bytes, count: int) -> None:
        """`count` whole stderr lines, each ending in a newline and none over the line limit,
        as one block: past the head they are only counted and kept as they are, and split
        into events at `close` if they are still in the tail."""
        if self._head_left:
            self.stderr_lines([(line, False) for line in block.split(b"\n")[:-1]])
            return
        t = round(self._clock() - self._t0, 4)
        self._hold(_Batch(self._seq + 1, t, len(block) + STDERR_EVENT_BYTES * count, count,
                          block=block))
        self._seq += count

    def close(self) -> str:
        """Writes the tail, closes the file and returns the sha256 of its bytes."""
        if self.sha256 is not None:
            return self.sha256
        tail = self._final_tail()
        if self._dropped_events:
            # The marker stands where the dropped events stood, with the first one's seq and t,
            # so that seq and t still only grow down the file.
            seq, t = self._first_dropped
            marker = {"dropped_events": self._dropped_events,
                      "dropped_bytes": self._dropped_bytes,
                      "seqs": [seq, seq + self._dropped_events - 1]}
            self._write(self._line(seq, t, HARNESS, HARNESS, "truncated", marker))
        for line in tail:
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
        self._place(seq, t, self._line(seq, t, source, channel, type, payload))

    def _place(self, seq: int, t: float, line: bytes) -> None:
        if len(line) <= self._head_left:
            self._head_left -= len(line)
            self._write(line)
            return
        self._head_left = 0
        self._hold(_Batch(seq, t, len(line), 1, items=[line]))

    def _hold(self, batch: _Batch) -> None:
        """Adds a batch of events to the tail, and drops the oldest batches while the rest
        still fill the tail's share. The tail may hold one batch more than its share until
        `close` cuts it exactly: dropping line by line would cost a flood's every line."""
        self._tail.append(batch)
        self._tail_bytes += batch.size
        while self._tail_bytes - self._tail[0].size >= self._tail_cap:
            oldest = self._tail.popleft()
            self._dropped(oldest.seq + oldest.start, oldest.t, oldest.count - oldest.start,
                          oldest.size)

    def _dropped(self, seq: int, t: float, events: int, size: int) -> None:
        if not self._dropped_events or seq < self._first_dropped[0]:
            self._first_dropped = (seq, t)
        self._tail_bytes -= size
        self._dropped_events += events
        self._dropped_bytes += size

    def _final_tail(self) -> list[bytes]:
        """The tail's events encoded, newest first back, within the tail's share of the cap:
        held stderr lines had an estimated size (escapes may make them longer). What no longer
        fits joins the dropped events before it."""
        kept: list[bytes] = []
        size = 0
        full = False
        while self._tail and not full:
            batch = self._tail[-1]
            items = batch.lines()
            while len(items) > batch.start:
                item = items[-1]
                seq = batch.seq + len(items) - 1
                line = item if type(item) is bytes else self._stderr_line(seq, batch.t, *item)
                if size + len(line) > self._tail_cap:
                    full = True
                    break
                kept.append(line)
                size += len(line)
                items.pop()
                batch.count -= 1
                batch.size -= _estimate(item)
            else:
                self._tail.pop()
        while self._tail:  # older than what fits
            batch = self._tail.popleft()
            self._dropped(batch.seq + batch.start, batch.t, batch.count - batch.start,
                          batch.size)
        kept.reverse()
        return kept

    def _stderr_line(self, seq: int, t: float, raw: bytes, cut: bool) -> bytes:
        text = raw.decode("utf-8", "replace")
        if cut:
            # Cut at the line limit, maybe inside a secret: what ends it may be the start of
            # one, so it goes too.
            text = self._redactor.cut(text, len(text), truncated=True)
        else:
            text = self._redactor.redact(text)
        line = b'{"seq":%d,"t":%s%s%s%s}}\n' % (
            seq, repr(t).encode(), _STDERR_PREFIX, _ascii_json(text).encode(),
            b',"cut":true' if cut else b"")
        if len(line) > self._max_event:
            return self._line(seq, t, WORKER, "stderr", "line",
                              {"text": text, **({"cut": True} if cut else {})})
        return line

    def _line(self, seq: int, t: float, source: str, channel: str, type: str,
              payload: Mapping[str, Any]) -> bytes:
        event = {"seq": seq, "t": t, "source": source,
                 "channel": self._redactor.redact(channel), "type": self._redactor.redact(type)}
        # Strict JSON, ASCII only: no NaN or Infinity (strict readers reject them), and no
        # control, bidi or lone surrogate character of a worker's reaches a terminal raw.
        try:
            event["payload"] = self._redactor.redact_value(payload)
            text = self._encoder.encode(event)
        except (RecursionError, ValueError):
            # What the protocol lets through cannot be either; should it be, keep the event.
            event["payload"] = {"dropped": "payload not recordable as strict JSON"}
            text = self._encoder.encode(event)
        line = text.encode("ascii") + b"\n"
        if len(line) > self._max_event:
            # JSON escapes can multiply an excerpt's size; keep it well inside the event bound.
            cut = self._redactor.cut(text, min(EXCERPT_CHARS, self._max_event // 8))
            event["payload"] = {"cut": True, "bytes": len(line), "excerpt": cut}
            line = self._encoder.encode(event).encode("ascii") + b"\n"
        return line

    def _write(self, line: bytes) -> None:
        self._file.write(line)
        self._hash.update(line)


_ascii_json = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


@dataclass(slots=True)
class _Batch:
    """Events in the tail, numbered from `seq`: `items` (encoded lines, or raw stderr lines as
    (bytes, cut), encoded only if they are kept), or a `block` of `count` whole stderr lines
    split only if it is reached at `close`. `start`: how many at the front were dropped."""

    seq: int
    t: float
    size: int
    count: int
    items: list[Any] | None = None
    block: bytes | None = None
    start: int = 0

    def lines(self) -> list[Any]:
        if self.items is None:
            self.items = [(line, False) for line in (self.block or b"").split(b"\n")[:-1]]
            self.block = None
        return self.items


def _estimate(item: Any) -> int:
    return len(item) if type(item) is bytes else len(item[0]) + STDERR_EVENT_BYTES


# ---------------------------------------------------------------------------------------------
# Reading. A transcript may hold whatever a hostile worker could make alk write, and a file on
# disk may have been changed since: it is read one bounded line at a time, never whole.

# alk writes no line longer than this, the newline included (a larger event keeps an excerpt):
# a longer line was not written by alk, and reading it whole is what a hostile file would want.
READ_LINE_BYTES = MAX_EVENT_BYTES
_CHANNEL_KEY = b'"channel":'


@dataclass(frozen=True, slots=True)
class TranscriptPage:
    """A window onto a transcript's events, and how many events there are around it."""

    rows: list[Any]  # what the reader's `digest` made of each event of the page, in file order
    first: int  # position of the first row, 1-based, among the matching events
    matching: int  # events on the chosen channels (all of them when no channel was chosen)
    total: int  # events in the file


def iter_transcript(path: Path) -> Iterator[dict[str, Any]]:
    """Yields a transcript's events one at a time. A last line cut by an interrupted run is
    dropped; any other bad line, or one longer than alk writes, is an error naming file and line."""
    lines = _lines(path)
    for number, raw in lines:
        event = _event(path, number, raw, lines)
        if event is None:
            return
        yield event


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """All of a transcript's events at once, for one known to be small; one that may be large
    (up to its lane's cap) is read with `iter_transcript` or `read_page`."""
    return list(iter_transcript(path))


def read_page(path: Path, start: int, limit: int, channels: Collection[str] | None = None,
              digest: Callable[[dict[str, Any]], Any] = dict) -> TranscriptPage:
    """The `limit` events from position `start` (1-based; counting only events on `channels`
    when given), each passed through `digest` as soon as it is read, and the counts around them.

    One pass, one line at a time: only the page's lines are parsed. The others are counted, and
    matched to a channel by their bytes: alk writes compact JSON with `"channel":"X"` before the
    payload, so the first `"channel":` of a line is the event's own, not one inside its payload.
    """
    wanted = _channel_keys(channels)
    rows: list[Any] = []
    matching = total = 0
    unparsed_last: tuple[bytes, bool] | None = None  # the last line, unless it was parsed
    lines = _lines(path)
    for number, raw in lines:
        on_channel = wanted is None or _on_channel(raw, wanted)
        if on_channel and start <= matching + 1 < start + limit:
            event = _event(path, number, raw, lines)
            if event is None:
                break
            rows.append(digest(event))
            unparsed_last = None
        else:
            unparsed_last = (raw, on_channel)
        total += 1
        if on_channel:
            matching += 1
    if unparsed_last is not None and _is_cut(unparsed_last[0]):
        total -= 1
        matching -= unparsed_last[1]
    return TranscriptPage(rows, start, matching, total)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(number, bytes) for each line, each read with a bound."""
    try:
        file = path.open("rb")
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read the transcript: {exc.strerror}") from None
    with file:
        read = partial(file.readline, READ_LINE_BYTES + 1)
        number = 0
        while True:
            try:
                raw = read()
            except OSError as exc:
                raise TranscriptError(f"{path}:{number + 1}: cannot read the transcript: "
                                      f"{exc.strerror}") from None
            if not raw:
                return
            number += 1
            if len(raw) > READ_LINE_BYTES:
                raise TranscriptError(
                    f"{path}:{number}: line longer than {READ_LINE_BYTES} bytes, which alk never "
                    "writes: the file was changed after the run or is not a transcript")
            yield number, raw


def _event(path: Path, number: int, raw: bytes,
           rest: Iterator[tuple[int, bytes]]) -> dict[str, Any] | None:
    """The event on one line; None for a last line cut by an interrupted run (`rest` is empty)."""
    try:
        event = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than it can be read
        if _exhausted(rest):
            return None
        raise TranscriptError(f"{path}:{number}: not a JSON event line; alk writes one JSON "
                              "object a line, so the file was changed after the run or is not "
                              "a transcript") from None
    if not isinstance(event, dict) or "type" not in event:
        raise TranscriptError(f"{path}:{number}: not a transcript event (a JSON object with a "
                              "`type`); the file was changed after the run or is not a transcript")
    return event


def _exhausted(lines: Iterator[tuple[int, bytes]]) -> bool:
    try:
        next(lines)
    except StopIteration:
        return True
    except TranscriptError:  # a bad next line: then this one was not the last either
        return False
    return False


def _is_cut(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return True
    return False


def _channel_keys(channels: Collection[str] | None) -> tuple[bytes, ...] | None:
    # Each channel encoded both ways a transcript may hold it (ASCII escapes, or UTF-8), so
    # that the bytes compare equal whichever alk wrote the file.
    if channels is None:
        return None
    return tuple({_CHANNEL_KEY + json.dumps(channel, ensure_ascii=ascii_only).encode(
        "utf-8", "backslashreplace") for channel in channels for ascii_only in (True, False)})


def _on_channel(raw: bytes, keys: tuple[bytes, ...]) -> bool:
    at = raw.find(_CHANNEL_KEY)
    return at >= 0 and raw.startswith(keys, at)
