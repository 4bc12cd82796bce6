"""The executor with a scripted runner: the branches that real processes reach only rarely."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.scripted import PASSING, SECRET, ScriptedRunner, ready

from alk.causes import Cause
from alk.cleanup import remove_tree
from alk.execute import repeat
from alk.execute.executor import execute
from alk.layout import worker_run_id
from alk.plan import build_plan
from alk.records import (
    Expectations,
    Fault,
    FileExpectation,
    KillAt,
    Limits,
    Observation,
    Outcome,
    Scenario,
    Violation,
)
from alk.redaction import Redactor
from alk.runner.isolation import PROCESS_GROUP_ONLY, Filesystem, Network
from alk.runner.sandbox import worker_uid
from alk.transcript.writer import TranscriptWriter
from alk.worker import PROTOCOL_VERSION

pytestmark = pytest.mark.usefixtures("private_temp")


@pytest.fixture
def plan(make_lane):
    lane = make_lane(scenarios=(Scenario("a", "t", {}, Expectations(output_equals="hi")),),
                     required_env=("TOKEN",))
    return build_plan(lane, "run-1", repeats=3, seed=1)


def run(plan, tmp_path, runner, environ=None, **options):
    environ = {"TOKEN": SECRET, "PATH": "/bin"} if environ is None else environ
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


def test_the_sdks_are_handed_over_alone_and_read_only(tmp_path):
    sdk = repeat._install_sdk(tmp_path)
    assert sorted(p.name for p in sdk.iterdir()) == ["alk", "node"]
    node = sdk / "node"
    assert sorted(p.name for p in node.iterdir()) == ["alk-worker"]
    source = Path(repeat.__file__).parents[1] / "worker-node"
    for name in ("package.json", "index.js", "index.mjs", "index.d.ts"):
        assert (node / "alk-worker" / name).read_bytes() == (source / name).read_bytes()
    assert {oct(p.stat().st_mode & 0o777) for p in node.rglob("*") if p.is_file()} == {"0o444"}
    assert {oct(p.stat().st_mode & 0o777) for p in node.rglob("*") if p.is_dir()} == {"0o555"}
    for path in sdk.rglob("*"):
        path.chmod(0o755)  # for tmp_path's removal


def test_a_failed_probe_voids_the_run_without_repeats(plan, tmp_path):
    probe = Observation(spawned=True, ready=ready("0.1"), exit_code=0)
    runner = ScriptedRunner(probe)
    execution = run(plan, tmp_path, runner)
    assert execution.void.cause == Cause.VERSION_UNSUPPORTED
    assert len(runner.requests) == 1 and runner.requests[0].start is None


def test_the_worker_sees_only_the_safe_base_and_declared_names(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    environ = {"TOKEN": SECRET, "PATH": "/bin", "TZ": "UTC", "HARNESS_KEY": "no"}
    execution = run(plan, tmp_path, runner, environ=environ)
    env = runner.requests[1].env
    assert set(env) == {"TOKEN", "PATH", "TZ", "HOME", "TMPDIR", "PYTHONPATH", "NODE_PATH"}
    assert env["HOME"] == env["TMPDIR"] == runner.requests[1].cwd
    assert Path(env["NODE_PATH"]).parent == Path(env["PYTHONPATH"])
    assert [r.outcome for r in execution.repeats] == [Outcome.PASS] * 3


def test_an_error_of_alk_voids_one_repeat_and_the_run_goes_on(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, OSError(28, "No space left on device"), PASSING)
    execution = run(plan, tmp_path, runner)
    causes = [r.cause for r in execution.repeats]
    assert causes == [Cause.PASSED, Cause.HARNESS_ERROR, Cause.PASSED]
    assert execution.repeats[1].detail == "OSError: [Errno 28] No space left on device"
    last = json.loads((tmp_path / execution.repeats[1].transcript).read_text().splitlines()[-1])
    assert last["payload"]["cause"] == Cause.HARNESS_ERROR


def test_an_interrupt_keeps_finished_repeats_and_removes_the_workspaces(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, KeyboardInterrupt())
    execution = run(plan, tmp_path, runner)
    assert execution.interrupted and len(execution.repeats) == 1
    assert not Path(runner.requests[0].cwd).parent.exists()
    lines = (tmp_path / "transcripts/run-1/a/repeat-02.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "interrupted"
    assert json.loads(lines[-1])["payload"] == {"detail": "alk was interrupted; repeat discarded"}


def test_kept_workspaces_are_reported(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    execution = run(plan, tmp_path, runner, keep_workspaces=True)
    assert execution.workspaces is not None and execution.workspaces.is_dir()
    assert execution.workspaces.name.startswith("alk-")
    assert all(Path(request.cwd).is_dir() for request in runner.requests)  # the probe's too


def test_a_kept_workspace_outlives_an_interrupt(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, KeyboardInterrupt())
    run(plan, tmp_path, runner, keep_workspaces=True)
    assert Path(runner.requests[2].cwd).is_dir()


def test_each_workspace_is_removed_when_its_repeat_ends(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    left = []
    # The k-th repeat to end ran the (k + 1)-th request (the probe's is the first); the next
    # repeat may have started meanwhile, in its own workspace.
    run(plan, tmp_path, runner, on_repeat=lambda result, so_far: left.append(
        Path(runner.requests[len(so_far.repeats)].cwd).exists()))
    assert left == [False, False, False]


def test_a_claim_is_recorded_but_checks_decide(plan, tmp_path):
    lying = Observation(spawned=True, ready=ready(), started=True,
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
    from alk.execute.repeat import LaneContext as _Context

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
    monkeypatch.setattr(repeat, "STEPS_BUDGET_CHARS", 2_000)
    steps = tuple(f"tool-{i:04d}:ok" for i in range(100))  # 1,200 characters a repeat
    heavy = dataclasses.replace(PASSING, trajectory=steps, trajectory_hash="h" * 64)
    runner = ScriptedRunner(PASSING, heavy, heavy, heavy)
    execution = run(plan, tmp_path, runner)
    kept = [len(r.trajectory) for r in execution.repeats]
    assert kept == [100, 0, 0]  # the first fits; then the budget is spent
    assert [r.trajectory_hash for r in execution.repeats] == ["h" * 64] * 3


def test_a_long_claim_is_kept_as_a_redacted_excerpt(plan, tmp_path):
    claim = {"note": "x" * 990 + SECRET + "y" * 50}
    lying = dataclasses.replace(PASSING, result={**PASSING.result, "verification": claim})
    runner = ScriptedRunner(PASSING, lying, PASSING, PASSING)
    first = run(plan, tmp_path, runner).repeats[0]
    assert isinstance(first.claimed, str) and len(first.claimed) <= 1001
    assert "tok-value" not in first.claimed and "tok-va" not in first.claimed[-20:]
    small = {"passed": True}
    lying = dataclasses.replace(PASSING, result={**PASSING.result, "verification": small})
    assert run(plan, tmp_path / "b", ScriptedRunner(PASSING, lying, PASSING, PASSING)
               ).repeats[0].claimed == small


# --- what the executor asks of the runner, and what it makes of the answers -----------------

RESUMING = Scenario("a", "t", {"q": 1}, Expectations(output_equals="hi"),
                    script=({"say": "hi"},), faults=(Fault("tool", 2, "boom", True),),
                    kill_at=KillAt("tool", "call"), max_attempts=2)
KILLED = dataclasses.replace(PASSING, kill_fired=True, faults_fired=frozenset({("tool", 2)}))
RESUMED = dataclasses.replace(PASSING, faults_fired=frozenset({("tool", 2)}))


def one_repeat(make_lane, scenario, *, install="", **lane_fields):
    lane = make_lane(scenarios=(scenario,), required_env=("TOKEN",), install=install,
                     **lane_fields)
    return build_plan(lane, "run-1", repeats=1, seed=5)


def events(tmp_path, result, kind):
    lines = (tmp_path / result.transcript).read_text().splitlines()
    return [event["payload"] for event in map(json.loads, lines)
            if event.get("channel") == "harness" and event["type"] == kind]


def test_each_start_names_the_scenario_the_repeat_and_the_attempt(make_lane, tmp_path):
    plan = one_repeat(make_lane, RESUMING)
    runner = ScriptedRunner(PASSING, KILLED, RESUMED)
    [result] = run(plan, tmp_path, runner).repeats
    probe, first, second = runner.requests
    scenario = {"id": "a", "task": "t", "input": {"q": 1}, "script": [{"say": "hi"}],
                "faults": [{"point": "tool", "occurrence": 2, "error": "boom",
                            "retryable": True}]}
    seed = plan.items[0].seed
    assert probe.start is None and probe.kill_at is None
    # The run's id as a worker is told it: a digest, nothing of when the run began.
    assert first.start == {"type": "start", "run_id": worker_run_id("run-1"), "scenario": scenario,
                           "repeat": 1, "seed": seed, "attempt": 1, "resume": False}
    assert second.start == {**first.start, "attempt": 2, "resume": True}
    # The crash is injected once: the resumed attempt must finish.
    assert (first.kill_at, second.kill_at) == (RESUMING.kill_at, None)
    assert first.cwd == second.cwd != probe.cwd
    assert events(tmp_path, result, "restart") == [{"attempt": 2, "resume": True}]
    assert (result.outcome, result.attempts) == (Outcome.PASS, 2)


def test_the_request_carries_the_plan(make_lane, tmp_path):
    plan = one_repeat(make_lane, RESUMING, limits=Limits(memory_mb=512))
    runner = ScriptedRunner(PASSING, KILLED, RESUMED)
    run(plan, tmp_path, runner)
    for request in runner.requests:
        assert request.argv == (sys.executable, "worker.py")
        assert request.timeout_s == plan.timeout_s == 30.0
        assert request.hello == {"type": "hello", "protocol": PROTOCOL_VERSION, "lane": "demo"}
        assert request.limits == plan.limits and request.limits.memory_mb == 512
        assert (request.network, request.filesystem) == (Network.HOST, Filesystem.WORKSPACE)
        assert SECRET not in request.redactor.cut(f"say {SECRET}", 100)


def test_every_check_is_in_the_transcript(make_lane, tmp_path):
    scenario = Scenario("a", "t", {}, Expectations(output_equals="hi", stop_reason="end"))
    [result] = run(one_repeat(make_lane, scenario), tmp_path,
                   ScriptedRunner(PASSING, PASSING)).repeats
    assert events(tmp_path, result, "check") == [
        {"name": "stop_reason", "ok": False, "expected": "end", "actual": "done"},
        {"name": "output_equals", "ok": True, "expected": "hi", "actual": "hi"}]
    [verdict] = events(tmp_path, result, "attribution")
    assert verdict == {"outcome": "agent", "cause": "wrong_stop_reason",
                       "detail": result.detail}


def test_a_resumed_repeat_is_judged_on_what_every_attempt_did(make_lane, tmp_path):
    scenario = dataclasses.replace(
        RESUMING, faults=(Fault("tool", 2), Fault("db", 1)),
        expect=Expectations(output_equals="hi", tool_calls={"a": 3, "b": 1},
                            script_consumed=True))
    killed = dataclasses.replace(
        KILLED, tool_calls={"a": 2}, faults_fired=frozenset({("tool", 2)}), model_turns=5,
        trajectory=("a:ok", "a:ok"), path=("tool/call a@1",), duration_s=1.0, cpu_s=9.0,
        peak_rss_mb=30.0, path_hash="1" * 64, trajectory_hash="2" * 64)
    resumed = dataclasses.replace(
        RESUMED, tool_calls={"a": 1, "b": 1}, faults_fired=frozenset({("db", 1)}),
        model_turns=1, trajectory=("a:ok", "b:ok"), path=("tool/call b@2",), duration_s=2.0,
        cpu_s=0.5, peak_rss_mb=20.0, peak_tmpfs_mb=4.0, path_hash="3" * 64,
        trajectory_hash="4" * 64, ready=ready("1.0"))
    [result] = run(one_repeat(make_lane, scenario), tmp_path,
                   ScriptedRunner(PASSING, killed, resumed)).repeats
    # Tool calls and fired faults add up; the scripted turns are the last attempt's.
    assert (result.outcome, result.cause) == (Outcome.PASS, Cause.PASSED), result.detail
    assert result.attempts == 2 and result.duration_s == 3.0
    assert (result.cpu_s, result.peak_rss_mb, result.peak_tmpfs_mb) == (0.5, 30.0, 4.0)
    assert result.trajectory == ("a:ok", "a:ok", "a:ok", "b:ok")
    assert result.path == ("tool/call a@1", "tool/call b@2")
    assert result.trajectory_hash == hashlib.sha256(b"2" * 64 + b"4" * 64).hexdigest()
    assert result.path_hash == hashlib.sha256(b"1" * 64 + b"3" * 64).hexdigest()
    assert result.identities == (("fw", "1.0"), ("fw", "1.0"))


ONE_CALL = {"a": 1}


@pytest.mark.parametrize("first, second, cause", [
    # The killed attempt's scripted turns are lost with it: were they summed, 2 + 1 would
    # miss the script of 1 turn.
    ({"model_turns": 2, "tool_calls": ONE_CALL}, {"model_turns": 1}, Cause.PASSED),
    # (A check failed after alk's kill: the framework's, docs/causes.md.)
    ({"model_turns": 1, "tool_calls": ONE_CALL}, {"model_turns": 0}, Cause.STATE_LOST),
    # Tool calls add up over attempts: one and one make two, the effect repeated.
    ({"tool_calls": ONE_CALL}, {"tool_calls": ONE_CALL, "model_turns": 1},
     Cause.EFFECT_REPEATED),
    # A fault fired before the kill counts.
    ({"tool_calls": ONE_CALL}, {"model_turns": 1, "faults_fired": frozenset()}, Cause.PASSED),
    ({"tool_calls": ONE_CALL, "faults_fired": frozenset()},
     {"model_turns": 1, "faults_fired": frozenset()}, Cause.FAULT_NOT_FIRED),
])
def test_what_each_attempt_did_decides(make_lane, tmp_path, first, second, cause):
    scenario = dataclasses.replace(RESUMING, expect=Expectations(
        output_equals="hi", tool_calls=ONE_CALL, script_consumed=True))
    runner = ScriptedRunner(PASSING, dataclasses.replace(KILLED, **first),
                            dataclasses.replace(RESUMED, **second))
    [result] = run(one_repeat(make_lane, scenario), tmp_path, runner).repeats
    assert result.cause == cause, result.detail


def test_a_killed_attempts_violations_and_uncounted_calls_stay_with_the_repeat(make_lane,
                                                                               tmp_path):
    violated = dataclasses.replace(KILLED, violation_count=3, violations=(
        Violation("not_json", 3, "line is not JSON"),))
    [result] = run(one_repeat(make_lane, RESUMING), tmp_path,
                   ScriptedRunner(PASSING, violated, RESUMED)).repeats
    assert result.cause == Cause.PROTOCOL_VIOLATION and result.violations == 3
    assert result.detail == "stdout line 3: not_json: line is not JSON (+2 more)"
    scenario = dataclasses.replace(RESUMING, expect=Expectations(tool_calls={"c": 0}))
    flooded = dataclasses.replace(KILLED, uncounted_tool_calls=2)
    [result] = run(one_repeat(make_lane, scenario), tmp_path / "b",
                   ScriptedRunner(PASSING, flooded, RESUMED)).repeats
    # A check failed after alk's kill: the framework's (docs/causes.md).
    assert result.cause == Cause.STATE_LOST and "unknown: 2 call(s)" in result.detail


def test_a_kill_that_never_fired_voids_the_repeat_and_nothing_restarts(make_lane, tmp_path):
    runner = ScriptedRunner(PASSING, RESUMED)
    [result] = run(one_repeat(make_lane, RESUMING), tmp_path, runner).repeats
    assert len(runner.requests) == 2 and result.attempts == 1
    assert (result.outcome, result.cause) == (Outcome.LANE_INFRA, Cause.KILL_NOT_FIRED)
    assert "kill_at event never came" in result.detail


def test_attempts_stop_at_a_harness_error_or_at_max_attempts(make_lane, tmp_path):
    broken = dataclasses.replace(KILLED, harness_error="the transcript could not be written")
    runner = ScriptedRunner(PASSING, broken, RESUMED)
    [result] = run(one_repeat(make_lane, RESUMING), tmp_path, runner).repeats
    assert len(runner.requests) == 2 and result.cause == Cause.HARNESS_ERROR
    runner = ScriptedRunner(PASSING, KILLED, KILLED, RESUMED)
    [result] = run(one_repeat(make_lane, RESUMING), tmp_path / "b", runner).repeats
    assert len(runner.requests) == 3 and result.attempts == 2 and result.cause == Cause.PASSED


def test_peaks_nobody_measured_stay_unknown(make_lane, tmp_path):
    [result] = run(one_repeat(make_lane, RESUMING), tmp_path,
                   ScriptedRunner(PASSING, KILLED, RESUMED)).repeats
    assert (result.peak_rss_mb, result.peak_tmpfs_mb) == (None, None)


def test_every_repeat_must_report_the_probes_framework_and_version(make_lane, tmp_path):
    plan = one_repeat(make_lane, Scenario("a", "t", {}, Expectations(output_equals="hi")))
    other = dataclasses.replace(PASSING, ready=ready("1.5"))
    [result] = run(plan, tmp_path, ScriptedRunner(PASSING, other)).repeats
    assert (result.outcome, result.cause) == (Outcome.FRAMEWORK_RUNTIME, Cause.IDENTITY_CHANGED)
    assert result.identities == (("fw", "1.5"),)
    execution = run(plan, tmp_path / "b", ScriptedRunner(
        dataclasses.replace(PASSING, ready=ready("1.0", "other"))))
    assert execution.void.cause == Cause.FRAMEWORK_MISMATCH and execution.repeats == []
    assert execution.preflight.framework == "other"


MISSING = Observation(spawned=True, exit_code=1,
                      stderr_tail="Traceback...\nModuleNotFoundError: No module named 'fw'\n")


@pytest.mark.parametrize("probe, install, detail", [
    (MISSING, "pip install fw", "; install it: pip install fw"),
    (MISSING, "", "No module named 'fw'"),
    (dataclasses.replace(PASSING, ready=ready("0.1")), "pip install fw", "'>=1.0,<2'"),
])
def test_a_missing_framework_is_reported_with_the_lanes_install_command(
        make_lane, tmp_path, probe, install, detail):
    plan = one_repeat(make_lane, RESUMING, install=install)
    execution = run(plan, tmp_path, ScriptedRunner(probe))
    assert execution.void.detail.endswith(detail)
    assert execution.void.detail.count("install it") == (1 if install and probe is MISSING
                                                         else 0)


def test_each_finished_repeat_is_reported_as_it_ends(plan, tmp_path):
    seen = []
    execution = run(plan, tmp_path, ScriptedRunner(PASSING, PASSING, PASSING, PASSING),
                    on_repeat=lambda result, so_far: seen.append((result, len(so_far.repeats))))
    assert seen == [(result, n) for n, result in enumerate(execution.repeats, start=1)]


SANDBOXED = dataclasses.replace(PROCESS_GROUP_ONLY, networks=(Network.NONE, Network.HOST),
                                filesystems=(Filesystem.SANDBOX, Filesystem.WORKSPACE))


class SandboxRunner(ScriptedRunner):
    isolation = SANDBOXED


def refused_before_start(plan, tmp_path, environ=None) -> str:
    """The detail of a run voided before any process started, for a sandbox it cannot use."""
    runner = SandboxRunner(PASSING)
    execution = run(plan, tmp_path, runner, environ)
    assert runner.requests == [] and execution.void.cause == Cause.SPAWN_FAILED
    return execution.void.detail


def test_a_command_naming_what_the_sandbox_hides_voids_the_run_before_it_starts(
        make_lane, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    plan = one_repeat(make_lane, RESUMING, command=("{python}", "-m", "w", str(home)))
    assert refused_before_start(plan, tmp_path) == (
        f"lanes/demo.toml: command: {home} lies outside what the sandbox shows a worker (the "
        "lane's folder unless it holds the home folder, the program's folder, the interpreter, "
        "/usr): move the worker into a folder of its own, outside the home folder itself")
    # Under the weaker file system level the same command runs.
    plan = one_repeat(make_lane, RESUMING, command=("{python}", "-m", "w", str(home)),
                      filesystem="workspace")
    assert run(plan, tmp_path / "b", SandboxRunner(PASSING, KILLED, RESUMED)).void is None


@pytest.mark.skipif(worker_uid() is None, reason="the sandboxed worker runs as alk's own user")
def test_a_program_nobody_may_read_voids_the_run_before_it_starts(make_lane, tmp_path):
    program = tmp_path / "w.py"
    program.write_text("")
    program.chmod(0o600)
    plan = one_repeat(make_lane, RESUMING, command=("{python}", str(program)))
    detail = refused_before_start(plan, tmp_path)
    assert detail.startswith(
        f"lanes/demo.toml: command: the sandboxed worker runs as nobody (uid {worker_uid()})")
    assert "chmod o+rX" in detail
    program.chmod(0o644)
    assert run(plan, tmp_path / "b", SandboxRunner(PASSING, KILLED, RESUMED)).void is None


@pytest.mark.parametrize("consumed, turns, cause, expected", [
    (True, 2, Cause.PASSED, "all 2 turns used"),
    (True, 1, Cause.SCRIPT_NOT_CONSUMED, "all 2 turns used"),
    # A scenario may require that the framework stop early, before the script runs out.
    (False, 1, Cause.PASSED, "not all 2 turns used"),
    (False, 2, Cause.SCRIPT_NOT_CONSUMED, "not all 2 turns used"),
])
def test_the_scripted_turns_used_are_checked_both_ways(make_lane, tmp_path, consumed, turns,
                                                       cause, expected):
    scenario = Scenario("a", "t", {}, Expectations(script_consumed=consumed),
                        script=({"say": "a"}, {"say": "b"}))
    used = dataclasses.replace(PASSING, model_turns=turns)
    [result] = run(one_repeat(make_lane, scenario), tmp_path,
                   ScriptedRunner(PASSING, used)).repeats
    assert result.cause == cause
    [check] = events(tmp_path, result, "check")
    assert check == {"name": "script_consumed", "ok": cause == Cause.PASSED,
                     "expected": expected, "actual": f"{turns} turns used"}


def test_what_stops_a_run_before_it_starts_is_said_whole(make_lane, tmp_path):
    lane = make_lane(required_env=("TOKEN", "OTHER"))
    execution = run(build_plan(lane, "run-1", repeats=1, seed=1), tmp_path, ScriptedRunner(),
                    environ={"PATH": "/bin"})
    assert execution.void.detail == ("required_env TOKEN, OTHER not set in alk's environment; "
                                     "nothing was started")


def test_a_probe_that_breaks_alk_voids_the_run_with_a_redacted_reason(plan, tmp_path):
    execution = run(plan, tmp_path, ScriptedRunner(RuntimeError(f"{SECRET} " + "x" * 900)))
    assert execution.void.cause == Cause.HARNESS_ERROR and execution.repeats == []
    assert execution.void.detail.startswith("the preflight probe failed: RuntimeError: ")
    assert "tok-value" not in execution.void.detail and len(execution.void.detail) <= 501


def test_secrets_are_redacted_from_what_the_worker_names(plan, tmp_path):
    named = dataclasses.replace(PASSING, ready=ready("1.0", f"fw-{SECRET}"))
    execution = run(plan, tmp_path, ScriptedRunner(named))
    assert execution.void.cause == Cause.FRAMEWORK_MISMATCH
    assert "tok-value" not in execution.preflight.framework + execution.void.detail
    # The runner redacts stderr as it reads it; attribution redacts what it quotes again.
    crashed = Observation(spawned=True, exit_code=1, stderr_tail=f"bad key {SECRET}\n")
    assert "tok-value" not in run(plan, tmp_path / "b", ScriptedRunner(crashed)).void.detail
    leaking = dataclasses.replace(PASSING, result={**PASSING.result,
                                                   "output": SECRET})
    result = run(plan, tmp_path / "c", ScriptedRunner(PASSING, leaking, PASSING, PASSING)
                 ).repeats[0]
    assert result.cause == Cause.WRONG_OUTPUT and "tok-value" not in result.detail
    assert "tok-value" not in (tmp_path / "c" / result.transcript).read_text()


@pytest.mark.slow
def test_the_sdk_a_worker_imports_is_alks_and_read_only(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    run(plan, tmp_path, runner, keep_workspaces=True)
    sdk = Path(runner.requests[1].env["PYTHONPATH"])
    found = subprocess.run(
        [sys.executable, "-c", "import alk, alk.worker; print(alk.__file__); print(alk.__doc__)"],
        env={"PYTHONPATH": str(sdk)}, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert found.stdout.splitlines() == [str(sdk / "alk" / "__init__.py"),
                                         "The alk worker SDK, as alk hands it to workers."]
    for path in (sdk, *sdk.rglob("*")):
        assert path.stat().st_mode & 0o777 == (0o555 if path.is_dir() else 0o444), path


def test_a_sandboxed_run_asks_for_the_sandbox_and_shows_the_program(make_lane, tmp_path,
                                                                   monkeypatch):
    bin_dir, lanes = tmp_path / "bin", tmp_path / "lanes"
    bin_dir.mkdir()
    lanes.mkdir()
    (bin_dir / "tool").write_text("#!/bin/sh\n")
    (bin_dir / "tool").chmod(0o755)
    plan = one_repeat(make_lane, RESUMING, command=("tool", "--flag"), root=lanes)
    runner = SandboxRunner(PASSING, KILLED, RESUMED)
    environ = {"TOKEN": SECRET, "PATH": str(bin_dir)}
    execution = run(plan, tmp_path, runner, environ=environ)
    assert execution.void is None
    request = runner.requests[1]
    assert (request.filesystem, request.network) == (Filesystem.SANDBOX, Network.NONE)
    assert str(bin_dir / "tool") in request.visible and str(lanes) in request.visible


@pytest.mark.skipif(worker_uid() is None, reason="the sandboxed worker runs as alk's own user")
def test_a_program_found_through_path_must_be_readable_too(make_lane, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tool").write_text("#!/bin/sh\n")
    (bin_dir / "tool").chmod(0o700)
    plan = one_repeat(make_lane, RESUMING, command=("tool",))
    detail = refused_before_start(plan, tmp_path, {"TOKEN": "t", "PATH": str(bin_dir)})
    assert detail == (
        f"lanes/demo.toml: command: the sandboxed worker runs as nobody (uid {worker_uid()}) "
        f"and cannot read {bin_dir / 'tool'} (mode 0700, no o+r): make it "
        "readable by others (chmod o+rX), or set filesystem = \"workspace\" in the lane")


class WritingRunner(ScriptedRunner):
    """Leaves `out.json` in the repeat's workspace, as a worker's tool would."""

    def run(self, request, gate, transcript):
        if request.start is not None:
            (Path(request.cwd) / "out.json").write_text('[1, 2]')
        return super().run(request, gate, transcript)


def test_the_workspace_the_worker_wrote_is_what_is_checked(make_lane, tmp_path):
    scenario = Scenario("a", "t", {}, Expectations(files=(FileExpectation("out.json",
                                                                         json_length=2),)))
    [result] = run(one_repeat(make_lane, scenario), tmp_path,
                   WritingRunner(PASSING, PASSING)).repeats
    assert result.cause == Cause.PASSED, result.detail


def test_a_transcript_that_cannot_be_opened_voids_only_its_repeat(plan, tmp_path):
    (tmp_path / "transcripts" / "run-1").mkdir(parents=True)
    (tmp_path / "transcripts" / "run-1" / "a").write_text("not a folder")
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    execution = run(plan, tmp_path, runner)
    assert [r.cause for r in execution.repeats] == [Cause.HARNESS_ERROR] * 3
    assert {r.sha256 for r in execution.repeats} == {""}
    assert not any(Path(request.cwd).exists() for request in runner.requests)


def test_a_killed_repeat_keeps_its_signal(plan, tmp_path):
    killed = dataclasses.replace(PASSING, exit_code=None, signal=9, result=None)
    result = run(plan, tmp_path, ScriptedRunner(PASSING, killed, PASSING, PASSING)).repeats[0]
    assert (result.signal, result.exit_code, result.cause) == (9, None, Cause.KILLED_BY_SIGNAL)


def test_the_largest_peak_of_any_attempt_is_the_repeats(make_lane, tmp_path):
    killed = dataclasses.replace(KILLED, peak_tmpfs_mb=8.0, peak_rss_mb=5.0)
    resumed = dataclasses.replace(RESUMED, peak_tmpfs_mb=4.0, peak_rss_mb=6.0)
    [result] = run(one_repeat(make_lane, RESUMING), tmp_path,
                   ScriptedRunner(PASSING, killed, resumed)).repeats
    assert (result.peak_tmpfs_mb, result.peak_rss_mb) == (8.0, 6.0)


@pytest.mark.parametrize("trajectory, path, budget, kept", [
    (("t" * 10,), ("p" * 90,), 99, False),  # the path counts, not only the trajectory
    (("t" * 10,), ("p" * 90,), 100, True),  # exactly the budget left: kept
])
def test_the_steps_budget_counts_trajectory_and_path(plan, tmp_path, monkeypatch, trajectory,
                                                     path, budget, kept):
    monkeypatch.setattr(repeat, "STEPS_BUDGET_CHARS", budget)
    heavy = dataclasses.replace(PASSING, trajectory=trajectory, path=path)
    result = run(plan, tmp_path, ScriptedRunner(PASSING, heavy, PASSING, PASSING)).repeats[0]
    assert (result.trajectory, result.path) == ((trajectory, path) if kept else ((), ()))


def test_a_claim_of_exactly_the_limit_is_kept_whole(plan, tmp_path):
    for claim, whole in (({"n": "é" * 991}, True), ({"n": "é" * 992}, False)):
        lying = dataclasses.replace(PASSING, result={**PASSING.result, "verification": claim})
        result = run(plan, tmp_path / str(whole), ScriptedRunner(PASSING, lying, PASSING,
                                                                 PASSING)).repeats[0]
        assert (result.claimed == claim) is whole


class VanishingRunner(ScriptedRunner):
    """A worker that removes the run's folder of workspaces (its workspace's parent)."""

    def answer(self, request):
        if request.start is not None and request.start["repeat"] == 1:
            remove_tree(Path(request.cwd).parent)
        return super().answer(request)


def test_a_workspace_that_cannot_be_made_voids_its_repeat_not_the_run(plan, tmp_path):
    execution = run(plan, tmp_path, VanishingRunner(PASSING, PASSING, PASSING, PASSING))
    causes = [r.cause for r in execution.repeats]
    assert causes == [Cause.PASSED, Cause.HARNESS_ERROR, Cause.HARNESS_ERROR]
    assert execution.repeats[1].detail.startswith("FileNotFoundError: ")


def test_a_transcript_that_cannot_be_closed_leaves_the_verdict(plan, tmp_path, monkeypatch):
    close = TranscriptWriter.close

    def full(self):  # the disk fills after the probe
        if "repeat-" in str(self.path):
            raise OSError(28, "No space left on device")
        return close(self)

    monkeypatch.setattr(TranscriptWriter, "close", full)
    execution = run(plan, tmp_path, ScriptedRunner(PASSING, PASSING, PASSING, PASSING))
    assert [(r.cause, r.sha256) for r in execution.repeats] == [(Cause.PASSED, "")] * 3


def test_a_run_prints_nothing(plan, tmp_path, capfd):
    """`alk run --json` owns stdout: preparing the workers' SDK must not write to it."""
    run(plan, tmp_path, ScriptedRunner(PASSING, PASSING, PASSING, PASSING))
    assert capfd.readouterr() == ("", "")


def test_a_secret_cut_in_two_by_a_checks_excerpt_is_still_redacted(plan, tmp_path):
    leaking = dataclasses.replace(PASSING, result={**PASSING.result,
                                                   "output": "x" * 293 + SECRET})
    result = run(plan, tmp_path, ScriptedRunner(PASSING, leaking, PASSING, PASSING)).repeats[0]
    [check] = events(tmp_path, result, "check")
    assert check["actual"].startswith("x" * 293) and "tok-v" not in check["actual"]


def test_a_worker_running_as_alks_user_reads_what_alk_reads(make_lane, tmp_path, monkeypatch):
    monkeypatch.setattr(repeat, "worker_uid", lambda: None)
    program = tmp_path / "w.py"
    program.write_text("")
    program.chmod(0o600)
    plan = one_repeat(make_lane, RESUMING, command=("{python}", str(program)))
    assert run(plan, tmp_path, SandboxRunner(PASSING, KILLED, RESUMED)).void is None


def test_a_lane_that_cannot_run_where_the_probe_ran_voids_the_run_for_that_reason(plan,
                                                                                   tmp_path):
    # On a cluster the probe runs on a worker, which may lack what the lane needs.
    import contextlib

    from alk.attribution.outcome import void
    from alk.execute.repeat import RunVoid

    class Lane:
        workspaces = jobs = None

        def probe(self):
            raise RunVoid(void(Cause.ENV_MISSING, "required_env TOKEN not set on worker w1"))

    class Engine:
        @contextlib.contextmanager
        def open(self, *args):
            yield Lane()

    execution = execute(plan, tmp_path, Redactor(), engine=Engine())
    assert execution.void.cause == Cause.ENV_MISSING and "w1" in execution.void.detail
    assert execution.repeats == []


# --- what the repeats of a lane share: cores, start slots, opening the lane -----------------

def test_cores_are_the_affinity_or_else_the_cpu_count_and_never_fewer_than_one(monkeypatch):
    monkeypatch.setattr(repeat.os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert repeat.cores() == 1
    monkeypatch.delattr(repeat.os, "sched_getaffinity", raising=False)  # not Linux
    for count, expected in ((None, 1), (1, 1), (4, 4)):
        monkeypatch.setattr(repeat.os, "cpu_count", lambda: count)
        assert repeat.cores() == expected


@pytest.mark.parametrize("slots", [0, 1])
def test_one_start_slot_lets_one_worker_start_at_a_time(slots):
    starts = repeat.StartSlots(slots)
    with starts.slot():
        assert not starts._slots.acquire(blocking=False)
    assert starts._slots.acquire(blocking=False)


def test_a_void_run_says_why_as_its_message():
    from alk.attribution.outcome import void

    reason = void(Cause.ENV_MISSING, "required_env TOKEN not set")
    assert str(repeat.RunVoid(reason)) == "required_env TOKEN not set"


def test_open_lane_names_what_is_missing_and_removes_workspaces_by_default(plan, tmp_path):
    from alk.served_model import ModelSetup

    with pytest.raises(repeat.RunVoid) as caught:
        repeat.open_lane(plan, tmp_path, Redactor(), runner=ScriptedRunner(), environ={})
    assert str(caught.value) == ("required_env TOKEN not set in alk's environment; nothing "
                                 "was started")
    setup = ModelSetup("proxy", upstream="http://127.0.0.1:9/v1", key_env="ALK_KEY")
    proxied = dataclasses.replace(plan, lane=dataclasses.replace(plan.lane, model=setup))
    with pytest.raises(repeat.RunVoid) as caught:
        repeat.open_lane(proxied, tmp_path, Redactor(), runner=ScriptedRunner(),
                         environ={"TOKEN": SECRET})
    assert str(caught.value) == ("lanes/demo.toml: model.key_env names ALK_KEY, which is not "
                                 "set in alk's environment; nothing was started")
    context = repeat.open_lane(plan, tmp_path, Redactor(), runner=ScriptedRunner(),
                               environ={"TOKEN": SECRET})
    assert context.workspaces is None
    context.close()
    assert not context.root.exists()


def test_the_probe_and_every_attempt_wait_for_a_start_slot_under_the_runs_stop(
        make_lane, tmp_path, monkeypatch):
    # A stopped run must not wait out START_WAIT_S for a slot before each worker.
    waited = []

    class Slots(repeat.StartSlots):
        def slot(self, stop=None):
            waited.append(stop)
            return super().slot(stop)

    monkeypatch.setattr(repeat, "StartSlots", Slots)
    plan = one_repeat(make_lane, RESUMING)
    runner = ScriptedRunner(PASSING, KILLED, RESUMED)
    run(plan, tmp_path, runner)
    assert len(waited) == len(runner.requests) == 3
    assert all(stop is not None and stop is request.stop
               for stop, request in zip(waited, runner.requests))


def test_without_an_engine_the_run_uses_threads_for_the_jobs_asked(plan, tmp_path):
    runner = ScriptedRunner(PASSING, PASSING, PASSING, PASSING)
    execution = run(plan, tmp_path, runner, jobs=2)
    assert execution.jobs == 2 and len(execution.repeats) == 3
