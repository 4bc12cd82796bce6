"""What to do as a worker runs, apart from the process: a pure state machine.

The loop (`runner.loop`) feeds it what happened — a stdout line, the end of a read, the time —
and carries out the actions it returns: bytes to send, events to record, signals to send. Here
live the version gate's turn (framework_ready goes to the `ReadyCheck`, whose verdict is
answered with start or abort), the phase changes, the harness-injected crash (`kill_at`) and
the timeout's escalation (`Driver.tick`). Tests drive it with plain values.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any, Mapping, Union

from alk.records import Preflight, Violation
from alk.runner.protocol import (
    MAX_VIOLATIONS_RECORDED,
    Phase,
    ProtocolState,
    WorkerEvent,
    abort_message,
    decode_line,
    encode,
)
from alk.runner.request import ReadyCheck, RunRequest
from alk.transcript.writer import HARNESS

# After a timeout: SIGINT first (a Python worker prints where it hung), then TERM, then KILL.
INT_GRACE_S = 0.5
TERM_GRACE_S = 0.5
# After an abort the worker should exit by itself; past this it is killed.
ABORT_GRACE_S = 1.0
# After SIGKILL a process ends unless stuck in the kernel; never wait on it longer than this.
REAP_LIMIT_S = 2.0
# While a timed-out worker is being ended, how often to look again.
POLL_AFTER_TIMEOUT_S = 0.05
# What of a stdout line written just before alk's SIGKILL is kept.
AFTER_KILL_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Send:
    """Bytes for the worker's stdin; `close`: close stdin once they are written."""

    data: bytes
    close: bool = False


@dataclass(frozen=True, slots=True)
class Record:
    """A transcript event: alk's own (`channel` harness) or one the worker wrote."""

    channel: str
    type: str
    payload: Mapping[str, Any]

    @property
    def harness(self) -> bool:
        return self.channel == HARNESS


@dataclass(frozen=True, slots=True)
class Signal:
    """A signal for the worker alone, or (`group`) for everything it runs in and started."""

    number: int
    group: bool


@dataclass(frozen=True, slots=True)
class Sample:
    """Read the worker's peak memory now (it has just sent its result)."""


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The worker did not end after SIGKILL: stop waiting, as alk's own failure."""

    reason: str


Action = Union[Send, Record, Signal, Sample, GiveUp]


# Tool names whose reported results are counted apart (the lane declares at most 64).
MAX_REPORTED_NAMES = 256


def _recorded(violation: Violation) -> list[Action]:
    return [_harness("violation", {"kind": violation.kind, "line": violation.line,
                                   "detail": violation.detail})]


def _harness(type: str, payload: Mapping[str, Any]) -> Record:
    return Record(HARNESS, type, payload)


class Driver:
    """Follows one worker process from hello to exit."""

    def __init__(self, request: RunRequest, gate: ReadyCheck, started_at: float) -> None:
        self.request, self.gate = request, gate
        self.state = ProtocolState(workspace=request.cwd, redactor=request.redactor)
        self.preflight: Preflight | None = None
        self.deadline = started_at + request.timeout_s
        self.timed_out = False
        self.kill_fired = False  # the scenario's kill_at came and alk killed the worker
        self._kill_seen = 0
        self._reported: dict[str, int] = {}  # tool results the worker reported, by name
        self._killed_at: float | None = None
        self._next_phase: Phase | None = None
        # Signals due: (when, signal), in time order.
        self._escalation: list[tuple[float, int]] = []
        self._said_unrecorded = False  # the violations past the recorded ones were said
        self._sent_due: float | None = None  # when the last tick's signal was due to go

    def opening(self) -> list[Action]:
        hello = self.request.hello
        return [Send(encode(hello)), _harness("hello", dict(hello))]

    def stdout_line(self, raw: bytes, cut: bool, now: float) -> list[Action]:
        if self.kill_fired:
            # Written before the SIGKILL landed, read after: evidence of the worker's last
            # moments, but no part of what the attempt did (no counts, no path, no result).
            text = self.request.redactor.excerpt(raw, AFTER_KILL_CHARS)
            return [Record("stdout", "after_kill", {"text": text})]
        recorded = self.state.violation_count < MAX_VIOLATIONS_RECORDED
        outcome = self.state.accept(decode_line(raw, cut, self.request.redactor, recorded))
        if not isinstance(outcome, WorkerEvent):
            if recorded:
                return _recorded(outcome)
            if not self._said_unrecorded:
                self._said_unrecorded = True
                return [_harness("violations_unrecorded", {
                    "after": MAX_VIOLATIONS_RECORDED, "line": outcome.line,
                    "detail": "later violations are counted (the exit event's violations), "
                              "not recorded"})]
            return []
        if outcome.type == "framework_ready" and self.state.phase is Phase.READY \
                and self.preflight is None:
            return self._on_ready(outcome, now)
        actions: list[Action] = [Record(outcome.channel, outcome.type, outcome.payload)]
        actions += self._unserved(outcome)
        actions += self._unserved_tool(outcome)
        if outcome.type == "result":
            actions.append(Sample())
        actions += self._kill_at(outcome, now)
        return actions

    def read_done(self) -> None:
        """The answer to framework_ready counts from the end of the read that carried it:
        lines the worker wrote with it were written before it could read start."""
        if self._next_phase is not None:
            self.state.phase, self._next_phase = self._next_phase, None

    def tick(self, now: float) -> list[Action]:
        """What is due at `now`: the timeout, the next signal of an escalation, giving up."""
        if self._killed_at is not None and now > self._killed_at + REAP_LIMIT_S:
            return [GiveUp(f"the worker did not end within {REAP_LIMIT_S:.0f} s of SIGKILL")]
        actions: list[Action] = []
        if not self.timed_out and now >= self.deadline:
            self.timed_out = True
            actions.append(_harness("timeout", {"after_s": self.request.timeout_s,
                                                "phase": self.state.phase.value}))
            self._escalation = [(now, signal.SIGINT), (now + INT_GRACE_S, signal.SIGTERM),
                                (now + INT_GRACE_S + TERM_GRACE_S, signal.SIGKILL)]
        if self._escalation and now >= self._escalation[0][0]:
            # One signal a tick: the graces after it count from now, not from when it was due,
            # so that a loop that woke late (a loaded machine) never shortens the time a worker
            # is given between one signal and the next.
            due, number = self._escalation.pop(0)
            self._delay(now - due)
            self._sent_due = now
            actions.append(self._signal(number, now))
        return actions

    def signal_sent(self, at: float) -> None:
        """The escalation's signal of the last tick went at `at`: the graces after it count
        from then."""
        if self._sent_due is not None:
            self._delay(at - self._sent_due)
            self._sent_due = None

    def _delay(self, late: float) -> None:
        if late > 0:
            self._escalation = [(due + late, number) for due, number in self._escalation]

    def wake_at(self, now: float) -> float:
        """When `tick` has something to do next."""
        times = [self.deadline if not self.timed_out else now + POLL_AFTER_TIMEOUT_S]
        if self._escalation:
            times.append(self._escalation[0][0])
        if self._killed_at is not None:
            times.append(self._killed_at + REAP_LIMIT_S)
        return min(times)

    # ------------------------------------------------------------------------------------------

    def _signal(self, number: int, now: float) -> Signal:
        # The gentle signals go to the worker alone: sent to the group they would also reach
        # the wrappers in front of it, which would die at once and take the worker down
        # before it could say where it was stuck. SIGKILL goes to the whole group.
        if number == signal.SIGKILL and self._killed_at is None:
            self._killed_at = now
        return Signal(number, group=number == signal.SIGKILL)

    def _unserved(self, event: WorkerEvent) -> list[Action]:
        """With alk serving the model, a worker that claims more model turns than the gateway
        served is telling of a model it never talked to: a violation."""
        gateway = self.request.gateway
        if (gateway is None or (event.channel, event.type) != ("model", "turn")
                or self.state.model_turns <= gateway.served_turns()):
            return []
        return self._violation(
            "unserved_model_turn", f"model/turn number {self.state.model_turns}, but alk's "
                                   f"gateway served {gateway.served_turns()} turn(s)")

    def _serves_tools(self) -> bool:
        gateway = self.request.gateway
        return gateway is not None and getattr(gateway, "tools", None) is not None

    def _unserved_tool(self, event: WorkerEvent) -> list[Action]:
        """With alk serving the lane's tools, a tool result the worker reports is one alk
        answered: a result past the calls of that tool alk answered is a call it never served
        (the worker ran a tool of its own, or made one up), a violation."""
        if (event.channel, event.type) != ("tool", "result") or not self._serves_tools():
            return []
        name = self.request.redactor.bounded(str(event.payload.get("name")), 64)
        if name not in self._reported and len(self._reported) >= MAX_REPORTED_NAMES:
            name = "(past the names counted)"  # a flood of names is counted under one
        self._reported[name] = reported = self._reported.get(name, 0) + 1
        answered = self.request.gateway.tools.answered(name)  # type: ignore[union-attr]
        if reported <= answered:
            return []
        return self._violation(
            "unserved_tool_call", f"tool/result {reported} of {name!r}, but alk served "
                                  f"{answered} call(s) of it: the lane's tools are alk's")

    def observed_tool(self, type: str, payload: dict[str, Any], now: float) -> list[Action]:
        """alk's own record of a tool call it served: where a kill_at on the tool channel
        fires, when the lane serves its tools (the worker's word for a call is not waited on)."""
        return self._kill_at(WorkerEvent("tool", type, payload), now, observed=True)

    def gateway_violation(self, payload: dict[str, Any]) -> list[Action]:
        """What the gateway found the worker claiming of the model (a resumed attempt's turns
        it never served): a violation of the worker's, as one on its stdout is."""
        return self._violation(str(payload.get("kind")), str(payload.get("detail")))

    def _violation(self, kind: str, detail: str) -> list[Action]:
        """A violation alk found beside the worker's lines: counted, and recorded."""
        return _recorded(self.state.violate(kind, detail))

    def _kill_at(self, event: WorkerEvent, now: float, observed: bool = False) -> list[Action]:
        """The scenario's harness-injected crash: SIGKILL at the named event, at once. With
        the lane's tools served by alk, a tool event counts when alk observed it."""
        kill = self.request.kill_at
        if kill is None or self.kill_fired or self.state.phase is not Phase.STARTED:
            return []
        if event.channel == "tool" and observed != self._serves_tools():
            return []
        if (event.channel, event.type) != (kill.channel, kill.type) or (
                kill.name is not None and event.payload.get("name") != kill.name):
            return []
        self._kill_seen += 1
        if self._kill_seen != kill.occurrence:
            return []
        self.kill_fired = True
        return [_harness("kill_at", {"channel": kill.channel, "type": kill.type,
                                     "name": kill.name, "occurrence": kill.occurrence}),
                self._signal(signal.SIGKILL, now)]

    def _on_ready(self, ready: WorkerEvent, now: float) -> list[Action]:
        """Judges framework_ready and answers with start or abort. The answer goes out before
        the events are recorded: the worker is blocked on stdin until it arrives."""
        preflight = self.preflight = self.gate(ready.payload)
        start = self.request.start
        if preflight.ok and start is not None:
            self._next_phase = Phase.STARTED
            kind = "start"
            message = {**start, "deadline_s": round(max(0.0, self.deadline - now), 3)}
            if self.request.gateway is not None:
                self.request.gateway.open()  # before start goes out: nothing of it earlier
        else:
            self._next_phase = Phase.ABORTED
            self._escalation = [(now + ABORT_GRACE_S, signal.SIGKILL)]
            kind = "abort"
            message = abort_message(preflight.detail if not preflight.ok
                                    else "preflight probe only")
        return [Send(encode(message), close=True),
                Record(ready.channel, ready.type, ready.payload),
                _harness("preflight", {"ok": preflight.ok, "framework": preflight.framework,
                                       "version": preflight.version, "cause": preflight.cause,
                                       "detail": preflight.detail}),
                _harness(kind, message)]
