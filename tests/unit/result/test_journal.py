"""alk.result.journal: what a killed run is rebuilt from. Every record reads back as it was written,
a line a kill cut short is dropped, anything else unreadable is refused by file and line, and one
alk at a time holds a run."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from alk import layout
from alk.errors import ResumeError
from alk.plan import build_plan
from alk.records import Outcome, Preflight, RepeatResult
from alk.result import journal as journal_module
from alk.result.document import Resumption
from alk.result.journal import (
    SCHEMA,
    JournalWriter,
    RunStart,
    read_journal,
    result_from_json,
    result_to_json,
    run_start,
)
from alk.result.options import Adaptive, RunOptions
from alk.result.rule import PassRule

# Every field set, none to its default: a field the journal dropped or turned into another type
# (a list for a tuple, a string for an enum) would not compare equal.
FULL = RepeatResult(
    scenario="a", repeat=3, seed=2_718_281_828, outcome=Outcome.AGENT, cause="wrong_output",
    detail='output was "bye", expected "hi"', duration_s=1.25, exit_code=1, signal=9,
    timed_out=True, peak_rss_mb=48.5, cpu_s=0.75, containment="pid_namespace", network="none",
    filesystem="sandbox", attempts=2, path_hash="b" * 64, violations=3,
    trajectory=("lookup:ok", "write:error"), claimed={"passed": True, "notes": ["x", 1]},
    transcript="transcripts/r/a/repeat-03.jsonl", sha256="c" * 64,
    path=("ready", "tool:lookup", "result"), trajectory_hash="a" * 64, peak_tmpfs_mb=3.0,
    identities=(("fw", "1.0"), ("fw", "1.1")),
    model={"calls": 2, "turns": 2, "retries": 1, "prompt_tokens": 10, "completion_tokens": 5,
           "faults": ["call 1: http_500"]})
START = RunStart(run_id="20261130-120000-abcdef", lane_path="/lanes/demo.toml",
                 lane_sha256="d" * 64, lane_name="demo",
                 options=RunOptions(repeats=4, scenarios=("a", "b"), seed=7, timeout_s=12.5,
                                    limits={"memory_mb": 512, "max_processes": 0}),
                 started_at="2026-11-30T12:00:00+00:00")


def other(result: RepeatResult = FULL, **fields) -> RepeatResult:
    return dataclasses.replace(result, **fields)


def journal(tmp_path: Path, *results: RepeatResult, end: str | None = None) -> Path:
    path = tmp_path / "reports" / START.run_id / "journal.jsonl"
    with JournalWriter(path, START) as writer:
        for result in results:
            writer.repeat(result)
        if end:
            writer.end(end)
    return path


def test_every_field_of_a_repeat_is_set_in_the_fixture():
    for field in dataclasses.fields(RepeatResult):
        if field.default is not dataclasses.MISSING:
            assert getattr(FULL, field.name) != field.default, field.name


def test_a_repeat_round_trips_through_json_whole():
    text = json.dumps(result_to_json(FULL), allow_nan=False)
    assert result_from_json(json.loads(text)) == FULL


def test_a_repeat_without_a_model_or_steps_round_trips():
    bare = other(model=None, trajectory=(), path=(), identities=(), claimed=None,
                 peak_rss_mb=None, cpu_s=None, exit_code=None, signal=None)
    assert result_from_json(json.loads(json.dumps(result_to_json(bare)))) == bare


def test_every_kind_of_record_reads_back(tmp_path):
    path = tmp_path / "reports" / "r" / "journal.jsonl"
    second = other(scenario="b", repeat=1, outcome=Outcome.PASS)
    at = datetime(2026, 11, 30, 12, 5, 1, 999, tzinfo=timezone.utc)
    with JournalWriter(path, START) as writer:
        writer.preflight(Preflight(True, "fw", "1.0"))
        writer.repeat(FULL)
        writer.resumed(at, 1)
        writer.repeat(second)
        writer.end("interrupted")
    read = read_journal(path)
    assert read.start == START
    assert read.identity == ("fw", "1.0")
    assert read.repeats == (FULL, second)
    assert read.resumed == (Resumption("2026-11-30T12:05:01+00:00", 1),)
    assert read.ended == "interrupted"
    first = json.loads(path.read_bytes().split(b"\n")[0])
    assert (first["type"], first["schema"]) == ("run", SCHEMA)


def test_the_start_of_a_plan_round_trips(tmp_path, make_lane, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = build_plan(make_lane(("a", "b", "c")), "r", repeats=2, scenario_ids=("c", "a"),
                      seed=99, timeout_s=None, limits={"cpu_s": 5})
    options = RunOptions(scenarios=("c", "a"), limits={"cpu_s": 5},
                         adaptive=Adaptive(max_repeats=40), rule=PassRule(0.9, lower=True))
    start = run_start(plan, options, datetime(2026, 11, 30, 1, 2, 3, tzinfo=timezone.utc))
    assert start.options.scenarios == ("c", "a") and start.lane_name == "demo"
    assert start.lane_path == str(tmp_path / "lanes" / "demo.toml")
    path = tmp_path / "journal.jsonl"
    JournalWriter(path, start).close()
    assert read_journal(path).start == start
    # The run record is flat, as every journal alk wrote holds it: an older one resumes.
    record = json.loads(path.read_bytes().split(b"\n")[0])
    assert list(record) == ["type", "schema", "alk_version", "run_id", "lane_path",
                            "lane_sha256", "lane_name", "repeats", "scenarios", "seed",
                            "timeout_s", "limits", "started_at", "adaptive", "rule", "rerun_of"]
    assert record["adaptive"] == {"max_repeats": 40, "ci_width": 0.2, "round_size": 5}
    assert record["rule"] == {"fail_under": 0.9, "lower": True}


@pytest.mark.parametrize("older", [
    {"adaptive": "absent", "rule": "absent", "rerun_of": "absent"},  # before adaptive, rules
    {"rule": None},  # a rerun's, before reruns recorded their rule
])
def test_a_journal_of_an_older_alk_reads_with_the_defaults_it_ran_under(tmp_path, older):
    path = tmp_path / "journal.jsonl"
    JournalWriter(path, dataclasses.replace(
        START, options=RunOptions(adaptive=Adaptive(), rule=PassRule(0.5)))).close()
    record = json.loads(path.read_text())
    for key, value in older.items():
        if value == "absent":
            del record[key]
        else:
            record[key] = value
    path.write_text(json.dumps(record) + "\n")
    options = read_journal(path).start.options
    assert options.adaptive == (None if "adaptive" in older else Adaptive())
    assert options.rule == PassRule()


def test_a_line_a_kill_cut_short_is_dropped(tmp_path):
    second = other(repeat=4)
    path = journal(tmp_path, FULL, second)
    whole = json.dumps({"type": "repeat", "result": result_to_json(other(repeat=5))}).encode()
    with path.open("ab") as file:
        file.write(whole[:len(whole) // 2])
    read = read_journal(path)
    assert read.repeats == (FULL, second) and read.ended is None


def test_a_journal_with_a_torn_last_line_can_be_appended_to_and_read_again(tmp_path):
    path = journal(tmp_path, FULL)
    with path.open("ab") as file:
        file.write(b'{"type":"repeat","res')
    with JournalWriter(path) as writer:  # what `resume_run` does next
        writer.end("complete")
    read = read_journal(path)
    assert read.repeats == (FULL,) and read.ended == "complete"


@pytest.mark.parametrize("line", [
    b"not json at all",
    b"[1, 2]",
    b'{"no": "type"}',
    b'{"type": "preflight"}',
    b'{"type": "repeat", "result": {"scenario": "a"}}',
    json.dumps({"type": "repeat", "result": {**result_to_json(FULL), "outcome": "sort of"}})
    .encode(),
])
def test_a_corrupt_line_before_the_last_is_refused_by_file_and_line(tmp_path, line):
    path = journal(tmp_path, FULL)
    with path.open("ab") as file:
        file.write(line + b"\n")
    with JournalWriter(path) as writer:
        writer.end("interrupted")
    with pytest.raises(ResumeError) as caught:
        read_journal(path)
    assert str(caught.value).startswith(f"{path}: line 3 is not a journal record (")
    assert "changed by hand or by another program" in str(caught.value)


def test_a_journal_of_another_schema_or_without_settings_is_refused(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps({"type": "run", "schema": "alk.journal/0"}) + "\n")
    with pytest.raises(ResumeError, match=r"line 1: journal schema 'alk.journal/0' is not "
                                          r"'alk\.journal/1'"):
        read_journal(path)
    path.write_text(json.dumps({"type": "end", "status": "complete"}) + "\n")
    with pytest.raises(ResumeError, match="holds no `run` record"):
        read_journal(path)
    with pytest.raises(ResumeError, match="no journal; only a run started by this alk"):
        read_journal(tmp_path / "missing.jsonl")
    with pytest.raises(ResumeError, match="no journal"):
        JournalWriter(tmp_path / "missing" / "journal.jsonl")


def test_a_repeat_recorded_twice_keeps_its_first_record(tmp_path):
    again = other(outcome=Outcome.PASS, cause="passed", sha256="e" * 64)
    later = other(repeat=4)
    path = journal(tmp_path, FULL, again, later, other(later, seed=1))
    assert read_journal(path).repeats == (FULL, later)


def test_creating_a_journal_that_exists_fails_and_leaves_it_as_it_was(tmp_path):
    path = journal(tmp_path, FULL, end="complete")
    before = path.read_bytes()
    with pytest.raises(ResumeError, match="journal.jsonl: this run exists already"):
        JournalWriter(path, START)
    assert path.read_bytes() == before


HOLD = """
import sys
from pathlib import Path
from alk.result.journal import JournalWriter
writer = JournalWriter(Path(sys.argv[1]))
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
def test_a_second_alk_on_a_journal_in_use_is_refused_until_the_first_is_gone(tmp_path):
    path = journal(tmp_path, FULL, end="interrupted")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        before = path.read_bytes()
        with pytest.raises(ResumeError) as caught:
            JournalWriter(path)
        assert str(caught.value) == (f"{path}: another alk is running this run now; wait for "
                                     "it to end (or stop it) before resuming")
        assert path.read_bytes() == before
    finally:
        holder.kill()  # as `kill -9` would: the lock goes with the process
        holder.wait()
        holder.stdin.close()
        holder.stdout.close()
    with JournalWriter(path) as writer:
        writer.end("complete")
    assert read_journal(path).ended == "complete"


def test_a_writer_releases_its_lock_when_closed(tmp_path):
    path = journal(tmp_path)
    first = JournalWriter(path)
    with pytest.raises(ResumeError, match="another alk is running this run now"):
        JournalWriter(path)
    first.close()
    first.close()  # twice is harmless
    JournalWriter(path).close()


def test_a_journal_comes_into_being_whole_or_not_at_all(tmp_path, monkeypatch):
    # Killed before the journal is in place: no journal and no scrap, so the run id is free
    # and no half-made run is left that resume could never read.
    path = tmp_path / "reports" / "r" / "journal.jsonl"

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(journal_module.os, "link", killed)
    with pytest.raises(KeyboardInterrupt):
        JournalWriter(path, START)
    assert list(path.parent.iterdir()) == []
    monkeypatch.undo()
    with JournalWriter(path, START):
        # In place, already whole: another alk reads what run it is (and cannot take it).
        assert read_journal(path).start == START
        with pytest.raises(ResumeError, match="another alk is running this run now"):
            JournalWriter(path)


def test_a_journal_lives_under_the_runs_report_directory():
    assert layout.journal_path(Path("out"), "r1") == Path("out/reports/r1/journal.jsonl")


def test_the_start_of_a_plan_keeps_what_the_plan_settled_and_the_overrides_as_given(
        tmp_path, make_lane, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = build_plan(make_lane(("a", "b")), "r7", repeats=3, scenario_ids=("b",), seed=5,
                      timeout_s=2.5, limits={"cpu_s": 5})
    # Asked for nothing but the timeout and a limit: the repeats, scenarios and seed are the
    # plan's, so that a resumed run draws nothing again.
    start = run_start(plan, RunOptions(timeout_s=2.5, limits={"cpu_s": 5}),
                      datetime(2026, 11, 30, 1, 2, 3, tzinfo=timezone.utc))
    options = start.options
    assert (start.run_id, options.repeats, options.scenarios, options.seed) == (
        "r7", 3, ("b",), 5)
    assert (options.timeout_s, options.limits) == (2.5, {"cpu_s": 5})
    assert start.started_at == "2026-11-30T01:02:03+00:00"


def test_a_repeat_record_holds_plain_json_under_the_fields_names():
    record = result_to_json(FULL)
    assert set(record) == {field.name for field in dataclasses.fields(RepeatResult)}
    assert type(record["outcome"]) is str and record["outcome"] == "agent"
    assert type(record["model"]) is dict and record["model"] == FULL.model


def test_a_journal_line_is_compact_strict_ascii_json(tmp_path):
    path = tmp_path / "reports" / "r" / "journal.jsonl"
    with JournalWriter(path, START) as writer:
        writer.end("résumé")
        # NaN is not JSON: other readers of the journal (jq, a browser) would refuse the line.
        with pytest.raises(ValueError):
            writer._append({"type": "end", "status": float("nan")})
    data = path.read_bytes()
    assert data.isascii()
    assert data.split(b"\n")[1:] == [b'{"type":"end","status":"r\\u00e9sum\\u00e9"}', b""]
    run = json.loads(data.split(b"\n")[0])
    assert run["alk_version"] == journal_module.__version__
    assert read_journal(path).ended == "résumé"


def test_a_journal_without_preflight_has_no_identity(tmp_path):
    assert read_journal(journal(tmp_path, FULL)).identity is None


def test_missing_or_unreadable_journals_say_what_to_do(tmp_path):
    path = tmp_path / "reports" / "r" / "journal.jsonl"
    for attempt in (read_journal, JournalWriter):
        with pytest.raises(ResumeError) as caught:
            attempt(path)
        assert str(caught.value) == (f"{path}: no journal; only a run started by this alk can "
                                     "be resumed")
    path = journal(tmp_path, FULL)
    path.write_bytes(b"[]\n" + path.read_bytes())
    with pytest.raises(ResumeError) as caught:
        read_journal(path)
    assert str(caught.value).endswith("; the journal was changed by hand or by another program")
    path.unlink()
    journal(tmp_path)
    with pytest.raises(ResumeError) as caught:
        JournalWriter(path, START)
    assert str(caught.value) == (f"{path}: this run exists already; resume it (alk run "
                                 "--resume) or give the new run another id")


def test_a_new_journal_is_linked_from_a_hidden_scrap_beside_it(tmp_path, monkeypatch):
    # Beside it: a link across file systems fails. Hidden and named *.tmp: a scrap left by a
    # kill is not taken for a report.
    path = tmp_path / "reports" / "r" / "journal.jsonl"
    linked = []
    real_link = journal_module.os.link

    def link(source, target):
        linked.append(Path(source))
        real_link(source, target)

    monkeypatch.setattr(journal_module.os, "link", link)
    JournalWriter(path, START).close()
    (scrap,) = linked
    assert scrap.parent == path.parent
    assert scrap.name.startswith(".journal-") and scrap.name.endswith(".tmp")


def test_a_new_journals_descriptor_is_not_inherited_by_children(tmp_path):
    # An inherited descriptor would keep the run locked after alk itself is gone.
    with JournalWriter(tmp_path / "journal.jsonl", START) as writer:
        assert not journal_module.os.get_inheritable(writer._fd)


def test_a_journal_on_descriptor_0_is_closed_and_closing_twice_leaves_others_open(tmp_path):
    # With stdin closed (`alk run <&-`) the journal gets descriptor 0: closing must release it.
    path = tmp_path / "journal.jsonl"
    saved = [journal_module.os.dup(0), journal_module.os.dup(1)]
    try:
        journal_module.os.close(0)
        writer = JournalWriter(path, START)
        assert writer._fd == 0
        writer.close()
        writer.close()
        journal_module.os.fstat(1)  # the second close closed nothing else
        JournalWriter(path).close()  # the lock was released
    finally:
        journal_module.os.dup2(saved[0], 0)
        journal_module.os.dup2(saved[1], 1)
        for fd in saved:
            journal_module.os.close(fd)
