"""The gateway's routes for its three families, through a real session on loopback: each family's
endpoint answers in its own format, the attempt's key is taken as each family's client sends
it (and nowhere else), `[model] family` narrows what is served, and Gemini's path names its
model. The clients' own parsing of these formats is in test_wire*.py."""

from __future__ import annotations

import json

import pytest
from test_gateway_server import SCRIPT, Client

from alk.gateway.routes import route
from alk.gateway.server import Gateway
from alk.gateway.session import Session
from alk.records import Scenario
from alk.redaction import Redactor
from alk.served_model import ModelSetup

MESSAGES = json.dumps({"model": "claude-test", "max_tokens": 64,
                       "messages": [{"role": "user", "content": "write the report"}]}).encode()
GEMINI = json.dumps({"contents": [{"role": "user", "parts": [{"text": "write"}]}]}).encode()
GEMINI_PATH = "/v1beta/models/gemini-test:generateContent"


def session_of(family: str | None = None) -> tuple[Gateway, Client]:
    gateway = Gateway(ModelSetup("script", family=family), Redactor())
    session = Session(gateway, Scenario("s", "task", script=SCRIPT), 1, attempt=1)
    session.open()
    return gateway, Client(session)


@pytest.fixture
def served():
    gateway, client = session_of()
    yield client
    client.session.release()
    gateway.close()


def test_each_family_is_answered_in_its_own_format_with_the_first_turn(served) -> None:
    status, _, data = served.send("POST", "/v1/messages", MESSAGES, key=None,
                                  headers={"x-api-key": served.session.key,
                                           "anthropic-version": "2023-06-01"})
    message = json.loads(data)
    assert (status, message["type"], message["content"][0]["name"]) == (
        200, "message", "lookup_order")
    status, _, data = served.send("POST", f"{GEMINI_PATH}?key={served.session.key}", GEMINI,
                                  key=None)
    [part] = json.loads(data)["candidates"][0]["content"]["parts"]
    assert (status, part["functionCall"]["name"]) == (200, "write_report")
    seen = served.session.close()
    assert (seen.calls, seen.turns, seen.steps) == (2, 2, ("200:lookup_order",
                                                           "200:write_report"))


@pytest.mark.parametrize("header", ["x-api-key", "x-goog-api-key", "Authorization"])
def test_a_wrong_key_in_any_familys_header_is_refused_in_the_calls_format(served, header):
    path, body = ("/v1/messages", MESSAGES) if header == "x-api-key" else (GEMINI_PATH, GEMINI)
    value = "Bearer alk-wrong" if header == "Authorization" else "alk-wrong"
    status, _, data = served.send("POST", path, body, key=None, headers={header: value})
    error = json.loads(data)
    assert status == 401
    if path == GEMINI_PATH:
        assert error["error"]["status"] == "UNAUTHENTICATED"
    else:
        assert (error["type"], error["error"]["type"]) == ("error", "authentication_error")
    assert served.session.close().calls == 0


def test_a_lane_of_one_family_serves_no_other():
    gateway, client = session_of("anthropic")
    try:
        status, _, data = client.send("POST", "/v1/chat/completions", json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode())
        assert status == 404
        assert json.loads(data)["error"]["message"] == (
            "alk's gateway: this lane's [model] family is 'anthropic'; it serves no openai call")
        assert client.send("POST", "/v1/messages", MESSAGES)[0] == 200  # a Bearer token too
        assert client.session.close().calls == 1
    finally:
        client.session.release()
        gateway.close()


def test_anthropics_token_count_is_no_model_call(served) -> None:
    status, _, data = served.send("POST", "/v1/messages/count_tokens", MESSAGES)
    assert status == 200 and json.loads(data)["input_tokens"] >= 1
    assert served.session.close().calls == 0


def test_a_gemini_stream_is_served_as_server_sent_events_only(served) -> None:
    path = "/v1beta/models/gemini-test:streamGenerateContent"
    status, _, data = served.send("POST", path, GEMINI)
    assert status == 400 and "?alt=sse" in json.loads(data)["error"]["message"]
    status, headers, data = served.send("POST", path + "?alt=sse", GEMINI)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert data.endswith(b"\r\n\r\n")


@pytest.mark.parametrize("method, path, query, expected", [
    ("POST", "/v1beta/models/gemini-2.5-flash:generateContent", {},
     ("call", "gemini", "gemini-2.5-flash", False)),
    ("POST", "/v1/models/g:streamGenerateContent", {"alt": "sse"}, ("call", "gemini", "g", True)),
    ("POST", "/v1/messages", {}, ("call", "messages", "", False)),
    ("POST", "/messages/count_tokens", {}, ("count_tokens", "messages", "", False)),
    ("POST", "/chat/completions", {}, ("call", "chat", "", False)),
    ("GET", "/v1/models", {}, ("models", "chat", "", False)),
])
def test_a_request_is_routed_by_its_path(method, path, query, expected) -> None:
    found = route(method, path, query)
    assert (found.kind, found.api, found.model, found.stream) == expected


@pytest.mark.parametrize("method, path", [
    ("GET", "/v1beta/models/g:generateContent"), ("POST", "/v1beta/models/a/b:generateContent"),
    ("POST", "/v1beta/models/g:countTokens"), ("POST", "/v2/messages"),
    ("POST", "/v1beta/models/" + "g" * 201 + ":generateContent"),
])
def test_what_is_not_an_endpoint_is_not_routed(method, path) -> None:
    assert route(method, path, {}) is None
