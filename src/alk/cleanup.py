"""Remove or measure a folder tree whatever its shape: no recursion, a few descriptors at most;
and the run's folder in the system's temporary folder, which a killed run's resume removes.

A worker shapes its workspace as it likes, and `shutil.rmtree` recurses and holds a descriptor
per level: on Python 3.11 a chain of ~1,000 folders makes it raise RecursionError (crashing
alk), and under a low RLIMIT_NOFILE it gives up silently and leaves the tree behind.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
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
        _go(self._enter(self.top, name), self._step)

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


def _go(fd: int | None, step: Callable[[int], int | None]) -> None:
    """From folder to folder, each one's descriptor closed once `step` has opened the next."""
    while fd is not None:
        try:
            next_fd = step(fd)
        finally:
            os.close(fd)
        fd = next_fd


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


# -- measuring ----------------------------------------------------------------------------------

# An entry takes at least a block on disk (and an inode): counted so, a tree of empty files is
# not free, and a walk that stops past a limit visits at most limit / ENTRY_BYTES entries.
ENTRY_BYTES = 4096
# The names of folders still to visit are held in memory: past this many bytes of them, a walk
# stops (the tree is too wide to measure within alk's memory).
HELD_NAME_BYTES = 4 * 1024 * 1024


def tree_bytes(path: Path, above: int | None = None) -> tuple[int, bool]:
    """What the tree at `path` takes on disk, as du counts it (every entry's blocks, at least
    ENTRY_BYTES each; a symlink is counted, never followed): (bytes, whole). The walk stops
    once past `above`, or when the folders waiting hold more than HELD_NAME_BYTES of names:
    `whole` is False then. Where the tree moves under the walk, it counts what it reached."""
    path = Path(path)
    try:
        top = os.open(path.parent, _TOP)
    except OSError:
        return 0, True
    walk = _Measure(top, above)
    try:
        walk.run(path.name)
    finally:
        os.close(top)
    return walk.total, walk.whole


@dataclass
class _Measure:
    """A depth-first walk holding one or two folders' descriptors at a time, going up through
    `..` and checking that it came back to the folder it left."""

    top: int
    above: int | None
    total: int = 0
    whole: bool = True
    held: int = 0
    stack: list[_Frame] = field(default_factory=list)

    def run(self, name: str) -> None:
        try:
            st = os.lstat(name, dir_fd=self.top)
        except OSError:
            return
        self._count(st)
        if stat.S_ISDIR(st.st_mode):
            _go(self._enter(self.top, name), self._step)

    def _step(self, fd: int) -> int | None:
        frame = self.stack[-1]
        while frame.subfolders and self.whole:
            name = frame.subfolders.pop()
            self.held -= len(name)
            child = self._enter(fd, name)
            if child is not None:
                return child
        if len(self.stack) == 1 or not self.whole:
            return None
        self.stack.pop()
        above = self.stack[-1]
        try:
            parent = os.open("..", _DIR, dir_fd=fd)
        except OSError:
            return None
        st = os.fstat(parent)
        if (st.st_dev, st.st_ino) != (above.dev, above.ino):
            os.close(parent)  # moved: what was reached is counted, the walk ends here
            return None
        return parent

    def _enter(self, parent: int, name: str) -> int | None:
        try:
            fd = os.open(name, _DIR, dir_fd=parent)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            subfolders = self._list(fd)
        except OSError:
            os.close(fd)
            return None
        self.stack.append(_Frame(name, st.st_dev, st.st_ino, subfolders))
        return fd

    def _list(self, fd: int) -> list[str]:
        """Counts every entry of folder `fd` and returns its subfolders' names."""
        subfolders: list[str] = []
        with os.scandir(fd) as listing:
            for entry in listing:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                self._count(st)
                if stat.S_ISDIR(st.st_mode):
                    subfolders.append(entry.name)
                    self.held += len(entry.name)
                if not self.whole:
                    break
        return subfolders

    def _count(self, st: os.stat_result) -> None:
        self.total += max(getattr(st, "st_blocks", 0) * 512, ENTRY_BYTES)
        if (self.above is not None and self.total > self.above) or self.held > HELD_NAME_BYTES:
            self.whole = False


# -- the run's folder ---------------------------------------------------------------------------

RUN_FOLDER_PREFIX = "alk-"
# In the run's folder: the run's id, locked (flock) for as long as the alk that made it runs.
RUN_MARKER = ".alk-run"
_HELD: dict[str, int] = {}


def make_run_folder(run_id: str, keep: bool = False) -> Path:
    """A new folder for a run's workspaces in the system's temporary folder. Unless it is
    kept (`--keep-workspaces`), it is marked with the run's id under a lock this process holds
    until `release_run_folder`: a killed alk's lock is gone, and its run's resume removes it."""
    root = Path(tempfile.mkdtemp(prefix=RUN_FOLDER_PREFIX))
    if keep:
        return root
    fd = os.open(root / RUN_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # before the id is in it: no one reads it unlocked
    os.write(fd, run_id.encode("utf-8"))
    _HELD[str(root)] = fd
    return root


def release_run_folder(root: Path) -> None:
    fd = _HELD.pop(str(root), None)
    if fd is not None:
        os.close(fd)


def remove_left_folders(run_id: str) -> int:
    """Removes the folders an alk killed while running `run_id` left in the system's temporary
    folder: alk's user's own, marked with that id, that no living alk holds. Returns how many."""
    removed = 0
    base = tempfile.gettempdir()
    try:
        with os.scandir(base) as listing:
            candidates = [entry for entry in listing if entry.name.startswith(RUN_FOLDER_PREFIX)]
    except OSError:
        return 0
    for entry in candidates:
        try:
            if not entry.is_dir(follow_symlinks=False) or \
                    entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            fd = os.open(os.path.join(entry.path, RUN_MARKER),
                         os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if os.read(fd, 1024) != run_id.encode("utf-8"):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a living alk's holds: refused
            removed += remove_tree(Path(entry.path)) == 0  # under the lock, taken by none
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed
