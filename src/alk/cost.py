"""What a run's model calls cost, as the provider counted them, and the lane's budget of tokens.

Only a provider's own `usage` (proxy mode), or the usage a cassette recorded from one (replay,
marked `replayed`), is a cost: the usage alk puts in a scripted answer is an estimate and is
never counted here. The upstream is not trusted either: a count that is negative, not a whole
number or past MAX_CALL_TOKENS is clamped where it enters (`bounded`), and the clamps counted.

A lane's `[model] max_tokens = { run = N, repeat = M }` (docs/lanes.md): past M, the gateway
refuses a repeat's next call (the repeat fails with `token_budget`, scored); past N, alk starts
no new repeat, and the run ends as a partial result that `alk run --resume` goes on with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

# The most one call's input or output may count: a million tokens is past any model's context;
# an upstream's larger count is clamped to it, never summed as given.
MAX_CALL_TOKENS = 1_000_000
# The most a budget may be (a lane's typo of ten zeros is an error, not "no budget").
MAX_BUDGET_TOKENS = 10**12
SOURCES = ("provider", "replayed")


def bounded(value: Any) -> tuple[int, bool]:
    """A token count as an upstream sent it, within [0, MAX_CALL_TOKENS]: (the count, whether
    it had to be clamped). What is not a whole number (a string, a bool, 1.5) counts 0."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        return 0, True
    if value < 0:
        return 0, True
    if value > MAX_CALL_TOKENS:
        return MAX_CALL_TOKENS, True
    return value, False


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """A lane's `max_tokens`: provider tokens (input and output together) a run and a repeat
    may use; None: no budget."""

    run: int | None = None
    repeat: int | None = None


@dataclass(frozen=True, slots=True)
class TokenCost:
    """The tokens the provider reported for one repeat's calls (every attempt's)."""

    source: str  # "provider" (proxy) or "replayed" (a cassette's record of the provider's)
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0  # answers that reported a usage
    unreported: int = 0  # answered calls (status < 400) whose answer reported none
    clamped: int = 0  # counts out of bounds, clamped (`bounded`)
    refused: int = 0  # calls the gateway refused: the repeat's budget was spent

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def summary(self) -> dict[str, Any]:
        """What a result document keeps of it (`repeat_model.cost`)."""
        return {"source": self.source, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "calls": self.calls,
                "unreported": self.unreported, "clamped": self.clamped,
                "refused": self.refused}


def combined(costs: Iterable[TokenCost | None]) -> TokenCost | None:
    """Several attempts' costs as one (None when none had any)."""
    present = [cost for cost in costs if cost is not None]
    if not present:
        return None
    return TokenCost(present[-1].source, *(sum(getattr(c, name) for c in present) for name in
                                           ("input_tokens", "output_tokens", "calls",
                                            "unreported", "clamped", "refused")))


def of_summary(model: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A repeat's `model.cost` in a result document; None for a script, or a file written
    before alk counted cost."""
    cost = model.get("cost") if model is not None else None
    return cost if isinstance(cost, Mapping) else None


def repeat_tokens(model: Mapping[str, Any] | None) -> int:
    """The provider tokens a repeat's record says it used (0 without any)."""
    cost = of_summary(model)
    return int(cost.get("input_tokens", 0)) + int(cost.get("output_tokens", 0)) if cost else 0


@dataclass(frozen=True, slots=True)
class TokenTotals:
    """Provider tokens over several repeats (a scenario's, a run's): `repeats` is how many of
    them had a provider's usage to count; `refused` the calls the repeat budget refused."""

    source: str
    input_tokens: int
    output_tokens: int
    repeats: int
    unreported: int = 0
    clamped: int = 0
    refused: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def totals(models: Iterable[Mapping[str, Any] | None]) -> TokenTotals | None:
    """The repeats' provider tokens summed (None when none of them had any to count). Replayed
    usage makes the whole `replayed`: a run has one mode."""
    costs = [cost for cost in map(of_summary, models) if cost is not None]
    if not costs:
        return None

    def total(name: str) -> int:
        return sum(int(cost.get(name, 0)) for cost in costs)

    source = "replayed" if any(cost.get("source") == "replayed" for cost in costs) else "provider"
    return TokenTotals(source, total("input_tokens"), total("output_tokens"), len(costs),
                       total("unreported"), total("clamped"), total("refused"))


@dataclass(frozen=True, slots=True)
class RunCost:
    """A proxy or replay run's provider tokens (`totals`, None before any repeat reported),
    its lane's budget, and, when alk stopped starting repeats for it, why (`stopped`)."""

    totals: TokenTotals | None
    max_tokens_run: int | None = None
    max_tokens_repeat: int | None = None
    stopped: str | None = None
