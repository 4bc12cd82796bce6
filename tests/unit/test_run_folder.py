"""The run's folder in the system's temporary folder (`make_run_folder`), which the resume of a
run killed with `kill -9` removes (`remove_left_folders`), and `tree_bytes`, which measures a
workspace whatever its shape."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from alk import cleanup
from alk.cleanup import (
    ENTRY_BYTES,
    RUN_MARKER,
    make_run_folder,
    release_run_folder,
    remove_left_folders,
    remove_tree,
    tree_bytes,
)


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def killed_run(temp: Path, run_id: str) -> Path:
    """A run folder made by an alk that was then killed with SIGKILL."""
    code = ("import os, sys, tempfile; tempfile.tempdir = sys.argv[1]\n"
            "from alk.cleanup import make_run_folder\n"
            "print(make_run_folder(sys.argv[2]), flush=True)\n"
            "os.kill(os.getpid(), 9)\n")
    done = subprocess.run([sys.executable, "-c", code, str(temp), run_id],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    return Path(done.stdout.strip())


def test_a_killed_runs_folder_is_removed_by_its_resume_and_by_nothing_else(temp: Path) -> None:
    left = killed_run(temp, "20250101T000000Z-aaaa")
    (left / "w-1").mkdir()
    other = killed_run(temp, "20250101T000000Z-bbbb")
    assert remove_left_folders("20250101T000000Z-aaaa") == 1
    assert not left.exists() and other.exists()


def test_a_living_runs_folder_is_never_removed(temp: Path) -> None:
    root = make_run_folder("run-1")
    try:
        assert (root / RUN_MARKER).read_text() == "run-1"
        assert remove_left_folders("run-1") == 0 and root.exists()
    finally:
        release_run_folder(root)
        remove_tree(root)


def test_a_kept_runs_folder_has_no_mark_and_stays(temp: Path) -> None:
    root = make_run_folder("run-1", keep=True)
    assert not (root / RUN_MARKER).exists()
    assert remove_left_folders("run-1") == 0 and root.exists()


def test_what_only_looks_like_a_run_folder_is_left_alone(temp: Path, tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.mkdir()
    (target / RUN_MARKER).write_text("run-1")
    (temp / "alk-link").symlink_to(target)  # a symlink is never followed
    stranger = temp / "alk-stranger"
    stranger.mkdir()
    (stranger / RUN_MARKER).write_text("run-1")
    if os.getuid() == 0:
        os.chown(stranger, 65534, 65534)  # another user's
    else:
        stranger.rmdir()
    assert remove_left_folders("run-1") == 0
    assert target.exists() and (temp / "alk-link").is_symlink()
    assert stranger.exists() or os.getuid() != 0


def test_tree_bytes_counts_as_du_does_and_at_least_a_block_an_entry(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "file").write_bytes(b"x" * 100_000)
    (tree / "empty").touch()
    (tree / "link").symlink_to("/usr")  # counted, never followed
    du = subprocess.run(["du", "-s", "-B1", str(tree)], capture_output=True, text=True)
    total, whole = tree_bytes(tree)
    assert whole and total >= 5 * ENTRY_BYTES + 100_000
    if du.returncode == 0:
        assert abs(total - int(du.stdout.split()[0])) <= 2 * ENTRY_BYTES


def test_tree_bytes_walks_a_deep_chain_and_stops_past_its_bound(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    total, whole = tree_bytes(tmp_path / "d")
    assert whole and total >= 3000 * ENTRY_BYTES
    total, whole = tree_bytes(tmp_path / "d", above=100 * ENTRY_BYTES)
    assert not whole and total <= 102 * ENTRY_BYTES
    remove_tree(tmp_path / "d")


def test_tree_bytes_stops_where_the_names_waiting_would_cost_too_much(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "HELD_NAME_BYTES", 1000)
    for number in range(200):
        (tmp_path / "wide" / f"folder-{number:04}").mkdir(parents=True)
    assert tree_bytes(tmp_path / "wide")[1] is False
    assert tree_bytes(tmp_path / "missing") == (0, True)
