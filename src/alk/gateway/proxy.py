"""Proxy mode: a call forwarded to the provider with alk's own key (the worker holds only its
attempt's token), what came back recorded as alk saw it, and added to the cassette being
recorded. A provider that fails (5xx, 401, 403, no answer) is named as the repeat's provider
error.
"""

from __future__ import annotations

import asyncio

from aiohttp import ClientError, web

from alk.gateway import cassette as cassettes
from alk.gateway.http import SSE, Answering, json_response
from alk.gateway.wire.bodies import error_body
from alk.gateway.wire.request import Asked
from alk.gateway.wire.upstream import read_answer

# What alk reads of an upstream's answer, and keeps of a streamed one for a cassette.
MAX_UPSTREAM_BYTES = 16 * 1024 * 1024


async def forward(session: Answering, request: web.BaseRequest, asked: Asked, body: bytes,
                  call: int, began: float, retry: bool) -> web.StreamResponse:
    """Forwards to the upstream with alk's key (the worker never holds it)."""
    setup = session.gateway.setup
    url = f"{(setup.upstream or '').rstrip('/')}/{'chat/completions' if asked.api == 'chat' else 'responses'}"
    headers = {"Authorization": f"Bearer {session.gateway.upstream_key}",
               "Content-Type": "application/json"}
    client = await session.gateway.client()
    try:
        async with client.post(url, data=body, headers=headers) as upstream:
            status = upstream.status
            if asked.stream and status == 200:
                response = web.StreamResponse(status=200, headers=SSE)
                await response.prepare(request)
                kept: list[bytes] = []
                size = 0
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                    if size < MAX_UPSTREAM_BYTES:
                        kept.append(chunk)
                        size += len(chunk)
                await response.write_eof()
                data = b"".join(kept)
                settle(session, status, call, asked, body, began, retry, data, stream=True)
                return response
            data = await upstream.content.read(MAX_UPSTREAM_BYTES)
    except (ClientError, asyncio.TimeoutError, OSError) as exc:
        provider_failed(session, f"{type(exc).__name__}: {exc}")
        session.record(call, asked.api, asked, 502, began, retry=retry,
                       problem=session.provider_error)
        return json_response(502, error_body(502, "alk's gateway: the upstream is "
                                             "unavailable"))
    settle(session, status, call, asked, body, began, retry, data, stream=False)
    return json_response(status, data)


def settle(session: Answering, status: int, call: int, asked: Asked, body: bytes, began: float,
           retry: bool, data: bytes, stream: bool) -> None:
    """Records a proxied call (and adds it to the cassette being recorded)."""
    if status >= 500 or status in (401, 403):
        provider_failed(session, f"the upstream answered {status}")
    events = tuple(f"{frame}\n\n" for frame in
                   data.decode("utf-8", "replace").split("\n\n") if frame) if stream else ()
    reply, usage = read_answer(asked.api, data, events, stream)
    turn = None
    if status < 400:
        turn, session.turns = session.turns, session.turns + 1
        session.fault_pending = False
    session.record(call, asked.api, asked, status, began, retry=retry, reply=reply,
                   usage=usage, turn=turn)
    recorder = session.gateway.recorder
    if recorder is not None:
        redact = session.gateway.redactor.redact
        recorder.add(cassettes.Entry(
            api=asked.api, request=cassettes.normalize(asked.api, body) or {},
            status=status, body="" if stream else redact(data.decode("utf-8", "replace")),
            stream=stream, events=tuple(map(redact, events)), fault=None,
            scenario=session.scenario.id, repeat=session.repeat, attempt=session.attempt))


def provider_failed(session: Answering, why: str) -> None:
    if session.provider_error is None:
        session.provider_error = session.gateway.redactor.cut(why, 300)
