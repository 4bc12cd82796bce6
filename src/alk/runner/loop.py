"""The selector loop: one thread for one worker's stdout, stderr, stdin and exit.

Everything is multiplexed here (with a pidfd for the exit on Linux), so there is no reader
thread that could die silently and lose evidence, and nothing waits on a pipe an escaped
grandchild holds open. Reads are bounded chunks into bounded buffers: what a worker writes can
make its transcript reach its cap, never alk's memory grow. What to do about what is read is the
driver's decision; this module carries it out.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import time
from dataclasses import dataclass
from typing import Any

from alk.runner.driver import Action, Driver, GiveUp, Record, Sample, Send, Signal
from alk.runner.lines import LineSplitter
from alk.runner.spawn import Spawned
from alk.runner.stderr import SPLIT_BYTES, StderrSink
from alk.runner.stop import Stopped
from alk.transcript.writer import TranscriptWriter

READ_CHUNK_BYTES = 1024 * 1024
# Reads of one stream in a row before the loop looks at the rest again (the exit, the clock,
# the other stream): a flood is read in bulk, and nothing waits long behind it.
READS_IN_A_ROW = 8
# What is already in the pipes when the worker exits is its evidence; reading stops after this.
DRAIN_LIMIT_S = 0.2
# The worker's peak RSS is sampled from /proc (VmHWM, monotonic) on this timer and at its result
# event: ru_maxrss cannot be used alone, as a child's starts at the harness's own peak. A read
# costs ~30 µs, 0.15% of a worker's time at this interval.
SAMPLE_INTERVAL_S = 0.02
# Without a pidfd the exit is polled this often.
EXIT_POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class LoopEnd:
    """How the loop ended: the started process's wait status and rusage (None when it was
    lost, with `harness_error`), and the largest memory samples taken."""

    status: int | None
    rusage: Any
    harness_error: str | None
    peak_rss_kb: int
    peak_tmpfs_kb: int


class Loop:
    def __init__(self, spawned: Spawned, driver: Driver, transcript: TranscriptWriter,
                 stderr: StderrSink, line_limit: int) -> None:
        self.spawned, self.driver, self.transcript = spawned, driver, transcript
        self.stderr = stderr
        self.stdout_lines = LineSplitter(line_limit)
        self.pending = bytearray()  # for the worker's stdin
        self.close_when_sent = False
        self.harness_error: str | None = None
        self.peak_rss_kb = 0
        self.peak_tmpfs_kb = 0
        proc = spawned.proc
        self.stdout_fd, self.stderr_fd = proc.stdout.fileno(), proc.stderr.fileno()
        self.stdin_fd = proc.stdin.fileno()
        self.open = {self.stdout_fd: True, self.stderr_fd: True}

    def run(self) -> LoopEnd:
        selector = selectors.DefaultSelector()
        for fd in (self.stdout_fd, self.stderr_fd, self.stdin_fd):
            os.set_blocking(fd, False)
        for fd in (self.stdout_fd, self.stderr_fd):
            selector.register(fd, selectors.EVENT_READ, "read")
        if self.spawned.exit_fd is not None:
            selector.register(self.spawned.exit_fd, selectors.EVENT_READ, "exit")
        gateway = self.driver.request.gateway
        if gateway is not None:
            selector.register(gateway.wake_fd, selectors.EVENT_READ, "model")
        stop = self.driver.request.stop
        if stop is not None:
            selector.register(stop.fd, selectors.EVENT_READ, "stop")
        try:
            self.carry_out(self.driver.opening())
            if not self._until_exit(selector):
                return self._end(None, None)
            # The worker is gone but not yet reaped, so its pid (the group id) cannot have been
            # reused: end whatever it left in its group, reap it, then take what it had already
            # written; a grandchild that escaped the group cannot hold us here.
            self.spawned.signal(signal.SIGKILL, group=True)
            reaped = self.spawned.reap()
            if reaped is None:
                self.harness_error = f"the exit status of worker pid {self.spawned.pid} was lost"
            self._drain()
            self.driver.read_done()
            return self._end(*(reaped or (None, None)))
        finally:
            selector.close()
            self._close_stdin()

    def _until_exit(self, selector: selectors.BaseSelector) -> bool:
        """Runs until the started process exits (True) or alk gives up on it (False)."""
        stdin_registered = False
        next_sample = time.monotonic() + SAMPLE_INTERVAL_S
        while True:
            now = time.monotonic()
            if now >= next_sample:
                self._sample()
                next_sample = now + SAMPLE_INTERVAL_S
            # Exit first: a worker that ended at the deadline ended, it did not time out.
            if self.spawned.exited():
                return True
            if not self.carry_out(self.driver.tick(now)):
                return False
            want_write = bool(self.pending) and self.stdin_fd >= 0
            if want_write != stdin_registered:
                if want_write:
                    selector.register(self.stdin_fd, selectors.EVENT_WRITE, "write")
                else:
                    selector.unregister(self.stdin_fd)
                stdin_registered = want_write
            timeout = max(0.0, min(self.driver.wake_at(now), next_sample) - time.monotonic())
            if self.spawned.exit_fd is None:
                timeout = min(timeout, EXIT_POLL_S)
            for key, _ in selector.select(timeout):
                if key.data == "stop":
                    raise Stopped  # the caller ends the worker's group, as on Ctrl-C
                if key.data == "model":
                    self.model_events()
                elif key.data == "write":
                    self._flush_stdin()
                elif key.data == "read":
                    for _ in range(READS_IN_A_ROW):
                        if not self._read(key.fd):
                            break
                    if not self.open[key.fd]:
                        selector.unregister(key.fd)
            if not self.pending and self.close_when_sent and self.stdin_fd >= 0:
                if stdin_registered:
                    selector.unregister(self.stdin_fd)
                    stdin_registered = False
                self._close_stdin()  # after the start message the worker reads EOF

    def carry_out(self, actions: list[Action]) -> bool:
        """Does what the driver decided; False when it gave up on the worker."""
        for action in actions:
            if isinstance(action, Record):
                if action.harness:
                    self.transcript.harness(action.type, action.payload)
                else:
                    self.transcript.worker(action.channel, action.type, action.payload)
            elif isinstance(action, Send):
                self.pending += action.data
                self.close_when_sent = action.close
                self._flush_stdin()
            elif isinstance(action, Signal):
                group = self.spawned.signal(action.number, action.group)
                self.driver.signal_sent(time.monotonic())
                if group is not None:
                    self.transcript.harness("kill", {"signal": signal.Signals(action.number).name,
                                                     "group": group})
            elif isinstance(action, Sample):
                self._sample()
            elif isinstance(action, GiveUp):
                self.harness_error = f"worker pid {self.spawned.pid}: {action.reason}"
                return False
        return True

    # -- reading ---------------------------------------------------------------------------------

    def model_events(self) -> None:
        """Writes what the gateway saw since the last look. Before every stdout line too: a
        worker's line about a model answer comes after the gateway recorded that answer."""
        gateway = self.driver.request.gateway
        if gateway is not None:
            for channel, type, payload in gateway.events():
                self.transcript.observed(channel, type, payload)
                if channel == "model" and type == "violation":
                    self.carry_out(self.driver.gateway_violation(payload))
                elif channel == "tool":
                    self.carry_out(self.driver.observed_tool(type, payload, time.monotonic()))

    def _read(self, fd: int) -> bool:
        """Reads one chunk; False at EOF (or nothing more to read when draining)."""
        try:
            chunk = os.read(fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno == errno.EINTR:
                return True
            chunk = b""
        if not chunk:
            self.open[fd] = False
            return False
        if fd == self.stderr_fd:
            self.stderr.feed(chunk)
            return True
        now = time.monotonic()
        self.model_events()
        # Split in pieces: a megabyte of tiny lines is not a million objects at once.
        for at in range(0, len(chunk), SPLIT_BYTES):
            for raw, cut in self.stdout_lines.feed(chunk[at:at + SPLIT_BYTES]):
                self.carry_out(self.driver.stdout_line(raw, cut, now))
        self.driver.read_done()
        return True

    def _drain(self) -> None:
        until = time.monotonic() + DRAIN_LIMIT_S
        for fd in (self.stdout_fd, self.stderr_fd):
            while self.open[fd] and time.monotonic() < until and self._read(fd):
                pass
        now = time.monotonic()
        for raw, cut in self.stdout_lines.flush():
            self.carry_out(self.driver.stdout_line(raw, cut, now))
        self.stderr.flush()

    def _sample(self) -> None:
        self.peak_rss_kb = max(self.peak_rss_kb, self.spawned.peak_rss_kb())
        self.peak_tmpfs_kb = max(self.peak_tmpfs_kb, self.spawned.tmpfs_kb())

    # -- stdin -----------------------------------------------------------------------------------

    def _flush_stdin(self) -> None:
        if self.stdin_fd < 0:
            self.pending.clear()
            return
        try:
            written = os.write(self.stdin_fd, self.pending)
            del self.pending[:written]
        except BlockingIOError:
            pass
        except OSError:
            # The worker stopped reading (or exited); its exit tells the rest.
            self.pending.clear()

    def _close_stdin(self) -> None:
        if self.stdin_fd >= 0:
            try:
                self.spawned.proc.stdin.close()
            except OSError:
                pass
            self.stdin_fd = -1

    def _end(self, status: int | None, rusage: Any) -> LoopEnd:
        return LoopEnd(status, rusage, self.harness_error, self.peak_rss_kb, self.peak_tmpfs_kb)
