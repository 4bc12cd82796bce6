"""alk.attribution.node_errors: the error that ended a Node process, read from what real Node
processes printed (tests/helpers/real_node_errors.py, run by every Node found), named and blamed
by alk.attribution.outcome as a Python traceback is; and whatever else the text is, it never
raises and stays linear."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alk.attribution import node_errors
from alk.attribution.outcome import attribute
from alk.causes import Cause
from alk.records import Observation

from helpers.observations import OK_PREFLIGHT
from helpers.real_node_errors import NodePrograms, Ran, nodes

NODES = nodes()
needs_node = pytest.mark.skipif(not NODES, reason="no node on this machine")

# What Node 18.20.8 printed for `Promise.reject("why")` (and an Error whose stack was removed):
# the bracketed form later versions no longer print, kept as a real run gave it.
NODE_18_REJECTION = '''\
node:internal/process/promises:288
            triggerUncaughtException(err, true /* fromPromise */);
            ^

[UnhandledPromiseRejection: This error originated either by throwing inside of an async \
function without a catch block, or by rejecting a promise which was not handled with .catch(). \
The promise rejected with the reason "why".] {
  code: 'ERR_UNHANDLED_REJECTION'
}

Node.js v18.20.8
'''


@pytest.fixture(scope="module", params=NODES or [None], ids=lambda node: str(node))
def programs(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> NodePrograms:
    if request.param is None:
        pytest.skip("no node on this machine")
    return NodePrograms(tmp_path_factory.mktemp("node"), request.param)


def crashed(ran: Ran, paths: list[str]) -> Observation:
    return Observation(spawned=True, ready={"framework": "fakefw", "package_paths": paths},
                       preflight=OK_PREFLIGHT, started=True, exit_code=ran.status,
                       stderr_tail=ran.stderr)


@needs_node
def test_an_uncaught_error_with_a_message_of_two_lines(programs: NodePrograms) -> None:
    ran = programs.run("type_error.mjs")
    found = node_errors.last(ran.stderr)
    assert ran.status == 1 and found is not None and found.ends
    [raised] = found.chain
    assert (raised.kind, raised.message) == ("TypeError", "boom\nsecond line")
    # Outermost first, as a Python traceback's: the call, then the throw; Node's loader before.
    assert raised.frames[-2:] == (programs.line("boom();", "type_error.mjs"),
                                  programs.line("throw new", "type_error.mjs"))
    assert all(file.startswith("node:") for file, _ in raised.frames[:-2])


@needs_node
def test_the_cause_comes_first_in_the_chain_and_the_property_block_is_not_a_frame(
        programs: NodePrograms) -> None:
    found = node_errors.last(programs.run("cause.mjs").stderr)
    assert found is not None
    inner, outer = found.chain
    assert (inner.kind, inner.message) == ("RangeError", "inner")
    assert (outer.kind, outer.message) == ("Error", "outer")
    assert outer.frames[-1] == programs.line("new Error", "cause.mjs")
    assert inner.frames[-1] == programs.line("new RangeError", "cause.mjs")


@needs_node
def test_causes_that_share_frames_and_a_name_set_by_hand(programs: NodePrograms) -> None:
    # Node prints the frames an error shares with its cause as `... 2 lines matching cause
    # stack trace ...`, among the frames; a name with a space is no identifier.
    found = node_errors.last(programs.run("shared_cause.mjs").stderr)
    assert found is not None
    assert [(r.kind, r.message) for r in found.chain] == [
        ("Error", "deep"), ("Error", "mid"), ("Agent failure", "top")]
    assert found.chain[-1].frames[-2:] == (programs.line("outer();", "shared_cause.mjs"),
                                           programs.line("new Error(\"top\"", "shared_cause.mjs"))
    assert found.chain[-1].frames[0][0].startswith("node:")  # the frame after the elision


@needs_node
def test_an_aggregate_error_is_named_by_the_first_error_it_holds(
        programs: NodePrograms) -> None:
    found = node_errors.last(programs.run("aggregate.mjs").stderr)
    assert found is not None
    raised = found.chain[-1]
    assert (raised.groups, raised.kind, raised.message) == (("AggregateError",), "TypeError",
                                                            "one")


@pytest.mark.parametrize("name, value", [("string.mjs", "a string"),
                                         ("string.cjs", "cjs string")])
@needs_node
def test_a_thrown_value_that_is_not_an_error(programs: NodePrograms, name: str,
                                             value: str) -> None:
    found = node_errors.last(programs.run(name).stderr)
    assert found is not None
    [raised] = found.chain
    assert (raised.kind, raised.message) == (node_errors.THROWN, value)
    if name.endswith(".cjs"):  # the excerpt is the only place it shows
        assert raised.frames == (programs.line("throw", name),)


@needs_node
def test_an_unhandled_rejection_is_named_by_its_reason(programs: NodePrograms) -> None:
    found = node_errors.last(programs.run("rejected.mjs").stderr)
    assert found is not None
    assert (found.chain[-1].kind, found.chain[-1].message) == (
        "UnhandledPromiseRejection", 'The promise rejected with the reason "why".')


def test_node_18s_bracketed_rejection() -> None:
    found = node_errors.last(NODE_18_REJECTION)
    assert found is not None
    [raised] = found.chain
    assert (raised.kind, raised.message) == ("UnhandledPromiseRejection",
                                             'The promise rejected with the reason "why".')
    assert raised.frames == (("node:internal/process/promises", "288"),)


@needs_node
def test_a_syntax_error_is_placed_in_the_file_the_excerpt_shows(programs: NodePrograms) -> None:
    found = node_errors.last(programs.run("syntax.mjs").stderr)
    assert found is not None
    assert found.chain[-1].kind == "SyntaxError"
    assert found.chain[-1].frames[-1] == (str(programs.folder / "syntax.mjs"), "1")


@needs_node
def test_a_file_url_becomes_its_path_percent_decoded(programs: NodePrograms) -> None:
    found = node_errors.last(programs.run("sp ace/ü.mjs").stderr)
    assert found is not None
    assert found.chain[-1].frames[-1] == (str(programs.folder / "sp ace" / "ü.mjs"), "1")


@needs_node
def test_a_throw_in_the_framework_is_the_frameworks(programs: NodePrograms) -> None:
    ran = programs.run("framework.mjs")
    got = attribute(crashed(ran, [str(programs.framework)]))
    file, line = programs.line("tool.run()", "index.js")
    assert got.cause == Cause.FRAMEWORK_EXCEPTION.value
    assert got.detail == (f"exit code 1; TypeError: tool.run is not a function; "
                          f"raised at {file}:{line}")


@pytest.mark.parametrize("name, text", [
    ("own.mjs", "throw new TypeError"),     # called back by the framework
    ("builtin.mjs", "fs.readFileSync"),     # past node:fs, which raised for it
    ("library.mjs", "lib.parse"),           # past another npm package in node_modules
])
@needs_node
def test_a_throw_in_the_workers_own_code_is_the_workers(programs: NodePrograms, name: str,
                                                        text: str) -> None:
    got = attribute(crashed(programs.run(name), [str(programs.framework)]))
    file, line = programs.line(text, name)
    assert got.cause == Cause.WORKER_EXCEPTION.value, got.detail
    assert got.detail.endswith(f"; raised at {file}:{line}")


@needs_node
def test_without_package_paths_the_error_is_named_and_nobody_blamed(
        programs: NodePrograms) -> None:
    got = attribute(crashed(programs.run("framework.mjs"), []))
    assert (got.cause, got.detail) == (Cause.NONZERO_EXIT.value,
                                       "exit code 1; TypeError: tool.run is not a function")


@needs_node
def test_a_python_traceback_before_nodes_report_is_not_what_ended_it(
        programs: NodePrograms) -> None:
    python = ('Traceback (most recent call last):\n  File "/x/tool.py", line 3, in <module>\n'
              'ValueError: a child\'s\n')
    got = attribute(crashed(Ran(1, python + programs.run("framework.mjs").stderr),
                            [str(programs.framework)]))
    assert got.cause == Cause.FRAMEWORK_EXCEPTION.value and "TypeError" in got.detail


def test_text_not_ended_by_nodes_version_line_is_not_a_report() -> None:
    assert node_errors.last("TypeError: boom\n    at f (/p/x.js:1:1)\n") is None
    assert node_errors.last("") is None
    assert node_errors.last("\n\nNode.js v20.1.0\n") is None


def test_a_report_without_its_excerpt_is_read_from_its_last_paragraph() -> None:
    text = "...\nsome log\n\nTypeError: boom\n    at f (/p/x.js:3:1)\n\nNode.js v22.0.0\n"
    found = node_errors.last(text)
    assert found is not None
    assert (found.chain[-1].kind, found.chain[-1].frames) == ("TypeError", (("/p/x.js", "3"),))


def test_a_hundred_thousand_frames_are_read_whole_and_frames_alone_name_nothing() -> None:
    # What it reads of them, not how fast: a test on a shared machine times nothing.
    frames = "".join(f"    at f{i} (/p/x.js:{i}:1)\n" for i in range(100_000))
    found = node_errors.last(f"/p/x.js:1\nx\n^\n\nError: deep\n{frames}\nNode.js v24.0.0\n")
    assert found is not None and found.chain[-1].kind == "Error"
    # Outermost first, as Python's; the excerpt's place is added as the deepest.
    kept = found.chain[-1].frames
    assert (kept[0], kept[-2], kept[-1], len(kept)) == (
        ("/p/x.js", "99999"), ("/p/x.js", "0"), ("/p/x.js", "1"), 100_001)
    assert node_errors.last(f"{frames}Node.js v24.0.0\n") is None
    assert node_errors.last("    at \n" * 100_000 + "Node.js v24.0.0") is None


def test_causes_nested_past_the_depth_stop_there() -> None:
    depth = 3 * node_errors.MAX_DEPTH
    lines = ["Error: e0", "    at f (/p/x.js:1:1) {"]
    for level in range(1, depth):
        pad = "  " * level
        lines += [f"{pad}[cause]: Error: e{level}", f"{pad}    at f (/p/x.js:1:1) {{"]
    lines += ["}", "", "Node.js v24.0.0"]
    found = node_errors.last("\n".join(lines))
    assert found is not None and found.chain[-1].message == "e0"
    assert len(found.chain) <= node_errors.MAX_DEPTH + 1


def test_binary_junk_never_raises() -> None:
    rng = random.Random(7)
    for _ in range(200):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(2000)))
        text = junk.decode("utf-8", errors="replace")
        for tail in ("", "\nNode.js v20.20.2\n", "\n\nTypeError: x\n    at\n{\nNode.js v1.2.3"):
            node_errors.last(text + tail)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    "file:///p/w.mjs:12", "  throw x;", "        ^", "", "TypeError: boom", "[Error: x]",
    "    at f (file:///p/x.mjs:12:11)", "    at /p/x.js:3:1", "    at f (/p/x.js:1:1) {",
    "    at async Promise.all (index 0)", "  code: 'ERR_X',", "  [cause]: Error: in",
    "  [errors]: [", "    TypeError: one", "  ]", "}", "Uncaught 'x'", "Thrown at:",
    "(Use `node --trace-uncaught ...` to show where the exception was thrown)", "[", "] {",
    "Node.js v24.1.0",
]), max_size=40), st.text(max_size=40))
def test_any_text_of_nodes_own_lines_never_raises(lines: list[str], noise: str) -> None:
    text = "\n".join(lines) + noise + "\nNode.js v24.1.0"
    found = node_errors.last(text)
    assert found is None or found.chain


def test_the_module_is_pure(tmp_path: Path) -> None:
    # Nothing on disk is read: a path in a frame is only text.
    text = f"{tmp_path}/x.js:1\nx\n^\n\nError: e\n    at {tmp_path}/x.js:1:1\n\nNode.js v20.0.0"
    found = node_errors.last(text)
    assert found is not None and found.chain[-1].frames == ((f"{tmp_path}/x.js", "1"),)
