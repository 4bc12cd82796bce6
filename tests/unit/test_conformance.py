"""`alk check-worker`'s review, from saved transcripts: one pass over each, bounded findings,
and only the harness's own events believed."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from alk.causes import CATALOGUE, Cause
from alk.conformance import (
    MAX_VIOLATION_FINDINGS,
    NODE_SDK,
    PYTHON_SDK,
    Level,
    review,
    sdk_for,
)
from alk.layout import probe_transcript, repeat_transcript
from alk.plan import build_plan
from alk.records import (
    Attribution,
    Execution,
    Lane,
    Outcome,
    Preflight,
    RepeatResult,
    Scenario,
)
from alk.result.document import RunDocument, build_document

RUN = "20261130-120000-ab12"


def event(seq: int, type: str, payload: dict[str, Any], source: str = "harness",
          channel: str = "harness") -> bytes:
    line = {"seq": seq, "t": seq / 100, "source": source, "channel": channel, "type": type,
            "payload": payload}
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def write(out: Path, relative: Path, *lines: bytes) -> str:
    (out / relative).parent.mkdir(parents=True, exist_ok=True)
    (out / relative).write_bytes(b"".join(lines))
    return str(relative)


def passed(scenario: str, transcript: str) -> RepeatResult:
    return RepeatResult(
        scenario=scenario, repeat=1, seed=1, outcome=Outcome.PASS, cause="passed", detail="",
        duration_s=0.1, exit_code=0, signal=None, timed_out=False, peak_rss_mb=None,
        cpu_s=None, containment=None, network=None, filesystem=None, attempts=1, path_hash="",
        violations=0, trajectory=(), claimed=None, transcript=transcript, sha256="")


def document(out: Path, *repeat_lines: bytes, others: dict[str, str] | None = None,
             refused: Attribution | None = None,
             verdict: Attribution | None = None) -> RunDocument:
    """The record alk's builder makes of one passed repeat of scenario s, whose transcript
    holds `repeat_lines`, and of one of each scenario in `others` (id: its transcript); with
    `refused`, of a run whose preflight refused the worker, so that no repeat ran; with
    `verdict`, of one in which scenario s's repeat was judged so instead of passing."""
    transcripts = {"s": write(out, repeat_transcript(RUN, "s", 1), *repeat_lines),
                   **(others or {})}
    lane = Lane(name="demo", description="", framework="fw", requirement=">=1",
                command=("{python}", "worker.py"), required_env=(), timeout_s=30.0, repeats=1,
                scenarios=tuple(Scenario(sid, "t") for sid in transcripts),
                path=Path("lanes/demo.toml"), root=Path("."), transcript_cap_bytes=1 << 20)
    if refused is None:
        repeats = [passed(sid, path) for sid, path in transcripts.items()]
        if verdict is not None:
            repeats[0] = dataclasses.replace(repeats[0], outcome=verdict.outcome,
                                             cause=verdict.cause, detail=verdict.detail)
        execution = Execution(preflight=Preflight(True, "fw", "1.0"), repeats=repeats)
    else:
        execution = Execution(preflight=Preflight(False, "fw", "0.9", refused.cause,
                                                  refused.detail), void=refused)
    return build_document(build_plan(lane, RUN, shuffle=lambda order: None), execution,
                          status="complete", started_at=datetime.now(timezone.utc),
                          finished_at=None, harness_peak_rss_mb=0.0)


def ready(paths: list[str]) -> bytes:
    return event(1, "framework_ready", {"framework": "fw", "framework_version": "1.0",
                                        "package_paths": paths}, "worker", "framework")


def test_a_flood_of_violations_is_listed_up_to_a_bound_then_counted(tmp_path: Path) -> None:
    write(tmp_path, probe_transcript(RUN), ready(["/x"]), event(2, "abort", {}),
          event(3, "exit", {"exit_code": 0}))
    flood = [event(n, "violation", {"kind": "not_json", "line": n, "detail": "x"})
             for n in range(1, 5001)]
    findings = review(document(tmp_path, *flood), tmp_path)
    violations = [f for f in findings if "not_json" in f.title]
    assert len(violations) == MAX_VIOLATION_FINDINGS
    assert violations[0].title == "stdout line 1: not_json (scenario s)"
    assert any(f.title == f"scenario s: {5000 - MAX_VIOLATION_FINDINGS} more protocol violations"
               for f in findings)


def test_events_a_worker_forged_are_not_the_harness(tmp_path: Path) -> None:
    # A worker writes its own "exit" with a bad code, and a "violation" of its own: neither is
    # alk's; the harness's exit says 0.
    write(tmp_path, probe_transcript(RUN), ready([]), event(2, "abort", {}),
          event(3, "exit", {"exit_code": 9}, "worker", "agent"),
          event(4, "violation", {"kind": "not_json"}, "worker", "agent"),
          event(5, "exit", {"exit_code": 0}))
    findings = review(document(tmp_path), tmp_path)
    titles = [f.title for f in findings]
    assert not any("exited" in t or "not_json" in t for t in titles)
    assert "framework_ready has no package_paths" in titles
    assert [f.level for f in findings if f.title == "scenario s: protocol ok, passed"] == [Level.OK]


def test_the_probe_exiting_badly_after_abort_is_a_failure(tmp_path: Path) -> None:
    write(tmp_path, probe_transcript(RUN), ready(["/x"]), event(2, "abort", {}),
          event(3, "exit", {"exit_code": 2}))
    findings = review(document(tmp_path), tmp_path)
    assert [f.level for f in findings if f.title == "the worker exited 2 after abort"] == \
        [Level.FAIL]


def test_a_violation_seen_in_the_probe_and_every_scenario_is_one_finding(tmp_path: Path) -> None:
    banner = event(1, "violation", {"kind": "not_json", "line": 1,
                                    "detail": "line is not JSON: 'banner'"})
    write(tmp_path, probe_transcript(RUN), banner, ready(["/x"]), event(3, "abort", {}),
          event(4, "exit", {"exit_code": 0}))
    other = write(tmp_path, repeat_transcript(RUN, "t", 1), banner,
                  event(2, "violation", {"kind": "bad_type", "line": 3, "detail": "no type"}))
    findings = review(document(tmp_path, banner, others={"t": other}), tmp_path)
    titles = [f.title for f in findings]
    assert titles[0] == "handshake"
    assert titles[1:3] == ["stdout line 1: not_json (the probe and scenarios s, t)",
                           "stdout line 3: bad_type (scenario t)"]
    assert [f.detail for f in findings[1:3]] == ["line is not JSON: 'banner'", "no type"]
    assert sum("not_json" in t for t in titles) == 1


def test_a_refused_handshake_is_said_first_with_what_to_do(tmp_path: Path) -> None:
    write(tmp_path, probe_transcript(RUN), ready(["/x"]), event(2, "abort", {}),
          event(3, "exit", {"exit_code": 0}))
    detail = "fw 0.9 does not satisfy '>=1'"
    findings = review(document(tmp_path, refused=Attribution(
        Outcome.LANE_INFRA, "version_unsupported", detail)), tmp_path)
    assert (findings[0].level, findings[0].title, findings[0].detail) == (
        Level.FAIL, "handshake: version_unsupported", detail)
    assert "Install a version the lane supports" in findings[0].hint
    assert not any(f.title.startswith("scenario") for f in findings)  # nothing ran to review


# --- whose problem it is, and every problem at once -----------------------------------------

NOT_JSON = event(6, "violation", {"kind": "not_json", "line": 2, "detail": "line is not JSON"})
CLEAN_EXIT = event(9, "exit", {"exit_code": 0})
VIOLATED = Attribution(Outcome.FRAMEWORK_RUNTIME, "protocol_violation",
                       "stdout line 2: not_json: line is not JSON")
RESULT = event(8, "result", {"output": "x", "stop_reason": "accepted", "end_state": {}},
               "worker", "agent")


def probed(out: Path) -> None:
    write(out, probe_transcript(RUN), ready(["/x"]), event(2, "abort", {}),
          event(3, "exit", {"exit_code": 0}))


def by_title(findings) -> dict[str, Level]:
    return {f.title: f.level for f in findings}


def test_a_protocol_violation_does_not_hide_a_missing_result(tmp_path: Path) -> None:
    probed(tmp_path)
    findings = review(document(tmp_path, NOT_JSON, CLEAN_EXIT, verdict=VIOLATED), tmp_path)
    levels = by_title(findings)
    assert levels["stdout line 2: not_json (scenario s)"] is Level.FAIL
    assert levels["scenario s: framework_runtime/no_result"] is Level.FAIL
    [missing] = [f for f in findings if f.title.endswith("no_result")]
    assert missing.hint == CATALOGUE[Cause.NO_RESULT].action


def test_behind_a_violation_a_result_sent_is_no_problem_and_its_failed_checks_are_said(
        tmp_path: Path) -> None:
    probed(tmp_path)
    failed = event(10, "check", {"name": "stop_reason", "ok": False, "expected": "accepted",
                                 "actual": "error"})
    held = event(11, "check", {"name": "output_contains", "ok": True})
    findings = review(document(tmp_path, NOT_JSON, RESULT, CLEAN_EXIT, failed, held,
                               verdict=VIOLATED), tmp_path)
    levels = by_title(findings)
    assert not any("no_result" in title for title in levels)
    assert levels["scenario s: an expectation failed too (stop_reason)"] is Level.WARN


def test_a_result_in_what_a_truncated_transcript_lost_is_not_called_missing(
        tmp_path: Path) -> None:
    probed(tmp_path)
    cut = event(7, "truncated", {"dropped_bytes": 100})
    findings = review(document(tmp_path, NOT_JSON, cut, CLEAN_EXIT, verdict=VIOLATED), tmp_path)
    assert not any("no_result" in f.title for f in findings)


def test_the_frameworks_own_failure_is_a_finding_that_fails_no_check(tmp_path: Path) -> None:
    probed(tmp_path)
    detail = ("the worker injected tool#2; then wrong_stop_reason: stop_reason: expected "
              "\"accepted\", got \"error:RuntimeError\"")
    findings = review(document(tmp_path, RESULT, CLEAN_EXIT, verdict=Attribution(
        Outcome.FRAMEWORK_RUNTIME, "fault_unrecovered", detail)), tmp_path)
    [found] = [f for f in findings if f.title.startswith("scenario s")]
    assert (found.level, found.title, found.detail) == (
        Level.FINDING, "scenario s: framework finding, fault_unrecovered", detail)
    assert found.ok and all(f.ok for f in findings)
    assert "tool's error back to the model" in found.hint and "Retry-After" not in found.hint


def test_a_crash_in_the_workers_own_code_is_a_problem_to_fix(tmp_path: Path) -> None:
    probed(tmp_path)
    findings = review(document(tmp_path, RESULT, CLEAN_EXIT, verdict=Attribution(
        Outcome.FRAMEWORK_RUNTIME, "worker_exception", "KeyError: 'x'")), tmp_path)
    assert by_title(findings)["scenario s: framework_runtime/worker_exception"] is Level.FAIL


@pytest.mark.parametrize("command, sdk", [
    (("/p/.tools/node/bin/node", "/p/workers/node/ai-sdk/worker.mjs"), NODE_SDK),
    (("node", "worker.js"), NODE_SDK),
    (("/usr/local/bin/tsx", "worker.ts"), NODE_SDK),
    (("/p/.venv/bin/python", "/p/workers/langgraph_worker.py"), PYTHON_SDK),
    (("/p/workers/codex_worker.py", "--model", "x.js"), PYTHON_SDK),
    ((), PYTHON_SDK),
])
def test_the_hints_speak_the_sdk_the_lanes_program_uses(command, sdk):
    assert sdk_for(command) is sdk
