"""What OpenAI's two APIs (Chat Completions, `chat`; Responses, `responses`) share on the wire:
the error shape, the key as OpenAI takes it, the tools a request offers, and where alk's own
check of the upstream asks. The base URL of an OpenAI upstream ends in /v1, as the openai
client's does; the paths here follow it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from alk.gateway.wire.reply import dump
from alk.gateway.wire.request import MAX_TOOLS, TOOL_NAME_CHARS

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout", "request_timeout"),
    429: ("requests", "rate_limit_exceeded"),
}


def error(status: int, message: str, *, retry_after_s: float | None = None) -> bytes:
    """OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}` (a delay is
    told in headers only)."""
    kind, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500
                                           else "invalid_request_error", None))
    return dump({"error": {"message": message, "type": kind, "param": None, "code": code}})


def upstream_headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def check_path(model: str) -> str:
    return f"/models/{quote(model, safe='')}"


def tool_names(tools: Any, *, nested: bool) -> tuple[str, ...]:
    """The function tools offered: Chat nests the function ({type, function: {name}}),
    Responses flattens it ({type, name})."""
    if not isinstance(tools, list):
        return ()
    names = []
    for tool in tools[:MAX_TOOLS]:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        holder = tool.get("function") if nested else tool
        name = holder.get("name") if isinstance(holder, dict) else None
        if isinstance(name, str):
            names.append(name[:TOOL_NAME_CHARS])
    return tuple(names)
