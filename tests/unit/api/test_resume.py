"""Resuming a run (`api.resume_run`, `api.resume`) and runs of several lanes (`api.run_lanes`),
with scripted runners: an interrupted run ends with every repeat of its plan, each run once,
with the seeds a fresh run would have given; a resume that would mix two lanes or two versions
in one result is refused and leaves the run as it was."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import Counter
from pathlib import Path

import pytest

from alk import api
from alk.errors import LaneError, ResumeError, UsageError
from alk.layout import journal_path, result_path
from alk.result.document import RunDocument, to_json
from alk.result.journal import read_journal

from helpers.lane_files import lane_toml, scenario, write
from helpers.scripted import PASSING, ScriptedRunner, ready

pytestmark = pytest.mark.usefixtures("private_temp")

ENVIRON = {"PATH": "/bin"}


def lane_text(name: str = "demo", ids: tuple[str, ...] = ("a", "b", "c"), repeats: int = 3,
              **top) -> str:
    return lane_toml("".join(scenario(sid, expect='output_equals = "hi"') for sid in ids),
                     name=name, repeats=repeats, **top)


def write_lane(root: Path, name: str = "demo", **fields) -> Path:
    return write(root, lane_text(name, **fields), name)


class CountingRunner(ScriptedRunner):
    """Passes every repeat, reporting `version` at every handshake; counts the repeats it is
    asked for by (lane, scenario, repeat) and raises KeyboardInterrupt, as Ctrl-C would, when
    the `interrupt_at`th repeat of lane `interrupt_lane` (any lane when None) starts."""

    def __init__(self, interrupt_at: int | None = None, version: str = "1.0",
                 interrupt_lane: str | None = None) -> None:
        super().__init__()
        self.version, self.interrupt_at, self.interrupt_lane = version, interrupt_at, interrupt_lane
        self.started: list[tuple[str, str, int]] = []
        self.seeds: dict[tuple[str, str, int], int] = {}
        self.probes: list[str] = []
        self._counted = 0
        self._lock = threading.Lock()

    def answer(self, request):
        lane = request.hello["lane"]
        if request.start is None:
            self.probes.append(lane)
            return dataclasses.replace(PASSING, ready=ready(self.version))
        key = (lane, request.start["scenario"]["id"], request.start["repeat"])
        counted = self.interrupt_lane in (None, lane)
        with self._lock:
            self.started.append(key)
            self.seeds[key] = request.start["seed"]
            self._counted += counted
            nth = self._counted
        if counted and nth == self.interrupt_at:
            return KeyboardInterrupt()
        return dataclasses.replace(PASSING, ready=ready(self.version))

    def counts(self, lane: str = "demo") -> Counter:
        return Counter((sid, number) for name, sid, number in self.started if name == lane)


def seeds_of(document: RunDocument) -> dict[tuple[str, int], int]:
    return {(entry.id, item.repeat): item.seed
            for entry in document.scenarios for item in entry.repeats}


def run(root: Path, runner, out_dir: Path | None = None) -> api.RunResult:
    return api.run_lane(api.load_lane(root / "lanes" / "demo.toml"), api.RunOptions(seed=11),
                        api.RunSetup(out_dir=out_dir or root, runner=runner, environ=ENVIRON))


def resume(root: Path, run_id: str, runner) -> api.RunResult:
    return api.resume_run(run_id, api.RunSetup(out_dir=root, runner=runner, environ=ENVIRON))


def files_of(root: Path, run_id: str) -> tuple[bytes, bytes]:
    return (result_path(root, run_id).read_bytes(), journal_path(root, run_id).read_bytes())


# --- one lane --------------------------------------------------------------------------------


def test_an_interrupted_run_resumes_to_every_repeat_once_with_a_fresh_runs_seeds(root):
    write_lane(root)
    fresh = run(root, CountingRunner(), out_dir=root / "fresh")
    everything = set(seeds_of(fresh.document))
    assert len(everything) == 9

    first = CountingRunner(interrupt_at=4)
    cut = run(root, first)
    run_id = cut.document.run_id
    assert cut.interrupted and cut.document.status == "interrupted"
    finished = set(seeds_of(cut.document))
    assert finished == {(sid, n) for _, sid, n in first.started[:3]}

    second = CountingRunner(interrupt_at=2)
    again = resume(root, run_id, second)
    assert again.interrupted and again.document.resumed[0].done == 3
    assert not set(second.counts()) & finished  # nothing finished runs again
    finished = set(seeds_of(again.document))
    assert len(finished) == 4

    third = CountingRunner()
    done = resume(root, run_id, third)
    assert not done.interrupted and done.document.status == "complete"
    # The first interrupt's repeat and the second's each ran again, once; nothing else did.
    assert set(third.counts()) == everything - finished
    assert set(third.counts().values()) == {1}
    # Every repeat once, with the seed a fresh run with the same seed gives it.
    assert seeds_of(done.document) == seeds_of(fresh.document)
    # In repeat order, though some finished before a resume and some after.
    assert [[item.repeat for item in entry.repeats]
            for entry in done.document.scenarios] == [[1, 2, 3]] * 3
    assert {(sid, n): seed for (_, sid, n), seed in third.seeds.items()} == {
        key: seed for key, seed in seeds_of(fresh.document).items() if key not in finished}
    assert done.document.aggregate.counts == fresh.document.aggregate.counts
    assert [entry.done for entry in done.document.resumed] == [3, 4]
    assert done.document.started_at == cut.document.started_at
    assert api.read_run(run_id, root) == done.document
    assert read_journal(journal_path(root, run_id)).ended == "complete"


def test_a_fresh_run_says_it_was_never_resumed(root):
    write_lane(root)
    assert run(root, CountingRunner()).document.resumed == ()


def test_a_run_killed_before_its_end_record_resumes_from_its_journal(root):
    """`kill -9` leaves no `end` record and a result.json from some checkpoint before: the
    journal alone says which repeats finished."""
    write_lane(root)
    cut = run(root, CountingRunner(interrupt_at=6))
    run_id = cut.document.run_id
    path = journal_path(root, run_id)
    lines = path.read_bytes().split(b"\n")
    assert json.loads(lines[-2])["type"] == "end"
    # Begun a day before, as a long run killed overnight would have been.
    started = json.loads(lines[0])["started_at"]
    lines[0] = lines[0].replace(started.encode(), b"2026-11-29T08:00:00+00:00")
    path.write_bytes(b"\n".join(lines[:-2]) + b"\n")  # no `end` record
    result_path(root, run_id).unlink()  # the journal alone must do
    runner = CountingRunner()
    done = resume(root, run_id, runner)
    assert done.document.status == "complete" and len(seeds_of(done.document)) == 9
    assert len(runner.started) == 4  # 5 finished before the interrupt
    assert done.document.started_at == "2026-11-29T08:00:00+00:00"


def test_a_changed_lane_file_is_refused_and_the_run_left_as_it_was(root):
    path = write_lane(root)
    run_id = run(root, CountingRunner(interrupt_at=2)).document.run_id
    before = files_of(root, run_id)
    write(root, lane_text(timeout_s=5))
    runner = CountingRunner()
    with pytest.raises(ResumeError) as caught:
        resume(root, run_id, runner)
    assert str(caught.value).startswith(f"{path.resolve()}: the lane file changed since run "
                                        f"{run_id} began")
    assert "restore the file, or start a new run" in str(caught.value)
    assert runner.requests == [] and files_of(root, run_id) == before
    write(root, lane_text())  # restored, it resumes
    assert resume(root, run_id, runner).document.status == "complete"


def test_a_changed_scenario_file_is_refused_as_a_changed_lane(root):
    shared = root / "lanes" / "scenarios" / "shared.toml"
    shared.parent.mkdir()
    shared.write_text("".join(scenario(sid, expect='output_equals = "hi"') for sid in "abc"))
    path = write(root, lane_toml("", repeats=3, scenarios_from="scenarios/shared.toml"))
    run_id = run(root, CountingRunner(interrupt_at=2)).document.run_id
    shared.write_text(shared.read_text().replace('"hi"', '"hello"'))  # the lane file as it was
    with pytest.raises(ResumeError) as caught:
        resume(root, run_id, CountingRunner())
    assert str(caught.value).startswith(
        f"{path.resolve()}: the lane file or its scenario file "
        f"({path.resolve().parent / 'scenarios' / 'shared.toml'}) changed since run {run_id}")


class FrameworkGone(CountingRunner):
    """A worker whose framework is no longer installed: it exits before framework_ready."""

    def answer(self, request):
        super().answer(request)
        return dataclasses.replace(PASSING, ready=None, started=False, result=None,
                                   exit_code=1, stderr_tail="ModuleNotFoundError: fw\n")


class InterruptedAtProbe(CountingRunner):
    """Ctrl-C while the resumed run's probe runs."""

    def answer(self, request):
        answer = super().answer(request)
        return KeyboardInterrupt() if request.start is None else answer


@pytest.mark.parametrize("interrupt_at", [1, 3])
@pytest.mark.parametrize("runner, refusal", [
    (lambda: CountingRunner(version="1.1"),
     "run {run_id} ran fw 1.0; its worker now reports fw 1.1: resuming would mix two versions"),
    (FrameworkGone, "run {run_id} cannot go on here: worker ended (exit code 1) before "
                    "framework_ready"),
    (InterruptedAtProbe, None),
], ids=["another version", "no framework", "interrupted"])
def test_a_resume_that_cannot_begin_leaves_the_run_as_it_was(root, interrupt_at, runner,
                                                             refusal):
    """Refused at the probe (another version, a probe that fails) or interrupted before it
    passed: nothing changes on disk, no repeat starts, and the run can still be resumed."""
    write_lane(root)
    cut = run(root, CountingRunner(interrupt_at=interrupt_at)).document
    run_id = cut.run_id
    before = files_of(root, run_id)
    refused = runner()
    if refusal is None:
        result = resume(root, run_id, refused)
        assert result.interrupted and result.document == cut
    else:
        with pytest.raises(ResumeError) as caught:
            resume(root, run_id, refused)
        assert str(caught.value).startswith(refusal.format(run_id=run_id))
    assert refused.started == [] and refused.probes == ["demo"]
    assert files_of(root, run_id) == before
    done = resume(root, run_id, CountingRunner()).document
    assert done.status == "complete" and len(seeds_of(done)) == 9
    assert [entry.done for entry in done.resumed] == [interrupt_at - 1]


def test_a_complete_run_is_not_resumed(root):
    write_lane(root)
    run_id = run(root, CountingRunner()).document.run_id
    before = files_of(root, run_id)
    runner = CountingRunner()
    for call in (api.resume_run, api.resume):
        with pytest.raises(ResumeError, match=f"run {run_id} is complete: nothing to resume"):
            call(run_id, api.RunSetup(out_dir=root, runner=runner, environ=ENVIRON))
    assert runner.requests == [] and files_of(root, run_id) == before


def test_a_run_with_no_journal_cannot_be_resumed_and_leaves_nothing_behind(root):
    before = sorted(root.rglob("*"))
    # A run that never was is not called a run of another alk's (a typo, most likely).
    for resume in (api.resume, api.resume_run):
        with pytest.raises(ResumeError, match="no such run, .*/reports/20261130-000000-000000 "
                                              "does not exist"):
            resume("20261130-000000-000000",
                   api.RunSetup(out_dir=root, runner=CountingRunner(), reports=True))
    assert sorted(root.rglob("*")) == before  # no empty folder for a run that never was


# --- several lanes ---------------------------------------------------------------------------


def test_a_group_interrupted_in_its_second_lane_resumes_keeping_the_first(root):
    for name in ("one", "two", "three"):
        write_lane(root, name, ids=("a", "b"), repeats=2)
    lanes = api.load_lanes(["one", "two", "three"])
    first = CountingRunner(interrupt_at=3, interrupt_lane="two")
    cut = api.run_lanes(lanes, api.RunOptions(seed=5),
                        api.RunSetup(out_dir=root, runner=first, environ=ENVIRON, reports=True))
    run_id = cut.run_id
    assert cut.interrupted and [r.interrupted for r in cut.runs] == [False, True]
    assert [r.document.run_id for r in cut.runs] == [f"{run_id}/one", f"{run_id}/two"]
    assert first.probes == ["one", "two"]  # the third never began
    kept = result_path(root, f"{run_id}/one").read_bytes()
    assert [doc.lane.name for doc in api.read_runs(run_id, root)] == ["one", "two"]
    finished_two = set(seeds_of(cut.runs[1].document))
    assert len(finished_two) == 2

    second = CountingRunner()
    done = api.resume(run_id,
                      api.RunSetup(out_dir=root, runner=second, environ=ENVIRON, reports=True))
    assert done.run_id == run_id and not done.interrupted
    assert [r.document.lane.name for r in done.runs] == ["one", "two", "three"]
    assert all(r.document.status == "complete" for r in done.runs)
    assert second.probes == ["two", "three"] and not second.counts("one")
    assert set(second.counts("two")) == {("a", 1), ("b", 1), ("a", 2), ("b", 2)} - finished_two
    assert sorted(second.counts("three").values()) == [1, 1, 1, 1]
    assert result_path(root, f"{run_id}/one").read_bytes() == kept
    assert done.runs[1].document.resumed[0].done == 2
    assert done.runs[2].document.resumed == ()
    # One seed for every lane: the same scenario and repeat get the same seed in each.
    documents = api.read_runs(run_id, root)
    assert [doc.run_id for doc in documents] == [f"{run_id}/{n}" for n in ("one", "two",
                                                                              "three")]
    assert seeds_of(documents[0]) == seeds_of(documents[1]) == seeds_of(documents[2])
    assert api.read_runs("latest", root) == documents
    assert api.runs_json(documents) == {"run_id": run_id,
                                        "runs": [to_json(doc) for doc in documents]}
    assert api.runs_json(documents[:1]) == to_json(documents[0])
    with pytest.raises(ResumeError, match=f"run {run_id} is complete"):
        api.resume(run_id,
                   api.RunSetup(out_dir=root, runner=second, environ=ENVIRON, reports=True))


def test_a_group_stops_at_a_lane_with_a_scenario_another_lacks_before_anything_runs(root):
    write_lane(root, "one", ids=("a", "b"))
    write_lane(root, "two", ids=("a",))
    runner = CountingRunner()
    with pytest.raises(UsageError, match="lane 'two' has no scenario 'b'"):
        api.run_lanes(api.load_lanes(["one", "two"]), api.RunOptions(scenarios=("b",)),
                      api.RunSetup(out_dir=root, runner=runner, environ=ENVIRON, reports=True))
    assert runner.requests == [] and not (root / "reports").exists()


def test_one_lane_given_to_run_lanes_is_a_plain_run(root):
    write_lane(root)
    result = api.run_lanes(api.load_lanes(["demo"]), api.RunOptions(repeats=1),
                           api.RunSetup(out_dir=root, runner=CountingRunner(), environ=ENVIRON,
                                        reports=True))
    [run_] = result.runs
    assert result.run_id == run_.document.run_id and "/" not in result.run_id
    assert not (root / "reports" / result.run_id / "group.json").exists()
    assert api.read_runs(result.run_id, root) == [run_.document]


# --- naming lanes ----------------------------------------------------------------------------


def test_lanes_named_by_pattern_by_name_and_by_path_load_once_each_in_order(root):
    for name in ("b", "a", "c"):
        write_lane(root, name)
    (root / "lanes" / "notes.txt").write_text("not a lane")
    lanes = api.load_lanes(["lanes/*.toml"])
    assert [lane.name for lane in lanes] == ["a", "b", "c"]
    again = api.load_lanes(["c", "lanes/*.toml", "lanes/a.toml", str(root / "lanes" / "c.toml")])
    assert [lane.name for lane in again] == ["c", "a", "b"]


def test_a_pattern_that_matches_nothing_is_a_lane_error(root):
    with pytest.raises(LaneError, match=r"--lane 'lanes/x\*\.toml' matches no file"):
        api.load_lanes(["lanes/x*.toml"])


def test_two_lanes_of_one_name_are_refused_naming_both_files(root):
    write_lane(root, "first")
    write(root, lane_text("first"), "second")
    with pytest.raises(UsageError) as caught:
        api.load_lanes(["lanes/*.toml"])
    message = str(caught.value)
    assert "lanes/first.toml" in message and "lanes/second.toml" in message
    assert "are both lane 'first'" in message


def test_a_run_killed_after_its_last_repeat_is_written_up_from_its_journal_alone(root):
    write_lane(root)
    done = run(root, CountingRunner())
    path = journal_path(root, done.document.run_id)
    # As if alk died after the last repeat's record, before the run's `end`.
    lines = path.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[-1])["type"] == "end"
    path.write_bytes(b"".join(lines[:-1]))
    result_path(root, done.document.run_id).unlink()
    runner = CountingRunner(version="2.0")  # nothing may run: not even the probe
    again = api.resume_run(done.document.run_id,
                           api.RunSetup(out_dir=root, runner=runner, environ=ENVIRON))
    assert runner.started == [] and runner.probes == []
    assert again.document.status == "complete" and again.document.resumed == ()
    assert seeds_of(again.document) == seeds_of(done.document)
    assert read_journal(path).ended == "complete"


def test_a_journal_that_cannot_be_written_stops_the_run_to_be_resumed(root, monkeypatch):
    import errno

    from alk.errors import RunWriteError
    from alk.result.journal import JournalWriter

    write_lane(root)
    repeat = JournalWriter.repeat
    written = []

    def fills_up(self, result):
        if len(written) == 4:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        written.append(result)
        repeat(self, result)

    monkeypatch.setattr(JournalWriter, "repeat", fills_up)
    with pytest.raises(RunWriteError, match=r"journal.jsonl: cannot be written \(No space"):
        run(root, CountingRunner())
    monkeypatch.undo()
    [run_id] = [p.name for p in (root / "reports").iterdir()]
    assert len(read_journal(journal_path(root, run_id)).repeats) == 4
    runner = CountingRunner()
    done = api.resume_run(run_id, api.RunSetup(out_dir=root, runner=runner, environ=ENVIRON))
    assert done.document.status == "complete" and len(runner.started) == 5
    assert sorted(seeds_of(done.document)) == sorted(
        (sid, n) for sid in ("a", "b", "c") for n in (1, 2, 3))
