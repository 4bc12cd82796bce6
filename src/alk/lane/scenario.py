"""A lane's `[[scenarios]]`: the task, its input and model script, what alk expects of the result
and the workspace, the faults the worker and the gateway inject, and where alk kills it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import regex

from alk.errors import LaneError
from alk.gateway.script import FAULT_KINDS, FAULT_STATUS, turn_problem
from alk.lane.table import NAME, Table, choice, ordinal, require_json
from alk.lane.tools import parse_tool_faults
from alk.records import Expectations, Fault, FileExpectation, KillAt, Scenario
from alk.served_model import ModelSetup, WireFault
from alk.served_tools import ServedTool

WORKER_CHANNELS = ("agent", "tool", "model", "user", "framework")
_SCENARIO_FIELDS = {"id", "task", "input", "expect", "script", "faults", "kill_at",
                    "max_attempts", "wire_faults", "tool_faults", "baseline"}
_WIRE_FAULT_FIELDS = {"call", "kind", "retry_after_s", "seconds", "retry_after_date",
                      "should_retry"}
_FAULT_FIELDS = {"point", "occurrence", "error", "retryable"}
_KILL_FIELDS = {"channel", "type", "name", "occurrence"}
_EXPECT_FIELDS = {
    "stop_reason", "output_contains", "output_equals", "output_matches", "end_state",
    "tool_calls", "files", "script_consumed", "model_calls",
}
_FILE_FIELDS = {"path", "exists", "json_length", "json_subset"}


def parse_scenario(raw: Any, where: str, index: int, model: ModelSetup | None,
                   tools: tuple[ServedTool, ...] = ()) -> Scenario:
    table = Table(raw, where, f"scenarios[{index}]", _SCENARIO_FIELDS)
    scenario_id = table.text("id", required=True)
    if not NAME.match(scenario_id):
        table.fail("id", f"must be letters, digits, '.', '_' or '-' (it names a folder), "
                         f"got {scenario_id!r}")
    expect = _parse_expect(table.get("expect", dict, default={}), where, f"{table.field}.expect")
    scenario_input = table.get("input", dict, default={})
    require_json(scenario_input, where, f"{table.field}.input")
    script = table.get("script", list, default=[])
    for turn_index, turn in enumerate(script):
        if not isinstance(turn, dict):
            table.fail(f"script[{turn_index}]", "must be a table (one model turn)")
    require_json(script, where, f"{table.field}.script")
    if model is not None:
        # The gateway serves the script itself: a turn it cannot serve is the lane's error.
        for turn_index, turn in enumerate(script):
            problem = turn_problem(turn)
            if problem:
                table.fail(f"script[{turn_index}]", problem)
    wire_faults = tuple(_parse_wire_fault(raw_fault, where, f"{table.field}.wire_faults[{i}]")
                        for i, raw_fault in enumerate(table.get("wire_faults", list, default=[])))
    if wire_faults and model is None:
        table.fail("wire_faults", "needs the lane's [model] table: only alk's gateway injects "
                                  "faults on the wire (add [model] with mode = \"script\")")
    if expect.model_calls is not None and model is None:
        table.fail("expect.model_calls", "needs the lane's [model] table: only calls the "
                                         "gateway served are counted")
    faults = tuple(_parse_fault(raw_fault, where, f"{table.field}.faults[{i}]")
                   for i, raw_fault in enumerate(table.get("faults", list, default=[])))
    kill_at = None
    if "kill_at" in table.data:
        kill = Table(table.get("kill_at", dict), where, f"{table.field}.kill_at", _KILL_FIELDS)
        kill_at = KillAt(choice(kill, "channel", WORKER_CHANNELS) or "",
                         kill.text("type", required=True), kill.text("name"),
                         ordinal(kill, "occurrence"))
        if not kill_at.channel:
            kill.fail("channel", "is required")
        if kill_at.type == "framework_ready":
            kill.fail("type", "cannot be framework_ready: alk kills only after the start message")
    # One crash is injected, so there are at most two attempts: the killed one and its resume.
    max_attempts = table.get("max_attempts", int, default=2 if kill_at else 1)
    if kill_at is None and "max_attempts" in table.data:
        table.fail("max_attempts", "needs a kill_at: only a harness-injected crash is resumed")
    if kill_at is not None and max_attempts != 2:
        table.fail("max_attempts", f"must be 2 with a kill_at (the killed attempt and its "
                                   f"resume), got {max_attempts}")
    return Scenario(
        id=scenario_id,
        task=table.text("task", required=True),
        input=scenario_input,
        expect=expect,
        script=tuple(script),
        faults=faults,
        kill_at=kill_at,
        max_attempts=max_attempts,
        wire_faults=wire_faults,
        tool_faults=parse_tool_faults(table, tools),
        baseline=table.text("baseline"),
    )


def _injured(scenario: Scenario) -> bool:
    """alk injures it: worker faults, wire faults, tool faults or a kill."""
    return bool(scenario.faults or scenario.wire_faults or scenario.tool_faults
                or scenario.kill_at)


def check_baselines(scenarios: Sequence[Scenario], where: str,
                    labels: Sequence[str] | None = None) -> None:
    """A `baseline` names another scenario of the lane, one with no fault and no weighted
    choice: the unfaulted twin whose pass rate a faulted scenario's is divided by. `labels`
    place each scenario in its file (`lanes/x.toml: scenarios[2]`), for a lane whose scenarios
    come from two files."""
    by_id = {s.id: s for s in scenarios}
    for index, scenario in enumerate(scenarios):
        if scenario.baseline is None:
            continue
        label = labels[index] if labels is not None else f"{where}: scenarios[{index}]"
        field = f"{label}.baseline {scenario.baseline!r}"
        twin = by_id.get(scenario.baseline)
        if not _injured(scenario):
            raise LaneError(f"{field}: only a scenario with faults, wire_faults or a kill_at "
                            "has a baseline; remove the field")
        if twin is None:
            raise LaneError(f"{field} names no scenario of the lane; expected one of "
                            f"{', '.join(by_id)}")
        if _injured(twin) or twin.sampled:
            raise LaneError(f"{field} must name a scenario with no fault and no weighted "
                            "choices (its unfaulted twin); name another or remove the field")


def _parse_wire_fault(raw: Any, where: str, field: str) -> WireFault:
    table = Table(raw, where, field, _WIRE_FAULT_FIELDS)
    kind = choice(table, "kind", FAULT_KINDS)
    if kind is None:
        table.fail("kind", f"is required: one of {', '.join(FAULT_KINDS)}")
    statuses = ", ".join(FAULT_STATUS)
    for option in ("retry_after_s", "retry_after_date", "should_retry"):
        if option in raw and kind not in FAULT_STATUS:
            table.fail(option, f"belongs to a status fault ({statuses}), not {kind}")
    if "seconds" in raw and kind != "stall":
        table.fail("seconds", f"belongs to stall only, not {kind}")
    if "retry_after_date" in raw and "retry_after_s" not in raw:
        table.fail("retry_after_date", "needs retry_after_s: the delay the date is that far "
                                       "ahead of the answer")
    retry_after = table.positive("retry_after_s", 1.0) if "retry_after_s" in raw else None
    seconds = table.positive("seconds", 1.0) if "seconds" in raw else None
    return WireFault(call=ordinal(table, "call"), kind=kind, retry_after_s=retry_after,
                     seconds=seconds,
                     retry_after_date=table.get("retry_after_date", bool, default=False),
                     should_retry=table.get("should_retry", bool, default=None))


def _parse_fault(raw: Any, where: str, field: str) -> Fault:
    table = Table(raw, where, field, _FAULT_FIELDS)
    return Fault(table.text("point", required=True), ordinal(table, "occurrence"),
                 table.text("error", default=""), table.get("retryable", bool, default=False))


def _parse_expect(raw: dict[str, Any], where: str, field: str) -> Expectations:
    table = Table(raw, where, field, _EXPECT_FIELDS)
    pattern = table.text("output_matches")
    if pattern is not None:
        try:
            regex.compile(pattern)
        except regex.error as exc:
            table.fail("output_matches", f"is not a valid regular expression: {exc}")
    end_state = table.get("end_state", dict)
    if end_state is not None:
        require_json(end_state, where, f"{field}.end_state")
    tool_calls = table.get("tool_calls", dict)
    for tool, count in (tool_calls or {}).items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            table.fail(f"tool_calls.{tool}", f"must be a whole number ≥ 0, got {count!r}")
    files = []
    for i, item in enumerate(table.get("files", list, default=[])):
        entry = Table(item, where, f"{field}.files[{i}]", _FILE_FIELDS)
        rel = entry.text("path", required=True)
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            entry.fail("path", f"must be relative to the workspace and stay inside it, got {rel!r}")
        length = entry.get("json_length", int)
        if length is not None and length < 0:
            entry.fail("json_length", f"must be ≥ 0, got {length}")
        subset = entry.data.get("json_subset")
        if subset is not None:
            require_json(subset, where, f"{entry.field}.json_subset")
        files.append(FileExpectation(rel, entry.get("exists", bool), length, subset))
    return Expectations(
        model_calls=_calls_range(table),
        stop_reason=table.text("stop_reason"),
        output_contains=table.text("output_contains"),
        output_equals=table.text("output_equals"),
        output_matches=pattern,
        end_state=end_state,
        tool_calls=tool_calls,
        files=tuple(files),
        script_consumed=table.get("script_consumed", bool),
    )


def _calls_range(table: Table) -> tuple[int, int] | None:
    """`model_calls = N`, or `{ min, max }` (either may be left out)."""
    if "model_calls" not in table.data:
        return None
    value = table.data["model_calls"]
    if type(value) is int and value >= 0:
        return value, value
    if isinstance(value, dict) and value and set(value) <= {"min", "max"} and all(
            type(v) is int and v >= 0 for v in value.values()):
        low, high = value.get("min", 0), value.get("max", 2**31 - 1)
        if low <= high:
            return low, high
    table.fail("model_calls", f"must be a whole number ≥ 0 or {{ min = N, max = M }} with "
                              f"min ≤ max, got {value!r}")
    raise AssertionError  # fail raised
