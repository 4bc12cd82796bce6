"""A lane's `[model] max_tokens = { run = N, repeat = M }`: the provider tokens (input and
output together, as the provider counts them) a run and each repeat may use (`alk.cost`)."""

from __future__ import annotations

from alk.cost import MAX_BUDGET_TOKENS, TokenBudget
from alk.lane.table import Table

WHAT = ("a table such as max_tokens = { run = 200000, repeat = 20000 }: the provider tokens "
        "(input and output) the run and each repeat may use; either key may be left out")


def parse_budget(model: Table) -> TokenBudget | None:
    """`[model].max_tokens`, checked: a table of `run` and/or `repeat`, each a whole number of
    tokens from 1 to MAX_BUDGET_TOKENS."""
    if "max_tokens" not in model.data:
        return None
    raw = model.data["max_tokens"]
    if not isinstance(raw, dict):
        model.fail("max_tokens", f"must be {WHAT}; got {raw!r}")
    table = Table(raw, model.where, model.name("max_tokens"), {"run", "repeat"})
    if not raw:
        table.fail("", f"is empty: give run, repeat or both ({WHAT})")
    values = {}
    for key in ("run", "repeat"):
        value = table.get(key, int)
        if value is not None and not 1 <= value <= MAX_BUDGET_TOKENS:
            table.fail(key, f"must be a whole number of tokens from 1 to {MAX_BUDGET_TOKENS:,} "
                            f"(leave it out for no budget), got {value}")
        values[key] = value
    return TokenBudget(**values)
