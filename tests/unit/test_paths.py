"""alk.layout: the folders and files a run leaves, by the names the docs give them (reviewers and
scripts open them by those names), and run ids, sortable by their UTC time."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from alk import layout

OUT = Path("out")


def test_a_runs_files_are_where_the_docs_say():
    assert layout.result_path(OUT, "R") == Path("out/reports/R/result.json")
    assert layout.journal_path(OUT, "R") == Path("out/reports/R/journal.jsonl")
    assert layout.group_path(OUT, "R") == Path("out/reports/R/group.json")
    assert layout.report_folder(OUT, "R") == Path("out/reports/R")
    assert layout.run_transcripts("R") == Path("transcripts/R")
    assert layout.probe_transcript("R") == Path("transcripts/R/preflight.jsonl")
    assert layout.repeat_transcript("R", "s", 3) == Path("transcripts/R/s/repeat-03.jsonl")
    assert layout.repeat_transcript("R", "s", 120) == Path("transcripts/R/s/repeat-120.jsonl")


def test_a_lane_of_a_run_of_several_lanes_shares_the_runs_report_folder():
    assert layout.group_of("R") == "R"
    assert layout.group_of("R/orders") == "R"
    assert layout.report_folder(OUT, "R/orders") == Path("out/reports/R")
    assert layout.result_path(OUT, "R/orders") == Path("out/reports/R/orders/result.json")


@pytest.fixture
def far_from_utc(monkeypatch):
    """This process's local time 14 hours ahead of UTC (a POSIX TZ string: no tzdata needed)."""
    monkeypatch.setenv("TZ", "ALK-14")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_run_id_is_its_utc_start_and_a_random_tail(far_from_utc):
    before = datetime.now(timezone.utc).replace(microsecond=0)
    run_id = layout.new_run_id()
    after = datetime.now(timezone.utc)
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", run_id)
    stamp = datetime.strptime(run_id[:15], "%Y%m%d-%H%M%S").replace(tzinfo=timezone.utc)
    assert before <= stamp <= after  # UTC, not the local time 14 hours on
    assert layout.new_run_id(datetime(2026, 11, 29, 12, 5, 1)).startswith("20261129-120501-")


def test_the_run_id_a_worker_is_told_says_nothing_of_when_the_run_began():
    told = layout.worker_run_id("20261129-120501-3fa9c2")
    assert re.fullmatch(r"run-[0-9a-f]{20}", told)
    assert "2026" not in told and told == layout.worker_run_id("20261129-120501-3fa9c2")
    assert told != layout.worker_run_id("20261129-120501-3fa9c3")
