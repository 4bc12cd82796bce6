"""Google's Gemini format, read by the real `google-genai` client (and Pydantic AI's GoogleModel on
top of it) through an in-process transport: no network, no server. What the client parses is
what a worker inside its isolation would get."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alk.cost import MAX_CALL_TOKENS
from alk.gateway.wire import gemini
from alk.gateway.wire.bodies import truncated_stream
from alk.gateway.wire.reply import Reply, ToolCall, Usage, broken_arguments
from alk.gateway.wire.request import MAX_TOOLS, MODEL_CHARS, TOOL_NAME_CHARS, Asked

genai = pytest.importorskip("google.genai")
httpx = pytest.importorskip("httpx")
from google.genai import errors, types  # noqa: E402

USAGE = Usage(prompt_tokens=12, completion_tokens=5)
TEXT = Reply(text="The report is written to report.md.")
ONE_CALL = Reply(tool_calls=(ToolCall("read_file", '{"path":"notes/a.txt"}'),))
TWO_CALLS = Reply(tool_calls=(ToolCall("read_file", '{"path":"a.txt"}'),
                              ToolCall("write_file", '{"path":"b.txt","text":"héllo"}')))
BOTH = Reply(text="Reading it first.", tool_calls=ONE_CALL.tool_calls)


def _serve(reply=TEXT, *, usage=USAGE, finish=None, call=3, status=200, content=None,
           seen=None):
    """A transport handler answering as alk's gateway would: a stream on the stream path."""
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        streamed = request.url.path.endswith(":streamGenerateContent")
        if content is not None:
            body = content
        elif streamed:
            body = b"".join(gemini.frames(reply, model="gemini-x", call=call, usage=usage,
                                          created=0, finish=finish))
        else:
            body = gemini.body(reply, model="gemini-x", call=call, usage=usage, created=0,
                               finish=finish)
        kind = "text/event-stream" if streamed else "application/json"
        return httpx.Response(status, headers={"content-type": kind}, content=body)
    return handler


def _client(handler):
    # No retry_options: the client then tries once, as its default is.
    return genai.Client(api_key="k", http_options=types.HttpOptions(
        base_url="http://gw", client_args={"transport": httpx.MockTransport(handler)},
        async_client_args={"transport": httpx.MockTransport(handler)}))


def _ask(handler, **options):
    client = _client(handler)  # held: a client dropped closes its HTTP client at once
    return client.models.generate_content(model="gemini-x", contents="go", **options)


def _stream(handler):
    return list(_chunks(handler))


def _chunks(handler):
    client = _client(handler)
    yield from client.models.generate_content_stream(model="gemini-x", contents="go")


def _events(frames):
    return [json.loads(frame.decode().removeprefix("data: ")) for frame in frames]


def _calls(response):
    return [(call.id, call.name, call.args) for call in response.function_calls or []]


# --- bodies ------------------------------------------------------------------------------------


def test_a_text_reply_parses_with_its_ids_finish_reason_and_usage():
    response = _ask(_serve(TEXT))
    assert response.text == TEXT.text and response.function_calls is None
    assert response.response_id == "resp_alk_3" and response.model_version == "gemini-x"
    candidate = response.candidates[0]
    assert candidate.finish_reason == types.FinishReason.STOP and candidate.index == 0
    assert candidate.content.role == "model"
    usage = response.usage_metadata
    assert (usage.prompt_token_count, usage.candidates_token_count,
            usage.total_token_count) == (12, 5, 17)


def test_two_function_calls_parse_with_their_names_args_and_ids():
    response = _ask(_serve(TWO_CALLS))
    assert _calls(response) == [("call_alk_3_0", "read_file", {"path": "a.txt"}),
                                ("call_alk_3_1", "write_file", {"path": "b.txt", "text": "héllo"})]
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert response.text is None


def test_a_text_and_a_call_carry_both():
    response = _ask(_serve(BOTH))
    assert [part.text for part in response.candidates[0].content.parts][0] == BOTH.text
    assert _calls(response) == [("call_alk_3_0", "read_file", {"path": "notes/a.txt"})]


def test_no_usage_is_no_usage_metadata_in_a_body_or_a_stream():
    assert _ask(_serve(TEXT, usage=None)).usage_metadata is None
    assert all(chunk.usage_metadata is None for chunk in _stream(_serve(TEXT, usage=None)))


def test_a_safety_stop_carries_no_content_and_says_which_rating_blocked():
    response = _ask(_serve(BOTH, finish="refused"))
    candidate = response.candidates[0]
    assert candidate.finish_reason == types.FinishReason.SAFETY
    assert candidate.content is None and response.text is None and not response.function_calls
    assert [rating.category for rating in candidate.safety_ratings if rating.blocked] == [
        types.HarmCategory.HARM_CATEGORY_DANGEROUS_CONTENT]
    assert response.usage_metadata.total_token_count == 17


def test_a_streamed_safety_stop_sends_the_pieces_before_the_blocked_one():
    chunks = _stream(_serve(TEXT, finish="refused"))
    texts = [chunk.text for chunk in chunks if chunk.text]
    assert texts and TEXT.text.startswith("".join(texts)) and "".join(texts) != TEXT.text
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.SAFETY
    assert chunks[-1].candidates[0].content is None


def test_max_tokens_ends_the_candidate_with_its_reason():
    assert _ask(_serve(TEXT, finish="max_tokens")).candidates[
        0].finish_reason == types.FinishReason.MAX_TOKENS
    assert _stream(_serve(TEXT, finish="max_tokens"))[-1].candidates[
        0].finish_reason == types.FinishReason.MAX_TOKENS


def test_broken_arguments_reach_the_client_as_a_malformed_function_call():
    """Gemini's args are an object, so a call that does not parse is never sent: the API ends
    the candidate with MALFORMED_FUNCTION_CALL and quotes the call in finishMessage."""
    broken = broken_arguments(BOTH)
    response = _ask(_serve(broken))
    candidate = response.candidates[0]
    assert candidate.finish_reason == types.FinishReason.MALFORMED_FUNCTION_CALL
    assert response.function_calls is None and response.text == BOTH.text
    # google-genai 2.34 drops finishMessage from a Gemini API (not Vertex) candidate.
    sent = json.loads(gemini.body(broken, model="m", call=1, usage=USAGE, created=0))
    assert sent["candidates"][0]["finishMessage"] == "Malformed function call: read_file(" + \
        broken.tool_calls[0].arguments + ")"
    assert _ask(_serve(broken_arguments(TWO_CALLS))).candidates[0].content is None
    chunks = _stream(_serve(broken))
    assert not any(chunk.function_calls for chunk in chunks)
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.MALFORMED_FUNCTION_CALL
    # Valid JSON that is not an object is no Struct either.
    assert _ask(_serve(Reply(tool_calls=(ToolCall("t", "[1]"),)))).candidates[
        0].finish_reason == types.FinishReason.MALFORMED_FUNCTION_CALL


# --- streams -----------------------------------------------------------------------------------


def test_a_streamed_text_comes_in_pieces_with_the_finish_and_usage_last():
    chunks = _stream(_serve(TEXT))
    texts = [chunk.text for chunk in chunks]
    assert len(texts) > 1 and "".join(texts) == TEXT.text
    assert [chunk.candidates[0].finish_reason for chunk in chunks][:-1] == [None] * (
        len(chunks) - 1)
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert [chunk.usage_metadata is None for chunk in chunks] == [True] * (len(chunks) - 1) + [
        False]
    assert chunks[-1].usage_metadata.candidates_token_count == 5
    assert {chunk.response_id for chunk in chunks} == {"resp_alk_3"}


@pytest.mark.parametrize("reply", [TWO_CALLS, BOTH])
def test_streamed_function_calls_come_whole_in_one_chunk(reply):
    chunks = _stream(_serve(reply))
    with_calls = [chunk for chunk in chunks if chunk.function_calls]
    assert len(with_calls) == 1 and with_calls[0] is chunks[-1]
    assert [(call.name, call.args) for call in with_calls[0].function_calls] == [
        (call.name, json.loads(call.arguments)) for call in reply.tool_calls]
    assert "".join(chunk.text or "" for chunk in chunks) == (reply.text or "")


def test_frames_are_sse_data_lines_ended_by_crlf_as_the_real_api_sends():
    for frame in gemini.frames(BOTH, model="m", call=1, usage=USAGE, created=0):
        assert frame.startswith(b"data: {") and frame.endswith(b"}\r\n\r\n")
        assert frame.count(b"\n") == 2
    assert b"[DONE]" not in b"".join(gemini.frames(TEXT, model="m", call=1, usage=USAGE,
                                                   created=0))


def test_a_stream_error_after_the_first_chunk_makes_the_client_raise():
    frames = gemini.error_frames(TEXT, model="m", call=1, created=0,
                                 message="alk: stream broken")
    got = []
    with pytest.raises(errors.ServerError) as raised:
        for chunk in _chunks(_serve(content=b"".join(frames))):
            got.append(chunk.text)
    assert got and TEXT.text.startswith(got[0]) and got[0] != TEXT.text
    assert (raised.value.code, raised.value.status, raised.value.message) == (
        500, "INTERNAL", "alk: stream broken")


def test_a_stream_cut_in_half_makes_the_client_raise_after_the_whole_chunks():
    """google-genai hands the cut last event to json.loads: UnknownApiResponseError."""
    frames = gemini.frames(TEXT, model="m", call=1, usage=USAGE, created=0)
    got = []
    with pytest.raises(errors.UnknownApiResponseError):
        for chunk in _chunks(_serve(content=truncated_stream(frames))):
            got.append(chunk.text)
    assert len(got) == len(frames) // 2


def test_a_malformed_body_or_stream_makes_the_client_raise():
    """google-genai does not wrap a 200 body that is not JSON: json.JSONDecodeError; a stream's
    event that is not JSON is its UnknownApiResponseError."""
    with pytest.raises(json.JSONDecodeError):
        _ask(_serve(content=gemini.malformed_body(4)))
    with pytest.raises(errors.UnknownApiResponseError):
        _stream(_serve(content=gemini.malformed_stream(4)))
    malformed = gemini.malformed_body(4)
    assert malformed.startswith(b"{") and malformed.endswith(b"}")
    assert "candidates" in json.loads(malformed.replace(b"candidates:", b'"candidates":'))


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "kind", "status"), [
    (400, errors.ClientError, "INVALID_ARGUMENT"), (401, errors.ClientError, "UNAUTHENTICATED"),
    (403, errors.ClientError, "PERMISSION_DENIED"), (404, errors.ClientError, "NOT_FOUND"),
    (408, errors.ClientError, "DEADLINE_EXCEEDED"),
    (429, errors.ClientError, "RESOURCE_EXHAUSTED"), (500, errors.ServerError, "INTERNAL"),
    (503, errors.ServerError, "UNAVAILABLE"), (504, errors.ServerError, "DEADLINE_EXCEEDED")])
def test_an_error_reaches_the_client_as_its_typed_error(code, kind, status):
    handler = _serve(status=code, content=gemini.error(code, "alk: no more turns"))
    for ask in (_ask, _stream):
        with pytest.raises(kind) as raised:
            ask(handler)
        assert (raised.value.code, raised.value.status, raised.value.message) == (
            code, status, "alk: no more turns")


@pytest.mark.parametrize(("delay", "written"), [(2, "2s"), (0.5, "0.5s"), (41.25, "41.25s")])
def test_a_429_carries_its_retry_delay_as_retry_info(delay, written):
    handler = _serve(status=429, content=gemini.error(429, "quota", retry_after_s=delay))
    with pytest.raises(errors.ClientError) as raised:
        _ask(handler)
    assert raised.value.details["error"]["details"] == [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": written}]
    assert "details" not in json.loads(gemini.error(429, "quota"))["error"]


# --- reading requests --------------------------------------------------------------------------


def test_the_request_the_real_client_sends_is_read_with_tools_results_and_model_turns():
    seen: list = []
    declarations = [types.FunctionDeclaration(name=name, parameters={"type": "object"})
                    for name in ("read_file", "write_file")]
    contents = [
        types.Content(role="user", parts=[types.Part(text="write the report")]),
        types.Content(role="model", parts=[
            types.Part(function_call=types.FunctionCall(id="c1", name="read_file", args={})),
            types.Part(function_call=types.FunctionCall(id="c2", name="read_file", args={}))]),
        types.Content(role="user", parts=[
            types.Part(function_response=types.FunctionResponse(id="c1", name="read_file",
                                                                 response={"text": "a"})),
            types.Part(function_response=types.FunctionResponse(id="c2", name="read_file",
                                                                 response={"text": "b"}))])]
    config = types.GenerateContentConfig(system_instruction="be brief",
                                         tools=[types.Tool(function_declarations=declarations)])
    client = _client(_serve(TEXT, seen=seen))
    client.models.generate_content(model="gemini-x", contents=contents, config=config)
    list(client.models.generate_content_stream(model="gemini-x", contents=contents,
                                               config=config))
    # google-genai 2 asks under /v1beta, 3 under /v1: the gateway serves both.
    assert [request.url.path.split("/", 2)[2] for request in seen] == [
        "models/gemini-x:generateContent", "models/gemini-x:streamGenerateContent"]
    assert {request.url.path.split("/")[1] for request in seen} <= {"v1", "v1beta"}
    assert seen[1].url.params["alt"] == "sse" and seen[0].headers["x-goog-api-key"] == "k"
    for request, stream in zip(seen, (False, True)):
        asked = gemini.read(json.loads(request.content), size=len(request.content),
                            model="gemini-x", stream=stream)
        assert asked == Asked("gemini", "gemini-x", stream, ("read_file", "write_file"),
                              items=3, tool_results=2, chars=len(request.content), answered=1)
        normal = gemini.normalized(json.loads(request.content), lambda id: f"#{id}")
        assert [part.get("functionCall", part.get("functionResponse", {})).get("id")
                for content in normal["contents"] for part in content["parts"]] == [
            None, "#c1", "#c2", "#c1", "#c2"]


def test_snake_case_fields_are_read_as_the_rest_api_takes_them():
    request = {"contents": [{"role": "user", "parts": [
        {"function_response": {"id": "x", "name": "t", "response": {}}}]}],
        "tools": [{"function_declarations": [{"name": "t"}, {"name": 3}]}, {"googleSearch": {}}]}
    asked = gemini.read(request, size=10, model="m", stream=False)
    assert (asked.tools, asked.tool_results, asked.items) == (("t",), 1, 1)
    assert gemini.normalized(request, lambda id: "N")["contents"][0]["parts"][0][
        "function_response"]["id"] == "N"
    assert request["contents"][0]["parts"][0]["function_response"]["id"] == "x"


@pytest.mark.parametrize(("request_", "model", "problem"), [
    ([], "m", "JSON object"), ({}, "m", "'contents'"), ({"contents": []}, "m", "'contents'"),
    ({"contents": "hi"}, "m", "'contents'"), ({"contents": [{}]}, "", "names no model")])
def test_a_bad_request_is_a_problem_not_an_exception(request_, model, problem):
    result = gemini.read(request_, size=2, model=model, stream=False)
    assert isinstance(result, str) and problem in result


def test_what_a_request_shapes_is_bounded():
    request = {"contents": [{}], "tools": [{"functionDeclarations": [
        {"name": "n" * 500}] * 100}] * 10}
    asked = gemini.read(request, size=1, model="m" * 10_000, stream=True)
    assert len(asked.model) == MODEL_CHARS and len(asked.tools) == MAX_TOOLS
    assert {len(name) for name in asked.tools} == {TOOL_NAME_CHARS}


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda children: st.lists(children, max_size=4)
                     | st.dictionaries(st.sampled_from(
                         ["contents", "parts", "role", "tools", "functionDeclarations", "name",
                          "functionCall", "functionResponse", "id", "args", "text", "thought",
                          "candidates", "content", "usageMetadata", "promptTokenCount",
                          "candidatesTokenCount", "thoughtsTokenCount"]), children,
                         max_size=5), max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(value=_json, model=st.text(max_size=5), stream=st.booleans())
def test_nothing_hostile_makes_the_readers_raise(value, model, stream):
    result = gemini.read(value, size=7, model=model, stream=stream)
    assert isinstance(result, (str, Asked))
    for reply in (gemini.reply_of_body(value), gemini.reply_of_events(value),
                  gemini.reply_of_events([value, value])):
        assert reply is None or isinstance(reply, Reply)
    for usage in (gemini.usage_of_body(value), gemini.usage_of_events([value])):
        assert usage is None or isinstance(usage, Usage)
    gemini.normalized(value, lambda id: "N")


@settings(max_examples=200, deadline=None)
@given(text=st.none() | st.text(max_size=12),
       calls=st.lists(st.tuples(st.text(min_size=1, max_size=5), st.text(max_size=12)),
                      max_size=3),
       finish=st.sampled_from([None, "refused", "max_tokens"]))
def test_any_reply_makes_a_json_body_and_json_frames(text, calls, finish):
    reply = Reply(text=text, tool_calls=tuple(ToolCall(*call) for call in calls))
    built = gemini.body(reply, model="m", call=1, usage=USAGE, created=0, finish=finish)
    if reply == Reply():  # the empty_choices fault: no candidate at all
        assert json.loads(built)["candidates"] == []
        return
    assert json.loads(built)["candidates"][0]["finishReason"]
    events = _events(gemini.frames(reply, model="m", call=1, usage=USAGE, created=0,
                                   finish=finish))
    assert events and "finishReason" in events[-1]["candidates"][0]
    assert gemini.usage_of_events(events) == USAGE


# --- reading an upstream's answer --------------------------------------------------------------


@pytest.mark.parametrize("reply", [TEXT, TWO_CALLS, BOTH, Reply(tool_calls=(ToolCall("t", "{}"),))])
def test_the_reply_and_usage_of_a_body_and_of_a_stream_round_trip(reply):
    body = json.loads(gemini.body(reply, model="m", call=2, usage=USAGE, created=0))
    assert gemini.reply_of_body(body) == reply and gemini.usage_of_body(body) == USAGE
    events = _events(gemini.frames(reply, model="m", call=2, usage=USAGE, created=0))
    assert gemini.reply_of_events(events) == reply and gemini.usage_of_events(events) == USAGE
    assert gemini.usage_of_events(_events(gemini.frames(reply, model="m", call=2, usage=None,
                                                        created=0))) is None


def test_an_empty_reply_has_no_candidate_and_the_client_reads_no_text():
    body = gemini.body(Reply(), model="m", call=1, usage=USAGE, created=0)
    assert json.loads(body)["candidates"] == []
    assert [json.loads(frame[6:]) for frame in gemini.frames(
        Reply(), model="m", call=1, usage=USAGE, created=0)][-1]["candidates"] == []


def test_an_upstreams_thoughts_are_no_text_and_its_counts_are_bounded():
    response = {"candidates": [{"content": {"parts": [
        {"text": "thinking...", "thought": True}, {"text": "done"}]}}],
        "usageMetadata": {"promptTokenCount": 10, "toolUsePromptTokenCount": 2,
                          "candidatesTokenCount": 3, "thoughtsTokenCount": 40}}
    assert gemini.reply_of_body(response) == Reply(text="done")
    assert gemini.usage_of_body(response) == Usage(12, 43)
    for given, expected in [
            ({"promptTokenCount": -1, "candidatesTokenCount": True}, Usage(0, 0, clamped=2)),
            ({"promptTokenCount": 5}, Usage(5, 0)),
            ({"promptTokenCount": 1e30, "candidatesTokenCount": MAX_CALL_TOKENS,
              "thoughtsTokenCount": 1}, Usage(MAX_CALL_TOKENS, MAX_CALL_TOKENS, clamped=2)),
            ({"totalTokenCount": 9}, None)]:
        assert gemini.usage_of_body({"usageMetadata": given}) == expected
    # Gemini's counts are cumulative: the last chunk that carries one is the call's.
    assert gemini.usage_of_events([{"usageMetadata": {"promptTokenCount": 1}},
                                   {"usageMetadata": {"promptTokenCount": 4}}, {}]) == Usage(4, 0)


def test_two_builds_of_one_reply_are_the_same_bytes():
    for finish in (None, "refused", "max_tokens"):
        def build(make, finish=finish):
            return make(BOTH, model="m", call=7, usage=USAGE, created=1, finish=finish)
        assert build(gemini.frames) == build(gemini.frames)
        assert build(gemini.body) == build(gemini.body)
    assert gemini.error(429, "x", retry_after_s=1) == gemini.error(429, "x", retry_after_s=1)


def test_the_upstream_paths_and_key_header():
    assert gemini.upstream_path("gemini-2.5-flash", False) == \
        "/v1beta/models/gemini-2.5-flash:generateContent"
    assert gemini.upstream_path("gemini-2.5-flash", True) == \
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert gemini.check_path("gemini-2.5-flash") == "/v1beta/models/gemini-2.5-flash"
    assert gemini.upstream_headers("sk") == {"x-goog-api-key": "sk"}
    # A worker's model cannot lead the proxy elsewhere with alk's key.
    for hostile in ("../files", "x?key=1", "..", "a/b#c"):
        path = gemini.upstream_path(hostile, False)
        assert httpx.URL("http://up" + path).path.startswith("/v1beta/models/")
        assert "?" not in path and "#" not in path and "/" not in path.removeprefix(
            "/v1beta/models/")
    assert gemini.check_path("..") == "/v1beta/models/%2E%2E"


# --- frameworks on top of google-genai ---------------------------------------------------------


@pytest.mark.slow
def test_pydantic_ai_google_model_reads_a_tool_call_then_a_text():
    pydantic_ai = pytest.importorskip("pydantic_ai")
    pytest.importorskip("pydantic_ai.models.google")
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    replies = iter([Reply(tool_calls=(ToolCall("lookup", '{"key":"k"}'),)),
                    Reply(text="The value is 42.")])
    asked: list[dict] = []

    def handler(request):
        asked.append(json.loads(request.content))
        body = gemini.body(next(replies), model="gemini-x", call=len(asked), usage=USAGE,
                           created=0)
        return httpx.Response(200, headers={"content-type": "application/json"}, content=body)

    model = GoogleModel("gemini-x", provider=GoogleProvider(client=_client(handler)))
    agent = pydantic_ai.Agent(model)
    looked_up: list[str] = []

    @agent.tool_plain
    def lookup(key: str) -> str:
        looked_up.append(key)
        return "42"

    result = agent.run_sync("what is k?")
    assert result.output == "The value is 42." and looked_up == ["k"]
    assert len(asked) == 2
    second = gemini.read(asked[1], size=1, model="gemini-x", stream=False)
    assert (second.tools, second.tool_results, second.answered) == (("lookup",), 1, 1)
    responses = [part["functionResponse"] for content in asked[1]["contents"]
                 for part in content["parts"] if "functionResponse" in part]
    assert responses[0]["name"] == "lookup" and responses[0].get("id") == "call_alk_1_0"
