"""`alk check-worker`: turns one short run of a lane into findings a worker's author can act on.

It reads the run's result document and transcripts (the harness's own record of what the worker
did) and says, per problem, what went wrong, whose it is and what to change: a problem of the
worker's (its protocol lines, its adapter) is the author's to fix; a finding about the framework
(its own handling of a fault, a kill or an answer alk served, `CauseInfo.framework_finding`) is
what the lane measures, and is listed without failing the check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePath
from typing import Any, Mapping, Sequence

from alk.causes import CATALOGUE, Cause
from alk.causes.advice import advice
from alk.errors import TranscriptError
from alk.layout import probe_transcript
from alk.records import Outcome, RepeatResult
from alk.result.document import RunDocument
from alk.transcript.reader import iter_transcript
from alk.transcript.writer import HARNESS


@dataclass(frozen=True, slots=True)
class Sdk:
    """How a hint names the SDK's calls, in the language of the worker's SDK."""

    hello: str
    ready: str
    start: str
    package_paths: str
    stdout: str


PYTHON_SDK = Sdk("`worker.hello()`", "`worker.ready(framework, version, paths)`",
                 "`worker.start()`", "`worker.package_paths(DIST)`", "print() and fd 1")
NODE_SDK = Sdk("`alk.hello()`", "`alk.ready(framework, version, paths)`", "`alk.start()`",
               "`alk.packagePaths(NAME)`", "console.log and process.stdout")
# Programs and file endings that say a worker runs on Node (its SDK is alk-worker).
_NODE_PROGRAMS = ("node", "nodejs")
_NODE_FILES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts")


def sdk_for(command: Sequence[str]) -> Sdk:
    """The SDK a lane's worker speaks through, from its command: Node's when the program is
    node or the worker's file is JavaScript or TypeScript, else Python's."""
    program = PurePath(command[0]).name if command else ""
    if program in _NODE_PROGRAMS or any(arg.endswith(_NODE_FILES) for arg in command[1:2]):
        return NODE_SDK
    return PYTHON_SDK


def violation_hints(sdk: Sdk = PYTHON_SDK) -> dict[str, str]:
    """What to change for each kind of protocol violation."""
    stdout = (f"only protocol lines may go to stdout: call {sdk.hello} first, before "
              f"importing the framework, and the SDK sends {sdk.stdout} to stderr from then on")
    return {
        "not_json": stdout,
        "not_object": stdout,
        "invalid_utf8": stdout,
        "line_too_long": "keep each event under 1 MiB; put large data in workspace files",
        "harness_channel": "the `harness` channel is alk's own; use agent, tool, model, user or "
                           "framework",
        "unknown_channel": "use one of the channels agent, tool, model, user, framework",
        "bad_type": "every line needs a non-empty string `type`",
        "bad_payload": "`payload` must be a JSON object",
        "before_ready": f"send framework_ready first: {sdk.ready}",
        "before_start": f"emit nothing between framework_ready and start: call {sdk.start} "
                        "first",
        "duplicate_ready": "send framework_ready exactly once",
        "bad_tool_event": "tool events need `payload.name` (a string)",
    }


VIOLATION_HINTS = violation_hints()
# A worker can break the protocol on every line: past this many in one transcript, the rest are
# counted in one finding instead of listed.
MAX_VIOLATION_FINDINGS = 10
# How many failed checks a finding names.
MAX_CHECKS_NAMED = 4


class Level(StrEnum):
    OK = "ok"
    WARN = "warn"  # worth a look, not a protocol problem (the agent's answer differs)
    FINDING = "finding"  # the framework's, not the worker's: a result of the check, not a fault
    FAIL = "fail"  # a problem the worker's author must fix


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    title: str
    detail: str = ""
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.level is not Level.FAIL


def review(document: RunDocument, out_dir: Path, sdk: Sdk = PYTHON_SDK) -> list[Finding]:
    """The handshake first, then each protocol violation once (a worker that breaks the
    protocol the same way in the probe and in every scenario hears it once, with where), then
    the probe's other findings and each repeat's outcome: a problem of the worker's (FAIL), a
    finding about the framework (FINDING), a failed expectation (WARN) or a pass. The hints
    name `sdk`'s calls."""
    handshake = _handshake(document)
    sightings: dict[tuple[str, str, str], list[str]] = {}
    probe = _read_facts("probe", out_dir / probe_transcript(document.run_id), sightings)
    later = _probe(probe, sdk)
    if handshake.ok:
        for scenario in document.scenarios:
            for repeat in scenario.repeats:
                later += _repeat(scenario.id, repeat, out_dir, sightings)
    hints = violation_hints(sdk)
    violations = [_violation(kind, line, detail, where, hints)
                  for (kind, line, detail), where in sightings.items()]
    return [handshake, *violations, *later]


def _handshake(document: RunDocument) -> Finding:
    gate = document.gate
    if gate.ok:
        return Finding(Level.OK, "handshake", f"framework_ready: {gate.framework} "
                       f"{gate.version} satisfies {document.lane.requirement!r}")
    cause = gate.cause or Cause.HARNESS_ERROR.value
    return Finding(Level.FAIL, f"handshake: {cause}", gate.detail, advice(cause, gate.detail))


def _probe(facts: _Facts, sdk: Sdk) -> list[Finding]:
    findings = list(facts.overflow)
    if facts.ready_paths is False:
        findings.append(Finding(Level.WARN, "framework_ready has no package_paths",
                                hint=f"pass {sdk.package_paths}: with them alk tells a "
                                     "crash inside the framework (framework_exception) from one "
                                     "in the worker's own code (worker_exception)"))
    if facts.aborted and facts.killed:
        findings.append(Finding(Level.WARN, "the worker did not exit after abort",
                                hint=f"exit when alk sends abort ({sdk.start} does)"))
    if facts.aborted and facts.exit_code not in (0, None):
        findings.append(Finding(Level.FAIL, f"the worker exited {facts.exit_code} after abort",
                                hint="after abort, write nothing more and exit 0 (every run "
                                     "starts with a probe that is aborted)"))
    return findings


@dataclass
class _Facts:
    """What check-worker needs from one transcript, gathered in one pass over its events. Only
    the harness's own events are believed for abort, kill and exit: a worker can write any
    `type` it likes."""

    label: str
    # (kind, stdout line, detail) -> the transcripts it was seen in; shared by all of a run's.
    sightings: dict[tuple[str, str, str], list[str]]
    listed: int = 0
    hidden: int = 0  # violations past MAX_VIOLATION_FINDINGS
    overflow: list[Finding] = field(default_factory=list)
    ready_paths: bool | None = None  # did the worker's framework_ready name package_paths?
    aborted: bool = False
    killed: bool = False
    exit_code: Any = None
    results: int = 0  # the worker's agent/result events
    failed_checks: list[str] = field(default_factory=list)  # names, the first few
    whole: bool = True  # read to its end: no truncated marker, no unreadable line

    def note(self, event: Mapping[str, Any]) -> None:
        kind, payload = event.get("type"), event.get("payload")
        payload = payload if isinstance(payload, Mapping) else {}
        if event.get("source") != HARNESS:
            if kind == "framework_ready" and self.ready_paths is None:
                self.ready_paths = bool(payload.get("package_paths"))
            elif kind == "result" and event.get("channel") == "agent":
                self.results += 1
        elif kind == "violation":
            if self.listed < MAX_VIOLATION_FINDINGS:
                self.listed += 1
                key = (str(payload.get("kind", "")), str(payload.get("line")),
                       str(payload.get("detail", "")))
                where = self.sightings.setdefault(key, [])
                if self.label not in where:
                    where.append(self.label)
            else:
                self.hidden += 1
        elif kind == "abort":
            self.aborted = True
        elif kind == "kill":
            self.killed = True
        elif kind == "exit" and self.exit_code is None:
            self.exit_code = payload.get("exit_code")
        elif kind == "check" and payload.get("ok") is False:
            if len(self.failed_checks) < MAX_CHECKS_NAMED:
                self.failed_checks.append(str(payload.get("name", "?")))
        elif kind == "truncated":
            self.whole = False


def _read_facts(label: str, path: Path,
                sightings: dict[tuple[str, str, str], list[str]]) -> _Facts:
    """Streams the transcript: it may be as large as the lane's cap allows."""
    facts = _Facts(label, sightings)
    try:
        for event in iter_transcript(path):
            facts.note(event)
    except TranscriptError:
        facts.whole = False  # what could be read is reviewed; the run reports the rest
    if facts.hidden:
        facts.overflow.append(Finding(
            Level.FAIL, f"{label}: {facts.hidden} more protocol violations",
            hint=f"fix the ones listed first; every one is a `violation` event in {path}"))
    return facts


def _violation(kind: str, line: str, detail: str, where: list[str],
               hints: Mapping[str, str]) -> Finding:
    return Finding(Level.FAIL, f"stdout line {line}: {kind} ({_places(where)})", detail,
                   hints.get(kind, ""))


def _places(labels: list[str]) -> str:
    """"the probe and scenarios a, b": where one violation was seen."""
    scenarios = [label.removeprefix("scenario ") for label in labels if label != "probe"]
    shown = ", ".join(scenarios[:3]) + (f" and {len(scenarios) - 3} more"
                                         if len(scenarios) > 3 else "")
    named = f"scenario{'s' if len(scenarios) > 1 else ''} {shown}" if scenarios else ""
    if "probe" in labels:
        return f"the probe and {named}" if named else "the probe"
    return named


def _repeat(scenario: str, repeat: RepeatResult, out_dir: Path,
            sightings: dict[tuple[str, str, str], list[str]]) -> list[Finding]:
    label = f"scenario {scenario}"
    outcome, cause = repeat.outcome, repeat.cause
    facts = _read_facts(label, out_dir / repeat.transcript, sightings)
    findings = facts.overflow
    if cause == Cause.PROTOCOL_VIOLATION:
        # The violations are listed on their own; what the repeat's one cause left unsaid is
        # told here, so that the author fixes it in the same round.
        findings += _behind_violations(label, facts)
    elif outcome in (Outcome.LANE_INFRA, Outcome.FRAMEWORK_RUNTIME):
        info = CATALOGUE[Cause(cause)]
        if info.framework_finding:
            findings.append(Finding(Level.FINDING, f"{label}: framework finding, {cause}",
                                    repeat.detail, advice(cause, repeat.detail)))
        else:
            findings.append(Finding(Level.FAIL, f"{label}: {outcome}/{cause}", repeat.detail,
                                    advice(cause, repeat.detail)))
    elif outcome == Outcome.AGENT:
        findings.append(Finding(Level.WARN, f"{label}: protocol ok; an expectation failed "
                                f"({cause})", repeat.detail,
                                "not a protocol problem: the agent's answer or effects differ"))
    else:
        findings.append(Finding(Level.OK, f"{label}: protocol ok, passed",
                                f"{repeat.duration_s:.2f} s"))
    return findings


def _behind_violations(label: str, facts: _Facts) -> list[Finding]:
    """What a repeat whose cause is protocol_violation hid behind it: a clean exit with no
    result (alk names the first rule that matches, and violations come first), and checks
    that failed on the result it did send."""
    if facts.results == 0:
        if not facts.whole:
            return []  # the result may be in what was not kept
        return [Finding(Level.FAIL, f"{label}: {Outcome.FRAMEWORK_RUNTIME}/{Cause.NO_RESULT}",
                        "the worker exited cleanly without a result event (the repeat's cause "
                        "is the protocol violation above; this needs fixing too)",
                        CATALOGUE[Cause.NO_RESULT].action)]
    if facts.failed_checks:
        return [Finding(Level.WARN, f"{label}: an expectation failed too "
                        f"({', '.join(facts.failed_checks)})",
                        hint="judged (the agent's or the framework's) once the protocol lines "
                             "are fixed: run check-worker again")]
    return []
