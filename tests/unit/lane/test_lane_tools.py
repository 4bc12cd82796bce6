"""alk.lane's `[[tools]]` (the tools alk serves over MCP) and a scenario's `tool_faults`: what a
lane author writes is read into records, and every mistake is named by file and field."""

from __future__ import annotations

import pytest
from helpers.gateway_runs import TOOLS
from helpers.lane_files import WHERE, lane_error, lane_toml, scenario, write

from alk.lane.load import load_lane
from alk.served_tools import ServedTool, ToolFault

MODEL = '[model]\nmode = "script"'
LOOKUP, REPORT = (f"[[tools]]{part}" for part in TOOLS.split("[[tools]]")[1:])


def _lane(tools: str = LOOKUP + REPORT, extra: str = "", model: str = MODEL) -> str:
    return lane_toml(scenario(extra=extra), raw=model + "\n" + tools)


def test_tools_and_tool_faults_are_read_into_records(root):
    lane = load_lane(write(root, _lane(extra='tool_faults = [ { tool = "write_report", '
                                                  'call = 2, kind = "slow", seconds = 0.5 } ]')))
    schema = {"type": "object", "properties": {"order": {"type": "string"}}}
    assert lane.tools == (
        ServedTool(name="lookup_order", description="Look up an order.", input_schema=schema,
                   result={"order": "{order}", "status": "open"}),
        ServedTool(name="write_report", description="Write the order's report (the side "
                   "effect).", input_schema=schema, effect="lab-output/effects.json"))
    assert lane.scenarios[0].tool_faults == (ToolFault("write_report", 2, "slow", 0.5),)
    assert lane.tools[0].described()["inputSchema"]["properties"] == {"order": {"type": "string"}}


@pytest.mark.parametrize("text, message", [
    (_lane(model=""), f"{WHERE}: tools needs the lane's [model] table"),
    (_lane(LOOKUP + LOOKUP), f"{WHERE}: tools[1].name 'lookup_order' is declared twice"),
    (_lane('[[tools]]\nname = "x"\nresult = 1\nerror = "no"'),
     f"{WHERE}: tools[0] must say what a call does with exactly one of result"),
    (_lane('[[tools]]\nname = "x"'), "got none"),
    (_lane('[[tools]]\nname = "x"\neffect = "../out.json"'),
     f"{WHERE}: tools[0].effect must be a relative path inside the workspace"),
    (_lane('[[tools]]\nname = "x"\neffect = "/etc/passwd"'), "inside the workspace"),
    (_lane('[[tools]]\nname = "a.b"\nresult = 1'), f"{WHERE}: tools[0].name must be letters"),
    (_lane('[[tools]]\nname = "x"\nresult = 1\ninput_schema = { type = "string" }'),
     "tools[0].input_schema must describe an object"),
    (_lane('[[tools]]\nname = "x"\nresults = 1'), "unknown field 'results' (did you mean"),
    (_lane(extra='tool_faults = [ { tool = "nope", kind = "error" } ]'),
     "scenarios[0].tool_faults[0].tool must be one of 'lookup_order', 'write_report'"),
    (_lane(extra='tool_faults = [ { tool = "write_report", kind = "late" } ]'),
     "tool_faults[0].kind must be one of 'error', 'timeout', 'slow', 'malformed', 'duplicate'"),
    (_lane(extra='tool_faults = [ { tool = "write_report", kind = "error", seconds = 1 } ]'),
     "tool_faults[0].seconds is for kind = \"slow\" alone"),
    (_lane(extra='tool_faults = [ { tool = "write_report", kind = "error" }, '
                 '{ tool = "write_report", kind = "timeout" } ]'),
     "tool_faults names one call of a tool twice"),
    (_lane("", extra='tool_faults = [ { tool = "write_report", kind = "error" } ]'),
     "tool_faults needs the lane's [[tools]]"),
])
def test_a_mistake_is_named_by_file_and_field(root, text, message):
    assert message in lane_error(root, text)


# --- tools a scenario file brings ------------------------------------------------------------

SHARED = "lanes/scenarios/tools.toml"


def _sharing(root, file_tools: str = LOOKUP + REPORT, own_tools: str = "",
             model: str = MODEL) -> str:
    shared = root / SHARED
    shared.parent.mkdir(exist_ok=True)
    shared.write_text(file_tools + "\n" + scenario(extra='tool_faults = [ { tool = '
                                                         '"write_report", kind = "error" } ]'),
                      encoding="utf-8")
    return lane_toml("", raw=model + "\n" + own_tools, scenarios_from="scenarios/tools.toml")


def test_a_scenario_file_brings_the_tools_its_scenarios_call(root):
    """The MCP lanes share one file of scenarios and the tools they call: the file's tools
    come first, the lane's own after, and a fault may name either."""
    extra = '[[tools]]\nname = "delete_records"\nerror = "refused"\n'
    lane = load_lane(write(root, _sharing(root, own_tools=extra)))
    assert [tool.name for tool in lane.tools] == ["lookup_order", "write_report",
                                                  "delete_records"]
    assert lane.scenarios[0].tool_faults == (ToolFault("write_report", 1, "error", 2.0),)


@pytest.mark.parametrize("own_tools, model, message", [
    (LOOKUP, MODEL, f"{WHERE}: tools[0].name 'lookup_order' is declared twice (also in "
                    f"{SHARED} (scenarios_from of {WHERE})); tool names must be unique"),
    ("", "", f"{WHERE}: scenarios_from names {SHARED} (scenarios_from of {WHERE}), whose "
             "[[tools]] needs the lane's [model] table"),
])
def test_a_scenario_files_tools_are_checked_with_the_lanes(root, own_tools, model, message):
    assert message in lane_error(root, _sharing(root, own_tools=own_tools, model=model))


def test_a_tool_of_a_scenario_file_is_named_by_that_file(root):
    text = _sharing(root, file_tools='[[tools]]\nname = "x"\neffect = "../out.json"\n')
    assert (f"{SHARED} (scenarios_from of {WHERE}): tools[0].effect must be a relative path"
            in lane_error(root, text))
