"""The worker SDK: speak alk's protocol v1 from a framework worker, with the standard library only.

alk copies this one file into every worker's `PYTHONPATH` as `alk.worker`, so it imports in any
Python ≥ 3.8 without alk installed. It must never import another alk module.

    from alk import worker

    worker.hello()
    worker.ready("my-framework", "1.4.2", worker.package_paths("my-framework"))
    start = worker.start()                     # exits quietly if alk aborts instead
    worker.tool_call("lookup", {"order": 742})
    worker.tool_result("lookup", ok=True, output={"status": "open"})
    worker.result(output="done", stop_reason="accepted", end_state={"phase": "stopped"})

`hello()` moves the protocol off file descriptor 1: from then on anything the framework prints
(`print`, C libraries writing to fd 1) goes to stderr, which alk keeps as evidence, instead of
breaking the protocol.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, Dict, Iterable, List, Mapping, Optional

PROTOCOL_VERSION = 1
# Channels a worker may write on. `harness` belongs to alk alone.
CHANNELS = ("agent", "tool", "model", "user", "framework")


class ProtocolError(RuntimeError):
    """The harness sent something this SDK does not understand."""


class Start:
    """The start message: what to run. `input` is the scenario's free table."""

    def __init__(self, message: Mapping[str, Any]) -> None:
        scenario = message.get("scenario") or {}
        self.message = dict(message)
        self.run_id: str = message.get("run_id", "")
        self.scenario_id: str = scenario.get("id", "")
        self.task: str = scenario.get("task", "")
        self.input: Dict[str, Any] = dict(scenario.get("input") or {})
        self.repeat: int = message.get("repeat", 0)
        self.seed: int = message.get("seed", 0)
        self.deadline_s: Optional[float] = message.get("deadline_s")
        # The scripted model's turns and the faults to inject, when the scenario has them.
        self.script: List[Dict[str, Any]] = list(scenario.get("script") or [])
        self.faults: List[Dict[str, Any]] = list(scenario.get("faults") or [])
        # When alk serves the model (the lane's [model]): base_url, api_key, mode and name, the
        # same as OPENAI_BASE_URL and OPENAI_API_KEY in the environment; empty otherwise.
        self.model: Dict[str, Any] = dict(message.get("model") or {})
        # When alk serves the lane's tools over MCP (its [[tools]]): the endpoint's url, the
        # headers to send (the attempt's key) and the tools' names; empty otherwise.
        self.tools: Dict[str, Any] = dict(message.get("tools") or {})
        # After alk killed a previous attempt (a scenario's kill_at): resume, do not redo.
        self.attempt: int = message.get("attempt", 1)
        self.resume: bool = bool(message.get("resume", False))

    def __repr__(self) -> str:
        return f"Start(scenario={self.scenario_id!r}, repeat={self.repeat}, seed={self.seed})"


class Worker:
    """One protocol session over a pair of streams (stdin/stdout unless given)."""

    def __init__(self, reader: Any = None, writer: Any = None) -> None:
        self._reader = reader
        self._writer = writer
        self.hello_message: Optional[Dict[str, Any]] = None
        self._ready: Optional[Dict[str, Any]] = None  # what a warm start's repeats report
        # Frameworks run tools in thread pools: one line is written and flushed at a time, or
        # the lines of two threads could interleave into neither.
        self._write_lock = threading.Lock()

    # -- handshake ------------------------------------------------------------------------------

    def hello(self) -> Dict[str, Any]:
        """Read alk's hello; call it first."""
        if self._writer is None:
            self._writer = _protect_stdout()
        if self._reader is None:
            self._reader = sys.stdin.buffer
        message = self._read()
        if message is None or message.get("type") != "hello":
            raise ProtocolError(f"expected hello from alk, got {message!r}")
        if message.get("protocol") != PROTOCOL_VERSION:
            raise ProtocolError(f"alk speaks protocol {message.get('protocol')}, "
                                f"this SDK speaks {PROTOCOL_VERSION}")
        self.hello_message = message
        return message

    def ready(self, framework: str, framework_version: str,
              package_paths: Iterable[str] = ()) -> None:
        """Report the framework under test; alk checks it before anything of the scenario runs."""
        if self.hello_message is None:
            self.hello()
        self._ready = {
            "framework": framework,
            "framework_version": framework_version,
            "package_paths": [str(p) for p in package_paths],
        }
        self.emit("framework", "framework_ready", self._ready)

    def start(self) -> Start:
        """Wait for the start message. If alk aborts instead (version mismatch, probe), exit 0.
        In a warm start's prepared process (alk sets ALK_WARM), this forks every repeat and
        returns in each, as if it had started afresh and reported the same framework."""
        if self._ready is not None and os.environ.get("ALK_WARM"):
            self._warm_repeat()
        message = self._read()
        if message is None:
            raise ProtocolError("alk closed stdin before the start message")
        if message.get("type") == "abort":
            sys.stderr.write(f"alk aborted this worker: {message.get('reason', '')}\n")
            sys.stderr.flush()
            raise SystemExit(0)
        if message.get("type") != "start":
            raise ProtocolError(f"expected start from alk, got {message!r}")
        return Start(message)

    # -- events ---------------------------------------------------------------------------------

    def emit(self, channel: str, type: str, payload: Optional[Mapping[str, Any]] = None) -> None:
        if channel not in CHANNELS:
            raise ValueError(f"channel must be one of {CHANNELS}, got {channel!r}")
        # JSON has no NaN or Infinity: alk counts such a line as a violation, so refuse it here.
        line = json.dumps({"channel": channel, "type": type, "payload": dict(payload or {})},
                          ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                          default=str)
        with self._write_lock:
            self._writer.write(line + "\n")
            self._writer.flush()

    def tool_call(self, name: str, args: Optional[Mapping[str, Any]] = None) -> None:
        self.emit("tool", "call", {"name": name, "args": dict(args or {})})

    def tool_result(self, name: str, ok: bool, output: Any = None,
                    error: Optional[str] = None) -> None:
        payload: Dict[str, Any] = {"name": name, "ok": bool(ok)}
        if output is not None:
            payload["output"] = output
        if error is not None:
            payload["error"] = error
        self.emit("tool", "result", payload)

    def fault(self, point: str, occurrence: int = 1, error: str = "",
              retryable: bool = False) -> None:
        """Report a fault just injected (the scenario's `faults`): alk voids a repeat where a
        declared fault was never reported, since it did not test what it claims."""
        self.emit("framework", "fault", {"point": point, "occurrence": occurrence,
                                         "error": error, "retryable": retryable})

    def script_exhausted(self, turn: int, script_turns: int) -> None:
        """The framework asked the scripted model for model turn `turn` (1-based), past the
        scenario's `script_turns` scripted turns. alk names it as the cause of the failure
        that follows; call it before answering the framework however the worker does."""
        self.emit("model", "script_exhausted", {"turn": turn, "script_turns": script_turns})

    def result(self, output: str, stop_reason: str,
               end_state: Optional[Mapping[str, Any]] = None,
               verification: Any = None) -> None:
        """The run's final answer. `verification` is the worker's own claim: alk records it and
        never lets it decide the outcome."""
        payload: Dict[str, Any] = {"output": output, "stop_reason": stop_reason,
                                   "end_state": dict(end_state or {})}
        if verification is not None:
            payload["verification"] = verification
        self.emit("agent", "result", payload)

    # -- plumbing -------------------------------------------------------------------------------

    def _warm_repeat(self) -> None:
        from alk import worker_fork

        stdin, stdout, stderr = worker_fork.serve(os.environ["ALK_WARM"])["pipes"]
        # The repeat's pipes take the places of the prepared process's own: fd 0, the
        # protocol's private descriptor, and fds 1 and 2 (stderr, as after hello()).
        os.dup2(stdin, 0)
        os.dup2(stdout, self._writer.fileno())
        os.dup2(stderr, 1)
        os.dup2(stderr, 2)
        for fd in (stdin, stdout, stderr):
            os.close(fd)
        self._reader = open(0, "rb", closefd=False)  # nothing buffered from the parent's pipe
        sys.stdin = open(0, "r", closefd=False)
        self.hello()
        self.emit("framework", "framework_ready", self._ready or {})

    def _read(self) -> Optional[Dict[str, Any]]:
        line = self._reader.readline()
        if not line:
            return None
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ProtocolError(f"expected a JSON object from alk, got {line!r}")
        return message


def _protect_stdout() -> Any:
    """Keep fd 1's pipe for the protocol on a private descriptor; send fd 1 to stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # backslashreplace: a lone surrogate in a str (it happens, with data from the web) is
    # written as a \udXXX escape, which is still valid JSON, instead of crashing the worker.
    return os.fdopen(protocol_fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1)


def package_paths(*distributions: str) -> List[str]:
    """Install folders of the named distributions' top-level packages, so that alk can tell a
    crash inside the framework from one in the worker's own code."""
    from importlib import metadata, util

    paths: List[str] = []

    def add(path: str) -> None:
        # Real paths: tracebacks name the files where Python found them.
        path = os.path.realpath(path)
        if path not in paths:
            paths.append(path)

    for name in distributions:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        tops = (dist.read_text("top_level.txt") or "").split()
        tops += [f.parts[0] for f in dist.files or () if f.parts and f.parts[0] != ".."
                 and not f.parts[0].endswith((".dist-info", ".egg-info", ".pth"))]
        for top in dict.fromkeys(t[:-3] if t.endswith(".py") else t for t in tops):
            # Where Python imports it from: right for editable installs too (src/ layouts).
            try:
                spec = util.find_spec(top)
            except (ImportError, ValueError):
                spec = None
            if spec is None:
                continue
            if spec.submodule_search_locations:
                for location in spec.submodule_search_locations:
                    add(location)
            elif spec.origin and spec.origin not in ("built-in", "frozen"):
                add(spec.origin)
    return paths


_default: Optional[Worker] = None


def _worker() -> Worker:
    global _default
    if _default is None:
        _default = Worker()
    return _default


def hello() -> Dict[str, Any]:
    return _worker().hello()


def ready(framework: str, framework_version: str, package_paths: Iterable[str] = ()) -> None:
    _worker().ready(framework, framework_version, package_paths)


def start() -> Start:
    return _worker().start()


def emit(channel: str, type: str, payload: Optional[Mapping[str, Any]] = None) -> None:
    _worker().emit(channel, type, payload)


def tool_call(name: str, args: Optional[Mapping[str, Any]] = None) -> None:
    _worker().tool_call(name, args)


def tool_result(name: str, ok: bool, output: Any = None, error: Optional[str] = None) -> None:
    _worker().tool_result(name, ok, output, error)


def fault(point: str, occurrence: int = 1, error: str = "", retryable: bool = False) -> None:
    _worker().fault(point, occurrence, error, retryable)


def script_exhausted(turn: int, script_turns: int) -> None:
    _worker().script_exhausted(turn, script_turns)


def result(output: str, stop_reason: str, end_state: Optional[Mapping[str, Any]] = None,
           verification: Any = None) -> None:
    _worker().result(output, stop_reason, end_state, verification)
