"""`alk runs` (`api.list_runs`): past runs newest first, a run of several lanes as one, and a
run this alk cannot read listed with why, not dropped."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from alk import api
from alk.api import recorder
from alk.layout import journal_path
from alk.result.journal import JournalWriter
from alk.errors import RunNotFoundError
from alk.lane.load import worker_digest
from alk.result.group import GroupLane, RunGroup, write_group
from alk.result.rule import PassRule

from helpers.documents import CRASHED, NEVER_READY, SECRET_ENV, lane, observation, passing
from helpers.lane_files import lane_toml, scenario, write
from helpers.scripted import PASSING, ScenarioRunner, ScriptedRunner


def test_runs_are_listed_newest_first_with_their_lanes_counts_and_verdicts(tmp_path):
    one = api.run_lanes([lane(("nominal",))], api.RunOptions(repeats=3, seed=1),
                        api.RunSetup(out_dir=tmp_path,
                                     runner=ScenarioRunner(observation(0.3), nominal=passing(3)),
                                     environ=SECRET_ENV))
    # A run of two lanes, as `run_lanes` leaves it: each lane's run R/LANE, and R's group.json.
    group_id = "20261201-000000-abcdef"
    for name, nominal, remote in (("a", passing(2), [NEVER_READY] * 2),
                                  ("b", [CRASHED, *passing(1)], passing(2))):
        api.run_lane(lane(("nominal", "remote"), name),
                     api.RunOptions(repeats=2, seed=1, rule=PassRule(0.5)),
                     api.RunSetup(out_dir=tmp_path, environ=SECRET_ENV,
                                  runner=ScenarioRunner(observation(0.3), nominal=nominal,
                                                        remote=remote)),
                     run_id=f"{group_id}/{name}")
    write_group(tmp_path, RunGroup(group_id, (GroupLane("a", "lanes/a.toml"),
                                              GroupLane("b", "lanes/b.toml")),
                                   api.RunOptions(repeats=2, seed=1, rule=PassRule(0.5))))
    broken = tmp_path / "reports" / "20990101-000000-ffffff" / "result.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"schema": "alk.result/1"}')
    (tmp_path / "reports" / "notes").mkdir()  # a folder that is no run: not listed

    runs = api.list_runs(tmp_path)
    assert [entry.run_id for entry in runs] == [
        "20990101-000000-ffffff", *sorted([one.run_id, group_id], reverse=True)]
    unreadable, *read = runs
    assert unreadable.status == "unreadable" and unreadable.exit_code is None
    assert "schema 'alk.result/1' is not 'alk.result/2'" in unreadable.problem
    group = next(entry for entry in read if entry.run_id == group_id)
    # Lane a: nominal 2/2, remote void; lane b: nominal 1/2, remote 2/2. By the run's rule
    # (0.5), nothing fails, and lane a's void scenario makes the run void.
    # Two lanes × two scenarios: four lane × scenario cells, not four scenarios.
    assert group.lanes == ("a", "b") and (group.scenarios, group.cells) == (2, 4)
    assert (group.passed, group.scored, group.void) == (5, 6, 2)
    assert group.exit_code == 3 and group.status == "complete"
    assert group.rule == "rate ≥ 50.0%"
    assert group.frameworks == ("pydantic-ai 1.0.3", "pydantic-ai 1.0.3")
    single = next(entry for entry in read if entry.run_id == one.run_id)
    assert (single.passed, single.scored, single.exit_code, single.rule) == (3, 3, 0, "")
    assert [e.run_id for e in api.list_runs(tmp_path, limit=1)] == ["20990101-000000-ffffff"]


def test_a_folder_with_no_runs_says_so(tmp_path):
    with pytest.raises(RunNotFoundError, match="no run was saved here yet"):
        api.list_runs(tmp_path)


def test_the_worker_digest_follows_the_files_its_command_names(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text("print('one')\n")
    command = ("{python}", str(script), "--model", "openai/gpt-4o")
    first = worker_digest(command)
    assert first == worker_digest(command)
    # Arguments that are no files, and an interpreter on PATH, do not count.
    assert worker_digest(("{python}", str(script))) == first
    script.write_text("print('two')\n")
    second = worker_digest(command)
    assert second != first
    # A module beside the script, which it may import, is part of the worker.
    (tmp_path / "tools.py").write_text("LIMIT = 1\n")
    third = worker_digest(command)
    assert third != second
    (tmp_path / "tools.py").write_text("LIMIT = 2\n")
    assert worker_digest(command) != third
    # The same files elsewhere (a checkout moved, or cloned) are the same worker.
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("worker.py", "tools.py"):
        (moved / name).write_bytes((tmp_path / name).read_bytes())
    assert worker_digest(("{python}", str(moved / "worker.py"))) == worker_digest(command)


def test_a_node_workers_digest_covers_its_sources_and_the_shared_ones_not_node(tmp_path):
    shared = tmp_path / "workers" / "node"
    (shared / "lane").mkdir(parents=True)
    (shared / "lab_tools.mjs").write_text("export const x = 1;\n")
    (shared / "lane" / "package.json").write_text("{}")
    (shared / "lane" / "package-lock.json").write_text("{}")
    worker = shared / "lane" / "worker.mjs"
    worker.write_text("import '../lab_tools.mjs';\n")
    node = tmp_path / "node"
    node.write_bytes(b"\x7fELF" + b"\0" * 64)
    command = (str(node), str(worker))
    first = worker_digest(command)
    # The binary is no code of the worker's: another build of Node is the same worker.
    node.write_bytes(b"\x7fELF" + b"\1" * 64)
    assert worker_digest(command) == first
    (shared / "lab_tools.mjs").write_text("export const x = 2;\n")
    second = worker_digest(command)
    assert second != first
    (shared / "lane" / "helpers.ts").write_text("export {};\n")
    assert worker_digest(command) != second
    # Without a package of its own, the folder above is not the worker's.
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "worker.mjs").write_text("x\n")
    before = worker_digest((str(node), str(alone / "worker.mjs")))
    (tmp_path / "other.mjs").write_text("y\n")
    assert worker_digest((str(node), str(alone / "worker.mjs"))) == before


ENVIRON = {"PATH": "/bin"}


def write_lane(root: Path, name: str = "demo") -> Path:
    """A lane of three scenarios, three repeats each."""
    return write(root, lane_toml("".join(scenario(sid, expect='output_equals = "hi"')
                                         for sid in "abc"), name=name, repeats=3), name)


class CountingRunner(ScriptedRunner):
    """Passes every repeat; Ctrl-C, as a KeyboardInterrupt, when the `interrupt_at`th repeat
    (of lane `lane`, any when None) starts."""

    def __init__(self, interrupt_at: int | None = None, lane: str | None = None) -> None:
        super().__init__()
        self.interrupt_at, self.lane, self.counted = interrupt_at, lane, 0
        self.lock = threading.Lock()

    def answer(self, request):
        if request.start is not None and self.lane in (None, request.hello["lane"]):
            with self.lock:
                self.counted += 1
                if self.counted == self.interrupt_at:
                    return KeyboardInterrupt()
        return PASSING


class PacedRunner(CountingRunner):
    """Starts a repeat only once the repeat before it was handed over (`handed`, which the
    test's on_repeat releases): on a slow machine a scripted repeat, which takes no time, would
    otherwise run the plan to its end before the first on_repeat hears of one."""

    def __init__(self) -> None:
        super().__init__()
        self.handed = threading.Semaphore(1)

    def answer(self, request):
        if request.start is not None:
            assert self.handed.acquire(timeout=60), "the repeat before was never handed over"
        return super().answer(request)


class Killed(BaseException):
    """Stands for `kill -9` of alk: it escapes everything, so the run's journal is closed (the
    kernel drops a killed process's lock the same way) with no `end` record in it, and its
    result.json is the last checkpoint, which says `running`."""


def test_a_runs_state_and_counts_come_from_its_journal_and_lock(root, monkeypatch):
    # result.json is written at the start and then no more while this runs, however slow the
    # machine: the counts below can only come from the journal.
    monkeypatch.setattr(recorder, "CHECKPOINT_INTERVAL_S", 3600.0)
    write_lane(root)  # 3 scenarios × 3 repeats
    lane = api.load_lane(root / "lanes" / "demo.toml")
    seen: list[api.RunEntry] = []
    paced = PacedRunner()

    def listed(result) -> None:
        [entry] = api.list_runs(root)
        seen.append(entry)
        paced.handed.release()
        if len(seen) >= 4:
            raise Killed  # (a repeat that finished as it stopped is handed over, and journaled)

    with pytest.raises(Killed):
        api.run_lane(lane, api.RunOptions(seed=11),
                     api.RunSetup(out_dir=root, runner=paced, environ=ENVIRON,
                                  on_repeat=listed))
    assert len(seen) in (4, 5)  # the kill left repeats to resume
    # While it ran, its alk held it: running, with the repeats its journal holds by then,
    # though result.json's checkpoint (at its start) holds none.
    assert [(e.status, e.ran, e.planned, e.passed, e.resume) for e in seen] == [
        ("running", n, 9, n, "") for n in range(1, len(seen) + 1)]
    [killed] = api.list_runs(root)
    run_id = killed.run_id
    document = api.read_run(run_id, root)  # what result.json still says
    assert document.status == "running" and document.aggregate.counts.completed < len(seen)
    assert (killed.status, killed.ran, killed.planned, killed.resumed) == (
        "stopped", len(seen), 9, 0)
    assert killed.resume == f"alk run --resume {run_id}"
    # Another alk holding it (a resume going on) makes it running again.
    with JournalWriter(journal_path(root, run_id)):
        assert api.list_runs(root)[0].status == "running"

    cut = api.resume_run(run_id, api.RunSetup(out_dir=root, runner=CountingRunner(2),
                                              environ=ENVIRON))
    assert cut.interrupted
    [interrupted] = api.list_runs(root)
    assert (interrupted.status, interrupted.ran, interrupted.planned,
            interrupted.resumed) == ("interrupted", len(seen) + 1, 9, 1)
    assert interrupted.resume == f"alk run --resume {run_id}"

    # Killed while resumed: the `end` of before ended only what ran before.
    def killed_again(result) -> None:
        raise Killed

    with pytest.raises(Killed):
        api.resume_run(run_id, api.RunSetup(out_dir=root, runner=CountingRunner(),
                                            environ=ENVIRON, on_repeat=killed_again))
    [again] = api.list_runs(root)
    assert (again.status, again.resumed) == ("stopped", 2)
    # The next repeat may have finished beside the one the kill followed, and been journaled:
    # with none left, the last resume only writes the run up, and is no resumption.
    left = 9 - again.ran

    api.resume_run(run_id, api.RunSetup(out_dir=root, runner=CountingRunner(),
                                        environ=ENVIRON))
    [done] = api.list_runs(root)
    assert (done.status, done.ran, done.planned, done.passed, done.exit_code) == (
        "complete", 9, 9, 9, 0)
    assert done.resumed == 2 + (left > 0) and done.resume == ""


def test_a_run_of_several_lanes_counts_lanes_and_scenarios_and_the_lanes_not_begun(root):
    lanes = [api.load_lane(write_lane(root, name)) for name in ("one", "two", "three")]
    cut = api.run_lanes(lanes, api.RunOptions(seed=11, repeats=2),
                        api.RunSetup(out_dir=root, environ=ENVIRON,
                                     runner=CountingRunner(3, "two")))
    assert cut.interrupted
    [entry] = api.list_runs(root)
    assert entry.lanes == ("one", "two", "three")
    assert entry.frameworks == ("fw 1.0", "fw 1.0", "")  # three has not begun
    assert (entry.status, entry.scenarios, entry.cells) == ("interrupted", 3, 6)
    # What the lanes that began planned, and ran: lane one whole, two before its interrupt.
    assert (entry.ran, entry.planned) == (6 + 2, 12)
    assert entry.resume == f"alk run --resume {cut.run_id}"
    api.resume(cut.run_id, api.RunSetup(out_dir=root, environ=ENVIRON, runner=CountingRunner()))
    [entry] = api.list_runs(root)
    assert (entry.status, entry.cells, entry.ran, entry.planned, entry.resumed) == (
        "complete", 9, 18, 18, 1)


def test_a_run_that_never_started_says_why_nothing_ran(tmp_path):
    old = dataclasses.replace(observation(0.3), ready={"framework": "pydantic-ai",
                                                       "framework_version": "0.9.1"})
    refused = api.run_lanes([lane(("nominal",))], api.RunOptions(repeats=3, seed=1),
                            api.RunSetup(out_dir=tmp_path, runner=ScenarioRunner(old),
                                         environ=SECRET_ENV))
    ran = api.run_lanes([lane(("nominal",))], api.RunOptions(repeats=1, seed=1),
                        api.RunSetup(out_dir=tmp_path, environ=SECRET_ENV,
                                     runner=ScenarioRunner(observation(0.3),
                                                           nominal=passing(1))))
    entries = {entry.run_id: entry for entry in api.list_runs(tmp_path)}
    assert entries[refused.run_id].nothing_ran == "version_unsupported"
    assert entries[ran.run_id].nothing_ran == ""
