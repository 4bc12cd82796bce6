"""What a provider (proxy mode) or a cassette (replay) answered, read back: the reply and the
usage in a body or an event stream, in either format. Never raises: an upstream's answer is
read as untrusted as a worker's request.
"""

from __future__ import annotations

from typing import Any

from alk import untrusted_json
from alk.cost import bounded
from alk.gateway.wire.reply import Reply, ToolCall, Usage
from alk.gateway.wire.request import API

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
    if not any(key in usage for key in keys):
        return None
    # Bounded where it enters: an upstream's negative, huge or fractional count is clamped
    # (and the clamp counted), never summed as given, nor the reason to drop the usage.
    # A count the upstream left out (or sent as null) is none, not one to clamp.
    (prompt, bad_prompt), (completion, bad_completion) = (
        bounded(usage[key]) if usage.get(key) is not None else (0, False) for key in keys)
    return Usage(prompt_tokens=prompt, completion_tokens=completion,
                 clamped=bad_prompt + bad_completion)


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
