"""What alk reads of real workers through `alk run`: the protocol lines of many threads
arriving whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def alk(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "alk", *map(str, args)], cwd=cwd,
                          env={**os.environ, "COLUMNS": "160"}, capture_output=True, text=True,
                          timeout=300)


def repeats(cwd: Path) -> dict[str, dict]:
    """Each scenario's one repeat, by scenario id."""
    [path] = (cwd / "reports").glob("*/result.json")
    document = json.loads(path.read_text())
    return {s["id"]: repeat for s in document["scenarios"] for repeat in s["repeats"]}


def test_lines_from_many_threads_arrive_whole(tmp_path: Path) -> None:
    done = alk("run", "--lane", TESTS / "lanes" / "threads.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    repeat = repeats(tmp_path)["nominal"]
    assert (repeat["cause"], repeat["violations"]) == ("passed", 0)
    [transcript] = (tmp_path / "transcripts").glob("*/nominal/repeat-01.jsonl")
    calls = [event for event in map(json.loads, transcript.read_text().splitlines())
             if (event["channel"], event["type"]) == ("tool", "call")]
    assert len(calls) == 320
    for event in calls:
        thread, text = event["payload"]["args"]["thread"], event["payload"]["args"]["text"]
        assert text.startswith(f"{thread}:") and len(set(text.split())) == 1
