"""One repeat's cgroups, where the machine lets alk make them: memory and pids.

Rlimits bound one process at a time; a cgroup bounds the worker's whole tree, whoever runs it:
- memory (`memory_mb`): its children's memory and the tmpfs pages it writes in the sandbox's
  /tmp and /dev/shm are charged to it, and swap is kept out. Past the limit the kernel kills a
  process of the tree, and counts the kill (`oom_kill`), which names the cause.
- pids (`max_processes`): RLIMIT_NPROC counts every process of the user and does nothing for
  root, so alone it cannot stop a fork bomb; `pids.max` can. Only used when a lane sets it.
Joining has a cost a spawn: the child must join before exec, which rules out vfork (about 4 ms
more for alk's fork, measured on a 2-core cgroup v1 machine), and moving a process between
cgroups waits on the kernel (about 10 ms more there). On cgroup v2 one folder holds both; on v1 each controller has its own tree. A repeat's
cgroup is made under alk's own where that is writable, so that limits set on alk still hold.
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from pathlib import Path
from typing import Callable

from alk.records import Limits

MOUNT = Path("/sys/fs/cgroup")
RMDIR_LIMIT_S = 2.0
_NUMBERS = itertools.count(1)
# Set to "1" to make no memory cgroup (tests of the RLIMIT_DATA path alone).
NO_MEMORY_CGROUP_ENV = "ALK_NO_MEMORY_CGROUP"


def unified() -> bool:
    """Is /sys/fs/cgroup a cgroup v2 tree (not v1 or hybrid, whose controllers sit below)?"""
    return (MOUNT / "cgroup.controllers").exists()


@functools.cache
def parent(controller: str) -> Path | None:
    """A folder alk may make cgroups with this controller in, or None: alk's own cgroup, where
    alk may write in it, else the tree's root."""
    if unified():
        mount, own = MOUNT, _own("")
    else:
        mount, own = MOUNT / controller, _own(controller)
    if not (mount / "cgroup.procs").exists():
        return None
    for folder in dict.fromkeys(p for p in (mount / own if own else None, mount) if p):
        if unified() and controller not in _read(folder / "cgroup.subtree_control").split():
            continue  # its children would not get the controller
        probe = folder / f"alk-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError:
            continue
        return folder
    return None


def memory_parent() -> Path | None:
    if os.environ.get(NO_MEMORY_CGROUP_ENV) == "1":
        return None
    return parent("memory")


def counts_the_user(limits: Limits) -> bool:
    """Is `max_processes` set where only RLIMIT_NPROC can bound it? That limit counts every
    process of the user the workers run as: repeats at once would use up each other's share
    and fail for it, so such a lane's repeats run one at a time."""
    return limits.max_processes is not None and parent("pids") is None


class RepeatCgroup:
    """One repeat's cgroups: made before the spawn, joined by the child, removed afterwards.
    `settings` maps each controller to the files it is given (in order) and their values."""

    def __init__(self, settings: dict[str, dict[str, str]]) -> None:
        self.paths: dict[str, Path] = {}  # controller → its folder (one folder on v2)
        # Unique among the repeats of this alk that run at once (-j), and across alks.
        name = f"alk-{os.getpid()}-{next(_NUMBERS)}-{time.monotonic_ns()}"
        try:
            for controller, files in settings.items():
                root = parent(controller)
                if root is None:
                    raise OSError(f"no writable {controller} cgroup")
                path = root / name
                if path not in self.paths.values():
                    path.mkdir()
                self.paths[controller] = path
                for file, value in files.items():
                    if (path / file).exists():  # memsw and swap files need swap accounting
                        (path / file).write_text(value)
        except BaseException:
            self.remove()
            raise
        self._procs = tuple(dict.fromkeys(str(p / "cgroup.procs") for p in self.paths.values()))

    @property
    def procs(self) -> tuple[str, ...]:
        """The cgroup.procs files a process joins by writing 0 (the compiled init's --join)."""
        return self._procs

    def add(self, pid: int) -> None:
        """Moves a process alk did not start (a warm start's repeat) into the cgroups, before
        it runs anything: what it forks afterwards is bounded with it."""
        for path in self._procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, str(pid).encode())
            finally:
                os.close(fd)

    def joiner(self) -> Callable[[], None]:
        """For `preexec_fn`: moves the child into the cgroups before it runs anything."""
        procs = self._procs

        def join() -> None:
            for path in procs:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)

        return join

    def limits_hit(self) -> tuple[str, ...]:
        """The limits the kernel enforced: a kill on the memory limit, a fork failed on
        pids.max. (`memory.events` on v2, `memory.oom_control` on v1: "oom_kill N";
        `pids.events`: "max N".)"""
        hit = []
        if "memory" in self.paths:
            path = self.paths["memory"]
            text = _read(path / "memory.events") or _read(path / "memory.oom_control")
            if _count(text, "oom_kill"):
                hit.append("memory_mb")
        if "pids" in self.paths and _count(_read(self.paths["pids"] / "pids.events"), "max"):
            hit.append("max_processes")
        return tuple(hit)

    def remove(self) -> None:
        """Ends what is left in them and removes them; gives up quietly after a short while."""
        for path in dict.fromkeys(self.paths.values()):
            _remove(path)


def settings(limits: Limits) -> dict[str, dict[str, str]]:
    """What each controller is given for these limits, where alk may make its cgroup."""
    wanted: dict[str, dict[str, str]] = {}
    if limits.memory_mb and memory_parent() is not None:
        limit = str(limits.memory_mb * 1024 * 1024)
        # v1: the memory+swap limit may not be set below the memory limit, so it comes after.
        wanted["memory"] = ({"memory.max": limit, "memory.swap.max": "0"} if unified() else
                            {"memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": limit})
    if limits.max_processes and parent("pids") is not None:
        wanted["pids"] = {"pids.max": str(limits.max_processes)}
    return wanted


def for_limits(limits: Limits) -> RepeatCgroup | None:
    """Cgroups bounding the worker's whole tree, for the limits alk may bound so here."""
    wanted = settings(limits)
    if not wanted:
        return None
    try:
        return RepeatCgroup(wanted)
    except OSError:
        return None


def _own(controller: str) -> str:
    """alk's own cgroup in a hierarchy (v1: the line naming the controller; v2: "0::"),
    relative to its mount, or "" where /proc/self/cgroup does not say."""
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, names, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        if (controller in names.split(",")) if controller else names == "":
            return path.strip("/")
    return ""


def _count(text: str, key: str) -> int:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


def _remove(path: Path) -> None:
    until = time.monotonic() + RMDIR_LIMIT_S
    while True:
        for pid in _read(path / "cgroup.procs").split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > until:
                return
            time.sleep(0.01)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
