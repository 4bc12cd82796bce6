"""Reading a transcript back: every event, or a page of them on chosen channels, in bounded
memory. A transcript may hold whatever a hostile worker could make alk write, and a file on disk
may have been changed since: it is read one bounded line at a time, never whole, and a line alk
could not have written is an error that names the file and the line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Collection, Iterator

from alk.errors import TranscriptError, UsageError
from alk.transcript.writer import HARNESS, MAX_EVENT_BYTES
from alk.worker import CHANNELS as WORKER_CHANNELS

# alk writes no line longer than this, the newline included (a larger event keeps an excerpt):
# a longer line was not written by alk, and reading it whole is what a hostile file would want.
READ_LINE_BYTES = MAX_EVENT_BYTES
_CHANNEL_KEY = b'"channel":'
# Every channel alk writes: the protocol's, the worker's stderr, and alk's own.
CHANNELS = (*WORKER_CHANNELS, "stderr", HARNESS)


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


def check_channels(channels: Collection[str]) -> None:
    """Raises UsageError for a channel alk never writes: filtering on it would show nothing and
    look like a transcript with no such events."""
    unknown = [name for name in channels if name not in CHANNELS]
    if unknown:
        raise UsageError(f"--channel {unknown[0]!r}: no such channel; a transcript's channels "
                         f"are {', '.join(CHANNELS)}")


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
