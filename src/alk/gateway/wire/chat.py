"""OpenAI's Chat Completions (POST /v1/chat/completions) as alk reads and sends it: the request,
the message, its usage and finish reason, the chunks of a streamed reply, OpenAI's errors, and
an upstream's answer read back. A `WireFormat` (`alk.gateway.wire.formats`).
"""

from __future__ import annotations

from typing import Any, Callable

from alk.gateway.wire import openai as shared
from alk.gateway.wire.reply import (
    BROKEN,
    Reply,
    ToolCall,
    Usage,
    array,
    call_id,
    completion_id,
    dump,
    empty,
    pieces,
    reply_or_none,
    tool_call,
    unquoted_key,
    usage_of,
)
from alk.gateway.wire.request import Asked, body_model, not_an_array, without_timestamps

API = "chat"
FAMILY = "openai"
_FINISH = {None: None, "refused": "content_filter", "max_tokens": "length"}

error = shared.error
upstream_headers = shared.upstream_headers
check_path = shared.check_path


def upstream_path(model: str, stream: bool) -> str:
    return "/chat/completions"


# --- a worker's request ------------------------------------------------------------------------


def read(request: dict, *, size: int, model: str, stream: bool) -> Asked | str:
    named = body_model(request)
    if isinstance(named, str):
        return named
    items = request.get("messages")
    if not isinstance(items, list) or not items:
        return not_an_array("messages", items)
    return Asked(api=API, model=named[0], stream=named[1],
                 tools=shared.tool_names(request.get("tools"), nested=True), items=len(items),
                 tool_results=sum(1 for item in items if isinstance(item, dict)
                                  and item.get("role") in ("tool", "function")),
                 chars=size, answered=sum(1 for item in items if isinstance(item, dict)
                                          and item.get("role") == "assistant"))


def normalized(request: dict, renamed: Callable[[Any], Any]) -> dict:
    items = request.get("messages")
    if isinstance(items, list):
        request = {**request, "messages": [_normalized_item(item, renamed) for item in items]}
    return request


def _normalized_item(item: Any, renamed: Callable[[Any], Any]) -> Any:
    if not isinstance(item, dict):
        return item
    item = without_timestamps(item)
    calls = item.get("tool_calls")
    if isinstance(calls, list):
        item["tool_calls"] = [{**call, "id": renamed(call["id"])}
                              if isinstance(call, dict) and "id" in call else call
                              for call in calls]
    if "tool_call_id" in item:
        item["tool_call_id"] = renamed(item["tool_call_id"])
    return item


# --- what alk sends ----------------------------------------------------------------------------


def usage_fields(usage: Usage) -> dict:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


def finish_reason(reply: Reply, finish: str | None = None) -> str:
    return _FINISH.get(finish) or ("tool_calls" if reply.tool_calls else "stop")


def message(reply: Reply, call: int) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None,
                               "annotations": []}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call_id(call, index), "type": "function",
             "function": {"name": tool.name, "arguments": tool.arguments}}
            for index, tool in enumerate(reply.tool_calls)]
    return message


def body(reply: Reply, *, model: str, call: int, usage: Usage | None, created: int,
         finish: str | None = None) -> bytes:
    """A `chat.completion` object; an empty reply (the `empty_choices` fault) has no choice."""
    choices = [] if empty(reply) else [
        {"index": 0, "message": message(reply, call), "logprobs": None,
         "finish_reason": finish_reason(reply, finish)}]
    return dump({"id": completion_id(call), "object": "chat.completion", "created": created,
                 "model": model, "choices": choices,
                 **({"usage": usage_fields(usage)} if usage is not None else {})})


def _chunk(call: int, model: str, created: int, choices: list[dict], **extra: Any) -> bytes:
    return b"data: " + dump({"id": completion_id(call), "object": "chat.completion.chunk",
                             "created": created, "model": model, "choices": choices,
                             **extra}) + b"\n\n"


def _delta(call: int, model: str, created: int, fields: dict, finish: str | None = None
           ) -> bytes:
    return _chunk(call, model, created,
                  [{"index": 0, "delta": fields, "logprobs": None, "finish_reason": finish}])


def frames(reply: Reply, *, model: str, call: int, usage: Usage | None, created: int,
           finish: str | None = None) -> list[bytes]:
    def delta(fields: dict, finish: str | None = None) -> bytes:
        return _delta(call, model, created, fields, finish)

    frames = []
    if not empty(reply):
        # The first chunk carries the role, as OpenAI's does; content stays null for a tool call.
        frames.append(delta({"role": "assistant",
                             "content": "" if reply.text is not None else None,
                             "refusal": None}))
    if reply.text is not None:
        frames += [delta({"content": piece}) for piece in pieces(reply.text) if piece]
    for index, tool in enumerate(reply.tool_calls):
        # The first delta of a tool call names it (id, type, name); the rest carry only the
        # index and a piece of the arguments, which the client joins.
        frames.append(delta({"tool_calls": [
            {"index": index, "id": call_id(call, index), "type": "function",
             "function": {"name": tool.name, "arguments": ""}}]}))
        frames += [delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in pieces(tool.arguments) if piece]
    if not empty(reply):
        frames.append(delta({}, finish_reason(reply, finish)))
    if usage is not None:
        # Usage in a last chunk with no choices, as OpenAI sends it under
        # stream_options.include_usage; the SDK and the frameworks tested take it unasked too.
        frames.append(_chunk(call, model, created, [], usage=usage_fields(usage)))
    frames.append(b"data: [DONE]\n\n")
    return frames


def error_frames(reply: Reply, *, model: str, call: int, created: int,
                 message: str) -> list[bytes]:
    """The role and the first piece of the text, then an error object in place of a chunk, as
    OpenAI sends one mid-stream (the openai client raises APIError on it)."""
    begun = frames(Reply(text=reply.text or ""), model=model, call=call, usage=None,
                   created=created)[:2]
    return begun + [b"data: " + dump({"error": {"message": message, "type": "server_error",
                                                "param": None, "code": None}}) + b"\n\n"]


def malformed_body(call: int) -> bytes:
    return unquoted_key(body(BROKEN, model="alk", call=call, usage=Usage(1, 1),
                                    created=0), b'"choices":')


def malformed_stream(call: int) -> bytes:
    return b"data: " + malformed_body(call) + b"\n\ndata: [DONE]\n\n"


# --- an upstream's answer, read back -----------------------------------------------------------


def reply_of_body(response: dict) -> Reply | None:
    choices = array(response, "choices")
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        return None
    text = message["content"] if isinstance(message.get("content"), str) else None
    calls = tuple(call for call in (tool_call(tool.get("function"))
                                    for tool in array(message, "tool_calls")
                                    if isinstance(tool, dict)) if call is not None)
    return reply_or_none([text] if text is not None else [], calls)


def reply_of_events(events: list[dict]) -> Reply | None:
    """The deltas joined, tool calls by index."""
    texts: list[str] = []
    calls: dict[int, list[str]] = {}  # index -> [name, arguments]
    for chunk in events:
        choices = array(chunk, "choices")
        delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
        if not isinstance(delta, dict):
            continue
        if isinstance(delta.get("content"), str):
            texts.append(delta["content"])
        for tool in array(delta, "tool_calls"):
            index = tool.get("index") if isinstance(tool, dict) else None
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(index, int) or not isinstance(function, dict):
                continue
            slots = calls.setdefault(index, ["", ""])
            for slot, key in enumerate(("name", "arguments")):
                if isinstance(function.get(key), str):
                    slots[slot] += function[key]
    tool_calls = tuple(ToolCall(name, arguments) for name, arguments in
                       (calls[index] for index in sorted(calls)) if name)
    joined = "".join(texts)
    return reply_or_none([joined] if joined else [], tool_calls)


def usage_of_body(response: dict) -> Usage | None:
    return usage_of(response.get("usage"), "prompt_tokens", "completion_tokens")


def usage_of_events(events: list[dict]) -> Usage | None:
    for event in reversed(events):
        usage = usage_of_body(event)
        if usage is not None:
            return usage
    return None
