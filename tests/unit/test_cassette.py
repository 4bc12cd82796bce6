"""Cassettes: requests normalized so that two runs of one script match, mismatches named by the
first path that differs, bad files refused with the file and line, and a record replayed."""

from __future__ import annotations

import json

import pytest

from alk.gateway import wire
from alk.gateway.cassette import (Cassette, CassetteError, CassetteWriter, Entry,
                                  first_difference, normalize)
from alk.redaction import MASK, Redactor


def _chat_request(first_id: str, second_id: str, **extra) -> bytes:
    return json.dumps({"model": "m", "user": "u-1", "metadata": {"run": "1"},
                       "stream_options": {"include_usage": True}, **extra, "messages": [
        {"role": "user", "content": "go", "created_at": 17},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": first_id, "type": "function", "function": {"name": "a", "arguments": "{}"}},
            {"id": second_id, "type": "function", "function": {"name": "b", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": second_id, "content": "B"},
        {"role": "tool", "tool_call_id": first_id, "content": "A"}]}).encode()


def test_two_chat_requests_differing_only_in_ids_and_identifiers_normalize_equal():
    one = normalize("chat", _chat_request("call_x1", "call_x2"))
    two = normalize("chat", _chat_request("call_9f", "call_3c", user="u-2", metadata={}))
    assert one == two
    # Ids are numbered by first appearance, so the pairing of a call and its result survives.
    assert [call["id"] for call in one["messages"][1]["tool_calls"]] == ["id-1", "id-2"]
    assert [message.get("tool_call_id") for message in one["messages"][2:]] == ["id-2", "id-1"]
    assert not {"user", "metadata", "stream_options"} & set(one)
    assert "created_at" not in one["messages"][0]
    assert list(one) == sorted(one)


def test_a_swapped_pairing_of_calls_and_results_does_not_normalize_equal():
    one = _chat_request("c1", "c2")
    swapped = one.replace(b'"tool_call_id": "c2"', b'"tool_call_id": "X"').replace(
        b'"tool_call_id": "c1"', b'"tool_call_id": "c2"').replace(
        b'"tool_call_id": "X"', b'"tool_call_id": "c1"')
    assert normalize("chat", one) != normalize("chat", swapped)


def test_responses_call_ids_item_ids_and_the_previous_response_normalize():
    def request(call_id: str, item_id: str, previous: str) -> bytes:
        return json.dumps({"model": "m", "previous_response_id": previous, "input": [
            {"type": "function_call", "id": item_id, "call_id": call_id, "name": "a",
             "arguments": "{}"},
            {"type": "function_call_output", "call_id": call_id, "output": "x"}]}).encode()
    one = normalize("responses", request("call_1", "fc_1", "resp_1"))
    assert one == normalize("responses", request("call_z", "fc_z", "resp_z"))
    assert one["input"][0]["call_id"] == one["input"][1]["call_id"] == "id-2"
    assert one != normalize("responses", request("call_z", "call_z", "resp_z"))


@pytest.mark.parametrize("body", [b"", b"{", b"[1]", b'"text"', b"[" * 10_000])
def test_a_body_that_is_not_a_json_object_normalizes_to_none(body):
    assert normalize("chat", body) is None


def test_keys_are_sorted_at_every_depth():
    normalized = normalize("chat", b'{"z": {"b": 1, "a": [{"d": 1, "c": 2}]}, "messages": []}')
    assert json.dumps(normalized) == '{"messages": [], "z": {"a": [{"c": 2, "d": 1}], "b": 1}}'


# --- first_difference --------------------------------------------------------------------------


def test_first_difference_names_the_path_and_both_values():
    expected = {"model": "m", "messages": [{"role": "user", "content": "a"},
                                           {"role": "tool", "content": "b"}]}
    actual = {"model": "m", "messages": [{"role": "user", "content": "a"},
                                         {"role": "tool", "content": "c"}]}
    assert first_difference(expected, actual) == "messages[1].content: expected 'b', got 'c'"
    assert first_difference(expected, json.loads(json.dumps(expected))) is None


@pytest.mark.parametrize(("expected", "actual", "said"), [
    ({"a": 1}, {"a": 1, "b": 2}, "b: expected nothing, got 2"),
    ({"a": [1, 2]}, {"a": [1]}, "a[1]: expected 2, got nothing"),
    ({"a": True}, {"a": 1}, "a: expected true, got 1"),
    ({"a": "x"}, {"a": None}, "a: expected 'x', got null"),
    ([1], {"a": 1}, "request: expected [1], got {\"a\": 1}"),
])
def test_first_difference_tells_missing_extra_and_differently_typed_values(expected, actual,
                                                                          said):
    assert first_difference(expected, actual) == said


def test_first_difference_in_deeply_nested_values_does_not_recurse():
    deep_one: list = [1]
    deep_two: list = [2]
    for _ in range(5000):
        deep_one, deep_two = [deep_one], [deep_two]
    said = first_difference(deep_one, deep_two)
    assert said.endswith("expected 1, got 2") and len(said) <= 200


def test_a_long_text_is_quoted_from_just_before_where_it_differs_and_bounded():
    said = first_difference({"p": "x" * 1000 + "A" + "y" * 1000},
                            {"p": "x" * 1000 + "B" + "y" * 1000})
    assert len(said) <= 200
    assert "'…" + "x" * 20 + "A" in said and "x" * 20 + "B" in said


def test_a_secret_in_a_difference_is_redacted_before_it_is_cut():
    secret = "sk-live-0123456789"
    said = first_difference({"k": "token " + secret}, {"k": "token " + secret + "!"},
                            redactor=Redactor([secret]))
    assert secret not in said and MASK in said
    # Cut right inside the secret: no part of it survives.
    long_said = first_difference({"k": "x" * 50 + secret}, {"k": "y" * 50 + secret},
                                 redactor=Redactor([secret]))
    assert "sk-live" not in long_said
    # A secret just before the window kept around a late difference: the window is taken of
    # the redacted text, so it never starts inside the secret.
    late = "x" * 95 + secret + "y" * 11
    late_said = first_difference({"k": late + "A"}, {"k": late + "B"},
                                 redactor=Redactor([secret]))
    assert "0123456789" not in late_said and "yA" in late_said


# --- cassette files ----------------------------------------------------------------------------


def _entry(call: int, request: dict, api: str = "chat") -> Entry:
    reply = wire.Reply(text=f"answer {call}")
    usage = wire.Usage(3, 2)
    return Entry(api=api, request=request, status=200,
                 body=wire.response_body(api, reply, model="m", call=call, usage=usage,
                                         created=0).decode(),
                 stream=True, fault=None,
                 events=tuple(frame.decode() for frame in wire.stream_events(
                     api, reply, model="m", call=call, usage=usage, created=0)))


def test_a_recorded_cassette_replays_in_order_and_refuses_a_different_request(tmp_path):
    path = tmp_path / "run.jsonl"
    first = normalize("chat", _chat_request("c1", "c2"))
    second = normalize("chat", _chat_request("c1", "c2", temperature=0.5))
    writer = CassetteWriter(path)
    writer.add(_entry(1, first))
    assert not path.exists()  # nothing in place until the cassette is whole
    writer.add(_entry(2, second))
    writer.close()
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.add(_entry(3, first))
    assert [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]

    cassette = Cassette.load(path)
    assert len(cassette) == 2
    entry, why = cassette.match(1, "chat", normalize("chat", _chat_request("k9", "k8")))
    assert why == "" and entry == _entry(1, first)
    assert wire.reply_of_response("chat", entry.body.encode()).text == "answer 1"
    assert cassette.match(2, "chat", second)[0] == _entry(2, second)

    entry, why = cassette.match(2, "chat", first)
    assert entry is None and why == "call 2: temperature: expected 0.5, got nothing"
    entry, why = cassette.match(1, "responses", first)
    assert entry is None and why == "call 1: expected a chat request, got a responses request"
    entry, why = cassette.match(3, "chat", first)
    assert entry is None and why.startswith("call 3: the cassette") and "holds 2" in why


def test_a_writer_that_fails_leaves_the_previous_cassette_whole(tmp_path):
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as writer:
        writer.add(_entry(1, {"a": 1}))
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        with CassetteWriter(path) as writer:
            writer.add(_entry(1, {"a": 2}))
            raise RuntimeError("the run died")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]


@pytest.mark.parametrize(("line", "said"), [
    ("{not json", "expected one JSON object"),
    ("[1, 2]", "expected a JSON object"),
    ('{"api": "completions"}', "'api'"),
    ('{"api": "chat", "request": [], "status": 200, "body": ""}', "'request'"),
    ('{"api": "chat", "request": {}, "status": true, "body": ""}', "'status'"),
    ('{"api": "chat", "request": {}, "status": 200, "body": 3}', "'body'"),
    ('{"api": "chat", "request": {}, "status": 200, "body": "", "stream": 1}', "'stream'"),
    ('{"api": "chat", "request": {}, "status": 200, "body": "", "events": [1]}', "'events'"),
    ('{"api": "chat", "request": {}, "status": 200, "body": "", "fault": 5}', "'fault'"),
])
def test_a_bad_line_is_refused_with_the_file_and_its_line_number(tmp_path, line, said):
    path = tmp_path / "bad.jsonl"
    path.write_text(_entry(1, {"a": 1}).line() + "\n\n" + line + "\n")
    with pytest.raises(CassetteError) as raised:
        Cassette.load(path)
    message = str(raised.value)
    assert message.startswith(f"{path} line 3: ") and said in message
    assert message.endswith("record the cassette again")


def test_a_missing_or_oversized_cassette_is_refused(tmp_path):
    with pytest.raises(CassetteError, match="cannot read the cassette"):
        Cassette.load(tmp_path / "none.jsonl")
    path = tmp_path / "big.jsonl"
    path.write_text(_entry(1, {"a": 1}).line() + "\n")
    with pytest.raises(CassetteError, match="larger than 10 bytes"):
        Cassette.load(path, max_bytes=10)
    assert len(Cassette.load(path, max_bytes=path.stat().st_size)) == 1


def test_an_entry_without_events_or_fault_loads_as_not_streamed(tmp_path):
    path = tmp_path / "short.jsonl"
    path.write_text('{"api": "responses", "request": {"b": 1}, "status": 429, "body": "x"}')
    (entry,) = Cassette.load(path)
    assert entry == Entry("responses", {"b": 1}, 429, "x", False, (), None)
