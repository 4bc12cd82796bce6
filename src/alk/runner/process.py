"""Runs one worker as a fresh, contained subprocess and drives protocol v1 with it.

One thread, one selector: stdout, stderr, stdin and (on Linux) a pidfd for the worker's exit are
all multiplexed here, so there is no reader thread that could die silently and lose evidence,
and nothing waits on a pipe that an escaped grandchild holds open. Every read is a bounded
chunk into a bounded buffer; what a worker writes can make the transcript hit its cap, never the
harness's memory grow.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from alk.limits import prlimit_prefix
from alk.limits import setter as limit_setter
from alk.records import KillAt, Limits, Observation, Preflight
from alk.redaction import Redactor
from alk.runner.isolation import Filesystem, Isolation, Network, detect
from alk.runner.lines import LineSplitter
from alk.runner.procfs import descendant, on_path, peak_rss_kb
from alk.runner.procfs import pidfd as procfs_pidfd
from alk.runner.pids_cgroup import for_limits as pids_cgroup_for
from alk.runner.protocol import (
    Phase,
    ProtocolState,
    WorkerEvent,
    abort_message,
    decode_line,
    encode,
)
from alk.transcript import TranscriptWriter

READ_CHUNK_BYTES = 64 * 1024
LINE_LIMIT_BYTES = 1024 * 1024
STDERR_TAIL_CHARS = 4096
# After a timeout: SIGINT first (a Python worker prints where it hung), then TERM, then KILL.
INT_GRACE_S = 0.5
TERM_GRACE_S = 0.5
# After an abort the worker should exit by itself; past this it is killed.
ABORT_GRACE_S = 1.0
# What is already in the pipes when the worker exits is its evidence; reading stops after this.
DRAIN_LIMIT_S = 0.2
# The worker's peak RSS is sampled from /proc (VmHWM, monotonic) on this timer and at its result
# event: ru_maxrss cannot be used alone, as a child's starts at the harness's own peak. A read
# costs ~30 µs, 0.15% of a worker's time at this interval.
SAMPLE_INTERVAL_S = 0.02
UNSHARE_SIGKILL_LINE = b"unshare: sigprocmask unblock failed: Invalid argument"
# After SIGKILL a process ends unless stuck in the kernel; never wait on it longer than this.
REAP_LIMIT_S = 2.0


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One worker process to run. `start` is None for a preflight-only probe. `redactor` holds
    the values that must not appear in what the runner reports (its transcript has its own)."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    timeout_s: float
    hello: Mapping[str, Any]
    start: Mapping[str, Any] | None
    line_limit_bytes: int = LINE_LIMIT_BYTES
    redactor: Redactor = field(default_factory=Redactor)
    limits: Limits = field(default_factory=Limits)
    network: Network = Network.HOST
    filesystem: Filesystem = Filesystem.WORKSPACE
    kill_at: KillAt | None = None
    # Folders the worker must be able to read in a sandbox (its program, interpreter, the SDK).
    visible: tuple[str, ...] = ()


Gate = Callable[[Mapping[str, Any]], Preflight]


class LocalRunner:
    """Runs workers as local processes, each in its own session and, where the machine allows,
    its own PID namespace (see `isolation`)."""

    def __init__(self, isolation: Isolation | None = None) -> None:
        self._isolation = isolation

    @property
    def isolation(self) -> Isolation:
        if self._isolation is None:
            self._isolation = detect()
        return self._isolation

    def run(self, request: RunRequest, gate: Gate, transcript: TranscriptWriter) -> Observation:
        return _Session(request, gate, transcript, self.isolation).run()


@dataclass
class _Stream:
    fd: int
    name: str
    lines: LineSplitter
    open: bool = True


class _Session:
    def __init__(self, request: RunRequest, gate: Gate, transcript: TranscriptWriter,
                 isolation: Isolation) -> None:
        self.request, self.gate, self.transcript = request, gate, transcript
        self.isolation = isolation
        self.wrapper = isolation.prefix(request.network, request.filesystem, request.cwd,
                                        request.visible)
        # unshare and bwrap (--as-pid-1) each fork the worker once: it is their child.
        self.sandboxed = request.filesystem is Filesystem.SANDBOX and bool(self.wrapper)
        self.wrapper_depth = 1 if self.wrapper else 0
        # The pid to sample: the worker itself, not the `unshare` in front of it.
        self.worker_pid: int | None = None
        self.state = ProtocolState(workspace=request.cwd)
        self.preflight: Preflight | None = None
        self.stdin_pending = bytearray()
        self.close_stdin_when_sent = False
        self.next_phase: Phase | None = None
        self.kill_seen = 0
        self.kill_fired = False
        self.stderr_tail = bytearray()
        self.stderr_trimmed = False
        self.timed_out = False
        self.killed_by_harness = False
        self.peak_rss_kb = 0
        self.harness_error: str | None = None
        self.rusage: Any = None
        self.started_at = 0.0
        self.killed_at = 0.0
        # Signals scheduled for the worker's group: (when, signal), in time order.
        self.escalation: list[tuple[float, int]] = []

    # -- the whole life of one process ----------------------------------------------------------

    def run(self) -> Observation:
        request = self.request
        started = self.started_at = time.monotonic()
        parent_hwm_kb = peak_rss_kb("self")
        containment = self.isolation.containment.value
        self.cgroup = pids_cgroup_for(request.limits)
        if (request.network not in self.isolation.networks
                or request.filesystem not in self.isolation.filesystems):
            # The executor voids such a run before it starts; never run with less than asked.
            raise ValueError(f"network {request.network} / filesystem {request.filesystem} "
                             "is not available here")
        try:
            # Limits go on first (inherited by all that follows), then the namespace; behind
            # them a missing program would look like an early exit, so say it plainly.
            limit_prefix = prlimit_prefix(request.limits)
            prefix = (*(limit_prefix or ()), *self.wrapper)
            if prefix and not _executable(request.argv[0], request.env):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory")
            steps = [step for step in (
                None if limit_prefix is not None else limit_setter(request.limits),
                self.cgroup.joiner() if self.cgroup else None) if step]
            proc = subprocess.Popen(
                (*prefix, *request.argv), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=request.cwd,
                env=dict(request.env), start_new_session=True, close_fds=True,
                preexec_fn=_chain(steps) if steps else None,
            )
        except OSError as exc:
            if self.cgroup:
                self.cgroup.remove()
            detail = f"cannot start {request.argv[0]!r}: {exc.strerror or exc}"
            self.transcript.harness("spawn_failed", {"argv": list(request.argv),
                                                     "error": detail})
            return Observation(spawned=False, spawn_error=detail, containment=containment)
        self.proc = proc
        if not self.wrapper_depth:
            self.worker_pid = proc.pid  # prlimit, if any, has exec'd the worker in place
        try:
            self.transcript.harness("spawn", {"pid": proc.pid, "argv": list(request.argv),
                                              "cwd": request.cwd, "env": sorted(request.env),
                                              "containment": containment,
                                              "network": request.network.value,
                                              "filesystem": request.filesystem.value,
                                              "limits": request.limits.applied()})
            self._send(request.hello)
            self.transcript.harness("hello", dict(request.hello))
            status, rusage = self._loop(started)
            limits_hit = ("max_processes",) if self.cgroup and self.cgroup.hit_limit() else ()
        except BaseException:
            # alk itself is stopping (Ctrl-C, SIGTERM, a bug): never leave the group behind.
            self._kill_group(signal.SIGKILL, quiet=True)
            until = time.monotonic() + REAP_LIMIT_S
            while time.monotonic() < until:
                try:
                    if os.waitpid(proc.pid, os.WNOHANG)[0]:
                        proc.returncode = -signal.SIGKILL
                        break
                except ChildProcessError:
                    break
                time.sleep(0.005)
            raise
        finally:
            if self.cgroup:
                self.cgroup.remove()
        duration = time.monotonic() - started

        exit_code = sig = None
        if status is not None:
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                proc.returncode = -sig
            else:
                exit_code = os.waitstatus_to_exitcode(status)
                proc.returncode = exit_code
            # (bwrap reports a death by signal N as exit 128 + N, which a worker could also
            # choose: it stays an exit code, and the detail says what it may mean.)
            if self.wrapper and not self.sandboxed and exit_code == 1 and \
                    self.stderr_tail.rstrip().endswith(UNSHARE_SIGKILL_LINE):
                # `unshare` mirrors its child's death by a signal, except SIGKILL, which it
                # cannot re-raise on itself: it says so and exits 1. The worker died by SIGKILL.
                exit_code, sig = None, signal.SIGKILL
                del self.stderr_tail[-len(UNSHARE_SIGKILL_LINE) - 1:]
        cpu_s = peak_kb = None
        if rusage is not None:
            cpu_s = rusage.ru_utime + rusage.ru_stime
            # ru_maxrss includes the harness's own peak at spawn (the child began as a copy of
            # it); above that it is the worker's true peak, below it only sampling can tell.
            own = rusage.ru_maxrss if rusage.ru_maxrss > parent_hwm_kb else 0
            peak_kb = max(own, self.peak_rss_kb) or None
        self.transcript.harness("exit", {
            "exit_code": exit_code, "signal": sig, "timed_out": self.timed_out,
            "duration_s": round(duration, 4), "cpu_s": cpu_s,
            "peak_rss_mb": round(peak_kb / 1024, 2) if peak_kb else None,
            "violations": self.state.violation_count,
        })
        return Observation(
            spawned=True,
            containment=containment,
            network=request.network.value,
            filesystem=request.filesystem.value,
            limits=request.limits.applied(),
            limits_hit=limits_hit,
            faults_fired=frozenset(self.state.faults_fired),
            path_hash=self.state.path_hash.hexdigest(),
            model_turns=self.state.model_turns,
            path=tuple(self.state.path),
            kill_fired=self.kill_fired,
            ready=self.state.ready,
            preflight=self.preflight,
            started=self.state.phase is Phase.STARTED,
            exit_code=exit_code,
            signal=sig,
            timed_out=self.timed_out,
            duration_s=duration,
            cpu_s=cpu_s,
            peak_rss_mb=peak_kb / 1024 if peak_kb else None,
            result=self.state.result,
            bad_result=self.state.bad_result,
            tool_calls=dict(self.state.tool_calls),
            uncounted_tool_calls=self.state.uncounted_tool_calls,
            trajectory=tuple(self.state.trajectory),
            violations=tuple(self.state.violations),
            violation_count=self.state.violation_count,
            stderr_tail=request.redactor.tail(self.stderr_tail.decode("utf-8", "replace"),
                                              STDERR_TAIL_CHARS, self.stderr_trimmed),
            harness_error=self.harness_error,
        )

    def _loop(self, started: float) -> tuple[int | None, Any]:
        proc = self.proc
        deadline = started + self.request.timeout_s
        limit = self.request.line_limit_bytes
        streams = {pipe.fileno(): _Stream(pipe.fileno(), name, LineSplitter(limit))
                   for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))}
        selector = selectors.DefaultSelector()
        for stream in streams.values():
            os.set_blocking(stream.fd, False)
            selector.register(stream.fd, selectors.EVENT_READ, stream)
        pidfd = procfs_pidfd(proc.pid)
        if pidfd is not None:
            selector.register(pidfd, selectors.EVENT_READ, "exit")
        stdin_fd = proc.stdin.fileno()
        os.set_blocking(stdin_fd, False)
        stdin_registered = False
        next_sample = started + SAMPLE_INTERVAL_S
        try:
            while True:
                now = time.monotonic()
                if now >= next_sample:
                    self._sample()
                    next_sample = now + SAMPLE_INTERVAL_S
                # Exit first: a worker that ended at the deadline ended, it did not time out.
                if self._exited():
                    break
                if self.killed_by_harness and now > self.killed_at + REAP_LIMIT_S:
                    self.harness_error = (f"worker pid {proc.pid} did not end within "
                                          f"{REAP_LIMIT_S:.0f} s of SIGKILL")
                    return None, None
                if not self.timed_out and now >= deadline:
                    self.timed_out = True
                    self.transcript.harness("timeout", {
                        "after_s": self.request.timeout_s, "phase": self.state.phase.value})
                    self.escalation = [
                        (now, signal.SIGINT), (now + INT_GRACE_S, signal.SIGTERM),
                        (now + INT_GRACE_S + TERM_GRACE_S, signal.SIGKILL)]
                while self.escalation and now >= self.escalation[0][0]:
                    self._kill_group(self.escalation.pop(0)[1])

                want_write = bool(self.stdin_pending)
                if want_write != stdin_registered and stdin_fd >= 0:
                    if want_write:
                        selector.register(stdin_fd, selectors.EVENT_WRITE, "stdin")
                    else:
                        selector.unregister(stdin_fd)
                    stdin_registered = want_write
                wake = [deadline if not self.timed_out else now + 0.05, next_sample]
                if self.escalation:
                    wake.append(self.escalation[0][0])
                timeout = max(0.0, min(wake) - time.monotonic())
                if pidfd is None:
                    timeout = min(timeout, 0.02)
                for key, _ in selector.select(timeout):
                    if key.data == "exit":
                        continue  # handled by _exited() at the top of the loop
                    if key.data == "stdin":
                        self._flush_stdin()
                        if not self.stdin_pending and stdin_registered:
                            selector.unregister(stdin_fd)
                            stdin_registered = False
                        continue
                    stream = key.data
                    if not self._read(stream):
                        selector.unregister(stream.fd)
                if not self.stdin_pending and self.close_stdin_when_sent and stdin_fd >= 0:
                    if stdin_registered:
                        selector.unregister(stdin_fd)
                        stdin_registered = False
                    # After the start message the worker reads EOF.
                    self._close_stdin()
                    stdin_fd = -1
            # The worker is gone but not yet reaped, so its pid (the group id) cannot have been
            # reused: end whatever it left in its group, reap it, then take what it had already
            # written; a grandchild that escaped the group cannot hold us here.
            self._kill_group(signal.SIGKILL, quiet=True)
            status = self._reap()
            drain_until = time.monotonic() + DRAIN_LIMIT_S
            for stream in streams.values():
                while stream.open and time.monotonic() < drain_until and self._read(stream):
                    pass
            for stream in streams.values():
                self._flush_partial(stream)
            if self.next_phase is not None:
                self.state.phase, self.next_phase = self.next_phase, None
            return status, self.rusage
        finally:
            selector.close()
            if pidfd is not None:
                os.close(pidfd)
            for pipe in (proc.stdout, proc.stderr):
                pipe.close()
            self._close_stdin()

    # -- process control ------------------------------------------------------------------------

    def _exited(self) -> bool:
        """Has the worker exited? Leaves it a zombie (WNOWAIT) so its pid stays reserved."""
        try:
            return os.waitid(os.P_PID, self.proc.pid,
                             os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def _reap(self) -> int | None:
        try:
            _, status, self.rusage = os.wait4(self.proc.pid, 0)
        except ChildProcessError:
            self.harness_error = f"the exit status of worker pid {self.proc.pid} was lost"
            return None
        return status

    def _kill_group(self, sig: int, quiet: bool = False) -> None:
        # The gentle signals go to the worker itself: sent to the group they would also reach
        # the unshare or bwrap in front of it, which would die at once and take the worker
        # down before it could say where it was stuck. SIGKILL goes to the whole group.
        target = None
        if sig != signal.SIGKILL and self.wrapper_depth:
            if self.worker_pid is None:
                self.worker_pid = descendant(self.proc.pid, self.wrapper_depth)
            target = self.worker_pid
        try:
            if target is not None:
                os.kill(target, sig)
            else:
                os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if not quiet:
            self.transcript.harness("kill", {"signal": signal.Signals(sig).name,
                                             "group": target is None})
        if sig == signal.SIGKILL and not self.killed_by_harness:
            self.killed_by_harness = True
            self.killed_at = time.monotonic()

    # -- stdin ----------------------------------------------------------------------------------

    def _send(self, message: Mapping[str, Any], close: bool = False) -> None:
        self.stdin_pending += encode(message)
        self.close_stdin_when_sent = close
        self._flush_stdin()

    def _flush_stdin(self) -> None:
        if self.proc.stdin is None or self.proc.stdin.closed:
            self.stdin_pending.clear()
            return
        try:
            written = os.write(self.proc.stdin.fileno(), self.stdin_pending)
            del self.stdin_pending[:written]
        except BlockingIOError:
            pass
        except (BrokenPipeError, OSError):
            # The worker stopped reading (or exited); its exit tells the rest.
            self.stdin_pending.clear()

    def _close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    # -- stdout / stderr ------------------------------------------------------------------------

    def _read(self, stream: _Stream) -> bool:
        """Reads one chunk; False at EOF (or nothing more to read when draining)."""
        try:
            chunk = os.read(stream.fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno == errno.EINTR:
                return True
            chunk = b""
        if not chunk:
            stream.open = False
            return False
        for raw, cut in stream.lines.feed(chunk):
            self._line(stream, raw, cut)
        if self.next_phase is not None:
            # The answer to framework_ready counts from the end of the chunk that carried it:
            # lines the worker wrote with it were written before it could read start.
            self.state.phase, self.next_phase = self.next_phase, None
        return True

    def _sample(self) -> None:
        if self.worker_pid is None:
            self.worker_pid = descendant(self.proc.pid, self.wrapper_depth)
        if self.worker_pid is not None:
            self.peak_rss_kb = max(self.peak_rss_kb, peak_rss_kb(self.worker_pid))

    def _flush_partial(self, stream: _Stream) -> None:
        for raw, cut in stream.lines.flush():
            self._line(stream, raw, cut)

    def _line(self, stream: _Stream, raw: bytes, cut: bool) -> None:
        if stream.name == "stderr":
            self.stderr_tail += raw + b"\n"
            # Keep enough before the tail (4 bytes a character at most) that a secret across
            # its start is still redacted whole.
            keep = 4 * (STDERR_TAIL_CHARS + self.request.redactor.longest)
            if len(self.stderr_tail) > keep:
                del self.stderr_tail[:-keep]
                self.stderr_trimmed = True
            self.transcript.worker("stderr", "line", {
                "text": raw.decode("utf-8", "replace"), **({"cut": True} if cut else {})})
            return
        if self.kill_fired:
            # Written before the SIGKILL landed, read after: evidence of the worker's last
            # moments, but no part of what the attempt did (no counts, no path, no result).
            self.transcript.worker("stdout", "after_kill", {
                "text": raw[:2000].decode("utf-8", "replace")})
            return
        outcome = self.state.accept(decode_line(raw, cut, self.request.redactor))
        if isinstance(outcome, WorkerEvent):
            if outcome.type == "framework_ready" and self.state.phase is Phase.READY:
                self._on_ready(outcome)
                return
            self.transcript.worker(outcome.channel, outcome.type, outcome.payload)
            if outcome.type == "result":
                self._sample()
            self._maybe_kill_at(outcome)
        else:
            self.transcript.harness("violation", {"kind": outcome.kind, "line": outcome.line,
                                                  "detail": outcome.detail})

    def _maybe_kill_at(self, event: WorkerEvent) -> None:
        """The scenario's harness-injected crash: SIGKILL at the named event, at once."""
        kill = self.request.kill_at
        if kill is None or self.kill_fired or self.state.phase is not Phase.STARTED:
            return
        if (event.channel, event.type) != (kill.channel, kill.type) or (
                kill.name is not None and event.payload.get("name") != kill.name):
            return
        self.kill_seen += 1
        if self.kill_seen == kill.occurrence:
            self.kill_fired = True
            self.transcript.harness("kill_at", {"channel": kill.channel, "type": kill.type,
                                                "name": kill.name, "occurrence": kill.occurrence})
            self._kill_group(signal.SIGKILL)

    def _on_ready(self, ready: WorkerEvent) -> None:
        """Judges framework_ready and answers with start or abort. The answer goes out before
        the three events are logged: the worker is blocked on stdin until it arrives."""
        self.preflight = self.gate(ready.payload)
        start = self.request.start
        if self.preflight.ok and start is not None:
            self.next_phase = Phase.STARTED
            kind = "start"
            message = {**start, "deadline_s": round(max(0.0, self.deadline_left()), 3)}
        else:
            self.next_phase = Phase.ABORTED
            self.escalation = [(time.monotonic() + ABORT_GRACE_S, signal.SIGKILL)]
            kind = "abort"
            message = abort_message(self.preflight.detail if not self.preflight.ok
                                    else "preflight probe only")
        self._send(message, close=True)
        self.transcript.worker(ready.channel, ready.type, ready.payload)
        self.transcript.harness("preflight", {
            "ok": self.preflight.ok, "framework": self.preflight.framework,
            "version": self.preflight.version, "cause": self.preflight.cause,
            "detail": self.preflight.detail})
        self.transcript.harness(kind, message)

    def deadline_left(self) -> float:
        return self.request.timeout_s - (time.monotonic() - self.started_at)


def _chain(steps: list[Callable[[], None]]) -> Callable[[], None]:
    def run_all() -> None:
        for step in steps:
            step()
    return run_all


def _executable(program: str, env: Mapping[str, str]) -> bool:
    return on_path(program, env.get("PATH", os.defpath))
