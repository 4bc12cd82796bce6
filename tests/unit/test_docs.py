"""The worker-facing documents agree with the code: the cause table with `CATALOGUE`, the JSON
Schema with what the SDK writes and the harness sends and accepts, and the 20-line example in
docs/protocol.md runs as a conformant worker."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import alk
from alk import worker
from alk.causes import CATALOGUE
from alk.runner.protocol import (
    Phase,
    ProtocolState,
    WorkerEvent,
    abort_message,
    decode_line,
    encode,
    hello_message,
    result_problem,
)

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
SRC = Path(alk.__file__).resolve().parent.parent
CAUSES_HEADER = ["code", "outcome", "meaning", "what to do"]

RUN_ID = "20261129-120501-3fa9c2"
TASK = "Count the words in this task"
HELLO = hello_message("tiny")
# Built the way executor.py builds it; the runner adds `deadline_s` when it sends it.
START = {
    "type": "start", "run_id": RUN_ID,
    "scenario": {"id": "count", "task": TASK, "input": {"budget": 3, "tenant": "shopping-a"}},
    "repeat": 1, "seed": 3280064060, "deadline_s": 9.954,
}


# -- docs/causes.md ------------------------------------------------------------------------------


def causes_table() -> list[dict[str, str]]:
    lines = (DOCS / "causes.md").read_text(encoding="utf-8").splitlines()
    cells = [_cells(line) if line.lstrip().startswith("|") else None for line in lines]
    start = cells.index(CAUSES_HEADER)
    assert set("".join(cells[start + 1])) <= set("-: "), "the header must be followed by |---|"
    rows = []
    for row in cells[start + 2:]:
        if row is None:
            break
        assert len(row) == 4, f"a cause row needs four cells: {row}"
        rows.append(dict(zip(("code", "outcome", "meaning", "action"), row)))
    return rows


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_causes_md_lists_every_cause_of_the_catalogue_exactly() -> None:
    rows = causes_table()
    codes = [row["code"].strip("`") for row in rows]
    assert len(codes) == len(set(codes)), "a code appears twice"
    assert codes == [cause.value for cause in CATALOGUE]
    for row in rows:
        info = CATALOGUE[row["code"].strip("`")]
        assert row["outcome"] == info.outcome.value, row["code"]
        assert row["meaning"] == info.meaning, row["code"]
        assert row["action"] == info.action, row["code"]


# -- docs/protocol.schema.json -------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    document = json.loads((DOCS / "protocol.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(document)
    return document


def validator(schema: dict[str, Any], part: str | None = None) -> Draft202012Validator:
    """The whole schema, or one of its `$defs` (kept inside the document so `$ref`s resolve)."""
    if part is None:
        return Draft202012Validator(schema)
    return Draft202012Validator({**schema, "oneOf": [{"$ref": f"#/$defs/{part}"}]})


def wire(message: dict[str, Any]) -> dict[str, Any]:
    """A message as it travels: encoded by the harness, read back as JSON."""
    return json.loads(encode(message))


def test_schema_matches_the_sdk_constants(schema: dict[str, Any]) -> None:
    assert tuple(schema["$defs"]["channel"]["enum"]) == worker.CHANNELS
    assert "harness" not in schema["$defs"]["channel"]["enum"]
    assert schema["$defs"]["hello"]["properties"]["protocol"]["const"] == worker.PROTOCOL_VERSION


def sdk_lines() -> list[str]:
    """Every line the SDK writes in one session, driven over in-memory streams."""
    reader = io.BytesIO(encode(HELLO) + encode(START))
    writer = io.StringIO()
    session = worker.Worker(reader, writer)
    assert session.hello() == HELLO
    session.ready("tiny-agents", "0.3.1", ["site-packages/tiny_agents"])
    start = session.start()
    assert (start.run_id, start.scenario_id, start.task) == (RUN_ID, "count", TASK)
    assert (start.repeat, start.seed, start.deadline_s) == (1, 3280064060, 9.954)
    session.emit("agent", "step", {"step": 1, "action": "plan"})
    session.emit("model", "proposal")
    session.emit("user", "message", {"text": "go on"})
    session.tool_call("count_words", {"text": start.task})
    session.tool_call("no_args")
    session.tool_result("count_words", ok=True, output={"words": 6})
    session.tool_result("no_args", ok=False, error="unavailable")
    session.tool_result("count_words", ok=True)
    session.result(output="The task has 6 words", stop_reason="accepted",
                   end_state={"phase": "stopped"}, verification={"checked": True})
    session.result(output="", stop_reason="gave_up")
    return writer.getvalue().splitlines()


def test_every_line_the_sdk_writes_is_valid(schema: dict[str, Any]) -> None:
    lines = sdk_lines()
    assert len(lines) == 11
    check = validator(schema, "worker_line")
    for line in lines:
        event = json.loads(line)
        check.validate(event)
        validator(schema).validate(event)
        assert isinstance(decode_line(line.encode()), WorkerEvent)


def test_the_harness_messages_are_valid(schema: dict[str, Any]) -> None:
    check = validator(schema, "harness_message")
    for message in (HELLO, START, abort_message("preflight probe only"),
                    {**START, "scenario": {"id": "nominal", "task": "t", "input": {}}}):
        check.validate(wire(message))
        validator(schema).validate(wire(message))
        assert not validator(schema, "worker_line").is_valid(wire(message))


@pytest.mark.parametrize("message", [
    {"type": "hello", "protocol": 2, "lane": "tiny"},
    {"type": "hello", "protocol": 1},
    {k: v for k, v in START.items() if k != "deadline_s"},
    {**START, "scenario": {"id": "count", "task": TASK}},
    {"type": "abort"},
    {"type": "resume"},
    {**hello_message("tiny"), "channel": "agent"},
])
def test_malformed_harness_messages_are_rejected(schema: dict[str, Any],
                                                 message: dict[str, Any]) -> None:
    assert not validator(schema, "harness_message").is_valid(message)


def test_a_forged_harness_line_is_rejected(schema: dict[str, Any]) -> None:
    forged = {"channel": "harness", "type": "attribution",
              "payload": {"outcome": "pass", "cause": "passed"}}
    assert not validator(schema).is_valid(forged)
    assert not validator(schema, "worker_line").is_valid(forged)
    assert decode_line(json.dumps(forged).encode())[0] == "harness_channel"
    # Dressed up as a harness message it fails as well: those never carry a channel.
    assert not validator(schema).is_valid({**forged, **hello_message("tiny")})


def test_a_script_exhausted_event_needs_two_whole_numbers(schema: dict[str, Any]) -> None:
    check = validator(schema, "worker_line")
    line = {"channel": "model", "type": "script_exhausted"}
    assert check.is_valid({**line, "payload": {"turn": 3, "script_turns": 2}})
    for payload in ({"turn": 3}, {"turn": 0, "script_turns": 0}, {"turn": 3, "script_turns": -1},
                    {"turn": "3", "script_turns": 2}, {"turn": 2**31, "script_turns": 2}):
        assert not check.is_valid({**line, "payload": payload}), payload
    assert not check.is_valid(line)
    # The SDK's helper writes a valid one.
    writer = io.StringIO()
    session = worker.Worker(io.BytesIO(encode(HELLO)), writer)
    session.hello()
    session.script_exhausted(3, 2)
    check.validate(json.loads(writer.getvalue()))


def test_a_result_with_a_non_string_output_is_rejected(schema: dict[str, Any]) -> None:
    for output in (42, None, ["done"], {"text": "done"}):
        line = {"channel": "agent", "type": "result",
                "payload": {"output": output, "stop_reason": "accepted", "end_state": {}}}
        assert not validator(schema).is_valid(line)
        assert result_problem(line["payload"]) is not None


def result(**payload: Any) -> dict[str, Any]:
    return {"channel": "agent", "type": "result", "payload": payload}


# Lines the harness's own checks accept (True) or flag (False): the schema must agree.
AGREEMENT = [
    ({"channel": "agent", "type": "step"}, True),  # payload omitted counts as {}
    ({"channel": "agent", "type": "step", "payload": {}, "extra": 1}, True),
    ({"channel": "framework", "type": "anything", "payload": {"k": [1, 2]}}, True),
    ({"channel": "model", "type": "proposal", "payload": None}, False),
    ({"channel": "model", "type": "proposal", "payload": [1]}, False),
    ({"channel": "agent", "type": ""}, False),
    ({"channel": "agent", "type": 3}, False),
    ({"channel": "agent"}, False),
    ({"type": "step"}, False),
    ({"channel": "stderr", "type": "line"}, False),
    ({"channel": "tool", "type": "call", "payload": {"name": "x"}}, True),
    ({"channel": "tool", "type": "call", "payload": {"args": {}}}, False),
    ({"channel": "tool", "type": "call"}, False),
    ({"channel": "tool", "type": "result", "payload": {"name": 5, "ok": True}}, False),
    ({"channel": "tool", "type": "progress", "payload": {"name": "x"}}, True),
    ({"channel": "tool", "type": "progress"}, False),
    ({"channel": "tool", "type": "progress", "payload": {"name": None}}, False),
    (result(output="done", stop_reason="accepted"), True),  # end_state omitted counts as {}
    (result(output="", stop_reason="", end_state={}, verification="anything"), True),
    (result(output="done", stop_reason=None, end_state={}), False),
    (result(output="done", stop_reason="accepted", end_state=[]), False),
    (result(stop_reason="accepted"), False),
    ({"channel": "agent", "type": "result"}, False),
]


@pytest.mark.parametrize(("line", "accepted"), AGREEMENT)
def test_schema_agrees_with_the_harness(schema: dict[str, Any], line: dict[str, Any],
                                        accepted: bool) -> None:
    assert harness_accepts(line) is accepted
    assert validator(schema).is_valid(line) is accepted


def harness_accepts(line: dict[str, Any]) -> bool:
    """What protocol.py makes of one line after start: an event with no problem recorded."""
    state = ProtocolState()
    state.phase = Phase.STARTED
    outcome = state.accept(decode_line(json.dumps(line).encode()))
    return (isinstance(outcome, WorkerEvent) and state.violation_count == 0
            and state.bad_result is None)


# -- the 20-line example -------------------------------------------------------------------------


def twenty_line_example() -> str:
    lines = (DOCS / "protocol.md").read_text(encoding="utf-8").splitlines()
    heading = next(i for i, line in enumerate(lines)
                   if line.startswith("#") and "20 lines" in line)
    begin = next(i for i in range(heading + 1, len(lines)) if lines[i].strip() == "```python")
    end = next(i for i in range(begin + 1, len(lines)) if lines[i].strip() == "```")
    return "\n".join(lines[begin + 1:end]) + "\n"


def run_worker(script: Path, cwd: Path, messages: list[dict[str, Any]]
               ) -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(SRC),
           "HOME": str(cwd), "TMPDIR": str(cwd)}
    return subprocess.run([sys.executable, str(script)], input=b"".join(map(encode, messages)),
                          capture_output=True, cwd=cwd, env=env, timeout=60)


def harness_reads(stdout: bytes) -> ProtocolState:
    """Feeds the worker's stdout to the harness's checks, with start sent after ready."""
    state = ProtocolState()
    for raw in stdout.split(b"\n")[:-1]:
        outcome = state.accept(decode_line(raw))
        assert isinstance(outcome, WorkerEvent), outcome
        if state.phase is Phase.READY:
            state.phase = Phase.STARTED
    assert stdout.endswith(b"\n")
    return state


@pytest.mark.slow
def test_the_twenty_line_example_is_a_conformant_worker(tmp_path: Path,
                                                        schema: dict[str, Any]) -> None:
    code = twenty_line_example()
    assert "from alk import worker" in code
    assert len([line for line in code.splitlines() if line.strip()]) <= 20
    script = tmp_path / "tiny_worker.py"
    script.write_text(code, encoding="utf-8")
    workspace = tmp_path / "ws"
    workspace.mkdir()

    done = run_worker(script, workspace, [HELLO, START])
    assert done.returncode == 0, done.stderr.decode()
    state = harness_reads(done.stdout)
    assert state.violation_count == 0 and state.bad_result is None
    assert state.ready is not None and state.ready["framework"] == "tiny-agents"
    assert state.result is not None
    assert isinstance(state.result["output"], str) and state.result["output"]
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert (events[0]["channel"], events[0]["type"]) == ("framework", "framework_ready")
    assert (events[-1]["channel"], events[-1]["type"]) == ("agent", "result")
    for event in events:
        validator(schema, "worker_line").validate(event)
    # The example's print() went to stderr, not into the protocol.
    assert b"scenario count" in done.stderr


@pytest.mark.slow
def test_the_twenty_line_example_exits_quietly_on_abort(tmp_path: Path) -> None:
    script = tmp_path / "tiny_worker.py"
    script.write_text(twenty_line_example(), encoding="utf-8")
    done = run_worker(script, tmp_path, [HELLO, abort_message("preflight probe only")])
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["framework_ready"]
    assert b"preflight probe only" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("script", [REPO / "workers" / "reference_worker.py",
                                    REPO / "tests" / "workers" / "well_behaved.py"],
                         ids=["reference_worker", "well_behaved"])
def test_the_example_workers_write_valid_lines(tmp_path: Path, schema: dict[str, Any],
                                               script: Path) -> None:
    start = {**START, "scenario": {"id": "nominal", "input": {},
                                   "task": "Prepare the report for order 742 of tenant shopping-a"}}
    done = run_worker(script, tmp_path, [HELLO, start])
    assert done.returncode == 0, done.stderr.decode()
    state = harness_reads(done.stdout)
    assert state.violation_count == 0 and state.result is not None
    for line in done.stdout.decode().splitlines():
        validator(schema, "worker_line").validate(json.loads(line))


def test_protocol_md_points_to_its_companions() -> None:
    text = (DOCS / "protocol.md").read_text(encoding="utf-8")
    assert "causes.md" in text and "protocol.schema.json" in text
    assert "(result.schema.json)" in text and (DOCS / "result.schema.json").is_file()
    assert "alk check-worker --lane" in text
    assert re.search(r"1 MiB", text)


# -- what alk reads in the events ----------------------------------------------------------------


def section(path: Path, heading: str) -> list[str]:
    """The lines of a markdown file's section, up to the next heading of its level or above."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    level = heading.split(" ")[0]
    fenced = False
    for end in range(start + 1, len(lines)):
        fenced ^= lines[end].startswith("```")  # a `# comment` in a code block is no heading
        if not fenced and lines[end].startswith("#") and lines[end].split(" ")[0] <= level:
            return lines[start + 1:end]
    return lines[start + 1:]


def documented_reads() -> set[tuple[str, str]]:
    """The (channel, type) pairs protocol.md's "What alk reads" table names."""
    rows = [_cells(line) for line in section(DOCS / "protocol.md", "## What alk reads in the events")
            if line.startswith("|")]
    assert rows[0] == ["event", "how", "what alk does with it"]
    return {(match[1], match[2]) for row in rows[2:]
            for match in [re.fullmatch(r"`(\w+)`/`(\w+)`", row[0])] if match}


# One event of each kind the table says alk reads, after start.
READ = {
    ("framework", "fault"): {"point": "before_model", "occurrence": 1},
    ("model", "turn"): {"index": 0},
    ("model", "script_exhausted"): {"turn": 3, "script_turns": 2},
    ("tool", "call"): {"name": "lookup", "args": {}},
    ("tool", "result"): {"name": "lookup", "ok": True},
    ("agent", "result"): {"output": "done", "stop_reason": "accepted"},
}
# Events alk only records: they shape the event path and nothing else.
RECORDED_ONLY = [
    ("agent", "step", {"step": 1, "action": "plan"}),
    ("model", "proposal", {"tool": "lookup", "args": {}}),
    ("user", "message", {"text": "go on"}),
    ("framework", "retry", {"attempt": 2, "point": "before_model", "occurrence": 1}),
    ("agent", "turn", {"turn": 3, "script_turns": 2}),
]


def started() -> ProtocolState:
    state = ProtocolState()
    state.phase = Phase.STARTED
    return state


def kept(state: ProtocolState) -> tuple[Any, ...]:
    """What alk keeps of a run's events besides the transcript and the event path."""
    return (state.ready, dict(state.tool_calls), set(state.faults_fired), state.model_turns,
            state.script_exhausted, state.result, state.bad_result, list(state.trajectory),
            state.violation_count)


def test_every_event_protocol_md_says_alk_reads_is_read() -> None:
    documented = documented_reads()
    assert documented == {*READ, ("framework", "framework_ready")}, (
        "docs/protocol.md's table of the events alk reads and this test's samples differ")
    for (channel, kind), payload in READ.items():
        state = started()
        before = kept(state)
        line = json.dumps({"channel": channel, "type": kind, "payload": payload}).encode()
        assert isinstance(state.accept(decode_line(line)), WorkerEvent)
        assert kept(state) != before, f"{channel}/{kind} changed nothing alk keeps"
        assert state.violation_count == 0 and state.bad_result is None
    # framework_ready is read before start.
    state = ProtocolState()
    state.accept(decode_line(json.dumps({"channel": "framework", "type": "framework_ready",
                                         "payload": {"framework": "f"}}).encode()))
    assert state.ready is not None and state.phase is Phase.READY


@pytest.mark.parametrize(("channel", "kind", "payload"), RECORDED_ONLY,
                         ids=[f"{c}/{k}" for c, k, _ in RECORDED_ONLY])
def test_any_other_event_is_recorded_and_hashed_only(channel: str, kind: str,
                                                     payload: dict[str, Any]) -> None:
    state = started()
    before, path = kept(state), state.path_hash.hexdigest()
    line = json.dumps({"channel": channel, "type": kind, "payload": payload}).encode()
    assert isinstance(state.accept(decode_line(line)), WorkerEvent)
    assert kept(state) == before
    assert state.path_hash.hexdigest() != path and len(state.path) == 1


def test_the_sdk_table_names_every_function_of_the_sdk() -> None:
    table = "\n".join(section(DOCS / "protocol.md", "## The SDK"))
    functions = [name for name, value in vars(worker).items()
                 if callable(value) and not isinstance(value, type) and not name.startswith("_")
                 and getattr(value, "__module__", None) == worker.__name__]
    assert "script_exhausted" in functions
    for name in functions:
        assert f"| `{name}(" in table, f"docs/protocol.md, The SDK: no row for {name}()"


# -- README: where to start a worker -------------------------------------------------------------


def test_readme_names_every_framework_worker_as_a_template() -> None:
    text = "\n".join(section(REPO / "README.md", "## Writing a worker"))
    named = set(re.findall(r"`(\w+\.py)`", text))
    workers = {path.name for path in (REPO / "workers").glob("*.py")}
    assert {name for name in workers if name.endswith("_worker.py")} <= named
    assert named <= workers, "README names a worker that workers/ does not hold"


def test_readme_says_beside_make_test_that_it_may_install_chromium_with_apt() -> None:
    text = " ".join(" ".join(section(REPO / "README.md", "## Two commands")).split())
    # What the Makefile's `browser` rule does, said where the two commands are.
    rule = (REPO / "Makefile").read_text(encoding="utf-8").split("\nbrowser:", 1)[1]
    assert 'id -u)" = 0' in rule and "sudo -n true" in rule and "apt-get install" in rule
    assert "As root, or as a user who may `sudo` without a password" in text
    assert "`apt-get install chromium`" in text
    assert "Any other user gets no install: the HTML report's browser test is skipped" in text


def test_the_result_schema_names_every_wire_fault_the_gateway_injects() -> None:
    """A fault kind the schema does not list makes every result that fired it invalid."""
    from alk.gateway.script import FAULT_KINDS
    result = json.loads((DOCS / "result.schema.json").read_text())
    pattern = result["$defs"]["wire_fault"]["pattern"]
    listed = pattern.removeprefix("^(").split(")@call")[0].split("|")
    assert sorted(listed) == sorted(FAULT_KINDS)


def test_the_guides_typescript_worker_is_the_one_the_tests_run():
    """docs/framework-authors.md shows workers/node/fetch_loop.ts (tests/e2e/test_node_worker.py
    runs it through alk): the guide's copy is the file's, its header comment aside."""
    guide = (DOCS / "framework-authors.md").read_text(encoding="utf-8")
    [shown] = re.findall(r"```ts\n(.*?)```", guide, re.S)
    lines = (REPO / "workers" / "node" / "fetch_loop.ts").read_text(encoding="utf-8").splitlines()
    while lines and lines[0].startswith("//"):
        lines.pop(0)
    assert shown.strip("\n") == "\n".join(lines).strip("\n")
