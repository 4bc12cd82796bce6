"""OpenAI's Responses API (POST /v1/responses) as alk reads and sends it: the request, the
response object, its output items, the events of a streamed reply, and an upstream's answer
read back. A `WireFormat` (`alk.gateway.wire.formats`); its errors are OpenAI's (`openai`).
"""

from __future__ import annotations

from typing import Any, Callable

from alk.gateway.wire import openai
from alk.gateway.wire.reply import (
    BROKEN,
    Reply,
    ToolCall,
    Usage,
    array,
    call_id,
    dump,
    function_item_id,
    message_id,
    pieces,
    reply_or_none,
    response_id,
    tool_call,
    unquoted_key,
    usage_of,
)
from alk.gateway.wire.request import Asked, body_model, not_an_array, without_timestamps

API = "responses"
FAMILY = "openai"
# An answer cut short: its status is "incomplete", and why.
_INCOMPLETE = {"refused": "content_filter", "max_tokens": "max_output_tokens"}

error = openai.error
upstream_headers = openai.upstream_headers
check_path = openai.check_path


def upstream_path(model: str, stream: bool) -> str:
    return "/responses"


# --- a worker's request ------------------------------------------------------------------------


def read(request: dict, *, size: int, model: str, stream: bool) -> Asked | str:
    named = body_model(request)
    if isinstance(named, str):
        return named
    items = request.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]  # a bare string is one user message
    if not isinstance(items, list) or not items:
        return not_an_array("input", items)
    return Asked(api=API, model=named[0], stream=named[1],
                 tools=openai.tool_names(request.get("tools"), nested=False), items=len(items),
                 tool_results=sum(1 for item in items if isinstance(item, dict)
                                  and item.get("type") == "function_call_output"),
                 chars=size, answered=_answered(items))


def _answered(items: list) -> int:
    """The model's turns: its assistant messages, and each run of function calls (the calls of
    one turn come as separate items)."""
    turns, in_calls = 0, False
    for item in items:
        if not isinstance(item, dict):
            in_calls = False
            continue
        call = item.get("type") == "function_call"
        if call and not in_calls:
            turns += 1
        elif not call and item.get("role") == "assistant":
            turns += 1
        in_calls = call
    return turns


def normalized(request: dict, renamed: Callable[[Any], Any]) -> dict:
    """Output items sent back as input keep their ids (msg_…, fc_…) and call ids: each renamed,
    and the previous response's id too."""
    request = dict(request)
    items = request.get("input")
    if isinstance(items, list):
        request["input"] = [_normalized_item(item, renamed) for item in items]
    if "previous_response_id" in request:
        request["previous_response_id"] = renamed(request["previous_response_id"])
    return request


def _normalized_item(item: Any, renamed: Callable[[Any], Any]) -> Any:
    if not isinstance(item, dict):
        return item
    item = without_timestamps(item)
    for key in ("id", "call_id"):
        if key in item:
            item[key] = renamed(item[key])
    return item


# --- what alk sends ----------------------------------------------------------------------------


def usage_fields(usage: Usage) -> dict:
    return {"input_tokens": usage.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.prompt_tokens + usage.completion_tokens}


def output_text(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(text: str, call: int, status: str) -> dict:
    content = [output_text(text)] if status == "completed" else []
    return {"id": message_id(call), "type": "message", "status": status, "role": "assistant",
            "content": content}


def function_item(tool: ToolCall, call: int, index: int, status: str) -> dict:
    return {"id": function_item_id(call, index), "type": "function_call", "status": status,
            "call_id": call_id(call, index), "name": tool.name,
            "arguments": tool.arguments if status == "completed" else ""}


def output(reply: Reply, call: int) -> list[dict]:
    items = [message_item(reply.text, call, "completed")] if reply.text is not None else []
    return items + [function_item(tool, call, index, "completed")
                    for index, tool in enumerate(reply.tool_calls)]


def response_object(reply: Reply | None, *, model: str, call: int, usage: Usage | None,
                    created: int, finish: str | None = None) -> dict:
    """A Responses API response object: in progress (reply None), completed, or incomplete
    (`finish`: a refusal or the token limit)."""
    status = "in_progress" if reply is None else "incomplete" if finish else "completed"
    return {"id": response_id(call), "object": "response", "created_at": created,
            "status": status, "completed_at": created if status == "completed" else None,
            "error": None, "instructions": None,
            "incomplete_details": {"reason": _INCOMPLETE[finish]} if finish else None,
            "max_output_tokens": None, "model": model,
            "output": [] if reply is None else output(reply, call),
            "parallel_tool_calls": True, "previous_response_id": None, "reasoning": None,
            "store": False, "temperature": 1.0, "text": {"format": {"type": "text"}},
            "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
            "usage": None if usage is None else usage_fields(usage), "metadata": {}}


def body(reply: Reply, *, model: str, call: int, usage: Usage | None, created: int,
         finish: str | None = None) -> bytes:
    return dump(response_object(reply, model=model, call=call, usage=usage, created=created,
                                finish=finish))


def frames(reply: Reply, *, model: str, call: int, usage: Usage | None,
           created: int, finish: str | None = None) -> list[bytes]:
    frames: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        frames.append(f"event: {kind}\n".encode("ascii") + b"data: " + dump(
            {"type": kind, "sequence_number": len(frames), **fields}) + b"\n\n")

    started = response_object(None, model=model, call=call, usage=None, created=created)
    event("response.created", response=started)
    event("response.in_progress", response=started)
    output_index = 0
    if reply.text is not None:
        item_id = message_id(call)
        place = {"item_id": item_id, "output_index": output_index, "content_index": 0}
        event("response.output_item.added", output_index=output_index,
              item=message_item(reply.text, call, "in_progress"))
        event("response.content_part.added", **place, part=output_text(""))
        for piece in pieces(reply.text):
            if piece:
                event("response.output_text.delta", **place, delta=piece, logprobs=[])
        event("response.output_text.done", **place, text=reply.text, logprobs=[])
        event("response.content_part.done", **place, part=output_text(reply.text))
        event("response.output_item.done", output_index=output_index,
              item=message_item(reply.text, call, "completed"))
        output_index += 1
    for index, tool in enumerate(reply.tool_calls):
        item_id = function_item_id(call, index)
        event("response.output_item.added", output_index=output_index,
              item=function_item(tool, call, index, "in_progress"))
        for piece in pieces(tool.arguments):
            if piece:
                event("response.function_call_arguments.delta", item_id=item_id,
                      output_index=output_index, delta=piece)
        event("response.function_call_arguments.done", item_id=item_id,
              output_index=output_index, name=tool.name, arguments=tool.arguments)
        event("response.output_item.done", output_index=output_index,
              item=function_item(tool, call, index, "completed"))
        output_index += 1
    event("response.incomplete" if finish else "response.completed",
          response=response_object(reply, model=model, call=call, usage=usage, created=created,
                                   finish=finish))
    return frames


def error_frames(reply: Reply, *, model: str, call: int, created: int,
                 message: str) -> list[bytes]:
    """The response begun and the text's first delta, then an `error` event and the response
    failed, as the API ends a stream that fails midway."""
    begun = frames(Reply(text=reply.text or ""), model=model, call=call, usage=None,
                   created=created)[:5]
    failed = response_object(None, model=model, call=call, usage=None, created=created)
    failed.update(status="failed", error={"code": "server_error", "message": message})
    return begun + [
        b"event: error\ndata: " + dump({"type": "error", "code": "server_error",
                                        "message": message, "param": None,
                                        "sequence_number": len(begun)}) + b"\n\n",
        b"event: response.failed\ndata: " + dump({"type": "response.failed", "response": failed,
                                                  "sequence_number": len(begun) + 1}) + b"\n\n"]


def malformed_body(call: int) -> bytes:
    return unquoted_key(body(BROKEN, model="alk", call=call, usage=Usage(1, 1), created=0),
                        b'"output":')


def malformed_stream(call: int) -> bytes:
    return b"event: response.created\ndata: " + malformed_body(call) + b"\n\n"


# --- an upstream's answer, read back -----------------------------------------------------------


def reply_of_body(response: dict) -> Reply | None:
    texts: list[str] = []
    calls: list[ToolCall | None] = []
    for item in array(response, "output"):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts += [part["text"] for part in array(item, "content")
                      if isinstance(part, dict) and part.get("type") == "output_text"
                      and isinstance(part.get("text"), str)]
        elif item.get("type") == "function_call":
            calls.append(tool_call(item))
    return reply_or_none(texts, tuple(call for call in calls if call is not None))


def reply_of_events(events: list[dict]) -> Reply | None:
    """The response of `response.completed` (or `.incomplete`), or, in a stream cut before it,
    the output items that were done."""
    for event in events:
        if event.get("type") in ("response.completed", "response.incomplete") and isinstance(
                event.get("response"), dict):
            return reply_of_body(event["response"])
    return reply_of_body({"output": [event.get("item") for event in events
                                     if event.get("type") == "response.output_item.done"]})


def usage_of_body(response: dict) -> Usage | None:
    return usage_of(response.get("usage"), "input_tokens", "output_tokens")


def usage_of_events(events: list[dict]) -> Usage | None:
    for event in reversed(events):
        response = event.get("response")
        usage = usage_of_body(response) if isinstance(response, dict) else None
        if usage is not None:
            return usage
    return None
