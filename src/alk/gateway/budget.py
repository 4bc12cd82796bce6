"""A repeat's provider tokens in the gateway (`added`), and its budget (`[model]
max_tokens.repeat`): once they reach it, nothing more is forwarded (`refuse`), and the repeat
fails with `token_budget` (scored: burning tokens never makes a repeat void).

The refusal is a 400 with `x-should-retry: false`: OpenAI's clients retry 408, 409, 429 and
5xx, and honour that header before the status; a 400 is the error no client retries on its
own. A refusal costs nothing (it is never forwarded), so a client that retries it anyway spends
no tokens doing so.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp import web

from alk.cost import TokenCost
from alk.gateway.http import json_response
from alk.gateway.wire.reply import Usage, dump
from alk.gateway.wire.request import Asked

REFUSAL_CODE = "token_budget_exceeded"


def added(cost: TokenCost, usage: Usage | None, answered: bool) -> TokenCost:
    """The cost with one more provider answer: its usage (bounded already where it was read,
    its clamps counted), or, for an answer that reported none, one more unreported call."""
    if usage is None:
        return dataclasses.replace(cost, unreported=cost.unreported + answered)
    return dataclasses.replace(
        cost, input_tokens=cost.input_tokens + usage.prompt_tokens,
        output_tokens=cost.output_tokens + usage.completion_tokens, calls=cost.calls + 1,
        clamped=cost.clamped + usage.clamped)


def _limit(session: Any) -> int | None:
    budget = session.gateway.setup.max_tokens
    return budget.repeat if budget is not None else None


def spent(session: Any) -> bool:
    """The repeat's provider tokens (its earlier attempts' too) reached max_tokens.repeat."""
    limit = _limit(session)
    return limit is not None and session.cost is not None and _used(session) >= limit


def _used(session: Any) -> int:
    """The repeat's tokens by its budget's count: the provider's, and alk's estimate for the
    answers that reported none."""
    return session.spent_before + session.cost.tokens + session.estimated


def refuse(session: Any, asked: Asked, call: int, began: float, retry: bool) -> web.Response:
    """The answer to a call past the repeat's budget, recorded as the harness saw it."""
    session.cost = dataclasses.replace(session.cost, refused=session.cost.refused + 1)
    estimated = (f", {session.estimated:,} of them alk's estimate for answers that reported no "
                 "usage" if session.estimated else "")
    why = (f"alk's gateway: this repeat used {_used(session):,} provider tokens{estimated}, "
           f"and its budget is {_limit(session):,} (the lane's [model] max_tokens.repeat); no "
           "more calls are forwarded")
    session.record(call, asked.api, asked, 400, began, retry=retry, problem=why)
    body = dump({"error": {"message": why, "type": "invalid_request_error", "param": None,
                           "code": REFUSAL_CODE}})
    return json_response(400, body, {"x-should-retry": "false"})
