"""Every folder and file alk reads or writes, and the run ids they are named by: the one place
that says where things are on disk.

    lanes/NAME.toml                              the lanes (`alk run --lane NAME`)
    reports/RUN/result.json                      a run's record
    reports/RUN/journal.jsonl                    its finished repeats, durable: `--resume`
    reports/RUN/report.html, report.md, junit.xml    what reviewers and CI read
    reports/RUN/group.json                       a run of several lanes: which, and what was asked
    reports/RUN/LANE/result.json, journal.jsonl  lane LANE of such a run (run id `RUN/LANE`)
    transcripts/RUN/preflight.jsonl              the probe's transcript
    transcripts/RUN/SCENARIO/repeat-NN.jsonl     each repeat's

Paths are relative to the folder a run writes in (`out_dir`, `alk run --out`); the run's
record keeps them relative, so that a run folder can be moved and read elsewhere.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timezone
from pathlib import Path

LANES_DIR = "lanes"
REPORTS_DIR = "reports"
TRANSCRIPTS_DIR = "transcripts"

RESULT_NAME = "result.json"
JOURNAL_NAME = "journal.jsonl"
GROUP_NAME = "group.json"
HTML_NAME = "report.html"
MARKDOWN_NAME = "report.md"
JUNIT_NAME = "junit.xml"


def new_run_id(now: datetime | None = None) -> str:
    """Sortable by time, unique enough for one machine: 20261129-120501-3fa9c2."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def worker_run_id(run_id: str) -> str:
    """The run id a worker is told: the same for a run and every rerun of its repeats, and
    telling nothing of when the run began (a run id starts with its time, from which a worker
    could tell a rerun from the repeat it reproduces and behave otherwise). Its 24 random bits
    and a time unknown to the worker make it too costly to turn back."""
    return "run-" + hashlib.sha256(run_id.encode()).hexdigest()[:20]


def group_of(run_id: str) -> str:
    """The run a run id belongs to: itself, or for lane L of a run of several lanes (`R/L`), R."""
    return run_id.split("/", 1)[0]


def is_run_id(run_id: str) -> bool:
    """A name that can only be a folder under reports/: RUN, or RUN/LANE, no `..`, no `\\`."""
    parts = run_id.split("/")
    return len(parts) <= 2 and not any(part in ("", ".", "..") or "\\" in part
                                       for part in parts)


def result_path(out_dir: Path, run_id: str) -> Path:
    return out_dir / REPORTS_DIR / run_id / RESULT_NAME


def journal_path(out_dir: Path, run_id: str) -> Path:
    return out_dir / REPORTS_DIR / run_id / JOURNAL_NAME


def group_path(out_dir: Path, run_id: str) -> Path:
    """The group.json of a run of several lanes (there is none for a run of one)."""
    return out_dir / REPORTS_DIR / run_id / GROUP_NAME


def report_folder(out_dir: Path, run_id: str) -> Path:
    """The folder of a run's reports: a lane of a run of several (`R/LANE`) shares R's."""
    return out_dir / REPORTS_DIR / group_of(run_id)


def run_transcripts(run_id: str) -> Path:
    """Where a run's transcripts go, relative to the output folder."""
    return Path(TRANSCRIPTS_DIR) / run_id


def probe_transcript(run_id: str) -> Path:
    return run_transcripts(run_id) / "preflight.jsonl"


def repeat_transcript(run_id: str, scenario_id: str, repeat: int) -> Path:
    return run_transcripts(run_id) / scenario_id / f"repeat-{repeat:02d}.jsonl"
