"""Splits a byte stream into lines in bounded memory. Pure: bytes in, lines out.

A line longer than the limit comes out once, cut at the limit and marked, and the rest of it up
to its newline is dropped: a worker can write one endless line without making alk hold it, and
the same output is cut the same way whatever sizes the reads happened to have.
"""

from __future__ import annotations


class LineSplitter:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._discarding = False

    def feed(self, chunk: bytes) -> list[tuple[bytes, bool]]:
        """The lines `chunk` completes, each as (line, cut)."""
        lines: list[tuple[bytes, bool]] = []
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            if self._discarding:
                self._discarding = False
            elif len(self._buffer) + newline - start > self.limit:
                self._buffer += chunk[start:start + self.limit - len(self._buffer)]
                lines.append((bytes(self._buffer), True))
            else:
                self._buffer += chunk[start:newline]
                lines.append((bytes(self._buffer), False))
            self._buffer.clear()
            start = newline + 1
        if not self._discarding:
            self._buffer += chunk[start:]
            if len(self._buffer) > self.limit:
                lines.append((bytes(self._buffer[:self.limit]), True))
                self._buffer.clear()
                self._discarding = True
        return lines

    def flush(self) -> list[tuple[bytes, bool]]:
        """A last line without a newline, at the end of the stream."""
        if not self._buffer:
            return []
        line = bytes(self._buffer)
        self._buffer.clear()
        return [(line, False)]
