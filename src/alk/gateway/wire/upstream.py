"""What a provider (proxy mode) or a cassette (replay) answered, read back: the reply and the
usage in a body or an event stream, in the format the call spoke (`formats.wire_format`).
Never raises: an upstream's answer is read as untrusted as a worker's request.
"""

from __future__ import annotations

import re

from alk import untrusted_json
from alk.gateway.wire.formats import wire_format
from alk.gateway.wire.reply import Reply, Usage
from alk.gateway.wire.request import API

Frames = list[bytes] | list[str] | tuple[str, ...]
# An event stream's lines end in CRLF, LF or CR (Gemini's end in CRLF).
_LINE_END = re.compile(r"\r\n|\r|\n")


def _body_object(body: bytes) -> dict | None:
    try:
        value = untrusted_json.parse(body)
    except untrusted_json.Rejected:
        return None
    return value if isinstance(value, dict) else None


def frame_objects(frames: Frames) -> list[dict]:
    """The JSON objects the frames' data lines carry (an event's several data lines joined, as
    SSE joins them); what is not a JSON object, [DONE] among them, is left out."""
    objects = []
    for frame in frames:
        text = frame.decode("utf-8", "replace") if isinstance(frame, bytes) else frame
        data = "\n".join(line[5:].removeprefix(" ") for line in _LINE_END.split(text)
                         if line.startswith("data:"))
        value = _body_object(data.encode("utf-8", "surrogatepass"))
        if value is not None:
            objects.append(value)
    return objects


def reply_of_response(api: API, body: bytes) -> Reply | None:
    """The Reply in an upstream's non-streamed body, or None when it holds none."""
    response = _body_object(body)
    return None if response is None else wire_format(api).reply_of_body(response)


def usage_of_response(api: API, body: bytes) -> Usage | None:
    """The usage an upstream's non-streamed body reports, or None."""
    response = _body_object(body)
    return None if response is None else wire_format(api).usage_of_body(response)


def reply_of_events(api: API, frames: Frames) -> Reply | None:
    """The Reply a streamed answer's frames carry (an upstream's, or a cassette's), or None when
    they hold none (a stream cut short: what was done before the cut)."""
    return wire_format(api).reply_of_events(frame_objects(frames))


def usage_of_events(api: API, frames: Frames) -> Usage | None:
    """The usage a streamed answer's frames report, or None."""
    return wire_format(api).usage_of_events(frame_objects(frames))


def read_answer(api: str, body: bytes, events: tuple[str, ...], stream: bool
                ) -> tuple[Reply | None, Usage | None]:
    """What a recorded or proxied answer said, and its tokens, streamed or not."""
    if stream:
        return reply_of_events(api, events), usage_of_events(api, events)
    return reply_of_response(api, body), usage_of_response(api, body)
