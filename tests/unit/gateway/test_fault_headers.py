"""The headers a status fault sends: a Retry-After date is never sooner than the wait the lane
declared, whatever the fraction of the second it is made in."""

from __future__ import annotations

import email.utils

import pytest

from alk.gateway import faults
from alk.served_model import WireFault


@pytest.mark.parametrize("now", [1_800_000_000.0, 1_800_000_000.4, 1_800_000_000.99])
def test_a_retry_after_date_is_at_least_the_declared_wait_ahead(monkeypatch, now) -> None:
    monkeypatch.setattr(faults.time, "time", lambda: now)
    fault = WireFault(call=1, kind="http_429", retry_after_s=1.0, retry_after_date=True)
    headers = faults.status_headers(fault)
    when = email.utils.parsedate_to_datetime(headers["Retry-After"]).timestamp()
    assert now + 1.0 <= when < now + 2.0
    assert "retry-after-ms" not in headers  # read first by the clients: the date alone


def test_retry_after_in_seconds_rounds_up_and_gives_the_milliseconds() -> None:
    headers = faults.status_headers(WireFault(call=1, kind="http_429", retry_after_s=0.2))
    assert headers == {"Retry-After": "1", "retry-after-ms": "200"}
