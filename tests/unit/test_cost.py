"""alk.cost: an upstream's counts bounded, attempts' costs combined, and repeats' costs summed
from their records, those written before alk counted cost (no `cost`) and a script's (null)
left out."""

from __future__ import annotations

import pytest

from alk.cost import (
    MAX_CALL_TOKENS,
    TokenCost,
    TokenTotals,
    bounded,
    combined,
    repeat_tokens,
    totals,
)


@pytest.mark.parametrize("value, expected", [
    (0, (0, False)), (17, (17, False)), (MAX_CALL_TOKENS, (MAX_CALL_TOKENS, False)),
    (MAX_CALL_TOKENS + 1, (MAX_CALL_TOKENS, True)), (-1, (0, True)), (3.0, (3, False)),
    (2.5, (0, True)), (True, (0, True)), ("12", (0, True)), (None, (0, True)),
    (float("inf"), (0, True)), (float("nan"), (0, True)),
])
def test_a_count_is_a_whole_number_in_range_or_clamped(value, expected) -> None:
    assert bounded(value) == expected


def test_attempts_costs_add_up() -> None:
    first = TokenCost("provider", 10, 2, calls=1, clamped=1)
    second = TokenCost("provider", 5, 1, calls=1, unreported=1, refused=2)
    assert combined([first, None, second]) == TokenCost("provider", 15, 3, 2, 1, 1, 2)
    assert combined([None]) is None


def test_repeats_costs_sum_and_records_without_one_are_left_out() -> None:
    proxied = {"calls": 2, "cost": TokenCost("provider", 90, 10, calls=2, refused=1).summary()}
    models = [proxied, proxied, {"calls": 1, "cost": None}, {"calls": 1}, None]
    assert totals(models) == TokenTotals("provider", 180, 20, 2, refused=2)
    assert totals([None, {"calls": 1}]) is None
    assert [repeat_tokens(m) for m in models] == [100, 100, 0, 0, 0]
    replayed = {"cost": {**proxied["cost"], "source": "replayed"}}
    assert totals([replayed]).source == "replayed"
