"""What alk reads about live processes from the OS (Linux /proc), and finds on PATH."""

from __future__ import annotations

import functools
import os
import shutil


def pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when the process exits (Linux ≥ 5.3)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def descendant(pid: int, depth: int) -> int | None:
    """The process `depth` forks below `pid` (a worker behind its wrappers)."""
    for _ in range(depth):
        try:
            with open(f"/proc/{pid}/task/{pid}/children", "rb") as children:
                found = children.read().split()
        except OSError:
            return None
        if not found:
            return None
        pid = int(found[0])
    return pid


def peak_rss_kb(pid: int | str) -> int:
    """Peak resident set size (VmHWM) of a live process in KiB; 0 where unavailable."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tmpfs_used_kb(pid: int) -> int:
    """What a sandboxed process holds in its private /tmp and /dev/shm, in KiB (tmpfs is
    memory); 0 where unavailable. Read through its root as the host sees it."""
    used = 0
    for folder in ("tmp", "dev/shm"):
        try:
            stat = os.statvfs(f"/proc/{pid}/root/{folder}")
        except OSError:
            continue
        used += (stat.f_blocks - stat.f_bfree) * stat.f_frsize // 1024
    return used


@functools.lru_cache(maxsize=64)
def on_path(program: str, path: str) -> bool:
    """Can `program` be run with this PATH? Cached: it is asked before every repeat."""
    return shutil.which(program, path=path) is not None
