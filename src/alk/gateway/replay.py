"""Replay mode: a call answered from the cassette a proxied run recorded (`alk.gateway.cassette`),
in order, and only to a request equal to the recorded one; the first difference is the
session's `unmatched`, and the call gets a 500 in its own format.
"""

from __future__ import annotations

from aiohttp import web

from alk.gateway import cassette as cassettes
from alk.gateway.http import SSE, Answering, json_response
from alk.gateway.wire.bodies import error_body
from alk.gateway.wire.request import Asked
from alk.gateway.wire.upstream import read_answer


async def replayed(session: Answering, request: web.BaseRequest, asked: Asked, body: bytes,
                   call: int, began: float, retry: bool) -> web.StreamResponse:
    """The next recorded answer, as it was sent."""
    recorded = session.gateway.replayed
    normalized = cassettes.normalize(asked.api, body, model=asked.model)
    entry, why = (recorded.match(session.turns + 1, asked.api, normalized or {},
                                 redactor=session.gateway.redactor,
                                 key=(session.scenario.id, session.repeat, session.attempt))
                  if recorded is not None else (None, "no cassette"))
    if entry is None:
        if session.unmatched is None:
            session.unmatched = session.gateway.redactor.cut(why, 300)
        session.record(call, asked.api, asked, 500, began, retry=retry, problem=why)
        return json_response(500, error_body(500, f"alk replay: {why}", asked.api))
    session.turns += 1
    session.fault_pending = entry.status >= 400
    reply, usage = read_answer(asked.api, entry.body.encode(), entry.events, entry.stream)
    session.record(call, asked.api, asked, entry.status, began, retry=retry, reply=reply,
                   usage=usage, turn=session.turns - 1, reported=True)
    if entry.stream:
        response = web.StreamResponse(status=entry.status, headers=SSE)
        await response.prepare(request)
        for frame in entry.events:
            await response.write(frame.encode())
        await response.write_eof()
        return response
    return json_response(entry.status, entry.body.encode())

