"""alk.attribution.outcome and alk.attribution.expectation: one outcome and one cause per repeat,
from records built by hand; and the harness's own checks of a result and of the workspace files."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest

from alk.attribution import expectation
from alk.attribution.expectation import check, is_subset
from alk.attribution.outcome import attribute, void
from alk.causes import Cause
from alk.served_model import ModelSeen
from alk.records import (
    Check,
    Expectations,
    FileExpectation,
    Observation,
    Outcome,
    Preflight,
    Violation,
)
from alk.redaction import Redactor

from helpers.observations import (
    AGENT,
    INFRA,
    OK_PREFLIGHT,
    PASSING,
    RESULT,
    RUNTIME,
    observed,
    verdict,
)
from helpers.real_tracebacks import Programs, Ran

IMPORT_ERROR = "Traceback ...\nModuleNotFoundError: No module named 'fw'\n"
TRACEBACK = ("Traceback (most recent call last):\n  File \"w.py\", line 3, in <module>\n"
             "RuntimeError: boom\n\n   \n")


def before_ready(**fields: Any) -> Observation:
    return observed(ready=None, preflight=None, started=False, result=None, **fields)


def refused(cause: Cause, detail: str) -> Observation:
    return observed(preflight=Preflight(False, "fw", "9.0", cause, detail), started=False,
                    result=None)

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
    # The interpreter itself could not start under `--limit memory_mb=5`: the limit is the
    # lane's mistake, not a missing framework (what `exited_before_ready` advises).
    pytest.param(before_ready(exit_code=127, limits={"memory_mb": 5}, stderr_tail=(
                     "/usr/bin/python3: error while loading shared libraries: libpython3.11.so"
                     ".1.0: failed to map segment from shared object\n")),
                 (), INFRA, "limit_before_ready",
                 "limit memory_mb = 5 is too small for the worker to start (exit code 127 "
                 "before framework_ready); stderr: /usr/bin/python3: error while loading shared "
                 "libraries: libpython3.11.so.1.0: failed to map segment from shared object",
                 id="limit_before_ready"),
    pytest.param(before_ready(exit_code=1, limits={"memory_mb": 64}, stderr_tail=(
                     "Traceback ...\nMemoryError\n")), (), INFRA, "limit_before_ready",
                 "limit memory_mb = 64 is too small for the worker to start (exit code 1 "
                 "before framework_ready); stderr: MemoryError", id="limit_before_ready-import"),
    pytest.param(before_ready(exit_code=1, limits={"memory_mb": 64}, stderr_tail=IMPORT_ERROR),
                 (), INFRA, "framework_missing",
                 "worker ended (exit code 1) before framework_ready; stderr: "
                 "ModuleNotFoundError: No module named 'fw'", id="framework_missing-limited"),
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
                 RUNTIME, "nonzero_exit", "exit code 2; RuntimeError: boom",
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
    # Exit status 2: no uncaught exception ended it, so the line after the traceback is not
    # its message but what the worker said after handling it.
    stderr = ('Traceback (most recent call last):\n  File "/fw/pkg/run.py", line 9, in run\n'
              'ValueError: bad config\ngiving up: config invalid\n')
    found = attribute(dataclasses.replace(_crashed(stderr, ["/fw/pkg"]), exit_code=2))
    assert (found.cause, found.detail) == (Cause.NONZERO_EXIT,
                                           "exit code 2; stderr: giving up: config invalid")


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


# --- the details a reviewer reads, and the rules' edges ---------------------------------------


def test_a_resumed_attempt_that_never_became_ready_is_judged_not_voided() -> None:
    for attempts in (2, 3):
        outcome, cause, detail = verdict(before_ready(exit_code=1, attempts=attempts))
        assert (outcome, cause) == (Outcome.FRAMEWORK_RUNTIME, Cause.NONZERO_EXIT)
        assert detail == "exit code 1; the resumed attempt sent no framework_ready"
    assert verdict(before_ready(exit_code=1, attempts=1))[1] == Cause.EXITED_BEFORE_READY


def test_a_hang_after_the_result_says_what_probably_still_runs() -> None:
    _, cause, detail = verdict(observed(timed_out=True, exit_code=None, duration_s=5.0))
    assert cause == Cause.TIMEOUT
    assert detail == ("no exit within the timeout (5.0 s run); a result was sent, then the "
                      "worker did not exit (a thread or child process still running?)")


@pytest.mark.parametrize("fields, hint", [
    ({"trajectory": ("a:ok", "b:error", "c:ok")}, "; last tool result: c:ok"),
    # Under alk's gateway the trajectory is alk's: its last step may be a model call.
    ({"trajectory": ("200:write_report", "tool:write_report:timeout"),
      "model": ModelSeen(mode="script", calls=1)},
     "; last step alk saw: tool:write_report:timeout"),
    ({"tool_calls": {"a": 2, "b": 1}}, "; 3 tool call(s), no tool result"),
    ({}, ""),
])
def test_a_hang_before_the_result_names_the_last_thing_seen(fields: dict, hint: str) -> None:
    _, cause, detail = verdict(observed(timed_out=True, exit_code=None, result=None, **fields))
    assert cause == Cause.TIMEOUT and detail == f"no exit within the timeout (1.0 s run){hint}"


def test_a_hang_before_ready_quotes_the_first_line_refused() -> None:
    violations = (Violation("not_json", 1, "line is not JSON: 'hi'"),
                  Violation("not_object", 2, "line is JSON but not an object: '1'"))
    _, cause, detail = verdict(before_ready(timed_out=True, violations=violations,
                                            violation_count=2))
    assert cause == Cause.TIMEOUT_BEFORE_READY
    assert detail == ("no framework_ready within 1.0 s; stdout line 1 was not accepted: "
                      "not_json: line is not JSON: 'hi'")


@pytest.mark.parametrize("count, more", [(1, ""), (2, " (+1 more)"), (30, " (+29 more)")])
def test_a_protocol_violation_counts_the_others(count: int, more: str) -> None:
    first = Violation("not_json", 4, "line is not JSON")
    _, cause, detail = verdict(observed(violations=(first,), violation_count=count), PASSING)
    assert cause == Cause.PROTOCOL_VIOLATION
    assert detail == f"stdout line 4: not_json: line is not JSON{more}"


@pytest.mark.parametrize("fields, cause", [
    # A clean exit is never a limit's doing, whatever it logged.
    ({"exit_code": 0, "stderr_tail": "MemoryError\n"}, Cause.PASSED),
    ({"exit_code": 1, "stderr_tail": "MemoryError\n"}, Cause.MEMORY_LIMIT),
    # The sign must be among the last five lines of stderr.
    ({"exit_code": 1, "stderr_tail": "MemoryError\n" + "later\n" * 4}, Cause.MEMORY_LIMIT),
    ({"exit_code": 1, "stderr_tail": "MemoryError\n" + "later\n" * 5}, Cause.NONZERO_EXIT),
    # CPU time is measured: a worker that blocks SIGXCPU still dies of the limit.
    ({"exit_code": None, "signal": 9, "cpu_s": 2.5}, Cause.CPU_LIMIT),
    ({"exit_code": None, "signal": 9, "cpu_s": 0.5}, Cause.KILLED_BY_SIGNAL),
    ({"exit_code": None, "signal": 9, "cpu_s": 2.0}, Cause.CPU_LIMIT),  # exactly the limit
    ({"exit_code": None, "signal": 25}, Cause.FILE_SIZE_LIMIT),
])
def test_a_limit_is_blamed_only_when_it_ended_a_failed_run(fields: dict, cause: str) -> None:
    limits = {"memory_mb": 64, "cpu_s": 2, "max_file_mb": 1}
    assert verdict(observed(limits=limits, **fields), PASSING)[1] == cause


def test_cpu_time_nobody_measured_is_no_limits_doing() -> None:
    assert verdict(observed(exit_code=1, cpu_s=None, limits={"cpu_s": 1}), PASSING)[1] == (
        Cause.NONZERO_EXIT)


def test_a_limit_that_was_not_set_is_never_blamed() -> None:
    assert verdict(observed(exit_code=None, signal=25, limits={"memory_mb": 64}),
                   PASSING)[1] == Cause.KILLED_BY_SIGNAL
    assert verdict(observed(exit_code=1, cpu_s=100.0, limits={"memory_mb": 64}),
                   PASSING)[1] == Cause.NONZERO_EXIT


def test_what_never_fired_is_named() -> None:
    missed = observed(faults_missing=("tool#1", "db#2"))
    assert verdict(missed, PASSING)[2] == (
        "declared fault(s) never reported as injected: tool#1, db#2")
    assert verdict(observed(kill_missing=True), PASSING)[2] == (
        "the kill_at event never came: no crash, no resume")


def test_a_detail_quotes_values_as_written() -> None:
    failed = (Check("output_equals", False, "café", "caf\u00e8 ☕"),)
    assert verdict(observed(), failed)[2] == 'output_equals: expected "café", got "cafè ☕"'


def test_only_absolute_package_paths_are_the_frameworks() -> None:
    stderr = ('Traceback (most recent call last):\n  File "fw/run.py", line 9, in run\n'
              'ValueError: x\n')
    assert verdict(_crashed(stderr, [7, "fw"]))[1] == Cause.NONZERO_EXIT
    # A package path is a folder: its name is not a prefix of other folders' names.
    other = stderr.replace('"fw/', '"/opt/Y/')
    assert verdict(_crashed(other, ["/opt/X"]))[1] == Cause.WORKER_EXCEPTION
    # "/" holds every file.
    assert verdict(_crashed(stderr.replace('"fw/', '"/fw/'), ["/"]))[1] == (
        Cause.FRAMEWORK_EXCEPTION)


def test_the_crash_is_the_traceback_that_ends_stderr() -> None:
    handled = ('Traceback (most recent call last):\n  File "/app/worker.py", line 3, in main\n'
               'KeyError: a\nretrying\n')
    fatal = ('Traceback (most recent call last):\n'
             '  File "/usr/lib/python3.11/json/decoder.py", line 355, in decode\n'
             'json.decoder.JSONDecodeError: Expecting value\n\n  \n')
    # Only library frames in the fatal traceback: nobody's code is blamed, not the earlier one.
    assert verdict(_crashed(handled + fatal, ["/fw"]))[1] == Cause.NONZERO_EXIT
    fatal = fatal.replace("/usr/lib/python3.11/json/decoder.py", "/app/worker.py")
    _, cause, detail = verdict(_crashed(handled + fatal, ["/fw"]))
    assert cause == Cause.WORKER_EXCEPTION and detail.endswith("raised at /app/worker.py:355")


def test_a_runaway_expression_is_stopped_and_fails_its_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expectation, "REGEX_TIMEOUT_S", 0.05)
    output = "ab" * 30 + "x"  # exponential backtracking, even for the `regex` module
    [found] = check(Expectations(output_matches="^(a|ab|b)*$"), {**RESULT, "output": output},
                    {}, tmp_path)
    assert found.ok is False and found.expected == "^(a|ab|b)*$"
    assert found.actual == ("not confirmed: the expression did not finish within 0 s on this "
                            "61-character output (simplify the lane's regular expression)")


def test_an_uncounted_call_leaves_the_count_unknown(tmp_path: Path) -> None:
    [found] = check(Expectations(tool_calls={"rm": 0}), RESULT, {"ls": 1}, tmp_path, 4)
    assert found == Check("tool_calls.rm", False, 0, (
        "unknown: 4 call(s) to tool names past the per-run limit were not counted by name"))


@pytest.mark.parametrize("make, seen", [
    (lambda p: p.mkdir(), "a folder"),
    (lambda p: p.symlink_to(p.parent / "nowhere"), "a dangling symlink"),
    (lambda p: os.mkfifo(p), "not a regular file"),
])
def test_what_stands_where_a_file_was_expected_is_named(tmp_path: Path, make, seen) -> None:
    make(tmp_path / "out")
    assert file_checks(tmp_path, path="out", exists=True)["files[out].exists"] == Check(
        "files[out].exists", False, True, seen)


def test_a_file_is_read_as_bytes_within_its_bounds(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bad.json").write_bytes(b'{"a": "\xff"}')
    found = file_checks(tmp_path, path="bad.json", json_length=1)["files[bad.json].json_length"]
    assert found.ok is False and found.actual.startswith("not read: ")
    put(tmp_path, "many.json", [0] * (expectation.MAX_JSON_VALUES + 1))
    found = file_checks(tmp_path, path="many.json", json_length=1)
    assert found["files[many.json].json_length"].actual.startswith("not read: ")
    monkeypatch.setattr(expectation, "MAX_FILE_BYTES", 3 * 1024 * 1024)
    put(tmp_path, "big.json", " " * (3 * 1024 * 1024 + 1) + "[]")
    found = file_checks(tmp_path, path="big.json", json_length=0)["files[big.json].json_length"]
    assert found.actual == "larger than 3 MiB, not read"
    # A file that grows between its size and its reading is cut off all the same.
    monkeypatch.setattr(expectation.os.path, "getsize", lambda path: 2)
    found = file_checks(tmp_path, path="big.json", json_length=0)["files[big.json].json_length"]
    assert found.actual == "larger than 3 MiB, not read"


@pytest.mark.parametrize("value, kept", [
    ({"k": "é" * 291}, {"k": "é" * 291}),  # 300 characters of JSON as written: kept whole
    ({"k": "x" * 291}, {"k": "x" * 291}),
    ({"k": "x" * 292}, '{"k": "' + "x" * 292 + '"…'),
    ({"k": float("nan")}, "{'k': nan}"),
    ({"k": {1, 2}}, "{'k': {1, 2}}"),
])
def test_a_brief_keeps_short_json_values_and_cuts_the_rest(value: Any, kept: Any) -> None:
    assert expectation.brief(value, Redactor()) == kept


def test_values_of_one_type_must_be_equal() -> None:
    assert not is_subset("a", "b") and not is_subset(["a"], ["b"])
    assert is_subset({"k": "a"}, {"k": "a", "more": 1})


def test_a_folder_named_like_the_frameworks_is_not_the_frameworks() -> None:
    stderr = ('Traceback (most recent call last):\n'
              '  File "/app/fw_plugins/hook.py", line 4, in hook\nValueError: x\n')
    _, cause, detail = verdict(_crashed(stderr, ["/app/fw"]))
    assert cause == Cause.WORKER_EXCEPTION and detail.endswith("/app/fw_plugins/hook.py:4")
    _, cause, _ = verdict(_crashed(stderr.replace("fw_plugins", "fw/plugins"), ["/app/fw/"]))
    assert cause == Cause.FRAMEWORK_EXCEPTION


def test_a_symlink_into_a_sibling_named_like_the_workspace_is_outside(tmp_path: Path) -> None:
    workspace, sibling = tmp_path / "ws", tmp_path / "ws-other"
    workspace.mkdir()
    put(sibling, "f.json", [1])
    (workspace / "out.json").symlink_to(sibling / "f.json")
    found = file_checks(workspace, path="out.json", json_length=1)["files[out.json].json_length"]
    assert found.ok is False and found.actual == "points outside the workspace"


# --- crashes and hangs, from what real Python printed (tests/unit/real_tracebacks.py) --------

GENERATED = ("AgentGenerationError: Error while generating output: scripted model exhausted "
             "after 1 turns")


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Programs:
    return Programs(tmp_path_factory.mktemp("programs"))


def ended(ran: Ran, paths: list[str], **fields: Any) -> Observation:
    """A started repeat that ended as the program did (its status, its stderr)."""
    return observed(ready={"framework": "fw", "package_paths": paths}, result=None,
                    exit_code=ran.status, stderr_tail=ran.stderr, **fields)


def hung(ran: Ran, paths: list[str]) -> Observation:
    """A repeat alk stopped at its timeout: the program's stderr after SIGINT."""
    return ended(ran, paths, timed_out=True, duration_s=3.04, tool_calls={"lookup": 1})


def test_a_crash_with_a_message_of_several_lines_names_the_exception_and_frame(
        programs: Programs) -> None:
    ran = programs.run("multiline")
    assert ran.status == 1
    assert verdict(ended(ran, [programs.framework])) == (
        RUNTIME, "framework_exception",
        f"exit code 1; {GENERATED}; raised at "
        f"{programs.line('raise AgentGenerationError')}")


def test_lines_after_a_traceback_are_its_message_only_at_the_status_of_an_uncaught_exception(
        programs: Programs) -> None:
    # The same text with another status: something handled the exception and went on.
    ran = Ran(3, programs.run("multiline").stderr)
    assert verdict(ended(ran, [programs.framework])) == (
        RUNTIME, "nonzero_exit", "exit code 3; stderr: scripted model exhausted after 1 turns")
    handled = programs.run("handled", "2")
    assert verdict(ended(handled, [programs.framework])) == (
        RUNTIME, "nonzero_exit", "exit code 2; stderr: giving up: no fallback left")
    # A traceback that ends stderr with its one line is the crash whatever the status.
    one_line = Ran(3, programs.run("one_line").stderr)
    assert verdict(ended(one_line, [programs.framework]))[1] == "framework_exception"


def test_the_last_exception_of_a_chain_is_the_crash(programs: Programs) -> None:
    raised_at = programs.line('raise ValueError("the fallback')
    assert verdict(ended(programs.run("context"), [programs.framework])) == (
        RUNTIME, "framework_exception",
        f"exit code 1; ValueError: the fallback failed too; raised at {raised_at}")


@pytest.mark.parametrize("shape", ["group", "logged_group"])
def test_a_group_names_its_first_exception_and_where_that_was_raised(
        programs: Programs, shape: str) -> None:
    assert verdict(ended(programs.run(shape), [programs.framework])) == (
        RUNTIME, "framework_exception",
        f"exit code 1; ExceptionGroup > ExceptionGroup > {GENERATED}; raised at "
        f"{programs.line('raise AgentGenerationError')}")


def test_a_group_class_of_the_frameworks_is_named_without_its_module(
        programs: Programs) -> None:
    assert verdict(ended(programs.run("named_group"), [programs.framework]))[2] == (
        f"exit code 1; TaskGroupError > {GENERATED}; raised at "
        f"{programs.line('raise AgentGenerationError')}")


def test_the_workers_code_raising_through_the_framework_is_the_workers(
        programs: Programs) -> None:
    assert verdict(ended(programs.run("worker_bug"), [programs.framework])) == (
        RUNTIME, "worker_exception",
        f"exit code 1; KeyError: 'text'; raised at {programs.line('{}[', 'worker.py')}")


def test_an_exception_without_a_message_is_named_alone(programs: Programs) -> None:
    assert verdict(ended(programs.run("bare"), [programs.framework]))[2] == (
        f"exit code 1; NotImplementedError; raised at "
        f"{programs.line('raise NotImplementedError')}")


def test_without_package_paths_the_exception_is_named_and_nobody_blamed(
        programs: Programs) -> None:
    assert verdict(ended(programs.run("one_line"), [])) == (
        RUNTIME, "nonzero_exit", "exit code 1; RuntimeError: no tool named lookup")


def test_a_resumed_attempt_that_crashed_says_it_never_became_ready(programs: Programs) -> None:
    obs = ended(programs.run("one_line"), [programs.framework])
    obs = dataclasses.replace(obs, ready=None, preflight=None, started=False, attempts=2)
    # No framework_ready: no package paths either, so nobody is blamed.
    assert verdict(obs)[2] == ("exit code 1; the resumed attempt sent no framework_ready; "
                               "RuntimeError: no tool named lookup")


def test_the_exception_a_detail_quotes_is_one_line_redacted_and_bounded(
        programs: Programs) -> None:
    secret = "sk-" + "Vq8" * 9
    ran = programs.run("says", f"lookup\n  {secret}\n" + "x" * 5000)
    found = attribute(ended(ran, [programs.framework]), (), Redactor([secret]))
    quoted = found.detail.removeprefix("exit code 1; ").partition("; raised at ")[0]
    assert quoted.startswith("RuntimeError: no tool named lookup [REDACTED] xxx")
    assert len(quoted) == 201 and quoted.endswith("x…")  # 200 characters and the mark
    assert found.detail.endswith(f"; raised at {programs.line('raise RuntimeError')}")
    # A secret where the cut falls is redacted before it is cut: none of it is left.
    cut = 200 - len("RuntimeError: no tool named ") - 6
    ran = programs.run("says", "y" * cut + secret)
    found = attribute(ended(ran, [programs.framework]), (), Redactor([secret]))
    assert "Vq8" not in found.detail and "y[REDAC…; raised at" in found.detail


def test_a_long_frame_keeps_its_end(tmp_path: Path) -> None:
    programs = Programs(tmp_path / ("f" * 230))
    found = attribute(ended(programs.run("one_line"), [programs.framework]))
    frame = found.detail.partition("; raised at ")[2]
    assert len(frame) == 201 and frame.startswith("…")
    assert programs.line("raise RuntimeError").endswith(frame[1:])


def test_a_hang_names_the_frame_sigint_found_it_in(programs: Programs) -> None:
    ran = programs.interrupted("sleep")
    assert verdict(hung(ran, [programs.framework])) == (
        RUNTIME, "timeout", "no exit within the timeout (3.0 s run); 1 tool call(s), no tool "
        f"result; interrupted in the framework at {programs.line('time.sleep(600)')}")
    # Outside the framework's folders, the same frame is the worker's own.
    assert verdict(hung(ran, ["/elsewhere"]))[2].endswith(
        f"; interrupted in the worker at {programs.line('time.sleep(600)')}")
    # Without package paths nobody is named: the last line of stderr is quoted as before.
    assert verdict(hung(ran, []))[2].endswith("; stderr: KeyboardInterrupt")


def test_a_hang_under_asyncio_names_where_its_task_waited(programs: Programs) -> None:
    # asyncio.run raises KeyboardInterrupt itself, after cancelling the task that waited.
    ran = programs.interrupted("asyncio")
    assert verdict(hung(ran, [programs.framework]))[2].endswith(
        f"; interrupted in the framework at {programs.line('await asyncio.sleep(600)')}")


def test_a_hang_in_an_exception_handler_names_where_it_waited(programs: Programs) -> None:
    # The exception being handled was raised elsewhere: it is not where the worker hung.
    ran = programs.interrupted("sleep_in_handler")
    assert verdict(hung(ran, [programs.framework]))[2].endswith(
        f"; interrupted in the framework at {programs.line('time.sleep(600)')}")


def test_a_hang_whose_last_traceback_is_no_interrupt_quotes_stderr(programs: Programs) -> None:
    # A worker that catches SIGINT and goes on: its last traceback says nothing of the hang.
    ran = Ran(-9, programs.run("one_line").stderr)
    assert verdict(hung(ran, [programs.framework]))[2].endswith(
        "; stderr: RuntimeError: no tool named lookup")


# --- a scripted model that ran out of turns ---------------------------------------------------

EXHAUSTED = {"script_exhausted": (3, 2)}
ASKED = "the framework asked for model turn 3; the script has 2; then "


@pytest.mark.parametrize("obs, checks, then", [
    pytest.param(observed(timed_out=True, duration_s=2.0, result=None, **EXHAUSTED), (),
                 "timeout: no exit within the timeout (2.0 s run)", id="timeout"),
    pytest.param(observed(exit_code=None, signal=11, **EXHAUSTED), (),
                 "killed_by_signal: killed by SIGSEGV", id="killed_by_signal"),
    pytest.param(observed(exit_code=2, stderr_tail="giving up\n", **EXHAUSTED), (),
                 "nonzero_exit: exit code 2; stderr: giving up", id="nonzero_exit"),
    pytest.param(observed(result=None, bad_result="result.output must be a string", **EXHAUSTED),
                 (), "bad_result: result.output must be a string", id="bad_result"),
    pytest.param(observed(violations=(Violation("not_json", 4, "x"),), violation_count=1,
                          **EXHAUSTED), PASSING,
                 "protocol_violation: stdout line 4: not_json: x", id="protocol_violation"),
    pytest.param(observed(result=None, **EXHAUSTED), (),
                 "no_result: clean exit without a result event", id="no_result"),
    pytest.param(observed(**EXHAUSTED), (Check("output_equals", False, "x", "hello"),),
                 'wrong_output: output_equals: expected "x", got "hello"', id="wrong_output"),
    pytest.param(observed(**EXHAUSTED), (Check("script_consumed", False, "all 2 turns used",
                                               "2 turns used"),),
                 'script_not_consumed: script_consumed: expected "all 2 turns used", got '
                 '"2 turns used"', id="script_not_consumed"),
])
def test_an_exhausted_script_names_the_failure_that_followed(obs: Observation,
                                                             checks: tuple[Check, ...],
                                                             then: str) -> None:
    assert verdict(obs, checks) == (RUNTIME, "script_exhausted", ASKED + then)
    # Without the worker's report, the failure is named as it was.
    outcome, cause, detail = verdict(dataclasses.replace(obs, script_exhausted=None), checks)
    assert outcome in (RUNTIME, AGENT) and f"{cause}: {detail}" == then


def test_an_exhausted_script_names_the_crash_and_its_frame(programs: Programs) -> None:
    obs = ended(programs.run("multiline"), [programs.framework], script_exhausted=(2, 1))
    assert verdict(obs) == (
        RUNTIME, "script_exhausted",
        "the framework asked for model turn 2; the script has 1; then framework_exception: "
        f"exit code 1; {GENERATED}; raised at {programs.line('raise AgentGenerationError')}")


@pytest.mark.parametrize("obs, checks, cause", [
    # What is not a scored failure stays what it is: a pass, a void repeat.
    pytest.param(observed(**EXHAUSTED), PASSING, "passed", id="passed"),
    pytest.param(observed(faults_missing=("tool#1",), **EXHAUSTED), PASSING, "fault_not_fired",
                 id="fault_not_fired"),
    pytest.param(observed(kill_missing=True, **EXHAUSTED), PASSING, "kill_not_fired",
                 id="kill_not_fired"),
    pytest.param(observed(harness_error="OSError: disk full", **EXHAUSTED), (), "harness_error",
                 id="harness_error"),
    pytest.param(before_ready(exit_code=1, **EXHAUSTED), (), "exited_before_ready",
                 id="exited_before_ready"),
    pytest.param(refused(Cause.VERSION_UNSUPPORTED, "fw 9.0", ), (), "version_unsupported",
                 id="version_unsupported"),
    # A framework that changed identity mid-run is judged by the gate, before its run.
    pytest.param(dataclasses.replace(refused(Cause.IDENTITY_CHANGED, "fw 1.0, then 1.1"),
                                     **EXHAUSTED), (), "identity_changed", id="identity_changed"),
    # A resource limit is the kernel's word on why the run ended.
    pytest.param(observed(exit_code=1, limits={"memory_mb": 256},
                          stderr_tail="MemoryError\n", **EXHAUSTED), (), "memory_limit",
                 id="memory_limit"),
    pytest.param(observed(exit_code=None, signal=24, limits={"cpu_s": 5}, **EXHAUSTED), (),
                 "cpu_limit", id="cpu_limit"),
])
def test_an_exhausted_script_explains_no_pass_void_or_limit(obs: Observation,
                                                            checks: tuple[Check, ...],
                                                            cause: str) -> None:
    assert verdict(obs, checks)[1] == cause


def test_a_disk_limit_alk_measured_fails_a_worker_that_exited_cleanly_after_it() -> None:
    # alk found the workspace past disk_mb as the worker ended: exit 0 and a good result do not
    # make the breach a pass (nor a worker that writes fast and leaves quickly).
    obs = observed(limits={"disk_mb": 16}, limits_hit=("disk_mb",))
    found = attribute(obs, ())
    assert (found.outcome, found.cause) == (Outcome.FRAMEWORK_RUNTIME, "disk_limit")
    assert attribute(observed(limits={"disk_mb": 16}), ()).cause == "passed"
