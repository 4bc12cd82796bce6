"""`alk runs` (`api.list_runs`): past runs newest first, a run of several lanes as one, and a
run this alk cannot read listed with why, not dropped."""

from __future__ import annotations

import pytest

from alk import api
from alk.errors import RunNotFoundError
from alk.lane.load import worker_digest
from alk.result.group import GroupLane, RunGroup, write_group
from alk.result.rule import PassRule

from helpers.documents import CRASHED, NEVER_READY, SECRET_ENV, lane, observation, passing
from helpers.scripted import ScenarioRunner


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
    assert group.lanes == ("a", "b") and group.scenarios == 4
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
