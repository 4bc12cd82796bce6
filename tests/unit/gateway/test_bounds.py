"""alk.gateway.bounds: what a worker's connections can make the gateway hold, per session and
per run; what is past the bounds is refused, counted and recorded, never buffered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from alk.gateway import bounds

HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"


async def answer(request: web.BaseRequest) -> web.Response:
    body = await bounds.read_body(request, 4 * 1024 * 1024)
    if request.query.get("hold"):
        await asyncio.sleep(0.3)
    return web.Response(status=200 if body is not None else 413, body=b"ok")


class Served:
    def __init__(self, run: bounds.Pool | None = None) -> None:
        self.run = run or bounds.run_pool()
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def __aenter__(self) -> Served:
        self.web = bounds.server(answer, self.run, self.events.append)
        self.listener = await asyncio.get_running_loop().create_server(self.web, "127.0.0.1", 0)
        self.port = self.listener.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.listener.close()
        await self.web.shutdown(0.05)

    async def send(self, data: bytes) -> bytes:
        """What the server answers `data` on a new connection, b"" if it was cut."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            writer.write(data)
            await writer.drain()
            return await asyncio.wait_for(reader.read(4096), 5)
        except (ConnectionError, OSError):
            return b""
        finally:
            writer.close()


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_an_ordinary_request_is_answered_and_holds_nothing_after() -> None:
    async def go() -> None:
        async with Served() as served:
            assert (await served.send(HEAD % 2 + b"{}")).startswith(b"HTTP/1.1 200")
            await asyncio.sleep(0.05)
            assert served.run.held == {"connections": 0, "head": 0, "body": 0}
            assert bounds.refused(served.web) == 0 and served.events == []
    run(go())


def test_one_connection_answers_requests_one_after_another() -> None:
    async def go() -> None:
        async with Served() as served:
            reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
            for _ in range(3):
                writer.write(HEAD % 2 + b"{}")
                assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
            writer.close()
            assert bounds.refused(served.web) == 0
    run(go())


def test_connections_past_the_sessions_bound_are_closed_as_they_are_accepted(monkeypatch) -> None:
    monkeypatch.setattr(bounds, "SESSION_CONNECTIONS", 3)
    monkeypatch.setattr(bounds, "RECORDED_REFUSALS", 2)

    async def go() -> None:
        async with Served() as served:
            held = [await asyncio.open_connection("127.0.0.1", served.port) for _ in range(6)]
            await asyncio.sleep(0.1)
            assert served.run.held["connections"] == 3
            assert bounds.refused(served.web) == 3
            assert [e[1]["count"] for e in served.events] == [1, 2]  # the rest only counted
            assert served.events[0][0] == "refused"
            for _, writer in held:
                writer.close()
            await asyncio.sleep(0.1)
            assert served.run.held["connections"] == 0
            assert (await served.send(HEAD % 0)).startswith(b"HTTP/1.1 200")
    run(go())


def test_a_head_that_never_ends_is_cut_at_its_bound_and_given_back(monkeypatch) -> None:
    monkeypatch.setattr(bounds, "CONNECTION_HEAD_BYTES", 16 * 1024)

    async def go() -> None:
        async with Served() as served:
            reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
            writer.write(b"POST / HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 4000 + b"\r\n")
            await asyncio.sleep(0.05)
            assert 4000 < served.run.held["head"] < 5000  # counted while it is unfinished
            for _ in range(4):
                writer.write(b"X-Pad: " + b"a" * 4000 + b"\r\n")
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, unanswered
            await asyncio.sleep(0.05)
            assert served.run.held == {"connections": 0, "head": 0, "body": 0}
            assert bounds.refused(served.web) == 1
            assert "request head" in served.events[0][1]["what"]
    run(go())


def test_the_runs_head_bytes_bound_every_session_together(monkeypatch) -> None:
    monkeypatch.setattr(bounds, "RUN_HEAD_BYTES", 6000)

    async def go() -> None:
        run_pool = bounds.run_pool()
        async with Served(run_pool) as one, Served(run_pool) as two:
            _, writer = await asyncio.open_connection("127.0.0.1", one.port)
            writer.write(b"POST / HTTP/1.1\r\nX-Pad: " + b"a" * 5000 + b"\r\n")
            await asyncio.sleep(0.05)
            assert await two.send(b"POST / HTTP/1.1\r\nX-Pad: " + b"b" * 2000) == b""
            assert bounds.refused(two.web) == 1 and bounds.refused(one.web) == 0
            writer.close()
    run(go())


@pytest.mark.parametrize("after", [b"", b"{}"])
def test_a_request_sent_before_the_answer_to_the_one_before_is_refused(after) -> None:
    async def go() -> None:
        async with Served() as served:
            first = (b"POST /?hold=1 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                     % len(after) + after)
            answer = await served.send(first + HEAD % 2 + b"{}")
            assert b"HTTP/1.1 200" not in answer.split(b"ok", 1)[-1]
            assert bounds.refused(served.web) == 1
            assert "before the answer" in served.events[0][1]["what"]
    run(go())


def test_bodies_past_what_the_run_holds_are_answered_503_unread(monkeypatch) -> None:
    monkeypatch.setattr(bounds, "RUN_BODY_BYTES", 150_000)
    body = b'"' + b"x" * 99_998 + b'"'

    async def go() -> None:
        async with Served() as served:
            reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
            writer.write(b"POST /?hold=1 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                         % len(body) + body)
            await asyncio.sleep(0.1)
            assert served.run.held["body"] == len(body)
            refused = await served.send(HEAD % len(body) + body)
            assert refused.startswith(b"HTTP/1.1 503") and b"request bodies" in refused
            assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
            writer.close()
            await asyncio.sleep(0.05)
            assert served.run.held["body"] == 0  # given back as each request ended
            assert bounds.refused(served.web) == 1
    run(go())


def test_a_chunked_body_is_held_as_it_is_read() -> None:
    async def go() -> None:
        async with Served() as served:
            chunked = (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"2\r\n{}\r\n0\r\n\r\n")
            assert (await served.send(chunked)).startswith(b"HTTP/1.1 200")
            await asyncio.sleep(0.05)
            assert served.run.held["body"] == 0 and bounds.refused(served.web) == 0
    run(go())


def test_a_server_that_is_not_bounded_refused_nothing() -> None:
    assert bounds.refused(None) == 0
