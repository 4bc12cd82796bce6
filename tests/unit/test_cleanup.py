"""`remove_tree` on the trees a hostile worker can shape: deep, long, wide, linked, locked."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
import socket
import stat
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Callable, Iterator

import pytest

from alk.cleanup import remove_tree

NOBODY = 65534


@pytest.fixture(autouse=True)
def no_deep_tree_left(tmp_path: Path) -> Iterator[None]:
    """pytest removes old test folders with shutil.rmtree, which a deep chain left behind by a
    failing test would crash in a later session."""
    yield
    for entry in list(tmp_path.iterdir()):
        remove_tree(entry)


def chain(root: Path, depth: int, name: str = "d") -> None:
    """`root/name/name/...` `depth` deep with a file at the bottom, built by descriptor since
    the full path may be too long for the OS."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("leaf", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_files_soft_limit(at_least: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = at_least if hard == resource.RLIM_INFINITY else min(at_least, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
def test_a_5000_deep_chain_is_removed_where_shutil_rmtree_raises(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    chain(tree, 5000)
    if sys.version_info < (3, 12):
        # The motivating fact: 3.11's rmtree recurses once a level (later versions use a stack).
        # With enough descriptors it hits the recursion limit rather than EMFILE.
        with open_files_soft_limit(4096), pytest.raises(RecursionError):
            shutil.rmtree(tree, ignore_errors=True)
        assert tree.exists()
    assert remove_tree(tree) == 0
    assert not tree.exists()


def test_a_path_longer_than_path_max_is_removed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    name = "n" * 255
    chain(tree, 20, name)
    bottom = tree.joinpath(*[name] * 20, "leaf")
    assert len(os.fsencode(bottom)) > 4096
    with pytest.raises(OSError) as too_long:
        os.lstat(bottom)
    assert too_long.value.errno == errno.ENAMETOOLONG
    assert remove_tree(tree) == 0
    assert not tree.exists()


@pytest.mark.slow
def test_a_wide_folder_is_removed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "file").touch()
    for i in range(9000):  # hard links: many entries, made far faster than as many files
        os.link(tree / "file", tree / f"link{i}")
    for i in range(999):
        (tree / f"folder{i}").mkdir()
    (tree / "folder7" / "inner").touch()
    assert len(os.listdir(tree)) == 10_000
    assert remove_tree(tree) == 0
    assert not tree.exists()


def test_symlinks_are_unlinked_and_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "precious").write_text("keep me")
    (outside / "folder" / "precious").write_text("keep me too")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sibling").mkdir()
    (tree / "sibling" / "file").touch()
    (tree / "to_folder").symlink_to(outside)
    (tree / "sub" / "to_absolute").symlink_to(outside / "folder")
    (tree / "sub" / "to_file").symlink_to(outside / "precious")
    (tree / "sub" / "to_parent").symlink_to("../..")
    (tree / "sub" / "to_sibling").symlink_to("../sibling")
    (tree / "dangling").symlink_to("nowhere")
    assert remove_tree(tree) == 0
    assert not tree.exists()
    assert (outside / "precious").read_text() == "keep me"
    assert (outside / "folder" / "precious").read_text() == "keep me too"


def test_a_symlink_given_as_the_tree_is_unlinked_not_followed(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "precious").touch()
    (tmp_path / "link").symlink_to("target")
    assert remove_tree(tmp_path / "link") == 0
    assert not (tmp_path / "link").is_symlink()
    assert (tmp_path / "target" / "precious").exists()


def test_a_symlink_loop_is_removed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "deeper").mkdir(parents=True)
    (tree / "a").symlink_to("b")
    (tree / "b").symlink_to("a")
    (tree / "self").symlink_to("self")
    (tree / "deeper" / "here").symlink_to(".")
    (tree / "deeper" / "root").symlink_to(tree)
    assert remove_tree(tree) == 0
    assert not tree.exists()
    assert tmp_path.exists()


def as_unprivileged(cwd: Path, action: Callable[[], int]) -> int:
    """`action()`'s result in a child process in `cwd`: as user nobody when the tests run as
    root (for whom no mode forbids anything), as the same user otherwise."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 255
        try:
            os.chdir(cwd)  # before dropping root: tmp_path's ancestors may be closed to nobody
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            code = min(action(), 250)
        except BaseException:
            os.write(2, traceback.format_exc().encode())
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_folders_whose_modes_forbid_listing_or_removing_are_opened_up(tmp_path: Path) -> None:
    base = tmp_path / "base"
    tree = base / "tree"
    modes = (0o000, 0o500, 0o555, 0o300, 0o600)
    for mode in modes:
        folder = tree / f"mode{mode:03o}"
        (folder / "inner").mkdir(parents=True)
        (folder / "inner" / "file").write_text("x")
        (folder / "file").write_text("x")
        (folder / "file").chmod(0o444)
    (tree / "file").write_text("x")
    if os.geteuid() == 0:
        for path in (base, *base.rglob("*")):
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    for mode in modes:
        (tree / f"mode{mode:03o}" / "inner").chmod(mode)
        (tree / f"mode{mode:03o}").chmod(mode)
    tree.chmod(0o555)  # as alk leaves its read-only folders

    def remove() -> int:
        try:
            os.listdir("tree/mode000")
        except PermissionError:
            return remove_tree(Path("tree"))
        return 251  # the modes forbid nothing: this test would prove nothing

    assert as_unprivileged(base, remove) == 0
    assert not tree.exists()


def test_fifos_sockets_and_odd_names_are_unlinked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    os.mkfifo(tree / "fifo")
    os.mkfifo(tree / "sub" / "fifo")
    (tree / os.fsdecode(b"not-utf8-\xff")).touch()
    monkeypatch.chdir(tree)  # a socket's path must be short
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("socket")
    monkeypatch.chdir(tmp_path)
    assert stat.S_ISSOCK(os.lstat(tree / "socket").st_mode)
    assert remove_tree(tree) == 0
    assert not tree.exists()


def test_a_missing_path_or_a_plain_file(tmp_path: Path) -> None:
    assert remove_tree(tmp_path / "missing") == 0
    assert remove_tree(tmp_path / "missing" / "below") == 0
    (tmp_path / "file").touch()
    assert remove_tree(tmp_path / "file") == 0
    assert not (tmp_path / "file").exists()


def test_a_path_without_a_final_name_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        remove_tree(tmp_path / "..")


@pytest.mark.slow
def test_a_deep_chain_is_removed_with_64_open_files_at_most(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    chain(tree, 3000)
    script = ("import resource, sys\n"
              "from pathlib import Path\n"
              "from alk.cleanup import remove_tree\n"
              "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
              "print(remove_tree(Path(sys.argv[1])))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tree)],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "0", "")
    assert not tree.exists()


def test_what_cannot_be_removed_is_counted_not_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "tree"
    (tree / "folder").mkdir(parents=True)
    (tree / "folder" / "stuck").touch()
    (tree / "broken").touch()
    (tree / "fine").touch()
    unlink = os.unlink
    failures = {"stuck": errno.EPERM, "broken": errno.EIO}

    def failing_unlink(name: str, *, dir_fd: int | None = None) -> None:
        if name in failures:
            raise OSError(failures[name], os.strerror(failures[name]), name)
        unlink(name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", failing_unlink)
    # stuck, broken, and the two folders still holding them
    assert remove_tree(tree) == 4
    monkeypatch.undo()
    assert sorted(p.name for p in tree.rglob("*")) == ["broken", "folder", "stuck"]


scandir = os.scandir  # the real one, for the tests that wrap it


class Listing:
    """What `os.scandir(fd)` gives, listed at once, then `after(fd)` is called."""

    def __init__(self, fd: int, after: Callable[[int], None]) -> None:
        with scandir(fd) as listing:
            self.entries = list(listing)
        after(fd)

    def __enter__(self) -> Iterator[os.DirEntry[str]]:
        return iter(self.entries)

    def __exit__(self, *exc: object) -> None:
        pass



def test_entries_that_vanish_meanwhile_are_no_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "tree"
    (tree / "folder").mkdir(parents=True)
    (tree / "file").touch()
    top = os.lstat(tree).st_ino

    def vanish(fd: int) -> None:
        if os.fstat(fd).st_ino == top:
            (tree / "file").unlink()
            (tree / "folder").rmdir()

    monkeypatch.setattr(os, "scandir", lambda fd: Listing(fd, vanish))
    assert remove_tree(tree) == 0
    assert not tree.exists()


def test_a_folder_moved_out_meanwhile_is_not_followed_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "tree"
    (tree / "a" / "b" / "c").mkdir(parents=True)
    (tree / "a" / "b" / "c" / "file").touch()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").touch()
    c = os.lstat(tree / "a" / "b" / "c").st_ino

    def move(fd: int) -> None:
        if os.fstat(fd).st_ino == c and (tree / "a" / "b").exists():
            # Once the walk is in c, b goes elsewhere: going up from b would land there.
            (tree / "a" / "b").rename(elsewhere / "b")

    monkeypatch.setattr(os, "scandir", lambda fd: Listing(fd, move))
    assert remove_tree(tree) == 0
    assert not tree.exists()
    # b now belongs to elsewhere: neither it nor its new siblings are removed.
    assert sorted(p.name for p in elsewhere.iterdir()) == ["b", "keep"]


def test_a_folder_swapped_for_a_symlink_after_listing_is_not_entered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "tree"
    (tree / "folder").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").touch()
    top = os.lstat(tree).st_ino

    def swap(fd: int) -> None:
        if os.fstat(fd).st_ino == top and (tree / "folder").is_dir():
            # Listed as a folder, a symlink by the time the walk opens it.
            (tree / "folder").rmdir()
            (tree / "folder").symlink_to(outside)

    monkeypatch.setattr(os, "scandir", lambda fd: Listing(fd, swap))
    assert remove_tree(tree) == 0
    assert not tree.exists()
    assert (outside / "precious").exists()
