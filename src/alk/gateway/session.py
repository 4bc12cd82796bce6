"""One attempt's model: a `Session` answers the calls of one attempt of one repeat, from the
scenario's script, a cassette (replay) or the provider (proxy, `alk.gateway.proxy`), injects
the scenario's wire faults (`alk.gateway.faults`), and records every call as the harness's own
evidence. The handler runs on the gateway's thread; the runner's loop reads `events` and
`wake_fd` on its own, and writes what a session saw to the transcript.

Until alk sends the attempt's `start` (`open`), a session serves nothing of its scenario: a
model call is answered by the one refusal below, the same in every scenario and in the probe,
and counted as nothing of the script or its faults. A worker that asked for its first turn
before the version gate would otherwise learn which scenario it is in, and void the repeats it
would fail by failing the gate in those alone.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import os
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from alk.cost import TokenCost
from alk.gateway import bounds, budget, routes
from alk.gateway.faults import inject
from alk.gateway.http import SSE, json_response
from alk.gateway.proxy import forward
from alk.gateway.replay import replayed
from alk.gateway.script import EXHAUSTED_TEXT, is_mistake, sampled_turn
from alk.gateway.server import Gateway
from alk.gateway.tools import PATH as TOOLS_PATH
from alk.gateway.tools import ToolServer
from alk.gateway.wire.bodies import error_body, models_body, response_body, stream_events
from alk.gateway.wire.formats import read_request
from alk.gateway.wire.reply import Reply, Usage, dump, estimate_usage, reply_from_turn
from alk.gateway.wire.request import Asked
from alk.records import Scenario
from alk.served_model import ModelSeen, WireFault
from alk.served_tools import ServedTool

# A request body larger than this is refused (413): a worker cannot make alk hold more.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
# Requests a session answers at once: each may hold up to MAX_REQUEST_BYTES in alk, so a worker
# opening a thousand connections cannot make alk hold gigabytes. Past it: 503, not read.
MAX_CONCURRENT_CALLS = 16
# Calls recorded in a session's transcript events and steps; past them, only counted.
MAX_RECORDED_CALLS = 1000
# How long closing a session waits for a handler still running (a stall) before cancelling it.
CLOSE_GRACE_S = 0.05
# Calls before `start` recorded in the transcript; past them, only counted.
MAX_RECORDED_EARLY_CALLS = 16
BEFORE_START = ("alk's gateway serves the model once alk has sent this repeat's start message "
                "(after framework_ready); call it from the agent's run, not before")
# The probe's session: never started, so none of this is ever served.
_PROBE = Scenario(id="", task="")
_SILENT = logging.getLogger("alk.gateway.http")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


class Session:
    """One attempt's model: its token, its listener, and everything it answered. The handler
    runs on the gateway's thread; the runner's loop reads `events` and `wake_fd` on its own."""

    def __init__(self, gateway: Gateway, scenario: Scenario | None, seed: int, attempt: int,
                 repeat: int = 0, served_before: int = 0, spent_before: int = 0,
                 tools: tuple[ServedTool, ...] = (), workspace: Path | None = None) -> None:
        """`scenario` is None for the preflight probe, which is never started: its session
        answers as every session does before its start, and nothing else. `served_before`:
        the script's turns this repeat's earlier attempts were served (where a resumed one
        may go on from, and no further); `spent_before`: the provider tokens they used (the
        repeat's budget counts them too); `tools`: the lane's, served at /mcp, their effects
        made in `workspace`."""
        self.gateway, self.seed = gateway, seed
        self.spent_before = spent_before
        self.scenario = scenario if scenario is not None else _PROBE
        self.attempt, self.repeat, self.served_before = attempt, repeat, served_before
        self.key = "alk-" + secrets.token_urlsafe(24)
        self.port: int | None = None
        self.faults: dict[int, WireFault] = {f.call: f for f in self.scenario.wire_faults}
        self._started = threading.Event()
        self.early_calls = 0
        # What the transcript records, in the order it happened: (channel, type, payload).
        self._events: collections.deque[tuple[str, str, dict[str, Any]]] = collections.deque()
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
        # The provider's own usage (proxy) or a cassette's record of it (replay): the cost.
        self.cost = (TokenCost("provider" if gateway.setup.mode == "proxy" else "replayed")
                     if gateway.setup.mode in ("proxy", "replay") else None)
        self.estimated = 0  # alk's estimate of the answers that reported no usage (budget)
        self.fired: list[str] = []
        self.fault_pending = False  # a fault fired and no call since was answered in full
        self.exhausted: tuple[int, int] | None = None
        self.provider_error: str | None = None
        self.upstream_refused: str | None = None
        self.upstream_checks = 0
        self.unmatched: str | None = None
        self.steps: list[str] = []
        self.mistakes: list[int] = []  # turns served that the lane marks as the model's mistake
        self._last: tuple[str, bool] | None = None  # (the last call's body digest, it failed)
        self.tools = ToolServer(tools, self.scenario.tool_faults, workspace, self) \
            if tools else None

    # -- alk's side ------------------------------------------------------------------------------

    @property
    def wake_fd(self) -> int:
        """Readable when the gateway recorded something: the runner's loop waits on it too."""
        return self._wake_read

    def environment(self, base_url: str) -> dict[str, str]:
        """The worker's variables: each family's unmodified client finds the gateway through
        them (`routes.environment`), and an MCP client the tools through ALK_MCP_URL."""
        tools = self.tools.environment(base_url) if self.tools is not None else {}
        return {**routes.environment(base_url, self.key), **tools}

    def start_fields(self, base_url: str) -> dict[str, Any]:
        """What the start message carries of the model (`base_url`: OpenAI's, as before)."""
        return {"base_url": base_url, "api_key": self.key, "mode": self.gateway.setup.mode,
                "name": self.gateway.setup.name, "base_urls": routes.base_urls(base_url)}

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

    def events(self) -> list[tuple[str, str, dict[str, Any]]]:
        """What was recorded since the last look, as (channel, type, payload): the runner
        writes it to the transcript."""
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

    def open(self) -> None:
        """alk is sending the attempt's start: from now on the scenario is served."""
        if self.scenario is _PROBE:
            raise ValueError("the probe's session has no scenario to serve")
        self._started.set()

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
            faults_fired=tuple(self.fired), recovered=not self.fault_pending,
            exhausted=self.exhausted, provider_error=self.provider_error,
            upstream_refused=self.upstream_refused,
            unmatched=self.unmatched, steps=tuple(self.steps),
            over_bounds=bounds.refused(self._web), mode=self.gateway.setup.mode,
            mistakes=tuple(self.mistakes), cost=self.cost,
            script_turns=len(self.scenario.script) if self.gateway.setup.mode == "script" else 0,
            tool_calls=self.tools.calls_by_tool() if self.tools is not None else None,
            tool_steps=tuple(self.tools.steps) if self.tools is not None else ())

    def release(self) -> None:
        """Closes the wake pipe's read end once the runner has drained it (once: a number
        closed twice may by then name another file)."""
        self.close()
        if self._wake_read >= 0:
            os.close(self._wake_read)
            self._wake_read = -1

    # -- the gateway's thread --------------------------------------------------------------------

    async def _start(self, listener: socket.socket) -> None:
        # Its connections, heads and bodies bounded, the session's and the run's together.
        self._web = bounds.server(self._handle, self.gateway.pool,
                                  lambda event: self._events.append(("model", *event)),
                                  logger=_SILENT, access_log=None)
        self._server = await asyncio.get_running_loop().create_server(self._web, sock=listener)
        if self.tools is not None:
            await self.tools.start()

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self.tools is not None:
            await self.tools.stop()
        if self._web is not None:
            await self._web.shutdown(CLOSE_GRACE_S)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if len(self._handlers) >= MAX_CONCURRENT_CALLS:
            return json_response(503, error_body(503, f"alk's gateway answers at most "
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
        if request.path == TOOLS_PATH and self.tools is not None:
            body = await _read_bounded(request) if self._started.is_set() else b""
            return await self.tools.answer(request, body, self.key, self._started.is_set())
        asked_for = routes.route(request.method, request.path, request.query)
        api = asked_for.api if asked_for is not None else "chat"
        if not routes.holds_key(request.headers, request.query, self.key):
            return json_response(401, error_body(401, "alk's gateway: the API key is not this "
                                                 f"repeat's {routes.KEY_VARIABLES}", api))
        if asked_for is None:
            return json_response(404, error_body(404, f"alk's gateway serves {routes.ENDPOINTS}"))
        if asked_for.kind == "models":
            return json_response(200, models_body([self.gateway.setup.name], created=0))
        family, served = routes.family_of(api), self.gateway.setup.family
        if served is not None and family != served:
            return json_response(404, error_body(404, f"alk's gateway: this lane's [model] "
                                                 f"family is {served!r}; it serves no {family} "
                                                 "call", api))
        if not asked_for.sse:
            return json_response(400, error_body(400, "alk's gateway streams Gemini as "
                                                 "server-sent events only: ask with ?alt=sse", api))
        if not self._started.is_set():
            return self._before_start(api)
        body = await _read_bounded(request)
        if body is None:
            return json_response(413, error_body(413, f"request body over {MAX_REQUEST_BYTES} "
                                                 "bytes", api))
        if asked_for.kind == "count_tokens":  # no model call: alk's estimate, as for usage
            return json_response(200, dump({"input_tokens": max(1, len(body) // 4)}))
        self.calls += 1
        call = self.calls
        began = time.monotonic()
        asked = read_request(api, body, model=asked_for.model, stream=asked_for.stream)
        if isinstance(asked, str):
            self.record(call, api, None, 400, began, problem=asked)
            return json_response(400, error_body(400, asked, api))
        if self.attempt > 1 and call == 1 and self.gateway.setup.mode == "script":
            # A resumed attempt: a framework that kept its state sends the conversation so far,
            # and the model answers where it stands; one that starts over gets the first turn.
            # Only turns served to this repeat are credited: a claim past them is a violation.
            self.turns = min(asked.answered, self.served_before)
            if asked.answered > self.served_before:
                self.note("violation", {
                    "kind": "unserved_claim",
                    "detail": f"the resumed attempt's first request holds {asked.answered} "
                              f"assistant turn(s); alk's gateway served {self.served_before} "
                              "to this repeat"})
        digest = hashlib.sha256(body).hexdigest()
        retry = self._last is not None and self._last == (digest, True)
        if retry:
            self.retries += 1
        fault = self.faults.get(call)
        if fault is not None:
            self.fired.append(fault.label)
            self.fault_pending = True
            self._last = (digest, True)
            return await inject(self, request, fault, asked, call, began, retry)
        if budget.spent(self):
            return budget.refuse(self, asked, call, began, retry)
        answer = await (forward(self, request, asked, body, call, began, retry)
                        if self.gateway.setup.mode == "proxy" else
                        self._served(request, asked, body, call, began, retry))
        self._last = (digest, answer.status >= 400)
        return answer

    def _before_start(self, api: str) -> web.Response:
        """A call before start: the same refusal whatever the scenario, its body unread."""
        self.early_calls += 1
        if self.early_calls <= MAX_RECORDED_EARLY_CALLS:
            self.note("before_start", {"api": api, "status": 503, "count": self.early_calls})
        return json_response(503, error_body(503, BEFORE_START, api))

    async def _served(self, request: web.BaseRequest, asked: Asked, body: bytes,
                      call: int, began: float, retry: bool) -> web.StreamResponse:
        """Script and replay: the next turn, in the wire format the request asked for."""
        if self.gateway.setup.mode == "replay":
            return await replayed(self, request, asked, body, call, began, retry)
        turn_index = self.turns
        turn = sampled_turn(self.scenario.script, turn_index, self.seed)
        if turn is None:
            if self.exhausted is None:
                self.exhausted = (turn_index + 1, len(self.scenario.script))
            reply = Reply(text=EXHAUSTED_TEXT)
            shown_turn, mistake = None, False
        else:
            reply = reply_from_turn(turn)
            self.turns += 1
            shown_turn = turn_index
            # alk's own record that the lane's mistake was served: the agent's, not the
            # framework's, when the run then fails (docs/causes.md).
            mistake = is_mistake(self.scenario.script, turn_index, self.seed)
            if mistake and len(self.mistakes) < MAX_RECORDED_CALLS:
                self.mistakes.append(turn_index)
        self.fault_pending = False
        return await self.reply(request, asked, reply, call, began, retry, turn=shown_turn,
                                mistake=mistake)

    async def reply(self, request: web.BaseRequest, asked: Asked, reply: Reply,
                    call: int, began: float, retry: bool, turn: int | None,
                    fault: str | None = None, mistake: bool = False,
                    finish: str | None = None, usage_sent: bool = True) -> web.StreamResponse:
        """Sends a reply in the call's format; `finish` and `usage_sent` as the faults ask."""
        usage = estimate_usage(asked, reply)
        kwargs = dict(model=asked.model or self.gateway.setup.name, call=call,
                      usage=usage if usage_sent else None, created=int(time.time()),
                      finish=finish)
        self.record(call, asked.api, asked, 200, began, retry=retry, reply=reply, usage=usage,
                    turn=turn, fault=fault, mistake=mistake)
        if not asked.stream:
            return json_response(200, response_body(asked.api, reply, **kwargs))
        response = web.StreamResponse(status=200, headers=SSE)
        await response.prepare(request)
        for frame in stream_events(asked.api, reply, **kwargs):
            await response.write(frame)
        await response.write_eof()
        return response

    def record(self, call: int, api: str, asked: Asked | None, status: int | None,
               began: float, *, retry: bool = False, reply: Reply | None = None,
               usage: Usage | None = None, turn: int | None = None,
               fault: str | None = None, problem: str | None = None,
               mistake: bool = False, reported: bool = False) -> None:
        """One call as the harness saw it: counted always, recorded while within bounds.
        `reported`: the usage is the provider's (or a cassette's record of it), a cost."""
        if usage is not None:
            self.prompt_tokens += usage.prompt_tokens
            self.completion_tokens += usage.completion_tokens
        if reported and self.cost is not None:
            answered = status is not None and status < 400
            self.cost = budget.added(self.cost, usage, answered)
            if usage is None and answered and asked is not None and reply is not None:
                # An answer that reported no usage (a chat stream whose client asked for none)
                # spent tokens all the same: the repeat's budget counts alk's estimate of them,
                # so that leaving usage out is no way past it.
                estimate = estimate_usage(asked, reply)
                self.estimated += estimate.prompt_tokens + estimate.completion_tokens
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
        if mistake:
            payload["mistake"] = True  # the lane marks this turn as the model's mistake
        self.note("call", payload)

    def note(self, type: str, payload: dict[str, Any], channel: str = "model") -> None:
        """An event of the gateway's for the transcript (channel `model`, or `tool` for a
        tool alk serves)."""
        self._events.append((channel, type, payload))
        self._wake()

    def _wake(self) -> None:
        if self._closed:
            return  # the write end is closed, and its number may name another file by now
        try:
            os.write(self._wake_write, b"!")
        except OSError:
            pass  # the pipe is full: the loop has a wake-up pending already


async def _read_bounded(request: web.BaseRequest) -> bytes | None:
    """The body, or None past MAX_REQUEST_BYTES (a worker's flood stops at the bound); a 503
    unread while the session or the run holds all the bodies it may."""
    return await bounds.read_body(request, MAX_REQUEST_BYTES)
