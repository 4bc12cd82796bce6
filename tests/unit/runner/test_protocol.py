"""alk.runner.protocol: decoding one stdout line, and following a worker through the handshake and
the run with bounded memory. Pure: bytes in, events and violations out."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pytest

from alk import worker
from alk.records import Violation
from alk.runner import protocol
from alk.runner.protocol import (
    MAX_JSON_DEPTH,
    MAX_NAME_CHARS,
    MAX_TOOL_NAMES,
    MAX_TRAJECTORY_CHARS,
    MAX_VIOLATIONS_KEPT,
    Phase,
    ProtocolState,
    WorkerEvent,
    decode_line,
    result_problem,
)


def line(**message: Any) -> bytes:
    return json.dumps(message).encode()


def event(channel: str, type: str, **payload: Any) -> WorkerEvent:
    return WorkerEvent(channel, type, payload)


READY = event("framework", "framework_ready", framework="fw", framework_version="1.0")
GOOD_RESULT = {"output": "done", "stop_reason": "accepted", "end_state": {"phase": "stopped"}}


def started() -> ProtocolState:
    """A state after framework_ready and after alk sent start (the runner sets the phase)."""
    state = ProtocolState()
    state.accept(READY)
    state.phase = Phase.STARTED
    return state


def kinds(state: ProtocolState) -> list[str]:
    return [v.kind for v in state.violations]


# --- decode_line ---------------------------------------------------------------------------


def test_decodes_a_good_event() -> None:
    decoded = decode_line(line(channel="tool", type="call", payload={"name": "echo"}))
    assert decoded == WorkerEvent("tool", "call", {"name": "echo"})


def test_payload_defaults_to_an_empty_object() -> None:
    assert decode_line(line(channel="agent", type="thinking")) == WorkerEvent("agent", "thinking",
                                                                              {})


@pytest.mark.parametrize("raw, expected", [
    (b"nope", ("not_json", "line is not JSON: 'nope'")),
    (b"", ("not_json", "line is not JSON: ''")),
    (b"[1, 2]", ("not_object", "line is JSON but not an object: '[1, 2]'")),
    (b'"text"', ("not_object", "line is JSON but not an object: '\"text\"'")),
    (line(channel="harness", type="attribution"),
     ("harness_channel", "worker claimed the harness channel (type 'attribution'); ignored")),
    (line(channel="system", type="x"),
     ("unknown_channel", "channel must be one of agent, tool, model, user, framework, "
                         "got 'system'")),
    (line(type="x"),
     ("unknown_channel", "channel must be one of agent, tool, model, user, framework, "
                         "got None")),
    (line(channel="agent"), ("bad_type", "'type' must be a non-empty string of at most 128 "
                                         "characters, got None")),
    (line(channel="agent", type=""), ("bad_type", "'type' must be a non-empty string of at most "
                                                  "128 characters, got ''")),
    (line(channel="agent", type=3), ("bad_type", "'type' must be a non-empty string of at most "
                                                 "128 characters, got 3")),
    (line(channel="agent", type="x", payload=[1]),
     ("bad_payload", "'payload' must be an object, got list")),
    (line(channel="agent", type="x", payload=None),
     ("bad_payload", "'payload' must be an object, got NoneType")),
])
def test_bad_lines_are_violations(raw: bytes, expected: tuple[str, str]) -> None:
    assert decode_line(raw) == expected


def test_invalid_utf8() -> None:
    kind, detail = decode_line(b'{"channel":"agent","type":"x\xff"}')
    assert kind == "invalid_utf8"
    assert detail.startswith("line is not UTF-8: '{\"channel\"")


@pytest.mark.parametrize("raw", [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    b'{"channel":"agent","type":"x","payload":{"p":' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
])
def test_deep_nesting_is_a_violation_not_a_crash(raw: bytes) -> None:
    # 100,000 brackets are more values than a line may hold: refused before json.loads.
    kind, detail = decode_line(raw)
    assert kind == "too_many"
    assert detail.startswith("about 100,00")
    assert detail.endswith("…")  # the excerpt is bounded, not 200,000 characters
    assert len(detail) < 300


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 500, 900])
def test_nesting_past_the_bound_is_a_violation_however_json_loads_takes_it(depth: int) -> None:
    # Nested 900-999 deep, json.loads succeeds, and every later recursive walk (hashing the
    # path, redaction, encoding) would hit Python's recursion limit.
    inner = "[" * (depth - 2) + "]" * (depth - 2)
    decoded = decode_line(f'{{"channel":"agent","type":"x","payload":{{"p":{inner}}}}}'.encode())
    if depth <= MAX_JSON_DEPTH:
        assert isinstance(decoded, WorkerEvent)
        state = started()
        assert state.accept(decoded) is decoded and state.violation_count == 0
    else:
        assert decoded[0] == "too_deep"
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in decoded[1]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400",
                                     "1" + "0" * 400 + ".0"])
def test_numbers_json_cannot_carry_are_violations(literal: str) -> None:
    kind, detail = decode_line(
        f'{{"channel":"agent","type":"x","payload":{{"v":{literal}}}}}'.encode())
    assert kind == "not_finite"
    assert "not finite" in detail


def test_a_type_longer_than_the_bound_is_a_violation_quoted_in_bounded_form() -> None:
    kind, detail = decode_line(line(channel="agent", type="t" * 1_000_000))
    assert kind == "bad_type"
    assert len(detail) < 400


def test_a_cut_line_is_a_violation_even_if_it_parses() -> None:
    assert decode_line(line(channel="agent", type="x"), cut=True) == (
        "line_too_long", "line longer than the limit, cut: '{\"channel\": \"agent\", \"type\": "
                         "\"x\"}'")


def test_excerpts_are_bounded() -> None:
    kind, detail = decode_line(b"x" * 10_000)
    assert kind == "not_json"
    assert detail == f"line is not JSON: {'x' * protocol.EXCERPT_CHARS!r}…"


# --- handshake -----------------------------------------------------------------------------


def test_framework_ready_first_moves_to_ready() -> None:
    state = ProtocolState()
    assert state.phase is Phase.AWAIT_READY
    assert state.accept(READY) is READY
    assert state.phase is Phase.READY
    assert state.ready == {"framework": "fw", "framework_version": "1.0", "package_paths": []}
    assert state.violation_count == 0


def test_events_before_ready_are_violations() -> None:
    state = ProtocolState()
    outcome = state.accept(event("agent", "thinking"))
    assert outcome == Violation("before_ready", 1, "agent/thinking before framework_ready; the "
                                                   "first line must be it")
    assert state.phase is Phase.AWAIT_READY
    assert state.ready is None


def test_events_after_ready_but_before_start_are_violations() -> None:
    state = ProtocolState()
    state.accept(READY)
    outcome = state.accept(event("tool", "call", name="search"))
    assert outcome == Violation("before_start", 2, "tool/call before alk sent start; wait for "
                                                   "start() first")
    assert state.tool_calls == {}  # not counted either
    state.accept(event("agent", "result", **GOOD_RESULT))
    assert state.result is None


def test_duplicate_ready_is_a_violation_and_ignored() -> None:
    state = started()
    second = event("framework", "framework_ready", framework="other", framework_version="9")
    assert state.accept(second) == Violation("duplicate_ready", 2,
                                             "framework_ready sent twice; ignored")
    assert state.ready == {"framework": "fw", "framework_version": "1.0", "package_paths": []}
    assert state.phase is Phase.STARTED


def test_decoded_violations_are_recorded_with_their_line_number() -> None:
    state = started()
    state.accept(decode_line(b"{"))
    assert state.violations == [Violation("not_json", 2, "line is not JSON: '{'")]
    assert state.lines == 2


# --- the run -------------------------------------------------------------------------------


def test_tool_calls_are_counted_by_name() -> None:
    state = started()
    for name in ["search", "search", "fetch"]:
        state.accept(event("tool", "call", name=name))
    state.accept(event("tool", "result", name="search", ok=True))  # results are not calls
    assert state.tool_calls == {"search": 2, "fetch": 1}


def test_tool_event_without_a_string_name_is_a_violation() -> None:
    state = started()
    state.accept(event("tool", "call", name=7))
    assert kinds(state) == ["bad_tool_event"]
    assert state.violations[0].detail == "tool/call without a string 'name'"
    assert state.tool_calls == {}


@pytest.mark.parametrize("ok, step", [
    (True, "lookup:ok"), (False, "lookup:error"), ("false", "lookup:error"),
    ("true", "lookup:error"), (1, "lookup:error"), (None, "lookup:error"),
])
def test_trajectory_only_a_real_true_is_ok(ok: Any, step: str) -> None:
    state = started()
    state.accept(event("tool", "result", name="lookup", ok=ok))
    assert state.trajectory == [step]


def test_trajectory_keeps_order() -> None:
    state = started()
    state.accept(event("tool", "result", name="a", ok=True))
    state.accept(event("tool", "result", name="b", ok=False))
    state.accept(event("tool", "result", name="a"))
    assert state.trajectory == ["a:ok", "b:error", "a:error"]


def test_a_good_result_is_kept() -> None:
    state = started()
    state.accept(event("agent", "result", **GOOD_RESULT))
    assert state.result == GOOD_RESULT
    assert state.bad_result is None


@pytest.mark.parametrize("payload, problem", [
    ({"output": 3, "stop_reason": "x"}, "result.output must be a string, got int"),
    ({"stop_reason": "x"}, "result.output must be a string, got NoneType"),
    ({"output": "x"}, "result.stop_reason must be a string, got NoneType"),
    ({"output": "x", "stop_reason": ["x"]}, "result.stop_reason must be a string, got list"),
    ({"output": "x", "stop_reason": "x", "end_state": [1]}, "result.end_state must be an object"),
    ({"output": "x", "stop_reason": "x", "end_state": None},
     "result.end_state must be an object"),
])
def test_bad_results(payload: dict[str, Any], problem: str) -> None:
    assert result_problem(payload) == problem
    state = started()
    state.accept(event("agent", "result", **payload))
    assert state.bad_result == problem
    assert state.result is None


def test_end_state_may_be_left_out() -> None:
    assert result_problem({"output": "", "stop_reason": "done"}) is None


def test_a_second_result_is_a_bad_result() -> None:
    state = started()
    state.accept(event("agent", "result", **GOOD_RESULT))
    state.accept(event("agent", "result", **GOOD_RESULT))
    assert state.bad_result == "the worker sent a second result event"


def test_a_result_after_a_bad_one_does_not_replace_it() -> None:
    state = started()
    state.accept(event("agent", "result", output=1, stop_reason="x"))
    state.accept(event("agent", "result", **GOOD_RESULT))
    assert state.result is None
    assert state.bad_result == "the worker sent a second result event"


# --- bounded memory ------------------------------------------------------------------------


def test_violations_kept_are_bounded_but_all_are_counted() -> None:
    state = started()
    total = MAX_VIOLATIONS_KEPT + 25
    for _ in range(total):
        state.accept(decode_line(b"garbage"))
    assert state.violation_count == total
    assert len(state.violations) == MAX_VIOLATIONS_KEPT
    # The first ones are kept, with their own line numbers (line 1 was framework_ready).
    assert [v.line for v in state.violations] == list(range(2, MAX_VIOLATIONS_KEPT + 2))


def test_tool_names_are_bounded_but_known_names_keep_counting() -> None:
    state = started()
    for index in range(MAX_TOOL_NAMES):
        state.accept(event("tool", "call", name=f"t{index}"))
    state.accept(event("tool", "call", name="one-too-many"))
    state.accept(event("tool", "call", name="t0"))
    state.accept(event("tool", "call", name="t0"))
    assert len(state.tool_calls) == MAX_TOOL_NAMES
    assert "one-too-many" not in state.tool_calls
    assert state.uncounted_tool_calls == 1
    assert state.tool_calls["t0"] == 3


def test_trajectory_is_bounded_in_characters_while_calls_keep_counting_and_hashing() -> None:
    steps = MAX_TRAJECTORY_CHARS // len("step:ok") + 50
    state, longer = started(), started()
    for run, count in ((state, steps), (longer, steps + 1)):
        for _ in range(count):
            run.accept(event("tool", "call", name="step"))
            run.accept(event("tool", "result", name="step", ok=True))
    assert sum(map(len, state.trajectory)) <= MAX_TRAJECTORY_CHARS + len("step:ok")
    assert len(state.trajectory) < steps
    assert state.tool_calls == {"step": steps}
    assert state.lines == 1 + 2 * steps
    # The kept steps are equal, the trajectories are not: the digest covers every step.
    assert state.trajectory == longer.trajectory
    assert state.trajectory_hash.hexdigest() != longer.trajectory_hash.hexdigest()


def test_event_path_steps_are_bounded_in_characters_but_hashed_whole() -> None:
    state = started()
    for index in range(5_000):
        state.accept(event("agent", "t" * 120, name=f"n{index}" + "x" * 120))
    assert sum(map(len, state.path)) <= protocol.MAX_PATH_CHARS + 400
    assert len(state.path) < 5_000


@pytest.mark.slow
def test_fault_points_are_bounded_in_size_and_number() -> None:
    state = started()
    for index in range(protocol.MAX_FAULTS + 10):
        state.accept(event("framework", "fault", point=f"{index}" + "p" * 1_000_000))
    assert len(state.faults_fired) == protocol.MAX_FAULTS
    assert all(len(point) <= MAX_NAME_CHARS for point, _ in state.faults_fired)


@pytest.mark.parametrize("occurrence", [True, 0, -1, 2**40, "1", 1.0])
def test_a_fault_with_an_occurrence_that_is_not_a_small_count_is_not_recorded(occurrence):
    state = started()
    state.accept(event("framework", "fault", point="before_model", occurrence=occurrence))
    assert state.faults_fired == set()


def test_huge_tool_names_are_bounded_but_stay_distinct() -> None:
    state = started()
    for letter in "ab":
        name = letter * 1_000_000
        state.accept(event("tool", "call", name=name))
        state.accept(event("tool", "result", name=name, ok=True))
    assert len(state.tool_calls) == 2
    assert all(len(name) == MAX_NAME_CHARS for name in state.tool_calls)
    assert all(len(step) < MAX_NAME_CHARS + 10 for step in state.trajectory)
    assert state.trajectory[0] != state.trajectory[1]


def test_names_are_redacted_before_they_are_cut() -> None:
    from alk.redaction import Redactor

    secret = "sk-" + "Q7w9" * 8
    state = ProtocolState(redactor=Redactor([secret]))
    state.accept(READY)
    state.phase = Phase.STARTED
    for offset in range(90, 130):
        state.accept(event("tool", "call", name="n" * offset + secret))
    for name in state.tool_calls:
        assert not any(secret[i:i + 8] in name for i in range(len(secret) - 7)), name


def test_event_paths_ignore_top_level_ids_and_the_workspace_but_keep_arguments() -> None:
    def path(*events: WorkerEvent, workspace: str = "/ws/a") -> str:
        state = ProtocolState(workspace=workspace)
        state.accept(READY)
        state.phase = Phase.STARTED
        for item in events:
            state.accept(item)
        return state.path_hash.hexdigest()

    call = lambda **extra: event("tool", "call", name="lookup", **extra)  # noqa: E731
    assert path(call(args={"order": 1}, call_id="a")) == path(call(args={"order": 1}, call_id="b"))
    assert path(call(args={"order": 1})) != path(call(args={"order": 2}))
    assert path(call(args={"order_id": 1})) != path(call(args={"order_id": 2}))
    assert (path(call(args={"cwd": "/ws/a"}), workspace="/ws/a")
            == path(call(args={"cwd": "/ws/b"}), workspace="/ws/b"))


# --- what the state counts and remembers ---------------------------------------------------


def test_only_model_turns_are_counted_as_turns() -> None:
    state = started()
    for sent in (event("model", "turn"), event("model", "turn"), event("model", "request"),
                 event("agent", "turn"), event("framework", "fault", point="p")):
        state.accept(sent)
    assert state.model_turns == 2


def test_the_first_exhausted_script_is_kept_and_is_no_turn() -> None:
    state = started()
    state.accept(event("model", "turn"))
    state.accept(event("model", "script_exhausted", turn=2, script_turns=1))
    state.accept(event("model", "script_exhausted", turn=3, script_turns=1))
    assert (state.script_exhausted, state.model_turns, state.violation_count) == ((2, 1), 1, 0)


@pytest.mark.parametrize("payload, kept", [
    ({"turn": 1, "script_turns": 0}, (1, 0)),
    ({"turn": protocol.MAX_TURN, "script_turns": protocol.MAX_TURN - 1},
     (2**31 - 1, 2**31 - 2)),
    ({"turn": 2**31, "script_turns": 1}, None),
    ({"turn": 2, "script_turns": 2}, None),  # not past the script
    ({"turn": 2, "script_turns": 3}, None),
    ({"turn": 0, "script_turns": -1}, None),
    ({"turn": 1, "script_turns": -1}, None),
    ({"turn": True, "script_turns": 0}, None),
    ({"turn": 2, "script_turns": False}, None),
    ({"turn": 2.0, "script_turns": 1}, None),
    ({"turn": "2", "script_turns": 1}, None),
    ({"turn": 2}, None),
    ({"script_turns": 1}, None),
])
def test_an_exhausted_script_is_kept_only_as_two_counts_past_the_script(payload: dict,
                                                                        kept: Any) -> None:
    state = started()
    state.accept(event("model", "script_exhausted", **payload))
    assert state.script_exhausted == kept
    assert kinds(state) == ([] if kept else ["bad_script_exhausted"])


def test_a_malformed_exhausted_script_is_a_bounded_violation_and_a_later_one_counts() -> None:
    state = started()
    state.accept(event("model", "script_exhausted", turn="9" * 100_000, script_turns=[1]))
    [violation] = state.violations
    assert violation.detail.startswith("model/script_exhausted needs integers 0 <= "
                                       f"script_turns < turn <= {2**31 - 1}, got turn '999")
    assert violation.detail.endswith(", script_turns [1]")
    assert len(violation.detail) < 300
    state.accept(event("model", "script_exhausted", turn=4, script_turns=3))
    assert state.script_exhausted == (4, 3)


def test_what_the_sdk_sends_of_an_exhausted_script_is_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    writer = io.StringIO()
    session = worker.Worker(io.BytesIO(), writer)
    monkeypatch.setattr(worker, "_default", session)
    session.script_exhausted(3, 2)
    worker.script_exhausted(5, 2)  # the module's function speaks for the default session
    first, second = writer.getvalue().splitlines()
    state = started()
    for sent in (first, second):
        state.accept(decode_line(sent.encode()))
    assert (state.script_exhausted, state.violation_count) == ((3, 2), 0)
    assert json.loads(second)["payload"] == {"turn": 5, "script_turns": 2}


def test_an_exhausted_script_before_start_is_not_kept() -> None:
    state = ProtocolState()
    state.accept(READY)
    state.accept(event("model", "script_exhausted", turn=2, script_turns=1))
    assert state.script_exhausted is None and kinds(state) == ["before_start"]


def test_other_channels_do_not_exhaust_a_script() -> None:
    state = started()
    state.accept(event("agent", "script_exhausted", turn=2, script_turns=1))
    state.accept(event("framework", "script_exhausted", turn=2, script_turns=1))
    assert state.script_exhausted is None and state.violation_count == 0


@pytest.mark.parametrize("payload, fired", [
    ({"point": "db"}, {("db", 1)}),  # the first occurrence unless told
    ({"point": "db", "occurrence": 3}, {("db", 3)}),
    ({"point": "db", "occurrence": 2**31 - 1}, {("db", 2**31 - 1)}),
    ({"point": "db", "occurrence": 2**31}, set()),
    ({"point": "db", "occurrence": 0}, set()),
    ({"point": "db", "occurrence": True}, set()),
    ({"occurrence": 1}, set()),
])
def test_a_fault_counts_when_it_names_its_point_and_occurrence(payload: dict,
                                                                fired: set) -> None:
    state = started()
    state.accept(event("framework", "fault", **payload))
    state.accept(event("agent", "fault", point="elsewhere"))  # only the framework's
    assert state.faults_fired == fired


def test_calls_past_the_name_limit_are_each_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "MAX_TOOL_NAMES", 1)
    state = started()
    for name in ("a", "b", "c", "b", "a"):
        state.accept(event("tool", "call", name=name))
    assert state.tool_calls == {"a": 2} and state.uncounted_tool_calls == 3


def test_what_framework_ready_keeps_of_package_paths() -> None:
    long = "/" + "p" * (protocol.MAX_PATH_NAME_CHARS - 1)
    state = ProtocolState()
    state.accept(event("framework", "framework_ready", framework="fw", framework_version=1,
                       package_paths=["/fw", 7, long, long + "x"]))
    assert state.ready == {"framework": "fw", "framework_version": None,
                           "package_paths": ["/fw", long]}
    state = ProtocolState()
    state.accept(event("framework", "framework_ready", framework="fw", package_paths="/fw"))
    assert state.ready["package_paths"] == []


def digests(*events: WorkerEvent, workspace: str = "") -> tuple[str, list[str]]:
    state = ProtocolState(workspace)
    state.accept(READY)
    state.phase = Phase.STARTED
    for sent in events:
        state.accept(sent)
    return state.path_hash.hexdigest(), state.path


def test_the_event_path_is_named_and_hashed_by_content() -> None:
    digest, path = digests(event("tool", "call", name="ls", args={"b": 1, "a": "é"}),
                           event("agent", "result", output="x", stop_reason="s"))
    text = json.dumps(["tool", "call", {"args": {"a": "é", "b": 1}, "name": "ls"}],
                      ensure_ascii=False)
    first = hashlib.sha256(text.encode()).hexdigest()[:8]
    assert path == [f"tool/call ls@{first}", path[1]] and path[1].startswith("agent/result@")
    expected = hashlib.sha256()
    expected.update(text.encode() + b"\n")
    expected.update(json.dumps(["agent", "result", {"output": "x", "stop_reason": "s"}])
                    .encode() + b"\n")
    assert digest == expected.hexdigest()
    # Key order, ids and times do not make a path different; the workspace's name does not.
    assert digests(event("tool", "call", args={"a": "é", "b": 1}, name="ls", id="7", t=1),
                   event("agent", "result", stop_reason="s", output="x"))[0] == digest
    ws = "/tmp/w-abc"
    assert (digests(event("tool", "call", name=f"{ws}/f"), workspace=ws)[0]
            == digests(event("tool", "call", name="<workspace>/f"), workspace="/tmp/w-xyz")[0])


def test_a_lone_surrogate_is_hashed_not_raised() -> None:
    digest, path = digests(event("tool", "call", name="\ud800"),
                           event("tool", "result", name="\ud800", ok=True))
    assert len(digest) == 64 and len(path) == 2


def test_the_kept_path_and_trajectory_stop_at_their_bounds(monkeypatch) -> None:
    monkeypatch.setattr(protocol, "MAX_PATH_CHARS", 20)
    monkeypatch.setattr(protocol, "MAX_TRAJECTORY_CHARS", 10)
    state = started()
    for _ in range(5):
        state.accept(event("tool", "result", name="abcd", ok=True))  # "abcd:ok", 7 chars
    assert state.trajectory == ["abcd:ok"] * 2  # 7, then 14 >= 10: no more
    assert len(state.path) == 1  # "tool/result abcd@…" (25 characters) passes the bound


@pytest.mark.parametrize("room, kept", [(0, 1), (1, 2)])
def test_a_step_is_kept_while_the_bound_is_not_reached(monkeypatch, room: int, kept: int) -> None:
    step = started()
    step.accept(event("tool", "result", name="abcd", ok=True))
    monkeypatch.setattr(protocol, "MAX_PATH_CHARS", len(step.path[0]) + room)
    monkeypatch.setattr(protocol, "MAX_TRAJECTORY_CHARS", len("abcd:ok") + room)
    state = started()
    for _ in range(3):
        state.accept(event("tool", "result", name="abcd", ok=True))
    assert (len(state.path), len(state.trajectory)) == (kept, kept)


def test_the_trajectory_digest_covers_every_step() -> None:
    state = started()
    for name, ok in (("a", True), ("b", "true")):
        state.accept(event("tool", "result", name=name, ok=ok))
    assert state.trajectory == ["a:ok", "b:error"]
    assert state.trajectory_hash.hexdigest() == hashlib.sha256(b"a:ok\nb:error\n").hexdigest()


def test_encoded_messages_are_compact_strict_ascii_lines() -> None:
    assert protocol.encode({"type": "abort", "reason": "é\ud800"}) == (
        b'{"type":"abort","reason":"\\u00e9\\ud800"}\n')
    with pytest.raises(ValueError):
        protocol.encode({"x": float("nan")})
    assert protocol.hello_message("demo") == {"type": "hello", "protocol": 1, "lane": "demo"}


def test_a_type_of_the_longest_name_allowed_is_accepted() -> None:
    assert isinstance(decode_line(line(channel="agent", type="t" * MAX_NAME_CHARS)),
                      WorkerEvent)


def test_nesting_is_bounded_where_the_line_enters() -> None:
    deep = b'{"channel": "agent", "type": "x", "payload": ' + b"[" * 150 + b"]" * 150 + b"}"
    assert decode_line(deep)[0] == "too_deep"


def test_a_line_of_more_values_than_the_bound_is_a_violation_before_it_is_parsed() -> None:
    many = "{}," * protocol.MAX_LINE_VALUES
    kind, detail = decode_line(
        f'{{"channel":"agent","type":"x","payload":{{"p":[{many}{{}}]}}}}'.encode())
    assert kind == "too_many"
    assert f"more than the {protocol.MAX_LINE_VALUES:,} alk reads" in detail


def test_a_line_of_long_text_full_of_commas_is_read() -> None:
    text = "a, b, [c], {d}" * 20_000
    decoded = decode_line(line(channel="agent", type="x", payload={"text": text}))
    assert isinstance(decoded, WorkerEvent) and decoded.payload["text"] == text
