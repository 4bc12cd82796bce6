"""The wire faults a scenario asks of the gateway (`wire_faults`), injected at their call
instead of its answer: an HTTP error (429, 500, 503, 401), a tool call whose arguments do not
parse, a body that is not JSON, a stream cut short, a stall, a connection reset. The kinds
and their statuses are `gateway.script`'s (FAULT_KINDS, FAULT_STATUS).
"""

from __future__ import annotations

import asyncio
import math
import time

from aiohttp import web

from alk.gateway.http import SSE, Answering, json_response, reset
from alk.gateway.script import EXHAUSTED_TEXT, FAULT_STATUS, sampled_turn
from alk.gateway.wire.bodies import (
    error_body,
    malformed_body,
    malformed_stream,
    response_body,
    stream_events,
    truncated_body,
    truncated_stream,
)
from alk.gateway.wire.reply import Reply, ToolCall, estimate_usage, reply_from_turn
from alk.gateway.wire.request import Asked
from alk.served_model import WireFault

# The bytes of a broken tool call (bad_tool_args): cut where a JSON parser cannot guess.
BAD_ARGUMENTS = '{"order": "742'


async def inject(session: Answering, request: web.BaseRequest, fault: WireFault, asked: Asked,
                 call: int, began: float, retry: bool) -> web.StreamResponse:
    """The scenario's wire fault at this call, instead of its answer (no turn is used)."""
    kind = fault.kind
    if kind in FAULT_STATUS:
        status = FAULT_STATUS[kind]
        headers = {}
        if fault.retry_after_s is not None:
            # Retry-After is whole seconds; OpenAI's clients read retry-after-ms first.
            headers = {"Retry-After": str(math.ceil(fault.retry_after_s)),
                       "retry-after-ms": str(round(fault.retry_after_s * 1000))}
        session.record(call, asked.api, asked, status, began, retry=retry, fault=kind)
        return json_response(status, error_body(status, f"alk injected {kind} at call {call}"),
                             headers)
    if kind == "bad_tool_args":
        turn = sampled_turn(session.scenario.script, session.turns, session.seed) or {}
        name = turn.get("tool") or (asked.tools[0] if asked.tools else "tool")
        reply = Reply(tool_calls=(ToolCall(name, BAD_ARGUMENTS),))
        return await session.reply(request, asked, reply, call, began, retry, turn=None,
                                   fault=kind)
    if kind == "malformed_json":
        session.record(call, asked.api, asked, 200, began, retry=retry, fault=kind)
        if not asked.stream:
            return json_response(200, malformed_body(asked.api, call))
        response = web.StreamResponse(status=200, headers=SSE)
        await response.prepare(request)
        await response.write(malformed_stream(asked.api, call))
        await response.write_eof()
        return response
    if kind == "stall":
        session.record(call, asked.api, asked, None, began, retry=retry, fault=kind)
        await asyncio.sleep(fault.seconds if fault.seconds is not None else 10**6)
        reset(request)
        return web.Response(status=204)
    if kind == "connection_reset":
        session.record(call, asked.api, asked, None, began, retry=retry, fault=kind)
        reset(request)
        return web.Response(status=204)
    # truncated_stream: the answer's first half, cut mid-message, then the connection ends.
    turn = sampled_turn(session.scenario.script, session.turns, session.seed)
    reply = reply_from_turn(turn) if turn else Reply(text=EXHAUSTED_TEXT)
    usage = estimate_usage(asked, reply)
    kwargs = dict(model=asked.model or session.gateway.setup.name, call=call, usage=usage,
                  created=int(time.time()))
    session.record(call, asked.api, asked, 200, began, retry=retry, fault=kind)
    if asked.stream:
        data = truncated_stream(stream_events(asked.api, reply, **kwargs))
        response = web.StreamResponse(status=200, headers=SSE)
    else:
        whole = response_body(asked.api, reply, **kwargs)
        data = truncated_body(whole)
        response = web.StreamResponse(status=200, headers={"Content-Type":
                                                           "application/json"})
        response.content_length = len(whole)
    await response.prepare(request)
    await response.write(data)
    reset(request)
    return response
