"""The tool calls of a cassette: beside its model calls, each call of a lane's tool that alk ran
in a recorded run (`alk.gateway.tools`), so that a replayed run is held to the same calls and
given the same answers.

A tool call is a cassette line of its own, told from a model call by its `tool` key:
`{"tool", "args", "ok", "result", "scenario", "repeat", "attempt"}`. It is written when alk
ran the tool (a call an `error` fault answered, or a `timeout` never answered, ran nothing and
is not recorded: the scenario's fault does the same again in replay). Replay matches an
attempt's calls by name and arguments (both redacted, as a model request is), each with the
first of the recorded calls not yet matched that is the same, among the next MATCH_WINDOW (so
that calls a framework runs at once, finished in another order than they came, still match);
a call none of them is, is the session's `unmatched` (the repeat is then `replay_mismatch`),
and it is answered with an error and not run. A call that matches is run as in any mode, so its effect
is in the workspace again, and answered with the recorded result: what the model was told in
the recorded run, which the recorded model calls after it carry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from alk.gateway.differences import first_difference, redacted
from alk.redaction import Redactor

_NO_SECRETS = Redactor()
# How far past the first recorded call not yet matched a call is looked for: calls at once may
# finish out of order; a worker's flood of calls that match nothing costs no more than this each.
MATCH_WINDOW = 64


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """One call of a lane's tool, as alk ran and answered it."""
    tool: str
    args: dict
    ok: bool
    result: str
    scenario: str = ""
    repeat: int = 0
    attempt: int = 0

    @property
    def key(self) -> tuple[str, int, int]:
        return self.scenario, self.repeat, self.attempt

    def line(self) -> str:
        return json.dumps({"tool": self.tool, "args": self.args, "ok": self.ok,
                           "result": self.result, "scenario": self.scenario,
                           "repeat": self.repeat, "attempt": self.attempt}, sort_keys=True)

    def redacted(self, redactor: Redactor) -> "ToolEntry":
        """The entry with the run's secrets redacted from every text, the arguments' keys too."""
        if not redactor:
            return self
        return ToolEntry(tool=redactor.redact(self.tool), args=redacted(self.args, redactor),
                         ok=self.ok, result=redactor.redact(self.result),
                         scenario=redactor.redact(self.scenario), repeat=self.repeat,
                         attempt=self.attempt)


def is_tool_line(record: Any) -> bool:
    return isinstance(record, dict) and "tool" in record


def tool_entry(record: dict) -> ToolEntry | str:
    """The tool call a cassette line holds, or what is wrong with it."""
    tool, args, ok, result = (record.get(key) for key in ("tool", "args", "ok", "result"))
    scenario = record.get("scenario", "")
    repeat, attempt = record.get("repeat", 0), record.get("attempt", 0)
    if not isinstance(tool, str) or not tool:
        return "'tool' must be the name of a lane's tool"
    if not isinstance(args, dict):
        return "'args' must be the call's arguments, an object"
    if not isinstance(ok, bool):
        return "'ok' must be true or false (false: an error result)"
    if not isinstance(result, str):
        return "'result' must be the text the call was answered with"
    if not isinstance(scenario, str):
        return "'scenario' must be a scenario's id"
    if not all(type(n) is int and n >= 0 for n in (repeat, attempt)):
        return "'repeat' and 'attempt' must be whole numbers >= 0"
    return ToolEntry(tool=tool, args=args, ok=ok, result=result, scenario=scenario,
                     repeat=repeat, attempt=attempt)


def match_tool(entries: tuple[ToolEntry, ...], used: set[int], tool: str, args: dict, *,
               where: str, redactor: Redactor = _NO_SECRETS) -> tuple[ToolEntry | None, str]:
    """The recorded call this one is (its index added to `used`, the attempt's matched ones),
    with ""; else None and why not, against the first recorded call not yet matched ("tool call
    2: args.order: expected '742', got '743'")."""
    number = len(used) + 1
    waiting = [index for index in range(len(entries)) if index not in used][:MATCH_WINDOW]
    if not waiting:
        return None, (f"tool call {number}: the cassette {where} holds {len(entries)} tool "
                      "calls for this attempt; record it again for a run that makes more")
    asked = redacted(args, redactor)
    name = redactor.redact(tool)
    for index in waiting:
        entry = entries[index]
        if entry.tool == name and first_difference(redacted(entry.args, redactor), asked,
                                                   "args", redactor=redactor) is None:
            used.add(index)
            return entry, ""
    entry = entries[waiting[0]]
    if entry.tool != name:
        return None, redactor.cut(f"tool call {number}: expected {entry.tool!r}, got "
                                  f"{name!r}", 200)
    difference = first_difference(redacted(entry.args, redactor), asked, "args",
                                  redactor=redactor)
    return None, f"tool call {number}: {difference}"
