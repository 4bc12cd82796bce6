"""A worker's request to the model, as alk reads it (`Asked`): which endpoint, model and tools,
how long the conversation is and how many model turns it already holds. A request is what a
worker sends, so it is hostile: `read_request` never raises, and what it keeps of the request
is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

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


def body_model(request: dict) -> tuple[str, bool] | str:
    """The model and stream a body names (every format's but Gemini's, whose path says them),
    or the problem with them."""
    model = request.get("model")
    if not isinstance(model, str):
        return f"'model' must be a string, not {json_kind(model)}"
    stream = request.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        return f"'stream' must be true or false, not {json_kind(stream)}"
    return model[:MODEL_CHARS], stream


def not_an_array(field: str, value: Any) -> str:
    return f"'{field}' must be a non-empty array, not {json_kind(value)}"


# Timestamps a client may stamp on the request or on its messages / input items: a cassette
# compares requests without them.
TIMESTAMPS = frozenset({"created", "created_at", "timestamp"})


def without_timestamps(item: dict) -> dict:
    return {key: value for key, value in item.items() if key not in TIMESTAMPS}


def json_kind(value: Any) -> str:
    if value is None:
        return "missing or null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number")
