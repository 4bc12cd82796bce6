"""The model alk serves a worker, as records: what a lane asks of it (`ModelSetup`, its
`WireFault`s) and what the gateway saw of the worker's calls (`ModelSeen`), the harness's own
evidence. Small frozen dataclasses, as in `alk.records`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from alk.cost import TokenBudget, TokenCost


@dataclass(frozen=True, slots=True)
class WireFault:
    """A fault the gateway injects on the wire at the attempt's `call`-th model call
    (`alk.gateway.script.FAULT_KINDS` names the kinds; `alk.gateway.faults` injects them)."""

    call: int
    kind: str
    retry_after_s: float | None = None  # a status fault: the Retry-After it sends
    seconds: float | None = None  # stall: how long no byte comes (None: until the attempt ends)
    retry_after_date: bool = False  # Retry-After as an HTTP date, not seconds
    should_retry: bool | None = None  # a status fault: the x-should-retry header it sends

    @property
    def label(self) -> str:
        return f"{self.kind}@call{self.call}"


@dataclass(frozen=True, slots=True)
class ModelSetup:
    """A lane's `[model]`: alk serves the model the worker talks to (`alk.gateway`)."""

    mode: str  # "script", "replay" or "proxy"
    name: str = "alk-script"  # the model name a worker asks for
    cassette: Path | None = None  # replay: the recorded calls
    upstream: str | None = None  # proxy: the provider's base URL
    key_env: str | None = None  # proxy: the variable of alk's own environment holding the key
    record: Path | None = None  # proxy: where to record a cassette
    max_tokens: TokenBudget | None = None  # proxy, replay: the provider tokens a run may use
    # The one family served ("openai", "anthropic", "gemini"); None: all three (script,
    # replay). A proxy forwards one family: "openai" unless the lane names another.
    family: str | None = None


@dataclass(frozen=True, slots=True)
class ModelSeen:
    """What the gateway saw of one worker's model calls: the harness's own evidence."""

    calls: int = 0  # requests to a model endpoint, whatever their answer
    turns: int = 0  # scripted (or replayed) turns served
    retries: int = 0  # calls that repeated the request before them after a failed answer
    prompt_tokens: int = 0
    completion_tokens: int = 0
    faults_fired: tuple[str, ...] = ()  # WireFault.label of each fault injected
    recovered: bool = True  # a call after the last fault fired was answered in full
    exhausted: tuple[int, int] | None = None  # (call asked past the script, scripted turns)
    provider_error: str | None = None  # proxy: the upstream failed, and alk's own check too
    upstream_refused: str | None = None  # proxy: it refused the worker's request, not alk's
    unmatched: str | None = None  # replay: the first request the cassette did not hold
    steps: tuple[str, ...] = ()  # per call, "status:tool,tool" or "status:text"
    over_bounds: int = 0  # connections, request heads, bodies refused past its bounds, unread
    mode: str = ""  # how it served the model: "script", "replay" or "proxy"
    mistakes: tuple[int, ...] = ()  # script turns (0-based) served that the lane marks mistakes
    script_turns: int = 0  # the scenario's script's turns (script mode; else 0)
    cost: TokenCost | None = None  # proxy, replay: the tokens the provider reported (alk.cost)
    # The lane's [[tools]] alk served: calls by tool (None: it served none). Their faults are
    # in faults_fired beside the wire's, and recovered counts them too.
    tool_calls: Mapping[str, int] | None = None
    # Each served tool call's step, "tool:NAME:OUTCOME" (ok, error, or the fault's kind), with
    # the number of model steps before it: the trajectory is the two, in the order they came.
    tool_steps: tuple[tuple[int, str], ...] = ()

    def summary(self) -> dict[str, Any]:
        """What a result document keeps of it (`RepeatResult.model`)."""
        return {"calls": self.calls, "turns": self.turns, "retries": self.retries,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "faults": list(self.faults_fired[:20]),
                "cost": self.cost.summary() if self.cost is not None else None,
                **({"over_bounds": self.over_bounds} if self.over_bounds else {})}
