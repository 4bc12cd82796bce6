"""What a worker can make alk's gateway hold, bounded per session and per run: the connections
open at once, the bytes of request heads not yet read in full, and the request bodies being
read or answered. aiohttp bounds one head (its request line, each field, how many fields) and
nothing across them: 300 connections that each send a megabyte of header fields and never end
them once held 600 MiB of alk's memory, and 16 bodies of 4 MiB at once a session, eight
sessions at once, would hold 512 MiB.

Each session's `Share` takes from its own `Pool` and from the run's (`Gateway.pool`), and what
it cannot take it refuses: a connection past the bound is closed as it is accepted, a head
past it closes its connection, a body past it is answered 503 unread. Every refusal is counted
(`Share.refused`, the session's `ModelSeen.over_bounds`) and the first few are recorded in the
transcript, never buffered. A connection that has not sent a whole head HEAD_TIMEOUT_S after
it opened or after its last answer is closed. A worker refused is answered as an overloaded
server answers; what it does next is its own, and judged as it is.

Parsed values need no budget here: the gateway parses one body at a time on its one thread,
and `wire.request` bounds each (`MAX_REQUEST_VALUES`). All of this runs on that thread, so the
counts need no lock.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from alk.gateway.wire.bodies import error_body

MiB = 1024 * 1024
# A run's bounds are what alk may hold; a session's connections and heads are an eighth of
# them, so that at -j 8 no session's worker can take what another's needs.
SHARES = 8
# Connections open at once.
SESSION_CONNECTIONS = 24
RUN_CONNECTIONS = SHARES * SESSION_CONNECTIONS
# Bytes of request heads received and not yet read whole: a connection's (one read of the
# socket is up to 256 KiB), a session's and the run's. A real head is about a kilobyte.
CONNECTION_HEAD_BYTES = 256 * 1024
SESSION_HEAD_BYTES = 512 * 1024
RUN_HEAD_BYTES = SHARES * SESSION_HEAD_BYTES
# Request bodies being read or answered: a session's holds one of the largest
# (MAX_REQUEST_BYTES) and more; the run's, fewer than eight of those, is what memory allows
# (past it a 503, which clients retry).
SESSION_BODY_BYTES = 5 * MiB
RUN_BODY_BYTES = 24 * MiB
# aiohttp's own bounds on one head: its fields (OpenAI's clients send about 20).
MAX_HEADERS = 32
# A connection that has not sent a whole head this long after it opened or after its last
# answer is closed: clients close an idle connection of their pool after about 5 s.
HEAD_TIMEOUT_S = 15.0
# Refusals recorded in the transcript; past them, only counted.
RECORDED_REFUSALS = 16
_HEAD_END = b"\r\n\r\n"
BUSY = error_body(503, "alk's gateway holds as many request bodies as it may at once: retry "
                       "once the others are answered").decode()


class Pool:
    """What may be held at once of each kind: connections, head bytes, body bytes."""

    def __init__(self, connections: int, head: int, body: int) -> None:
        self.limits = {"connections": connections, "head": head, "body": body}
        self.held = dict.fromkeys(self.limits, 0)


def run_pool() -> Pool:
    return Pool(RUN_CONNECTIONS, RUN_HEAD_BYTES, RUN_BODY_BYTES)


class Share:
    """A session's take of its own pool and of the run's; `record` writes one refusal to the
    session's events."""

    def __init__(self, run: Pool, record: Callable[[tuple[str, dict[str, Any]]], None]
                 ) -> None:
        self.pools = (Pool(SESSION_CONNECTIONS, SESSION_HEAD_BYTES, SESSION_BODY_BYTES), run)
        self.record = record
        self.refused = 0

    def take(self, kind: str, amount: int) -> bool:
        if any(pool.held[kind] + amount > pool.limits[kind] for pool in self.pools):
            return False
        for pool in self.pools:
            pool.held[kind] += amount
        return True

    def give(self, kind: str, amount: int) -> None:
        for pool in self.pools:
            pool.held[kind] -= amount

    def refuse(self, what: str) -> None:
        self.refused += 1
        if self.refused <= RECORDED_REFUSALS:
            self.record(("refused", {"what": what, "count": self.refused}))


class BoundedServer(web.Server):
    """aiohttp's low-level server whose connections take from a session's `Share`."""

    def __init__(self, handler: Any, share: Share, **kwargs: Any) -> None:
        super().__init__(handler, max_headers=MAX_HEADERS, keepalive_timeout=HEAD_TIMEOUT_S,
                         **kwargs)
        self.share = share

    def __call__(self) -> RequestHandler:
        return _Connection(self, self.share, loop=self._loop, **self._kwargs)


def server(handler: Any, run: Pool, record: Callable[[tuple[str, dict[str, Any]]], None],
           **kwargs: Any) -> BoundedServer:
    """A session's server: `handler` answers its requests; `record` takes its refusals."""
    return BoundedServer(handler, Share(run, record), **kwargs)


def refused(server: web.Server | None) -> int:
    """What a session's server refused: connections, heads and bodies."""
    return server.share.refused if isinstance(server, BoundedServer) else 0


class _Connection(RequestHandler):
    """One connection: admitted within the bounds, its unfinished heads counted as they
    arrive. A request sent before the answer to the one before it (pipelining, which no client
    of an OpenAI API does) is refused: each would be one more head held. Only what follows a
    chunked body in the read that ends it goes uncounted: one read at most, within aiohttp's
    own bound on a head (MAX_HEADERS fields of 8 KiB)."""

    def __init__(self, manager: BoundedServer, share: Share, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._share = share
        self._admitted = False
        self._head = 0  # head bytes taken and not yet given back
        self._end = b""  # the head's last bytes so far: its blank line may span two reads
        self._left: int | None = None  # bytes of a body of known length still to come
        self._body: Any = None  # the last request's body, of unknown length when it was

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._share.take("connections", 1):
            self._share.refuse("connection: too many open at once")
            transport.abort()
            return
        self._admitted = True
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self._admitted:
            return  # refused as it was accepted: nothing of it was started
        self._admitted = False
        self._share.give("connections", 1)
        self._give_head()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._admitted or self._force_close or self._close or not data:
            super().data_received(data)
        elif self._left is not None:
            if len(data) > self._left:
                self._refuse(_PIPELINED)  # more than the body: the next request
                return
            self._left = self._left - len(data) or None
            super().data_received(data)
        elif self._body is not None and not self._body.is_eof():
            super().data_received(data)  # a body of unknown length (chunked)
        elif self._messages or self._current_request is not None:
            self._refuse(_PIPELINED)
        else:
            self._head_received(data)

    def _head_received(self, data: bytes) -> None:
        seen = self._end + data
        end = seen.find(_HEAD_END)
        head = len(data) if end < 0 else max(0, end + len(_HEAD_END) - len(self._end))
        if not self._take_head(head):
            return
        self._end = seen[-len(_HEAD_END):] if end < 0 else b""
        count = self._request_count
        super().data_received(data)
        if self._request_count == count:
            # No head ended here, whatever its blank line looked like: all of it was head.
            if head < len(data) and self._take_head(len(data) - head):
                self._end = seen[-len(_HEAD_END):]
            return
        self._give_head()
        message, self._body = self._messages[-1] if self._messages else (None, None)
        length = _content_length(message)
        if self._request_count > count + 1 or (length is not None
                                               and len(data) - head > length):
            self._refuse(_PIPELINED)
        elif length is not None:
            self._left = length - (len(data) - head) or None

    def _take_head(self, size: int) -> bool:
        if self._head + size > CONNECTION_HEAD_BYTES or not self._share.take("head", size):
            self._refuse("request head: more bytes than alk holds")
            return False
        self._head += size
        return True

    def _give_head(self) -> None:
        self._share.give("head", self._head)
        self._head = 0

    def _refuse(self, what: str) -> None:
        self._share.refuse(what)
        self._give_head()
        self.force_close()


_PIPELINED = "request: sent before the answer to the one before it"


def _content_length(message: Any) -> int | None:
    """A request's body length on the wire: 0 without one, None when chunked (or unread)."""
    headers = getattr(message, "headers", None)
    if headers is None or getattr(message, "chunked", False):
        return None
    try:
        return max(0, int(headers.get("Content-Length", 0)))
    except ValueError:
        return None


async def read_body(request: web.BaseRequest, most: int) -> bytes | None:
    """The body, None past `most` bytes (a 413), or a 503 raised when the session or the run
    holds all the bodies it may (the body unread). What it holds is given back as its request
    ends, answered or not."""
    share = request.protocol._share if isinstance(request.protocol, _Connection) else None
    if request.content_length is not None and request.content_length > most:
        return None
    held = 0
    task = asyncio.current_task()

    def hold(amount: int) -> None:
        nonlocal held
        if share is None or not amount:
            return
        if not share.take("body", amount):
            share.refuse("request body: more bytes in flight than alk holds")
            raise web.HTTPServiceUnavailable(text=BUSY, content_type="application/json")
        if not held and task is not None:
            task.add_done_callback(lambda _: share.give("body", held))
        held += amount

    hold(request.content_length or 0)
    chunks, size = [], 0
    while True:
        chunk = await request.content.read(64 * 1024)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > most:
            return None
        if size > held:
            hold(size - held)
        chunks.append(chunk)
