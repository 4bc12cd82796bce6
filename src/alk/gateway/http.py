"""What the gateway's answers are made of, shared by a session, its fault injection and its
proxy: JSON and server-sent-event responses, a connection ended by a reset, and `Answering`,
the session as fault injection (`alk.gateway.faults`) and the proxy (`alk.gateway.proxy`) use
it, so that neither imports the session back.
"""

from __future__ import annotations

import socket
import struct
from typing import Any, Mapping, Protocol

from aiohttp import web

from alk.gateway.server import Gateway
from alk.gateway.wire.reply import Reply, Usage
from alk.gateway.wire.request import Asked
from alk.records import Scenario

SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class Answering(Protocol):
    """A session answering a call (`alk.gateway.session.Session`): what it was given, where its
    script stands, and how it records a call and sends a reply."""

    gateway: Gateway
    scenario: Scenario
    seed: int
    repeat: int
    attempt: int
    turns: int
    fault_pending: bool
    provider_error: str | None
    upstream_refused: str | None
    upstream_checks: int
    unmatched: str | None

    def record(self, call: int, api: str, asked: Asked | None, status: int | None,
               began: float, *, retry: bool = False, reply: Reply | None = None,
               usage: Usage | None = None, turn: int | None = None,
               fault: str | None = None, problem: str | None = None,
               mistake: bool = False, reported: bool = False) -> None: ...

    def note(self, type: str, payload: dict[str, Any]) -> None: ...

    async def reply(self, request: web.BaseRequest, asked: Asked, reply: Reply,
                    call: int, began: float, retry: bool, turn: int | None,
                    fault: str | None = None, mistake: bool = False,
                    finish: str | None = None, usage_sent: bool = True
                    ) -> web.StreamResponse: ...


def json_response(status: int, body: bytes,
                  headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/json",
                        headers=headers)


def reset(request: web.BaseRequest) -> None:
    """Ends the connection with a TCP reset: no more bytes, no orderly close."""
    transport = request.transport
    if transport is None:
        return
    raw = transport.get_extra_info("socket")
    if raw is not None:
        try:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()
