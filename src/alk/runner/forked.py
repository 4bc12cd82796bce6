"""A warm start's repeat as the runner holds it (`ForkedRepeat`): a process alk did not start.

The prepared process (alk.runner.warm) forks C, C forks I (PID 1 of the repeat's namespace),
and I forks W (the worker). C is the prepared process's child, not alk's: alk learns of its
exit through a pidfd the prepared process sends, reads the worker's status from I's line,
and never signals a process group by number, whose id may be reused once C is reaped.
"""

from __future__ import annotations

import os
import select
import signal
from typing import Any

from alk.runner.procfs import descendant
from alk.runner.spawn import Spawned

REAP_WAIT_S = 10.0  # after SIGKILL, for a process alk cannot wait for


def host_pid(pidfd: int) -> int:
    """The pid alk sees of the process a pidfd names (its fdinfo's `Pid:` line)."""
    with open(f"/proc/self/fdinfo/{pidfd}", "rb") as info:
        for line in info:
            if line.startswith(b"Pid:"):
                pid = int(line.split()[1])
                if pid > 0:
                    return pid
    os.close(pidfd)
    raise OSError("the prepared process sent a descriptor of no live process")


class _Pipes:
    """What the runner reads of a `Popen`: the three pipes, the pid, the return code."""

    def __init__(self, pid: int, fds: list[int]) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = os.fdopen(fds[0], "wb", buffering=0)
        self.stdout = os.fdopen(fds[1], "rb", buffering=0)
        self.stderr = os.fdopen(fds[2], "rb", buffering=0)


class ForkedRepeat(Spawned):
    """A repeat forked from the prepared process: C (its outermost process, the prepared
    one's child, not alk's), I (PID 1 of its namespace) and W (the worker), two forks apart.
    alk cannot wait for C: its exit comes through the pidfd, and its status from I's line."""

    warm = True

    def __init__(self, pid: int, pidfd: int, fds: list[int], cgroup: Any) -> None:
        super().__init__(_Pipes(pid, fds), 2, fds[3], cgroup, True)  # type: ignore[arg-type]
        if self.exit_fd is not None:
            os.close(self.exit_fd)
        self.exit_fd = pidfd
        self._line: tuple[int | None, int | None] | None = None

    def exited(self) -> bool:
        fd = self.exit_fd
        return fd is None or bool(select.select([fd], [], [], 0)[0])

    def signal(self, number: int, group: bool) -> bool | None:
        if not group:
            target = self.worker_pid()
            if target is not None:
                try:
                    os.kill(target, number)
                    return False
                except OSError:
                    return None
        # Never by process group: C is not alk's child, so its id may be reused once reaped.
        # The worker first, as a group's signal reaches it at once, then its namespace's PID 1,
        # which ends the rest with it.
        sent = False
        for pid in (self.worker_pid(), descendant(self.pid, 1)):
            if pid is not None:
                try:
                    os.kill(pid, number)
                    sent = True
                except OSError:
                    pass
        with self._lock:
            if self.exit_fd is not None:
                try:
                    signal.pidfd_send_signal(self.exit_fd, number)
                    sent = True
                except OSError:
                    pass
        return True if sent else None

    def kill(self) -> None:
        self.signal(signal.SIGKILL, group=True)

    def reap(self) -> tuple[int, Any] | None:
        fd = self.exit_fd
        if fd is not None and not select.select([fd], [], [], REAP_WAIT_S)[0]:
            return None  # killed and still there: not alk's child, so nothing more to do
        self._reaped = True
        self._line = self._read_line()
        code, sig = self._line or (None, signal.SIGKILL)
        self.proc.returncode = code if code is not None else -(sig or 0)
        status = (sig or 0) if code is None else (code & 0xFF) << 8
        return status, None

    def reap_after_kill(self, limit_s: float) -> None:
        self.kill()
        fd = self.exit_fd
        if fd is not None:
            select.select([fd], [], [], limit_s)

    def init_status(self, outer: int | None) -> tuple[int | None, int | None] | None:
        return self._line

    def _read_line(self) -> tuple[int | None, int | None] | None:
        fd = self._status_fd
        if fd is None:
            return None
        os.set_blocking(fd, False)
        try:
            data = os.read(fd, 64)
        except OSError:
            return None
        parts = data.decode("ascii", "replace").split()
        if data.count(b"\n") != 1 or len(parts) != 2 or not parts[1].isdigit():
            return None
        if parts[0] == "exit":
            return int(parts[1]), None
        if parts[0] == "signal":
            return None, int(parts[1])
        return None
