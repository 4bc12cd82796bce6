"""What a repeat may write on disk: `disk_mb`, measured by alk as the worker runs.

RLIMIT_FSIZE bounds one file; nothing in the kernel bounds a folder's total for an unprivileged
process (a sized file system needs a mount, a quota needs root and a prepared disk). So alk
measures: the free space of the workspace's file system is read every `SAMPLE_S` (a few µs),
and the workspace is walked (`alk.cleanup.tree_bytes`, as du counts it) when the file system
lost more since the last walk than the repeat had left, and at least every `WALK_EVERY_S`;
walks take at most a tenth of a core. A repeat may hold `disk_mb` in its workspace, and never
so much that the disk keeps less than `RESERVE_BYTES` for what alk still has to write.

Whose a full disk is:
- full (under the reserve) before the repeat began: alk's. Nothing is started (void).
- past the limit, or filled during the repeat so that alk's own write failed (`ENOSPC`): the
  repeat's, `disk_limit`, a scored failure. The worker is killed and, where the disk is full,
  its workspace emptied, so that alk can write the rest of the transcript.
- alk's write failed for another reason, or on a disk a sandboxed worker cannot write (its
  workspace lies elsewhere): alk's (`harness_error`).
"""

from __future__ import annotations

import errno
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from alk.cleanup import remove_tree, tree_bytes

MB = 1024 * 1024
SAMPLE_S = 0.05
WALK_EVERY_S = 2.0
# A walk is not begun again before this many times its own duration has passed.
WALK_COST_FACTOR = 10
# What the disk keeps for alk: the transcripts' tails (2 MiB each at most), the journal, the
# result, the reports. Fewer free inodes than this is a full disk too.
RESERVE_BYTES = 64 * MB
RESERVE_INODES = 1024
FULL = (errno.ENOSPC, errno.EDQUOT)
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Judged:
    """How the repeat's disk ended: a breach (`disk_limit`: the transcript event's payload,
    and the limit that was in force, in MiB), alk's own failure (`harness_error`), or neither.
    The workspace's size in a breach is at least what it says: the walk stops past the limit."""

    breach: dict[str, Any] | None = None
    limit_mb: int | None = None
    harness_error: str | None = None


class DiskWatch:
    """One attempt's disk: measured before the worker starts (`short_before`), watched on a
    thread of its own while it runs (`watch`), judged once it is gone (`judge`)."""

    def __init__(self, workspace: str, output: Path, limit_mb: int | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.workspace = workspace
        self.output = output
        self._clock = clock
        self._ws = os.open(workspace, _FOLDER)
        try:
            self._out = os.open(output, _FOLDER)
        except OSError:
            os.close(self._ws)
            raise
        self.same_disk = os.fstat(self._ws).st_dev == os.fstat(self._out).st_dev
        # A resumed attempt's workspace holds what the attempts before it wrote.
        self.used = tree_bytes(Path(workspace), above=limit_mb * MB if limit_mb else None)[0]
        free = self.free_at_start = _free(self._ws)
        self.short_before = _short(free, self.used) or _short(
            _free(self._out), self.used if self.same_disk else 0)
        # What the repeat may hold: the limit, and never the disk's reserve.
        capacity = free[0] + self.used
        self.limit = min(limit_mb * MB if limit_mb else capacity, capacity - RESERVE_BYTES)
        self._free_at_walk = free[0]
        self._walked_at = self._next_walk = self._clock()
        self._breach: dict[str, Any] | None = None
        self._failed = False  # alk's own write failed, not for the repeat's doing
        self._kill: Callable[[], None] | None = None
        self._writer: Any = None
        self._sandboxed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def describe_short(self) -> str:
        free, inodes = self.free_at_start
        return (f"the disk of the workspace, or of {self.output}, had {free // MB} MiB or "
                f"{inodes} inodes free before the repeat began, under the "
                f"{RESERVE_BYTES // MB} MiB and {RESERVE_INODES} inodes alk keeps for its own "
                "files; nothing was started: free some space, then resume the run "
                "(alk run --resume)")

    def watch(self, kill: Callable[[], None], writer: Any, sandboxed: bool) -> None:
        """Samples on a thread until `stop`; `kill` ends the worker (from that thread)."""
        self._kill, self._writer, self._sandboxed = kill, writer, sandboxed
        self._thread = threading.Thread(target=self._run, name="alk-disk", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ends the sampling: before the worker's descriptors are closed, `kill` with them."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._kill = None

    def close(self) -> None:
        self.stop()
        for fd in (self._ws, self._out):
            if fd >= 0:
                os.close(fd)
        self._ws = self._out = -1

    def judge(self) -> Judged:
        """After the worker ended and `stop`: what the disk says of the repeat. Where the
        disk is full, the workspace is emptied then, so that alk can write the rest."""
        try:
            if self._breach is None and not self._failed:
                self._sample(final=True)
        except OSError:
            pass  # nothing more to learn of the disk: judged on what was seen
        finally:
            self.close()
        error = getattr(self._writer, "write_error", None)
        if self._breach is None:
            if error is not None:
                return Judged(harness_error=f"{self._writer.path}: cannot be written "
                                            f"({error.strerror or error})")
            return Judged()
        breach = dict(self._breach)
        if breach.pop("full"):
            breach["emptied"] = remove_tree(Path(self.workspace)) == 0
            try:
                os.mkdir(self.workspace, 0o700)  # empty: the checks still look in it
            except OSError:
                pass
        return Judged(breach=breach, limit_mb=max(1, self.limit // MB))

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                if self._sample(final=False):
                    return
            except OSError:
                return  # the workspace went away under the watch: the runner is ending

    def _sample(self, final: bool) -> bool:
        """One look; True when the watch is over (a breach, or alk's own failed write)."""
        error = getattr(self._writer, "write_error", None)
        if error is not None:
            return self._judge_write(error)
        now = self._clock()
        free = _free(self._ws)[0]
        lost = self._free_at_walk - free  # what the disk lost since the last walk
        due = lost >= self.limit - self.used or now - self._walked_at >= WALK_EVERY_S
        if not due or (now < self._next_walk and not final):
            return False
        self.used, whole = tree_bytes(Path(self.workspace), above=self.limit)
        ended = self._clock()
        self._free_at_walk, self._walked_at = free, ended
        self._next_walk = ended + WALK_COST_FACTOR * (ended - now)
        if self.used > self.limit:
            return self._breached("the workspace grew past the limit")
        if not whole:
            return self._breached("the workspace holds too many folders to measure")
        return False

    def _judge_write(self, error: OSError) -> bool:
        """alk's own write failed: on a full disk the worker may have filled, the repeat's."""
        if error.errno not in FULL or (self._sandboxed and not self.same_disk):
            self._failed = True
            self._end()  # the repeat is void: its worker need not go on
            return True
        self.used = tree_bytes(Path(self.workspace), above=self.limit)[0]
        return self._breached(f"the disk filled: alk's write failed "
                              f"({error.strerror or error})", full=True)

    def _breached(self, why: str, full: bool = False) -> bool:
        free = _free(self._ws)
        self._breach = {"full": full or _short(free, 0), "why": why,
                        "workspace_mb": math.ceil(self.used * 10 / MB) / 10,
                        "limit_mb": max(1, self.limit // MB), "disk_free_mb": free[0] // MB,
                        "disk_free_at_start_mb": self.free_at_start[0] // MB}
        self._end()
        return True

    def _end(self) -> None:
        if self._kill is not None:
            self._kill()
            self._kill = None


def _free(fd: int) -> tuple[int, int]:
    """(bytes, inodes) an unprivileged process may still use on the file system of `fd`;
    inodes are counted as plenty on file systems that have no fixed number of them."""
    st = os.fstatvfs(fd)
    return st.f_bavail * st.f_frsize, st.f_favail if st.f_files else 1 << 62


def _short(free: tuple[int, int], own: int) -> bool:
    return free[0] + own < RESERVE_BYTES or free[1] < RESERVE_INODES
