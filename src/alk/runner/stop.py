"""How a run stops all its repeats at once: `Stop`, set by the thread that got Ctrl-C.

A signal reaches only Python's main thread, while repeats run in threads of their own: each
repeat's loop watches this pipe beside its worker's, wakes when it is set, and raises `Stopped`,
which ends its worker's whole group (as Ctrl-C did when a repeat ran in the main thread).
"""

from __future__ import annotations

import os
import threading


class Stopped(KeyboardInterrupt):
    """Raised in a repeat's thread when its run stops; handled as Ctrl-C is."""


class Stop:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)

    @property
    def fd(self) -> int:
        """Readable once the run is stopping (what a selector waits on)."""
        return self._read

    def set(self) -> None:
        self._event.set()
        if self._write < 0:
            return
        try:
            os.write(self._write, b"x")
        except (BlockingIOError, OSError):
            pass  # already readable, or closed at the very end: the event is what counts

    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raises `Stopped` once the run is stopping (called between steps of a repeat)."""
        if self._event.is_set():
            raise Stopped

    def close(self) -> None:
        self._event.set()  # a late `set` or `check` still sees the run as stopping
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
        # Never written to again: the numbers may belong to another file by then.
        self._read = self._write = -1
