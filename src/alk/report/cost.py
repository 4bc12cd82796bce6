"""What a proxy or replay run cost, in words every view shares (the terminal report, report.md,
report.html): the provider's tokens in and out over the repeats that ran, the lane's budget,
and what the count leaves out. A scripted model's run has none of it: its usage is an estimate.
"""

from __future__ import annotations

from typing import Any, Mapping

from alk.cost import RunCost, TokenTotals
from alk.report.safe_text import plural

SOURCE = {"provider": "provider usage", "replayed": "replayed: the usage the cassette recorded"}


def tokens_line(totals: TokenTotals) -> str:
    """`tokens: 12,340 in · 3,210 out over 100 repeats (provider usage)`"""
    return (f"tokens: {totals.input_tokens:,} in · {totals.output_tokens:,} out over "
            f"{plural(totals.repeats, 'repeat')} ({SOURCE.get(totals.source, totals.source)})")


def budget_line(cost: RunCost) -> str | None:
    """The budget and what the count leaves out (answers that reported no usage, counts the
    upstream sent out of bounds), or None when there is nothing to say."""
    parts = []
    if cost.max_tokens_run is not None:
        parts.append(f"{cost.max_tokens_run:,} a run")
    if cost.max_tokens_repeat is not None:
        parts.append(f"{cost.max_tokens_repeat:,} a repeat")
    said = [f"budget {' · '.join(parts)}"] if parts else []
    totals = cost.totals
    if totals is not None and totals.refused:
        said.append(f"{plural(totals.refused, 'call')} refused")
    if totals is not None and totals.unreported:
        said.append(f"{plural(totals.unreported, 'answer')} had no usage")
    if totals is not None and totals.clamped:
        said.append(f"{plural(totals.clamped, 'count')} clamped")
    return " · ".join(said) or None


def cost_lines(cost: RunCost | None) -> list[str]:
    """The lines a view shows of a run's cost: none for a scripted model, or before any repeat
    of a proxy run finished."""
    if cost is None or cost.totals is None:
        return []
    budget = budget_line(cost)
    return [tokens_line(cost.totals), *([budget] if budget else [])]


def stopped_line(cost: RunCost | None) -> str | None:
    """Why no more repeats started, when the run's budget stopped it (the result's
    `cost.stopped` says it in full, with the tokens spent)."""
    if cost is None or cost.stopped is None:
        return None
    limit = f" (max_tokens.run = {cost.max_tokens_run:,})" if cost.max_tokens_run else ""
    return f"stopped by its token budget{limit}: raise it, or resume"


def report_lines(cost: RunCost | None) -> list[str]:
    """What report.md and report.html say of the cost: the tokens, the budget, and the budget's
    stop in full (the tokens it counted, how many repeats ran, how to go on)."""
    return [*cost_lines(cost), *([cost.stopped] if cost is not None and cost.stopped else [])]


def repeat_tokens_line(cost: Mapping[str, Any]) -> str:
    """A repeat's `model.cost` (`alk show`): `tokens: 200 in · 40 out (provider usage) · 1
    call refused past the budget`."""
    def count(name: str) -> int:
        value = cost.get(name, 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    source = SOURCE["replayed" if cost.get("source") == "replayed" else "provider"]
    line = f"tokens: {count('input_tokens'):,} in · {count('output_tokens'):,} out ({source})"
    if count("refused"):
        line += f" · {plural(count('refused'), 'call')} refused past the budget"
    if count("unreported"):
        line += f" · {plural(count('unreported'), 'answer')} had no usage"
    return line
