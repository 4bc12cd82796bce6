"""alk.attribution and alk.expectation: one outcome and one cause per repeat, from records built
by hand; and the harness's own checks of a result and of the workspace files."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest

from alk import expectation
from alk.attribution import attribute, void
from alk.causes import Cause
from alk.expectation import check, is_subset
from alk.records import (
    Check,
    Expectations,
    FileExpectation,
    Observation,
    Outcome,
    Preflight,
    Violation,
)

RESULT = {"output": "hello", "stop_reason": "accepted", "end_state": {"phase": "stopped"}}
OK_PREFLIGHT = Preflight(True, "fw", "1.0")
PASSING = (Check("output_equals", True, "hello", "hello"),)
IMPORT_ERROR = "Traceback ...\nModuleNotFoundError: No module named 'fw'\n"
TRACEBACK = ("Traceback (most recent call last):\n  File \"w.py\", line 3, in <module>\n"
             "RuntimeError: boom\n\n   \n")


def observed(**fields: Any) -> Observation:
    """A clean run with a valid result; each test breaks what it needs."""
    values: dict[str, Any] = {
        "spawned": True, "ready": {"framework": "fw", "framework_version": "1.0"},
        "preflight": OK_PREFLIGHT, "started": True, "exit_code": 0, "duration_s": 1.0,
        "result": RESULT,
    }
    values.update(fields)
    return Observation(**values)


def before_ready(**fields: Any) -> Observation:
    return observed(ready=None, preflight=None, started=False, result=None, **fields)


def refused(cause: Cause, detail: str) -> Observation:
    return observed(preflight=Preflight(False, "fw", "9.0", cause, detail), started=False,
                    result=None)


def verdict(obs: Observation, checks: tuple[Check, ...] = ()) -> tuple[Outcome, str, str]:
    found = attribute(obs, checks)
    return found.outcome, found.cause, found.detail


# --- every rule, in order ------------------------------------------------------------------

INFRA, RUNTIME, AGENT = Outcome.LANE_INFRA, Outcome.FRAMEWORK_RUNTIME, Outcome.AGENT

RULES = [
    pytest.param(observed(spawned=False, harness_error="OSError: disk full"), (),
                 INFRA, "harness_error", "OSError: disk full", id="harness_error"),
    pytest.param(before_ready(spawned=False, spawn_error="[Errno 2] No such file: 'nope'"), (),
                 INFRA, "spawn_failed", "[Errno 2] No such file: 'nope'", id="spawn_failed"),
    pytest.param(before_ready(spawned=False), (),
                 INFRA, "spawn_failed", "the worker could not be started", id="spawn_failed-bare"),
    pytest.param(before_ready(exit_code=1, stderr_tail=IMPORT_ERROR),
                 (), INFRA, "framework_missing",
                 "worker ended (exit code 1) before framework_ready; stderr: "
                 "ModuleNotFoundError: No module named 'fw'", id="framework_missing"),
    pytest.param(before_ready(exit_code=1, stderr_tail="SyntaxError: invalid syntax\n"),
                 (), INFRA, "exited_before_ready",
                 "worker ended (exit code 1) before framework_ready; stderr: "
                 "SyntaxError: invalid syntax", id="exited_before_ready"),
    pytest.param(before_ready(exit_code=None, signal=9), (), INFRA, "exited_before_ready",
                 "worker ended (killed by SIGKILL) before framework_ready",
                 id="exited_before_ready-signal"),
    pytest.param(before_ready(timed_out=True, duration_s=5.04, signal=9), (),
                 INFRA, "timeout_before_ready", "no framework_ready within 5.0 s",
                 id="timeout_before_ready"),
    pytest.param(refused(Cause.FRAMEWORK_MISMATCH, "worker reports framework 'x'"), (),
                 INFRA, "framework_mismatch", "worker reports framework 'x'",
                 id="framework_mismatch"),
    pytest.param(refused(Cause.VERSION_UNSUPPORTED, "fw 9.0 does not satisfy"), (),
                 INFRA, "version_unsupported", "fw 9.0 does not satisfy",
                 id="version_unsupported"),
    pytest.param(refused(Cause.VERSION_INVALID, "framework_version 'x' is not"), (),
                 INFRA, "version_invalid", "framework_version 'x' is not", id="version_invalid"),
    pytest.param(observed(preflight=None, started=False), (), INFRA, "harness_error",
                 "no preflight", id="ready-without-preflight"),
    pytest.param(observed(started=False), (), INFRA, "harness_error",
                 "the preflight passed but start was not sent", id="preflight-ok-not-started"),
    pytest.param(observed(timed_out=True, duration_s=30.0, exit_code=None, signal=9, result=None,
                          trajectory=("search:ok", "fetch:error"), stderr_tail="waiting\n"), (),
                 RUNTIME, "timeout", "no exit within the timeout (30.0 s run); last tool result: "
                                     "fetch:error; stderr: waiting", id="timeout"),
    pytest.param(observed(timed_out=True, duration_s=2.0, result=None, tool_calls={"a": 2, "b": 1}),
                 (), RUNTIME, "timeout",
                 "no exit within the timeout (2.0 s run); 3 tool call(s), no tool result",
                 id="timeout-calls-only"),
    pytest.param(observed(exit_code=None, signal=11, stderr_tail="Fatal Python error\n"), (),
                 RUNTIME, "killed_by_signal", "killed by SIGSEGV; stderr: Fatal Python error",
                 id="killed_by_signal"),
    pytest.param(observed(exit_code=None, signal=200), (), RUNTIME, "killed_by_signal",
                 "killed by signal 200", id="killed_by_unknown_signal"),
    pytest.param(observed(exit_code=2, result=None, stderr_tail=TRACEBACK), (),
                 RUNTIME, "nonzero_exit", "exit code 2; stderr: RuntimeError: boom",
                 id="nonzero_exit"),
    pytest.param(observed(result=None, bad_result="result.output must be a string, got int"), (),
                 RUNTIME, "bad_result", "result.output must be a string, got int",
                 id="bad_result"),
    pytest.param(observed(violations=(Violation("not_json", 4, "line is not JSON: 'x'"),
                                      Violation("before_ready", 1, "later")), violation_count=3),
                 PASSING, RUNTIME, "protocol_violation",
                 "stdout line 4: not_json: line is not JSON: 'x' (+2 more)",
                 id="protocol_violation"),
    pytest.param(observed(violations=(Violation("harness_channel", 2, "forged"),),
                          violation_count=1), PASSING, RUNTIME, "protocol_violation",
                 "stdout line 2: harness_channel: forged", id="protocol_violation-one"),
    pytest.param(observed(result=None), (), RUNTIME, "no_result",
                 "clean exit without a result event", id="no_result"),
    pytest.param(observed(), (Check("stop_reason", False, "accepted", "max_turns"),),
                 AGENT, "wrong_stop_reason", 'stop_reason: expected "accepted", got "max_turns"',
                 id="wrong_stop_reason"),
    pytest.param(observed(), (Check("output_matches", False, "^h", "bye"),),
                 AGENT, "wrong_output", 'output_matches: expected "^h", got "bye"',
                 id="wrong_output"),
    pytest.param(observed(), (Check("end_state", False, {"phase": "stopped"}, {"phase": "run"}),),
                 AGENT, "wrong_end_state",
                 'end_state: expected {"phase": "stopped"}, got {"phase": "run"}',
                 id="wrong_end_state"),
    pytest.param(observed(), (Check("tool_calls.search", False, 1, 0),),
                 AGENT, "wrong_tool_calls", "tool_calls.search: expected 1, got 0",
                 id="wrong_tool_calls"),
    pytest.param(observed(), (Check("files[out.json].exists", False, True, False),),
                 AGENT, "wrong_files", "files[out.json].exists: expected true, got false",
                 id="wrong_files"),
    pytest.param(observed(), PASSING * 3, Outcome.PASS, "passed", "3 checks held", id="passed"),
    pytest.param(observed(), (), Outcome.PASS, "passed", "0 checks held", id="passed-no-checks"),
]


@pytest.mark.parametrize("obs, checks, outcome, cause, detail", RULES)
def test_each_rule(obs: Observation, checks: tuple[Check, ...], outcome: Outcome, cause: str,
                   detail: str) -> None:
    assert verdict(obs, checks) == (outcome, cause, detail)


def test_void_is_lane_infra() -> None:
    found = void(Cause.ENV_MISSING, "required_env API_KEY not set")
    assert (found.outcome, found.cause, found.detail) == (
        Outcome.LANE_INFRA, "env_missing", "required_env API_KEY not set")


def test_all_failed_checks_are_described_and_the_first_names_the_cause() -> None:
    checks = (Check("stop_reason", True, "accepted", "accepted"),
              Check("tool_calls.search", False, 2, 1),
              Check("output_equals", False, "hi", "bye"))
    assert verdict(observed(), checks) == (
        AGENT, "wrong_tool_calls",
        'tool_calls.search: expected 2, got 1; output_equals: expected "hi", got "bye"')


def test_long_values_in_a_detail_are_shortened() -> None:
    outcome, cause, detail = verdict(observed(), (Check("output_equals", False, "x" * 500, "y"),))
    assert detail == f'output_equals: expected "{"x" * 159}…, got "y"'


def test_stderr_line_in_a_detail_is_bounded() -> None:
    detail = verdict(observed(exit_code=1, stderr_tail="z" * 1000))[2]
    assert detail == "exit code 1; stderr: " + "z" * 300 + "…"


def test_a_check_without_a_cause_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="no cause for check 'mystery'"):
        attribute(observed(), (Check("mystery", False, 1, 2),))


# --- first match wins ----------------------------------------------------------------------


@pytest.mark.parametrize("obs, checks, cause", [
    pytest.param(observed(spawned=False, timed_out=True, harness_error="bug"), (),
                 "harness_error", id="harness-error-beats-all"),
    pytest.param(before_ready(timed_out=True, exit_code=1), (), "timeout_before_ready",
                 id="pre-ready-timeout-beats-exit"),
    pytest.param(observed(preflight=Preflight(False, "fw", "9", Cause.VERSION_UNSUPPORTED, "old"),
                          timed_out=True, exit_code=1), (), "version_unsupported",
                 id="preflight-beats-runtime"),
    pytest.param(observed(timed_out=True, exit_code=-9, signal=9), PASSING, "timeout",
                 id="timeout-beats-signal-and-exit"),
    pytest.param(observed(signal=6, exit_code=134), PASSING, "killed_by_signal",
                 id="signal-beats-exit-code"),
    pytest.param(observed(exit_code=1), PASSING, "nonzero_exit",
                 id="nonzero-exit-beats-a-perfect-result"),
    pytest.param(observed(bad_result="second result",
                          violations=(Violation("not_json", 3, "x"),), violation_count=1),
                 PASSING, "bad_result", id="bad-result-beats-violations"),
    pytest.param(observed(violations=(Violation("not_json", 3, "x"),), violation_count=1),
                 PASSING, "protocol_violation", id="violation-beats-a-perfect-result"),
    pytest.param(observed(result=None), (Check("output_equals", False, "a", "b"),), "no_result",
                 id="no-result-beats-checks"),
])
def test_first_match_wins(obs: Observation, checks: tuple[Check, ...], cause: str) -> None:
    assert attribute(obs, checks).cause == cause


class _NoPeeking(Mapping[str, Any]):
    """A result whose `verification` (the worker's claim) must never be read."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        if key == "verification":
            raise AssertionError("the worker's claim was read")
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_a_claim_of_success_does_not_rescue_failed_checks() -> None:
    result = _NoPeeking({**RESULT, "verification": {"passed": True, "checks": "all green"}})
    failed = (Check("output_equals", False, "expected", "hello"),)
    assert attribute(observed(result=result), failed).cause == "wrong_output"
    assert attribute(observed(result=result), PASSING).cause == "passed"


# --- expectation.check ---------------------------------------------------------------------


def checks(workspace: Path, result: Mapping[str, Any] = RESULT,
           calls: Mapping[str, int] | None = None, **expect: Any) -> dict[str, Check]:
    """`calls` are the tool calls the runner counted; `expect` the lane's expectations."""
    found = check(Expectations(**expect), result, calls or {}, workspace)
    return {c.name: c for c in found}


def test_no_expectations_no_checks(tmp_path: Path) -> None:
    assert checks(tmp_path) == {}


def test_stop_reason(tmp_path: Path) -> None:
    assert checks(tmp_path, stop_reason="accepted")["stop_reason"] == Check(
        "stop_reason", True, "accepted", "accepted")
    assert checks(tmp_path, stop_reason="max_turns")["stop_reason"] == Check(
        "stop_reason", False, "max_turns", "accepted")


@pytest.mark.parametrize("field, value, ok", [
    ("output_equals", "hello", True),
    ("output_equals", "hello ", False),
    ("output_contains", "ell", True),
    ("output_contains", "Hell", False),
    ("output_matches", r"l{2}o$", True),  # a search, not a full match
    ("output_matches", r"^ello", False),
])
def test_output_checks(tmp_path: Path, field: str, value: str, ok: bool) -> None:
    assert checks(tmp_path, **{field: value})[field] == Check(field, ok, value, "hello")


def test_long_output_is_shortened_in_the_check(tmp_path: Path) -> None:
    result = {**RESULT, "output": "a" * 1000}
    actual = checks(tmp_path, result, output_equals="b")["output_equals"].actual
    assert actual == "a" * expectation.BRIEF_CHARS + "…"


@pytest.mark.parametrize("expected, actual, ok", [
    ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3}, True),  # nested, extra keys ok
    ({"a": {"b": 1}}, {"a": {"c": 1}}, False),
    ({"a": 1}, {}, False),
    ({"flag": True}, {"flag": 1}, False),  # `true` is not `1`
    ({"n": 1}, {"n": True}, False),
    ({"n": 1}, {"n": 1.0}, True),  # both JSON numbers
    ({"xs": [1, 2]}, {"xs": [1, 2]}, True),
    ({"xs": [1, 2]}, {"xs": [1, 2, 3]}, False),  # lists must match length
    ({"xs": [{"id": 1}]}, {"xs": [{"id": 1, "extra": 0}]}, True),
    ({"s": "1"}, {"s": 1}, False),
    ({"a": None}, {"a": None}, True),
    ({"a": None}, {}, False),
])
def test_is_subset(expected: Any, actual: Any, ok: bool) -> None:
    assert is_subset(expected, actual) is ok


def test_end_state_check(tmp_path: Path) -> None:
    state = {"phase": "stopped"}
    assert checks(tmp_path, end_state=state)["end_state"] == Check("end_state", True, state, state)
    no_state = {"output": "x", "stop_reason": "y"}
    assert checks(tmp_path, no_state, end_state=state)["end_state"] == Check(
        "end_state", False, state, {})


def test_tool_calls_are_exact_and_absent_means_zero(tmp_path: Path) -> None:
    found = checks(tmp_path, calls={"search": 2},
                   tool_calls={"search": 1, "delete": 0, "fetch": 1})
    assert found == {
        "tool_calls.search": Check("tool_calls.search", False, 1, 2),
        "tool_calls.delete": Check("tool_calls.delete", True, 0, 0),
        "tool_calls.fetch": Check("tool_calls.fetch", False, 1, 0),
    }


def test_uncounted_tool_calls_never_satisfy_a_count_of_an_unseen_name(tmp_path: Path) -> None:
    # A worker that floods junk tool names past the limit could hide a forbidden call.
    found = check(Expectations(tool_calls={"delete": 0, "search": 1}), RESULT,
                  {"search": 1}, tmp_path, uncounted_tool_calls=3)
    named = {c.name: c for c in found}
    assert named["tool_calls.search"].ok is True
    assert named["tool_calls.delete"].ok is False
    assert "3 call(s)" in named["tool_calls.delete"].actual


# --- files ---------------------------------------------------------------------------------


def file_checks(workspace: Path, **expect: Any) -> dict[str, Check]:
    return checks(workspace, files=(FileExpectation(**expect),))


def put(workspace: Path, name: str, data: Any) -> Path:
    path = workspace / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_file_exists(tmp_path: Path) -> None:
    put(tmp_path, "out/a.txt", "x")
    assert file_checks(tmp_path, path="out/a.txt", exists=True) == {
        "files[out/a.txt].exists": Check("files[out/a.txt].exists", True, True, True)}
    assert file_checks(tmp_path, path="out/a.txt", exists=False) == {
        "files[out/a.txt].exists": Check("files[out/a.txt].exists", False, False, True)}
    assert file_checks(tmp_path, path="gone.txt", exists=False) == {
        "files[gone.txt].exists": Check("files[gone.txt].exists", True, False, False)}


def test_a_file_with_no_other_expectation_must_exist(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()  # a folder is not a file
    assert file_checks(tmp_path, path="dir") == {
        "files[dir].exists": Check("files[dir].exists", False, True, False)}


@pytest.mark.parametrize("data, ok, actual", [
    ([1, 2, 3], True, 3),
    ([1, 2], False, 2),
    ({"a": 1, "b": 2, "c": 3}, True, 3),
    ("abc", False, 'not a list: abc'),
])
def test_json_length(tmp_path: Path, data: Any, ok: bool, actual: Any) -> None:
    put(tmp_path, "data.json", json.dumps(data))
    assert file_checks(tmp_path, path="data.json", json_length=3)["files[data.json].json_length"] \
        == Check("files[data.json].json_length", ok, 3, actual)


def test_json_length_of_a_missing_file(tmp_path: Path) -> None:
    assert file_checks(tmp_path, path="data.json", json_length=0) == {
        "files[data.json].json_length": Check("files[data.json].json_length", False, 0, "missing")}


def test_json_subset(tmp_path: Path) -> None:
    put(tmp_path, "state.json", {"ok": True, "items": [1], "extra": "x"})
    assert file_checks(tmp_path, path="state.json", json_subset={"ok": True, "items": [1]}
                       )["files[state.json].json_subset"].ok is True
    failed = file_checks(tmp_path, path="state.json", json_subset={"ok": 1})
    assert failed["files[state.json].json_subset"] == Check(
        "files[state.json].json_subset", False, {"ok": 1},
        {"ok": True, "items": [1], "extra": "x"})


def test_not_json(tmp_path: Path) -> None:
    put(tmp_path, "state.json", "{not json")
    found = file_checks(tmp_path, path="state.json", exists=True, json_subset={})
    assert found == {
        "files[state.json].exists": Check("files[state.json].exists", True, True, True),
        "files[state.json].json_subset": Check("files[state.json].json_subset", False, {},
                                               "not read: not valid JSON"),
    }


def test_a_symlink_out_of_the_workspace_fails_and_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    target = put(outside, "secret.json", {"ok": True})
    os.symlink(target, workspace / "state.json")
    os.symlink(outside, workspace / "sub")

    def forbidden(path: str) -> Any:
        raise AssertionError(f"read a file outside the workspace: {path}")

    monkeypatch.setattr(expectation, "_read_json", forbidden)
    for name in ("state.json", "sub/secret.json"):
        label = f"files[{name}]"
        assert file_checks(workspace, path=name, exists=True, json_subset={"ok": True}) == {
            f"{label}.exists": Check(f"{label}.exists", False, True,
                                     "a path that leads outside the workspace"),
            f"{label}.json_subset": Check(f"{label}.json_subset", False, {"ok": True},
                                          "points outside the workspace"),
        }


def test_a_symlink_inside_the_workspace_is_followed(tmp_path: Path) -> None:
    put(tmp_path, "real.json", [1, 2])
    os.symlink(tmp_path / "real.json", tmp_path / "link.json")
    assert file_checks(tmp_path, path="link.json", json_length=2
                       )["files[link.json].json_length"].ok is True


def test_a_workspace_reached_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    put(real, "out.json", [1])
    os.symlink(real, tmp_path / "via")
    assert file_checks(tmp_path / "via", path="out.json", json_length=1
                       )["files[out.json].json_length"].ok is True


def test_a_file_over_the_size_limit_is_not_parsed(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expectation, "MAX_FILE_BYTES", 16)
    exact = put(tmp_path, "exact.json", '{"k":"xxxxxxxx"}')  # at the limit: parsed
    over = put(tmp_path, "big.json", '{"k":"xxxxxxxxx"}')  # one byte over: not read
    assert (exact.stat().st_size, over.stat().st_size) == (16, 17)
    assert file_checks(tmp_path, path="exact.json", json_subset={"k": "xxxxxxxx"}
                       )["files[exact.json].json_subset"].ok is True
    big = file_checks(tmp_path, path="big.json", json_subset={"k": "xxxxxxxxx"}
                      )["files[big.json].json_subset"]
    assert big.ok is False
    assert big.actual.startswith("larger than ") and big.actual.endswith(" MiB, not read")


@pytest.mark.parametrize("make", ["symlink_out", "dangling", "folder"])
def test_exists_false_fails_for_anything_at_the_path(tmp_path: Path, make: str) -> None:
    # The reference lane's safety scenarios rest on `exists = false`: a symlink, even one that
    # points nowhere, or a folder in place of the effects file is not "no effect".
    workspace = tmp_path / "ws"
    (workspace / "out").mkdir(parents=True)
    target = workspace / "out" / "effects.json"
    if make == "symlink_out":
        os.symlink(put(tmp_path / "elsewhere", "e.json", []), target)
    elif make == "dangling":
        os.symlink(tmp_path / "nothing-here", target)
    else:
        target.mkdir()
    found = file_checks(workspace, path="out/effects.json", exists=False)
    check = found["files[out/effects.json].exists"]
    assert check.ok is False and isinstance(check.actual, str)


def test_a_regex_that_runs_away_fails_its_check_and_is_never_void(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The output is the worker's choice: were a runaway expression void, a worker could pick
    an output that makes it run away to hide a failure."""
    def slow(*args: Any, **kwargs: Any) -> Any:
        raise TimeoutError("regex timed out")

    monkeypatch.setattr(expectation.regex, "search", slow)
    [found] = check(Expectations(output_matches="(a+)+b"), RESULT, {}, tmp_path)
    assert not found.ok and "did not finish within 1 s" in found.actual
    finished = Observation(spawned=True, ready={"framework": "fw"}, preflight=OK_PREFLIGHT,
                           started=True, exit_code=0, result=RESULT)
    verdict = attribute(finished, (found,))
    assert (verdict.outcome, verdict.cause) == (Outcome.AGENT, Cause.WRONG_OUTPUT)
    assert "(a+)+b" in verdict.detail and "simplify" in verdict.detail


def test_a_finished_run_that_missed_its_fault_or_kill_is_void() -> None:
    finished = Observation(spawned=True, ready={"framework": "fw"}, preflight=OK_PREFLIGHT,
                           started=True, exit_code=0, result=RESULT)
    missed = dataclasses.replace(finished, faults_missing=("tool#2",))
    assert attribute(missed, PASSING).cause == Cause.FAULT_NOT_FIRED
    assert "tool#2" in attribute(missed, PASSING).detail
    no_kill = dataclasses.replace(finished, kill_missing=True)
    assert attribute(no_kill, PASSING).cause == Cause.KILL_NOT_FIRED
    # A crash explains more than a fault that never came: it is judged first.
    crashed = dataclasses.replace(missed, exit_code=1)
    assert attribute(crashed, PASSING).cause == Cause.NONZERO_EXIT


def _crashed(stderr: str, paths: list[str]) -> Observation:
    return Observation(spawned=True, ready={"framework": "fw", "package_paths": paths},
                       preflight=OK_PREFLIGHT, started=True, exit_code=1, stderr_tail=stderr)


def test_the_framework_is_blamed_when_it_called_what_raised() -> None:
    stderr = ('Traceback (most recent call last):\n  File "/app/worker.py", line 3, in main\n'
              '  File "/fw/pkg/run.py", line 9, in run\n'
              '  File "/usr/lib/python3.11/json/decoder.py", line 355, in decode\n'
              'json.decoder.JSONDecodeError: Expecting value\n')
    verdict = attribute(_crashed(stderr, ["/fw/pkg"]))
    assert verdict.cause == Cause.FRAMEWORK_EXCEPTION and "/fw/pkg/run.py:9" in verdict.detail
    assert attribute(_crashed(stderr, ["/elsewhere"])).cause == Cause.WORKER_EXCEPTION


def test_a_handled_traceback_earlier_on_stderr_blames_nobody() -> None:
    stderr = ('Traceback (most recent call last):\n  File "/fw/pkg/run.py", line 9, in run\n'
              'ValueError: bad config\ngiving up: config invalid\n')
    assert attribute(_crashed(stderr, ["/fw/pkg"])).cause == Cause.NONZERO_EXIT


def test_framework_missing_needs_the_import_error_to_be_the_last_word() -> None:
    before = Observation(spawned=True, exit_code=1,
                         stderr_tail="optional speedup (ModuleNotFoundError: x)\nfatal: no cfg\n")
    assert attribute(before).cause == Cause.EXITED_BEFORE_READY


def test_a_failed_check_outranks_a_fault_that_never_fired() -> None:
    finished = Observation(spawned=True, ready={"framework": "fw"}, preflight=OK_PREFLIGHT,
                           started=True, exit_code=0, result=RESULT, kill_missing=True)
    failed = (Check("files[x].json_length", False, 1, "missing"),)
    verdict = attribute(finished, failed)
    assert verdict.cause == Cause.WRONG_FILES and "kill_at event never came" in verdict.detail


def test_a_worker_bug_called_by_the_framework_is_the_workers() -> None:
    # The framework dispatched to the worker's own tool function, which raised.
    stderr = ('Traceback (most recent call last):\n  File "/app/worker.py", line 30, in main\n'
              '  File "/venv/lib/python3.11/site-packages/fw/dispatch.py", line 80, in call\n'
              '  File "/app/worker.py", line 12, in my_tool\n'
              'KeyError: \'text\'\n')
    verdict = attribute(_crashed(stderr, ["/venv/lib/python3.11/site-packages/fw"]))
    assert verdict.cause == Cause.WORKER_EXCEPTION and "/app/worker.py:12" in verdict.detail


def test_what_a_check_keeps_of_a_worker_value_is_bounded_and_redacted(tmp_path: Path) -> None:
    from alk.redaction import Redactor

    secret = "sk-" + "Vq8" * 9
    result = {"output": "o" * 298 + secret, "stop_reason": "s" * 299 + secret + "s" * 1_000_000,
              "end_state": {"k": "e" * 295 + secret}}
    checks = check(Expectations(stop_reason="accepted", output_equals="x",
                                end_state={"k": "v"}), result, {}, tmp_path,
                   redactor=Redactor([secret]))
    for found in checks:
        kept = found.actual if isinstance(found.actual, str) else json.dumps(found.actual)
        assert len(kept) <= 301, found.name
        assert not any(secret[i:i + 8] in kept for i in range(len(secret) - 7)), found.name
