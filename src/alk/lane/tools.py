"""A lane's `[[tools]]`, the tools alk serves over MCP (`alk.gateway.tools`), and a scenario's
`tool_faults`, checked as every lane field is: each message names the file, the field, what was
expected and what was found.

    [[tools]]
    name = "write_report"
    description = "Write the order's report (the side effect)."
    input_schema = { type = "object", properties = { order = { type = "string" } } }
    effect = "lab-output/effects.json"      # or: result = "order {order} is open", error = "..."

    [[scenarios]]
    tool_faults = [ { tool = "write_report", call = 1, kind = "timeout" } ]
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Iterable

from alk.lane.table import NAME, Table, choice, ordinal, require_json
from alk.served_model import ModelSetup
from alk.served_tools import TOOL_FAULT_KINDS, ServedTool, ToolFault

_TOOL_FIELDS = {"name", "description", "input_schema", "result", "effect", "error"}
_FAULT_FIELDS = {"tool", "call", "kind", "seconds"}
MAX_TOOLS = 64
# A tool's name as MCP clients and providers take it (OpenAI's function names: 64 characters).
MAX_NAME_CHARS = 64


def parse_tools(top: Table, model: ModelSetup | None,
                shared: Iterable[tuple[Any, str, int]] = ()) -> tuple[ServedTool, ...]:
    """The tools of the lane's scenario files (`shared`: each table, its file, its index)
    first, then the lane's own."""
    own = top.get("tools", list, default=[])
    raws = [*shared, *((raw, top.where, index) for index, raw in enumerate(own))]
    if raws and model is None:
        top.fail("tools" if own else "scenarios_from",
                 f"{'' if own else f'names {raws[0][1]}, whose [[tools]] '}needs the lane's "
                 "[model] table: alk serves tools from the model's gateway (add [model] with "
                 "mode = \"script\")")
    if len(raws) > MAX_TOOLS:
        top.fail("tools", f"declares {len(raws)} tools; at most {MAX_TOOLS}")
    tools: list[ServedTool] = []
    where_of: dict[str, str] = {}
    for raw, where, index in raws:
        table = Table(raw, where, f"tools[{index}]", _TOOL_FIELDS)
        name = table.text("name", required=True) or ""
        if not NAME.match(name) or len(name) > MAX_NAME_CHARS or "." in name:
            table.fail("name", f"must be letters, digits, '_' or '-', at most {MAX_NAME_CHARS} "
                               f"characters, got {name!r}")
        if name in where_of:
            also = "" if where_of[name] == where else f" (also in {where_of[name]})"
            table.fail("name", f"{name!r} is declared twice{also}; tool names must be unique")
        where_of[name] = where
        schema = table.get("input_schema", dict, default={"type": "object"})
        require_json(schema, where, table.name("input_schema"))
        if schema.get("type", "object") != "object":
            table.fail("input_schema", "must describe an object (type = \"object\"): a tool's "
                                       "arguments are named")
        does = [key for key in ("result", "effect", "error") if key in table.data]
        if len(does) != 1:
            table.fail("", "must say what a call does with exactly one of result (its answer), "
                           "effect (a workspace file each call appends to) or error (the text "
                           f"every call fails with); got {', '.join(does) or 'none'}")
        result = table.data.get("result")
        if result is not None:
            require_json(result, where, table.name("result"))
        effect = table.text("effect")
        if effect is not None and not _inside(effect):
            table.fail("effect", f"must be a relative path inside the workspace, got {effect!r}")
        tools.append(ServedTool(name=name, description=table.text("description", default="")
                                or "", input_schema=schema, result=result, effect=effect,
                                error=table.text("error")))
    return tuple(tools)


def parse_tool_faults(table: Table, tools: tuple[ServedTool, ...]) -> tuple[ToolFault, ...]:
    raws = table.get("tool_faults", list, default=[])
    if raws and not tools:
        table.fail("tool_faults", "needs the lane's [[tools]]: only a tool alk serves can fail "
                                  "on alk's side")
    names = [tool.name for tool in tools]
    faults = []
    for index, raw in enumerate(raws):
        fault = Table(raw, table.where, f"{table.field}.tool_faults[{index}]", _FAULT_FIELDS)
        tool = choice(fault, "tool", tuple(names))
        if tool is None:
            fault.fail("tool", f"is required: one of {', '.join(map(repr, names))}")
        kind = choice(fault, "kind", TOOL_FAULT_KINDS)
        if kind is None:
            fault.fail("kind", f"is required: one of {', '.join(map(repr, TOOL_FAULT_KINDS))}")
        seconds = fault.positive("seconds", default=2.0)
        if "seconds" in fault.data and kind != "slow":
            fault.fail("seconds", "is for kind = \"slow\" alone (how long the answer takes)")
        faults.append(ToolFault(tool=tool or "", call=ordinal(fault, "call"), kind=kind or "",
                                seconds=seconds))
    if len({(f.tool, f.call) for f in faults}) != len(faults):
        table.fail("tool_faults", "names one call of a tool twice; one fault a call")
    return tuple(faults)


def _inside(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return bool(parts) and not path.startswith("/") and ".." not in parts
