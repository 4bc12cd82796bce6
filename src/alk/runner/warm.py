"""A warm start: one prepared process per run, forked for each repeat (`WarmRunner`).

Opt-in (`alk run --warm`, or a lane's `warm = true`), for an evaluator who measures a framework
rather than a hostile worker: the framework is imported once, not once a repeat. alk starts
the worker once in the sandbox as today, up to its handshake (`framework_ready`): nothing of a
scenario has happened. For each repeat, alk sends that prepared process the repeat's pipes and
settings over a control socket; the SDK's `worker.start()` forks a child that takes the
repeat's own isolation before any of the scenario runs (`alk.worker_fork`), and the runner
then drives it exactly as a fresh process. What that keeps, and what it gives up, is in
docs/security.md ("Warm start"). Where the run cannot be kept honest (the worker's SDK has no
warm start, the prepared process runs more than one thread, no sandbox here), alk says why once
and runs every repeat cold.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from alk.limits import rlimit_pairs
from alk.runner.cgroup import for_limits as cgroup_for
from alk.runner.isolation import Filesystem, Isolation
from alk.runner.process import LocalRunner
from alk.runner.request import RunRequest
from alk.runner.sandbox import give_workspace, worker_uid
from alk.runner.seccomp import program as seccomp_program
from alk.runner.forked import ForkedRepeat, host_pid
from alk.runner.spawn import Spawned, received_listener, start, tmpfs_bytes

CONTROL_NAME = "control"
MESSAGE_BYTES = 64 * 1024
# The prepared process's stdout up to its framework_ready, and its stderr kept to say why.
HANDSHAKE_BYTES = 1024 * 1024
STDERR_KEPT_BYTES = 16 * 1024
FORK_WAIT_S = 10.0
# After its framework_ready, how long the prepared process has to reach the control socket:
# a worker without alk's Python SDK (the Node SDK, its own protocol code) never does.
READY_GRACE_S = 5.0
# The prepared process's first step, as root in its sandbox: a /proc of its own over bwrap's
# (whose read-only parts stop a user namespace mounting one), then both capabilities dropped
# from the bounding set, so that the init (and so the worker) never holds them.
PREPARE_CODE = (
    "import ctypes,os,sys\n"
    "c=ctypes.CDLL(None,use_errno=True)\n"
    "if c.mount(b'proc',b'/proc',b'proc',14,None)!=0:\n"
    " os.write(2,b'alk warm start: cannot mount /proc: '+os.strerror(ctypes.get_errno())"
    ".encode()+b'\\n');os._exit(126)\n"
    "for cap in (21,8):\n"
    " c.prctl(24,cap,0,0,0)\n"
    "os.execv(sys.argv[1],sys.argv[1:])\n"
)


class WarmRefused(Exception):
    """Why this run's repeats run cold."""


class WarmRunner(LocalRunner):
    """A `LocalRunner` whose repeats fork from one prepared process. Its requests' workspaces
    must lie in `folder`, which the prepared process sees (each child hides all but its own)."""

    def __init__(self, folder: Path, isolation: Isolation | None = None,
                 seccomp: bool = True, on_refused: Any = None) -> None:
        super().__init__(isolation, seccomp)
        self.folder = folder
        self.refused: str | None = None
        self._on_refused = on_refused
        self._pool: _Prepared | None = None
        self._lock = threading.Lock()

    def _start(self, request: RunRequest, isolation: Isolation,
               seccomp: bytes | None) -> Spawned:
        with self._lock:
            if self._pool is None and self.refused is None:
                try:
                    self._pool = _Prepared.start(request, isolation, self.folder)
                except WarmRefused as exc:
                    self.refused = str(exc)
                    if self._on_refused is not None:
                        self._on_refused(self.refused)
            pool = self._pool
        if pool is None or os.path.dirname(request.cwd) != str(self.folder):
            return super()._start(request, isolation, seccomp)
        try:
            return pool.fork(request, isolation)
        except OSError as exc:
            # The prepared process is the worker's: its failing to fork must not make the
            # repeat void (a worker could choose which). The rest of the run goes cold.
            with self._lock:
                if self._pool is pool:
                    self._pool = None
                    self.refused = f"the prepared process stopped forking ({exc})"
                    pool.close()
                    if self._on_refused is not None:
                        self._on_refused(self.refused)
            return super()._start(request, isolation, seccomp)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None


def warm_runner(runner: Any, root: Path, filesystem: Filesystem) -> Any:
    """The runner of a lane that asks for a warm start: a `WarmRunner` in place of the local
    one, whose workspaces lie in the run folder's `warm/`; any other runner (a test's scripted
    one) as it is."""
    if type(runner) is not LocalRunner:
        return runner
    folder = root / "warm"
    folder.mkdir(mode=0o700)
    return WarmRunner(folder, runner.isolation, runner.seccomp, on_refused=_say_refused)


def _say_refused(reason: str) -> None:
    sys.stderr.write(f"alk: no warm start, every repeat runs cold: {reason}\n")


class _Prepared:
    """The prepared process, its control socket, and the forks it makes."""

    def __init__(self, spawned: Spawned, control: socket.socket) -> None:
        self.spawned, self.control = spawned, control
        self.lock = threading.Lock()

    @classmethod
    def start(cls, request: RunRequest, isolation: Isolation, folder: Path) -> _Prepared:
        if request.filesystem is not Filesystem.SANDBOX or not isolation.bwrap:
            raise WarmRefused("a warm start needs the sandbox (bubblewrap), which this run "
                              "does not have")
        if not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds"):
            raise WarmRefused("a warm start needs pidfds and descriptor passing (Linux 5.3)")
        uid = worker_uid()
        give_workspace(str(folder), uid)
        path = folder / CONTROL_NAME
        server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            server.bind(str(path))
            if uid is not None:
                os.chown(path, uid, uid)
            server.listen(1)
            server.settimeout(request.timeout_s)
            spawned = start(_preparation(request, folder, path), isolation,
                            seccomp_program(prepared=True))
        except OSError as exc:
            server.close()
            raise WarmRefused(f"the prepared process could not start: {exc}") from None
        try:
            control = _handshake(spawned, server, request)
            control.send(json.dumps({"seccomp": (seccomp_program() or b"").hex()}).encode())
        except (WarmRefused, OSError) as exc:
            spawned.reap_after_kill(1.0)
            spawned.close()
            raise WarmRefused(str(exc)) from None
        finally:
            server.close()
        for pipe in (spawned.proc.stdin, spawned.proc.stdout, spawned.proc.stderr):
            pipe.close()  # from here it only forks: what it would write goes nowhere
        return cls(spawned, control)

    def fork(self, request: RunRequest, isolation: Isolation) -> Spawned:
        """The repeat's process, forked from the prepared one and waiting for alk's word."""
        give_workspace(request.cwd, worker_uid())
        pipes = [os.pipe() for _ in range(5)]  # stdin, stdout, stderr, status, go
        ends = [pipes[0][0], *(write for _, write in pipes[1:4]), pipes[4][0]]  # the child's
        mine = [pipes[0][1], *(read for read, _ in pipes[1:4]), pipes[4][1]]
        channel = socket.socketpair() if request.gateway_port is not None else None
        cgroup = cgroup_for(request.limits)
        try:
            fds = ends + ([channel[1].fileno()] if channel else [])
            message = {"cwd": request.cwd, "env": dict(request.env),
                       "rlimits": rlimit_pairs(request.limits),
                       "network": request.network.value, "gateway_port": request.gateway_port,
                       "tmpfs_bytes": tmpfs_bytes(request),
                       "fds": [True] * 5 + [channel is not None]}
            with self.lock:
                socket.send_fds(self.control, [json.dumps(message).encode()], fds)
                pidfd, pid = self._forked()
            if cgroup is not None:
                cgroup.add(pid)
        except BaseException:
            for fd in mine:
                os.close(fd)  # the child, if forked, reads the end of `go` and exits
            if cgroup is not None:
                cgroup.remove()
            if channel is not None:
                channel[0].close()
            raise
        finally:
            for fd in ends:
                os.close(fd)
            if channel is not None:
                channel[1].close()
        os.write(mine[4], b"g")
        os.close(mine[4])
        spawned = ForkedRepeat(pid, pidfd, mine[:4], cgroup)
        if channel is not None:
            try:
                spawned.listener = received_listener(channel[0])
            except OSError:
                spawned.reap_after_kill(1.0)
                spawned.close()
                raise
            finally:
                channel[0].close()
        return spawned

    def _forked(self) -> tuple[int, int]:
        ready, _, _ = select.select([self.control], [], [], FORK_WAIT_S)
        if not ready:
            raise OSError("the prepared process did not fork the repeat")
        data, fds, _, _ = socket.recv_fds(self.control, MESSAGE_BYTES, 1)
        if len(fds) != 1 or not data:
            for fd in fds:
                os.close(fd)
            raise OSError("the prepared process is gone")
        return fds[0], host_pid(fds[0])

    def close(self) -> None:
        self.control.close()  # the prepared process exits at end of file
        self.spawned.reap_after_kill(1.0)
        self.spawned.close()


def _preparation(request: RunRequest, folder: Path, control: Path) -> RunRequest:
    """The prepared process's own request: the lane's worker in the sandbox, in the warm
    folder (its children's workspaces are in it), with the control socket's path."""
    def moved(value: str) -> str:
        return str(folder) if value == request.cwd else value

    env = {name: moved(value) for name, value in request.env.items()}
    env["ALK_WARM"] = str(control)
    return RunRequest(argv=request.argv, cwd=str(folder), env=env, timeout_s=request.timeout_s,
                      hello=request.hello, start=None, limits=request.limits,
                      network=request.network, filesystem=request.filesystem,
                      visible=request.visible, hidden=request.hidden,
                      prepare=(sys.executable, "-I", "-S", "-c", PREPARE_CODE))


def _handshake(spawned: Spawned, server: socket.socket, request: RunRequest) -> socket.socket:
    """hello to the prepared process, its framework_ready, then its word on the control
    socket: ready, or why not. Bounded in bytes and in time (the lane's timeout)."""
    proc = spawned.proc
    proc.stdin.write((json.dumps(dict(request.hello)) + "\n").encode())
    proc.stdin.flush()
    deadline = time.monotonic() + request.timeout_s
    ready_by: float | None = None
    out, err = bytearray(), bytearray()
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    server.setblocking(False)
    while True:
        now = time.monotonic()
        if ready_by is not None and now >= ready_by:
            raise WarmRefused(f"the worker did not take the warm start within "
                              f"{READY_GRACE_S:g} s of its framework_ready (alk's Python SDK "
                              f"takes it in worker.start(); the Node SDK has none){_said(err)}")
        if now >= deadline:
            raise WarmRefused(f"the prepared process did not take the warm start within the "
                              f"lane's timeout_s ({request.timeout_s:g} s){_said(err)}")
        ready, _, _ = select.select([*streams, server], [], [],
                                    min(deadline, ready_by or deadline) - now)
        if server in ready:
            control, _ = server.accept()
            control.setblocking(True)
            control.settimeout(max(0.1, deadline - time.monotonic()))
            word = _word(control.recv(MESSAGE_BYTES))
            control.settimeout(None)
            if word.get("warm") != "ready":
                control.close()
                reason = str(word.get("reason") or "the prepared process refused")
                raise WarmRefused(reason[:300])
            return control
        for fd in ready:
            if fd is server:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                streams.pop(fd)
                if fd == proc.stdout.fileno():
                    raise WarmRefused("the prepared process ended before it took the warm "
                                      f"start{_said(err)}")
                continue
            streams[fd].extend(chunk)
            if ready_by is None and b'"framework_ready"' in out:
                ready_by = time.monotonic() + READY_GRACE_S
            if len(out) > HANDSHAKE_BYTES:
                raise WarmRefused("the prepared process wrote more than 1 MiB before its "
                                  "framework_ready")
            if len(err) > STDERR_KEPT_BYTES:
                del err[:len(err) - STDERR_KEPT_BYTES]


def _word(data: bytes) -> dict:
    """The prepared process's message: a JSON object, or nothing it said counts."""
    try:
        word = json.loads(data)
    except ValueError:
        return {}
    return word if isinstance(word, dict) else {}


def _said(err: bytearray) -> str:
    text = err.decode("utf-8", "replace").strip().splitlines()
    return f"; its stderr ends: {text[-1][:200]}" if text else ""
