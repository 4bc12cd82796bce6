"""The wire faults a scenario asks of the gateway (`wire_faults`), injected at their call in the
format the call speaks: an HTTP error (408, 429, 500, 503, 529), a tool call whose arguments do
not parse or that names no tool offered, a body that is not JSON, a stream cut short or ending
in an error event, an answer without usage, ended by a safety refusal or the token limit, or
with no choice at all, a stall, a connection reset. The kinds and their statuses are
`gateway.script`'s (FAULT_KINDS, FAULT_STATUS); docs/gateway.md says what each sends.

A fault is its call's answer in place of the script's: no turn is used, so a client that asks
again gets the turn the fault stood in for. `no_usage` alone is an answer in full (the turn's,
without its usage), and uses its turn.
"""

from __future__ import annotations

import asyncio
import email.utils
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
from alk.gateway.wire.formats import wire_format
from alk.gateway.wire.reply import (
    Reply,
    ToolCall,
    broken_arguments,
    estimate_usage,
    reply_from_turn,
)
from alk.gateway.wire.request import Asked
from alk.served_model import WireFault

# The bytes of a broken tool call (bad_tool_args): cut where a JSON parser cannot guess.
BAD_ARGUMENTS = '{"order": "742'
# The tool an unknown_tool call names: none a worker offers.
UNKNOWN_TOOL = "alk_no_such_tool"
_FINISH = {"finish_safety": "refused", "finish_max_tokens": "max_tokens"}


def status_headers(fault: WireFault) -> dict[str, str]:
    """Retry-After in whole seconds, or as an HTTP date (then alone: OpenAI's and Anthropic's
    clients read retry-after-ms first), and x-should-retry when the fault says."""
    headers = {}
    if fault.retry_after_s is not None:
        if fault.retry_after_date:
            # Rounded up: a date holds whole seconds, and one cut down would ask a client that
            # honours it for less than the declared wait (1 s would read as 0.5 s).
            headers["Retry-After"] = email.utils.formatdate(
                math.ceil(time.time() + fault.retry_after_s), usegmt=True)
        else:
            headers = {"Retry-After": str(math.ceil(fault.retry_after_s)),
                       "retry-after-ms": str(round(fault.retry_after_s * 1000))}
    if fault.should_retry is not None:
        headers["x-should-retry"] = "true" if fault.should_retry else "false"
    return headers


def _turn_reply(session: Answering) -> Reply:
    """The reply of the turn this call stands at (the script's end's text past it)."""
    turn = sampled_turn(session.scenario.script, session.turns, session.seed)
    return reply_from_turn(turn) if turn else Reply(text=EXHAUSTED_TEXT)


async def inject(session: Answering, request: web.BaseRequest, fault: WireFault, asked: Asked,
                 call: int, began: float, retry: bool) -> web.StreamResponse:
    """The scenario's wire fault at this call, instead of its answer."""
    kind = fault.kind
    if kind in FAULT_STATUS:
        status = FAULT_STATUS[kind]
        session.record(call, asked.api, asked, status, began, retry=retry, fault=kind)
        return json_response(status, error_body(status, f"alk injected {kind} at call {call}",
                                                asked.api, retry_after_s=fault.retry_after_s),
                             status_headers(fault))
    if kind in ("bad_tool_args", "unknown_tool"):
        turn = sampled_turn(session.scenario.script, session.turns, session.seed) or {}
        name = turn.get("tool") or (asked.tools[0] if asked.tools else "tool")
        reply = Reply(tool_calls=(ToolCall(name, BAD_ARGUMENTS),)) if kind == "bad_tool_args" \
            else Reply(tool_calls=(ToolCall(UNKNOWN_TOOL, "{}"),))
        return await session.reply(request, asked, reply, call, began, retry, turn=None,
                                   fault=kind)
    if kind == "no_usage":
        reply = _turn_reply(session)
        session.turns += 1
        session.fault_pending = False  # answered in full: nothing to recover from
        return await session.reply(request, asked, reply, call, began, retry,
                                   turn=session.turns - 1, fault=kind, usage_sent=False)
    if kind in _FINISH:
        # A refusal keeps no tool call; the token limit cuts the text and the arguments.
        whole = _turn_reply(session)
        reply = Reply(text=whole.text or "") if kind == "finish_safety" else \
            broken_arguments(Reply(text=(whole.text or "")[:max(1, len(whole.text or "") // 2)]
                                   if whole.text is not None else None,
                                   tool_calls=whole.tool_calls))
        return await session.reply(request, asked, reply, call, began, retry, turn=None,
                                   fault=kind, finish=_FINISH[kind])
    if kind == "empty_choices":
        return await session.reply(request, asked, Reply(), call, began, retry, turn=None,
                                   fault=kind)
    if kind == "malformed_json":
        session.record(call, asked.api, asked, 200, began, retry=retry, fault=kind)
        if not asked.stream:
            return json_response(200, malformed_body(asked.api, call))
        return await _stream(request, [malformed_stream(asked.api, call)])
    if kind == "stall":
        session.record(call, asked.api, asked, None, began, retry=retry, fault=kind)
        await asyncio.sleep(fault.seconds if fault.seconds is not None else 10**6)
        reset(request)
        return web.Response(status=204)
    if kind == "connection_reset":
        session.record(call, asked.api, asked, None, began, retry=retry, fault=kind)
        reset(request)
        return web.Response(status=204)
    reply = _turn_reply(session)
    usage = estimate_usage(asked, reply)
    kwargs = dict(model=asked.model or session.gateway.setup.name, call=call, usage=usage,
                  created=int(time.time()))
    session.record(call, asked.api, asked, 200, began, retry=retry, fault=kind)
    if kind == "stream_error":
        message = f"alk injected stream_error at call {call}"
        if not asked.stream:  # the format's error object, with a 200, as some gateways send
            return json_response(200, error_body(500, message, asked.api))
        return await _stream(request, wire_format(asked.api).error_frames(
            reply, model=kwargs["model"], call=call, created=kwargs["created"],
            message=message))
    # truncated_stream: the answer's first half, cut mid-message, then the connection ends.
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


async def _stream(request: web.BaseRequest, frames: list[bytes]) -> web.StreamResponse:
    """A 200 event stream of these frames, ended cleanly."""
    response = web.StreamResponse(status=200, headers=SSE)
    await response.prepare(request)
    for frame in frames:
        await response.write(frame)
    await response.write_eof()
    return response
