"""Remove a folder tree whatever its shape: no recursion, a few file descriptors at most.

A worker shapes its workspace as it likes, and `shutil.rmtree` recurses and holds a descriptor
per level: on Python 3.11 a chain of ~1,000 folders makes it raise RecursionError (crashing
alk), and under a low RLIMIT_NOFILE it gives up silently and leaves the tree behind.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# O_NOFOLLOW: a symlink is never entered, wherever it points; it is unlinked like a file.
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# The folder holding the tree is only searched, never listed (O_PATH where there is one).
_TOP = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
# Another pass runs only while the last one removed something yet left some (entries made
# meanwhile, a folder moved under the walk); a tree that keeps changing is not chased for ever.
_PASSES = 3


def remove_tree(path: Path) -> int:
    """Remove `path` and everything under it, never following a symlink. Returns how many
    entries are left (folders still holding some included): 0 when it is gone or never was.

    Only `path`'s parent is opened by name; all below is reached by descriptor, so neither
    depth nor path length matter. Folders in the tree are made u+rwx where they need it.
    Raises for nothing the tree holds; only a `path` without a final name is an error."""
    path = Path(path)
    if path.name in ("", ".", ".."):
        raise ValueError(f"remove_tree needs a path that ends in a name, not {str(path)!r}")
    try:
        top = os.open(path.parent, _TOP)
    except OSError:
        return 1 if os.path.lexists(path) else 0
    try:
        left = 0
        for _ in range(_PASSES):
            sweep = _Sweep(top)
            sweep.run(path.name)
            left = sweep.left
            if not sweep.lost and (left == 0 or sweep.removed == 0):
                break
        return max(left, 1) if _exists(top, path.name) else 0
    finally:
        os.close(top)


@dataclass
class _Frame:
    """A folder on the way down: its name in its parent, its identity, its subfolders to do."""

    name: str
    dev: int
    ino: int
    subfolders: list[str]


@dataclass
class _Sweep:
    """One depth-first pass that holds `top` and one or two folders' descriptors at a time,
    and the names on the way down (memory grows with depth, descriptors do not)."""

    top: int
    left: int = 0
    removed: int = 0
    lost: bool = False  # a folder was moved under the walk, which stopped there
    stack: list[_Frame] = field(default_factory=list)

    def run(self, name: str) -> None:
        fd = self._enter(self.top, name)
        while fd is not None:
            try:
                next_fd = self._step(fd)
            finally:
                os.close(fd)
            fd = next_fd

    def _step(self, fd: int) -> int | None:
        """From folder `fd` (the top of the stack), go down into its next subfolder, or remove
        it and go up: the descriptor to go on from, None when the pass is over."""
        frame = self.stack[-1]
        while frame.subfolders:
            child = self._enter(fd, frame.subfolders.pop())
            if child is not None:
                return child
        if len(self.stack) == 1:
            self._remove(self.top, frame.name, os.rmdir)
            return None
        try:
            parent = os.open("..", _DIR, dir_fd=fd)
        except OSError:
            return self._stop()
        self.stack.pop()
        above = self.stack[-1]
        try:
            st = os.fstat(parent)
        except OSError:
            st = None
        # ".." is wherever the folder is now: moved (out of the tree, say), its new parent is
        # not ours to empty, so the pass stops here and the next one starts again from the top.
        if st is None or (st.st_dev, st.st_ino) != (above.dev, above.ino):
            os.close(parent)
            return self._stop()
        self._remove(parent, frame.name, os.rmdir)
        return parent

    def _stop(self) -> None:
        self.left += len(self.stack)
        self.lost = True

    def _enter(self, parent: int, name: str) -> int | None:
        """Open folder `name`, make it u+rwx, unlink all in it but subfolders, and push it.
        None when it is no folder (then it is unlinked) or cannot be opened."""
        fd = self._open(parent, name)
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
            mode = stat.S_IMODE(st.st_mode)
            if mode & stat.S_IRWXU != stat.S_IRWXU:
                # Listing needs r, unlinking w and x (as root, this changes nothing needed).
                try:
                    os.fchmod(fd, mode | stat.S_IRWXU)
                except OSError:
                    pass
            self.stack.append(_Frame(name, st.st_dev, st.st_ino, self._clear(fd)))
        except OSError:
            os.close(fd)
            self.left += 1
            return None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open(self, parent: int, name: str) -> int | None:
        for may_chmod in (True, False):
            try:
                return os.open(name, _DIR, dir_fd=parent)
            except FileNotFoundError:
                return None
            except PermissionError:
                if may_chmod and _chmod_rwx(parent, name):
                    continue
                self.left += 1
                return None
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    # A file or a symlink, maybe swapped in for a folder since it was listed.
                    self._remove(parent, name, os.unlink)
                else:
                    self.left += 1
                return None
        return None

    def _clear(self, fd: int) -> list[str]:
        """Unlink every entry of folder `fd` but its subfolders, and return their names."""
        try:
            # Listed in full first: unlinking while reading a folder may make readdir skip some.
            with os.scandir(fd) as listing:
                entries = list(listing)
        except OSError:
            return []  # counted when the folder cannot be removed, if it is not empty
        subfolders = []
        for entry in entries:
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_folder = False
            if is_folder:
                subfolders.append(entry.name)
                continue
            try:
                os.unlink(entry.name, dir_fd=fd)
                self.removed += 1
            except FileNotFoundError:
                pass
            except IsADirectoryError:
                subfolders.append(entry.name)
            except OSError:
                self.left += 1
        return subfolders

    def _remove(self, parent: int, name: str, remove: Callable[..., None]) -> None:
        try:
            remove(name, dir_fd=parent)
            self.removed += 1
        except FileNotFoundError:
            pass
        except OSError:
            self.left += 1


def _chmod_rwx(parent: int, name: str) -> bool:
    """Make folder `name` u+rwx; False where that cannot be done without following a symlink."""
    try:
        # A symlink's own mode cannot change on Linux: Python raises ValueError (or
        # NotImplementedError where the C library cannot do it) instead of following it.
        os.chmod(name, stat.S_IRWXU, dir_fd=parent, follow_symlinks=False)
    except (OSError, ValueError, NotImplementedError):
        return False
    return True


def _exists(parent: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return False
    except OSError:
        pass  # there, though it cannot be looked at
    return True
