"""Reading transcripts in bounded memory: one line at a time, each line bounded, a page parsed
and the rest only counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alk.errors import TranscriptError
from alk.redaction import Redactor
from alk.transcript.reader import READ_LINE_BYTES, iter_transcript, read_page
from alk.transcript.writer import TranscriptWriter


def line(seq: int, channel: str = "stderr", payload: dict | None = None,
         source: str = "worker") -> bytes:
    event = {"seq": seq, "t": seq / 1000, "source": source, "channel": channel, "type": "line",
             "payload": payload if payload is not None else {"text": f"line {seq}"}}
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def write(path: Path, *lines: bytes) -> Path:
    path.write_bytes(b"".join(lines))
    return path


def mixed(tmp_path: Path, n: int = 30) -> Path:
    """Every third event on the tool channel: seqs 3, 6, 9, ..."""
    return write(tmp_path / "t.jsonl",
                 *(line(seq, "tool" if seq % 3 == 0 else "stderr") for seq in range(1, n + 1)))


def test_iter_transcript_reads_what_the_writer_wrote(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, 1 << 20, Redactor([])) as log:
        log.harness("spawn", {"pid": 1})
        log.worker("tool", "call", {"name": "echo", "args": {"text": "\u202e"}})
    events = list(iter_transcript(path))
    assert [e["type"] for e in events] == ["spawn", "call"]
    assert events[1]["payload"]["args"]["text"] == "\u202e"


def test_a_line_longer_than_alk_writes_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", line(1), b'{"seq":2,"x":"' + b"x" * READ_LINE_BYTES,
                 b'"}\n', line(3))
    with pytest.raises(TranscriptError) as caught:
        list(iter_transcript(path))
    assert str(caught.value).startswith(f"{path}:2: line longer than {READ_LINE_BYTES} bytes")


def test_a_line_of_exactly_the_bound_is_read(tmp_path: Path) -> None:
    head = line(1, payload={"text": ""})
    pad = READ_LINE_BYTES - len(head)
    path = write(tmp_path / "t.jsonl", line(1, payload={"text": "x" * pad}), line(2))
    assert [e["seq"] for e in iter_transcript(path)] == [1, 2]


def test_a_cut_last_line_is_dropped_and_a_bad_middle_line_named(tmp_path: Path) -> None:
    cut = write(tmp_path / "cut.jsonl", line(1), line(2), line(3)[:20])
    assert [e["seq"] for e in iter_transcript(cut)] == [1, 2]
    bad = write(tmp_path / "bad.jsonl", line(1), b"garbage\n", line(3))
    with pytest.raises(TranscriptError, match=r"bad\.jsonl:2: not a JSON event line"):
        list(iter_transcript(bad))
    deep = write(tmp_path / "deep.jsonl", line(1), b"[" * 100_000 + b"]" * 100_000 + b"\n",
                 line(3))
    with pytest.raises(TranscriptError, match=r"deep\.jsonl:2: not a JSON event line"):
        list(iter_transcript(deep))


def test_read_page_parses_only_the_page_and_counts_the_rest(tmp_path: Path) -> None:
    path = mixed(tmp_path)
    seen = []
    page = read_page(path, 11, 5, digest=lambda event: seen.append(event["seq"]) or event["seq"])
    assert page.rows == seen == [11, 12, 13, 14, 15]
    assert (page.first, page.matching, page.total) == (11, 30, 30)


def test_read_page_counts_positions_among_the_chosen_channels(tmp_path: Path) -> None:
    path = mixed(tmp_path)
    page = read_page(path, 4, 3, channels=["tool"], digest=lambda event: event["seq"])
    assert page.rows == [12, 15, 18]
    assert (page.matching, page.total) == (10, 30)
    assert read_page(path, 1, 100, channels=["tool", "stderr"]).matching == 30
    assert read_page(path, 1, 100, channels=["model"]).rows == []


def test_a_channel_named_inside_a_payload_is_not_the_events_own(tmp_path: Path) -> None:
    forged = line(2, "stderr", payload={"nested": {"channel": "tool"}})
    assert b'"channel":"tool"' in forged
    path = write(tmp_path / "t.jsonl", line(1, "tool"), forged, line(3, "tool"))
    page = read_page(path, 1, 10, channels=["tool"], digest=lambda event: event["seq"])
    assert page.rows == [1, 3] and page.matching == 2


def test_channels_match_in_ascii_escapes_too(tmp_path: Path) -> None:
    escaped = json.dumps({"seq": 1, "t": 0, "source": "worker", "channel": "é", "type": "x",
                          "payload": {}}, separators=(",", ":"), ensure_ascii=True)
    path = write(tmp_path / "t.jsonl", escaped.encode() + b"\n", line(2))
    assert read_page(path, 1, 10, channels=["é"]).matching == 1


def test_read_page_drops_a_cut_last_line_from_the_counts(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", line(1, "tool"), line(2, "tool"), line(3, "tool")[:25])
    assert read_page(path, 1, 1, channels=["tool"]).matching == 2
    page = read_page(path, 1, 10, digest=lambda event: event["seq"])
    assert page.rows == [1, 2] and page.total == 2


def test_read_page_past_the_end_is_empty_with_the_counts(tmp_path: Path) -> None:
    page = read_page(mixed(tmp_path), 31, 10)
    assert page.rows == [] and page.matching == 30


def test_a_missing_transcript_is_named(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="absent.jsonl: cannot read the transcript"):
        read_page(tmp_path / "absent.jsonl", 1, 10)
