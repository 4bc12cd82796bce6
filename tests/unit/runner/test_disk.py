"""alk.runner.disk: a repeat's workspace measured against `disk_mb` and the disk's room, and
whose a full disk is."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from alk.runner import disk as disk_module
from alk.runner.disk import MB, RESERVE_BYTES, DiskWatch


class Kill:
    def __init__(self) -> None:
        self.called = threading.Event()

    def __call__(self) -> None:
        self.called.set()


def folders(tmp_path: Path) -> tuple[Path, Path]:
    workspace, output = tmp_path / "w", tmp_path / "transcripts"
    workspace.mkdir()
    output.mkdir()
    return workspace, output


def writer(tmp_path: Path, error: OSError | None = None) -> SimpleNamespace:
    return SimpleNamespace(write_error=error, path=tmp_path / "transcripts" / "t.jsonl")


def test_a_workspace_past_disk_mb_ends_the_worker_as_a_breach(tmp_path: Path) -> None:
    workspace, output = folders(tmp_path)
    watch = DiskWatch(str(workspace), output, limit_mb=2)
    kill = Kill()
    watch.watch(kill, writer(tmp_path), sandboxed=True)
    for number in range(4):
        (workspace / f"part{number}").write_bytes(b"x" * MB)  # each file under any rlimit
    assert kill.called.wait(5), "the worker was not ended"
    judged = watch.judge()
    assert judged.limit_mb == 2 and judged.harness_error is None
    assert judged.breach["why"] == "the workspace grew past the limit"
    assert judged.breach["workspace_mb"] > 2
    assert "emptied" not in judged.breach  # the disk has room: the workspace stays for checks
    assert len(list(workspace.iterdir())) == 4


def test_a_workspace_within_its_limit_is_left_alone(tmp_path: Path) -> None:
    workspace, output = folders(tmp_path)
    watch = DiskWatch(str(workspace), output, limit_mb=8)
    kill = Kill()
    watch.watch(kill, writer(tmp_path), sandboxed=True)
    (workspace / "small").write_bytes(b"x" * MB)
    assert not kill.called.wait(0.3)
    assert watch.judge().breach is None


def test_many_empty_files_count_a_block_each(tmp_path: Path) -> None:
    workspace, output = folders(tmp_path)
    for number in range(600):  # 600 entries of 4 KiB: past 2 MiB, with no byte written
        (workspace / str(number)).touch()
    watch = DiskWatch(str(workspace), output, limit_mb=2)
    watch.stop()
    assert watch.judge().breach is not None


def test_the_limit_never_leaves_the_disk_less_than_alks_reserve(tmp_path: Path,
                                                               monkeypatch) -> None:
    workspace, output = folders(tmp_path)
    monkeypatch.setattr(disk_module, "_free", lambda fd: (RESERVE_BYTES + 10 * MB, 1 << 20))
    watch = DiskWatch(str(workspace), output, limit_mb=4096)
    assert not watch.short_before and watch.limit <= 10 * MB + watch.used
    watch.close()


def test_a_disk_full_before_the_repeat_is_alks(tmp_path: Path, monkeypatch) -> None:
    workspace, output = folders(tmp_path)
    monkeypatch.setattr(disk_module, "_free", lambda fd: (RESERVE_BYTES - MB, 1 << 20))
    watch = DiskWatch(str(workspace), output, limit_mb=4096)
    assert watch.short_before
    assert "before the repeat began" in watch.describe_short()
    watch.close()
    monkeypatch.setattr(disk_module, "_free", lambda fd: (1 << 40, 10))  # out of inodes
    watch = DiskWatch(str(workspace), output, limit_mb=4096)
    assert watch.short_before
    watch.close()


def test_alks_write_failing_on_a_full_disk_is_the_repeats_and_empties_its_workspace(
        tmp_path: Path) -> None:
    workspace, output = folders(tmp_path)
    (workspace / "bulk").write_bytes(b"x" * MB)
    watch = DiskWatch(str(workspace), output, limit_mb=4096)
    kill = Kill()
    full = OSError(errno.ENOSPC, "No space left on device")
    watch.watch(kill, writer(tmp_path, full), sandboxed=True)
    assert kill.called.wait(5)
    judged = watch.judge()
    assert judged.breach["why"].startswith("the disk filled")
    assert judged.breach["emptied"] is True and list(workspace.iterdir()) == []


@pytest.mark.parametrize("error, sandboxed, same_disk", [
    (OSError(errno.EIO, "Input/output error"), True, True),
    (OSError(errno.ENOSPC, "No space left on device"), True, False),
])
def test_a_write_the_worker_cannot_have_made_fail_is_alks(tmp_path: Path, error, sandboxed,
                                                          same_disk) -> None:
    workspace, output = folders(tmp_path)
    watch = DiskWatch(str(workspace), output, limit_mb=4096)
    watch.same_disk = same_disk  # in the sandbox the worker writes only its workspace's disk
    kill = Kill()
    watch.watch(kill, writer(tmp_path, error), sandboxed=sandboxed)
    assert kill.called.wait(5)  # the repeat is void: its worker need not go on
    judged = watch.judge()
    assert judged.breach is None and "cannot be written" in judged.harness_error
