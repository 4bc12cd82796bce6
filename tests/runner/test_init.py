"""alk's init, compiled and in Python, as PID 1 of real workers' namespaces: what each reports,
forwards, reaps and ends, the gateway's listener it makes, and the worker it starts."""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from alk.records import Limits
from alk.runner import cinit, spawn
from alk.runner.doctor import doctor
from alk.runner.isolation import Containment, Filesystem, Network, detect
from alk.runner.procfs import descendant
from alk.runner.request import RunRequest
from alk.runner.sandbox import worker_uid

ISOLATION = detect()
pytestmark = pytest.mark.skipif(ISOLATION.containment is not Containment.PID_NAMESPACE,
                                reason="no PID namespace here: no init")
SANDBOX = Filesystem.SANDBOX in ISOLATION.filesystems
FILESYSTEMS = [Filesystem.WORKSPACE, pytest.param(Filesystem.SANDBOX, marks=pytest.mark.skipif(
    not SANDBOX, reason=f"no sandbox here: {ISOLATION.filesystem_reason}"))]
NO_NETWORK = Network.NONE in ISOLATION.networks
WAIT_S = 20


def started(tmp_path: Path, script: str, *, filesystem=Filesystem.WORKSPACE,
            network=Network.HOST, gateway_port=None, argv=None) -> spawn.Spawned:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    request = RunRequest(
        argv=argv or ("/bin/sh", "-c", script), cwd=str(workspace),
        env={"PATH": "/usr/bin:/bin"}, timeout_s=WAIT_S, hello={}, start=None, limits=Limits(),
        network=network, filesystem=filesystem, gateway_port=gateway_port,
        visible=(sys.prefix, sys.base_prefix, str(tmp_path)))
    return spawn.start(request, ISOLATION)


def finished(worker: spawn.Spawned) -> tuple[str, str, int, tuple | None]:
    """(stdout, stderr, the wrappers' exit code, the init's (exit code, signal))."""
    try:
        out, err = worker.proc.stdout.read(), worker.proc.stderr.read()
        status, _ = worker.reap()
        return (out.decode(), err.decode(), os.waitstatus_to_exitcode(status),
                worker.init_status(status))
    finally:
        worker.close()


def line(worker: spawn.Spawned) -> str:
    ready, _, _ = select.select([worker.proc.stdout], [], [], WAIT_S)
    assert ready, "the worker said nothing"
    return worker.proc.stdout.readline().decode().strip()


@pytest.mark.parametrize("filesystem", FILESYSTEMS)
def test_an_exit_code_and_a_signal_are_reported_apart(tmp_path, init, filesystem):
    # The wrappers say 139 for both; the init's line tells them apart.
    assert finished(started(tmp_path, "exit 139", filesystem=filesystem))[2:] == (139, (139, None))
    assert finished(started(tmp_path, "kill -SEGV $$", filesystem=filesystem))[2:] == (
        128 + signal.SIGSEGV, (None, signal.SIGSEGV))
    assert finished(started(tmp_path, "exit 0", filesystem=filesystem))[2:] == (0, (0, None))


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1",
                                  "SIGUSR2"])
def test_every_signal_the_init_gets_is_forwarded_to_the_worker(tmp_path, init, name):
    number = getattr(signal, name)
    worker = started(tmp_path, "echo ready; exec sleep 30")
    assert line(worker) == "ready"
    pid_1 = descendant(worker.pid, 1)
    assert pid_1 is not None and pid_1 != worker.worker_pid()
    os.kill(pid_1, number)
    # Each at its default in the worker, whatever alk's own process ignores.
    assert finished(worker)[2:] == (128 + number, (None, number))


def test_a_signal_as_the_worker_starts_is_not_lost(tmp_path, init):
    # The worker signals its PID 1 first thing: the init may not be back from its fork yet.
    # Held until the worker's pid is known, the signal is forwarded; dropped, the worker would
    # sleep on and exit 0 (the Python init lost about one in five so, before it held them).
    for _ in range(10):
        assert finished(started(tmp_path, "kill -USR1 1; exec sleep 5"))[2:] == (
            128 + signal.SIGUSR1, (None, signal.SIGUSR1))


def test_orphans_are_reaped_and_the_namespace_ends_with_the_worker(tmp_path, init,
                                                                   process_watch):
    # A child whose parent is gone is the init's: reaped, it is no zombie. One that left the
    # worker's session is killed when the worker exits.
    script = ("( (exit 0) & ); ( setsid sleep 3600 >/dev/null 2>&1 & ); sleep 0.5; "
              "zombies=0; for f in /proc/[0-9]*/stat; do "
              "case \"$(cut -d' ' -f3 $f 2>/dev/null)\" in Z) zombies=$((zombies+1));; esac; done; "
              "echo zombies $zombies; ls /proc | grep -c '^[0-9]'")
    with process_watch(tmp_path / "ws") as watch:
        worker = started(tmp_path, script)
        until = time.monotonic() + WAIT_S  # the orphan sleeps for an hour
        while not worker.exited() and time.monotonic() < until:
            time.sleep(0.01)
        if not worker.exited():
            worker.reap_after_kill(WAIT_S)
            worker.close()
            pytest.fail("the init waited for the orphan: the namespace outlived its worker")
        out, _, code, status = finished(worker)
    zombies, processes = out.split("\n")[:2]
    assert zombies == "zombies 0" and int(processes) >= 3, out  # init, sh, sleep 60 (and ls)
    assert (code, status) == (0, (0, None))
    assert watch.left() == [], "a process of the namespace outlived its worker"


@pytest.mark.parametrize("filesystem", FILESYSTEMS)
def test_a_program_that_cannot_run_is_said_and_exits_127(tmp_path, init, filesystem):
    program = tmp_path / "not-a-program"
    program.write_text("neither a shebang nor an ELF\n")
    program.chmod(0o755)
    _, err, code, status = finished(started(tmp_path, "", argv=(str(program),),
                                            filesystem=filesystem))
    assert f"alk init: cannot run '{program}': Exec format error" in err
    assert (code, status) == (127, (127, None))


@pytest.mark.parametrize("filesystem", FILESYSTEMS)
def test_the_worker_starts_clean_as_its_user(tmp_path, init, filesystem):
    # Nothing of the init's reaches it: no descriptor (the compiled init's own, the status
    # pipe), no ignored signal; in the sandbox as root, it runs as nobody in no other group
    # (alk is given some here: the init must drop them).
    groups_before = os.getgroups()
    try:
        if os.getuid() == 0:
            os.setgroups([0, 100])
        out, *_ = finished(started(tmp_path, "ls /proc/self/fd | tr '\\n' ' '; echo; "
                                   "grep SigIgn /proc/self/status; id -u; id -G",
                                   filesystem=filesystem))
    finally:
        if os.getuid() == 0:
            os.setgroups(groups_before)
    fds, ignored, uid, groups = out.strip().split("\n")
    assert fds.split() == ["0", "1", "2", "3"]  # 3: the folder ls reads
    mask = int(ignored.split()[1], 16)
    for name in ("SIGPIPE", "SIGXFSZ", "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"):
        assert not mask & (1 << (getattr(signal, name) - 1)), name
    drop = worker_uid() if filesystem is Filesystem.SANDBOX else None
    expected = drop if drop is not None else os.getuid()
    assert (int(uid), groups.split()) == (expected, [str(drop)] if drop is not None else
                                          groups.split())


@pytest.mark.skipif(not NO_NETWORK, reason=f"no network isolation here: "
                                           f"{ISOLATION.network_reason}")
@pytest.mark.parametrize("filesystem", FILESYSTEMS)
def test_the_gateways_listener_is_made_in_the_workers_namespace(tmp_path, init, filesystem):
    # With network none the worker reaches 127.0.0.1:PORT, which alk serves from its side
    # (unshare --net leaves loopback down: the init brings it up).
    port = 8011
    client = ("import socket, sys\n"
              f"s = socket.create_connection(('127.0.0.1', {port}), timeout=10)\n"
              "s.sendall(b'ping'); print(s.recv(16).decode())\n")
    worker = started(tmp_path, "", argv=(sys.executable, "-c", client), filesystem=filesystem,
                     network=Network.NONE, gateway_port=port)
    assert worker.listener is not None
    worker.listener.settimeout(WAIT_S)
    connection, _ = worker.listener.accept()
    with connection:
        assert connection.recv(16) == b"ping"
        connection.sendall(b"pong")
    worker.listener.close()
    out, err, code, status = finished(worker)
    assert (out.strip(), code, status) == ("pong", 0, (0, None)), err


def test_without_a_compiler_the_python_init_runs(tmp_path, monkeypatch):
    # No compiled init for this source anywhere alk looks, and no compiler: the fallback.
    source = tmp_path / "src" / "init.c"
    source.parent.mkdir()
    source.write_bytes(cinit.SOURCE.read_bytes() + b"\n/* not built yet */\n")
    monkeypatch.setattr(cinit, "SOURCE", source)
    monkeypatch.setattr(cinit, "_built", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.delenv(cinit.FORCE_ENV, raising=False)
    assert cinit.binary() is None and "no C compiler found" in cinit.why()
    [(_, value, why)] = [row for row in doctor() if row[0] == "PID 1"]
    assert "Python" in value and "no C compiler found" in why
    out, *_ = finished(started(tmp_path, "tr '\\0' ' ' < /proc/1/cmdline"))
    assert " -I -S -c " in out and "/proc/self/fd/" not in out
    # With one, it is built next to its source, and runs.
    monkeypatch.setattr(cinit, "_built", None)
    monkeypatch.delenv("CC")
    if cinit._compiler() is None:
        pytest.skip("no C compiler here")
    assert Path(cinit.binary()).parent == source.parent / "__pycache__"
    assert "init.c, compiled" in cinit.why()
    out, *_ = finished(started(tmp_path, "tr '\\0' ' ' < /proc/1/cmdline"))
    assert out.startswith("/proc/self/fd/") and " -I -S -c " not in out
