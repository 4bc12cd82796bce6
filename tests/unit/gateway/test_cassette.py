"""Cassettes: requests normalized so that two runs of one script match, mismatches named by the
first path that differs, bad files refused with the file and line, and a record replayed."""

from __future__ import annotations

import inspect
import json

import pytest

from alk.errors import CassetteError
from alk.gateway.cassette import (
    MAX_CASSETTE_BYTES,
    Cassette,
    CassetteWriter,
    Entry,
    first_difference,
    normalize,
    redacted,
)
from alk.gateway.wire.bodies import response_body, stream_events
from alk.gateway.wire.reply import Reply, Usage
from alk.gateway.wire.upstream import reply_of_response
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


def test_the_previous_response_is_renamed_as_an_id_in_the_responses_api_only():
    one = normalize("responses", json.dumps({"previous_response_id": "resp_1", "input": [
        {"type": "function_call", "id": "fc_1", "call_id": "call_1"}]}).encode())
    assert one["previous_response_id"] == "id-3"
    assert normalize("responses", b'{"model": "m", "input": []}') == {"input": [],
                                                                      "model": "m"}
    # Chat has no such field: one sent there is a value like any other, kept as it is.
    assert normalize("chat", b'{"previous_response_id": "resp_1", "messages": []}') == {
        "messages": [], "previous_response_id": "resp_1"}


def test_tool_calls_without_an_id_are_kept_as_they_are():
    calls = [{"type": "function", "function": {"name": "a"}}, "odd", {"id": "call_7"}]
    normalized = normalize("chat", json.dumps({"messages": [
        {"role": "assistant", "tool_calls": calls}]}).encode())
    assert normalized["messages"][0]["tool_calls"] == [calls[0], "odd", {"id": "id-1"}]


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
    ({"a": [1]}, {"a": [1, 2]}, "a[1]: expected nothing, got 2"),
    ({"a": True}, {"a": False}, "a: expected true, got false"),
    ({"a": {"b": 1}}, {"a": 5}, "a: expected {\"b\": 1}, got 5"),
    ({"a": [1]}, {"a": 5}, "a: expected [1], got 5"),
    ({"a": 5}, {"a": "5"}, "a: expected 5, got '5'"),
    # Of several differences, the first key in sorted order is named.
    ({"b": 1, "a": 1, "c": 1}, {"c": 2, "b": 2, "a": 2}, "a: expected 1, got 2"),
    # A value that is not a text is quoted as JSON, keys sorted, other scripts as they are.
    ({"k": {"z": "é", "a": 1}}, {"k": 3}, "k: expected {\"a\": 1, \"z\": \"é\"}, got 3"),
])
def test_first_difference_tells_missing_extra_and_differently_typed_values(expected, actual,
                                                                          said):
    assert first_difference(expected, actual) == said


@pytest.mark.parametrize("value", [True, False, None, 0, 1.5, "x", [True, [None]],
                                   {"a": {"b": False}}])
def test_equal_values_of_every_kind_have_no_difference(value):
    assert first_difference({"v": value}, json.loads(json.dumps({"v": value}))) is None


def test_one_and_one_point_zero_are_one_number_but_true_is_not_one():
    assert first_difference({"a": 1}, {"a": 1.0}) is None
    assert first_difference({"a": 1}, {"a": True}) == "a: expected 1, got true"


def test_a_long_path_is_quoted_by_its_end():
    # PATH_CHARS (80) characters are quoted whole; a longer path keeps its last 79 after "…".
    whole = first_difference({"head": {"x" * 75: 1}}, {"head": {"x" * 75: 2}})
    assert whole == "head." + "x" * 75 + ": expected 1, got 2"
    cut = first_difference({"head": {"x" * 76: 1}}, {"head": {"x" * 76: 2}})
    assert cut == "…ad." + "x" * 76 + ": expected 1, got 2"


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
    reply = Reply(text=f"answer {call}")
    usage = Usage(3, 2)
    return Entry(api=api, request=request, status=200,
                 body=response_body(api, reply, model="m", call=call, usage=usage,
                                    created=0).decode(),
                 stream=True, fault=None,
                 events=tuple(frame.decode() for frame in stream_events(
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
    assert reply_of_response("chat", entry.body.encode()).text == "answer 1"
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


_GOOD = '"api": "chat", "request": {}, "status": 200, "body": ""'
_WHOLE_NUMBERS = "'repeat' and 'attempt' must be whole numbers >= 0"


@pytest.mark.parametrize(("line", "said"), [
    ("{not json", "expected one JSON object, not valid JSON"),
    ("[1, 2]", "expected a JSON object with api, request, status, body, stream, events, fault"),
    ('{"api": "completions"}', "'api' must be one of chat, responses, messages, gemini (the "
                              "format the call spoke), got 'completions'"),
    ('{"api": "chat", "request": [], "status": 200, "body": ""}',
     "'request' must be an object, got []"),
    ('{"api": "chat", "request": {}, "status": true, "body": ""}',
     "'status' must be an HTTP status (100 to 599), got true"),
    ('{"api": "chat", "request": {}, "status": 99, "body": ""}',
     "'status' must be an HTTP status (100 to 599), got 99"),
    ('{"api": "chat", "request": {}, "status": 600, "body": ""}',
     "'status' must be an HTTP status (100 to 599), got 600"),
    ('{"api": "chat", "request": {}, "status": "200", "body": ""}',
     "'status' must be an HTTP status (100 to 599), got '200'"),
    ('{"api": "chat", "request": {}, "status": 200, "body": 3}',
     "'body' must be the response body's text, got 3"),
    ("{" + _GOOD + ', "stream": 1}', "'stream' must be true or false, got 1"),
    ("{" + _GOOD + ', "events": [1]}', "'events' must be an array of the streamed frames' texts"),
    ("{" + _GOOD + ', "events": "e"}', "'events' must be an array of the streamed frames' texts"),
    ("{" + _GOOD + ', "fault": 5}', "'fault' must be null or a fault's name, got 5"),
    ("{" + _GOOD + ', "scenario": 7}', "'scenario' must be a scenario's id, got 7"),
    ("{" + _GOOD + ', "scenario": null}', "'scenario' must be a scenario's id, got null"),
    ("{" + _GOOD + ', "repeat": -1}', _WHOLE_NUMBERS),
    ("{" + _GOOD + ', "attempt": -1}', _WHOLE_NUMBERS),
    ("{" + _GOOD + ', "repeat": 1.0}', _WHOLE_NUMBERS),
    ("{" + _GOOD + ', "attempt": true}', _WHOLE_NUMBERS),
    ("{" + _GOOD + ', "repeat": "1"}', _WHOLE_NUMBERS),
])
def test_a_bad_line_is_refused_with_the_file_its_line_number_and_what_is_wrong(tmp_path, line,
                                                                              said):
    path = tmp_path / "bad.jsonl"
    path.write_text(_entry(1, {"a": 1}).line() + "\n\n" + line + "\n")
    with pytest.raises(CassetteError) as raised:
        Cassette.load(path)
    assert str(raised.value) == (f"{path} line 3: {said}; "
                                 f"fix the line, or record the cassette again")


@pytest.mark.parametrize("status", [100, 599])
def test_the_statuses_at_either_bound_load(tmp_path, status):
    path = tmp_path / "edge.jsonl"
    path.write_text('{"api": "chat", "request": {}, "status": %d, "body": ""}' % status)
    assert [entry.status for entry in Cassette.load(path)] == [status]


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


def test_an_entry_is_written_as_one_json_line_with_sorted_keys_and_loads_back_equal(tmp_path):
    entry = Entry(api="responses", request={"z": 1, "a": [2]}, status=201, body="café ☕",
                  stream=False, events=("e1", "e2"), fault="timeout", scenario="s1", repeat=2,
                  attempt=1)
    assert entry.line() == (
        '{"api": "responses", "attempt": 1, "body": "caf\\u00e9 \\u2615", "events": ["e1", '
        '"e2"], "fault": "timeout", "repeat": 2, "request": {"a": [2], "z": 1}, '
        '"scenario": "s1", "status": 201, "stream": false}')
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as writer:
        writer.add(entry)
    assert path.read_bytes() == entry.line().encode() + b"\n"
    (loaded,) = Cassette.load(path)
    assert loaded == entry and loaded.key == ("s1", 2, 1)


def test_the_temporary_file_is_hidden_beside_the_cassette(tmp_path):
    path = tmp_path / "run.jsonl"
    writer = CassetteWriter(path)
    (temporary,) = tmp_path.iterdir()
    assert temporary.name.startswith(".run.jsonl.") and temporary.name.endswith(".tmp")
    writer.discard()
    assert list(tmp_path.iterdir()) == []


def test_discarding_after_the_temporary_file_is_gone_does_not_fail(tmp_path):
    # discard runs on the way out of a failed run: it must not hide that run's error because a
    # cleanup of the folder got to the temporary file first.
    path = tmp_path / "run.jsonl"
    path.write_text("previous\n")
    writer = CassetteWriter(path)
    for stray in tmp_path.glob(".run.jsonl.*.tmp"):
        stray.unlink()
    writer.discard()
    writer.discard()
    assert path.read_text() == "previous\n"


# --- replaying the calls of one attempt --------------------------------------------------------


def _call(name: str, scenario: str = "", repeat: int = 0, attempt: int = 0) -> Entry:
    return Entry(api="chat", request={"ask": name}, status=200, body=name, stream=False,
                 events=(), fault=None, scenario=scenario, repeat=repeat, attempt=attempt)


@pytest.fixture
def recorded(tmp_path) -> Cassette:
    """A recorded run: scenario s in two repeats, the second retried once; scenario t once."""
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as writer:
        for entry in (_call("a1", "s", 1), _call("t1", "t", 1), _call("a2", "s", 1),
                      _call("b1", "s", 2), _call("c1", "s", 2, 1)):
            writer.add(entry)
    return Cassette.load(path)


def test_each_attempt_replays_its_own_calls_in_order(recorded):
    assert [e.body for e in recorded.calls("s", 1, 0)] == ["a1", "a2"]
    assert [e.body for e in recorded.calls("s", 2, 0)] == ["b1"]
    assert [e.body for e in recorded.calls("s", 2, 1)] == ["c1"]
    assert [e.body for e in recorded.calls("t", 1, 0)] == ["t1"]


def test_a_repeat_the_recording_did_not_reach_replays_the_recorded_ones_in_turn(recorded):
    assert [e.body for e in recorded.calls("s", 3, 0)] == ["a1", "a2"]
    assert [e.body for e in recorded.calls("s", 4, 0)] == ["b1"]
    assert [e.body for e in recorded.calls("s", 5, 0)] == ["a1", "a2"]
    # Only repeat 2 was retried: its retry stands in for every repeat's.
    assert [e.body for e in recorded.calls("s", 1, 1)] == ["c1"]


def test_a_scenario_or_attempt_the_recording_does_not_hold_replays_nothing(recorded):
    assert recorded.calls("u", 1, 0) == ()
    assert recorded.calls("t", 1, 1) == ()


def test_a_cassette_made_by_hand_replays_whole_for_every_attempt(tmp_path):
    calls = [_call("one"), _call("two")]
    cassette = Cassette(tmp_path / "hand.jsonl", calls)
    assert cassette.calls("s", 3, 1) == tuple(calls)
    assert cassette.match(2, "chat", {"ask": "two"}, key=("s", 3, 1)) == (calls[1], "")


def test_match_with_a_key_looks_among_that_attempts_calls(recorded, tmp_path):
    assert recorded.match(2, "chat", {"ask": "a2"}, key=("s", 1, 0)) == (_call("a2", "s", 1),
                                                                          "")
    assert recorded.match(1, "chat", {"ask": "b1"}, key=("s", 2, 0)) == (_call("b1", "s", 2),
                                                                          "")
    entry, why = recorded.match(2, "chat", {"ask": "b1"}, key=("s", 2, 0))
    assert entry is None and why == (f"call 2: the cassette {tmp_path / 'run.jsonl'} holds 1 "
                                     f"model calls for this attempt; record it again for a run "
                                     f"that makes more")
    entry, why = recorded.match(1, "chat", {"ask": "a1"}, key=("s", 2, 0))
    assert entry is None and why == "call 1: ask: expected 'b1', got 'a1'"


def test_a_mismatch_is_reported_with_the_runs_secrets_redacted(tmp_path):
    secret = "sk-live-0123456789"
    cassette = Cassette(tmp_path / "run.jsonl", [_call("token " + secret)])
    entry, why = cassette.match(1, "chat", {"ask": "token " + secret + "!"},
                                redactor=Redactor([secret]))
    assert entry is None and secret not in why and MASK in why


# --- what a recording holds: no secret, and no more than replay loads --------------------------

SECRET = "sk-live-0123456789"


def _leaky(secret: str = SECRET, **fields) -> Entry:
    """An entry with the secret in every text it has, the request's keys among them."""
    request = {"model": "m-" + secret, secret: {"deep": [secret, {secret: secret * 2}]},
               "messages": [{"role": "user", "name": secret, "content": f"use {secret}"},
                            {"role": "assistant", "tool_calls": [{"id": "id-1", "function": {
                                "arguments": json.dumps({"token": secret})}}]}]}
    return Entry(**{**dict(api="chat", request=request, status=200, body=f'{{"t": "{secret}"}}',
                           stream=True, events=(f"data: {secret}\n\n",), fault=secret,
                           scenario="s", repeat=1, attempt=1), **fields})


def test_the_writer_redacts_every_text_of_an_entry_its_keys_too(tmp_path):
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path, Redactor([SECRET])) as writer:
        assert writer.add(_leaky())
    data = path.read_text()
    assert "0123456789" not in data and MASK in data
    (entry,) = Cassette.load(path)
    assert entry.request == {
        MASK: {"deep": [MASK, {MASK: MASK + MASK}]}, "model": f"m-{MASK}", "messages": [
            {"content": f"use {MASK}", "name": MASK, "role": "user"},
            {"role": "assistant", "tool_calls": [{"function": {
                "arguments": f'{{"token": "{MASK}"}}'}, "id": "id-1"}]}]}
    assert (entry.body, entry.events, entry.fault) == (f'{{"t": "{MASK}"}}',
                                                       (f"data: {MASK}\n\n",), MASK)
    assert (entry.scenario, entry.repeat, entry.attempt) == ("s", 1, 1)


def test_a_writer_with_no_secrets_writes_the_entry_as_it_is(tmp_path):
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as writer:
        writer.add(_leaky())
    assert Cassette.load(path).entries == (_leaky(),)


def test_a_deep_request_is_redacted_without_recursion_and_its_keys_sorted(tmp_path):
    deep: dict = {"z": SECRET, "a": 1}
    for _ in range(5000):
        deep = {"next": [deep], SECRET: True}
    walked = redacted(deep, Redactor([SECRET]))
    for _ in range(5000):
        assert list(walked) == [MASK, "next"]
        walked = walked["next"][0]
    assert walked == {"a": 1, "z": MASK} and list(walked) == ["a", "z"]
    assert redacted(deep, Redactor()) is deep  # no secrets: nothing to walk


def test_keys_that_redact_to_one_are_one_key_the_first_in_order():
    assert redacted({"k" + SECRET: 2, "k" + MASK: 1}, Redactor([SECRET])) == {"k" + MASK: 1}
    assert redacted({"kz" + SECRET: 2, "ka" + SECRET: 1},
                    Redactor([SECRET])) == {"ka" + MASK: 1, "kz" + MASK: 2}


def test_a_redacted_recording_matches_the_request_it_was_made_of_and_no_other(tmp_path):
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path, Redactor([SECRET])) as writer:
        writer.add(_leaky())
    cassette = Cassette.load(path)
    sent = _leaky().request
    assert cassette.match(1, "chat", sent, redactor=Redactor([SECRET]))[1] == ""
    # A run with another value of the secret sends it instead: redacted, the same request.
    other = "sk-live-9876543210"
    assert cassette.match(1, "chat", _leaky(other).request, redactor=Redactor([other]))[1] == ""
    # What differs besides the secret is still a difference, quoted redacted.
    changed = {**sent, "messages": [{**sent["messages"][0], "content": f"use {SECRET}!"},
                                    sent["messages"][1]]}
    entry, why = cassette.match(1, "chat", changed, redactor=Redactor([SECRET]))
    assert entry is None and why == (f"call 1: messages[0].content: expected 'use {MASK}', "
                                     f"got 'use {MASK}!'")
    # A run that does not declare the secret sends it as a text like any other.
    entry, why = cassette.match(1, "chat", sent)
    assert entry is None and why.startswith(f"call 1: {MASK}: expected {{\"deep\"")


def test_a_cassette_made_before_redaction_matches_too(tmp_path):
    # Recorded unredacted, as alk did before: both sides redacted alike, still one request.
    cassette = Cassette(tmp_path / "old.jsonl", [_leaky()])
    assert cassette.match(1, "chat", _leaky().request, redactor=Redactor([SECRET]))[1] == ""


def test_writer_and_loader_share_one_limit():
    assert MAX_CASSETTE_BYTES == 64 * 1024 * 1024
    for method in (Cassette.load, CassetteWriter.__init__):
        assert inspect.signature(method).parameters["max_bytes"].default == MAX_CASSETTE_BYTES


def test_the_recording_stops_before_the_entry_that_would_pass_the_limit(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    first, second, small = _call("a", "s", 1), _call("bb", "s", 2), _call("c", "s", 2, 1)
    limit = len(first.line()) + len(second.line()) + 2  # the first two exactly, newlines too
    writer = CassetteWriter(path, max_bytes=limit)
    assert [writer.add(first), writer.add(second)] == [True, True]
    assert writer.problem is None and writer.size == limit
    assert writer.add(small) is False
    assert writer.refused == 1 and writer.size == limit
    assert writer.problem == (
        f"{path}: the recording stopped at {limit:,} bytes, the most a cassette holds (replay "
        f"loads no more): 1 model call(s) were not recorded, from scenario 's' repeat 2 "
        f"attempt 1 on (that attempt's replay stops where its recording did); record fewer "
        f"repeats or scenarios at a time (-n, --scenario), or calls that send less")
    assert capsys.readouterr().err == ""
    writer.close()
    assert capsys.readouterr().err == f"warning: {writer.problem}\n"
    assert path.stat().st_size == limit
    assert [e.body for e in Cassette.load(path, max_bytes=limit)] == ["a", "bb"]


def test_after_the_cut_nothing_is_recorded_not_even_a_call_that_would_fit(tmp_path):
    # A later call written after a refused one would leave a gap inside an attempt's calls,
    # which its replay would meet as a mismatch: the cassette is the calls up to the cut.
    path = tmp_path / "run.jsonl"
    first, big, small = _call("a", "s", 1), _call("b" * 500, "s", 2), _call("c", "t", 1)
    with CassetteWriter(path, max_bytes=len(first.line()) + len(small.line()) + 2) as writer:
        assert [writer.add(first), writer.add(big), writer.add(small)] == [True, False, False]
    assert writer.refused == 2 and "from scenario 's' repeat 2 attempt 0 on" in writer.problem
    assert [e.body for e in Cassette.load(path)] == ["a"]


def test_an_entry_larger_than_the_limit_leaves_an_empty_cassette_that_loads(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path, Redactor([SECRET]), max_bytes=100) as writer:
        assert writer.add(_call("x" * 200 + SECRET)) is False
    assert path.read_bytes() == b"" and len(Cassette.load(path)) == 0
    said = capsys.readouterr().err
    assert "1 model call(s) were not recorded" in said and "0123456789" not in said


def test_a_discarded_recording_says_nothing_of_its_cut(tmp_path, capsys):
    writer = CassetteWriter(tmp_path / "run.jsonl", max_bytes=10)
    writer.add(_call("a"))
    writer.discard()
    assert capsys.readouterr().err == "" and list(tmp_path.iterdir()) == []
