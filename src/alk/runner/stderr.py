"""What alk keeps of a worker's stderr: every line as a transcript event, and the last few
kilobytes for attribution (the traceback that ends a crash), both bounded however much a worker
writes, and at the speed of the pipe: the work done per read is a split, a count and the last
lines, whatever number of lines the read held."""

from __future__ import annotations

import numpy as np

from alk.redaction import Redactor
from alk.runner.lines import LineSplitter
from alk.transcript import TranscriptWriter

TAIL_CHARS = 4096


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
        first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
        if not self._transcript.head_full or first == last or last - first > self._lines.limit:
            self._take(self._lines.feed(chunk))
            return
        # Past the transcript's head, a read's whole lines between its first and last newline
        # are one block (none can be over the limit: the block is shorter): counted and kept
        # as they are, never split here. The line the read completes, and the start of the
        # next, go through the splitter.
        self._take(self._lines.feed(chunk[:first + 1]))
        block = chunk[first + 1:last + 1]
        self._transcript.stderr_block(block, _newlines(block))
        self._take(self._lines.feed(chunk[last + 1:]))  # no newline: held, or cut if too long
        self._keep_tail(block)

    def flush(self) -> None:
        self._take(self._lines.flush())

    def tail(self) -> str:
        """The last lines, redacted, for attribution; starts with … when text was dropped."""
        return self._redactor.tail(self._tail.decode("utf-8", "replace"), TAIL_CHARS,
                                   self._trimmed)

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
            if cut:
                # Cut inside what may be a secret: its end goes, as in the transcript.
                text = raw.decode("utf-8", "replace")
                raw = self._redactor.cut(text, len(text), truncated=True).encode()
            last.append(raw)
            size += len(raw) + 1
            if size >= self._keep:
                break
        if size >= self._keep:  # what came before these lines is past the tail
            self._trimmed = self._trimmed or len(last) < len(lines) or bool(self._tail)
            self._tail = bytearray()
        self._tail += b"\n".join(reversed(last)) + b"\n"
        if len(self._tail) > self._keep:
            del self._tail[:-self._keep]
            self._trimmed = True


def _newlines(data: bytes) -> int:
    # numpy compares a megabyte at memory speed: five times bytes.count's single-byte loop.
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A))
