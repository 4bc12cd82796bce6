"""The tools alk serves a worker over MCP: a lane's `[[tools]]`, run by alk itself, outside the
worker, at `/mcp` of the attempt's gateway listener (the one its model calls reach, inside its
network namespace with `network = "none"`), behind the attempt's key.

MCP itself is the official SDK's (`mcp`): its low-level `Server` answers `initialize`,
`tools/list` and `tools/call`, and its streamable HTTP transport (stateless, JSON responses)
reads and writes the messages. The SDK speaks ASGI; `ToolServer.handle` hands it the request
aiohttp already read, bounded, and sends back what it answers. Every call is alk's own record
(channel `tool`, source harness: a `call` event when it arrives, a `result` when it is
answered), and the scenario's `tool_faults` are injected here, at a tool's Nth call.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from alk.gateway import routes
from alk.gateway.cassette_tools import ToolEntry, match_tool
from alk.gateway.effects import EffectRefused, append_effect
from alk.gateway.http import json_response
from alk.redaction import Redactor
from alk.served_tools import ServedTool, ToolFault

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

PATH = "/mcp"
# A filled result's length, and how deep the arguments an effect appends may nest (alk's own
# reader of the effects file refuses deeper JSON, and later appends would all fail).
MAX_RESULT_CHARS = 64 * 1024
MAX_ARGS_DEPTH = 32
_PLACEHOLDER = re.compile(r"\{(\w{1,64})\}")
UNDECLARED = "(no such tool)"  # where calls of names the lane does not declare are counted
MAX_RECORDED_CALLS = 1_000
MAX_TEXT_CHARS = 2_000  # of arguments and results, in the transcript
MALFORMED = b'{"jsonrpc":"2.0","id":%s,"result":{"content":"alk: a malformed result"}}'


class ToolServer:
    """One attempt's tools: what they do, the scenario's faults, and what was called."""

    def __init__(self, tools: tuple[ServedTool, ...], faults: tuple[ToolFault, ...],
                 workspace: Path | None, session: Any) -> None:
        """`session`: the attempt's `alk.gateway.session.Session`, whose transcript events,
        faults fired and recovery these calls join."""
        self.tools = {tool.name: tool for tool in tools}
        self.faults = {(fault.tool, fault.call): fault for fault in faults}
        self.workspace, self.session = workspace, session
        self.redactor: Redactor = session.gateway.redactor
        self.count = 0
        self._per_tool: dict[str, int] = {}
        self._answered: dict[str, int] = {}  # calls answered, by tool (written on its thread)
        self._malformed: set[str] = set()  # JSON-RPC ids whose answer alk spoils
        self._undeclared = 0  # calls of names the lane does not declare
        self.steps: list[tuple[int, str]] = []  # (model steps before it, its step): ModelSeen
        self._matched: set[int] = set()  # in replay: the cassette's tool calls matched so far
        self._recorded: tuple[Any, ...] | None = None
        self._effects = asyncio.Lock()  # effects are made one at a time, off the loop
        self._manager: StreamableHTTPSessionManager | None = None
        self._running: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def environment(self, base_url: str) -> dict[str, str]:
        """The worker's variable naming the endpoint (its key is the model's)."""
        return {"ALK_MCP_URL": url(base_url)}

    def start_fields(self, base_url: str, key: str) -> dict[str, Any]:
        """What the start message carries of the tools: where, with which header, which."""
        return {"url": url(base_url), "headers": {"Authorization": f"Bearer {key}"},
                "names": list(self.tools)}

    async def answer(self, request: web.BaseRequest, body: bytes | None, key: str,
                     started: bool) -> web.StreamResponse:
        """The attempt's MCP endpoint: its key, nothing before start, a bounded body (None:
        past the session's bound, unread)."""
        if not routes.holds_key(request.headers, request.query, key):
            return _refused(401, "alk's tool gateway: send this attempt's key as "
                                 "Authorization: Bearer")
        if not started:
            return _refused(503, "alk serves the tools once alk has sent this repeat's start "
                                 "message; call them from the agent's run, not before")
        if body is None:
            return _refused(413, "alk's tool gateway: the request body is over its bound")
        return await self.handle(request, body)

    def answered(self, name: str) -> int:
        """Calls of `name` alk answered so far (any thread: an int, read whole)."""
        return self._answered.get(name, 0)

    def calls_by_tool(self) -> dict[str, int]:
        return dict(self._per_tool)

    async def start(self) -> None:
        """The SDK's session manager, run on the gateway's loop until `stop`."""
        import mcp_types as types
        from mcp.server.lowlevel.server import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        async def list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=[types.Tool.model_validate(tool.described())
                                                for tool in self.tools.values()])

        async def call_tool(ctx: Any, params: Any) -> Any:
            text, ok = await self.call(params.name, params.arguments or {},
                                       str(getattr(ctx, "request_id", "")))
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                        is_error=not ok)

        server = Server("alk-tools", on_list_tools=list_tools, on_call_tool=call_tool)
        self._manager = StreamableHTTPSessionManager(server, json_response=True, stateless=True)
        started = asyncio.Event()

        async def run() -> None:
            async with self._manager.run():  # type: ignore[union-attr]
                started.set()
                await self._stop.wait()

        self._running = asyncio.create_task(run())
        await started.wait()

    async def stop(self) -> None:
        self._stop.set()
        if self._running is not None:
            self._running.cancel()
            try:
                await self._running
            except BaseException:  # noqa: BLE001 - a cancelled call ends here
                pass

    async def call(self, name: str, args: dict[str, Any], request_id: str) -> tuple[str, bool]:
        """One tools/call: recorded, its fault injected, then done by alk."""
        self.count += 1
        # Counted by the lane's names alone: a worker asking for a million others is counted
        # under one, and answered that alk serves no such tool.
        counted = name if name in self.tools else UNDECLARED
        number = self._per_tool[counted] = self._per_tool.get(counted, 0) + 1
        # A declared tool's every call is recorded (a kill_at waits on alk's record of it);
        # calls of names the lane does not declare, the first MAX_RECORDED_CALLS of them.
        if counted == UNDECLARED:
            self._undeclared += 1
        recorded = counted != UNDECLARED or self._undeclared <= MAX_RECORDED_CALLS
        fault = self.faults.get((name, number))
        label = fault.label if fault is not None else None
        if label is not None:
            # Judged as a wire fault is: recovered once a later model call is answered in full.
            self.session.fired.append(label)
            self.session.fault_pending = True
        began = time.monotonic()
        # Made only for a call that is recorded: a flood of undeclared ones costs no encoding.
        shown = {"call": self.count, "name": self.redactor.bounded(name, 64), "number": number,
                 "args": self._brief(args), "fault": label} if recorded else {}
        if recorded:
            self.session.note("call", shown, "tool")
        if fault is not None and fault.kind == "timeout":
            self._step(counted, "timeout")
            await asyncio.Event().wait()  # never answers; the session's close cancels it
        if fault is not None and fault.kind == "slow":
            await asyncio.sleep(fault.seconds)
        if fault is not None and fault.kind == "error":
            text, ok = f"alk's tool gateway: {name} failed (an injected fault)", False
        else:
            text, ok = await self._served(name, args, fault is not None and
                                          fault.kind == "duplicate")
        if fault is not None and fault.kind == "malformed":
            self._malformed.add(request_id)
        # Counted before the answer leaves, so that no worker holds it before alk does.
        self._answered[counted] = self._answered.get(counted, 0) + 1
        self._step(counted, fault.kind if fault is not None else "ok" if ok else "error")
        if recorded:
            self.session.note("result", {**shown, "ok": ok, "result": self.redactor.cut(
                text, MAX_TEXT_CHARS), "ms": round((time.monotonic() - began) * 1000, 1)},
                "tool")
        return text, ok

    async def _served(self, name: str, args: dict[str, Any], twice: bool) -> tuple[str, bool]:
        """The call run by alk (`twice`: a duplicate fault's), and its cassette's: in replay it
        must be the recorded call, and gets the recorded answer; in a recording, it is added."""
        gateway, session = self.session.gateway, self.session
        entry = None
        if not _storable(args):
            # What a cassette could not hold and replay could not read back: refused whatever
            # the mode, so that recording and replay see the same calls.
            return (f"alk's tool gateway: the arguments hold a number that is not finite, or are "
                    f"nested past {MAX_ARGS_DEPTH} levels"), False
        # Calls of names the lane does not declare are answered with an error, never recorded.
        if gateway.replayed is not None and name in self.tools:
            if self._recorded is None:  # the attempt's recorded calls, looked up once
                self._recorded = gateway.replayed.calls(
                    session.scenario.id, session.repeat, session.attempt, tools=True)
            entry, why = match_tool(self._recorded, self._matched, name, args,
                                    where=str(gateway.replayed.path), redactor=self.redactor)
            if entry is None:
                if session.unmatched is None:
                    session.unmatched = self.redactor.cut(why, 300)
                return f"alk replay: {why}", False  # not run: it is not the recorded call
        text, ok = await self._run(name, args)
        if twice:
            text, ok = await self._run(name, args)  # delivered twice: done twice
        if entry is not None:
            return entry.result, entry.ok  # what the recorded run's model was told
        if gateway.recorder is not None and name in self.tools:
            gateway.recorder.add(ToolEntry(tool=name, args=args, ok=ok, result=text,
                                           scenario=session.scenario.id,
                                           repeat=session.repeat, attempt=session.attempt))
        return text, ok

    def _step(self, counted: str, outcome: str) -> None:
        """The call in the trajectory, where it came among the model's calls: what alk served,
        not what the worker says it ran. The first MAX_RECORDED_CALLS, like the model's."""
        if self.count <= MAX_RECORDED_CALLS:
            self.steps.append((len(self.session.steps), f"tool:{counted}:{outcome}"))

    async def _run(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        tool = self.tools.get(name)
        if tool is None:
            return f"alk's tool gateway serves no tool {self.redactor.bounded(name, 64)!r}", False
        if tool.error is not None:
            return tool.error, False
        if tool.effect is not None:
            if self.workspace is None:
                return "alk's tool gateway: no workspace for this call's effect", False
            try:
                # Off the gateway's loop, one at a time: a file the worker made large must not
                # hold every other repeat's answers while it is read.
                async with self._effects:
                    effects = await asyncio.to_thread(append_effect, self.workspace,
                                                      tool.effect, args)
            except (EffectRefused, OSError) as exc:
                return f"alk's tool gateway: the effect was not made: {exc}", False
            return json.dumps({"written": True, "effects": effects}), True
        result = json.dumps(tool.result) if not isinstance(tool.result, str) else tool.result
        filled = _filled(result, args, json_strings=not isinstance(tool.result, str))
        if len(filled) > MAX_RESULT_CHARS:
            return f"alk's tool gateway: the result would be over {MAX_RESULT_CHARS} " \
                   "characters", False
        return filled, True

    def _brief(self, value: Any) -> str:
        return self.redactor.cut(json.dumps(value, default=str), MAX_TEXT_CHARS)

    async def handle(self, request: web.BaseRequest, body: bytes) -> web.StreamResponse:
        """The SDK's answer to one HTTP request of the attempt's MCP endpoint."""
        assert self._manager is not None
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": request.method, "scheme": "http", "path": PATH,
                 "raw_path": PATH.encode(), "query_string": request.query_string.encode(),
                 "root_path": "", "server": ("127.0.0.1", 0), "client": ("127.0.0.1", 0),
                 "headers": [(k.lower().encode("latin-1", "replace"),
                              v.encode("latin-1", "replace"))
                             for k, v in request.headers.items()]}
        given = False

        async def receive() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client's disconnect: never, while answered
            return {"type": "http.disconnect"}

        head: dict[str, Any] = {}
        parts: list[bytes] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                head.update(status=message["status"], headers=message.get("headers", []))
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))

        await self._manager.handle_request(scope, receive, send)
        answer = self._spoiled(b"".join(parts))
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in head.get("headers", [])
                   if k.lower() != b"content-length"}
        return web.Response(status=head.get("status", 500), body=answer, headers=headers)

    def _spoiled(self, answer: bytes) -> bytes:
        """A `malformed` fault's answer: the call's JSON-RPC id, a result not in MCP's shape."""
        if not self._malformed:
            return answer
        try:
            request_id = json.loads(answer).get("id")
        except (ValueError, AttributeError):
            return answer
        if str(request_id) not in self._malformed:
            return answer
        self._malformed.discard(str(request_id))
        return MALFORMED % json.dumps(request_id).encode()


def _refused(status: int, text: str) -> web.Response:
    return json_response(status, json.dumps({"error": text}).encode())


def url(base_url: str) -> str:
    """The MCP endpoint beside the model's (`http://127.0.0.1:PORT/mcp`)."""
    return base_url.removesuffix("/v1") + PATH


def _filled(text: str, args: dict[str, Any], json_strings: bool) -> str:
    """The result's text with each `{name}` replaced by the call's argument `name`, in one
    pass: an argument holding `{other}` is not filled again, so arguments of a few kilobytes
    cannot grow into gigabytes. In a result that is JSON, a value is escaped as JSON text."""
    def fill(match: re.Match[str]) -> str:
        if match[1] not in args:
            return match[0]
        given = str(args[match[1]])
        return json.dumps(given)[1:-1] if json_strings else given

    return _PLACEHOLDER.sub(fill, text)


def _storable(args: dict[str, Any]) -> bool:
    """Arguments a cassette line holds and replay reads back: finite numbers, bounded depth."""
    if _depth(args) > MAX_ARGS_DEPTH:
        return False
    try:
        json.dumps(args, allow_nan=False)
    except (ValueError, TypeError):
        return False
    return True


def _depth(value: Any, limit: int = 64) -> int:
    """How deep a JSON value nests, counted to just past `limit`."""
    depth, level = 0, [value]
    while level and depth <= limit:
        depth += 1
        level = [item for node in level if isinstance(node, (dict, list))
                 for item in (node.values() if isinstance(node, dict) else node)]
    return depth - 1 if not level else depth
