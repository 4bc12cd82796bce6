"""What alk reads about live processes from the OS (Linux /proc), and finds on PATH."""

from __future__ import annotations

import functools
import os
import shutil
from typing import Iterable


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


# /proc/PID/status up to VmHWM, and well past it, fits in this.
STATUS_READ_BYTES = 4096
# A sandboxed process's memory-backed folders, as seen through its root.
TMPFS_FOLDERS = ("tmp", "dev/shm")


def peak_rss_kb(pid: int | str) -> int:
    """Peak resident set size (VmHWM) of a live process in KiB; 0 where unavailable."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            return vm_hwm_kb(status.read(STATUS_READ_BYTES))
    except OSError:
        return 0


def own_peak_rss_mb() -> float:
    """alk's own memory peak. VmHWM is this process's own; ru_maxrss would include the peak of
    whatever started alk (a test runner, say), as a child's counter starts from its parent's."""
    kb = peak_rss_kb("self")
    if not kb:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        kb = peak // 1024 if sys.platform == "darwin" else peak  # bytes there, KiB elsewhere
    return kb / 1024


def vm_hwm_kb(status: bytes) -> int:
    """VmHWM in KiB from the text of a /proc/PID/status; 0 without one."""
    at = status.find(b"\nVmHWM:")
    try:
        return int(status[at + 7:status.index(b"kB", at)]) if at >= 0 else 0
    except ValueError:
        return 0


def tmpfs_used_kb(folders: Iterable[int]) -> int:
    """What the memory-backed folders open on these descriptors hold, in KiB (tmpfs is
    memory); a folder that cannot be read counts 0."""
    used = 0
    for folder in folders:
        try:
            stat = os.fstatvfs(folder)
        except OSError:
            continue
        used += (stat.f_blocks - stat.f_bfree) * stat.f_frsize // 1024
    return used


@functools.lru_cache(maxsize=64)
def on_path(program: str, path: str) -> bool:
    """Can `program` be run with this PATH? Cached: it is asked before every repeat."""
    return shutil.which(program, path=path) is not None
