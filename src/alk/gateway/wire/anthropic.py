"""Anthropic's Messages API (POST /v1/messages) as alk's gateway speaks it: a worker's request
read, a reply's `message` object and its event stream, Anthropic's errors, and an upstream's
answer read back. The shapes follow Anthropic's API reference and what the `anthropic` Python
SDK reads (its `types/` and the stream accumulator in `lib/streaming/_messages.py`); the unit
tests feed every body and stream made here to the real SDK.
"""

from __future__ import annotations

from typing import Any, Callable, Literal
from urllib.parse import quote

from alk import untrusted_json
from alk.cost import bounded
from alk.gateway.wire.reply import (
    Reply,
    ToolCall,
    Usage,
    array,
    compact_json,
    dump,
    message_id,
    pieces,
    unquoted_key,
)
from alk.gateway.wire.request import (
    MAX_TOOLS,
    TOOL_NAME_CHARS,
    Asked,
    body_model,
    json_kind,
    not_an_array,
)

API = "messages"
FAMILY = "anthropic"
VERSION = "2023-06-01"  # the only stable `anthropic-version` there is

# Anthropic's error types by HTTP status (its "Errors" page). 408 is a request that timed out,
# which the API's own type for a timeout names; another 4xx is invalid_request_error, as the
# API says it may use that type for any 4xx not listed, and another 5xx is api_error.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                403: "permission_error", 404: "not_found_error", 408: "timeout_error",
                413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                504: "timeout_error", 529: "overloaded_error"}
# formats.Finish, spelt again: formats imports this module, so this one may not import it.
Finish = Literal["refused", "max_tokens"]
_STOP_REASONS = {"refused": "refusal", "max_tokens": "max_tokens"}


def tool_use_id(call: int, index: int) -> str:
    return f"toolu_alk_{call}_{index}"


# --- a worker's request ------------------------------------------------------------------------


def read(request: dict, *, size: int, model: str = "", stream: bool = False) -> Asked | str:
    """The request as alk reads it, or the problem that makes it a 400. The model and `stream`
    are the body's: the path names neither, so the arguments are "" and False. Never raises."""
    named = body_model(request)
    if isinstance(named, str):
        return named
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return not_an_array("messages", messages)
    # The system prompt is its own field, not a message, so it is no item.
    system = request.get("system")
    if system is not None and not isinstance(system, (str, list)):
        return f"'system' must be a string or an array of text blocks, not {json_kind(system)}"
    results = sum(_blocks_of_type(message, "tool_result") for message in messages
                  if isinstance(message, dict) and message.get("role") == "user")
    answered = sum(1 for message in messages
                   if isinstance(message, dict) and message.get("role") == "assistant")
    return Asked(api=API, model=named[0], stream=named[1],
                 tools=_tool_names(request.get("tools")), items=len(messages),
                 tool_results=results, chars=size, answered=answered)


def _blocks_of_type(message: dict, kind: str) -> int:
    content = message.get("content")
    if not isinstance(content, list):
        return 0  # a string content is one text block
    return sum(1 for block in content if isinstance(block, dict) and block.get("type") == kind)


def _tool_names(tools: Any) -> tuple[str, ...]:
    """The offered tools' names: a client tool's ({name, description, input_schema}, its type
    "custom" or absent) and a server tool's ({type: "web_search_20250305", name}) alike."""
    if not isinstance(tools, list):
        return ()
    return tuple(tool["name"][:TOOL_NAME_CHARS] for tool in tools[:MAX_TOOLS]
                 if isinstance(tool, dict) and isinstance(tool.get("name"), str))


# --- a reply's body and stream -----------------------------------------------------------------


def _input(arguments: str) -> Any:
    """A tool call's `input`: its arguments as the JSON object they are. Arguments that are no
    JSON object (the `bad_tool_args` fault, a script's `raw`) go as the text itself, a string
    where the API always has an object: Anthropic parses the model's JSON before it answers,
    so no real body carries broken arguments, and an object made of them (`{}`, or what parts
    parse) would hand the worker a well-formed call it never had to doubt. The string is what
    tests a client: one that trusts the schema breaks on it, one that checks it sees bad
    arguments; and read back (`reply_of_body`) it is the very text again."""
    try:
        value = untrusted_json.parse(arguments)
    except untrusted_json.Rejected:
        return arguments
    return value if isinstance(value, dict) else arguments


def _usage_fields(usage: Usage) -> dict:
    # alk caches nothing: the cache counts are there, as the API always sends them, and 0.
    return {"input_tokens": usage.prompt_tokens, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, "output_tokens": usage.completion_tokens}


def _stop(reply: Reply, finish: Finish | None) -> dict:
    """The message's stop_reason and the fields beside it."""
    reason = _STOP_REASONS.get(finish or "", "tool_use" if reply.tool_calls else "end_turn")
    details = ({"type": "refusal", "category": None, "explanation": None}
               if reason == "refusal" else None)
    return {"stop_reason": reason, "stop_sequence": None, "stop_details": details}


def _message(reply: Reply | None, *, model: str, call: int, usage: Usage | None,
             finish: Finish | None) -> dict:
    """A `message` object: whole, or as message_start carries it (reply None: no content, no
    stop reason yet, the input's usage only)."""
    message: dict[str, Any] = {"id": message_id(call), "type": "message", "role": "assistant",
                               "model": model, "content": []}
    if reply is None:
        message.update(stop_reason=None, stop_sequence=None, stop_details=None)
    else:
        if reply.text is not None:
            message["content"].append({"type": "text", "text": reply.text})
        message["content"] += [{"type": "tool_use", "id": tool_use_id(call, index),
                                "name": tool.name, "input": _input(tool.arguments)}
                               for index, tool in enumerate(reply.tool_calls)]
        message.update(_stop(reply, finish))
    if usage is not None:
        message["usage"] = _usage_fields(
            usage if reply is not None else Usage(usage.prompt_tokens, 0))
    return message


def body(reply: Reply, *, model: str, call: int, usage: Usage | None, created: int,
         finish: Finish | None = None) -> bytes:
    """The non-streamed body; no usage key when `usage` is None. A message has no timestamp,
    so `created` goes nowhere."""
    return dump(_message(reply, model=model, call=call, usage=usage, finish=finish))


def _event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\n".encode("ascii") + b"data: " + dump(
        {"type": kind, **fields}) + b"\n\n"


def _start(*, model: str, call: int, usage: Usage | None) -> list[bytes]:
    # The ping comes after message_start, as the API sends one early (and others at will).
    return [_event("message_start",
                   message=_message(None, model=model, call=call, usage=usage, finish=None)),
            _event("ping")]


def _blocks(reply: Reply, call: int) -> list[tuple[dict, list[dict]]]:
    """Each content block as it starts and the deltas that fill it, in order."""
    blocks: list[tuple[dict, list[dict]]] = []
    if reply.text is not None:
        blocks.append(({"type": "text", "text": ""},
                       [{"type": "text_delta", "text": piece}
                        for piece in pieces(reply.text) if piece]))
    for index, tool in enumerate(reply.tool_calls):
        # The arguments' text in pieces as is: broken arguments arrive broken, as a model cut
        # mid-call leaves its input_json_delta (the SDK's accumulator meets them so).
        blocks.append(({"type": "tool_use", "id": tool_use_id(call, index), "name": tool.name,
                        "input": {}},
                       [{"type": "input_json_delta", "partial_json": piece}
                        for piece in pieces(tool.arguments) if piece]))
    return blocks


def frames(reply: Reply, *, model: str, call: int, usage: Usage | None, created: int,
           finish: Finish | None = None) -> list[bytes]:
    """The server-sent events of a streamed reply: message_start, ping, each content block's
    start, deltas and stop, message_delta (the stop reason and the cumulative usage; no usage
    key when `usage` is None), message_stop."""
    frames = _start(model=model, call=call, usage=usage)
    for index, (start, deltas) in enumerate(_blocks(reply, call)):
        frames.append(_event("content_block_start", index=index, content_block=start))
        frames += [_event("content_block_delta", index=index, delta=delta) for delta in deltas]
        frames.append(_event("content_block_stop", index=index))
    closing: dict[str, Any] = {"delta": _stop(reply, finish)}
    if usage is not None:
        closing["usage"] = _usage_fields(usage)
    frames.append(_event("message_delta", **closing))
    frames.append(_event("message_stop"))
    return frames


# --- errors and broken answers -----------------------------------------------------------------


def error(status: int, message: str, *, retry_after_s: float | None = None) -> bytes:
    """Anthropic's error body. The delay goes in the retry-after header, never in the body."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return dump({"type": "error", "error": {"type": kind, "message": message}})


def error_frames(reply: Reply, *, model: str, call: int, created: int,
                 message: str) -> list[bytes]:
    """A 200 stream that starts the reply (message_start, ping, its first block's start and
    first delta) and then sends `event: error` with an overloaded_error, as the API does when
    it is overloaded mid-stream. message_start carries a usage of 0, not none: a client that
    reads it must get as far as the error."""
    frames = _start(model=model, call=call, usage=Usage(0, 0))
    blocks = _blocks(reply, call)
    if blocks:
        start, deltas = blocks[0]
        frames.append(_event("content_block_start", index=0, content_block=start))
        frames += [_event("content_block_delta", index=0, delta=delta) for delta in deltas[:1]]
    frames.append(_event("error", error={"type": "overloaded_error", "message": message}))
    return frames


def malformed_body(call: int) -> bytes:
    """A 200 body that is not JSON: a whole message, its braces balanced, one key unquoted."""
    whole = body(Reply(text="The answer is"), model="alk", call=call, usage=Usage(1, 1),
                 created=0)
    return unquoted_key(whole, b'"content":')


def malformed_stream(call: int) -> bytes:
    """An event stream whose first event, message_start, carries that broken message, then
    ends as a stream does."""
    return (b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":"
            + malformed_body(call) + b"}\n\n" + _event("message_stop"))


# --- an upstream's answer, read back -----------------------------------------------------------


def _arguments(value: Any) -> str | None:
    """A tool_use block's input as arguments' text: an object compact, as alk writes them; a
    string (alk's own broken arguments, recorded) as it is."""
    if isinstance(value, str):
        return value
    return compact_json(value) if isinstance(value, dict) else None


def reply_of_body(response: dict) -> Reply | None:
    """The reply in a `message` body (its text blocks joined, its tool_use blocks in order), or
    None when it holds none. Never raises."""
    if not isinstance(response, dict):
        return None
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in array(response, "content"):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use" and isinstance(block.get("name"), str):
            arguments = _arguments(block.get("input"))
            if arguments is not None:
                calls.append(ToolCall(block["name"], arguments))
    if not texts and not calls:
        return None
    return Reply(text="".join(texts) if texts else None, tool_calls=tuple(calls))


def reply_of_events(events: list[dict]) -> Reply | None:
    """The reply a stream's events carry: the text deltas joined, each tool_use block's
    partial_json joined, by the block's index; a block whose start names no tool is left out.
    Never raises."""
    texts: list[str] = []
    tools: dict[int, list] = {}  # index -> [name, pieces, the start's input]
    for event in events:
        if not isinstance(event, dict) or not isinstance(event.get("index"), int):
            continue
        index, kind = event["index"], event.get("type")
        if kind == "content_block_start":
            block = event.get("content_block")
            if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(
                    block.get("name"), str):
                tools[index] = [block["name"], [], block.get("input")]
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            delta = event["delta"]
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                texts.append(delta["text"])
            elif (delta.get("type") == "input_json_delta" and index in tools
                  and isinstance(delta.get("partial_json"), str)):
                tools[index][1].append(delta["partial_json"])
    calls = []
    for index in sorted(tools):
        name, parts, start = tools[index]
        # A start that already holds the whole input (some gateways send it so) stands when
        # no delta followed; the API's own start holds {}.
        whole = "".join(parts) if parts or not start else (_arguments(start) or "")
        calls.append(ToolCall(name, whole))
    text = "".join(texts)
    if not text and not calls:
        return None
    return Reply(text=text or None, tool_calls=tuple(calls))


def _counts(usage: Any, into: dict[str, tuple[int, bool]]) -> None:
    """The counts a usage object holds, bounded where they enter, over those read before (a
    message_delta's counts are cumulative totals: the last one stands). A count left out or
    null is none, and leaves the one before."""
    if not isinstance(usage, dict):
        return
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                "output_tokens"):
        if usage.get(key) is not None:
            into[key] = bounded(usage[key])


def _usage(counts: dict[str, tuple[int, bool]]) -> Usage | None:
    if "input_tokens" not in counts and "output_tokens" not in counts:
        return None
    # The prompt side counts the cached tokens too: Anthropic's input_tokens is only the part
    # after the last cache breakpoint, while the prompt alk compares across families (OpenAI's
    # prompt_tokens) is the whole prompt, cached or not, and each part is billed.
    parts = [counts.get(key, (0, False)) for key in (
        "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    prompt, too_many = bounded(sum(count for count, _ in parts))
    completion, bad_completion = counts.get("output_tokens", (0, False))
    return Usage(prompt_tokens=prompt, completion_tokens=completion,
                 clamped=sum(bad for _, bad in parts) + too_many + bad_completion)


def usage_of_body(response: dict) -> Usage | None:
    """The usage a `message` body reports, or None. Never raises."""
    counts: dict[str, tuple[int, bool]] = {}
    _counts(response.get("usage") if isinstance(response, dict) else None, counts)
    return _usage(counts)


def usage_of_events(events: list[dict]) -> Usage | None:
    """The usage a stream reports: the input's from message_start, the output's (and any input
    count it repeats) from the last message_delta. A stream cut before its message_delta
    still reports the input it was billed for. Never raises."""
    counts: dict[str, tuple[int, bool]] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        if event.get("type") == "message_start" and isinstance(event.get("message"), dict):
            _counts(event["message"].get("usage"), counts)
        elif event.get("type") == "message_delta":
            _counts(event.get("usage"), counts)
    return _usage(counts)


# --- cassettes and the proxy -------------------------------------------------------------------


def normalized(request: dict, renamed: Callable[[Any], Any]) -> dict:
    """The request with each tool_use block's id and each tool_result's tool_use_id through
    `renamed`, nothing else changed (the request itself is left as it was)."""
    messages = request.get("messages")
    if not isinstance(messages, list):
        return dict(request)
    return {**request, "messages": [_normalized_message(message, renamed)
                                    for message in messages]}


def _normalized_message(message: Any, renamed: Callable[[Any], Any]) -> Any:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return message
    content = []
    for block in message["content"]:
        if isinstance(block, dict):
            block = dict(block)
            if block.get("type") in ("tool_use", "server_tool_use") and "id" in block:
                block["id"] = renamed(block["id"])
            if "tool_use_id" in block:
                block["tool_use_id"] = renamed(block["tool_use_id"])
        content.append(block)
    return {**message, "content": content}


def upstream_path(model: str, stream: bool) -> str:
    """The Messages endpoint: the model and `stream` travel in the body."""
    return "/v1/messages"


def check_path(model: str) -> str:
    return "/v1/models/" + quote(model, safe="")


def upstream_headers(key: str) -> dict[str, str]:
    return {"x-api-key": key, "anthropic-version": VERSION}
