"""Attribution: one outcome and one cause per repeat, from what the harness observed. Pure.

The rules are checked in order and the first that matches wins: first the harness and the
environment (the repeat is void), then the framework's runtime, then the agent's result. A
worker's own claim of success (`verification`) is never read here.
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
import signal
from typing import Any, Callable, Sequence

from alk.attribution import layers, node_errors, tracebacks
from alk.causes import Cause, outcome_of
from alk.causes.advice import THEN, WIRE_FAULT, WORKER_FAULT
from alk.limits import CAUSES, SIGNS
from alk.records import Attribution, Check, Observation, Outcome
from alk.redaction import Redactor

# How much of a check's value, and of the last stderr line, a detail quotes.
SHOW_CHARS = 160
STDERR_CHARS = 300
# How much of an exception (`Type: message`) and of a frame's `path:line` a detail quotes.
EXCEPTION_CHARS = 200
FRAME_CHARS = 200

_CHECK_CAUSES = (
    ("stop_reason", Cause.WRONG_STOP_REASON),
    ("output_", Cause.WRONG_OUTPUT),
    ("end_state", Cause.WRONG_END_STATE),
    ("tool_calls.", Cause.WRONG_TOOL_CALLS),
    ("files[", Cause.WRONG_FILES),
    ("script_consumed", Cause.SCRIPT_NOT_CONSUMED),
    ("model_calls", Cause.WRONG_MODEL_CALLS),
)
_CHECK_CODES = {cause.value for _, cause in _CHECK_CAUSES}


def void(cause: Cause, detail: str) -> Attribution:
    """A repeat that could not be run at all (decided before any process started)."""
    return _make(cause, detail)


def attribute(obs: Observation, checks: Sequence[Check] = (),
              redactor: Redactor = Redactor()) -> Attribution:
    """The repeat's one outcome and cause. `redactor` cuts what the detail quotes."""
    if obs.harness_error:
        return _make(Cause.HARNESS_ERROR, obs.harness_error)
    if not obs.spawned:
        return _make(Cause.SPAWN_FAILED, obs.spawn_error or "the worker could not be started")
    # A resumed attempt (after alk's kill_at) that never became ready failed to come back: the
    # repeat already ran past the gate, so it is judged as a crash or a hang, never void.
    resumed = obs.attempts > 1
    if obs.ready is None and not resumed:
        if obs.timed_out:
            return _make(Cause.TIMEOUT_BEFORE_READY,
                         f"no framework_ready within {obs.duration_s:.1f} s"
                         f"{_first_violation(obs)}{_stderr(obs, redactor)}")
        breached = _limit_breached(obs)
        if breached is not None:
            # Not the framework's import: the interpreter could not start within the limit.
            return _make(Cause.LIMIT_BEFORE_READY,
                         f"limit {breached} = {obs.limits[breached]} is too small for the worker "
                         f"to start ({_status(obs)} before framework_ready)"
                         f"{_stderr(obs, redactor)}")
        last = (obs.stderr_tail.strip().splitlines() or [""])[-1]
        if _MISSING_MODULE.match(last):
            return _make(Cause.FRAMEWORK_MISSING,
                         f"worker ended ({_status(obs)}) before framework_ready"
                         f"{_stderr(obs, redactor)}")
        return _make(Cause.EXITED_BEFORE_READY,
                     f"worker ended ({_status(obs)}) before framework_ready"
                     f"{_first_violation(obs)}{_stderr(obs, redactor)}")
    if obs.ready is not None:
        if obs.preflight is None or not obs.preflight.ok:
            cause = obs.preflight.cause if obs.preflight else Cause.HARNESS_ERROR
            return _make(Cause(cause), obs.preflight.detail if obs.preflight else "no preflight")
        if not obs.started:
            return _make(Cause.HARNESS_ERROR, "the preflight passed but start was not sent")
    found = _after_start(obs, checks, redactor)
    failed = (found.cause not in CAUSES.values()
              and found.outcome in (Outcome.FRAMEWORK_RUNTIME, Outcome.AGENT))
    model = obs.model
    # The provider behind alk's proxy failed: whatever followed is not the framework's. The
    # gateway saw it, not the worker, so no worker can choose this void by saying so.
    if model is not None and model.provider_error and found.outcome is not Outcome.PASS:
        return _make(Cause.PROVIDER_UNAVAILABLE,
                     f"{model.provider_error}; then {found.cause}: {found.detail}")
    # The repeat's token budget was spent, the gateway refused a call, and the repeat failed:
    # the live model's choice to go on (scored, whatever failure followed; a pass stays one).
    cost = model.cost if model is not None else None
    # Never over a resource limit, whose kernel's word on why the run ended is firmer.
    if cost is not None and cost.refused and failed:
        return _make(Cause.TOKEN_BUDGET,
                     f"the gateway refused {cost.refused} call(s) past the repeat's token budget "
                     f"({cost.tokens:,} provider tokens used); then {found.cause}: "
                     f"{found.detail}")
    # The upstream refused a request the framework chose while it answered alk's own check:
    # the refusal, and what the framework made of it, are the framework's (scored).
    if model is not None and model.upstream_refused and failed:
        return _make(Cause.UPSTREAM_REFUSED, f"{model.upstream_refused}; then {found.cause}: "
                                             f"{found.detail}")
    if model is not None and model.unmatched and failed:
        return _make(Cause.REPLAY_MISMATCH, f"{model.unmatched}; then {found.cause}: "
                                            f"{found.detail}")
    # A fault the scenario declared fired, and the run failed without getting past it: how
    # the framework handled the fault is the finding, not the agent's answer that followed.
    unrecovered = _unrecovered(obs, found.cause)
    if unrecovered and failed:
        return _make(Cause.FAULT_UNRECOVERED,
                     f"{unrecovered}{THEN}{found.cause}: {found.detail}")
    # The framework asked its scripted model for a turn past the script: whatever failure
    # followed (a crash, a hang, a wrong answer) came from a run that had left the scenario's
    # path, so the exhausted script is named, with that failure in the detail. Never over a
    # resource limit (the kernel's word on why it ended is firmer than the worker's), and
    # never over what is not a scored failure: a pass stays one (the checks held whatever the
    # script), a void repeat stays void, and the cause is itself a scored failure, so a worker
    # that claims it cannot make a failure void or a pass of anything.
    if obs.script_exhausted is not None and failed:
        turn, scripted = obs.script_exhausted
        return _make(Cause.SCRIPT_EXHAUSTED,
                     f"the framework asked for model turn {turn}; the script has {scripted}; "
                     f"then {found.cause}: {found.detail}")
    # A check failed: the agent's only where the agent had a choice to make (a live model,
    # a worker's own model, the lane's mistake); after alk's kill or fault, or on turns alk
    # served meaning them right, the framework's (alk.attribution.layers).
    if found.cause in _CHECK_CODES:
        cause, detail = layers.judge(obs, [c for c in checks if not c.ok], Cause(found.cause),
                                     found.detail)
        return _make(cause, detail)
    return found


def _after_start(obs: Observation, checks: Sequence[Check],
                 redactor: Redactor) -> Attribution:
    """The rules for a repeat that passed the gate: how the worker ended, then its result."""
    show = functools.partial(_show, redactor=redactor)
    not_ready = "" if obs.ready is not None else "; the resumed attempt sent no framework_ready"
    if obs.timed_out:
        if obs.result is not None:
            hint = ("; a result was sent, then the worker did not exit (a thread or child "
                    "process still running?)")
        else:
            hint = _last_event_hint(obs)
        return _make(Cause.TIMEOUT, f"no exit within the timeout ({obs.duration_s:.1f} s run)"
                                    f"{hint}{not_ready}{_interrupted(obs, redactor)}")
    breached = _limit_breached(obs)
    if breached is not None:
        return _make(CAUSES[breached], f"limit {breached} = {obs.limits[breached]}: "
                                       f"{_status(obs)}{_by_cgroup(obs, breached)}"
                                       f"{_stderr(obs, redactor)}")
    if obs.signal is not None:
        return _make(Cause.KILLED_BY_SIGNAL, f"killed by {_signal_name(obs.signal)}"
                                             f"{not_ready}{_stderr(obs, redactor)}")
    if obs.exit_code != 0:
        return _crash(obs, not_ready, redactor)
    if obs.bad_result:
        return _make(Cause.BAD_RESULT, obs.bad_result)
    if obs.violation_count:
        first = obs.violations[0]
        more = f" (+{obs.violation_count - 1} more)" if obs.violation_count > 1 else ""
        return _make(Cause.PROTOCOL_VIOLATION,
                     f"stdout line {first.line}: {first.kind}: {first.detail}{more}")
    if obs.result is None:
        return _make(Cause.NO_RESULT, f"clean exit without a result event{not_ready}")
    missed = _not_fired(obs)
    failed = [c for c in checks if not c.ok]
    if failed:
        # A failed check is a scored failure even if the run skipped what the scenario meant
        # to inject: that skip may be the regression.
        return _make(_check_cause(failed[0].name),
                     "; ".join(_describe(c, show) for c in failed)
                     + (f" ({missed})" if missed else ""))
    # Every check held, but did the run test what the scenario claims?
    if obs.faults_missing:
        return _make(Cause.FAULT_NOT_FIRED, missed)
    if obs.kill_missing:
        return _make(Cause.KILL_NOT_FIRED, missed)
    return _make(Cause.PASSED, f"{len(checks)} checks held")


# The failures that say a fault the worker injected ended the run: it stopped with an error, or
# crashed, or hung. Other failures (a wrong file, a protocol line) are not the fault's doing.
_ENDED_BY_FAULT = {Cause.WRONG_STOP_REASON.value, Cause.NONZERO_EXIT.value,
                   Cause.FRAMEWORK_EXCEPTION.value, Cause.TIMEOUT.value}


def _unrecovered(obs: Observation, cause: str) -> str:
    """The faults that fired with no recovery after them, as the detail names them: on the
    wire, unless a later model call was answered in full; reported by the worker (alk cannot
    see past those), when the failure is one such a fault ends a run with. Its words are
    those alk.causes.advice reads back to fit its advice to where each fault was injected."""
    named = []
    model = obs.model
    if model is not None and model.faults_fired and not model.recovered:
        named.append(f"{WIRE_FAULT}{', '.join(model.faults_fired[:4])} and no "
                     "model call after it was answered in full")
    if obs.faults_fired and cause in _ENDED_BY_FAULT:
        fired = ", ".join(f"{point}#{occurrence}" for point, occurrence
                          in sorted(obs.faults_fired)[:4])
        named.append(f"{WORKER_FAULT}{fired}")
    return "; ".join(named)


def _limit_breached(obs: Observation) -> str | None:
    """The limit that ended a failed run, from the kernel's signal or the limit's own error as
    the last lines of stderr show it; None when the run did not fail or no limit explains it."""
    if "disk_mb" in obs.limits_hit and "disk_mb" in obs.limits:
        return "disk_mb"  # alk's own measure: a breach found as the worker exited counts too
    if obs.exit_code == 0 or not obs.limits:
        return None
    # CPU time is measured, not only read from the signal: a worker that handles or blocks
    # SIGXCPU dies of the SIGKILL at the hard limit.
    if "cpu_s" in obs.limits and (obs.signal == signal.SIGXCPU
                                  or (obs.cpu_s or 0) >= obs.limits["cpu_s"]):
        return "cpu_s"
    if obs.signal == signal.SIGXFSZ and "max_file_mb" in obs.limits:
        return "max_file_mb"
    if obs.limits_hit:
        return obs.limits_hit[0]
    tail = "\n".join(obs.stderr_tail.strip().splitlines()[-5:])
    for name, signs in SIGNS.items():
        if name in obs.limits and any(sign in tail for sign in signs):
            return name
    return None


def _by_cgroup(obs: Observation, breached: str) -> str:
    """Why a SIGKILL, or a child's, is the memory limit's: the kernel's count of its kills."""
    if breached == "memory_mb" and "memory_mb" in obs.limits_hit:
        return " (the kernel killed a process of its tree on the repeat's memory cgroup)"
    return ""


def _not_fired(obs: Observation) -> str:
    if obs.faults_missing:
        return f"declared fault(s) never reported as injected: {', '.join(obs.faults_missing)}"
    if obs.kill_missing:
        return "the kill_at event never came: no crash, no resume"
    return ""


def _make(cause: Cause, detail: str) -> Attribution:
    return Attribution(outcome_of(cause), cause.value, detail)


def _check_cause(name: str) -> Cause:
    for prefix, cause in _CHECK_CAUSES:
        if name.startswith(prefix):
            return cause
    raise ValueError(f"no cause for check {name!r}")


def _describe(check: Check, show: Callable[[Any], str]) -> str:
    return f"{check.name}: expected {show(check.expected)}, got {show(check.actual)}"


def _show(value: Any, redactor: Redactor) -> str:
    return redactor.cut(json.dumps(value, ensure_ascii=False, default=str), SHOW_CHARS)


# Library code, which raised on behalf of its caller: Python's standard library and installed
# packages, Node's own modules (`node:internal/...`, `node:fs`) and npm packages. A framework's
# own folder is among these too, but `_site` matches the worker's package_paths first.
_LIBRARY = re.compile(r"/lib/python[\d.]*/|/site-packages/|/dist-packages/|^<frozen |^node:"
                      r"|/node_modules/")
_MISSING_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([^']+)'")
# What CPython and Node both exit with when an uncaught exception (in Node, or an unhandled
# rejection) ends them.
UNCAUGHT_STATUS = 1


def _raised(text: str) -> tracebacks.Traceback | None:
    """The exception that ended the worker, from its stderr tail: Node's report first, whose
    `Node.js vX.Y.Z` last line says Node ended there (a Python traceback earlier in the tail,
    a child's, did not end it); else the last Python traceback."""
    return node_errors.last(text) or tracebacks.last(text)


def _crash(obs: Observation, not_ready: str, redactor: Redactor) -> Attribution:
    """A nonzero exit: named by the exception that ended it, and blamed on whose code raised
    it, when stderr ends with its Python traceback or Node stack; else by the last line of
    stderr."""
    found = _raised(obs.stderr_tail)
    # Lines after a traceback are its exception's message when the process ended as an
    # uncaught exception ends it; with another status they came after a traceback that was
    # handled and logged, and the text alone cannot tell a message from later output.
    if found is None or not (found.ends or obs.exit_code == UNCAUGHT_STATUS):
        return _make(Cause.NONZERO_EXIT,
                     f"exit code {obs.exit_code}{not_ready}{_stderr(obs, redactor)}")
    raised = found.chain[-1]
    said = f"exit code {obs.exit_code}{not_ready}; {_named(raised, redactor)}"
    site = _site(obs, raised.frames)
    if site is None:
        return _make(Cause.NONZERO_EXIT, said)
    cause, frame = site
    return _make(cause, f"{said}; raised at {_frame(frame, redactor)}")


def _interrupted(obs: Observation, redactor: Redactor) -> str:
    """Where the SIGINT that alk sends at the timeout found a Python worker, from the
    KeyboardInterrupt's traceback; else the last line of stderr."""
    found = _raised(obs.stderr_tail)
    if found is None or found.chain[-1].name != "KeyboardInterrupt":
        return _stderr(obs, redactor)
    frames = found.chain[-1].frames
    # asyncio.run answers SIGINT by cancelling its task and raising KeyboardInterrupt itself:
    # the task's CancelledError, the section before, shows where the program was waiting.
    if len(found.chain) > 1 and found.chain[-2].name == "CancelledError":
        frames += found.chain[-2].frames
    site = _site(obs, frames)
    if site is None:
        return _stderr(obs, redactor)
    cause, frame = site
    whose = "framework" if cause is Cause.FRAMEWORK_EXCEPTION else "worker"
    return f"; interrupted in the {whose} at {_frame(frame, redactor)}"


def _site(obs: Observation, frames: Sequence[tuple[str, str]]) -> tuple[Cause, str] | None:
    """Whose code raised: of the frames (outermost first), the deepest inside or outside the
    folders the worker named as its framework's (`package_paths`)."""
    paths = [posixpath.normpath(p) for p in (obs.ready or {}).get("package_paths") or []
             if isinstance(p, str) and p.startswith("/")]
    if not paths:
        return None
    # From the deepest frame up, past library code (the standard library, other installed
    # packages): the first frame that is the framework's or the worker's own decides, so the
    # framework is blamed when it called what raised, and the worker for its own code.
    for file, line in reversed(frames):
        file = posixpath.normpath(file)
        if any(file == path or file.startswith(path.rstrip("/") + "/") for path in paths):
            return Cause.FRAMEWORK_EXCEPTION, f"{file}:{line}"
        if not _LIBRARY.search(file):
            return Cause.WORKER_EXCEPTION, f"{file}:{line}"
    return None


def _named(raised: tracebacks.Raised, redactor: Redactor) -> str:
    """`Type: message` on one line, bounded: the groups it was raised in come first."""
    name = " > ".join([*(kind.rsplit(".", 1)[-1] for kind in raised.groups), raised.name])
    message = " ".join(raised.message.split())
    return redactor.cut(f"{name}: {message}" if message else name, EXCEPTION_CHARS)


def _frame(frame: str, redactor: Redactor) -> str:
    # Its end says the most (the file and the line): a long path keeps that.
    return redactor.tail(frame, FRAME_CHARS)


def _status(obs: Observation) -> str:
    if obs.signal is not None:
        return f"killed by {_signal_name(obs.signal)}"
    return f"exit code {obs.exit_code}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _first_violation(obs: Observation) -> str:
    """Before the handshake, a malformed line is usually why no framework_ready was seen."""
    if not obs.violations:
        return ""
    first = obs.violations[0]
    return f"; stdout line {first.line} was not accepted: {first.kind}: {first.detail}"


def _stderr(obs: Observation, redactor: Redactor) -> str:
    lines = [line.strip() for line in obs.stderr_tail.splitlines() if line.strip()]
    return f"; stderr: {redactor.cut(lines[-1], STDERR_CHARS)}" if lines else ""


def _last_event_hint(obs: Observation) -> str:
    if obs.trajectory and obs.model is not None:
        # alk's gateway's trajectory: a model call ("200:write_report") or a tool it served.
        return f"; last step alk saw: {obs.trajectory[-1]}"
    if obs.trajectory:
        return f"; last tool result: {obs.trajectory[-1]}"
    calls = sum(obs.tool_calls.values())
    return f"; {calls} tool call(s), no tool result" if calls else ""
