"""The transcript's tail under floods: stderr held raw and in blocks, encoded only if kept;
the cap held exactly, the marker included; seq numbers whole; memory counted per object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alk.redaction import Redactor
from alk.runner.stderr import StderrSink
from alk.transcript.writer import HELD_OBJECT_BYTES, TranscriptWriter

CAP = 64 * 1024


def events(path: Path) -> list[dict]:
    def refuse(word: str) -> None:
        raise ValueError(word)
    return [json.loads(line, parse_constant=refuse) for line in path.read_bytes().splitlines()]


def flood(path: Path, feed, cap: int = CAP, secrets=()) -> TranscriptWriter:
    writer = TranscriptWriter(path, cap, Redactor(secrets), clock=lambda: 0.0)
    sink = StderrSink(writer, Redactor(secrets), 1024 * 1024)
    feed(writer, sink)
    sink.flush()
    writer.close()
    return writer


@pytest.mark.parametrize("shape", ["lines", "blocks", "mixed"])
def test_every_event_is_numbered_once_and_the_cap_holds_with_the_marker(tmp_path, shape):
    def feed(writer, sink):
        for n in range(3000):
            if shape in ("lines", "mixed") and n % 3 == 0:
                writer.worker("agent", "note", {"n": n})
            if shape == "lines":
                sink.feed(f"line {n}\n".encode())
            else:  # several whole lines a read: the block path past the head
                sink.feed(b"".join(f"line {n}.{k}\n".encode() for k in range(20)))
    path = tmp_path / "t.jsonl"
    flood(path, feed)
    found = events(path)
    assert path.stat().st_size <= CAP
    [marker] = [e for e in found if e["type"] == "truncated"]
    seqs = [e["seq"] for e in found if e["type"] != "truncated"]
    first, last = marker["payload"]["seqs"]
    assert marker["payload"]["dropped_events"] == last - first + 1
    # Before the marker 1..first-1, after it last+1.., nothing missing, nothing twice.
    assert seqs == list(range(1, first)) + list(range(last + 1, last + 1 + len(seqs) - first + 1))
    texts = [e["payload"]["text"] for e in found if e["channel"] == "stderr"]
    assert texts[-1] in ("line 2999", "line 2999.19")  # the newest is kept


def test_a_block_past_the_head_is_split_only_as_far_as_it_is_kept(tmp_path):
    # A megabyte of empty lines: a million events, of which only the tail's share is written.
    def feed(writer, sink):
        sink.feed(b"x" * (CAP // 2) + b"\n")  # the head is full
        sink.feed(b"\n" * (1024 * 1024))
    path = tmp_path / "t.jsonl"
    flood(path, feed)
    found = events(path)
    marker = next(e for e in found if e["type"] == "truncated")["payload"]
    assert marker["dropped_events"] + sum(e["channel"] == "stderr" for e in found) == 1024 * 1024 + 1
    assert path.stat().st_size <= CAP


@pytest.mark.slow
def test_tiny_events_are_counted_with_the_objects_that_hold_them(tmp_path):
    writer = TranscriptWriter(tmp_path / "t.jsonl", 16 * 1024 * 1024, Redactor(),
                              clock=lambda: 0.0)
    for n in range(400_000):
        writer.worker("agent", "x", {})
    held = sum(batch.count for batch in writer._tail)
    # Each held event is counted at its bytes and its objects: no more than the share allows.
    assert held * HELD_OBJECT_BYTES <= writer._tail_cap + 64 * 1024
    writer.close()


def test_the_attribution_tail_keeps_the_order_of_the_lines(tmp_path):
    def feed(writer, sink):
        sink.feed(b"x" * (CAP // 2) + b"\n")
        sink.feed(b"first\nsecond\nthird\npartial")
        sink.feed(b" end\n")
    writer = TranscriptWriter(tmp_path / "t.jsonl", CAP, Redactor(), clock=lambda: 0.0)
    sink = StderrSink(writer, Redactor(), 1024 * 1024)
    feed(writer, sink)
    sink.flush()
    assert sink.tail().splitlines()[-4:] == ["first", "second", "third", "partial end"]


def test_no_piece_of_a_non_ascii_secret_survives_a_cut_inside_a_character(tmp_path):
    secret = "значениеабвгдеёжзийклмн"  # two bytes a character
    pieces = {secret[i:i + 12] for i in range(len(secret) - 11)}
    # One long line: the tail keeps its last bytes, cut wherever the count falls; every
    # alignment with the secret's 46 bytes is tried.
    for shift in range(2 * len(secret)):
        writer = TranscriptWriter(tmp_path / "t.jsonl", CAP, Redactor([secret]),
                                  clock=lambda: 0.0)
        sink = StderrSink(writer, Redactor([secret]), 1024 * 1024)
        sink.feed((secret * 400 + "b" * shift + "\n").encode())
        sink.flush()
        tail = sink.tail()
        writer.close()
        assert not [p for p in pieces if p in tail], (shift, tail[:40])


def test_a_cut_stderr_line_loses_a_partial_secret_even_mid_character(tmp_path):
    secret = "значениеабвгдеёжзийклмн"
    for shift in range(3):
        path = tmp_path / f"t{shift}.jsonl"
        limit = 301 + shift
        writer = TranscriptWriter(path, CAP, Redactor([secret]), clock=lambda: 0.0)
        sink = StderrSink(writer, Redactor([secret]), limit)
        sink.feed(("b" * 290 + secret + "\n").encode())  # cut at `limit` bytes, inside it
        sink.flush()
        tail = sink.tail()
        writer.close()
        text = path.read_text()
        for blob in (tail, json.loads(text.splitlines()[0])["payload"]["text"]):
            assert not [secret[i:i + 6] for i in range(len(secret) - 5)
                        if secret[i:i + 6] in blob], blob
