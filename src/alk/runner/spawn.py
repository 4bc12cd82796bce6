"""Starting a worker behind its wrappers; signalling, watching and reaping it.

The worker's argv is put behind, in order: `prlimit` (its limits, inherited by everything after),
the isolation (bwrap for the sandbox, or setpriv and unshare for a PID namespace), and, in a
PID namespace, alk's init (`runner/init.c` compiled, else `runner/init.py`; `runner/cinit.py`
says which), so that the worker is never PID 1 and its real exit status reaches alk on a pipe
of the init's. Before exec the child joins the repeat's
cgroups (`runner/cgroup.py`), so that they bound all of that. Only this module starts workers.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import marshal
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from alk.limits import prlimit_prefix
from alk.limits import setter as limit_setter
from alk.runner import cinit
from alk.runner.cgroup import RepeatCgroup
from alk.runner.cgroup import for_limits as cgroup_for
from alk.runner.isolation import Containment, Filesystem, Isolation, Network
from alk.runner.procfs import (
    STATUS_READ_BYTES,
    TMPFS_FOLDERS,
    descendant,
    on_path,
    tmpfs_used_kb,
    vm_hwm_kb,
)
from alk.runner.procfs import pidfd as procfs_pidfd
from alk.runner.request import RunRequest
from alk.runner.sandbox import View, bwrap_args, give_workspace, worker_uid

PIPE_BYTES = 1024 * 1024
# The init's one line: "exit N" or "signal N"; anything longer is not the init's.
STATUS_LINE_BYTES = 64
# Folders a worker writes besides its workspace, sized from its memory limit, each this share.
TMPFS_SHARE_OF_MEMORY = 0.5
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# How long alk waits for the init to hand over the gateway's listener (it does so first thing).
LISTENER_WAIT_S = 10.0


@functools.cache
def init_source() -> str:
    return Path(__file__).with_name("init.py").read_text(encoding="utf-8")


@functools.cache
def init_program() -> str:
    """What `python -I -S -c` runs as alk's init: its code, compiled here once and carried as
    marshal data (alk's own interpreter runs it, so the format is its own). Given the source,
    every spawn would compile it again first: 0.6 ms a repeat."""
    code = compile(init_source(), "alk-init", "exec", optimize=2)  # without its docstrings
    return f"import marshal; exec(marshal.loads(bytes.fromhex('{marshal.dumps(code).hex()}')))"


def init_prefix(init_fd: int | None) -> tuple[str, ...]:
    """What runs the init: the compiled one through its descriptor (passed to the spawn, which
    `cinit.open_binary` gives), else the Python one."""
    if init_fd is not None:
        return (f"/proc/self/fd/{init_fd}",)
    return (sys.executable, "-I", "-S", "-c", init_program())


class Spawned:
    """A started worker: the process alk started (the outermost wrapper), its pipes, and where
    the worker itself sits below it."""

    def __init__(self, proc: subprocess.Popen, depth: int, status_fd: int | None,
                 cgroup: RepeatCgroup | None, sandboxed: bool) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.depth = depth  # forks between alk's child and the worker (wrappers, the init)
        self.sandboxed = sandboxed
        self._status_fd = status_fd
        self._cgroup = cgroup
        self._worker_pid: int | None = proc.pid if depth == 0 else None
        self.listener: socket.socket | None = None  # the gateway's, from the worker's namespace
        self.exit_fd = procfs_pidfd(proc.pid)
        self._lock = threading.Lock()  # `kill` (another thread) against reaping and closing
        self._reaped = False
        # The worker's /proc/PID/status and memory-backed folders, opened once it is found and
        # read through these descriptors at every sample: opening them by path each time
        # costs about ten times as much (~95 µs a sample, against ~10), and a descriptor
        # cannot come to name another process that reused the pid.
        self._watched: tuple[int | None, tuple[int, ...]] | None = None

    def worker_pid(self) -> int | None:
        """The worker's pid on the host, once it is found below its wrappers."""
        if self._worker_pid is None:
            self._worker_pid = descendant(self.pid, self.depth)
        return self._worker_pid

    def exited(self) -> bool:
        """Has the started process exited? Leaves it a zombie (WNOWAIT) so that its pid, the
        group's id, cannot be reused before the group is killed."""
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def signal(self, number: int, group: bool) -> bool | None:
        """Sends a signal to the worker alone (or its group when it cannot be found yet), or to
        the whole group. Returns whether it went to the group, None when nobody was there."""
        target = None if group or not self.depth else self.worker_pid()
        try:
            if target is not None:
                os.kill(target, number)
            else:
                os.killpg(self.pid, number)
        except (ProcessLookupError, PermissionError):
            return None
        return target is None

    def kill(self) -> None:
        """SIGKILL from another thread than the loop's (the disk watch). To the started
        process through its pidfd, which names no other process once it is reaped; the loop
        then sees it exit and kills its group (its namespace ends with it). Without a pidfd,
        to the group, and only while it is not reaped: its id could name another by then."""
        with self._lock:
            if self.exit_fd is not None:
                try:
                    signal.pidfd_send_signal(self.exit_fd, signal.SIGKILL)
                except (AttributeError, OSError):
                    pass
                else:
                    return
            if not self._reaped:
                self.signal(signal.SIGKILL, group=True)

    def reap(self) -> tuple[int, Any] | None:
        """Waits for the started process: (wait status, rusage), None when it was lost."""
        try:
            with self._lock:
                self._reaped = True
                _, status, rusage = os.wait4(self.pid, 0)
        except ChildProcessError:
            return None
        self.proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must know
        return status, rusage

    def reap_after_kill(self, limit_s: float) -> None:
        """After alk itself failed or was interrupted: kill the group, reap for a short while."""
        self.signal(signal.SIGKILL, group=True)
        until = time.monotonic() + limit_s
        while time.monotonic() < until:
            try:
                with self._lock:
                    reaped = os.waitpid(self.pid, os.WNOHANG)[0]
                    self._reaped = self._reaped or bool(reaped)
                if reaped:
                    self.proc.returncode = -signal.SIGKILL
                    return
            except ChildProcessError:
                return
            time.sleep(0.005)

    def peak_rss_kb(self) -> int:
        """The worker's peak resident set size (VmHWM) in KiB; 0 until it is found, or once
        it is gone."""
        status = self._watch()[0]
        if status is None:
            return 0
        try:
            return vm_hwm_kb(os.pread(status, STATUS_READ_BYTES, 0))
        except OSError:
            return 0

    def tmpfs_kb(self) -> int:
        """What the worker holds in its private /tmp and /dev/shm (memory, not disk)."""
        return tmpfs_used_kb(self._watch()[1])

    def _watch(self) -> tuple[int | None, tuple[int, ...]]:
        """The descriptors samples read, opened the first time the worker is found."""
        if self._watched is not None:
            return self._watched
        pid = self.worker_pid()
        if pid is None:
            return None, ()
        status = _open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
        folders = tuple(fd for fd in (_open(f"/proc/{pid}/root/{name}", _FOLDER)
                                      for name in TMPFS_FOLDERS) if fd is not None) \
            if self.sandboxed and status is not None else ()
        self._watched = (status, folders)
        return self._watched

    def init_status(self, outer: int | None) -> tuple[int | None, int | None] | None:
        """The worker's (exit code, signal) as the init saw it, or None without one (no init,
        the init was killed, or a line alk cannot trust). Read after the started process
        exited, so the init's line is there; it must be the only line, and agree with how the
        init itself ended (`outer`, the wrappers' wait status): a worker that reached the pipe
        (as root outside the sandbox, it can) cannot make its own line count."""
        if self._status_fd is None or outer is None or not os.WIFEXITED(outer):
            return None
        try:
            data = os.read(self._status_fd, STATUS_LINE_BYTES)
        except OSError:
            return None
        parts = data.decode("ascii", "replace").split()
        if data.count(b"\n") != 1 or not data.endswith(b"\n") or len(parts) != 2 \
                or not parts[1].isdigit():
            return None
        value, code = int(parts[1]), os.WEXITSTATUS(outer)
        if parts[0] == "exit" and code == value & 0xFF:
            return value, None
        if parts[0] == "signal" and code == (128 + value) & 0xFF:
            return None, value
        return None

    def limits_hit(self) -> tuple[str, ...]:
        """The limits the kernel enforced on the worker's tree through its cgroups."""
        return self._cgroup.limits_hit() if self._cgroup else ()

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        # A folder's descriptor would keep the worker's tmpfs, and what it holds, alive.
        status, folders = self._watched or (None, ())
        with self._lock:
            for fd in (self.exit_fd, self._status_fd, status, *folders):
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self.exit_fd = self._status_fd = None
        self._watched = (None, ())
        if self._cgroup:
            self._cgroup.remove()
            self._cgroup = None


def start(request: RunRequest, isolation: Isolation, seccomp_program: bytes | None = None
          ) -> Spawned:
    """Starts the worker; raises OSError when it cannot be started."""
    if (request.network not in isolation.networks
            or request.filesystem not in isolation.filesystems):
        # The executor voids such a run before it starts; never run with less than asked.
        raise ValueError(f"network {request.network} / filesystem {request.filesystem} "
                         "is not available here")
    sandboxed, namespaced = _levels(request, isolation)
    limit_prefix = prlimit_prefix(request.limits)
    # Behind the wrappers a missing program would look like an early exit: say it plainly.
    if (limit_prefix or namespaced) and not on_path(request.argv[0],
                                                    request.env.get("PATH", os.defpath)):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory")
    cgroup = cgroup_for(request.limits)
    read_fd = write_fd = seccomp_fd = init_fd = join_fd = None
    channel: tuple[socket.socket, socket.socket] | None = None
    try:
        pass_fds: list[int] = []
        if namespaced:
            read_fd, write_fd = os.pipe()
            os.set_blocking(read_fd, False)
            pass_fds.append(write_fd)
            give_workspace(request.cwd, worker_uid() if sandboxed else None)
            init_fd = cinit.open_binary()
            if init_fd is not None:
                pass_fds.append(init_fd)
        if namespaced and request.gateway_port is not None:
            channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            pass_fds.append(channel[1].fileno())
        if sandboxed and seccomp_program is not None:
            seccomp_fd = _memfd(seccomp_program)
            pass_fds.append(seccomp_fd)
        gateway = f"{channel[1].fileno()}:{request.gateway_port}" if channel else None
        argv = command_line(request, isolation, status_fd=write_fd, seccomp_fd=seccomp_fd,
                            gateway=gateway, init_fd=init_fd)
        if cgroup is not None and limit_prefix is not None:
            join_fd = cinit.open_binary()  # joins the cgroups: no Python in a forked child
        if join_fd is not None:
            pass_fds.append(join_fd)
            argv = (f"/proc/self/fd/{join_fd}", "--join", *cgroup.procs, "--", *argv)
        steps = [step for step in (
            None if limit_prefix is not None else limit_setter(request.limits),
            cgroup.joiner() if cgroup and join_fd is None else None) if step]
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=request.cwd,
            env=dict(request.env), start_new_session=True, close_fds=True,
            pass_fds=tuple(pass_fds), preexec_fn=_chain(steps) if steps else None,
        )
    except BaseException:
        for fd in (read_fd, write_fd, seccomp_fd, init_fd, join_fd):
            if fd is not None:
                os.close(fd)
        for end in channel or ():
            end.close()
        if cgroup:
            cgroup.remove()
        raise
    # Only the init may hold the write end: alk's copy would keep the pipe open forever.
    for fd in (write_fd, seccomp_fd, init_fd, join_fd):
        if fd is not None:
            os.close(fd)
    for pipe in (proc.stdout, proc.stderr):
        _widen(pipe.fileno())
    # bwrap and unshare each fork once; the init forks the worker.
    spawned = Spawned(proc, 2 if namespaced else 0, read_fd, cgroup, sandboxed)
    if channel is not None:
        channel[1].close()
        try:
            spawned.listener = received_listener(channel[0])
        except OSError:
            spawned.reap_after_kill(LISTENER_WAIT_S)
            spawned.close()
            raise
        finally:
            channel[0].close()
    return spawned


def received_listener(channel: socket.socket) -> socket.socket:
    """The gateway's listener, as the init sends it from the worker's network namespace."""
    channel.settimeout(LISTENER_WAIT_S)
    try:
        _, fds, _, _ = socket.recv_fds(channel, 1, 1)
    except TimeoutError:
        fds = []
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise OSError(errno.EPROTO, "alk's init sent no gateway listener (its stderr says why)")
    return socket.socket(fileno=fds[0])


def command_line(request: RunRequest, isolation: Isolation, *, status_fd: int | None,
                 seccomp_fd: int | None = None, gateway: str | None = None,
                 init_fd: int | None = None) -> tuple[str, ...]:
    """The whole argv: limits, isolation, the init (given the fd for its status line, in a
    PID namespace; the compiled init's own with `init_fd`, else the Python init) and the
    worker's own. The overhead benchmark starts its bare side with it."""
    sandboxed, namespaced = _levels(request, isolation)
    drop_to = worker_uid() if sandboxed else None
    wrapper: tuple[str, ...] = ()
    init: tuple[str, ...] = ()
    if namespaced:
        init = (*init_prefix(init_fd), str(status_fd),
                *((str(drop_to), str(drop_to)) if drop_to is not None else ("-", "-")),
                gateway or "-", "--")
    if sandboxed:
        view = View(workspace=request.cwd, visible=request.visible, hidden=request.hidden,
                    tmpfs_bytes=tmpfs_bytes(request))
        wrapper = bwrap_args(isolation.bwrap or "bwrap", view,
                             offline=request.network is Network.NONE,
                             drop_to=drop_to, seccomp_fd=seccomp_fd,
                             prepare=bool(request.prepare))
    elif namespaced:
        wrapper = isolation.prefix(request.network)
    prepare = request.prepare if sandboxed else ()  # a warm start's step, before the init
    return (*(prlimit_prefix(request.limits) or ()), *wrapper, *prepare, *init, *request.argv)


def _levels(request: RunRequest, isolation: Isolation) -> tuple[bool, bool]:
    """(in the sandbox, in a PID namespace with alk's init) for this request here."""
    sandboxed = request.filesystem is Filesystem.SANDBOX and bool(isolation.bwrap)
    return sandboxed, sandboxed or (isolation.containment is Containment.PID_NAMESPACE
                                    and bool(isolation.unshare))


def tmpfs_bytes(request: RunRequest) -> int | None:
    memory_mb = request.limits.memory_mb
    return int(memory_mb * TMPFS_SHARE_OF_MEMORY) * 1024 * 1024 if memory_mb else None


def _widen(fd: int) -> None:
    """A larger pipe (where the OS allows it): a flooding worker blocks less often, and alk
    reads it in fewer, larger chunks."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (AttributeError, OSError):
        pass


def _open(path: str, flags: int) -> int | None:
    try:
        return os.open(path, flags)
    except OSError:
        return None


def _memfd(data: bytes) -> int:
    """A file descriptor bwrap reads the seccomp program from."""
    fd = os.memfd_create("alk-seccomp", 0) if hasattr(os, "memfd_create") else None
    if fd is None:
        read_end, write_end = os.pipe()  # the program is small: it fits the pipe's buffer
        os.write(write_end, data)
        os.close(write_end)
        return read_end
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _chain(steps: list[Callable[[], None]]) -> Callable[[], None]:
    def run_all() -> None:
        for step in steps:
            step()
    return run_all
