"""Transcripts: one JSON event a line, redacted at write time, bounded, hashed.

    {"seq": 7, "t": 0.052, "source": "worker", "channel": "tool", "type": "call", "payload": {...}}

`source` is who produced the event: `worker` for what the worker wrote (protocol lines, and its
stderr as channel `stderr`), `harness` for what alk observed and decided (channel `harness`).
When a transcript reaches its cap, its head is kept, then a `truncated` marker, then its tail:
the most recent events, up to half the cap and at most `TAIL_MAX_BYTES`, and the head takes the
rest of the cap.

Lines reach the file whole or not at all: a write that fails (a full disk) is cut back to the
last whole line, and what could not be written is kept as the tail from there on, for `close`
to write once there is room again; the writer says what failed (`write_error`) rather than
raise in the middle of a repeat, and only `close` raises.
"""

from __future__ import annotations

import bisect
import errno
import hashlib
import itertools
import json
import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from alk.redaction import Redactor

HARNESS = "harness"
WORKER = "worker"
# alk's observations that reach the disk at once, so that a transcript still says what happened
# if alk itself is killed (the worker's pid, a timeout); the rest waits for the buffer.
FLUSHED_TYPES = frozenset({"spawn", "timeout", "kill", "exit", "interrupted"})
# An event larger than this (or a quarter of the cap) is kept as an excerpt of its JSON.
MAX_EVENT_BYTES = 1024 * 1024
EXCERPT_CHARS = 2000


# What a held event costs beyond its bytes: the event's keys for a raw stderr line, and the
# objects that hold it in memory. The tail is counted with it, so that a flood of tiny events
# cannot hold more memory than the tail's share of the cap.
STDERR_EVENT_BYTES = 120
HELD_OBJECT_BYTES = 100
# Held events are grouped in batches of about this size, dropped a batch at a time.
BATCH_BYTES = 64 * 1024
# The tail waits in memory for the end (the head goes to disk as it comes): at most this much of
# it, so that N repeats at once (-j N) hold at most N times this, however much their workers
# write. Half of a small cap; 2 MiB of a large one (62 MiB of head, then, at the default 64).
TAIL_MAX_BYTES = 2 * 1024 * 1024
# Kept out of the tail's share for the `truncated` marker, so that the file stays within its cap.
MARKER_BYTES = 256
# Lines encoded at `close` are joined this many at a time, so that a tail of tiny events is not
# held as as many objects.
JOIN_LINES = 4096
# The head's lines are gathered up to this much and written with one call: whole lines only,
# so that a failed write can be cut back to where a line ends.
FLUSH_BYTES = 64 * 1024
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
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        self._size = 0  # bytes of whole lines in the file
        self._pending: list[tuple[int, float, bytes]] = []  # head lines not yet written
        self._pending_bytes = 0
        # The first write that failed: the runner judges it (runner.disk), the rest is kept.
        self.write_error: OSError | None = None
        self._hash = hashlib.sha256()
        self._redactor = redactor
        self._clock = clock
        self._t0 = clock()
        self._seq = 0
        tail_share = min(cap_bytes - cap_bytes // 2, TAIL_MAX_BYTES)
        self._head_left = cap_bytes - tail_share
        self._tail_cap = max(0, tail_share - MARKER_BYTES)
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
            self._flush()

    def worker(self, channel: str, type: str, payload: Mapping[str, Any]) -> None:
        self._append(WORKER, channel, type, payload)

    def observed(self, channel: str, type: str, payload: Mapping[str, Any]) -> None:
        """What alk itself saw on another channel than its own (the gateway's model calls):
        source harness, so that no worker line can pass for it."""
        self._append(HARNESS, channel, type, payload)

    @property
    def head_full(self) -> bool:
        """Past the head: what comes now goes to the tail (see `stderr_block`)."""
        return not self._head_left

    def stderr_lines(self, lines: list[tuple[bytes, bool]]) -> None:
        """The worker's stderr lines as (bytes, cut) from the line splitter, one event each."""
        t = round(self._clock() - self._t0, 4)
        at = 0
        while at < len(lines) and self._head_left:
            whole = at
            while whole < len(lines) and not lines[whole][1]:
                whole += 1
            if whole - at > 1:
                at += self._head_lines([raw for raw, _ in lines[at:whole]], t)
                continue
            raw, cut = lines[at]
            self._seq += 1
            self._place(self._seq, t, self._stderr_line(self._seq, t, raw, cut))
            at += 1
        for raw, cut in lines[at:]:
            self._seq += 1
            self._hold(self._seq, t, (raw, cut, t), len(raw) + STDERR_EVENT_BYTES)

    def _head_lines(self, raws: list[bytes], t: float) -> int:
        """Whole stderr lines bound for the head, decoded, redacted and escaped together: the
        events `_stderr_line` makes of each (a newline is one byte of UTF-8 and one character,
        `Redactor.redact_lines` redacts each line as alone, and where no backslash is left
        each newline is the only `\\n` of the escaped text). How many were placed before the
        head filled."""
        text = self._redactor.redact_lines(b"\n".join(raws).decode("utf-8", "replace"))
        if text.isascii() and not any(c in text for c in _ESCAPED):
            escaped = text.encode("ascii").split(b"\n")  # JSON escapes none of it
        elif "\\" in text:
            escaped = [_ascii_json(line).encode()[1:-1] for line in text.split("\n")]
        else:
            escaped = _ascii_json(text).encode()[1:-1].split(b"\\n")
        assert len(escaped) == len(raws)
        stamp, first = repr(t).encode(), self._seq + 1
        lines = [b'{"seq":%d,"t":%s%s"%s"}}\n' % (seq, stamp, _STDERR_PREFIX, piece)
                 for seq, piece in enumerate(escaped, first)]
        for index in [i for i, line in enumerate(lines) if len(line) > self._max_event]:
            lines[index] = self._stderr_line(first + index, t, raws[index], False)
        sizes = [*itertools.accumulate(map(len, lines))]
        # Placed as `_place` and `_write` would, a line at a time: flushed at the line that
        # brings the gathered lines to FLUSH_BYTES, the first that does not fit held.
        fit, at, done = bisect.bisect_right(sizes, self._head_left), 0, 0
        while at < fit:
            end = min(fit, 1 + bisect.bisect_left(sizes, done + FLUSH_BYTES - self._pending_bytes))
            self._pending += zip(range(first + at, first + end), itertools.repeat(t), lines[at:end])
            self._pending_bytes += sizes[end - 1] - done
            self._head_left -= sizes[end - 1] - done
            self._seq, at, done = first + end - 1, end, sizes[end - 1]
            if self._pending_bytes >= FLUSH_BYTES:
                self._flush()
                if not self._head_left:  # the write failed: the rest goes to the tail
                    return at
        if fit < len(lines):  # the first line of the tail
            self._seq += 1
            self._place(self._seq, t, lines[fit])
            return fit + 1
        return len(lines)

    def stderr_block(self, block: bytes, count: int) -> None:
        """`count` whole stderr lines, each ending in a newline and none over the line limit,
        as one block: past the head they are only counted and kept as they are, and made into
        events at `close` if they are still in the tail."""
        if self._head_left:
            self.stderr_lines([(line, False) for line in block.split(b"\n")[:-1]])
            return
        t = round(self._clock() - self._t0, 4)
        weight = len(block) + STDERR_EVENT_BYTES * count
        self._tail.append(_Batch(self._seq + 1, t, weight, count, block=block, bytes=weight))
        self._tail_bytes += self._tail[-1].size
        self._seq += count
        self._trim()

    def close(self) -> str:
        """Writes the tail, closes the file and returns the sha256 of its bytes."""
        if self.sha256 is not None:
            return self.sha256
        self._flush()
        tail = self._final_tail()
        if self._dropped_events:
            # The marker stands where the dropped events stood, with the first one's seq and t,
            # so that seq and t still only grow down the file.
            seq, t = self._first_dropped
            marker = {"dropped_events": self._dropped_events,
                      "dropped_bytes": self._dropped_bytes,
                      "seqs": [seq, seq + self._dropped_events - 1]}
            self._put(self._line(seq, t, HARNESS, HARNESS, "truncated", marker))
        for piece in tail:
            self._put(piece)
        # Ends at its last whole line, even where a failed write could not be cut back then;
        # durable before the repeat's journal record says it is finished (alk.result.journal).
        os.ftruncate(self._fd, self._size)
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        self.sha256 = self._hash.hexdigest()
        return self.sha256

    def abandon(self) -> None:
        """Closes without writing more (the file could not be written): what it holds is
        whole lines, the last write that failed cut back."""
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1
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
            self._write(seq, t, line)
            return
        self._head_left = 0
        self._hold(seq, t, line, len(line))

    def _hold(self, seq: int, t: float, item: Any, weight: int) -> None:
        """Adds one event to the tail: an encoded line, or a raw stderr line (bytes, cut, t),
        of `weight` bytes in the file. Events join the newest batch until it holds about
        BATCH_BYTES."""
        last = self._tail[-1] if self._tail else None
        if last is None or last.items is None or last.size >= BATCH_BYTES:
            self._tail.append(_Batch(seq, t, 0, 0, items=[]))
            last = self._tail[-1]
        assert last.items is not None
        last.items.append(item)
        last.count += 1
        last.bytes += weight
        last.size += weight + HELD_OBJECT_BYTES
        self._tail_bytes += weight + HELD_OBJECT_BYTES
        self._trim()

    def _trim(self) -> None:
        """Drops the oldest batches while the rest still fill the tail's share. The tail may
        hold one batch more than its share until `close` cuts it exactly: dropping event by
        event would cost a flood's every line."""
        while len(self._tail) > 1 and self._tail_bytes - self._tail[0].size >= self._tail_cap:
            oldest = self._tail.popleft()
            self._dropped(oldest)

    def _dropped(self, batch: _Batch) -> None:
        if not self._dropped_events or batch.seq < self._first_dropped[0]:
            self._first_dropped = (batch.seq, batch.t)
        self._tail_bytes -= batch.size
        self._dropped_events += batch.count
        self._dropped_bytes += batch.bytes

    def _final_tail(self) -> list[bytes]:
        """The tail's events encoded, newest first back, within the tail's share of the cap
        (held stderr lines had an estimated size: escapes may make them longer). What no
        longer fits joins the dropped events before it; kept lines are joined in pieces."""
        pieces: list[bytes] = []
        lines: list[bytes] = []
        size = 0
        while self._tail:
            batch = self._tail[-1]
            kept = kept_bytes = 0
            for line in self._newest_first(batch):
                if size + len(line) > self._tail_cap:
                    break
                lines.append(line)
                size += len(line)
                kept += 1
                kept_bytes += len(line)
                if len(lines) >= JOIN_LINES:
                    pieces.append(b"".join(reversed(lines)))
                    lines.clear()
            batch.count -= kept
            if batch.count:
                # It did not fit whole: what is left of it, and everything older, is dropped.
                batch.bytes = max(0, batch.bytes - kept_bytes)
                break
            self._tail.pop()
        if lines:
            pieces.append(b"".join(reversed(lines)))
        while self._tail:  # older than what fits
            self._dropped(self._tail.popleft())
        pieces.reverse()
        return pieces

    def _newest_first(self, batch: _Batch) -> Iterator[bytes]:
        """A batch's events as encoded lines, newest first; a block is walked back from its
        end, so that only what is kept is ever split or encoded."""
        if batch.items is not None:
            for index in range(len(batch.items) - 1, -1, -1):
                item = batch.items[index]
                yield item if type(item) is bytes else self._stderr_line(
                    batch.seq + index, item[2], item[0], item[1])
            return
        block = batch.block or b""
        end = len(block) - 1  # the newline that ends the last line
        for index in range(batch.count - 1, -1, -1):
            start = block.rfind(b"\n", 0, end) + 1
            yield self._stderr_line(batch.seq + index, batch.t, block[start:end], False)
            end = start - 1

    def _stderr_line(self, seq: int, t: float, raw: bytes, cut: bool) -> bytes:
        text = self._redactor.line(raw, cut)
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
            # The event's text is of redacted values already (escaped forms included).
            cut = self._redactor.cut(text, min(EXCERPT_CHARS, self._max_event // 8),
                                     redacted=True)
            event["payload"] = {"cut": True, "bytes": len(line), "excerpt": cut}
            line = self._encoder.encode(event).encode("ascii") + b"\n"
        return line

    def _write(self, seq: int, t: float, line: bytes) -> None:
        """A head line, written with the others gathered since the last write."""
        self._pending.append((seq, t, line))
        self._pending_bytes += len(line)
        if self._pending_bytes >= FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Writes the gathered head lines. When that fails they become the start of the tail,
        and so does all that comes after: the file keeps its whole lines, and `close` tries
        again once the repeat is over (its workspace emptied, there may be room)."""
        if not self._pending:
            return
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        try:
            self._put(b"".join(line for _, _, line in pending))
        except OSError as exc:
            if self.write_error is None:
                self.write_error = exc
            self._head_left = 0
            for seq, t, line in pending:
                self._hold(seq, t, line, len(line))

    def _put(self, data: bytes) -> None:
        """Writes whole lines at the end of the file, or none of them: a short or failed write
        is cut back to the last whole line, then raised."""
        view = memoryview(data)
        done = 0
        try:
            while done < len(data):
                written = os.pwrite(self._fd, view[done:], self._size + done)
                if written <= 0:
                    raise OSError(errno.EIO, f"{self.path}: nothing written")
                done += written
        except OSError:
            if done:
                os.ftruncate(self._fd, self._size)  # needs no room; only a dead disk refuses
            raise
        self._size += done
        self._hash.update(data)


_ascii_json = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
# What JSON escapes of ASCII text, but a newline.
_ESCAPED = ['"', "\\", "\x7f", *map(chr, range(10)), *map(chr, range(11, 32))]


@dataclass(slots=True)
class _Batch:
    """Events in the tail, numbered from `seq` (the first at time `t`): `items` (encoded lines,
    or raw stderr lines as (bytes, cut, t), encoded only if they are kept), or a `block` of
    `count` whole stderr lines made into events only if they are reached at `close`. `size`
    is what they are counted as against the tail's share, the objects holding them included."""

    seq: int
    t: float
    size: int
    count: int
    items: list[Any] | None = None
    block: bytes | None = None
    bytes: int = 0  # what they weigh in the file, as far as known before encoding
