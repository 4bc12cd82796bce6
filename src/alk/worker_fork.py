"""The worker SDK's warm start: the prepared process forks each repeat, which isolates itself.

Standard library only, and never another alk module beyond `alk.worker`: alk copies this file
beside `worker.py` into every worker's PYTHONPATH. A worker never calls it: `worker.start()`
does, when alk started the worker as a run's prepared process (`ALK_WARM` names alk's control
socket). From then on this process (P) only forks. For each repeat alk sends the repeat's pipes
and settings; P forks C, and C, before anything of the scenario runs, takes the repeat's own
isolation (docs/security.md, "Warm start"):

- C waits until alk has put it in the repeat's cgroups, then unshares a user namespace (its
  uid mapped to itself: the worker is nobody, as cold), and mount, PID, IPC, UTS and (network
  "none") network namespaces; C then only waits for its child I and ends as I ended.
- I is PID 1 of the new PID namespace, as alk's init is cold: it mounts the namespace's /proc,
  a fresh /tmp and /dev/shm, hides every other repeat's workspace under an empty file system
  and binds its own, brings loopback up and hands alk the gateway's listener, then forks the
  worker W, forwards signals, reaps, ends the namespace when W ends and writes `exit N` or
  `signal N` on the status pipe.
- W applies the limits, drops every capability, sets no_new_privs, installs alk's seccomp
  filter, takes the repeat's environment, reseeds what a fork leaves shared, and returns into
  `worker.start()`, which answers the repeat's hello with the framework P reported.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import socket
import sys
from typing import Any, Dict, List, Optional

WARM_ENV = "ALK_WARM"
MESSAGE_BYTES = 64 * 1024
FDS_PER_REPEAT = 6  # stdin, stdout, stderr, status, go, gateway channel (-1 when none)

_NEWNS, _NEWUTS, _NEWIPC = 0x00020000, 0x04000000, 0x08000000
_NEWUSER, _NEWPID, _NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_RDONLY = 2, 4, 8, 1
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 4, 24, 38
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
_SIOCSIFFLAGS, _IFF_UP_RUNNING = 0x8914, 0x41


class _FProg(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def serve(path: str) -> Dict[str, Any]:
    """P's loop. Returns only in a repeat's worker W, with what alk sent for that repeat."""
    # SOCK_SEQPACKET: one message a send, each with the descriptors it carries.
    control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    control.connect(path)
    threads = _threads()
    if threads != 1:
        # Only the forking thread survives a fork: a lock another thread held stays locked.
        _send(control, {"warm": "refused",
                        "reason": f"the prepared process runs {threads} threads at the fork"})
        os._exit(0)
    problem = _trial()
    if problem:
        _send(control, {"warm": "refused", "reason": problem})
        os._exit(0)
    # What the framework made at import is shared with every repeat: kept out of the
    # collector's reach, a child's collections (and its exit's) do not copy those pages.
    gc.freeze()
    _send(control, {"warm": "ready"})
    seccomp = bytes.fromhex(json.loads(control.recv(MESSAGE_BYTES) or b"{}").get("seccomp", ""))
    while True:
        _reap()
        message, fds = _receive(control)
        if message is None:
            os._exit(0)  # alk closed the channel: the run is over
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            control.close()
            return _child(message, fds, seccomp)
        for fd in fds:
            if fd >= 0:
                os.close(fd)
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(control, [json.dumps({"forked": pid}).encode()], [pidfd])
        finally:
            os.close(pidfd)


def _child(message: Dict[str, Any], fds: List[int], seccomp: bytes) -> Dict[str, Any]:
    stdin, stdout, stderr, status, go, channel = fds
    os.dup2(stderr, 2)  # what goes wrong from here is the repeat's evidence
    os.setsid()
    if os.read(go, 1) != b"g":  # alk puts C in the repeat's cgroups first
        os._exit(1)
    os.close(go)
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    _check(libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")  # to write its own maps
    flags = _NEWUSER | _NEWNS | _NEWPID | _NEWIPC | _NEWUTS
    if message.get("network") == "none":
        flags |= _NEWNET
    _check(libc.unshare(flags), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
    init = os.fork()
    if init:
        for fd in (stdin, stdout, stderr, status, channel):
            if fd >= 0:
                os.close(fd)
        _, code = os.waitpid(init, 0)
        os._exit(os.waitstatus_to_exitcode(code) & 0xFF)
    _isolate(libc, message, channel)
    return _init(libc, message, (stdin, stdout, stderr), status, seccomp)


def _trial() -> str:
    """Can a child take a repeat's namespaces and its own /proc here? "" if so, else why: what
    the kernel refuses (no user namespaces, say) is a reason to run cold, not a failed repeat."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        libc = ctypes.CDLL(None, use_errno=True)
        uid, gid = os.getuid(), os.getgid()
        step = "unshare"
        if libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0) == 0 and libc.unshare(
                _NEWUSER | _NEWNS | _NEWPID | _NEWIPC | _NEWUTS | _NEWNET) == 0:
            try:
                for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                                   ("gid_map", f"{gid} {gid} 1")):
                    step = name
                    with open(f"/proc/self/{name}", "w") as handle:
                        handle.write(text)
                step = "mount /proc"
                inner = os.fork()
                if inner == 0:
                    os._exit(libc.mount(b"proc", b"/proc", b"proc",
                                        _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) and 1)
                if os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1]) == 0:
                    os._exit(0)
            except OSError:
                pass
        os.write(write, f"{step} is not permitted here".encode())
        os._exit(1)
    os.close(write)
    said = os.read(read, 200).decode("ascii", "replace")
    os.close(read)
    os.waitpid(child, 0)
    return f"a repeat could not take its own namespaces: {said}" if said else ""


def _isolate(libc: Any, message: Dict[str, Any], channel: int) -> None:
    """I's file system and network: its own /proc, /tmp, /dev/shm and workspace alone."""
    def mount(source: Optional[str], target: str, kind: Optional[str], flags: int,
              data: Optional[str] = None) -> None:
        _check(libc.mount(source and source.encode(), target.encode(), kind and kind.encode(),
                          flags, data and data.encode()), f"mount {target}")

    cwd, shared = message["cwd"], os.path.dirname(message["cwd"])
    own = os.open(cwd, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    size = message.get("tmpfs_bytes")
    for path in ("/tmp", "/dev/shm"):
        # What the sandbox binds below it (a lane, a venv, the SDK kept under /tmp) must stay
        # where it is over the fresh one: only the files of the prepared process's go.
        kept = []
        for point in _mounts_below(path):
            try:
                kept.append((point, os.open(point, os.O_PATH | os.O_NOFOLLOW)))
            except OSError:
                pass
        mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV,
              f"mode=1777{f',size={size}' if size else ''}")
        for point, fd in kept:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(point, 0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(point), 0o755, exist_ok=True)
                open(point, "a").close()
            mount(f"/proc/self/fd/{fd}", point, None, _MS_BIND | _MS_REC)
            os.close(fd)
    if os.path.isdir(shared):
        # The other repeats' workspaces lie beside this one: an empty folder over them all.
        mount("tmpfs", shared, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=4096")
    else:
        os.makedirs(shared, 0o755)  # under the fresh /tmp: no other repeat's is there
    os.mkdir(cwd, 0o755)
    mount(f"/proc/self/fd/{own}", cwd, None, _MS_BIND)
    os.close(own)
    if channel >= 0:
        _listen(channel, int(message["gateway_port"]))


def _mounts_below(path: str) -> List[str]:
    """The mount points mounted directly on the topmost mount at `path`, in the order made."""
    with open("/proc/self/mountinfo", "rb") as handle:
        rows = [line.split()[:5] for line in handle.read().splitlines()]
    entries = [(row[0], row[1], _unescape(row[4])) for row in rows if len(row) == 5]
    tops = [mount_id for mount_id, _, point in entries if point == path]
    if not tops:
        return []
    return [point for _, parent, point in entries if parent == tops[-1] and point != path]


def _unescape(field: bytes) -> str:
    """mountinfo writes a space, tab, newline and backslash in a path as octal escapes."""
    out = bytearray()
    at = 0
    while at < len(field):
        if field[at:at + 1] == b"\\" and field[at + 1:at + 4].isdigit():
            out.append(int(field[at + 1:at + 4], 8))
            at += 4
        else:
            out += field[at:at + 1]
            at += 1
    return out.decode("utf-8", "surrogateescape")


def _init(libc: Any, message: Dict[str, Any], pipes: tuple, status: int,
          seccomp: bytes) -> Dict[str, Any]:
    """I: PID 1 of the repeat's namespace, as alk's init is cold; returns only in W."""
    import signal

    numbers = [getattr(signal, name) for name in _FORWARDED if hasattr(signal, name)]
    worker = 0

    def forward(number: int, frame: Any) -> None:
        if worker > 0:
            try:
                os.kill(worker, number)
            except OSError:
                pass

    for number in numbers:
        signal.signal(number, forward)
    worker = os.fork()
    if worker == 0:
        os.close(status)
        for number in numbers:
            signal.signal(number, signal.SIG_DFL)
        return _worker(libc, message, pipes, seccomp)
    code = None
    while True:
        try:
            pid, wait_status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if pid == worker:
            code = wait_status
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
    if code is not None and os.WIFSIGNALED(code):
        line, exit_code = f"signal {os.WTERMSIG(code)}", 128 + os.WTERMSIG(code)
    elif code is not None:
        exit_code = os.waitstatus_to_exitcode(code)
        line = f"exit {exit_code}"
    else:
        line, exit_code = "exit 255", 255
    try:
        os.write(status, (line + "\n").encode())
    except OSError:
        pass
    os._exit(exit_code & 0xFF)


def _worker(libc: Any, message: Dict[str, Any], pipes: tuple,
            seccomp: bytes) -> Dict[str, Any]:
    """W: the repeat's limits, no capability, alk's filter, its environment and fresh state."""
    import resource

    os.chdir(message["cwd"])
    for number, soft, hard in message.get("rlimits", []):
        resource.setrlimit(number, (soft, hard))
    _drop_capabilities(libc)
    _check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if seccomp:
        buffer = ctypes.create_string_buffer(seccomp, len(seccomp))
        program = _FProg(len(seccomp) // 8, ctypes.cast(buffer, ctypes.c_void_p))
        _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0),
               "seccomp")
    had_pwd = "PWD" in os.environ  # bwrap sets it at --chdir; a cold repeat has its own
    os.environ.clear()
    os.environ.update(message.get("env", {}))
    if had_pwd:
        os.environ["PWD"] = message["cwd"]
    _reseed()
    message["pipes"] = pipes
    return message


def _drop_capabilities(libc: Any) -> None:
    """W holds every capability of its user namespace (its creator's): none may reach the
    scenario. The bounding set first (it needs CAP_SETPCAP), then the sets themselves."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two data structs
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset")


def _reseed() -> None:
    """What a fork leaves identical in every repeat: Python's `random` reseeds itself at fork;
    tempfile's names follow the pid, which is 2 in every repeat's namespace; NumPy's global
    generator does not reseed. (The hash seed of str and bytes cannot change in a running
    interpreter: every repeat of a warm run shares P's; docs/security.md says so.)"""
    import random
    import tempfile

    random.seed()
    tempfile._name_sequence = None  # type: ignore[attr-defined]
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        try:
            numpy_random.seed()
        except Exception:  # pragma: no cover - a NumPy without the legacy global
            pass


def _listen(channel_fd: int, port: int) -> None:
    """The gateway's listener on 127.0.0.1:PORT of this namespace, sent to alk (as cold)."""
    import fcntl

    channel = socket.socket(fileno=channel_fd)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            request = (b"lo".ljust(16, b"\0") + _IFF_UP_RUNNING.to_bytes(2, sys.byteorder)
                       + bytes(22))
            fcntl.ioctl(probe.fileno(), _SIOCSIFFLAGS, request)
        except OSError:
            pass
        finally:
            probe.close()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        socket.send_fds(channel, [b"L"], [listener.fileno()])
    finally:
        listener.close()
        channel.close()


def _threads() -> int:
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0  # unknown: refused, since it cannot be checked


def _receive(control: socket.socket) -> tuple:
    try:
        data, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, FDS_PER_REPEAT)
    except OSError:
        return None, []
    if not data:
        return None, []
    message = json.loads(data)
    # alk sends -1 for a channel it does not use; the descriptors come in order, present ones.
    wanted = message.pop("fds")
    received = iter(fds)
    return message, [next(received) if present else -1 for present in wanted]


def _send(control: socket.socket, message: Dict[str, Any]) -> None:
    control.send(json.dumps(message).encode())


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        os.write(2, f"alk warm start: {what} failed: {os.strerror(error)}\n".encode())
        os._exit(126)
