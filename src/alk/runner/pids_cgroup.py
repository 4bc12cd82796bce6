"""A pids cgroup per repeat, for `max_processes` where the machine lets alk make one.

RLIMIT_NPROC counts every process of the user and does nothing for root, so alone it cannot
stop a fork bomb. A cgroup's `pids.max` bounds the worker's whole tree, whoever runs it. It is
used only when a lane sets `max_processes`: joining a cgroup costs about a millisecond a spawn
(the child must join before exec, which rules out vfork), which the other limits do not need.
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from pathlib import Path
from typing import Callable

from alk.records import Limits

# cgroup v2 first (one tree); then the v1 pids controller (hybrid machines).
_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/pids"))
RMDIR_LIMIT_S = 2.0
_NUMBERS = itertools.count(1)


@functools.cache
def parent() -> Path | None:
    """A folder alk may make pids cgroups in, or None."""
    for root in _ROOTS:
        if not (root / "cgroup.procs").exists():
            continue
        if root == _ROOTS[0] and "pids" not in _read(root / "cgroup.subtree_control"):
            continue  # a v2 tree whose children do not get the pids controller
        probe = root / f"alk-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError:
            continue
        return root
    return None


def counts_the_user(limits: Limits) -> bool:
    """Is `max_processes` set where only RLIMIT_NPROC can bound it? That limit counts every
    process of the user the workers run as: repeats at once would use up each other's share
    and fail for it, so such a lane's repeats run one at a time."""
    return limits.max_processes is not None and parent() is None


class PidsCgroup:
    """One repeat's cgroup: made before the spawn, joined by the child, removed afterwards."""

    def __init__(self, max_processes: int) -> None:
        root = parent()
        if root is None:
            raise OSError("no writable pids cgroup")
        # Unique among the repeats of this alk that run at once (-j), and across alks.
        self.path = root / f"alk-{os.getpid()}-{next(_NUMBERS)}-{time.monotonic_ns()}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_processes))
        self._procs = str(self.path / "cgroup.procs")

    def joiner(self) -> Callable[[], None]:
        """For `preexec_fn`: moves the child into the cgroup before it runs anything."""
        procs = self._procs

        def join() -> None:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

        return join

    def hit_limit(self) -> bool:
        """Did a fork fail on pids.max? (`pids.events` counts them: "max N".)"""
        events = _read(self.path / "pids.events")
        return any(line.split()[-1] != "0" for line in events.splitlines() if line.strip())

    def remove(self) -> None:
        """Ends what is left in it and removes it; gives up quietly after a short while."""
        until = time.monotonic() + RMDIR_LIMIT_S
        while True:
            for pid in _read(self.path / "cgroup.procs").split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > until:
                    return
                time.sleep(0.01)


def for_limits(limits: Limits) -> PidsCgroup | None:
    """A cgroup bounding the worker's whole tree, when the lane bounds processes and alk may."""
    if not limits.max_processes or parent() is None:
        return None
    try:
        return PidsCgroup(limits.max_processes)
    except OSError:
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
