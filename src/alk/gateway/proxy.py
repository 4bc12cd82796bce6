"""Proxy mode: a call forwarded to the provider with alk's own key (the worker holds only its
attempt's token), what came back recorded as alk saw it, and added to the cassette being
recorded.

The worker chooses its requests, so an upstream's refusal of one (a 5xx, 401 or 403: content it
will not serve, a body it cannot take, a burst past its limits) says nothing by itself of the
provider. alk then asks the upstream itself (`check`: `GET /models/NAME` with alk's key, which
the worker has no part in): only when that fails too is the provider failing (the repeat's
`provider_error`, void); when it answers, the refusal was of the worker's request
(`upstream_refused`, scored). The same check runs once before any worker starts (`first_check`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import ClientError, ClientTimeout, web

from alk.gateway import cassette as cassettes
from alk.gateway.http import SSE, Answering, json_response
from alk.gateway.wire.bodies import error_body
from alk.gateway.wire.formats import FAMILIES, wire_format
from alk.gateway.wire.request import Asked
from alk.gateway.wire.upstream import read_answer

# What alk reads of an upstream's answer, and keeps of a streamed one for a cassette.
MAX_UPSTREAM_BYTES = 16 * 1024 * 1024
# alk's own check of the upstream: how long it waits, how long before it asks again once, and
# how many checks a session makes (a worker's stream of refusals must not become alk's own).
CHECK_TIMEOUT_S = 10.0
CHECK_RETRY_S = 1.0
MAX_CHECKS = 3


async def forward(session: Answering, request: web.BaseRequest, asked: Asked, body: bytes,
                  call: int, began: float, retry: bool) -> web.StreamResponse:
    """Forwards to the upstream with alk's key (the worker never holds it)."""
    setup = session.gateway.setup
    wire = wire_format(asked.api)
    url = (setup.upstream or "").rstrip("/") + wire.upstream_path(asked.model, asked.stream)
    headers = {**wire.upstream_headers(session.gateway.upstream_key),
               "Content-Type": "application/json", **_passed_on(request.headers)}
    client = await session.gateway.client()
    try:
        async with client.post(url, data=body, headers=headers) as upstream:
            status = upstream.status
            if asked.stream and status == 200:
                response = web.StreamResponse(status=200, headers=SSE)
                await response.prepare(request)
                kept: list[bytes] = []
                size = 0
                pending = b""
                listening = True
                async for chunk in upstream.content.iter_any():
                    if size < MAX_UPSTREAM_BYTES:
                        kept.append(chunk)
                        size += len(chunk)
                    # Whole frames only, each scrubbed: a value is not cut between two writes.
                    frames, pending = _whole_frames(pending + chunk)
                    if frames and listening:
                        listening = await _to_worker(response, scrubbed(session, frames))
                # A worker that hung up is no failure of the upstream's: the answer is read to
                # its end all the same, so that the tokens it cost are counted.
                if listening and await _to_worker(response, scrubbed(session, pending)):
                    await response.write_eof()
                data = b"".join(kept)
                settle(session, status, call, asked, body, began, retry, data, stream=True)
                return response
            data = await upstream.content.read(MAX_UPSTREAM_BYTES)
    except (ClientError, asyncio.TimeoutError, OSError) as exc:
        why = f"{type(exc).__name__}: {exc}"
        await judge_refusal(session, call, why)
        session.record(call, asked.api, asked, 502, began, retry=retry,
                       problem=session.gateway.redactor.cut(why, 300))
        return json_response(502, error_body(502, "alk's gateway: the upstream is "
                                             "unavailable", asked.api))
    if failing(status):
        await judge_refusal(session, call, f"the upstream answered {status}")
    settle(session, status, call, asked, body, began, retry, data, stream=False)
    return json_response(status, scrubbed(session, data))


async def _to_worker(response: web.StreamResponse, data: bytes) -> bool:
    """Writes to the worker; False once it has hung up."""
    try:
        await response.write(data)
    except ConnectionResetError:
        return False
    return True


# A stream's text held back waiting for the end of its frame; past it, written as it is.
MAX_PENDING_FRAME_BYTES = 1024 * 1024


def _whole_frames(data: bytes) -> tuple[bytes, bytes]:
    """(the complete server-sent-event frames in data, the partial frame after them); a frame
    ends in a blank line, LF or CRLF (Gemini's)."""
    ends = [data.rfind(blank) + len(blank) for blank in (b"\n\n", b"\r\n\r\n") if blank in data]
    if not ends:
        return (data, b"") if len(data) > MAX_PENDING_FRAME_BYTES else (b"", data)
    end = max(ends)
    return data[:end], data[end:]


def scrubbed(session: Answering, data: bytes) -> bytes:
    """What the upstream sent, without alk's key or a declared secret in any form the redactor
    knows: an upstream (or a proxy before it) whose error quotes the request's headers would
    hand the worker alk's key. Untouched bytes when there is nothing to redact."""
    text = data.decode("utf-8", "replace")
    clean = session.gateway.redactor.redact(text)
    return data if clean == text else clean.encode()


def failing(status: int | None) -> bool:
    """An answer that would say the provider or alk's key fails, were alk the one asking."""
    return status is None or status >= 500 or status in (401, 403)


# The worker's headers that say which version of its family's API it speaks (Anthropic's), passed
# on as they are, each bounded: the rest of its headers (its key above all) never cross.
PASSED_ON = ("anthropic-version", "anthropic-beta")
MAX_PASSED_CHARS = 200


def _passed_on(headers: Any) -> dict[str, str]:
    return {name: headers[name][:MAX_PASSED_CHARS] for name in PASSED_ON if name in headers}


def _family_format(gateway: Any) -> Any:
    """The format module of the family the proxy forwards (its first, for OpenAI)."""
    return wire_format(FAMILIES[gateway.setup.family or "openai"][0])


async def check(gateway: Any) -> tuple[int | None, str]:
    """alk's own request to the upstream: the lane's model, with alk's key. (status, what
    happened), status None when nothing answered."""
    setup, wire = gateway.setup, _family_format(gateway)
    url = (setup.upstream or "").rstrip("/") + wire.check_path(setup.name)
    client = await gateway.client()
    try:
        async with client.get(url, headers=wire.upstream_headers(gateway.upstream_key),
                              timeout=ClientTimeout(total=CHECK_TIMEOUT_S)) as answer:
            await answer.content.read(64 * 1024)  # drained, bounded, not kept
            return answer.status, f"GET {url} answered {answer.status}"
    except (ClientError, asyncio.TimeoutError, OSError) as exc:
        return None, f"GET {url}: {type(exc).__name__}: {exc}"


async def first_problem(gateway: Any) -> tuple[str, str] | None:
    """Before any worker starts: (the `[model]` field to fix, why) when alk's own check fails,
    so that a misnamed model or a refused key is the lane's error, never a repeat's failure."""
    status, why = await check(gateway)
    if failing(status):
        await asyncio.sleep(CHECK_RETRY_S)
        status, why = await check(gateway)
    setup = gateway.setup
    if status == 404:
        return "name", (f"the upstream does not serve a model named {setup.name!r} ({why}): "
                        "name one it serves (its GET /models lists them)")
    if status in (401, 403):
        return "key_env", (f"the upstream refuses the key alk reads from {setup.key_env} "
                           f"({why}): set it to a key the upstream takes")
    if failing(status):
        return "upstream", f"the upstream does not answer alk's own check ({why})"
    return None


def first_check(gateway: Any) -> tuple[str, str] | None:
    """`first_problem`, from alk's own thread (the checks' time and its retry's bound it)."""
    return gateway.call(first_problem(gateway), wait_s=2 * CHECK_TIMEOUT_S + CHECK_RETRY_S + 5)


async def judge_refusal(session: Answering, call: int, what: str) -> None:
    """Whose is a failed call: alk asks the upstream itself (twice, a second apart, before it
    calls the provider failing). Once the provider is shown failing, or past MAX_CHECKS, what
    was found stands."""
    if session.provider_error is not None or session.upstream_checks >= MAX_CHECKS:
        return
    session.upstream_checks += 1
    status, why = await check(session.gateway)
    if failing(status):
        await asyncio.sleep(CHECK_RETRY_S)
        status, why = await check(session.gateway)
    redact = session.gateway.redactor
    session.note("upstream_check", {"call": call, "status": status, "detail": redact.cut(why, 300)})
    if failing(status):
        provider_failed(session, f"call {call}: {what}, and alk's own check: {why}")
    elif session.upstream_refused is None:
        session.upstream_refused = redact.cut(
            f"call {call}: {what} to the worker's request, while alk's own check was answered "
            f"({why})", 300)


def settle(session: Answering, status: int, call: int, asked: Asked, body: bytes, began: float,
           retry: bool, data: bytes, stream: bool) -> None:
    """Records a proxied call (and adds it to the cassette being recorded)."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    events = tuple(f"{frame}\n\n" for frame in text.split("\n\n") if frame) if stream else ()
    reply, usage = read_answer(asked.api, data, events, stream)
    turn = None
    if status < 400:
        turn, session.turns = session.turns, session.turns + 1
        session.fault_pending = False
    session.record(call, asked.api, asked, status, began, retry=retry, reply=reply,
                   usage=usage, turn=turn, reported=True)
    recorder = session.gateway.recorder
    if recorder is not None:  # the writer redacts every text of the entry
        recorder.add(cassettes.Entry(
            api=asked.api, request=cassettes.normalize(asked.api, body, model=asked.model) or {},
            status=status, body="" if stream else data.decode("utf-8", "replace"),
            stream=stream, events=events, fault=None,
            scenario=session.scenario.id, repeat=session.repeat, attempt=session.attempt))


def provider_failed(session: Answering, why: str) -> None:
    if session.provider_error is None:
        session.provider_error = session.gateway.redactor.cut(why, 300)
