"""alk.gateway.tools' ToolServer, called directly on an event loop: what a call does, the
bounds a hostile worker's calls meet, and that a flood of calls of undeclared names cannot
hide a declared tool's call from alk's record (where a kill_at waits)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from alk.gateway import tools as served
from alk.gateway.tools import ToolServer
from alk.redaction import Redactor
from alk.served_tools import ServedTool, ToolFault


class Session:
    """What a ToolServer needs of its session: a redactor, a transcript note, faults fired,
    the model's steps (where a tool call comes among them)."""

    def __init__(self) -> None:
        self.gateway = SimpleNamespace(redactor=Redactor(), replayed=None, recorder=None)
        self.steps: list[str] = []
        self.notes: list[tuple[str, dict]] = []
        self.fired: list[str] = []
        self.fault_pending = False

    def note(self, type: str, payload: dict, channel: str = "model") -> None:
        assert channel == "tool"
        self.notes.append((type, payload))


def _server(tmp_path, *tools, faults=()):
    session = Session()
    return ToolServer(tools, faults, tmp_path, session), session


LOOKUP = ServedTool("lookup_order", "", result={"order": "{order}", "status": "open"})
REPORT = ServedTool("write_report", "", effect="lab-output/effects.json")


def call(server, name, args):
    return asyncio.run(server.call(name, args, "1"))


def test_a_result_is_filled_from_the_arguments_once_and_as_json(tmp_path):
    server, _ = _server(tmp_path, LOOKUP)
    text, ok = call(server, "lookup_order", {"order": 'say "hi" {status}'})
    assert ok and json.loads(text) == {"order": 'say "hi" {status}', "status": "open"}


def test_placeholders_inside_arguments_never_grow_the_answer(tmp_path):
    server, _ = _server(tmp_path, ServedTool("t", "", result="{a}"))
    text, ok = call(server, "t", {"a": "{b}" * 300, "b": "{c}" * 300, "c": "x" * 300})
    assert ok and text == "{b}" * 300
    big, ok = call(server, "t", {"a": "x" * (served.MAX_RESULT_CHARS + 1)})
    assert not ok and "over" in big


def test_an_effect_is_made_and_deep_arguments_are_refused(tmp_path):
    server, _ = _server(tmp_path, REPORT)
    assert call(server, "write_report", {"order": "742"}) == (
        '{"written": true, "effects": 1}', True)
    deep: dict = {}
    for _ in range(served.MAX_ARGS_DEPTH + 5):
        deep = {"d": deep}
    text, ok = call(server, "write_report", deep)
    assert not ok and "nested" in text
    assert json.loads((tmp_path / "lab-output/effects.json").read_text()) == [{"order": "742"}]


def test_a_flood_of_undeclared_calls_cannot_hide_a_declared_one(tmp_path):
    server, session = _server(tmp_path, REPORT)

    async def flood():
        for _ in range(served.MAX_RECORDED_CALLS + 50):
            await server.call("nope", {}, "1")
        await server.call("write_report", {"order": "742"}, "2")

    asyncio.run(flood())
    names = [payload["name"] for type, payload in session.notes if type == "result"]
    assert names.count("nope") == served.MAX_RECORDED_CALLS
    assert names[-1] == "write_report"  # recorded: a kill_at on it fires
    assert server.calls_by_tool() == {served.UNDECLARED: served.MAX_RECORDED_CALLS + 50,
                                      "write_report": 1}
    # The trajectory keeps the first calls, as the model's: a flood does not grow it.
    assert len(server.steps) == served.MAX_RECORDED_CALLS
    assert server.steps[0] == (0, f"tool:{served.UNDECLARED}:error")


def test_a_fired_fault_is_the_sessions_and_pending_until_recovered(tmp_path):
    fault = ToolFault("write_report", 1, "error")
    server, session = _server(tmp_path, REPORT, faults=(fault,))
    text, ok = call(server, "write_report", {"order": "742"})
    assert not ok and session.fired == ["error@write_report#1"] and session.fault_pending
    assert not (tmp_path / "lab-output").exists()  # an error fault makes no effect


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -float("inf")])
def test_a_number_a_cassette_could_not_hold_is_refused_in_every_mode(tmp_path, number):
    """A non-finite number, which the MCP SDK parses: recorded, it would make a cassette that
    replay refuses, so the call is refused whatever the mode, and nothing is made."""
    server, _ = _server(tmp_path, REPORT)
    text, ok = call(server, "write_report", {"order": number})
    assert not ok and "not finite" in text
    assert not (tmp_path / "lab-output").exists()

