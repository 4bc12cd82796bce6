"""A model provider on loopback for the proxy tests: an aiohttp server on a thread of its own
loop, answering with its subclass's `_answer`. Nothing here reaches the internet."""

from __future__ import annotations

import asyncio
import socket
import threading

from aiohttp import web


class LoopbackProvider:
    """Serves `_answer` on 127.0.0.1 at `port` (`url` is its OpenAI-style base) until `close`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        sock = socket.create_server(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._serve(sock), self.loop).result(5)

    async def _serve(self, sock: socket.socket) -> None:
        await self.loop.create_server(web.Server(self._answer), sock=sock)

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        raise NotImplementedError

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
