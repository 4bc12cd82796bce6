"""What alk keeps of a worker's stderr: every line as a transcript event, and the last few
kilobytes for attribution (the traceback that ends a crash), both bounded however much a worker
writes, and at the speed of the pipe: past the transcript's head, the work done per read is a
count and the last lines, whatever number of lines the read held."""

from __future__ import annotations

from alk.redaction import Redactor, decode_cut
from alk.runner.lines import LineSplitter
from alk.transcript.writer import TranscriptWriter

# A Python 3.11+ traceback from framework code, chained or grouped, often runs past 4 KiB; a
# tail cut before its start loses the exceptions that led to the last one.
TAIL_CHARS = 16 * 1024
# A read is split into lines this much at a time: a megabyte of newlines would otherwise be a
# million objects at once.
SPLIT_BYTES = 64 * 1024


class StderrSink:
    def __init__(self, transcript: TranscriptWriter, redactor: Redactor, line_limit: int) -> None:
        self._transcript = transcript
        self._redactor = redactor
        self._lines = LineSplitter(line_limit)
        self._tail = bytearray()
        self._trimmed = False
        # Keep enough before the tail (4 bytes a character at most) that a secret across its
        # start is still redacted whole.
        self._keep = 4 * (TAIL_CHARS + redactor.longest)

    def feed(self, chunk: bytes) -> None:
        at = 0
        while at < len(chunk):
            if self._transcript.head_full:
                self._feed_block(chunk[at:] if at else chunk)
                return
            self._take(self._lines.feed(chunk[at:at + SPLIT_BYTES]))
            at += SPLIT_BYTES

    def flush(self) -> None:
        self._take(self._lines.flush())

    def tail(self) -> str:
        """The last lines, redacted, for attribution; starts with … when text was dropped."""
        # The kept bytes may begin inside a character: drop it rather than decode it as U+FFFD,
        # which would hide a secret's partial start from the redactor.
        return self._redactor.tail(decode_cut(bytes(self._tail), start=self._trimmed),
                                   TAIL_CHARS, self._trimmed)

    def _feed_block(self, chunk: bytes) -> None:
        """Past the transcript's head: the whole lines between the read's first and last
        newline are one block (none can be over the limit when the block is shorter), counted
        and kept as they are, never split here. The line the read completes, and the start of
        the next, go through the splitter."""
        first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
        if first == last or last - first > self._lines.limit:
            self._take(self._lines.feed(chunk))
            return
        self._take(self._lines.feed(chunk[:first + 1]))
        block = chunk[first + 1:last + 1]
        self._transcript.stderr_block(block, _newlines(block))
        self._keep_tail(block)
        self._take(self._lines.feed(chunk[last + 1:]))  # no newline: held, or cut if too long

    def _keep_tail(self, block: bytes) -> None:
        if len(block) >= self._keep:
            self._tail = bytearray(block[-self._keep:])
            self._trimmed = True
            return
        self._tail += block
        if len(self._tail) > self._keep:
            del self._tail[:-self._keep]
            self._trimmed = True

    def _take(self, lines: list[tuple[bytes, bool]]) -> None:
        if not lines:
            return
        self._transcript.stderr_lines(lines)
        # Only the last lines can reach the tail: walk back until there are enough.
        last: list[bytes] = []
        size = 0
        for raw, cut in reversed(lines):
            if cut:  # its partial end goes, as in the transcript
                raw = self._redactor.line(raw, cut).encode()
            last.append(raw)
            size += len(raw) + 1
            if size >= self._keep:
                break
        if size >= self._keep:  # what came before these lines is past the tail
            self._trimmed = self._trimmed or len(last) < len(lines) or bool(self._tail)
            self._tail = bytearray()
        self._keep_tail(b"\n".join(reversed(last)) + b"\n")


def _newlines(data: bytes) -> int:
    # numpy compares a megabyte at memory speed: five times bytes.count's single-byte loop.
    # Imported here, where a flood needs it, not by every `alk` command at start-up.
    import numpy as np

    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A))
