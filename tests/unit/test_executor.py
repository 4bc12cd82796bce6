"""The executor with a scripted runner: the branches that real processes reach only rarely."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import pytest

from alk.causes import Cause
from alk.executor import execute
from alk.plan import build_plan
from alk.records import Expectations, Observation, Outcome, Preflight, Scenario
from alk.redaction import Redactor
from alk.runner.isolation import PROCESS_GROUP_ONLY

OK = Preflight(True, "fw", "1.0")
PASSING = Observation(spawned=True, ready={"framework": "fw"}, preflight=OK, started=True,
                      exit_code=0, result={"output": "hi", "stop_reason": "done",
                                           "end_state": {}})


class ScriptedRunner:
    """Answers each run with the next scripted item: an Observation, or an exception to raise.
    The first item answers the preflight probe."""

    isolation = PROCESS_GROUP_ONLY

    def __init__(self, *script):
        self.script = list(script)
        self.requests = []

    def run(self, request, gate, transcript):
        self.requests.append(request)
        transcript.harness("spawn", {"pid": 0})
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item


@pytest.fixture(autouse=True)
def private_temp(tmp_path, monkeypatch):
    """Workspaces (kept ones too) go under the test's own folder, not the system's /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()


@pytest.fixture
def plan(make_lane):
    lane = make_lane(scenarios=(Scenario("a", "t", {}, Expectations(output_equals="hi")),),
                     required_env=("TOKEN",))
    return build_plan(lane, "run-1", repeats=3, seed=1)


def run(plan, tmp_path, runner, environ=None, **options):
    environ = {"TOKEN": "tok-value-1234", "PATH": "/bin"} if environ is None else environ
    return execute(plan, tmp_path, Redactor([environ.get("TOKEN", "")]), runner=runner,
                   environ=environ, **options)


def test_missing_environment_voids_the_run_before_any_process(plan, tmp_path):
    runner = ScriptedRunner()
    execution = run(plan, tmp_path, runner, environ={"PATH": "/bin"})
    assert execution.void.cause == Cause.ENV_MISSING and "TOKEN" in execution.void.detail
    assert runner.requests == [] and execution.repeats == []


def test_a_network_level_the_machine_cannot_give_voids_the_run(make_lane, tmp_path):
    lane = make_lane(network="none", required_env=("TOKEN",))
    runner = ScriptedRunner()
    execution = run(build_plan(lane, "run-1", repeats=2, seed=1), tmp_path, runner)
    assert execution.void.cause == Cause.ISOLATION_UNAVAILABLE
    assert 'network = "none"' in execution.void.detail and runner.requests == []


def test_a_filesystem_level_the_machine_cannot_give_voids_the_run(make_lane, tmp_path):
    lane = make_lane(filesystem="sandbox", required_env=("TOKEN",))
    execution = run(build_plan(lane, "run-1", repeats=2, seed=1), tmp_path, ScriptedRunner())
    assert execution.void.cause == Cause.ISOLATION_UNAVAILABLE
    assert 'filesystem = "sandbox"' in execution.void.detail


def test_a_failed_probe_voids_the_run_without_repeats(plan, tmp_path):
    probe = Observation(spawned=True, ready={"framework": "fw"}, exit_code=0,
                        preflight=Preflight(False, "fw", "0.1", Cause.VERSION_UNSUPPORTED, "old"))
    runner = ScriptedRunner(probe)
    execution = run(plan, tmp_path, runner)
    assert execution.void.cause == Cause.VERSION_UNSUPPORTED
    assert len(runner.requests) == 1 and runner.requests[0].start is None


def test_the_worker_sees_only_the_safe_base_and_declared_names(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    environ = {"TOKEN": "tok-value-1234", "PATH": "/bin", "TZ": "UTC", "HARNESS_KEY": "no"}
    execution = run(plan, tmp_path, runner, environ=environ)
    env = runner.requests[1].env
    assert set(env) == {"TOKEN", "PATH", "TZ", "HOME", "TMPDIR", "PYTHONPATH"}
    assert env["HOME"] == env["TMPDIR"] == runner.requests[1].cwd
    assert [r.outcome for r in execution.repeats] == [Outcome.PASS] * 3


def test_an_error_of_alk_voids_one_repeat_and_the_run_goes_on(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, OSError(28, "No space left on device"), PASSING)
    execution = run(plan, tmp_path, runner)
    causes = [r.cause for r in execution.repeats]
    assert causes == [Cause.PASSED, Cause.HARNESS_ERROR, Cause.PASSED]
    assert "No space left" in execution.repeats[1].detail
    last = json.loads((tmp_path / execution.repeats[1].transcript).read_text().splitlines()[-1])
    assert last["payload"]["cause"] == Cause.HARNESS_ERROR


def test_an_interrupt_keeps_finished_repeats_and_removes_the_workspaces(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, KeyboardInterrupt())
    execution = run(plan, tmp_path, runner)
    assert execution.interrupted and len(execution.repeats) == 1
    assert not Path(runner.requests[0].cwd).parent.exists()
    lines = (tmp_path / "transcripts/run-1/a/repeat-02.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "interrupted"


def test_kept_workspaces_are_reported(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    execution = run(plan, tmp_path, runner, keep_workspaces=True)
    assert execution.workspaces is not None and execution.workspaces.is_dir()
    assert Path(runner.requests[2].cwd).is_dir()


def test_a_claim_is_recorded_but_checks_decide(plan, tmp_path):
    lying = Observation(spawned=True, ready={"framework": "fw"}, preflight=OK, started=True,
                        exit_code=0, result={"output": "wrong", "stop_reason": "done",
                                             "end_state": {}, "verification": {"passed": True}})
    runner = ScriptedRunner(PASSING, lying, PASSING, PASSING)
    execution = run(plan, tmp_path, runner)
    first = execution.repeats[0]
    assert first.outcome is Outcome.AGENT and first.claimed == {"passed": True}


def test_workspaces_are_unguessable_and_say_nothing_before_the_gate(plan, tmp_path):
    """A worker that knew its scenario (or that it is the probe) before framework_ready could
    report a bad version to void exactly the repeats it would fail."""
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    run(plan, tmp_path, runner, keep_workspaces=True)
    names = [Path(r.cwd).name for r in runner.requests]
    assert len(set(names)) == 4
    # The probe's and every repeat's look alike: a prefix and random letters, nothing else.
    assert {len(name) for name in names} == {len(names[0])}
    assert {name[:2] for name in names} == {"w-"}
    assert not [n for n in names if "a" in n.split("-", 1)[0] or "probe" in n or "01" in n[:4]]
    for request in runner.requests:
        assert request.env["HOME"] == request.env["TMPDIR"] == request.cwd
    sdk = Path(runner.requests[1].env["PYTHONPATH"]) / "alk"
    assert (sdk / "worker.py").stat().st_mode & 0o222 == 0
    assert list((sdk / "__pycache__").glob("worker.*.pyc"))


def test_transcripts_reports_and_the_runs_workspaces_are_hidden_from_the_worker(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    run(plan, tmp_path, runner)
    hidden = runner.requests[1].hidden
    assert str((tmp_path / "transcripts").resolve()) in hidden
    assert str((tmp_path / "reports").resolve()) in hidden
    assert str(Path(runner.requests[1].cwd).parent.resolve()) in hidden  # the run's folder
    assert str(Path(runner.requests[1].env["PYTHONPATH"])) in runner.requests[1].visible


def test_the_probes_workspace_is_removed_at_once(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    run(plan, tmp_path, runner)
    assert not Path(runner.requests[0].cwd).exists()


def test_sandbox_sees_the_program_its_venv_and_the_lane_never_all_of_tmp(plan, tmp_path):
    from alk.executor import _Context

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").write_text("")
    script = tmp_path / "w.py"
    script.write_text("")
    context = _Context(plan, tmp_path, ScriptedRunner(), None, Redactor(), {"PATH": "/bin"},
                       tmp_path, False, tmp_path / "sdk", None, None)
    visible = context.visible((str(venv / "bin" / "python"), str(script), "/tmp", "--flag"))
    assert str(venv) in visible and str(tmp_path) in visible
    assert str(tmp_path / "sdk") in visible


def test_a_run_keeps_trajectories_up_to_its_budget_then_digests_only(plan, tmp_path,
                                                                     monkeypatch):
    from alk import executor

    monkeypatch.setattr(executor, "STEPS_BUDGET_CHARS", 2_000)
    steps = tuple(f"tool-{i:04d}:ok" for i in range(100))  # 1,200 characters a repeat
    heavy = dataclasses.replace(PASSING, trajectory=steps, trajectory_hash="h" * 64)
    runner = ScriptedRunner(PASSING, heavy, heavy, heavy)
    execution = run(plan, tmp_path, runner)
    kept = [len(r.trajectory) for r in execution.repeats]
    assert kept == [100, 0, 0]  # the first fits; then the budget is spent
    assert [r.trajectory_hash for r in execution.repeats] == ["h" * 64] * 3


def test_a_long_claim_is_kept_as_a_redacted_excerpt(plan, tmp_path):
    claim = {"note": "x" * 990 + "tok-value-1234" + "y" * 50}
    lying = dataclasses.replace(PASSING, result={**PASSING.result, "verification": claim})
    runner = ScriptedRunner(PASSING, lying, PASSING, PASSING)
    first = run(plan, tmp_path, runner).repeats[0]
    assert isinstance(first.claimed, str) and len(first.claimed) <= 1001
    assert "tok-value" not in first.claimed and "tok-va" not in first.claimed[-20:]
    small = {"passed": True}
    lying = dataclasses.replace(PASSING, result={**PASSING.result, "verification": small})
    assert run(plan, tmp_path / "b", ScriptedRunner(PASSING, lying, PASSING, PASSING)
               ).repeats[0].claimed == small
