"""A transcript whose writes fail (a full disk): never a torn line, and what could not be
written is kept for `close`, which writes it once there is room again."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from alk.redaction import Redactor
from alk.transcript import writer as writer_module
from alk.transcript.writer import FLUSH_BYTES, TranscriptWriter


class Disk:
    """os.pwrite as a disk with `room` bytes left: a write past it is cut short (as the kernel
    does), the next one fails with ENOSPC."""

    def __init__(self, room: int) -> None:
        self.room = room
        self._pwrite = os.pwrite

    def pwrite(self, fd: int, data: Any, offset: int) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        data = bytes(data)[:self.room]
        written = self._pwrite(fd, data, offset)
        self.room -= written
        return written


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    disk = Disk(room=0)
    monkeypatch.setattr(writer_module.os, "pwrite", disk.pwrite)
    return disk


def strict_lines(path: Path) -> list[dict[str, Any]]:
    def refuse(word: str) -> None:
        raise AssertionError(f"not JSON: {word}")
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), f"a torn last line: {data[-80:]!r}"
    return [json.loads(line, parse_constant=refuse) for line in data.splitlines()]


def fill(log: TranscriptWriter, events: int) -> None:
    for number in range(events):
        log.worker("agent", "note", {"n": number, "text": "x" * 500})


def test_a_write_cut_short_by_a_full_disk_leaves_only_whole_lines(tmp_path: Path,
                                                                  disk: Disk) -> None:
    disk.room = FLUSH_BYTES + 777  # the second write is cut in the middle of a line
    log = TranscriptWriter(tmp_path / "t.jsonl", 8 * 1024 * 1024, Redactor(), clock=lambda: 0.0)
    fill(log, 3 * FLUSH_BYTES // 500)
    log.harness("exit", {"exit_code": 0})  # flushed at once: fails, and is kept
    assert log.write_error is not None and log.write_error.errno == errno.ENOSPC
    written = strict_lines(log.path)
    assert written and os.path.getsize(log.path) <= FLUSH_BYTES + 777
    # Room again (the workspace that filled the disk is gone): close writes the rest.
    disk.room = 1 << 30
    digest = log.close()
    events = strict_lines(log.path)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "exit" and events[:len(written)] == written
    assert digest == hashlib.sha256(log.path.read_bytes()).hexdigest()


def test_a_close_that_still_cannot_write_raises_and_leaves_whole_lines(tmp_path: Path,
                                                                       disk: Disk) -> None:
    disk.room = 1000
    log = TranscriptWriter(tmp_path / "t.jsonl", 8 * 1024 * 1024, Redactor(), clock=lambda: 0.0)
    log.harness("spawn", {"pid": 1})
    fill(log, 50)
    with pytest.raises(OSError):
        log.close()
    log.abandon()
    assert [e["type"] for e in strict_lines(log.path)] == ["spawn"]


def test_what_the_tail_cannot_hold_after_a_failure_is_counted_by_the_marker(
        tmp_path: Path, disk: Disk) -> None:
    disk.room = 4096
    cap = 256 * 1024
    log = TranscriptWriter(tmp_path / "t.jsonl", cap, Redactor(), clock=lambda: 0.0)
    fill(log, 2000)  # a megabyte, past the tail's share of the cap
    disk.room = 1 << 30
    log.close()
    events = strict_lines(log.path)
    [marker] = [e for e in events if e["type"] == "truncated"]
    low, high = marker["payload"]["seqs"]
    kept = [e["seq"] for e in events if e["type"] != "truncated"]
    assert sorted(kept + list(range(low, high + 1))) == list(range(1, 2001))
    assert os.path.getsize(log.path) <= cap


def test_stderr_after_a_failure_goes_to_the_tail(tmp_path: Path, disk: Disk) -> None:
    disk.room = 0
    log = TranscriptWriter(tmp_path / "t.jsonl", 1024 * 1024, Redactor(), clock=lambda: 0.0)
    log.harness("spawn", {"pid": 1})  # fails: nothing on disk yet
    assert log.head_full
    log.stderr_block(b"one\ntwo\n", 2)
    log.stderr_lines([(b"three", False)])
    disk.room = 1 << 30
    log.close()
    assert [e["payload"].get("text") for e in strict_lines(log.path)] == [
        None, "one", "two", "three"]


@pytest.mark.parametrize("room", [0, 5000, FLUSH_BYTES - 1, FLUSH_BYTES + 300, 3 * FLUSH_BYTES,
                                  1 << 30])
def test_stderr_lines_at_once_fail_and_are_kept_as_one_at_a_time(tmp_path: Path, disk: Disk,
                                                                 room: int) -> None:
    batch = [(b"w" * (n * 37 % 900) + b" tok-secret-1234", False) for n in range(300)]
    files = []
    for at_once in (False, True):
        disk.room = room
        log = TranscriptWriter(tmp_path / f"{at_once}.jsonl", 1024 * 1024,
                               Redactor(["tok-secret-1234"]), clock=lambda: 0.0)
        for part in [batch] * 8 if at_once else [[line] for line in batch * 8]:
            log.stderr_lines(part)
        assert (log.write_error is None) == (room == 1 << 30)
        disk.room = 1 << 30
        log.close()
        files.append(log.path.read_bytes())
    assert files[0] == files[1]
    assert b"tok-secret" not in files[0]
