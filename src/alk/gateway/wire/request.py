"""A worker's request to the model, as alk reads it (`Asked`): which endpoint, model and tools,
how long the conversation is and how many model turns it already holds. A request is what a
worker sends, so it is hostile: `read_request` never raises, and what it keeps of the request
is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from alk import untrusted_json

API = Literal["chat", "responses", "messages", "gemini"]

# Bounds on what alk keeps of a request. OpenAI itself takes at most 128 tools whose names are
# at most 64 characters; the bounds are looser so that a name is never cut in a real request.
MODEL_CHARS = 100
MAX_TOOLS = 128
TOOL_NAME_CHARS = 100
# More JSON values in a body is refused (400) before it is parsed, as in a checked file: 4 MiB
# of `{}` is 1.4 million objects, some 200 MiB once parsed. Its text's commas are not counted:
# a real request of 4 MiB holds tens of thousands.
MAX_REQUEST_VALUES = 100_000


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
        request = untrusted_json.parse(body, max_values=MAX_REQUEST_VALUES)
    except untrusted_json.Rejected as rejected:  # parse raises nothing else, on any bytes
        return f"the request body is not JSON alk reads: {rejected}"
    if not isinstance(request, dict):
        return f"the request body must be a JSON object, not {json_kind(request)}"
    model = request.get("model")
    if not isinstance(model, str):
        return f"'model' must be a string, not {json_kind(model)}"
    stream = request.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        return f"'stream' must be true or false, not {json_kind(stream)}"
    field = "messages" if api == "chat" else "input"
    items = request.get(field)
    if api == "responses" and isinstance(items, str):
        items = [{"role": "user", "content": items}]  # a bare string is one user message
    if not isinstance(items, list) or not items:
        return f"'{field}' must be a non-empty array, not {json_kind(items)}"
    return Asked(api=api, model=model[:MODEL_CHARS], stream=stream,
                 tools=_tool_names(api, request.get("tools")), items=len(items),
                 tool_results=sum(1 for item in items if _is_tool_result(api, item)),
                 chars=len(body), answered=_answered(api, items))


def json_kind(value: Any) -> str:
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
