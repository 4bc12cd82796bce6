"""The gateway: alk serves the model a worker talks to, over OpenAI's HTTP API.

One `Gateway` per run runs an asyncio loop in a thread of alk; every attempt of every repeat gets
a `Session`: its own token (the worker's OPENAI_API_KEY), its own listener, its script position,
its faults and its record of calls. With `network = "none"` the listener is made inside the
worker's network namespace by alk's init and handed to alk (`runner/init.py`); this loop serves
it from alk's side, so the worker reaches the gateway and nothing else. What a session sees is
written to the transcript by the runner's loop (`events`), as the harness's own evidence.

HTTP itself is aiohttp's (its low-level server, and its client for the proxy); what goes on the
wire is `gateway.wire`'s; what the script says is `gateway.script`'s.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import hmac
import logging
import math
import os
import secrets
import socket
import struct
import threading
import time
from typing import Any, Mapping

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from alk.gateway import cassette as cassettes
from alk.gateway import wire
from alk.gateway.script import EXHAUSTED_TEXT, FAULT_STATUS, sampled_turn
from alk.records import ModelSeen, ModelSetup, Scenario, WireFault
from alk.redaction import Redactor

# A request body larger than this is refused (413): a worker cannot make alk hold more.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
# What alk reads of an upstream's answer (proxy), and keeps of a streamed one for a cassette.
MAX_UPSTREAM_BYTES = 16 * 1024 * 1024
# Requests a session answers at once: each may hold up to MAX_REQUEST_BYTES in alk, so a worker
# opening a thousand connections cannot make alk hold gigabytes. Past it: 503, not read.
MAX_CONCURRENT_CALLS = 16
# Calls recorded in a session's transcript events and steps; past them, only counted.
MAX_RECORDED_CALLS = 1000
# How long the proxy waits on the upstream before it is unavailable.
UPSTREAM_TIMEOUT_S = 120.0
# How long closing a session waits for a handler still running (a stall) before cancelling it.
CLOSE_GRACE_S = 0.05
# How long alk waits for its thread to start or to take a listener.
THREAD_WAIT_S = 5.0
# The bytes of a broken tool call (bad_tool_args): cut where a JSON parser cannot guess.
BAD_ARGUMENTS = '{"order": "742'
# The gateway's port inside a worker's own network namespace, where every port is free.
NAMESPACE_PORT = 8011
_PATHS = {"chat/completions": "chat", "responses": "responses"}
_SILENT = logging.getLogger("alk.gateway.http")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


class Gateway:
    """The run's gateway: a thread with an event loop, and what every session shares (the
    cassette to replay, the one being recorded, the upstream's key)."""

    def __init__(self, setup: ModelSetup, redactor: Redactor,
                 environ: Mapping[str, str] = os.environ) -> None:
        self.setup = setup
        self.redactor = redactor
        self._key = environ.get(setup.key_env, "") if setup.key_env else ""
        self.replayed = cassettes.Cassette.load(setup.cassette) \
            if setup.mode == "replay" and setup.cassette else None
        self.recorder = cassettes.CassetteWriter(setup.record) \
            if setup.mode == "proxy" and setup.record else None
        self._client: ClientSession | None = None
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="alk-gateway",
                                        daemon=True)
        self._thread.start()
        ready.wait(THREAD_WAIT_S)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(ready.set)
        self._loop.run_forever()

    def session(self, scenario: Scenario, seed: int, attempt: int, repeat: int = 0) -> Session:
        return Session(self, scenario, seed, attempt, repeat)

    def call(self, coroutine: Any) -> Any:
        """Runs a coroutine on the gateway's loop and waits for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(THREAD_WAIT_S)

    async def client(self) -> ClientSession:
        if self._client is None:
            self._client = ClientSession(timeout=ClientTimeout(total=UPSTREAM_TIMEOUT_S))
        return self._client

    def close(self) -> None:
        """Stops the thread; writes the recorded cassette, if one was asked for."""
        if self._client is not None:
            try:
                self.call(self._client.close())
            except Exception:  # noqa: BLE001 - closing must not fail the run
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(THREAD_WAIT_S)
        if not self._thread.is_alive():
            self._loop.close()  # its selector and wake-up pipe: three files a gateway
        if self.recorder is not None:
            self.recorder.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def upstream_key(self) -> str:
        return self._key


class Session:
    """One attempt's model: its token, its listener, and everything it answered. The handler
    runs on the gateway's thread; the runner's loop reads `events` and `wake_fd` on its own."""

    def __init__(self, gateway: Gateway, scenario: Scenario, seed: int, attempt: int,
                 repeat: int) -> None:
        self.gateway, self.scenario, self.seed = gateway, scenario, seed
        self.attempt, self.repeat = attempt, repeat
        self.key = "alk-" + secrets.token_urlsafe(24)
        self.port: int | None = None
        self.faults: dict[int, WireFault] = {f.call: f for f in scenario.wire_faults}
        self._events: collections.deque[tuple[str, dict[str, Any]]] = collections.deque()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._server: Any = None
        self._web: web.Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._closed = False
        # What the session saw (written on the gateway's thread, read after close).
        self.calls = 0
        self.turns = 0
        self.retries = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.fired: list[str] = []
        self._fault_pending = False  # a fault fired and no call since was answered in full
        self.exhausted: tuple[int, int] | None = None
        self.provider_error: str | None = None
        self.unmatched: str | None = None
        self.steps: list[str] = []
        self._last: tuple[str, bool] | None = None  # (the last call's body digest, it failed)

    # -- alk's side ------------------------------------------------------------------------------

    @property
    def wake_fd(self) -> int:
        """Readable when the gateway recorded something: the runner's loop waits on it too."""
        return self._wake_read

    def environment(self, base_url: str) -> dict[str, str]:
        """The worker's variables: an unmodified OpenAI client finds the gateway through them
        (OPENAI_API_BASE for older integrations)."""
        return {"OPENAI_BASE_URL": base_url, "OPENAI_API_BASE": base_url,
                "OPENAI_API_KEY": self.key}

    def start_fields(self, base_url: str) -> dict[str, Any]:
        """What the start message carries of the model."""
        return {"base_url": base_url, "api_key": self.key, "mode": self.gateway.setup.mode,
                "name": self.gateway.setup.name}

    def listen_on_host(self) -> int:
        """A listener on alk's own loopback (network "host"): its port."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self.serve(listener)
        return self.port

    def serve(self, listener: socket.socket) -> None:
        """Serves a listening socket (made here, or in the worker's namespace and passed)."""
        listener.setblocking(False)
        self.gateway.call(self._start(listener))

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """What was recorded since the last look (the runner writes it to the transcript)."""
        try:
            while os.read(self._wake_read, 4096):
                pass
        except OSError:
            pass
        taken = []
        while self._events:
            taken.append(self._events.popleft())
        return taken

    def served_turns(self) -> int:
        return self.turns

    def close(self) -> ModelSeen:
        """Stops serving (a stalled call is cancelled) and says what was seen."""
        if not self._closed:
            self._closed = True
            try:
                self.gateway.call(self._stop())
            except Exception:  # noqa: BLE001 - a stuck loop must not hold the run
                pass
            os.close(self._wake_write)
        return ModelSeen(
            calls=self.calls, turns=self.turns, retries=self.retries,
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            faults_fired=tuple(self.fired), recovered=not self._fault_pending,
            exhausted=self.exhausted, provider_error=self.provider_error,
            unmatched=self.unmatched, steps=tuple(self.steps))

    def release(self) -> None:
        """Closes the wake pipe's read end once the runner has drained it (once: a number
        closed twice may by then name another file)."""
        self.close()
        if self._wake_read >= 0:
            os.close(self._wake_read)
            self._wake_read = -1

    # -- the gateway's thread --------------------------------------------------------------------

    async def _start(self, listener: socket.socket) -> None:
        self._web = web.Server(self._handle, logger=_SILENT, access_log=None)
        self._server = await asyncio.get_running_loop().create_server(self._web, sock=listener)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._web is not None:
            await self._web.shutdown(CLOSE_GRACE_S)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if len(self._handlers) >= MAX_CONCURRENT_CALLS:
            return _json(503, wire.error_body(503, f"alk's gateway answers at most "
                                                   f"{MAX_CONCURRENT_CALLS} requests at once"))
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            return await self._answer(request)
        finally:
            if task is not None:
                self._handlers.discard(task)

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path.rstrip("/")
        path = path[len("/v1"):] if path.startswith("/v1/") or path == "/v1" else path
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode("utf-8", "replace"),
                                   f"Bearer {self.key}".encode()):
            return _json(401, wire.error_body(401, "alk's gateway: the API key is not this "
                                                   "repeat's OPENAI_API_KEY"))
        if request.method == "GET" and path == "/models":
            return _json(200, wire.models_body([self.gateway.setup.name], created=0))
        api = _PATHS.get(path.lstrip("/"))
        if request.method != "POST" or api is None:
            return _json(404, wire.error_body(404, "alk's gateway serves POST /v1/chat/"
                                                   "completions and /v1/responses"))
        body = await _read_bounded(request)
        if body is None:
            return _json(413, wire.error_body(413, f"request body over {MAX_REQUEST_BYTES} "
                                                   "bytes"))
        self.calls += 1
        call = self.calls
        began = time.monotonic()
        asked = wire.read_request(api, body)
        if isinstance(asked, str):
            self._record(call, api, None, 400, began, problem=asked)
            return _json(400, wire.error_body(400, asked))
        if self.attempt > 1 and call == 1 and self.gateway.setup.mode == "script":
            # A resumed attempt: a framework that kept its state sends the conversation so far,
            # and the model answers where it stands; one that starts over gets the first turn.
            self.turns = min(asked.answered, len(self.scenario.script))
        digest = hashlib.sha256(body).hexdigest()
        retry = self._last is not None and self._last == (digest, True)
        if retry:
            self.retries += 1
        fault = self.faults.get(call)
        if fault is not None:
            self.fired.append(fault.label)
            self._fault_pending = True
            self._last = (digest, True)
            return await self._inject(request, fault, asked, call, began, retry)
        answer = await (self._proxied(request, asked, body, call, began, retry)
                        if self.gateway.setup.mode == "proxy" else
                        self._served(request, asked, body, call, began, retry))
        self._last = (digest, answer.status >= 400)
        return answer

    async def _served(self, request: web.BaseRequest, asked: wire.Asked, body: bytes,
                      call: int, began: float, retry: bool) -> web.StreamResponse:
        """Script and replay: the next turn, in the wire format the request asked for."""
        if self.gateway.setup.mode == "replay":
            return await self._replayed(request, asked, body, call, began, retry)
        turn_index = self.turns
        turn = sampled_turn(self.scenario.script, turn_index, self.seed)
        if turn is None:
            if self.exhausted is None:
                self.exhausted = (turn_index + 1, len(self.scenario.script))
            reply = wire.Reply(text=EXHAUSTED_TEXT)
            shown_turn = None
        else:
            reply = wire.reply_from_turn(turn)
            self.turns += 1
            shown_turn = turn_index
        self._fault_pending = False
        return await self._reply(request, asked, reply, call, began, retry, turn=shown_turn)

    async def _replayed(self, request: web.BaseRequest, asked: wire.Asked, body: bytes,
                        call: int, began: float, retry: bool) -> web.StreamResponse:
        recorded = self.gateway.replayed
        normalized = cassettes.normalize(asked.api, body)
        entry, why = (recorded.match(self.turns + 1, asked.api, normalized or {},
                                     redactor=self.gateway.redactor,
                                     key=(self.scenario.id, self.repeat, self.attempt))
                      if recorded is not None else (None, "no cassette"))
        if entry is None:
            if self.unmatched is None:
                self.unmatched = self.gateway.redactor.cut(why, 300)
            self._record(call, asked.api, asked, 500, began, retry=retry, problem=why)
            return _json(500, wire.error_body(500, f"alk replay: {why}"))
        self.turns += 1
        self._fault_pending = entry.status >= 400
        reply, usage = _read_answer(asked.api, entry.body.encode(), entry.events, entry.stream)
        self._record(call, asked.api, asked, entry.status, began, retry=retry, reply=reply,
                     usage=usage, turn=self.turns - 1)
        if entry.stream:
            response = web.StreamResponse(status=entry.status, headers=_SSE)
            await response.prepare(request)
            for frame in entry.events:
                await response.write(frame.encode())
            await response.write_eof()
            return response
        return _json(entry.status, entry.body.encode())

    async def _reply(self, request: web.BaseRequest, asked: wire.Asked, reply: wire.Reply,
                     call: int, began: float, retry: bool, turn: int | None,
                     fault: str | None = None) -> web.StreamResponse:
        usage = wire.estimate_usage(asked, reply)
        kwargs = dict(model=asked.model or self.gateway.setup.name, call=call, usage=usage,
                      created=int(time.time()))
        self._record(call, asked.api, asked, 200, began, retry=retry, reply=reply, usage=usage,
                     turn=turn, fault=fault)
        if not asked.stream:
            return _json(200, wire.response_body(asked.api, reply, **kwargs))
        response = web.StreamResponse(status=200, headers=_SSE)
        await response.prepare(request)
        for frame in wire.stream_events(asked.api, reply, **kwargs):
            await response.write(frame)
        await response.write_eof()
        return response

    async def _inject(self, request: web.BaseRequest, fault: WireFault, asked: wire.Asked,
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
            self._record(call, asked.api, asked, status, began, retry=retry, fault=kind)
            return _json(status, wire.error_body(status, f"alk injected {kind} at call {call}"),
                         headers)
        if kind == "bad_tool_args":
            turn = sampled_turn(self.scenario.script, self.turns, self.seed) or {}
            name = turn.get("tool") or (asked.tools[0] if asked.tools else "tool")
            reply = wire.Reply(tool_calls=(wire.ToolCall(name, BAD_ARGUMENTS),))
            return await self._reply(request, asked, reply, call, began, retry, turn=None,
                                     fault=kind)
        if kind == "malformed_json":
            self._record(call, asked.api, asked, 200, began, retry=retry, fault=kind)
            if not asked.stream:
                return _json(200, wire.malformed_body(asked.api, call))
            response = web.StreamResponse(status=200, headers=_SSE)
            await response.prepare(request)
            await response.write(wire.malformed_stream(asked.api, call))
            await response.write_eof()
            return response
        if kind == "stall":
            self._record(call, asked.api, asked, None, began, retry=retry, fault=kind)
            await asyncio.sleep(fault.seconds if fault.seconds is not None else 10**6)
            _reset(request)
            return web.Response(status=204)
        if kind == "connection_reset":
            self._record(call, asked.api, asked, None, began, retry=retry, fault=kind)
            _reset(request)
            return web.Response(status=204)
        # truncated_stream: the answer's first half, cut mid-message, then the connection ends.
        turn = sampled_turn(self.scenario.script, self.turns, self.seed)
        reply = wire.reply_from_turn(turn) if turn else wire.Reply(text=EXHAUSTED_TEXT)
        usage = wire.estimate_usage(asked, reply)
        kwargs = dict(model=asked.model or self.gateway.setup.name, call=call, usage=usage,
                      created=int(time.time()))
        self._record(call, asked.api, asked, 200, began, retry=retry, fault=kind)
        if asked.stream:
            data = wire.truncated_stream(wire.stream_events(asked.api, reply, **kwargs))
            response = web.StreamResponse(status=200, headers=_SSE)
        else:
            whole = wire.response_body(asked.api, reply, **kwargs)
            data = wire.truncated_body(whole)
            response = web.StreamResponse(status=200, headers={"Content-Type":
                                                               "application/json"})
            response.content_length = len(whole)
        await response.prepare(request)
        await response.write(data)
        _reset(request)
        return response

    async def _proxied(self, request: web.BaseRequest, asked: wire.Asked, body: bytes,
                       call: int, began: float, retry: bool) -> web.StreamResponse:
        """Forwards to the upstream with alk's key (the worker never holds it)."""
        setup = self.gateway.setup
        url = f"{(setup.upstream or '').rstrip('/')}/{'chat/completions' if asked.api == 'chat' else 'responses'}"
        headers = {"Authorization": f"Bearer {self.gateway.upstream_key}",
                   "Content-Type": "application/json"}
        client = await self.gateway.client()
        try:
            async with client.post(url, data=body, headers=headers) as upstream:
                status = upstream.status
                if asked.stream and status == 200:
                    response = web.StreamResponse(status=200, headers=_SSE)
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
                    self._settle(status, call, asked, body, began, retry, data, stream=True)
                    return response
                data = await upstream.content.read(MAX_UPSTREAM_BYTES)
        except (ClientError, asyncio.TimeoutError, OSError) as exc:
            self._provider_failed(f"{type(exc).__name__}: {exc}")
            self._record(call, asked.api, asked, 502, began, retry=retry,
                         problem=self.provider_error)
            return _json(502, wire.error_body(502, "alk's gateway: the upstream is unavailable"))
        self._settle(status, call, asked, body, began, retry, data, stream=False)
        return _json(status, data)

    def _settle(self, status: int, call: int, asked: wire.Asked, body: bytes, began: float,
                retry: bool, data: bytes, stream: bool) -> None:
        """Records a proxied call (and adds it to the cassette being recorded)."""
        if status >= 500 or status in (401, 403):
            self._provider_failed(f"the upstream answered {status}")
        events = tuple(f"{frame}\n\n" for frame in
                       data.decode("utf-8", "replace").split("\n\n") if frame) if stream else ()
        reply, usage = _read_answer(asked.api, data, events, stream)
        turn = None
        if status < 400:
            turn, self.turns = self.turns, self.turns + 1
            self._fault_pending = False
        self._record(call, asked.api, asked, status, began, retry=retry, reply=reply,
                     usage=usage, turn=turn)
        recorder = self.gateway.recorder
        if recorder is not None:
            redact = self.gateway.redactor.redact
            recorder.add(cassettes.Entry(
                api=asked.api, request=cassettes.normalize(asked.api, body) or {},
                status=status, body="" if stream else redact(data.decode("utf-8", "replace")),
                stream=stream, events=tuple(map(redact, events)), fault=None,
                scenario=self.scenario.id, repeat=self.repeat, attempt=self.attempt))

    def _provider_failed(self, why: str) -> None:
        if self.provider_error is None:
            self.provider_error = self.gateway.redactor.cut(why, 300)

    def _record(self, call: int, api: str, asked: wire.Asked | None, status: int | None,
                began: float, *, retry: bool = False, reply: wire.Reply | None = None,
                usage: wire.Usage | None = None, turn: int | None = None,
                fault: str | None = None, problem: str | None = None) -> None:
        """One call as the harness saw it: counted always, recorded while within bounds."""
        if usage is not None:
            self.prompt_tokens += usage.prompt_tokens
            self.completion_tokens += usage.completion_tokens
        if call > MAX_RECORDED_CALLS:
            return
        tools = [c.name for c in reply.tool_calls] if reply is not None else []
        redact = self.gateway.redactor
        step = f"{status if status is not None else 'none'}:" + (
            ",".join(redact.bounded(t, 64) for t in tools) if tools else
            "text" if reply is not None and reply.text is not None else fault or "-")
        self.steps.append(step)
        payload: dict[str, Any] = {
            "call": call, "api": api, "stream": asked.stream if asked else None,
            "status": status, "ms": round((time.monotonic() - began) * 1000, 1),
            "turn": turn, "retry": retry, "fault": fault,
            "tool_calls": [redact.bounded(t, 64) for t in tools][:16],
            "text_chars": len(reply.text) if reply is not None and reply.text else 0,
            "tokens": ({"prompt": usage.prompt_tokens, "completion": usage.completion_tokens}
                       if usage is not None else None),
        }
        if asked is not None:
            payload["model"] = redact.bounded(asked.model, 100)
        if problem:
            payload["problem"] = redact.cut(problem, 300)
        self._events.append(("call", payload))
        if self._closed:
            return  # the write end is closed, and its number may name another file by now
        try:
            os.write(self._wake_write, b"!")
        except OSError:
            pass  # the pipe is full: the loop has a wake-up pending already



_SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def _read_answer(api: str, body: bytes, events: tuple[str, ...], stream: bool
                 ) -> tuple[wire.Reply | None, wire.Usage | None]:
    """What a recorded or proxied answer said, and its tokens, streamed or not."""
    if stream:
        return wire.reply_of_events(api, events), wire.usage_of_events(api, events)
    return wire.reply_of_response(api, body), wire.usage_of_response(api, body)


def _json(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/json",
                        headers=headers)



async def _read_bounded(request: web.BaseRequest) -> bytes | None:
    """The body, or None past MAX_REQUEST_BYTES (a worker's flood stops at the bound)."""
    if request.content_length is not None and request.content_length > MAX_REQUEST_BYTES:
        return None
    chunks, size = [], 0
    while True:
        chunk = await request.content.read(64 * 1024)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)


def _reset(request: web.BaseRequest) -> None:
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


def base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"

