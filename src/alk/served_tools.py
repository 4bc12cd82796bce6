"""The tools alk serves a worker over MCP, as records: what a lane declares (`ServedTool`) and
the faults a scenario injects at a tool's Nth call (`ToolFault`). What alk saw of the calls is
in `alk.served_model.ModelSeen` (`tool_calls`, `faults_fired`), beside the model's. Small
frozen dataclasses, as in `alk.records`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

# What a tool fault does at its call: answers with an error result; never answers (the call
# hangs until the attempt ends); answers after `seconds`; answers with a result that is not
# MCP's shape; runs the tool twice for one call (an at-least-once delivery: its effect too).
TOOL_FAULT_KINDS = ("error", "timeout", "slow", "malformed", "duplicate")


@dataclass(frozen=True, slots=True)
class ServedTool:
    """One `[[tools]]` entry: what the model is told of a tool, and what a call does. Exactly
    one of `result`, `effect` and `error` says what it does."""

    name: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    # A fixed result: any JSON value, in whose strings `{name}` is the call's argument `name`.
    result: Any = None
    # A file of the workspace holding a JSON array: each call appends its arguments to it and
    # answers {"written": true, "effects": N}, N the array's length after it.
    effect: str | None = None
    error: str | None = None  # every call fails with this text (an error result)

    def described(self) -> dict[str, Any]:
        """The tool as MCP's `tools/list` gives it."""
        return {"name": self.name, "description": self.description,
                "inputSchema": dict(self.input_schema)}


@dataclass(frozen=True, slots=True)
class ToolFault:
    """A fault alk injects at the attempt's `call`-th call of tool `tool`."""

    tool: str
    call: int
    kind: str  # one of TOOL_FAULT_KINDS
    seconds: float = 2.0  # slow: how long the answer takes

    @property
    def label(self) -> str:
        return f"{self.kind}@{self.tool}#{self.call}"
