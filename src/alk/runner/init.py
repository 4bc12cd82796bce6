"""alk's init: PID 1 of a worker's PID namespace, so that the worker is not.

The kernel ignores a signal sent to a namespace's PID 1 when its action is the default, so a
worker running as PID 1 survives its own SIGKILL and alk's SIGTERM. This init runs the worker
as its child instead, forwards the signals it gets, reaps every orphan, ends the namespace when
the worker ends, and reports the worker's real exit status on a pipe only it holds: a worker's
exit code cannot pass for a signal (bwrap and unshare report a death by signal N as 128 + N).

    python -I -S -c CODE STATUS_FD UID GID GATEWAY -- PROGRAM ARG...

Standalone and standard library only; alk runs it with `-c` (its code, compiled once by alk),
so no file of alk's needs to be visible in the sandbox. With UID and GID other than "-", the
worker runs as that user (alk as root runs it as nobody: root-only files stay unreadable). The
status line is `exit N` or `signal N`. With GATEWAY `FD:PORT` (else "-"), it first makes the
model gateway's listener on 127.0.0.1:PORT of the worker's network namespace and sends it to
alk over the Unix socket FD, then closes both: alk serves the listener from its own side, so a
worker with no network reaches the gateway and nothing else, and never holds the channel.
Imports are kept to built-in modules: this costs every repeat a start-up. Where a C compiler is,
alk runs `init.c`, the same program compiled, instead (`runner/cinit.py`): this one is the
fallback, and the tests run both.
"""

import os
import sys

try:
    import _signal as signals  # built in; `signal` would import enum, milliseconds a spawn
except ImportError:  # pragma: no cover - other interpreters
    import signal as signals

FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
RESET = ("SIGPIPE", "SIGXFSZ")
PR_SET_DUMPABLE = 4
# Bringing a namespace's loopback up where nothing did (unshare --net leaves it down).
SIOCSIFFLAGS = 0x8914
IFF_UP_RUNNING = 0x41


def main(argv):
    status_fd, uid, gid, gateway = int(argv[1]), argv[2], argv[3], argv[4]
    command = argv[6:]
    if gateway != "-":
        listen(gateway)
    if os.getuid() != 0:
        # Same user as the worker: without this it could open /proc/1/fd/STATUS_FD and forge
        # the status line, or trace this process.
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    numbers = [getattr(signals, name) for name in FORWARDED if hasattr(signals, name)]
    # The forwarded signals and SIGCHLD are held from before the fork, and taken one at a time
    # (sigwaitinfo): one that comes before this process is back from the fork, or between two
    # waits, is forwarded, not lost. (A Python handler runs only when the interpreter next
    # looks, which a wait already begun may not let it do until the worker has exited.)
    signals.signal(signals.SIGCHLD, signals.SIG_DFL)  # ignored, the kernel would reap alone
    taken = {*numbers, signals.SIGCHLD}
    held = signals.pthread_sigmask(signals.SIG_BLOCK, taken)
    worker = os.fork()
    if worker == 0:
        try:
            os.close(status_fd)
            # The dispositions a worker with no init has: Python ignores SIGPIPE and SIGXFSZ,
            # and an ignored signal stays ignored across exec.
            for number in (*numbers, *(getattr(signals, name) for name in RESET
                                       if hasattr(signals, name))):
                signals.signal(number, signals.SIG_DFL)
            signals.pthread_sigmask(signals.SIG_SETMASK, held)
            if uid != "-":
                os.setgroups([])
                os.setgid(int(gid))
                os.setuid(int(uid))
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"alk init: cannot run {command[0]!r}: {exc.strerror}\n".encode())
        os._exit(127)
    status, children = None, True
    while children:
        number = signals.sigwaitinfo(taken).si_signo
        if number != signals.SIGCHLD:
            try:
                os.kill(worker, number)
            except OSError:
                pass
            continue
        while True:  # every child that has ended: the worker, and orphans left to this one
            try:
                pid, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children = False
                break
            if pid == 0:
                break
            if pid == worker:
                status = code
                try:
                    os.kill(-1, signals.SIGKILL)  # the rest of the namespace ends with it
                except OSError:
                    pass
    if status is None:
        line, code = "exit 255", 255
    elif os.WIFSIGNALED(status):
        line, code = f"signal {os.WTERMSIG(status)}", 128 + os.WTERMSIG(status)
    else:
        line, code = f"exit {os.waitstatus_to_exitcode(status)}", os.waitstatus_to_exitcode(status)
    try:
        os.write(status_fd, (line + "\n").encode())
    except OSError:
        pass
    os._exit(code & 0xFF)


def listen(spec):
    """Makes the gateway's listener in this namespace and hands it to alk."""
    import _socket

    channel_fd, port = (int(part) for part in spec.split(":"))
    channel = _socket.socket(fileno=channel_fd)
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        try:
            # bwrap brings the namespace's loopback up; unshare --net leaves it down (127.0.0.1
            # binds, but nothing connects). Without the right to (bwrap's init has none), skip.
            loopback_up(_socket)
        except OSError:
            pass
        listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        fd = listener.fileno().to_bytes(4, sys.byteorder)
        channel.sendmsg([b"L"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fd)])
    except OSError as exc:
        os.write(2, f"alk init: no gateway listener on port {port}: {exc}\n".encode())
    finally:
        listener.close()
        channel.close()


def loopback_up(_socket):
    import fcntl

    probe = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        request = b"lo".ljust(16, b"\0") + IFF_UP_RUNNING.to_bytes(2, sys.byteorder) + bytes(22)
        fcntl.ioctl(probe.fileno(), SIOCSIFFLAGS, request)
    finally:
        probe.close()


if __name__ == "__main__":
    main(sys.argv)
