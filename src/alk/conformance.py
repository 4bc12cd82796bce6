"""`alk check-worker`: turns one short run of a lane into findings a worker's author can act on.

It reads the run's result document and transcripts (the harness's own record of what the worker
did) and says, per problem, what went wrong and what to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Mapping

from alk.causes import CATALOGUE, Cause
from alk.errors import TranscriptError
from alk.records import Outcome
from alk.transcript import probe_transcript, read_transcript

_STDOUT_HINT = ("only protocol lines may go to stdout: call `worker.hello()` first, before "
                "importing the framework, and the SDK sends print() and fd 1 to stderr from then "
                "on")
VIOLATION_HINTS = {
    "not_json": _STDOUT_HINT,
    "not_object": _STDOUT_HINT,
    "invalid_utf8": _STDOUT_HINT,
    "line_too_long": "keep each event under 1 MiB; put large data in workspace files",
    "harness_channel": "the `harness` channel is alk's own; use agent, tool, model, user or "
                       "framework",
    "unknown_channel": "use one of the channels agent, tool, model, user, framework",
    "bad_type": "every line needs a non-empty string `type`",
    "bad_payload": "`payload` must be a JSON object",
    "before_ready": "send framework_ready first: `worker.ready(framework, version, paths)`",
    "before_start": "emit nothing between framework_ready and start: call `worker.start()` "
                    "first",
    "duplicate_ready": "send framework_ready exactly once",
    "bad_tool_event": "tool events need `payload.name` (a string)",
}


class Level(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    title: str
    detail: str = ""
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.level is not Level.FAIL


def review(document: Mapping[str, Any], out_dir: Path) -> list[Finding]:
    findings = [_handshake(document), *_probe(document, out_dir)]
    if not findings[0].ok:
        return findings
    for scenario in document["scenarios"]:
        for repeat in scenario["repeats"]:
            findings += _repeat(scenario["id"], repeat, out_dir)
    return findings


def _handshake(document: Mapping[str, Any]) -> Finding:
    gate, lane = document["preflight"], document["lane"]
    if gate["ok"]:
        return Finding(Level.OK, "handshake", f"framework_ready: {gate['framework']} "
                       f"{gate['version']} satisfies {lane['requirement']!r}")
    cause = gate.get("cause") or Cause.HARNESS_ERROR.value
    return Finding(Level.FAIL, f"handshake: {cause}", gate.get("detail", ""),
                   CATALOGUE[Cause(cause)].action)


def _probe(document: Mapping[str, Any], out_dir: Path) -> list[Finding]:
    path = out_dir / probe_transcript(document["run_id"])
    events = _events(path)
    findings = _violations("probe (hello → framework_ready → abort)", events)
    ready = next((e for e in events if e.get("type") == "framework_ready"), None)
    if ready and not ready.get("payload", {}).get("package_paths"):
        findings.append(Finding(Level.WARN, "framework_ready has no package_paths",
                                hint="pass `worker.package_paths(DIST)`: with them alk tells a "
                                     "crash inside the framework (framework_exception) from one "
                                     "in the worker's own code (worker_exception)"))
    aborted = any(e.get("type") == "abort" for e in events)
    if aborted and any(e.get("type") == "kill" for e in events):
        findings.append(Finding(Level.WARN, "the worker did not exit after abort",
                                hint="exit when alk sends abort (`worker.start()` does)"))
    exit_event = next((e for e in events if e.get("type") == "exit"), None)
    status = (exit_event or {}).get("payload", {})
    if aborted and status.get("exit_code") not in (0, None):
        findings.append(Finding(Level.FAIL, f"the worker exited {status['exit_code']} after abort",
                                hint="after abort, write nothing more and exit 0 (every run "
                                     "starts with a probe that is aborted)"))
    return findings


def _violations(label: str, events: list[dict[str, Any]]) -> list[Finding]:
    findings = []
    for event in events:
        if event.get("source") == "harness" and event.get("type") == "violation":
            payload = event.get("payload", {})
            kind = payload.get("kind", "")
            findings.append(Finding(Level.FAIL, f"{label}: stdout line {payload.get('line')}: "
                                    f"{kind}", payload.get("detail", ""),
                                    VIOLATION_HINTS.get(kind, "")))
    return findings


def _repeat(scenario: str, repeat: Mapping[str, Any], out_dir: Path) -> list[Finding]:
    label = f"scenario {scenario}"
    outcome, cause = repeat["outcome"], repeat["cause"]
    findings = _violations(label, _events(out_dir / repeat["transcript"]))
    if outcome in (Outcome.LANE_INFRA.value, Outcome.FRAMEWORK_RUNTIME.value):
        if cause != Cause.PROTOCOL_VIOLATION.value:
            findings.append(Finding(Level.FAIL, f"{label}: {outcome}/{cause}", repeat["detail"],
                                    CATALOGUE[Cause(cause)].action))
    elif outcome == Outcome.AGENT.value:
        findings.append(Finding(Level.WARN, f"{label}: protocol ok; an expectation failed "
                                f"({cause})", repeat["detail"],
                                "not a protocol problem: the agent's answer or effects differ"))
    else:
        findings.append(Finding(Level.OK, f"{label}: protocol ok, passed",
                                f"{repeat['duration_s']:.2f} s"))
    return findings


def _events(path: Path) -> list[dict[str, Any]]:
    try:
        return read_transcript(path)
    except TranscriptError:
        return []
