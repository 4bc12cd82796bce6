"""A cassette's tool calls (alk.gateway.cassette_tools): written redacted beside the model
calls, loaded apart from them, each attempt's in order, matched by name and arguments, and a
bad line refused with the file, its line and what is wrong."""

from __future__ import annotations

import json

import pytest

from alk.errors import CassetteError
from alk.gateway.cassette import Cassette, CassetteWriter, Entry
from alk.gateway.cassette_tools import ToolEntry, match_tool
from alk.redaction import MASK, Redactor

SECRET = "sk-alk-" + "0123456789abcdef"


def _model(scenario: str = "s", repeat: int = 1) -> Entry:
    return Entry(api="chat", request={"ask": 1}, status=200, body="{}", stream=False,
                 events=(), fault=None, scenario=scenario, repeat=repeat, attempt=1)


def _tool(tool: str, order: str = "742", repeat: int = 1, result: str = "ok") -> ToolEntry:
    return ToolEntry(tool=tool, args={"order": order}, ok=True, result=result, scenario="s",
                     repeat=repeat, attempt=1)


def test_tool_calls_load_apart_from_model_calls_each_attempts_in_order(tmp_path):
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as writer:
        for entry in (_model(), _tool("lookup_order"), _model(), _tool("write_report"),
                      _tool("lookup_order", repeat=2), _model(repeat=2)):
            assert writer.add(entry)
    cassette = Cassette.load(path)
    assert len(cassette) == 3  # model calls: what replay serves to model requests
    assert [e.tool for e in cassette.calls("s", 1, 1, tools=True)] == ["lookup_order",
                                                                      "write_report"]
    assert [e.tool for e in cassette.calls("s", 2, 1, tools=True)] == ["lookup_order"]
    # A repeat the recording did not reach replays the recorded ones in turn, as model calls.
    assert [e.tool for e in cassette.calls("s", 3, 1, tools=True)] == ["lookup_order",
                                                                      "write_report"]
    assert len(cassette.calls("s", 1, 1)) == 2  # model calls of that attempt


def test_a_tool_call_is_written_redacted_its_arguments_keys_too(tmp_path):
    path = tmp_path / "run.jsonl"
    leaky = ToolEntry(tool="write_report", args={"order": f"742 {SECRET}", SECRET: [SECRET]},
                      ok=False, result=f"failed: {SECRET}", scenario="s", repeat=1, attempt=1)
    with CassetteWriter(path, Redactor([SECRET])) as writer:
        writer.add(leaky)
    assert SECRET not in path.read_text()
    [entry] = Cassette.load(path).tools
    assert entry.args == {"order": f"742 {MASK}", MASK: [MASK]}
    assert (entry.ok, entry.result) == (False, f"failed: {MASK}")


def test_a_call_matches_by_name_and_arguments_and_a_difference_is_named():
    recorded = (_tool("lookup_order"), _tool("write_report"))
    where = "run.jsonl"
    assert match_tool(recorded, set(), "write_report", {"order": "743"}, where=where) == (
        None, "tool call 1: expected 'lookup_order', got 'write_report'")
    used = {0}
    assert match_tool(recorded, used, "write_report", {"order": "743"}, where=where) == (
        None, "tool call 2: args.order: expected '742', got '743'")
    assert match_tool(recorded, used, "write_report", {"order": "742"}, where=where)[0] \
        == recorded[1]
    assert used == {0, 1}
    assert match_tool(recorded, used, "write_report", {}, where=where) == (
        None, "tool call 3: the cassette run.jsonl holds 2 tool calls for this attempt; "
              "record it again for a run that makes more")


def test_calls_made_at_once_match_in_whatever_order_they_finished():
    """Recorded as they finished (a result before a slower effect), replayed as they come."""
    recorded = (_tool("lookup_order"), _tool("write_report"))
    used: set[int] = set()
    assert match_tool(recorded, used, "write_report", {"order": "742"}, where="c")[0] \
        is recorded[1]
    assert match_tool(recorded, used, "lookup_order", {"order": "742"}, where="c")[0] \
        is recorded[0]


def test_a_recorded_secret_matches_the_call_that_sends_it_whole():
    redactor = Redactor([SECRET])
    recorded = (ToolEntry("lookup_order", {"order": MASK}, True, "ok"),)
    assert match_tool(recorded, set(), "lookup_order", {"order": SECRET}, where="c",
                      redactor=redactor)[0] is recorded[0]


def test_a_repeat_past_the_recording_takes_the_tool_calls_of_the_repeat_it_replays(tmp_path):
    """Repeats 1 and 3 ran tools, repeat 2 none: repeat 4 replays repeat 1's model calls, and
    so its tool calls; repeat 5, repeat 2's, and no tool call."""
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as writer:
        for entry in (_model(repeat=1), _tool("lookup_order", repeat=1), _model(repeat=2),
                      _model(repeat=3), _tool("write_report", repeat=3)):
            writer.add(entry)
    cassette = Cassette.load(path)
    assert [e.tool for e in cassette.calls("s", 4, 1, tools=True)] == ["lookup_order"]
    assert cassette.calls("s", 5, 1, tools=True) == ()
    assert [e.tool for e in cassette.calls("s", 6, 1, tools=True)] == ["write_report"]


@pytest.mark.parametrize("line, said", [
    ({"tool": "", "args": {}, "ok": True, "result": ""}, "'tool' must be the name"),
    ({"tool": "x", "args": [], "ok": True, "result": ""}, "'args' must be the call's arguments"),
    ({"tool": "x", "args": {}, "ok": 1, "result": ""}, "'ok' must be true or false"),
    ({"tool": "x", "args": {}, "ok": True, "result": 3}, "'result' must be the text"),
    ({"tool": "x", "args": {}, "ok": True, "result": "", "repeat": -1}, "'repeat' and"),
])
def test_a_bad_tool_line_is_refused_with_the_file_and_line(tmp_path, line, said):
    path = tmp_path / "run.jsonl"
    model_call = {"api": "chat", "request": {}, "status": 200, "body": ""}
    path.write_text(json.dumps(model_call) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(CassetteError) as error:
        Cassette.load(path)
    assert str(error.value).startswith(f"{path} line 2: {said}")
