"""The bounded line splitter: the same output is cut the same way whatever the read sizes."""

from __future__ import annotations

import pytest

from alk.runner.lines import LineSplitter

STREAM = b"short\n" + b"x" * 25 + b"\n" + b"y" * 7 + b"\nlast"


def split(data: bytes, size: int, limit: int = 10) -> list[tuple[bytes, bool]]:
    splitter = LineSplitter(limit)
    lines = []
    for start in range(0, len(data), size):
        lines += splitter.feed(data[start:start + size])
    return lines + splitter.flush()


@pytest.mark.parametrize("size", [1, 3, 7, 10, 11, 64, 1000])
def test_lines_and_cuts_do_not_depend_on_read_sizes(size: int) -> None:
    assert split(STREAM, size) == [(b"short", False), (b"x" * 10, True), (b"y" * 7, False),
                                   (b"last", False)]


def test_a_line_of_exactly_the_limit_is_not_cut() -> None:
    assert split(b"z" * 10 + b"\n", 4) == [(b"z" * 10, False)]


def test_an_endless_line_holds_no_more_than_the_limit() -> None:
    splitter = LineSplitter(16)
    out = []
    for _ in range(1000):
        out += splitter.feed(b"a" * 1000)
    assert out == [(b"a" * 16, True)] and len(splitter._buffer) == 0
