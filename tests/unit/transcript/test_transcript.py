"""alk.transcript.writer and alk.redaction: what is written, bounded, hashed and read back, and that
no declared secret (or a piece of one) reaches the file."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any, Iterable

import pytest

from alk.errors import TranscriptError
from alk.redaction import MASK, MIN_SECRET_CHARS, Redactor
from alk.transcript.reader import read_transcript
from alk.transcript.writer import EXCERPT_CHARS, TranscriptWriter


def writer(path: Path, cap: int = 1024 * 1024, secrets: Iterable[str] = (),
           clock: Any = None) -> TranscriptWriter:
    """A writer with a frozen clock unless given one, so equal events give equal bytes."""
    return TranscriptWriter(path, cap, Redactor(secrets), clock=clock or (lambda: 0.0))


def lines(path: Path) -> list[dict[str, Any]]:
    """Every line must be valid JSON on its own (strict: no NaN, no bare words)."""
    def strict(word: str) -> None:
        raise ValueError(f"not JSON: {word}")
    return [json.loads(raw, parse_constant=strict) for raw in path.read_bytes().splitlines()]


def payload_text(path: Path, payload: dict[str, Any], secrets: Iterable[str]) -> tuple[bytes, Any]:
    """Writes one worker event; returns the file bytes and the payload read back."""
    with writer(path, secrets=secrets) as log:
        log.worker("agent", "message", payload)
    (event,) = lines(path)
    return path.read_bytes(), event["payload"]


# --- events --------------------------------------------------------------------------------


def test_events_carry_seq_time_source_channel_type_payload(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "t.jsonl"  # parent folders are created
    clock = itertools.count(100.0, 0.25).__next__
    with writer(path, clock=clock) as log:
        log.harness("spawn", {"argv": ["x"]})
        log.worker("tool", "call", {"name": "echo"})
        log.harness("exit")
    assert lines(path) == [
        {"seq": 1, "t": 0.25, "source": "harness", "channel": "harness", "type": "spawn",
         "payload": {"argv": ["x"]}},
        {"seq": 2, "t": 0.5, "source": "worker", "channel": "tool", "type": "call",
         "payload": {"name": "echo"}},
        {"seq": 3, "t": 0.75, "source": "harness", "channel": "harness", "type": "exit",
         "payload": {}},
    ]


def test_close_returns_the_sha256_of_the_file_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    log = writer(path)
    log.worker("agent", "message", {"text": "hello"})
    digest = log.close()
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert log.close() == digest  # closing twice writes nothing more


def test_text_is_stored_as_ascii_json_and_reads_back_whole(tmp_path: Path) -> None:
    # Escaped, a worker's bidi override or C1 control cannot reach a terminal that shows the
    # file raw; a JSON reader gets every character back.
    text = "héllo ☃ 日本 \u202e\u0085\u200b"
    raw, payload = payload_text(tmp_path / "t.jsonl", {"text": text}, ())
    assert payload == {"text": text}
    assert raw.isascii() and b"\\u2603" in raw and b"\\u202e" in raw


def test_a_lone_surrogate_keeps_the_line_valid(tmp_path: Path) -> None:
    raw, payload = payload_text(tmp_path / "t.jsonl", {"text": "a\ud800b", "ok": "ü"}, ())
    raw.decode("utf-8")  # the file is valid UTF-8
    assert payload == {"text": "a\ud800b", "ok": "ü"}


def test_an_event_over_the_per_event_bound_is_stored_as_an_excerpt(tmp_path: Path) -> None:
    cap = 16 * 1024  # per-event bound: cap // 4 = 4 KiB
    big = {"text": "x" * 10_000}
    with writer(tmp_path / "ref.jsonl") as log:  # the same event, uncapped, for its size
        log.worker("model", "response", big)
    full_size = len((tmp_path / "ref.jsonl").read_bytes())

    with writer(tmp_path / "t.jsonl", cap) as log:
        log.worker("model", "response", big)
    (event,) = lines(tmp_path / "t.jsonl")
    assert event["channel"] == "model" and event["type"] == "response"
    assert event["payload"]["cut"] is True
    assert event["payload"]["bytes"] == full_size
    excerpt = event["payload"]["excerpt"]
    assert excerpt.endswith("…") and len(excerpt) == min(EXCERPT_CHARS, cap // 4 // 8) + 1
    assert excerpt.startswith('{"seq":1,')


# --- the cap -------------------------------------------------------------------------------


def _events(log: TranscriptWriter, count: int) -> None:
    for number in range(1, count + 1):
        log.worker("agent", "message", {"n": number, "text": "y" * 60})


def test_cap_keeps_head_marker_and_tail(tmp_path: Path) -> None:
    cap, count = 4000, 300
    with writer(tmp_path / "ref.jsonl") as log:
        _events(log, count)
    sizes = {e["seq"]: len(raw) + 1 for e, raw in
             zip(lines(tmp_path / "ref.jsonl"), (tmp_path / "ref.jsonl").read_bytes().splitlines())}

    path = tmp_path / "t.jsonl"
    with writer(path, cap) as log:
        _events(log, count)
    events = lines(path)
    (mark,) = [i for i, e in enumerate(events) if e["type"] == "truncated"]
    head, marker, tail = events[:mark], events[mark], events[mark + 1:]

    head_seqs, tail_seqs = [e["seq"] for e in head], [e["seq"] for e in tail]
    assert head_seqs == list(range(1, len(head) + 1))
    assert tail_seqs == list(range(count - len(tail) + 1, count + 1))
    assert head and tail
    dropped = range(len(head) + 1, count - len(tail) + 1)
    assert marker["source"] == "harness" and marker["channel"] == "harness"
    assert marker["payload"] == {"dropped_events": len(dropped),
                                 "dropped_bytes": sum(sizes[s] for s in dropped),
                                 "seqs": [dropped[0], dropped[-1]]}
    # seq never goes backwards down the file: the marker takes the first dropped event's place.
    assert marker["seq"] == dropped[0]
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    assert sum(sizes[s] for s in head_seqs) <= cap // 2
    assert sum(sizes[s] for s in tail_seqs) <= cap - cap // 2
    assert path.stat().st_size <= cap  # the marker's room is kept out of the tail's share


def test_no_marker_under_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with writer(path, 1024 * 1024) as log:
        _events(log, 50)
    assert [e["seq"] for e in lines(path)] == list(range(1, 51))


# --- redaction in the transcript -----------------------------------------------------------


@pytest.mark.parametrize("secret", ['s3"cr\\et-value', "pässwörd-ü", "plain-token-123"])
def test_secrets_never_reach_the_file(tmp_path: Path, secret: str) -> None:
    raw, payload = payload_text(tmp_path / "t.jsonl",
                                {"text": f"before {secret} after", secret: [secret]}, [secret])
    assert payload == {"text": f"before {MASK} after", MASK: [MASK]}
    for form in (secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]):
        assert form.encode() not in raw


def test_secrets_are_redacted_in_excerpts(tmp_path: Path) -> None:
    secret = "hunter2-secret"
    with writer(tmp_path / "t.jsonl", 16 * 1024, [secret]) as log:
        log.worker("model", "response", {"text": f"{secret} " * 500})
    raw = (tmp_path / "t.jsonl").read_bytes()
    assert lines(tmp_path / "t.jsonl")[0]["payload"]["cut"] is True
    assert b"hunter" not in raw


@pytest.mark.parametrize("secret, payload, shown", [
    # Text is redacted; numbers and literals keep their JSON type (alk's own figures, such as
    # a pass rate, must never become strings), and JSON literals are not secrets at all.
    ("5432", {"port": 5432, "note": "db on 5432"}, {"port": 5432, "note": f"db on {MASK}"}),
    ("true", {"flag": True, "text": "true"}, {"flag": True, "text": "true"}),
    ("12.75", {"price": 12.75, "text": "costs 12.75"}, {"price": 12.75, "text": f"costs {MASK}"}),
])
def test_a_secret_spelled_like_a_json_value_keeps_the_line_valid(
        tmp_path: Path, secret: str, payload: dict[str, Any], shown: dict[str, Any]) -> None:
    path = tmp_path / "t.jsonl"
    with writer(path, secrets=[secret]) as log:
        log.worker("agent", "message", payload)
        log.harness("exit")
    events = lines(path)
    assert [e["type"] for e in events] == ["message", "exit"]
    assert events[0]["payload"] == shown


def test_structure_is_kept_when_only_the_payload_holds_a_secret(tmp_path: Path) -> None:
    # A secret that happens to spell a field name or a number alk writes must not garble them.
    path = tmp_path / "t.jsonl"
    with writer(path, secrets=["payload", "source"]) as log:
        log.worker("agent", "message", {"text": "the payload"})
    (event,) = lines(path)
    assert set(event) == {"seq", "t", "source", "channel", "type", "payload"}
    assert event["payload"] == {"text": f"the {MASK}"}


# --- the Redactor ---------------------------------------------------------------------------


def test_redact_replaces_raw_and_json_escaped_forms() -> None:
    secret = 'a"b\\c-é'
    redactor = Redactor([secret])
    text = f"raw {secret} | ascii {json.dumps(secret)[1:-1]} | " \
           f"utf8 {json.dumps(secret, ensure_ascii=False)[1:-1]}"
    assert redactor.redact(text) == f"raw {MASK} | ascii {MASK} | utf8 {MASK}"


def test_redact_value_walks_keys_and_items_and_keeps_numbers() -> None:
    redactor = Redactor(["hunter22", "4242"])
    value = {"hunter22": ["a hunter22", ("x", 4242, "4242")], "n": None, "ok": True, "m": 42}
    assert redactor.redact_value(value) == {MASK: [f"a {MASK}", ["x", 4242, MASK]], "n": None,
                                            "ok": True, "m": 42}
    assert Redactor().redact_value(value) is value


def test_json_literals_are_not_secrets() -> None:
    assert not Redactor(["false", "TRUE", "null"])


def test_short_values_are_not_secrets() -> None:
    short = "x" * (MIN_SECRET_CHARS - 1)
    redactor = Redactor([short])
    assert not redactor
    assert redactor.redact(f"{short} stays") == f"{short} stays"
    assert Redactor(["x" * MIN_SECRET_CHARS]).redact("xxxx") == MASK


def test_no_secrets_leaves_text_alone() -> None:
    assert not Redactor()
    assert Redactor().cut("abcdef", 3) == "abc…"


def test_cut_redacts_before_cutting() -> None:
    assert Redactor(["SECRETVALUE"]).cut("0123456789SECRETVALUE", 14) == "0123456789[RED…"


@pytest.mark.parametrize("limit", range(11, 21))
def test_cut_never_ends_with_a_piece_of_a_secret(limit: int) -> None:
    secret = "SECRETVALUE"
    # The text holds the secret's beginning but not all of it (its source was cut before).
    text = "0123456789" + secret[:-1] + " and more text after it"
    assert Redactor([secret]).cut(text, limit) == "0123456789…"


def test_cut_drops_a_piece_of_an_escaped_form() -> None:
    secret = 'ab"cdefgh'
    escaped = json.dumps(secret)[1:-1]  # ab\"cdefgh
    text = "xyz " + escaped[:5] + "!" * 20
    assert Redactor([secret]).cut(text, 9) == "xyz …"


def test_cut_under_the_limit_is_only_redacted() -> None:
    assert Redactor(["topsecret"]).cut("a topsecret b", 100) == f"a {MASK} b"


# --- reading ---------------------------------------------------------------------------------


def _write_raw(path: Path, *rows: bytes) -> Path:
    path.write_bytes(b"\n".join(rows))
    return path


GOOD = b'{"seq":1,"t":0,"source":"harness","channel":"harness","type":"spawn","payload":{}}'


def test_read_transcript_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with writer(path) as log:
        log.harness("spawn")
        log.worker("agent", "result", {"output": "ok"})
    assert [e["type"] for e in read_transcript(path)] == ["spawn", "result"]


def test_read_transcript_drops_a_cut_last_line(tmp_path: Path) -> None:
    path = _write_raw(tmp_path / "t.jsonl", GOOD, GOOD, b'{"seq":3,"t":0.1,"sou')
    assert len(read_transcript(path)) == 2


def test_read_transcript_rejects_a_bad_middle_line(tmp_path: Path) -> None:
    path = _write_raw(tmp_path / "t.jsonl", GOOD, b"garbage", GOOD)
    with pytest.raises(TranscriptError) as caught:
        read_transcript(path)
    assert str(caught.value).startswith(f"{path}:2: not a JSON event line; ")


def test_read_transcript_rejects_a_line_that_is_not_an_event(tmp_path: Path) -> None:
    path = _write_raw(tmp_path / "t.jsonl", GOOD, b'{"seq":2}', GOOD)
    with pytest.raises(TranscriptError) as caught:
        read_transcript(path)
    assert str(caught.value).startswith(f"{path}:2: not a transcript event ")


def test_read_transcript_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.jsonl"
    with pytest.raises(TranscriptError) as caught:
        read_transcript(path)
    assert str(caught.value) == f"{path}: cannot read the transcript: No such file or directory"


def test_tail_drops_a_leading_partial_secret_even_when_short() -> None:
    secret = "q7Z0k3-Xv9pL2m"
    redactor = Redactor([secret])
    # The caller cut the text's start in bytes: it begins inside the secret.
    text = secret[5:] + "é" * 10
    assert redactor.tail(text, 4096, truncated=True) == "…" + "é" * 10
    assert redactor.tail(secret + "é" * 10, 4096) == MASK + "é" * 10
