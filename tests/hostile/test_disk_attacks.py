"""A full disk is not a way out: through the real CLI, a worker that fills the disk alk writes
on, one that grows its workspace without end, and a run killed with `kill -9` and resumed.

A worker that fills the disk its workspace shares with alk's output makes alk's own writes
fail: the repeat must still be a scored failure (`disk_limit`), never void, and every line of
every transcript strict JSON. A run killed with SIGKILL leaves its temporary folder behind:
its `--resume` removes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from alk.cleanup import remove_tree

WORKER = Path(__file__).resolve().with_name("disk_worker.py")
DISK = ("framework_runtime", "disk_limit")
# Room for alk's reserve (64 MiB) and a workspace of up to 95 MiB: two workers of FILL_MB
# each are within it, and fill the disk together.
DISK_MB = 160
FILL_MB = 88
# How many times the resume test looks for its first repeat before it gives up.
LOOKS = 1200


def lane_text(attack: str, *extra: str, limits: str = "", timeout_s: float = 30) -> str:
    argv = ", ".join(f'"{arg}"' for arg in ("{python}", str(WORKER), attack, *extra))
    return (f'framework = "hostile"\nversion = ">=1"\ncommand = [{argv}]\n'
            f"timeout_s = {timeout_s}\ntranscript_cap_mb = 1\n{limits}\n"
            '[[scenarios]]\nid = "attack"\ntask = "t"\n'
            '[scenarios.expect]\nstop_reason = "accepted"\noutput_equals = "done"\n')


def alk(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "alk", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=environment(cwd))


def environment(cwd: Path) -> dict[str, str]:
    (cwd / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(cwd / "tmp"), "COLUMNS": "120"}


def strict_transcripts(cwd: Path) -> list[dict]:
    """Every line of every transcript: whole, strict JSON (no NaN, no Infinity)."""
    def refuse(word: str) -> None:
        raise AssertionError(f"not strict JSON: {word}")
    events = []
    paths = list((cwd / "transcripts").rglob("*.jsonl"))
    assert paths, "no transcript was written"
    for path in paths:
        data = path.read_bytes()
        assert data.endswith(b"\n"), f"{path} ends in a torn line: {data[-120:]!r}"
        for number, line in enumerate(data.splitlines(), 1):
            try:
                events.append(json.loads(line.decode("utf-8"), parse_constant=refuse))
            except ValueError as exc:
                raise AssertionError(f"{path}:{number} is not JSON ({exc}): {line[:120]!r}")
    return events


def the_repeat(cwd: Path) -> tuple[dict, dict]:
    [result] = list((cwd / "reports").glob("*/result.json"))
    document = json.loads(result.read_text())
    [repeat] = document["scenarios"][0]["repeats"]
    return document, repeat


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a disk of its own of DISK_MB (a tmpfs): alk's output, its temporary folder
    and the workspaces on it, as on a machine whose one disk a worker can fill."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if os.getuid() != 0:
        pytest.skip("mounting a small disk needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0755",
                              "tmpfs", str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small disk here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_workers_that_fill_the_disk_alk_writes_on_are_scored_failures(small_disk: Path,
                                                                      process_watch) -> None:
    # Two at once, each within what the disk's room allows it, together more than the disk:
    # alk's own writes fail on the full disk.
    (small_disk / "lanes").mkdir()
    lane = small_disk / "lanes" / "fill.toml"
    lane.write_text(lane_text("fill", str(FILL_MB)))
    with process_watch(small_disk / "tmp") as watch:
        done = alk(small_disk, "run", "--lane", str(lane), "-n", "2", "-j", "2")
    [result] = list((small_disk / "reports").glob("*/result.json"))
    document = json.loads(result.read_text())
    repeats = document["scenarios"][0]["repeats"]
    # Whichever fills the disk is the repeat's disk_limit; the other one finds the room the
    # first one's emptied workspace gave back when it ended (how they interleave is the
    # machine's), and passes or fails on the disk too. Never void, either of them.
    found = [(r["outcome"], r["cause"]) for r in repeats]
    assert DISK in found and set(found) <= {DISK, ("pass", "passed")}, (
        [r["detail"] for r in repeats], done.stderr[-2000:])
    assert done.returncode == 1, done.stderr[-2000:]
    events = strict_transcripts(small_disk)
    limits = [e["payload"] for e in events if e["type"] == "disk_limit"]
    assert len(limits) == found.count(DISK) and all(
        e["source"] == "harness" for e in events if e["type"] == "disk_limit")
    for repeat in repeats:  # closed once the workspace was emptied: whole, and as recorded
        data = (small_disk / repeat["transcript"]).read_bytes()
        assert repeat["sha256"] == hashlib.sha256(data).hexdigest()
    assert document["status"] == "complete"
    assert watch.left() == [], "a process of the repeat outlived it"
    assert list((small_disk / "tmp").iterdir()) == [], "alk left its folders behind"


def test_a_workspace_that_grows_without_end_stops_at_disk_mb(tmp_path: Path) -> None:
    lane = tmp_path / "grow.toml"
    lane.write_text(lane_text("grow", limits="[limits]\ndisk_mb = 16\n"))
    done = alk(tmp_path, "run", "--lane", str(lane), "-n", "1")
    document, repeat = the_repeat(tmp_path)
    assert (repeat["outcome"], repeat["cause"]) == DISK, (repeat["detail"], done.stderr[-2000:])
    assert "limit disk_mb = 16" in repeat["detail"]
    assert document["settings"]["limits"]["disk_mb"] == 16
    [limit] = [e for e in strict_transcripts(tmp_path) if e["type"] == "disk_limit"]
    # A MiB every 10 ms, looked at every 50 ms: stopped some MiB past its limit (how many
    # depends on how busy the machine is), far short of what it would write unchecked.
    assert 16 < limit["payload"]["workspace_mb"] < 64, limit
    assert list((tmp_path / "tmp").iterdir()) == []


def test_the_resume_of_a_run_killed_with_sigkill_removes_its_temporary_folder(
        tmp_path: Path, process_watch) -> None:
    (tmp_path / "lanes").mkdir()
    flag = tmp_path / "lanes" / "hold"  # in the lane's folder: the sandbox shows it
    flag.touch()
    lane = tmp_path / "lanes" / "hold.toml"
    lane.write_text(lane_text("hold", str(flag), timeout_s=120))
    proc = subprocess.Popen([sys.executable, "-m", "alk", "run", "--lane", str(lane), "-n", "2",
                             "-q"], cwd=tmp_path, env=environment(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with process_watch(tmp_path / "tmp") as watch:
            # Until a repeat's transcript is there: alk ending first is the failure; the count
            # of looks is only a net for a run that never gets there.
            for _ in range(LOOKS):
                if list((tmp_path / "transcripts").rglob("repeat-*.jsonl")):
                    break
                assert proc.poll() is None, "alk ended before any repeat started"
                time.sleep(0.05)
            else:
                raise AssertionError(f"no repeat started in {LOOKS} looks")
            time.sleep(0.3)  # its worker runs, held
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
            assert watch.left(within_s=5) == [], "workers outlived alk's SIGKILL"
    finally:
        if proc.poll() is None:
            proc.kill()
    # What alk could not remove as it died: the run's folder.
    left = list((tmp_path / "tmp").iterdir())
    assert len(left) == 1 and left[0].name.startswith("alk-"), left
    left = left[0]
    [run_id] = [path.name for path in (tmp_path / "reports").iterdir()]
    flag.unlink()
    done = alk(tmp_path, "run", "--resume", run_id, "-q")
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        document = json.loads((tmp_path / "reports" / run_id / "result.json").read_text())
        assert document["status"] == "complete"
        assert not left.exists() and list((tmp_path / "tmp").iterdir()) == [], \
            f"the killed run's folder is still there: {left}"
    finally:
        remove_tree(tmp_path / "tmp")
