"""What the gateway sends, in the format a call speaks (`formats.wire_format`): a reply's body or
stream, an error, the broken bodies and streams of wire faults, and the list of models.
"""

from __future__ import annotations

from alk.gateway.wire.formats import Finish, wire_format
from alk.gateway.wire.reply import Reply, Usage, dump
from alk.gateway.wire.request import API


def response_body(api: API, reply: Reply, *, model: str, call: int, usage: Usage | None,
                  created: int, finish: Finish | None = None) -> bytes:
    """The non-streamed body (a `chat.completion`, a `response`, a `message`...)."""
    return wire_format(api).body(reply, model=model, call=call, usage=usage, created=created,
                                 finish=finish)


def stream_events(api: API, reply: Reply, *, model: str, call: int, usage: Usage | None,
                  created: int, finish: Finish | None = None) -> list[bytes]:
    """The server-sent events of a streamed reply, one frame each."""
    return wire_format(api).frames(reply, model=model, call=call, usage=usage, created=created,
                                   finish=finish)


# --- faults and errors -------------------------------------------------------------------------


def error_body(status: int, message: str, api: API = "chat", *,
               retry_after_s: float | None = None) -> bytes:
    """The format's error for an HTTP status (OpenAI's, `{"error": {"message", "type", "param",
    "code"}}`, unless the call spoke another)."""
    return wire_format(api).error(status, message, retry_after_s=retry_after_s)


def malformed_body(api: API, call: int) -> bytes:
    """A 200 body that is not valid JSON: a whole object, its braces balanced, with one key
    unquoted, as a broken upstream or proxy garbles one (a body cut short is `truncated_body`)."""
    return wire_format(api).malformed_body(call)


def malformed_stream(api: API, call: int) -> bytes:
    """What a streamed request gets instead: a well-formed event stream whose first event's data
    is that broken object (an event stream without a data line would read as an empty one)."""
    return wire_format(api).malformed_stream(call)


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
    return dump({"object": "list", "data": [
        {"id": name, "object": "model", "created": created, "owned_by": "alk"}
        for name in names]})
