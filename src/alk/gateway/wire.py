"""The OpenAI wire formats the model gateway speaks: reading a worker's request, and building the
bodies and server-sent events of a reply. Pure: no I/O, nothing here knows about sockets.

Two endpoints are spoken, Chat Completions (`chat`: POST /v1/chat/completions) and Responses
(`responses`: POST /v1/responses), each streamed or not. The shapes follow OpenAI's API reference
and what the `openai` Python SDK reads (its `types/chat`, `types/responses` and the stream
accumulators in `lib/streaming`); the unit tests feed every body and stream built here to the real
SDK. Ids are derived from the call's number, never random, so that two runs of one script send
the same bytes.

A request is what a worker sends, so it is hostile: `read_request` never raises, and what it keeps
of the request is bounded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from alk import untrusted_json

API = Literal["chat", "responses"]

# Bounds on what alk keeps of a request. OpenAI itself takes at most 128 tools whose names are
# at most 64 characters; the bounds are looser so that a name is never cut in a real request.
MODEL_CHARS = 100
MAX_TOOLS = 128
TOOL_NAME_CHARS = 100
# The honest estimate of usage: about 4 bytes of English text a token, the rule of thumb OpenAI
# gives for its tokenizers. alk has no tokenizer and a usage figure is only ever an estimate.
BYTES_PER_TOKEN = 4
# A text or a tool call's arguments is streamed in this many deltas at most (fewer when short),
# so that a client's accumulation of deltas is exercised, as against a real model's token stream.
DELTAS = 4

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: str  # JSON text as sent; may be invalid JSON on purpose (bad_tool_args, `raw`)


@dataclass(frozen=True, slots=True)
class Reply:
    """What the model says in one turn: a text, tool calls, or both."""
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class Asked:
    """What a request asked, as alk reads it: bounded, and read without raising."""
    api: API
    model: str              # bounded to MODEL_CHARS
    stream: bool
    tools: tuple[str, ...]  # names of the function tools offered (bounded count and length)
    items: int              # number of messages (chat) / input items (responses)
    tool_results: int       # how many tool-result messages / items the input holds
    chars: int              # size of the body in bytes
    answered: int = 0       # the model's turns the conversation already holds


# --- reading a request -------------------------------------------------------------------------


def read_request(api: API, body: bytes) -> Asked | str:
    """The request as alk reads it, or the problem with it (for a 400). Never raises."""
    try:
        request = untrusted_json.parse(body)
    except untrusted_json.Rejected as rejected:  # parse raises nothing else, on any bytes
        return f"the request body is not JSON alk reads: {rejected}"
    if not isinstance(request, dict):
        return f"the request body must be a JSON object, not {_kind(request)}"
    model = request.get("model")
    if not isinstance(model, str):
        return f"'model' must be a string, not {_kind(model)}"
    stream = request.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        return f"'stream' must be true or false, not {_kind(stream)}"
    field = "messages" if api == "chat" else "input"
    items = request.get(field)
    if api == "responses" and isinstance(items, str):
        items = [{"role": "user", "content": items}]  # a bare string is one user message
    if not isinstance(items, list) or not items:
        return f"'{field}' must be a non-empty array, not {_kind(items)}"
    return Asked(api=api, model=model[:MODEL_CHARS], stream=stream,
                 tools=_tool_names(api, request.get("tools")), items=len(items),
                 tool_results=sum(1 for item in items if _is_tool_result(api, item)),
                 chars=len(body), answered=_answered(api, items))


def _kind(value: Any) -> str:
    if value is None:
        return "missing or null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number")


def _tool_names(api: API, tools: Any) -> tuple[str, ...]:
    if not isinstance(tools, list):
        return ()
    names = []
    for tool in tools[:MAX_TOOLS]:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        # Chat nests the function ({type, function: {name}}); Responses flattens it ({type, name}).
        holder = tool.get("function") if api == "chat" else tool
        name = holder.get("name") if isinstance(holder, dict) else None
        if isinstance(name, str):
            names.append(name[:TOOL_NAME_CHARS])
    return tuple(names)


def _answered(api: API, items: list) -> int:
    """The model's turns a conversation holds: its assistant messages, and on the Responses API
    each run of function calls (the calls of one turn come as separate items)."""
    turns, in_calls = 0, False
    for item in items:
        if not isinstance(item, dict):
            in_calls = False
            continue
        call = api == "responses" and item.get("type") == "function_call"
        if call and not in_calls:
            turns += 1
        elif not call and item.get("role") == "assistant":
            turns += 1
        in_calls = call
    return turns


def _is_tool_result(api: API, item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if api == "chat":
        return item.get("role") in ("tool", "function")
    return item.get("type") == "function_call_output"


# --- a script's turn and its usage -------------------------------------------------------------


def reply_from_turn(turn: Mapping) -> Reply:
    """A script turn as the model's reply: `{tool, args}` (a tool call, its arguments serialised
    compactly), `{tool, raw}` (a tool call whose arguments are the text given, valid JSON or
    not), `{text}` (a final answer). A turn with a text and a tool carries both. Raises
    ValueError for a turn of none of these shapes (the lane's loader checks turns first)."""
    text = turn.get("text")
    if text is not None and not isinstance(text, str):
        raise ValueError(f"a script turn's 'text' must be a string, not {_kind(text)}")
    tool = turn.get("tool")
    if tool is None:
        if text is None:
            raise ValueError("a script turn needs 'tool' (with 'args' or 'raw') or 'text'")
        return Reply(text=text)
    if not isinstance(tool, str) or not tool:
        raise ValueError(f"a script turn's 'tool' must be a tool's name, not {_kind(tool)}")
    if "raw" in turn:
        arguments = turn["raw"]
        if not isinstance(arguments, str):
            raise ValueError(f"a script turn's 'raw' must be a string, not {_kind(arguments)}")
    else:
        arguments = compact_json(turn.get("args", {}))
    return Reply(text=text, tool_calls=(ToolCall(tool, arguments),))


def compact_json(value: Any) -> str:
    """JSON as OpenAI's models write tool arguments: no spaces, non-ASCII as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def broken_arguments(reply: Reply) -> Reply:
    """The reply with each tool call's arguments made invalid JSON (the `bad_tool_args` fault):
    the object cut before its end, as a model that stopped mid-call leaves it."""
    broken = tuple(ToolCall(call.name, call.arguments[:max(1, len(call.arguments) // 2)]
                            if len(call.arguments) > 2 else '{"')
                   for call in reply.tool_calls)
    return Reply(text=reply.text, tool_calls=broken)


def estimate_usage(asked: Asked, reply: Reply) -> Usage:
    """Usage as an estimate, about BYTES_PER_TOKEN bytes a token on each side, at least 1: the
    prompt from the request body's size (which also counts its JSON punctuation and the tools'
    schemas, as a real prompt's tokens count the tool definitions), the completion from the
    reply's text, tool names and arguments."""
    produced = len((reply.text or "").encode("utf-8", "surrogatepass")) + sum(
        len(call.name.encode("utf-8", "surrogatepass"))
        + len(call.arguments.encode("utf-8", "surrogatepass")) for call in reply.tool_calls)
    return Usage(prompt_tokens=max(1, asked.chars // BYTES_PER_TOKEN),
                 completion_tokens=max(1, produced // BYTES_PER_TOKEN))


# --- ids ---------------------------------------------------------------------------------------


def completion_id(call: int) -> str:
    return f"chatcmpl-alk-{call}"


def response_id(call: int) -> str:
    return f"resp_alk_{call}"


def call_id(call: int, index: int) -> str:
    """The id of the index-th tool call of the call-th model call (the same on both APIs)."""
    return f"call_alk_{call}_{index}"


def _message_id(call: int) -> str:
    return f"msg_alk_{call}"


def _function_item_id(call: int, index: int) -> str:
    return f"fc_alk_{call}_{index}"


# --- non-streamed bodies -----------------------------------------------------------------------


def _dump(value: Any) -> bytes:
    # ASCII only: a text the script or a request carried (a lone surrogate included) can always
    # be encoded, and a cut of the bytes can never split a character.
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def _chat_usage(usage: Usage) -> dict:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


def _responses_usage(usage: Usage) -> dict:
    return {"input_tokens": usage.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.prompt_tokens + usage.completion_tokens}


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def _chat_message(reply: Reply, call: int) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None,
                               "annotations": []}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call_id(call, index), "type": "function",
             "function": {"name": tool.name, "arguments": tool.arguments}}
            for index, tool in enumerate(reply.tool_calls)]
    return message


def _output_text(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message_item(text: str, call: int, status: str) -> dict:
    content = [_output_text(text)] if status == "completed" else []
    return {"id": _message_id(call), "type": "message", "status": status, "role": "assistant",
            "content": content}


def _function_item(tool: ToolCall, call: int, index: int, status: str) -> dict:
    return {"id": _function_item_id(call, index), "type": "function_call", "status": status,
            "call_id": call_id(call, index), "name": tool.name,
            "arguments": tool.arguments if status == "completed" else ""}


def _output(reply: Reply, call: int) -> list[dict]:
    items = [_message_item(reply.text, call, "completed")] if reply.text is not None else []
    return items + [_function_item(tool, call, index, "completed")
                    for index, tool in enumerate(reply.tool_calls)]


def _response_object(reply: Reply | None, *, model: str, call: int, usage: Usage | None,
                     created: int) -> dict:
    """A Responses API response object: in progress (reply None) or completed."""
    return {"id": response_id(call), "object": "response", "created_at": created,
            "status": "in_progress" if reply is None else "completed",
            "completed_at": None if reply is None else created,
            "error": None, "incomplete_details": None, "instructions": None,
            "max_output_tokens": None, "model": model,
            "output": [] if reply is None else _output(reply, call),
            "parallel_tool_calls": True, "previous_response_id": None, "reasoning": None,
            "store": False, "temperature": 1.0, "text": {"format": {"type": "text"}},
            "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
            "usage": None if usage is None else _responses_usage(usage), "metadata": {}}


def response_body(api: API, reply: Reply, *, model: str, call: int, usage: Usage,
                  created: int) -> bytes:
    """The non-streamed body: a `chat.completion` object or a `response` object."""
    if api == "chat":
        return _dump({"id": completion_id(call), "object": "chat.completion", "created": created,
                      "model": model,
                      "choices": [{"index": 0, "message": _chat_message(reply, call),
                                   "logprobs": None, "finish_reason": _finish_reason(reply)}],
                      "usage": _chat_usage(usage)})
    return _dump(_response_object(reply, model=model, call=call, usage=usage, created=created))


# --- streams -----------------------------------------------------------------------------------


def _pieces(text: str) -> list[str]:
    """`text` in at most DELTAS non-empty pieces (one empty piece for an empty text)."""
    size = max(1, -(-len(text) // DELTAS))
    return [text[start:start + size] for start in range(0, len(text), size)] or [""]


def stream_events(api: API, reply: Reply, *, model: str, call: int, usage: Usage,
                  created: int) -> list[bytes]:
    """The server-sent events of a streamed reply, one frame each."""
    if api == "chat":
        return _chat_frames(reply, model=model, call=call, usage=usage, created=created)
    return _responses_frames(reply, model=model, call=call, usage=usage, created=created)


def _chat_frames(reply: Reply, *, model: str, call: int, usage: Usage,
                 created: int) -> list[bytes]:
    def chunk(choices: list[dict], **extra: Any) -> bytes:
        return b"data: " + _dump({"id": completion_id(call), "object": "chat.completion.chunk",
                                  "created": created, "model": model, "choices": choices,
                                  **extra}) + b"\n\n"

    def delta(fields: dict, finish: str | None = None) -> bytes:
        return chunk([{"index": 0, "delta": fields, "logprobs": None, "finish_reason": finish}])

    # The first chunk carries the role, as OpenAI's does; content stays null for a tool call.
    frames = [delta({"role": "assistant", "content": "" if reply.text is not None else None,
                     "refusal": None})]
    if reply.text is not None:
        frames += [delta({"content": piece}) for piece in _pieces(reply.text) if piece]
    for index, tool in enumerate(reply.tool_calls):
        # The first delta of a tool call names it (id, type, name); the rest carry only the
        # index and a piece of the arguments, which the client joins.
        frames.append(delta({"tool_calls": [
            {"index": index, "id": call_id(call, index), "type": "function",
             "function": {"name": tool.name, "arguments": ""}}]}))
        frames += [delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in _pieces(tool.arguments) if piece]
    frames.append(delta({}, _finish_reason(reply)))
    # Usage in a last chunk with no choices, as OpenAI sends it under
    # stream_options.include_usage; the SDK and the frameworks tested take it unasked too.
    frames.append(chunk([], usage=_chat_usage(usage)))
    frames.append(b"data: [DONE]\n\n")
    return frames


def _responses_frames(reply: Reply, *, model: str, call: int, usage: Usage,
                      created: int) -> list[bytes]:
    frames: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        frames.append(f"event: {kind}\n".encode("ascii") + b"data: " + _dump(
            {"type": kind, "sequence_number": len(frames), **fields}) + b"\n\n")

    started = _response_object(None, model=model, call=call, usage=None, created=created)
    event("response.created", response=started)
    event("response.in_progress", response=started)
    output_index = 0
    if reply.text is not None:
        item_id = _message_id(call)
        place = {"item_id": item_id, "output_index": output_index, "content_index": 0}
        event("response.output_item.added", output_index=output_index,
              item=_message_item(reply.text, call, "in_progress"))
        event("response.content_part.added", **place, part=_output_text(""))
        for piece in _pieces(reply.text):
            if piece:
                event("response.output_text.delta", **place, delta=piece, logprobs=[])
        event("response.output_text.done", **place, text=reply.text, logprobs=[])
        event("response.content_part.done", **place, part=_output_text(reply.text))
        event("response.output_item.done", output_index=output_index,
              item=_message_item(reply.text, call, "completed"))
        output_index += 1
    for index, tool in enumerate(reply.tool_calls):
        item_id = _function_item_id(call, index)
        event("response.output_item.added", output_index=output_index,
              item=_function_item(tool, call, index, "in_progress"))
        for piece in _pieces(tool.arguments):
            if piece:
                event("response.function_call_arguments.delta", item_id=item_id,
                      output_index=output_index, delta=piece)
        event("response.function_call_arguments.done", item_id=item_id,
              output_index=output_index, name=tool.name, arguments=tool.arguments)
        event("response.output_item.done", output_index=output_index,
              item=_function_item(tool, call, index, "completed"))
        output_index += 1
    event("response.completed",
          response=_response_object(reply, model=model, call=call, usage=usage, created=created))
    return frames


# --- faults and errors -------------------------------------------------------------------------


def error_body(status: int, message: str) -> bytes:
    """OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`."""
    kind, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500
                                           else "invalid_request_error", None))
    return _dump({"error": {"message": message, "type": kind, "param": None, "code": code}})


def malformed_body(api: API, call: int) -> bytes:
    """A 200 body that is not valid JSON: a whole object, its braces balanced, with one key
    unquoted, as a broken upstream or proxy garbles one (a body cut short is `truncated_body`)."""
    reply = Reply(text="The answer is")
    body = response_body(api, reply, model="alk", call=call, usage=Usage(1, 1), created=0)
    key = b'"choices":' if api == "chat" else b'"output":'
    return body.replace(key, key.replace(b'"', b""), 1)


def malformed_stream(api: API, call: int) -> bytes:
    """What a streamed request gets instead: a well-formed event stream whose first event's data
    is that broken object (an event stream without a data line would read as an empty one)."""
    frame = b"data: " + malformed_body(api, call).replace(b"\n", b"") + b"\n\n"
    if api == "responses":
        return b"event: response.created\n" + frame
    return frame + b"data: [DONE]\n\n"


def truncated_body(body: bytes) -> bytes:
    """A non-streamed body cut mid-JSON: its first half."""
    return body[:max(1, len(body) // 2)]


def truncated_stream(frames: list[bytes]) -> bytes:
    """The bytes a truncated stream sends before the connection closes: the first half of the
    frames, then half of the next frame, cut mid-message (never a whole frame at the end)."""
    if not frames:
        return b""
    whole = len(frames) // 2
    cut = frames[whole]
    return b"".join(frames[:whole]) + cut[:max(1, len(cut) // 2)]


def models_body(names: list[str], *, created: int) -> bytes:
    """The body of GET /v1/models: the models the gateway serves."""
    return _dump({"object": "list", "data": [
        {"id": name, "object": "model", "created": created, "owned_by": "alk"}
        for name in names]})


# --- reading an upstream's reply ---------------------------------------------------------------


def _body_object(body: bytes) -> dict | None:
    try:
        value = untrusted_json.parse(body)
    except untrusted_json.Rejected:
        return None
    return value if isinstance(value, dict) else None


def _list(holder: Any, key: str) -> list:
    value = holder.get(key) if isinstance(holder, dict) else None
    return value if isinstance(value, list) else []


def _tool_call(function: Any) -> ToolCall | None:
    if not isinstance(function, dict):
        return None
    name, arguments = function.get("name"), function.get("arguments")
    if isinstance(name, str) and isinstance(arguments, str):
        return ToolCall(name, arguments)
    return None


def reply_of_response(api: API, body: bytes) -> Reply | None:
    """The Reply in an upstream's non-streamed body, or None when it holds none. Never raises."""
    return _reply_of_object(api, _body_object(body))


def _reply_of_object(api: API, response: dict | None) -> Reply | None:
    if response is None:
        return None
    texts: list[str] = []
    calls: list[ToolCall | None] = []
    if api == "chat":
        choices = _list(response, "choices")
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            return None
        if isinstance(message.get("content"), str):
            texts.append(message["content"])
        calls = [_tool_call(tool.get("function")) for tool in _list(message, "tool_calls")
                 if isinstance(tool, dict)]
    else:
        for item in _list(response, "output"):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "message":
                texts += [part["text"] for part in _list(item, "content")
                          if isinstance(part, dict) and part.get("type") == "output_text"
                          and isinstance(part.get("text"), str)]
            elif item.get("type") == "function_call":
                calls.append(_tool_call(item))
    tool_calls = tuple(call for call in calls if call is not None)
    if not texts and not tool_calls:
        return None
    return Reply(text="".join(texts) if texts else None, tool_calls=tool_calls)


def usage_of_response(api: API, body: bytes) -> Usage | None:
    """The usage an upstream's non-streamed body reports, or None. Never raises."""
    return _usage_of_object(api, _body_object(body))


def _usage_of_object(api: API, response: dict | None) -> Usage | None:
    usage = (response or {}).get("usage")
    if not isinstance(usage, dict):
        return None
    keys = ("prompt_tokens", "completion_tokens") if api == "chat" else (
        "input_tokens", "output_tokens")
    counts = [usage.get(key) for key in keys]
    if not all(isinstance(count, int) and not isinstance(count, bool) and count >= 0
               for count in counts):
        return None
    return Usage(prompt_tokens=counts[0], completion_tokens=counts[1])


def _frame_objects(frames: list[bytes] | list[str] | tuple[str, ...]) -> list[dict]:
    """The JSON objects the frames' data lines carry (an event's several data lines joined, as
    SSE joins them); what is not a JSON object, [DONE] among them, is left out."""
    objects = []
    for frame in frames:
        text = frame.decode("utf-8", "replace") if isinstance(frame, bytes) else frame
        data = "\n".join(line[5:].removeprefix(" ") for line in text.split("\n")
                         if line.startswith("data:"))
        value = _body_object(data.encode("utf-8", "surrogatepass"))
        if value is not None:
            objects.append(value)
    return objects


def reply_of_events(api: API, frames: list[bytes] | list[str] | tuple[str, ...]
                    ) -> Reply | None:
    """The Reply a streamed answer's frames carry (an upstream's, or a cassette's), or None when
    they hold none. Chat: the deltas joined, tool calls by index; Responses: the response of
    `response.completed`, or, in a stream cut before it, the output items that were done.
    Never raises."""
    objects = _frame_objects(frames)
    if api == "responses":
        for event in objects:
            if event.get("type") == "response.completed" and isinstance(
                    event.get("response"), dict):
                return _reply_of_object(api, event["response"])
        return _reply_of_object(api, {"output": [
            event.get("item") for event in objects
            if event.get("type") == "response.output_item.done"]})
    texts: list[str] = []
    calls: dict[int, list[str]] = {}  # index -> [name, arguments]
    for chunk in objects:
        choices = _list(chunk, "choices")
        delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
        if not isinstance(delta, dict):
            continue
        if isinstance(delta.get("content"), str):
            texts.append(delta["content"])
        for tool in _list(delta, "tool_calls"):
            index = tool.get("index") if isinstance(tool, dict) else None
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(index, int) or not isinstance(function, dict):
                continue
            call = calls.setdefault(index, ["", ""])
            for slot, key in enumerate(("name", "arguments")):
                if isinstance(function.get(key), str):
                    call[slot] += function[key]
    tool_calls = tuple(ToolCall(name, arguments) for name, arguments in
                       (calls[index] for index in sorted(calls)) if name)
    text = "".join(texts)
    if not text and not tool_calls:
        return None
    return Reply(text=text or None, tool_calls=tool_calls)


def usage_of_events(api: API, frames: list[bytes] | list[str] | tuple[str, ...]
                    ) -> Usage | None:
    """The usage a streamed answer's frames report (chat: a chunk's `usage`; responses: the
    completed response's), or None. Never raises."""
    for event in reversed(_frame_objects(frames)):
        usage = _usage_of_object(api, event.get("response") if api == "responses" else event)
        if usage is not None:
            return usage
    return None


def read_answer(api: str, body: bytes, events: tuple[str, ...], stream: bool
                ) -> tuple[Reply | None, Usage | None]:
    """What a recorded or proxied answer said, and its tokens, streamed or not."""
    if stream:
        return reply_of_events(api, events), usage_of_events(api, events)
    return reply_of_response(api, body), usage_of_response(api, body)
