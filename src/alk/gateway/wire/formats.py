"""The wire formats alk's gateway speaks, one module each, and which family each belongs to:
OpenAI's Chat Completions (`chat`) and Responses (`responses`), Anthropic's Messages
(`anthropic`), and Google's Gemini `generateContent` (`gemini`).

Every format module is a `WireFormat`: it reads a worker's request, makes a reply's body and
its stream, the format's own errors and broken answers (for the wire faults), and reads back
what an upstream or a cassette answered. The session, its faults, the proxy and the cassette
take the module of a call's `api` from `wire_format` and never branch on the format
themselves, so that a fourth family is one module more.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Literal, Protocol

from alk import untrusted_json
from alk.gateway.wire.reply import Reply, Usage
from alk.gateway.wire.request import API, MAX_REQUEST_VALUES, MODEL_CHARS, Asked, json_kind

Family = Literal["openai", "anthropic", "gemini"]
FAMILIES: dict[str, tuple[str, ...]] = {
    "openai": ("chat", "responses"), "anthropic": ("messages",), "gemini": ("gemini",)}
# How a reply ends beside its natural end (a text's stop, a tool call's): a provider's safety
# refusal, or the token limit reached (the `finish_safety` and `finish_max_tokens` faults).
Finish = Literal["refused", "max_tokens"]


class WireFormat(Protocol):
    """What a format module holds (`alk.gateway.wire.chat` is one)."""

    API: str
    FAMILY: str

    def read(self, request: dict, *, size: int, model: str, stream: bool) -> Asked | str:
        """The request (a JSON object, parsed within bounds) as alk reads it, or the problem
        that makes it a 400. `size` is the body's bytes; `model` and `stream` are what the path
        says (Gemini's `models/NAME:streamGenerateContent`), "" and False elsewhere."""
        ...

    def body(self, reply: Reply, *, model: str, call: int, usage: Usage | None,
             created: int, finish: Finish | None = None) -> bytes:
        """The non-streamed body of a reply; no usage in it when `usage` is None."""
        ...

    def frames(self, reply: Reply, *, model: str, call: int, usage: Usage | None,
               created: int, finish: Finish | None = None) -> list[bytes]:
        """The server-sent events of a streamed reply, one whole frame each."""
        ...

    def error(self, status: int, message: str, *, retry_after_s: float | None = None) -> bytes:
        """The format's error body for an HTTP status (retry_after_s: the delay the body itself
        may carry, as Gemini's RetryInfo does)."""
        ...

    def error_frames(self, reply: Reply, *, model: str, call: int, created: int,
                     message: str) -> list[bytes]:
        """A stream that began well (status 200) and then reports an error in its own events,
        before the reply is whole (the `stream_error` fault)."""
        ...

    def malformed_body(self, call: int) -> bytes:
        """A 200 body of balanced braces that does not parse as JSON."""
        ...

    def malformed_stream(self, call: int) -> bytes:
        """A well-formed event stream whose first event's data does not parse."""
        ...

    def reply_of_body(self, response: dict) -> Reply | None:
        """The reply in an upstream's (or a cassette's) body; None when it holds none."""
        ...

    def reply_of_events(self, events: list[dict]) -> Reply | None:
        """The reply the data objects of a stream's events carry; None when they hold none."""
        ...

    def usage_of_body(self, response: dict) -> Usage | None: ...

    def usage_of_events(self, events: list[dict]) -> Usage | None: ...

    def normalized(self, request: dict, renamed: Callable[[Any], Any]) -> dict:
        """A request as a cassette compares it: each tool call's id through `renamed` (which
        numbers ids in order of first appearance), nothing else changed."""
        ...

    def upstream_path(self, model: str, stream: bool) -> str:
        """Where the proxy forwards a call, after the upstream's base URL."""
        ...

    def check_path(self, model: str) -> str:
        """Where alk's own check of the upstream asks for the lane's model."""
        ...

    def upstream_headers(self, key: str) -> dict[str, str]:
        """alk's key as the family's upstream takes it."""
        ...


_MODULES = {"chat": "chat", "responses": "responses", "messages": "anthropic", "gemini": "gemini"}


def wire_format(api: str) -> WireFormat:
    """The module of a call's format (imported when first asked for)."""
    return importlib.import_module(f"alk.gateway.wire.{_MODULES[api]}")  # type: ignore


def read_request(api: API, body: bytes, *, model: str = "", stream: bool = False
                 ) -> Asked | str:
    """The request as alk reads it, or the problem with it (for a 400). Never raises. `model`
    and `stream`: what the path says, where the format puts them there (Gemini)."""
    try:
        request = untrusted_json.parse(body, max_values=MAX_REQUEST_VALUES)
    except untrusted_json.Rejected as rejected:  # parse raises nothing else, on any bytes
        return f"the request body is not JSON alk reads: {rejected}"
    if not isinstance(request, dict):
        return f"the request body must be a JSON object, not {json_kind(request)}"
    return wire_format(api).read(request, size=len(body), model=model[:MODEL_CHARS],
                                 stream=stream)
