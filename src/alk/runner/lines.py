"""Splits a byte stream into lines in bounded memory. Pure: bytes in, lines out.

A line longer than the limit comes out once, cut at the limit and marked, and the rest of it up
to its newline is dropped: a worker can write one endless line without making alk hold it, and
the same output is cut the same way whatever sizes the reads happened to have. A chunk is split
by `bytes.split` (in C), so that many short lines cost little each.
"""

from __future__ import annotations


class LineSplitter:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._discarding = False

    def feed(self, chunk: bytes) -> list[tuple[bytes, bool]]:
        """The lines `chunk` completes, each as (line, cut)."""
        if self._discarding:
            newline = chunk.find(b"\n")
            if newline < 0:
                return []
            self._discarding = False
            chunk = chunk[newline + 1:]
        parts = chunk.split(b"\n")
        partial = parts.pop()
        limit = self.limit
        lines: list[tuple[bytes, bool]] = []
        if parts:
            if self._buffer:
                self._buffer += parts[0]
                parts[0] = bytes(self._buffer)
                self._buffer.clear()
            lines = [(line, False) if len(line) <= limit else (line[:limit], True)
                     for line in parts]
        self._buffer += partial
        if len(self._buffer) > limit:
            lines.append((bytes(self._buffer[:limit]), True))
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
