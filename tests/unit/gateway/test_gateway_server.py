"""alk.gateway.server: a real gateway session on the host's loopback, driven with the standard
library's HTTP client (no worker process). What it answers, what it counts, what it records for
the transcript, and how it ends a stalled call."""

from __future__ import annotations

import gc
import http.client
import json
import os
import select
import threading
from typing import Any, Callable, Iterator

import pytest

from alk.errors import CassetteError
from alk.gateway import session as session_module
from alk.gateway.cassette import Cassette, Entry
from alk.gateway.script import EXHAUSTED_TEXT
from alk.gateway.server import Gateway
from alk.gateway.session import Session
from alk.records import Scenario
from alk.redaction import Redactor
from alk.served_model import ModelSetup, WireFault

SCRIPT = ({"tool": "lookup_order", "args": {"order": "742"}},
          {"tool": "write_report", "raw": '{"order":"742"}'},
          {"text": "Report for order 742 written"})
CHAT = "/v1/chat/completions"
# A safety net only: no test waits this long unless the behaviour it pins is broken.
CLIENT_TIMEOUT_S = 60


def request_body(text: str = "write the report", **fields: Any) -> bytes:
    return json.dumps({"model": "gpt-test", "messages": [{"role": "user", "content": text}],
                       **fields}).encode()


class Client:
    """One session's HTTP client: each call on a fresh connection."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.port = session.listen_on_host()

    def send(self, method: str, path: str, body: Any = None, key: str | None = "session",
             headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPMessage,
                                                              bytes]:
        sent = dict(headers or {})
        if key is not None:
            sent["Authorization"] = f"Bearer {self.session.key if key == 'session' else key}"
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
        connection = http.client.HTTPConnection("127.0.0.1", self.port,
                                                timeout=CLIENT_TIMEOUT_S)
        try:
            connection.request(method, path, body=body, headers=sent,
                               encode_chunked=not isinstance(body, (bytes, type(None))))
            response = connection.getresponse()
            return response.status, response.headers, response.read()
        finally:
            connection.close()

    def chat(self, body: bytes | None = None) -> tuple[int, http.client.HTTPMessage, dict]:
        status, headers, data = self.send("POST", CHAT, request_body() if body is None
                                          else body)
        return status, headers, json.loads(data)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files in /proc")
def test_a_closed_gateway_leaves_no_file_open() -> None:
    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    # What earlier tests left for the collector closes first, so that it cannot close while
    # this one counts; a file another thread closes meanwhile only lowers the count after.
    gc.collect()
    before = open_files()
    with Gateway(ModelSetup("script"), Redactor()) as serving:
        session = Session(serving, Scenario("s", "task", script=SCRIPT), 1, attempt=1)
        session.open()
        assert Client(session).chat()[0] == 200
        session.release()
    assert open_files() <= before


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    with Gateway(ModelSetup("script"), Redactor()) as serving:
        yield serving


@pytest.fixture
def connect(gateway: Gateway) -> Iterator[Callable[..., Client]]:
    """`connect(script=..., wire_faults=...)`: a session of a scenario, listening on the host."""
    sessions: list[Session] = []

    def make(script: tuple = SCRIPT, wire_faults: tuple[WireFault, ...] = (),
             seed: int = 1) -> Client:
        session = Session(gateway, Scenario("s", "task", script=script, wire_faults=wire_faults),
                          seed, attempt=1)
        session.open()  # as the runner does when it sends start
        sessions.append(session)
        return Client(session)

    yield make
    for session in sessions:
        session.release()


def message(answer: dict) -> dict:
    return answer["choices"][0]["message"]


def calls(client: Client) -> list[dict]:
    events = client.session.events()
    assert {(channel, kind) for channel, kind, _ in events} <= {("model", "call")}
    return [payload for _, _, payload in events]


# --- who may call, and what -----------------------------------------------------------------


def test_before_start_every_session_answers_alike_and_serves_nothing_of_its_scenario(
        gateway) -> None:
    """Two scenarios (one with a stall at call 1, a timing tell) and the probe's session,
    before start: the same answer, no turn, no fault, no call counted. Once open, the first
    call is the scenario's call 1."""
    stall = (WireFault(call=1, kind="stall"),)
    sessions = [Session(gateway, Scenario("easy", "t", script=SCRIPT), 1, attempt=1),
                Session(gateway, Scenario("hard", "t", script=({"text": "hard"},),
                                          wire_faults=stall), 1, attempt=1),
                Session(gateway, None, 0, attempt=1)]
    try:
        clients = [Client(session) for session in sessions]
        answers = [client.send("POST", CHAT, request_body())[::2] for client in clients]
        assert answers[0][0] == 503 and b"start message" in answers[0][1]
        assert answers[1:] == answers[:1] * 2
        for session in sessions:
            assert session.events() == [("model", "before_start",
                                         {"api": "chat", "status": 503, "count": 1})]
        assert [(s.close().calls, s.turns, s.fired) for s in sessions] == [(0, 0, [])] * 3
    finally:
        for session in sessions:
            session.release()
    easy = Session(gateway, Scenario("easy", "t", script=SCRIPT), 1, attempt=1)
    try:
        client = Client(easy)
        assert client.send("POST", CHAT, request_body())[0] == 503
        easy.open()
        status, _, answer = client.chat()
        assert status == 200 and message(answer)["tool_calls"][0]["function"]["name"] == \
            "lookup_order"
        assert [payload["call"] for _, kind, payload in easy.events() if kind == "call"] == [1]
    finally:
        easy.release()


def test_the_probes_session_is_never_opened(gateway) -> None:
    probe = Session(gateway, None, 0, attempt=1)
    try:
        with pytest.raises(ValueError, match="probe"):
            probe.open()
    finally:
        probe.release()


@pytest.mark.parametrize("key", [None, "wrong", "", "alk-"])
def test_a_call_without_the_sessions_key_is_refused_and_not_counted(connect, key) -> None:
    client = connect()
    status, _, data = client.send("POST", CHAT, request_body(), key=key)
    assert status == 401
    assert "OPENAI_API_KEY" in json.loads(data)["error"]["message"]
    assert client.session.events() == []
    seen = client.session.close()
    assert (seen.calls, seen.turns) == (0, 0)


def test_another_sessions_key_is_refused(connect) -> None:
    one, other = connect(), connect()
    assert one.send("POST", CHAT, request_body(), key=other.session.key)[0] == 401
    assert one.session.close().calls == 0


def test_models_lists_the_lanes_model_name(connect) -> None:
    client = connect()
    for path in ("/v1/models", "/v1/models/", "/models"):
        status, _, data = client.send("GET", path)
        assert status == 200
        assert [m["id"] for m in json.loads(data)["data"]] == ["alk-script"]
    assert client.send("GET", "/v1/models", key="wrong")[0] == 401
    assert client.session.close().calls == 0


@pytest.mark.parametrize("method, path", [
    ("POST", "/v1/embeddings"), ("GET", CHAT), ("POST", "/v2/chat/completions"),
    ("POST", "/chat"), ("POST", "/v1/models"), ("DELETE", "/v1/responses"),
    ("GET", "/v1/messages"), ("POST", "/v1beta/models/m:countTokens"),
    ("GET", "/v1beta/models/m:generateContent"),
])
def test_other_paths_and_methods_are_not_found(connect, method: str, path: str) -> None:
    client = connect()
    status, _, data = client.send(method, path, request_body() if method == "POST" else None)
    assert status == 404
    assert json.loads(data)["error"]["message"] == (
        "alk's gateway serves POST /v1/chat/completions, /v1/responses (OpenAI), /v1/messages "
        "(Anthropic) and /v1beta/models/NAME:generateContent or :streamGenerateContent (Gemini)")
    assert client.session.close().calls == 0


def test_both_apis_are_served_with_or_without_the_v1_prefix(connect) -> None:
    client = connect(script=({"text": "a"}, {"text": "b"}))
    status, _, data = client.send("POST", "/chat/completions", request_body())
    assert status == 200 and message(json.loads(data))["content"] == "a"
    status, _, data = client.send("POST", "/v1/responses/",
                                  json.dumps({"model": "m", "input": "hi"}).encode())
    assert status == 200 and json.loads(data)["output"][0]["content"][0]["text"] == "b"
    assert [c["api"] for c in calls(client)] == ["chat", "responses"]
    # Both of the script's turns served: what tells a run that ended on its last turn.
    seen = client.session.close()
    assert (seen.turns, seen.script_turns) == (2, 2)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_past_the_bound_is_refused_and_not_counted(connect, monkeypatch, chunked) -> None:
    monkeypatch.setattr(session_module, "MAX_REQUEST_BYTES", 300)
    client = connect()
    big = request_body("x" * 400)
    status, _, data = client.send("POST", CHAT, iter([big[:200], big[200:]]) if chunked
                                  else big)
    assert status == 413
    assert json.loads(data)["error"]["message"] == "request body over 300 bytes"
    # A body within the bound is still served.
    assert client.chat(request_body("y" * 100))[0] == 200
    seen = client.session.close()
    assert (seen.calls, seen.turns) == (1, 1)


def test_a_declared_length_past_the_bound_is_refused_before_its_body_comes(
        connect, monkeypatch) -> None:
    # Only the headers are sent: the gateway answers without waiting for (or holding) a body.
    monkeypatch.setattr(session_module, "MAX_REQUEST_BYTES", 300)
    client = connect()
    connection = http.client.HTTPConnection("127.0.0.1", client.port, timeout=CLIENT_TIMEOUT_S)
    try:
        connection.putrequest("POST", CHAT)
        connection.putheader("Authorization", f"Bearer {client.session.key}")
        connection.putheader("Content-Length", "301")
        connection.endheaders()
        assert connection.getresponse().status == 413
    finally:
        connection.close()
    assert client.session.close().calls == 0


@pytest.mark.parametrize("body, problem", [
    (b"not json", "the request body is not JSON alk reads: "),
    (b"[1]", "the request body must be a JSON object, not "),
    (json.dumps({"model": "m", "messages": []}).encode(), "'messages' must be a non-empty array"),
    (json.dumps({"messages": [{"role": "user"}]}).encode(), "'model' must be a string"),
])
def test_a_malformed_request_is_a_400_and_a_recorded_call(connect, body: bytes,
                                                          problem: str) -> None:
    client = connect()
    status, _, data = client.send("POST", CHAT, body)
    assert status == 400
    assert json.loads(data)["error"]["message"].startswith(problem)
    [call] = calls(client)
    assert (call["call"], call["api"], call["status"], call["turn"]) == (1, "chat", 400, None)
    assert call["problem"].startswith(problem)
    assert call["stream"] is None and "model" not in call
    seen = client.session.close()
    assert (seen.calls, seen.turns, seen.steps) == (1, 0, ("400:-",))


# --- the script, turn by turn ---------------------------------------------------------------


def test_each_call_takes_the_next_turn_and_past_the_script_an_exhausted_answer(connect) -> None:
    client = connect()
    answers = [client.chat() for _ in range(4)]
    assert [status for status, _, _ in answers] == [200] * 4
    first, second, third, fourth = (message(answer) for _, _, answer in answers)
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in first["tool_calls"]] \
        == [("lookup_order", '{"order":"742"}')]
    assert second["tool_calls"][0]["function"]["name"] == "write_report"
    assert third["content"] == "Report for order 742 written" and "tool_calls" not in third
    assert fourth["content"] == EXHAUSTED_TEXT
    seen = client.session.close()
    assert (seen.calls, seen.turns, seen.exhausted) == (4, 3, (4, 3))
    assert seen.steps == ("200:lookup_order", "200:write_report", "200:text", "200:text")
    assert [call["turn"] for call in calls(client)] == [0, 1, 2, None]


def test_a_script_that_is_not_exhausted_says_so(connect) -> None:
    client = connect()
    client.chat()
    seen = client.session.close()
    assert (seen.exhausted, seen.turns, seen.retries, seen.faults_fired) == (None, 1, 0, ())
    assert seen.recovered


def test_the_events_are_what_the_transcript_records(connect) -> None:
    client = connect()
    assert client.session.events() == []
    client.chat(request_body(tools=[{"type": "function", "function": {"name": "lookup_order"}}]))
    status, _, streamed = client.send("POST", "/v1/responses", json.dumps(
        {"model": "gpt-stream", "input": "go", "stream": True}).encode())
    assert status == 200 and b"response.completed" in streamed
    first, second = calls(client)
    assert set(first) == {"call", "api", "stream", "status", "ms", "turn", "retry", "fault",
                          "tool_calls", "text_chars", "tokens", "model"}
    assert {k: v for k, v in first.items() if k not in ("ms", "tokens")} == {
        "call": 1, "api": "chat", "stream": False, "status": 200, "turn": 0, "retry": False,
        "fault": None, "tool_calls": ["lookup_order"], "text_chars": 0, "model": "gpt-test"}
    assert first["ms"] >= 0
    assert {k: second[k] for k in ("call", "api", "stream", "turn", "tool_calls", "model")} == {
        "call": 2, "api": "responses", "stream": True, "turn": 1,
        "tool_calls": ["write_report"], "model": "gpt-stream"}
    # What was taken is not given again.
    assert client.session.events() == []
    client.chat()
    [third] = calls(client)
    assert (third["call"], third["text_chars"], third["tool_calls"]) == (
        3, len("Report for order 742 written"), [])


def test_tokens_add_up_over_the_calls(connect) -> None:
    client = connect()
    answers = [client.chat(request_body("x" * size))[2] for size in (10, 400, 2000)]
    seen = client.session.close()
    recorded = calls(client)
    assert seen.prompt_tokens == sum(c["tokens"]["prompt"] for c in recorded) \
        == sum(a["usage"]["prompt_tokens"] for a in answers)
    assert seen.completion_tokens == sum(c["tokens"]["completion"] for c in recorded) \
        == sum(a["usage"]["completion_tokens"] for a in answers)
    # A longer prompt counts more tokens: they are the calls' own, not a constant.
    prompts = [a["usage"]["prompt_tokens"] for a in answers]
    assert prompts == sorted(prompts) and prompts[0] < prompts[2]
    assert seen.completion_tokens > 3


# --- wire faults ----------------------------------------------------------------------------


def test_a_429_sends_retry_after_and_its_retry_gets_the_turn_it_did_not_use(connect) -> None:
    client = connect(wire_faults=(WireFault(2, "http_429", retry_after_s=1.2),))
    assert message(client.chat()[2])["tool_calls"][0]["function"]["name"] == "lookup_order"
    status, headers, answer = client.chat()
    assert status == 429
    assert (headers["Retry-After"], headers["retry-after-ms"]) == ("2", "1200")
    assert answer["error"]["message"] == "alk injected http_429 at call 2"
    status, _, retried = client.chat()  # the same request again
    assert status == 200
    assert message(retried)["tool_calls"][0]["function"]["name"] == "write_report"
    recorded = calls(client)
    assert [(c["status"], c["retry"], c["fault"], c["turn"]) for c in recorded] == [
        (200, False, None, 0), (429, False, "http_429", None), (200, True, None, 1)]
    seen = client.session.close()
    assert (seen.calls, seen.turns, seen.retries) == (3, 2, 1)
    assert seen.faults_fired == ("http_429@call2",) and seen.recovered
    assert seen.steps == ("200:lookup_order", "429:http_429", "200:write_report")


def test_a_status_fault_without_retry_after_sends_no_such_header(connect) -> None:
    client = connect(wire_faults=(WireFault(1, "http_503"),))
    status, headers, _ = client.chat()
    assert status == 503
    assert "Retry-After" not in headers and "retry-after-ms" not in headers


def test_only_the_same_request_after_a_failed_answer_is_a_retry(connect) -> None:
    client = connect(wire_faults=(WireFault(2, "http_500"),))
    client.chat()
    client.chat()  # the same request after a success: a new call, not a retry
    client.chat(request_body("something else"))  # after the 500, but not the same request
    seen = client.session.close()
    assert seen.retries == 0
    assert [c["retry"] for c in calls(client)] == [False, False, False]


def test_a_fault_with_no_answered_call_after_it_is_not_recovered(connect) -> None:
    client = connect(wire_faults=(WireFault(2, "http_500"),))
    client.chat()
    assert client.chat()[0] == 500
    seen = client.session.close()
    assert seen.faults_fired == ("http_500@call2",) and not seen.recovered


def test_a_stall_without_seconds_is_ended_by_close(connect) -> None:
    client = connect(wire_faults=(WireFault(1, "stall"),))
    ended: list[BaseException] = []

    def stalled_call() -> None:
        try:
            client.chat()
        except BaseException as exc:  # noqa: BLE001 - the test reads what it was
            ended.append(exc)

    caller = threading.Thread(target=stalled_call)
    caller.start()
    # The gateway signals its record of the call: the stall has begun.
    readable, _, _ = select.select([client.session.wake_fd], [], [], CLIENT_TIMEOUT_S)
    assert readable
    [call] = calls(client)
    assert (call["status"], call["fault"]) == (None, "stall")
    seen = client.session.close()  # returns, with the call still stalled
    caller.join(CLIENT_TIMEOUT_S)
    assert not caller.is_alive()
    # The client saw its connection end, not its own timeout run out.
    [error] = ended
    assert isinstance(error, (ConnectionError, http.client.HTTPException)), repr(error)
    assert not isinstance(error, TimeoutError)
    assert seen.faults_fired == ("stall@call1",) and not seen.recovered
    assert (seen.calls, seen.turns) == (1, 0)


def test_past_the_concurrent_bound_a_request_is_refused_unread(connect, monkeypatch) -> None:
    """Every call stalls (a fault at each): with two allowed at once, the third is answered
    503 at once, unread and uncounted, while the two are held."""
    monkeypatch.setattr(session_module, "MAX_CONCURRENT_CALLS", 2)
    client = connect(wire_faults=(WireFault(1, "stall"), WireFault(2, "stall")))
    held: list[threading.Thread] = []
    for _ in range(2):
        caller = threading.Thread(target=lambda: pytest.raises(Exception, client.chat))
        caller.start()
        held.append(caller)
        readable, _, _ = select.select([client.session.wake_fd], [], [], CLIENT_TIMEOUT_S)
        assert readable
        calls(client)  # drained, so that the next one's record wakes the wait again
    status, _, data = client.send("POST", CHAT, request_body())
    assert status == 503 and b"at most 2 requests at once" in data
    seen = client.session.close()
    for caller in held:
        caller.join(CLIENT_TIMEOUT_S)
    assert seen.calls == 2


@pytest.mark.parametrize("served, claimed, turn, violation", [
    (2, 2, 2, False),  # it kept its state: it goes on where it stands
    (2, 0, 0, False),  # it starts over: the first turn again
    (1, 2, 1, True),   # it claims a turn it was never served: credited no further, a violation
])
def test_a_resumed_attempt_is_credited_only_the_turns_its_repeat_was_served(
        gateway, served, claimed, turn, violation) -> None:
    session = Session(gateway, Scenario("s", "task", script=SCRIPT), 1, attempt=2,
                      served_before=served)
    session.open()
    try:
        client = Client(session)
        history = [{"role": "user", "content": "go"}] + [
            {"role": "assistant", "content": f"turn {n}"} for n in range(claimed)]
        status, _, answer = client.send("POST", CHAT, json.dumps(
            {"model": "m", "messages": history}).encode())
        assert status == 200
        kinds = [kind for _, kind, _ in session.events()]
        assert ("violation" in kinds) is violation
        assert session.close().turns == turn + 1  # the turn it was answered with, served
    finally:
        session.release()


# --- the cassette a proxy records ----------------------------------------------------------------


def proxy_recording(path) -> ModelSetup:
    return ModelSetup("proxy", name="m", upstream="http://127.0.0.1:9/v1", key_env="K",
                      record=path)


def test_the_cassettes_folder_is_made_and_one_that_cannot_be_is_said_so(tmp_path) -> None:
    # The README's own `record = "cassettes/run.jsonl"`, in a checkout with no such folder.
    path = tmp_path / "cassettes" / "nested" / "run.jsonl"
    with Gateway(proxy_recording(path), Redactor(), {"K": "key"}) as serving:
        assert serving.recorder is not None and path.parent.is_dir()
    (tmp_path / "taken").write_text("")  # a file where the folder would be
    with pytest.raises(CassetteError) as caught:
        Gateway(proxy_recording(tmp_path / "taken" / "run.jsonl"), Redactor(), {"K": "key"})
    assert str(caught.value) == (
        f"cannot record the cassette {tmp_path}/taken/run.jsonl (File exists: {tmp_path}/taken);"
        f" make {tmp_path}/taken a folder alk can write, or name a cassette in another")


def test_a_run_that_recorded_no_call_leaves_the_previous_cassette_and_says_so(tmp_path,
                                                                              capsys) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("previous\n")
    Gateway(proxy_recording(path), Redactor(), {"K": "key"}).close()  # void before it started
    assert path.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]
    assert capsys.readouterr().err == (f"warning: {path}: the run made no model call to "
                                       "record; the one recorded before is kept\n")
    Gateway(proxy_recording(tmp_path / "new.jsonl"), Redactor(), {"K": "key"}).close()
    assert not (tmp_path / "new.jsonl").exists()
    assert capsys.readouterr().err.endswith("none was written\n")
    # A call recorded: the cassette is written, as before.
    with Gateway(proxy_recording(path), Redactor(), {"K": "key"}) as serving:
        serving.recorder.add(Entry("chat", {}, 200, "{}", False, (), None))
    assert len(Cassette.load(path)) == 1
