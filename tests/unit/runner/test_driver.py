"""alk.runner.driver: the decisions of a run, driven with plain values (no process)."""

from __future__ import annotations

import json
import signal

from alk.causes import Cause
from alk.records import KillAt, Preflight
from alk.redaction import Redactor
from alk.runner import driver as driver_module
from alk.runner.driver import Driver, GiveUp, Record, Sample, Send, Signal
from alk.runner.protocol import Phase, hello_message
from alk.runner.request import RunRequest

START = {"type": "start", "run_id": "r", "scenario": {"id": "s"}, "repeat": 1, "seed": 1}
READY = {"channel": "framework", "type": "framework_ready",
         "payload": {"framework": "fw", "framework_version": "1.0"}}


def accept(ready):
    return Preflight(True, ready.get("framework"), ready.get("framework_version"))


def reject(ready):
    return Preflight(False, ready.get("framework"), ready.get("framework_version"),
                     Cause.VERSION_UNSUPPORTED, "fw 1.0 does not satisfy '>=2'")


def make(start=START, gate=accept, kill_at=None, timeout_s=10.0, secrets=()):
    request = RunRequest(argv=("w",), cwd="/ws", env={}, timeout_s=timeout_s,
                         hello=hello_message("lane"), start=start, kill_at=kill_at,
                         redactor=Redactor(secrets))
    return Driver(request, gate, started_at=100.0)


def line(message) -> bytes:
    return json.dumps(message).encode()


def event(channel, type, **payload) -> bytes:
    return line({"channel": channel, "type": type, "payload": payload})


def records(actions, harness=None):
    return [(a.channel, a.type) for a in actions if isinstance(a, Record)
            and (harness is None or a.harness == harness)]


def ready(d: Driver, now=100.1):
    actions = d.stdout_line(line(READY), False, now)
    d.read_done()
    return actions


def test_opening_sends_hello_and_records_it():
    actions = make().opening()
    assert isinstance(actions[0], Send) and json.loads(actions[0].data)["type"] == "hello"
    assert records(actions) == [("harness", "hello")]


def test_an_accepted_ready_is_answered_with_start_before_anything_is_recorded():
    d = make()
    actions = d.stdout_line(line(READY), False, 101.0)
    send = actions[0]
    assert isinstance(send, Send) and send.close
    message = json.loads(send.data)
    assert message["type"] == "start" and message["deadline_s"] == 9.0
    assert records(actions) == [("framework", "framework_ready"), ("harness", "preflight"),
                                ("harness", "start")]
    # The phase changes at the end of the read that carried framework_ready, not before.
    assert d.state.phase is Phase.READY
    d.read_done()
    assert d.state.phase is Phase.STARTED and d.preflight.ok


def test_events_read_with_ready_in_the_same_chunk_are_before_start_violations():
    d = make()
    d.stdout_line(line(READY), False, 100.1)
    actions = d.stdout_line(event("tool", "call", name="x"), False, 100.1)
    assert records(actions) == [("harness", "violation")]
    assert d.state.violations[0].kind == "before_start"


def test_a_rejected_ready_is_answered_with_abort_and_a_kill_is_scheduled():
    d = make(gate=reject)
    actions = ready(d)
    assert json.loads(actions[0].data)["type"] == "abort"
    assert d.state.phase is Phase.ABORTED
    assert d.tick(100.5) == []
    assert d.tick(100.1 + driver_module.ABORT_GRACE_S) == [Signal(signal.SIGKILL, group=True)]


def test_a_probe_is_aborted_even_when_the_version_is_good():
    d = make(start=None)
    actions = ready(d)
    message = json.loads(actions[0].data)
    assert message == {"type": "abort", "reason": "preflight probe only"}


def test_the_timeout_escalates_int_term_kill_then_gives_up():
    d = make(timeout_s=1.0)
    assert d.tick(100.5) == [] and d.wake_at(100.5) == 101.0
    first = d.tick(101.0)
    assert records(first) == [("harness", "timeout")]
    assert [a for a in first if isinstance(a, Signal)] == [Signal(signal.SIGINT, group=False)]
    assert d.timed_out
    term = 101.0 + driver_module.INT_GRACE_S
    assert d.tick(term) == [Signal(signal.SIGTERM, group=False)]
    kill = term + driver_module.TERM_GRACE_S
    assert d.tick(kill) == [Signal(signal.SIGKILL, group=True)]
    assert d.tick(kill + 0.1) == []
    [give_up] = d.tick(kill + driver_module.REAP_LIMIT_S + 0.01)
    assert isinstance(give_up, GiveUp) and "did not end" in give_up.reason


def test_each_grace_counts_from_when_its_signal_went_not_when_it_was_due():
    """A loop that wakes late (a loaded machine) sends late; the next signal still waits its
    whole grace after the one that went, and two never go in one tick."""
    int_grace, term_grace = driver_module.INT_GRACE_S, driver_module.TERM_GRACE_S
    d = make(timeout_s=1.0)
    late = 101.0 + int_grace + term_grace + 5  # every signal of the escalation is overdue
    assert [a for a in d.tick(late) if isinstance(a, Signal)] == [Signal(signal.SIGINT,
                                                                          group=False)]
    d.signal_sent(late + 0.5)  # and it went later still
    assert d.tick(late + 0.5 + int_grace - 0.01) == []
    assert d.tick(late + 0.5 + int_grace) == [Signal(signal.SIGTERM, group=False)]
    d.signal_sent(late + 0.5 + int_grace)
    assert d.tick(late + 0.5 + int_grace + term_grace - 0.01) == []
    assert d.tick(late + 0.5 + int_grace + term_grace) == [Signal(signal.SIGKILL, group=True)]


def test_kill_at_fires_once_at_its_occurrence_and_later_lines_are_only_evidence():
    d = make(kill_at=KillAt("tool", "result", "write", occurrence=2))
    ready(d)
    result = event("tool", "result", name="write", ok=True)
    assert not [a for a in d.stdout_line(result, False, 101) if isinstance(a, Signal)]
    assert not [a for a in d.stdout_line(event("tool", "result", name="other", ok=True), False,
                                          101) if isinstance(a, Signal)]
    actions = d.stdout_line(result, False, 101)
    assert ("harness", "kill_at") in records(actions)
    assert Signal(signal.SIGKILL, group=True) in actions and d.kill_fired
    after = d.stdout_line(event("agent", "result", output="x", stop_reason="y"), False, 101)
    assert records(after) == [("stdout", "after_kill")]
    assert d.state.result is None  # not part of what the attempt did


def test_a_line_after_the_kill_is_kept_redacted_and_bounded():
    secret = "sk-" + "Z8q" * 10
    d = make(kill_at=KillAt("tool", "call"), secrets=(secret,))
    ready(d)
    d.stdout_line(event("tool", "call", name="x"), False, 101)
    [after] = d.stdout_line(("x" * (driver_module.AFTER_KILL_CHARS - 5) + secret).encode(),
                            False, 101)
    text = after.payload["text"]
    assert len(text) <= driver_module.AFTER_KILL_CHARS + 1
    assert secret[:5] not in text[-40:]


def test_the_result_asks_for_a_memory_sample():
    d = make()
    ready(d)
    actions = d.stdout_line(event("agent", "result", output="o", stop_reason="s"), False, 101)
    assert Sample() in actions


def test_no_kill_at_before_start_or_without_a_match():
    d = make(kill_at=KillAt("tool", "call"))
    actions = d.stdout_line(event("tool", "call", name="x"), False, 100.1)  # before ready
    assert not [a for a in actions if isinstance(a, Signal)] and not d.kill_fired
