"""alk.gateway's count of what a proxied repeat cost, and its budget: a real session in proxy
mode before a provider on loopback, driven with the standard library's HTTP client (no worker
process). The provider's usage is counted from whole and streamed answers of both APIs, an odd
count is clamped, and past max_tokens.repeat nothing more reaches the provider."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import time
from typing import Any

import pytest
from aiohttp import web
from helpers.upstream import LoopbackProvider

from alk.cost import TokenBudget, TokenCost
from alk.gateway.server import Gateway
from alk.gateway.session import Session
from alk.gateway.wire.bodies import response_body, stream_events
from alk.gateway.wire.reply import Reply, Usage
from alk.gateway.wire.formats import read_request
from alk.records import Scenario
from alk.redaction import Redactor
from alk.served_model import ModelSetup

KEY = "sk-test-upstream-key"
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}


class Provider(LoopbackProvider):
    """Answers every call with a text and `usage`; `raw_usage`, when set, is sent as it is
    (the upstream is not trusted either)."""

    def __init__(self) -> None:
        self.usage = Usage(prompt_tokens=100, completion_tokens=20)
        self.raw_usage: Any = None
        self.calls = 0
        self.pause_s = 0.0  # between a stream's first frame and the rest
        self.streamed = 0  # streams written to their end
        super().__init__()

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method == "GET":
            return web.json_response({"id": "m", "object": "model"})
        self.calls += 1
        api = "chat" if request.path.endswith("chat/completions") else "responses"
        asked = read_request(api, await request.read())
        assert not isinstance(asked, str), asked
        reply = Reply(text="done")
        if not asked.stream:
            body = json.loads(response_body(api, reply, model="m", call=1, usage=self.usage,
                                            created=0))
            if self.raw_usage is not None:
                body["usage"] = self.raw_usage
            return web.json_response(body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for n, frame in enumerate(stream_events(api, reply, model="m", call=1, usage=self.usage,
                                                created=0)):
            await response.write(frame)
            if n == 0 and self.pause_s:
                await asyncio.sleep(self.pause_s)
        await response.write_eof()
        self.streamed += 1
        return response


@pytest.fixture
def provider():
    serving = Provider()
    yield serving
    serving.close()


def session_of(provider: Provider, budget: TokenBudget | None = None) -> tuple[Gateway, Session]:
    setup = ModelSetup("proxy", name="m", upstream=provider.url, key_env="KEY",
                       max_tokens=budget)
    gateway = Gateway(setup, Redactor(), environ={"KEY": KEY})
    session = Session(gateway, Scenario("s", "task"), 1, attempt=1)
    session.open()
    return gateway, session


def call(session: Session, port: int, api: str = "chat",
         stream: bool = False) -> tuple[int, http.client.HTTPMessage, bytes]:
    field = {"messages": [{"role": "user", "content": "go"}]} if api == "chat" else {
        "input": "go"}
    body = json.dumps({"model": "m", "stream": stream, **field}).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", PATHS[api], body=body, headers={
            "Authorization": f"Bearer {session.key}", "Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def test_the_providers_usage_is_counted_whole_and_streamed_on_both_apis(provider) -> None:
    gateway, session = session_of(provider)
    with gateway:
        port = session.listen_on_host()
        for api in ("chat", "responses"):
            for stream in (False, True):
                assert call(session, port, api, stream)[0] == 200
        seen = session.close()
        session.release()
    assert seen.cost == TokenCost("provider", input_tokens=400, output_tokens=80, calls=4)
    assert seen.summary()["cost"]["input_tokens"] == 400


def test_an_odd_count_from_the_upstream_is_clamped_and_counted(provider) -> None:
    provider.raw_usage = {"prompt_tokens": -5, "completion_tokens": 10**15}
    gateway, session = session_of(provider)
    with gateway:
        assert call(session, session.listen_on_host())[0] == 200
        seen = session.close()
        session.release()
    assert seen.cost == TokenCost("provider", 0, 1_000_000, calls=1, clamped=2)


def test_past_the_repeats_budget_nothing_more_reaches_the_provider(provider) -> None:
    gateway, session = session_of(provider, TokenBudget(repeat=200))
    with gateway:
        port = session.listen_on_host()
        assert [call(session, port)[0] for _ in range(2)] == [200, 200]  # 120, then 240
        status, headers, body = call(session, port, "responses", stream=True)
        seen = session.close()
        session.release()
    assert provider.calls == 2
    assert status == 400 and headers["x-should-retry"] == "false"
    error = json.loads(body)["error"]
    assert error["code"] == "token_budget_exceeded"
    assert "used 240 provider tokens, and its budget is 200" in error["message"]
    assert seen.cost == TokenCost("provider", 200, 40, calls=2, refused=1)


def test_the_repeats_budget_counts_its_earlier_attempts(provider) -> None:
    setup = ModelSetup("proxy", name="m", upstream=provider.url, key_env="KEY",
                       max_tokens=TokenBudget(repeat=200))
    with Gateway(setup, Redactor(), environ={"KEY": KEY}) as gateway:
        session = Session(gateway, Scenario("s", "task"), 1, attempt=2, spent_before=200)
        session.open()
        assert call(session, session.listen_on_host())[0] == 400
        session.release()
    assert provider.calls == 0


def test_answers_that_report_no_usage_still_spend_the_repeats_budget(provider) -> None:
    # A worker whose client asks for no usage (a chat stream without include_usage) is no way
    # past the budget: alk's estimate of each such answer counts against it.
    provider.raw_usage = {"note": "no counts"}
    gateway, session = session_of(provider, TokenBudget(repeat=10))
    with gateway:
        port = session.listen_on_host()
        statuses = [call(session, port)[0] for _ in range(3)]
        refused = call(session, port)[2]
        seen = session.close()
        session.release()
    assert statuses == [200, 400, 400] and provider.calls == 1
    assert "of them alk's estimate for answers that reported no usage" in refused.decode()
    assert seen.cost == TokenCost("provider", calls=0, unreported=1, refused=3)


def test_a_worker_that_hangs_up_mid_stream_is_no_upstream_failure_and_still_pays(
        provider) -> None:
    # The answer is read to its end all the same: its tokens count, and the upstream, which
    # did nothing wrong, is not blamed for the worker's hang-up.
    provider.pause_s = 0.5
    gateway, session = session_of(provider)
    with gateway:
        port = session.listen_on_host()
        body = json.dumps({"model": "m", "stream": True,
                           "messages": [{"role": "user", "content": "go"}]}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=30) as worker:
            worker.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                           b"Authorization: Bearer " + session.key.encode() + b"\r\n"
                           b"Content-Type: application/json\r\nContent-Length: "
                           + str(len(body)).encode() + b"\r\n\r\n" + body)
            assert worker.recv(65536).startswith(b"HTTP/1.1 200")
        deadline = time.monotonic() + 30  # a bound on the wait, not a timing under test
        while provider.streamed == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        while session.cost.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = session.close()
        session.release()
    assert provider.streamed == 1
    assert seen.cost == TokenCost("provider", input_tokens=100, output_tokens=20, calls=1)
    assert seen.upstream_refused is None and seen.provider_error is None
