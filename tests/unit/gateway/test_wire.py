"""The gateway's wire formats, read by the real `openai` client (and the frameworks built on it)
through an in-process transport: no network, no server. What the client parses is what a worker
inside its isolation would get."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alk.cost import MAX_CALL_TOKENS
from alk.gateway.wire.bodies import (
    error_body,
    malformed_body,
    malformed_stream,
    models_body,
    response_body,
    stream_events,
    truncated_body,
    truncated_stream,
)
from alk.gateway.wire.reply import (
    Reply,
    ToolCall,
    Usage,
    broken_arguments,
    estimate_usage,
    reply_from_turn,
)
from alk.gateway.wire.formats import read_request
from alk.gateway.wire.request import MAX_TOOLS, MODEL_CHARS, TOOL_NAME_CHARS, Asked
from alk.gateway.wire.upstream import (
    reply_of_events,
    reply_of_response,
    usage_of_events,
    usage_of_response,
)

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")  # the openai client's own

USAGE = Usage(prompt_tokens=12, completion_tokens=5)
TEXT = Reply(text="The report is written to report.md.")
ONE_CALL = Reply(tool_calls=(ToolCall("read_file", '{"path":"notes/a.txt"}'),))
TWO_CALLS = Reply(tool_calls=(ToolCall("read_file", '{"path":"a.txt"}'),
                              ToolCall("write_file", '{"path":"b.txt","text":"héllo"}')))
MESSAGES = [{"role": "user", "content": "write the report"}]


def _respond(api, reply, *, stream, call=3, cut=False, status=200):
    """A transport handler serving `reply` as alk's gateway would."""
    def handler(request: httpx.Request) -> httpx.Response:
        if stream:
            frames = stream_events(api, reply, model="scripted", call=call, usage=USAGE,
                                   created=1700000000)
            body = truncated_stream(frames) if cut else b"".join(frames)
            return httpx.Response(status, headers={"content-type": "text/event-stream"},
                                  content=body)
        body = response_body(api, reply, model="scripted", call=call, usage=USAGE,
                             created=1700000000)
        return httpx.Response(status, headers={"content-type": "application/json"},
                              content=body)
    return handler


def _client(handler):
    return openai.OpenAI(base_url="http://gw/v1", api_key="k", max_retries=0,
                         http_client=httpx.Client(transport=httpx.MockTransport(handler)))


def _chat(handler, **options):
    return _client(handler).chat.completions.create(model="scripted", messages=MESSAGES,
                                                    **options)


# --- Chat Completions --------------------------------------------------------------------------


def test_a_chat_text_reply_parses_with_its_id_finish_reason_and_usage():
    completion = _chat(_respond("chat", TEXT, stream=False))
    assert completion.id == "chatcmpl-alk-3"
    assert completion.model == "scripted" and completion.created == 1700000000
    choice = completion.choices[0]
    assert choice.message.content == TEXT.text and choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens,
            completion.usage.total_tokens) == (12, 5, 17)


def test_a_chat_reply_with_two_tool_calls_parses_each_name_arguments_and_id():
    completion = _chat(_respond("chat", TWO_CALLS, stream=False))
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert [(call.id, call.type, call.function.name, call.function.arguments)
            for call in choice.message.tool_calls] == [
        ("call_alk_3_0", "function", "read_file", '{"path":"a.txt"}'),
        ("call_alk_3_1", "function", "write_file", '{"path":"b.txt","text":"héllo"}')]


def test_a_streamed_chat_text_is_joined_from_several_deltas_with_usage_last():
    chunks = list(_chat(_respond("chat", TEXT, stream=True), stream=True))
    texts = [chunk.choices[0].delta.content for chunk in chunks
             if chunk.choices and chunk.choices[0].delta.content]
    assert len(texts) > 1 and "".join(texts) == TEXT.text
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    assert {chunk.id for chunk in chunks} == {"chatcmpl-alk-3"}


def test_the_sdks_chat_stream_helper_accumulates_two_tool_calls_by_index():
    client = _client(_respond("chat", TWO_CALLS, stream=True))
    with client.chat.completions.stream(model="scripted", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [(call.id, call.function.name, call.function.arguments)
            for call in choice.message.tool_calls] == [
        ("call_alk_3_0", "read_file", '{"path":"a.txt"}'),
        ("call_alk_3_1", "write_file", '{"path":"b.txt","text":"héllo"}')]
    assert final.usage.prompt_tokens == 12


def test_a_reply_with_a_text_and_a_tool_call_carries_both():
    both = Reply(text="Reading it first.", tool_calls=ONE_CALL.tool_calls)
    message = _chat(_respond("chat", both, stream=False)).choices[0].message
    assert message.content == "Reading it first." and message.tool_calls[0].id == "call_alk_3_0"
    response = _client(_respond("responses", both, stream=False)).responses.create(
        model="scripted", input="go")
    assert response.output_text == "Reading it first."
    assert [item.type for item in response.output] == ["message", "function_call"]


# --- Responses ---------------------------------------------------------------------------------


def test_a_responses_text_reply_parses_with_its_ids_and_usage():
    response = _client(_respond("responses", TEXT, stream=False)).responses.create(
        model="scripted", input="write the report")
    assert response.id == "resp_alk_3" and response.status == "completed"
    assert response.output_text == TEXT.text and response.output[0].id == "msg_alk_3"
    assert (response.usage.input_tokens, response.usage.output_tokens,
            response.usage.total_tokens) == (12, 5, 17)


def test_a_responses_reply_with_two_function_calls_parses_each():
    response = _client(_respond("responses", TWO_CALLS, stream=False)).responses.create(
        model="scripted", input=[{"role": "user", "content": "go"}])
    assert [(item.type, item.call_id, item.id, item.name, item.arguments)
            for item in response.output] == [
        ("function_call", "call_alk_3_0", "fc_alk_3_0", "read_file", '{"path":"a.txt"}'),
        ("function_call", "call_alk_3_1", "fc_alk_3_1", "write_file",
         '{"path":"b.txt","text":"héllo"}')]
    assert response.output_text == ""


@pytest.mark.parametrize("reply", [TEXT, TWO_CALLS,
                                   Reply(text="Both.", tool_calls=ONE_CALL.tool_calls)])
def test_the_sdks_responses_stream_helper_ends_with_the_whole_response(reply):
    client = _client(_respond("responses", reply, stream=True))
    with client.responses.stream(model="scripted", input="go") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert final.id == "resp_alk_3" and final.usage.output_tokens == 5
    assert final.output_text == (reply.text or "")
    assert [(item.name, item.arguments, item.call_id) for item in final.output
            if item.type == "function_call"] == [
        (call.name, call.arguments, f"call_alk_3_{index}")
        for index, call in enumerate(reply.tool_calls)]
    # The deltas, joined as the client sees them, are the whole text and arguments.
    assert "".join(event.delta for event in events
                   if event.type == "response.output_text.delta") == (reply.text or "")
    if reply.tool_calls:
        assert "".join(event.delta for event in events
                       if event.type == "response.function_call_arguments.delta"
                       and event.output_index == (reply.text is not None)
                       ) == reply.tool_calls[0].arguments


def test_a_responses_stream_frames_name_their_event_and_carry_the_same_type():
    frames = stream_events("responses", TEXT, model="m", call=1, usage=USAGE, created=0)
    for frame in frames:
        event_line, data_line, *_ = frame.split(b"\n")
        assert frame.endswith(b"\n\n")
        assert event_line[len(b"event: "):] == json.loads(data_line[len(b"data: "):])[
            "type"].encode()


def test_two_builds_of_one_reply_are_the_same_bytes():
    for api in ("chat", "responses"):
        one = stream_events(api, TWO_CALLS, model="m", call=7, usage=USAGE, created=1)
        two = stream_events(api, TWO_CALLS, model="m", call=7, usage=USAGE, created=1)
        assert one == two
        assert response_body(api, TEXT, model="m", call=7, usage=USAGE, created=1) == \
            response_body(api, TEXT, model="m", call=7, usage=USAGE, created=1)


# --- faults ------------------------------------------------------------------------------------


def test_a_truncated_stream_ends_mid_message_never_on_a_whole_frame():
    frames = stream_events("chat", TWO_CALLS, model="m", call=1, usage=USAGE, created=0)
    cut = truncated_stream(frames)
    whole = len(frames) // 2
    assert cut.startswith(b"".join(frames[:whole]))
    rest = cut[len(b"".join(frames[:whole])):]
    assert rest and frames[whole].startswith(rest) and rest != frames[whole]
    assert not cut.endswith(b"\n\n")
    assert truncated_stream([]) == b""


def test_a_truncated_chat_stream_that_closes_cleanly_ends_without_finish_reason():
    """What the SDK does with the bytes alone: the partial last event is dropped and the
    iteration simply stops; nothing raises. The helper's final completion has no finish reason
    and the tool call's arguments are incomplete."""
    client = _client(_respond("chat", ONE_CALL, stream=True, cut=True))
    chunks = list(client.chat.completions.create(model="scripted", messages=MESSAGES,
                                                 stream=True))
    assert chunks and all(chunk.choices[0].finish_reason is None for chunk in chunks)
    with client.chat.completions.stream(model="scripted", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].finish_reason is None
    assert final.choices[0].message.tool_calls[0].function.arguments != ONE_CALL.tool_calls[
        0].arguments


def test_a_truncated_responses_stream_makes_the_stream_helper_raise():
    client = _client(_respond("responses", TEXT, stream=True, cut=True))
    events = list(client.responses.create(model="scripted", input="go", stream=True))
    assert events and "response.completed" not in [event.type for event in events]
    with pytest.raises(RuntimeError, match="response.completed"):
        with client.responses.stream(model="scripted", input="go") as stream:
            stream.get_final_response()


class _ClosedMidBody(httpx.SyncByteStream):
    """A body whose connection closes before its chunked encoding ends, as a server that cuts
    the stream and closes the socket leaves it."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __iter__(self):
        yield self.data
        raise httpx.RemoteProtocolError("peer closed connection without sending complete "
                                        "message body (incomplete chunked read)")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_truncated_stream_on_a_closed_connection_raises_api_connection_error(api):
    frames = stream_events(api, TEXT, model="m", call=1, usage=USAGE, created=0)

    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=_ClosedMidBody(truncated_stream(frames)))

    client = _client(handler)
    stream = (client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
              if api == "chat" else client.responses.create(model="m", input="go", stream=True))
    with pytest.raises(openai.APIConnectionError):
        list(stream)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_malformed_or_cut_body_makes_the_client_raise_a_json_error(api):
    """The SDK does not wrap it: a 200 whose body is not JSON raises json.JSONDecodeError."""
    for body in (malformed_body(api, 4),
                 truncated_body(response_body(api, TEXT, model="m", call=4,
                                              usage=USAGE, created=0))):
        def handler(request, body=body):
            return httpx.Response(200, headers={"content-type": "application/json"},
                                  content=body)
        client = _client(handler)
        with pytest.raises(json.JSONDecodeError):
            if api == "chat":
                client.chat.completions.create(model="m", messages=MESSAGES)
            else:
                client.responses.create(model="m", input="go")
    # A whole object, not a cut one: only its one unquoted key breaks it.
    malformed = malformed_body(api, 4)
    assert malformed.startswith(b"{") and malformed.endswith(b"}")
    key = "choices" if api == "chat" else "output"
    assert key in json.loads(malformed.replace(f",{key}:".encode(), f',"{key}":'.encode(), 1))


@pytest.mark.parametrize(("status", "error", "code"), [
    (400, openai.BadRequestError, None), (401, openai.AuthenticationError, "invalid_api_key"),
    (404, openai.NotFoundError, "not_found"), (429, openai.RateLimitError, "rate_limit_exceeded"),
    (500, openai.InternalServerError, None), (503, openai.InternalServerError, None)])
def test_an_error_body_reaches_the_client_as_its_error_with_the_message(status, error, code):
    def handler(request):
        return httpx.Response(status, headers={"content-type": "application/json"},
                              content=error_body(status, "alk: no more turns"))
    with pytest.raises(error) as raised:
        _chat(handler)
    assert raised.value.status_code == status
    assert raised.value.message.endswith("alk: no more turns")
    assert raised.value.code == code
    assert raised.value.type == ("server_error" if status >= 500 else
                                 "requests" if status == 429 else "invalid_request_error")


def test_broken_arguments_are_not_json_and_reach_the_client_as_sent():
    broken = broken_arguments(TWO_CALLS)
    for call in broken.tool_calls:
        with pytest.raises(json.JSONDecodeError):
            json.loads(call.arguments)
    calls = _chat(_respond("chat", broken, stream=False)).choices[0].message.tool_calls
    assert [call.function.arguments for call in calls] == [
        call.arguments for call in broken.tool_calls]
    assert [call.function.name for call in calls] == ["read_file", "write_file"]
    assert broken_arguments(Reply(tool_calls=(ToolCall("t", "{}"),))).tool_calls[
        0].arguments == '{"'


def test_the_models_list_parses():
    def handler(request):
        return httpx.Response(200, content=models_body(["scripted"], created=1))
    assert [model.id for model in _client(handler).models.list()] == ["scripted"]


# --- turns and usage ---------------------------------------------------------------------------


def test_a_script_turn_becomes_a_reply():
    assert reply_from_turn({"text": "done"}) == Reply(text="done")
    assert reply_from_turn({"tool": "write", "args": {"path": "é", "n": [1, 2]}}) == Reply(
        tool_calls=(ToolCall("write", '{"path":"é","n":[1,2]}'),))
    assert reply_from_turn({"tool": "write"}).tool_calls[0].arguments == "{}"
    assert reply_from_turn({"tool": "write", "raw": '{"path": '}).tool_calls == (
        ToolCall("write", '{"path": '),)
    for bad in ({}, {"tool": 3}, {"tool": "t", "raw": {}}, {"text": 1}):
        with pytest.raises(ValueError):
            reply_from_turn(bad)


def test_usage_is_about_four_bytes_a_token_and_at_least_one():
    asked = read_request("chat", json.dumps({"model": "m", "messages": MESSAGES}).encode())
    assert estimate_usage(asked, Reply(text="x" * 40)) == Usage(asked.chars // 4, 10)
    calls = Reply(tool_calls=(ToolCall("abcd", "e" * 12),))
    assert estimate_usage(asked, calls).completion_tokens == 4
    tiny = Asked("chat", "m", False, (), 1, 0, chars=2)
    assert estimate_usage(tiny, Reply(text="")) == Usage(1, 1)


# --- reading requests --------------------------------------------------------------------------


def test_a_chat_request_is_read_with_its_tools_and_tool_results():
    body = json.dumps({"model": "gpt-x", "stream": True, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "text"}],
        "tools": [{"type": "function", "function": {"name": "read", "parameters": {}}},
                  {"type": "function", "function": {"name": "write"}}]}).encode()
    assert read_request("chat", body) == Asked(
        "chat", "gpt-x", True, ("read", "write"), items=3, tool_results=1, chars=len(body),
        answered=1)


def test_a_responses_request_is_read_from_a_string_or_items():
    assert read_request("responses", b'{"model":"m","input":"hi"}').items == 1
    body = json.dumps({"model": "m", "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "x"}],
        "tools": [{"type": "function", "name": "read"}, {"type": "web_search"}]}).encode()
    asked = read_request("responses", body)
    assert (asked.items, asked.tool_results, asked.tools, asked.stream) == (3, 1, ("read",),
                                                                             False)


@pytest.mark.parametrize(("body", "problem"), [
    (b"", "not JSON"), (b"\xff\xfe{", "not JSON"), (b"[1]", "JSON object"),
    (b'{"messages": [{}]}', "'model'"), (b'{"model": "m"}', "'messages'"),
    (b'{"model": "m", "messages": []}', "'messages'"),
    (b'{"model": "m", "messages": [{}], "stream": "yes"}', "'stream'"),
    (b'{"model": "m", "messages": [{}], "n": NaN}', "not JSON"),
    (b"[" * 100_000, "not JSON"),
    (b'{"model": "m", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}", "not JSON"),
])
def test_a_bad_request_is_a_problem_not_an_exception(body, problem):
    result = read_request("chat", body)
    assert isinstance(result, str) and problem in result


def test_what_a_request_shapes_is_bounded():
    body = json.dumps({"model": "m" * 10_000, "messages": [{}], "tools": [
        {"type": "function", "function": {"name": "n" * 500}}] * 1000}).encode()
    asked = read_request("chat", body)
    assert len(asked.model) == MODEL_CHARS
    assert len(asked.tools) == MAX_TOOLS
    assert {len(name) for name in asked.tools} == {TOOL_NAME_CHARS}


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda children: st.lists(children, max_size=4)
                     | st.dictionaries(st.sampled_from(
                         ["model", "messages", "input", "stream", "tools", "type", "function",
                          "name", "role"]), children, max_size=5), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(api=st.sampled_from(["chat", "responses"]),
       body=st.binary(max_size=200) | _json.map(lambda value: json.dumps(value).encode()))
def test_read_request_never_raises_and_returns_an_asked_or_a_problem(api, body):
    result = read_request(api, body)
    assert isinstance(result, (str, Asked))
    if isinstance(result, Asked):
        assert result.chars == len(body) and len(result.model) <= MODEL_CHARS


# --- reading an upstream's body ----------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("reply", [TEXT, TWO_CALLS, Reply(text="a", tool_calls=(
    ToolCall("t", "{bad"),))])
def test_the_reply_and_usage_of_a_body_and_of_a_stream_round_trip(api, reply):
    body = response_body(api, reply, model="m", call=2, usage=USAGE, created=0)
    assert reply_of_response(api, body) == reply
    assert usage_of_response(api, body) == USAGE
    frames = stream_events(api, reply, model="m", call=2, usage=USAGE, created=0)
    assert reply_of_events(api, frames) == reply
    assert reply_of_events(api, [frame.decode() for frame in frames]) == reply
    assert usage_of_events(api, frames) == USAGE


@pytest.mark.parametrize("body", [
    b"", b"not json", b"[]", b"{}", b'{"choices": []}', b'{"choices": [{"message": 3}]}',
    b'{"choices": [{"message": {"content": 3, "tool_calls": [1, {"function": {}}]}}]}',
    b'{"output": [1, {"type": "message", "content": [{"type": "output_text", "text": 1}]}]}',
    b"[" * 100_000])
def test_a_body_with_no_reply_reads_as_none(body):
    for api in ("chat", "responses"):
        assert reply_of_response(api, body) is None
        assert usage_of_response(api, body) is None


@pytest.mark.parametrize("given, expected", [
    ('{"prompt_tokens": true, "completion_tokens": 1}', Usage(0, 1, clamped=1)),
    ('{"prompt_tokens": -1, "completion_tokens": 1}', Usage(0, 1, clamped=1)),
    ('{"prompt_tokens": 1.5, "completion_tokens": "2"}', Usage(0, 0, clamped=2)),
    ('{"prompt_tokens": 7.0, "completion_tokens": 1e30}', Usage(7, MAX_CALL_TOKENS, clamped=1)),
    ('{"prompt_tokens": 99999999999999999999999, "completion_tokens": 3}',
     Usage(MAX_CALL_TOKENS, 3, clamped=1)),
    # A count left out, or null, is none: nothing to clamp.
    ('{"prompt_tokens": 5}', Usage(5, 0, clamped=0)),
    ('{"prompt_tokens": 5, "completion_tokens": null}', Usage(5, 0, clamped=0)),
])
def test_an_upstreams_usage_counts_are_clamped_where_they_enter(given, expected):
    """The upstream is not trusted: a count that is not a whole number in [0, MAX_CALL_TOKENS]
    is clamped and the clamp counted, never summed as given, nor the usage dropped."""
    assert usage_of_response("chat", f'{{"usage": {given}}}'.encode()) == expected
    responses = given.replace("prompt_tokens", "input_tokens").replace("completion_tokens",
                                                                       "output_tokens")
    assert usage_of_response("responses", f'{{"usage": {responses}}}'.encode()) == expected


def test_a_usage_with_neither_count_is_no_usage():
    assert usage_of_response("chat", b'{"usage": {"total_tokens": 9}}') is None
    assert usage_of_response("chat", b'{"usage": null}') is None


# --- frameworks on top of the openai client ----------------------------------------------------


@pytest.mark.slow
def test_pydantic_ai_reads_a_tool_call_then_a_text():
    pydantic_ai = pytest.importorskip("pydantic_ai")
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    replies = iter([Reply(tool_calls=(ToolCall("lookup", '{"key":"k"}'),)),
                    Reply(text="The value is 42.")])
    asked: list[dict] = []

    def handler(request):
        asked.append(json.loads(request.content))
        body = response_body("chat", next(replies), model="m", call=len(asked),
                             usage=USAGE, created=0)
        return httpx.Response(200, headers={"content-type": "application/json"}, content=body)

    client = openai.AsyncOpenAI(base_url="http://gw/v1", api_key="k", max_retries=0,
                                http_client=httpx.AsyncClient(
                                    transport=httpx.MockTransport(handler)))
    model = OpenAIChatModel("m", provider=OpenAIProvider(openai_client=client))
    agent = pydantic_ai.Agent(model)
    looked_up: list[str] = []

    @agent.tool_plain
    def lookup(key: str) -> str:
        looked_up.append(key)
        return "42"

    result = agent.run_sync("what is k?")
    assert result.output == "The value is 42." and looked_up == ["k"]
    tool_message = asked[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_alk_1_0"


@pytest.mark.slow
def test_langchain_openai_reads_a_tool_call_and_a_text():
    langchain_openai = pytest.importorskip("langchain_openai")
    replies = iter([Reply(tool_calls=(ToolCall("lookup", '{"key":"k"}'),)),
                    Reply(text="The value is 42.")])

    def handler(request):
        body = response_body("chat", next(replies), model="m", call=1, usage=USAGE,
                             created=0)
        return httpx.Response(200, headers={"content-type": "application/json"}, content=body)

    chat = langchain_openai.ChatOpenAI(model="m", api_key="k", base_url="http://gw/v1",
                                       max_retries=0, http_client=httpx.Client(
                                           transport=httpx.MockTransport(handler)))
    called = chat.invoke("what is k?")
    assert called.tool_calls == [{"name": "lookup", "args": {"key": "k"},
                                  "id": "call_alk_1_0", "type": "tool_call"}]
    assert chat.invoke("and?").content == "The value is 42."


# --- reading an upstream's stream --------------------------------------------------------------


def test_a_cut_stream_yields_what_was_done_before_the_cut():
    frames = stream_events("responses", TWO_CALLS, model="m", call=2, usage=USAGE,
                           created=0)
    done = [index for index, frame in enumerate(frames) if b"output_item.done" in frame]
    assert reply_of_events("responses", frames[:done[0] + 1]) == Reply(
        tool_calls=TWO_CALLS.tool_calls[:1])
    assert usage_of_events("responses", frames[:-1]) is None
    chat = stream_events("chat", TWO_CALLS, model="m", call=2, usage=USAGE, created=0)
    assert usage_of_events("chat", chat[:-2]) is None
    assert reply_of_events("chat", chat[:2]).tool_calls == (ToolCall("read_file", ""),)


@pytest.mark.parametrize("frames", [
    [], [b"data: [DONE]\n\n"], [b"data: {bad\n\n"], [b"data: [1]\n\n"], ["event: x\n\n"],
    [b'data: {"choices": [{"delta": {"tool_calls": [{"index": "0"}, 3, {"index": 0}]}}]}\n\n'],
    [b'data: {"choices": [{"delta": 1}]}\n\n', b"\xff\xfe"],
    [b'data: {"type": "response.completed", "response": {"output": 1, "usage": []}}\n\n'],
])
def test_frames_with_no_reply_read_as_none(frames):
    for api in ("chat", "responses"):
        assert reply_of_events(api, frames) is None
        assert usage_of_events(api, frames) is None


def test_chat_stream_tool_calls_are_read_by_index_and_sse_data_lines_as_sse_joins_them():
    def chunk(calls):
        return ('data:' + json.dumps({"choices": [{"delta": {"tool_calls": calls}}]}) + "\n\n")
    frames = [chunk([{"index": 1, "function": {"name": "second", "arguments": "{}"}}]),
              chunk([{"index": 0, "function": {"name": "first", "arguments": "{"}}]),
              # two data lines make one event: the JSON is split across them
              'data: {"choices": [{"delta": {"tool_calls":\ndata: [{"index": 0, "function": '
              '{"arguments": "}"}}]}}]}\n\n',
              chunk([{"index": 2, "function": {"arguments": "{}"}}])]  # never named: dropped
    assert reply_of_events("chat", frames) == Reply(
        tool_calls=(ToolCall("first", "{}"), ToolCall("second", "{}")))


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_malformed_stream_makes_the_client_meet_the_broken_json_while_reading(api):
    """A stream without a data line would read as an empty answer and test nothing: the
    broken object comes as an event's data, where the client parses it."""
    body = malformed_stream(api, 2)

    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = _client(handler)
    with pytest.raises(json.JSONDecodeError):
        if api == "chat":
            list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
        else:
            list(client.responses.create(model="m", input="x", stream=True))


@pytest.mark.parametrize("api, items, answered", [
    ("chat", [{"role": "user", "content": "x"}], 0),
    ("chat", [{"role": "user", "content": "x"},
              {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
              {"role": "tool", "tool_call_id": "a", "content": "1"},
              {"role": "tool", "tool_call_id": "b", "content": "2"},
              {"role": "assistant", "content": "done"}, {"role": "user", "content": "y"}], 2),
    ("responses", [{"role": "user", "content": "x"},
                   {"type": "function_call", "call_id": "a"},
                   {"type": "function_call", "call_id": "b"},
                   {"type": "function_call_output", "call_id": "a"},
                   {"type": "function_call_output", "call_id": "b"},
                   {"type": "function_call", "call_id": "c"},
                   {"type": "function_call_output", "call_id": "c"},
                   {"role": "assistant", "content": "done"}], 3),
])
def test_a_request_says_how_many_model_turns_its_conversation_holds(api, items, answered):
    """A resumed attempt's first request is answered where its conversation stands."""
    field = "messages" if api == "chat" else "input"
    asked = read_request(api, json.dumps({"model": "m", field: items}).encode())
    assert asked.answered == answered


def test_a_request_of_more_values_than_the_bound_is_refused_before_it_is_parsed():
    from alk.gateway.wire.request import MAX_REQUEST_VALUES

    body = (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": ['
            + b"{}," * MAX_REQUEST_VALUES + b"{}]}")
    problem = read_request("chat", body)
    assert isinstance(problem, str) and f"{MAX_REQUEST_VALUES:,} alk reads" in problem


def test_a_request_of_long_text_full_of_commas_is_read():
    text = "a, b, [c], {d}, " * 200_000
    asked = read_request("chat", json.dumps({"model": "m", "messages": [
        {"role": "user", "content": text}]}).encode())
    assert isinstance(asked, Asked) and asked.items == 1
