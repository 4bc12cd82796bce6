"""What the gateway sends: a reply's body or stream in the format the request asked for, an error
in OpenAI's shape, the broken bodies and streams of wire faults, and the list of models.
"""

from __future__ import annotations

from alk.gateway.wire import chat, responses
from alk.gateway.wire.reply import Reply, Usage, completion_id, dump
from alk.gateway.wire.request import API

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def response_body(api: API, reply: Reply, *, model: str, call: int, usage: Usage,
                  created: int) -> bytes:
    """The non-streamed body: a `chat.completion` object or a `response` object."""
    if api == "chat":
        return dump({"id": completion_id(call), "object": "chat.completion", "created": created,
                     "model": model,
                     "choices": [{"index": 0, "message": chat.message(reply, call),
                                  "logprobs": None, "finish_reason": chat.finish_reason(reply)}],
                     "usage": chat.usage_fields(usage)})
    return dump(responses.response_object(reply, model=model, call=call, usage=usage,
                                          created=created))


def stream_events(api: API, reply: Reply, *, model: str, call: int, usage: Usage,
                  created: int) -> list[bytes]:
    """The server-sent events of a streamed reply, one frame each."""
    if api == "chat":
        return chat.frames(reply, model=model, call=call, usage=usage, created=created)
    return responses.frames(reply, model=model, call=call, usage=usage, created=created)


# --- faults and errors -------------------------------------------------------------------------


def error_body(status: int, message: str) -> bytes:
    """OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`."""
    kind, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500
                                           else "invalid_request_error", None))
    return dump({"error": {"message": message, "type": kind, "param": None, "code": code}})


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
    return dump({"object": "list", "data": [
        {"id": name, "object": "model", "created": created, "owned_by": "alk"}
        for name in names]})
