"""The gateway's proxy and replay modes through real processes, against a fake upstream on
loopback (nothing here reaches the internet): the worker never holds the provider's key, a
recorded run replays to the same model events, and an upstream that fails voids the repeat."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from alk.runner.isolation import Network, detect

pytest.importorskip("openai")
from aiohttp import web  # noqa: E402
from helpers.upstream import LoopbackProvider  # noqa: E402

from alk.gateway.routes import family_of, route  # noqa: E402
from alk.gateway.wire.bodies import error_body, response_body, stream_events  # noqa: E402
from alk.gateway.wire.formats import read_request  # noqa: E402
from alk.gateway.wire.reply import Reply, ToolCall, Usage, estimate_usage

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "workers" / "provider_client.py"
UPSTREAM_KEY = "sk-alk-upstream-" + "Q7x2Lm9Pz4Rt8Vw1Ks6Hd3"
KEY_PATTERN = r"sk-alk-upstream-[A-Za-z0-9]{20}"
TURNS = [Reply(tool_calls=(ToolCall("lookup_order", '{"order":"742"}'),)),
         Reply(tool_calls=(ToolCall("write_report", '{"order":"742"}'),)),
         Reply(text="Report for order 742 written")]

needs_offline = pytest.mark.skipif(Network.NONE not in detect().networks,
                                   reason="no network namespaces on this machine")


MODEL = "gpt-fake"


# How each family's upstream takes alk's key, and where alk's own check asks for the model.
KEY_HEADERS = {"openai": ("Authorization", f"Bearer {UPSTREAM_KEY}"),
               "anthropic": ("x-api-key", UPSTREAM_KEY),
               "gemini": ("x-goog-api-key", UPSTREAM_KEY)}
CHECKS = (f"/v1/models/{MODEL}", f"/v1beta/models/{MODEL}")  # OpenAI's and Anthropic's; Gemini's


class FakeUpstream(LoopbackProvider):
    """A provider on loopback that speaks every family: answers a call from TURNS by the number
    of tool results the request holds, in the call's own format, and only to the real key sent
    as that family sends it; `GET .../models/gpt-fake` (alk's own check) while it is `up`, 503
    to everything once it is not."""

    def __init__(self) -> None:
        self.authorizations: list[str] = []
        self.checks = 0
        self.up = True
        self.down_after_first_check = False
        self.usage: Usage | None = None  # what it reports of every call; None: an estimate
        self.answered = 0  # model calls answered
        super().__init__()

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        asked_for = route(request.method, request.path, request.query)
        api = asked_for.api if asked_for is not None and asked_for.kind == "call" else "chat"
        # A check (a GET) is the family's whose key header it carries; a call, its format's.
        family = family_of(api) if request.method != "GET" else next(
            (name for name, (header, _) in KEY_HEADERS.items()
             if header in request.headers), "openai")
        header, wanted = KEY_HEADERS[family]
        self.authorizations.append(f"{header}: {request.headers.get(header, '')}")
        if request.headers.get(header) != wanted:
            return web.Response(status=401, body=error_body(401, "bad key", api))
        if not self.up:
            return web.Response(status=503, body=error_body(503, "down", api))
        if request.method == "GET":
            self.checks += 1
            self.up = not self.down_after_first_check
            found = request.path in CHECKS
            return web.json_response({"id": MODEL, "object": "model"} if found else
                                     {"error": {"message": "no such model"}},
                                     status=200 if found else 404)
        asked = read_request(api, await request.read(), model=asked_for.model,
                             stream=asked_for.stream)
        assert not isinstance(asked, str), asked
        reply = TURNS[min(asked.tool_results, len(TURNS) - 1)]
        usage = self.usage or estimate_usage(asked, reply)
        self.answered += 1
        made = dict(model=asked.model, call=asked.items, usage=usage, created=1)
        if asked.stream:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for frame in stream_events(api, reply, **made):
                await response.write(frame)
            await response.write_eof()
            return response
        return web.Response(body=response_body(api, reply, **made),
                            content_type="application/json")


def lane(tmp_path: Path, model: str, name: str, api: str = "chat", stream: bool = False
         ) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f"""name = "{name}"
framework = "openai-client"
version = ">=1"
command = ["{{python}}", "{WORKER}"]
network = "none"
timeout_s = 30

[model]
{model}

[[scenarios]]
id = "report"
task = "Prepare the report for order 742 (keys look like sk-alk-upstream-)"
input = {{ scan = "{KEY_PATTERN}", api = "{api}", stream = {str(stream).lower()} }}
[scenarios.expect]
stop_reason = "accepted"
files = [ {{ path = "lab-output/effects.json", json_length = 1 }} ]
""")
    return path


def run(tmp_path: Path, lane_path: Path, *args: str) -> tuple[dict, list[list[dict]]]:
    env = {**os.environ, "ALK_TEST_UPSTREAM_KEY": UPSTREAM_KEY}
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(lane_path), "-q",
                           "--keep-workspaces", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1, 3), done.stderr
    result = max((tmp_path / "reports").glob("*/result.json"), key=lambda p: p.stat().st_mtime)
    document = json.loads(result.read_text())
    calls = []
    for repeat in document["scenarios"][0]["repeats"]:
        events = [json.loads(line) for line in
                  (tmp_path / repeat["transcript"]).read_text().splitlines()]
        calls.append([{k: v for k, v in e["payload"].items() if k != "ms"} for e in events
                      if e["source"] == "harness" and e["channel"] == "model"])
    return document, calls


@pytest.fixture
def upstream():
    fake = FakeUpstream()
    yield fake
    fake.close()


# Each family through its own client (streamed where the family's stream is its own framing:
# Anthropic's events, Gemini's CRLF-ended chunks), to an upstream of its family.
FAMILIES = [("chat", False, "openai", "/v1"), ("messages", True, "anthropic", ""),
            ("gemini", True, "gemini", "")]


@needs_offline
@pytest.mark.parametrize("api, stream, family, base", FAMILIES, ids=[f[2] for f in FAMILIES])
def test_the_proxy_keeps_the_key_from_the_worker_and_a_replay_reproduces_its_model_events(
        tmp_path, upstream, api, stream, family, base):
    cassette = tmp_path / "recorded.jsonl"
    proxy = lane(tmp_path, f"""mode = "proxy"
family = "{family}"
upstream = "http://127.0.0.1:{upstream.port}{base}"
key_env = "ALK_TEST_UPSTREAM_KEY"
name = "gpt-fake"
record = "{cassette}"
""", "proxied", api, stream)
    document, recorded = run(tmp_path, proxy, "-n", "2")
    repeats = document["scenarios"][0]["repeats"]
    assert [r["outcome"] for r in repeats] == ["pass", "pass"], [r["detail"] for r in repeats]
    header, wanted = KEY_HEADERS[family]
    assert set(upstream.authorizations) == {f"{header}: {wanted}"}
    # The worker scanned its environment, files and memory after its calls: no key, though
    # the scan found the gateway's per-repeat token in that memory (the scan works).
    workspaces = Path(document["paths"]["workspaces"])
    scans = [json.loads(p.read_text()) for p in workspaces.glob("*/lab-output/scan.json")]
    assert len(scans) == 2
    assert all(s == {"found": [], "own_key_in_memory": True} for s in scans), scans
    # Nor is it anywhere in what alk wrote: transcripts, result, cassette.
    written = [*tmp_path.glob("transcripts/**/*.jsonl"), *tmp_path.glob("reports/**/*.json"),
               cassette]
    assert all(UPSTREAM_KEY not in path.read_text() for path in written)
    assert [[(c["api"], c["tool_calls"]) for c in calls] for calls in recorded] == [
        [(api, ["lookup_order"]), (api, ["write_report"]), (api, [])]] * 2
    assert {json.loads(line)["api"] for line in cassette.read_text().splitlines()} == {api}

    # The cassette, replayed with no upstream at all, gives the same model events.
    upstream.close()
    # The model's name as recorded: the worker asks for it, and replay matches it.
    replay = lane(tmp_path, f'mode = "replay"\ncassette = "{cassette}"\nname = "{MODEL}"\n',
                  "replayed", api, stream)
    document, replayed = run(tmp_path, replay, "-n", "2")
    assert [r["outcome"] for r in document["scenarios"][0]["repeats"]] == ["pass", "pass"]
    assert replayed == recorded


@needs_offline
def test_an_upstream_that_fails_alks_own_check_too_voids_the_repeat(tmp_path, upstream):
    # Up for the check before the run, down (503 to everything) from then on.
    upstream.down_after_first_check = True
    proxy = lane(tmp_path, f"""mode = "proxy"
upstream = "http://127.0.0.1:{upstream.port}/v1"
key_env = "ALK_TEST_UPSTREAM_KEY"
name = "gpt-fake"
""", "refused")
    document, calls = run(tmp_path, proxy, "-n", "1")
    [repeat] = document["scenarios"][0]["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("lane_infra", "provider_unavailable")
    assert calls[0][0]["status"] == 503
    checks = [c for c in calls[0] if "detail" in c and c.get("call") == 1]
    assert checks and checks[0]["status"] == 503, calls[0]
    assert "alk's own check" in repeat["detail"]


@needs_offline
def test_an_upstream_that_answers_nothing_voids_the_run_before_anything_starts(tmp_path):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    proxy = lane(tmp_path, f"""mode = "proxy"
upstream = "http://127.0.0.1:{port}/v1"
key_env = "ALK_TEST_UPSTREAM_KEY"
name = "gpt-fake"
""", "refused")
    document, _ = run(tmp_path, proxy, "-n", "1")
    assert document["gate"]["cause"] == "provider_unavailable", document["gate"]
    assert "nothing was started" in document["gate"]["detail"]
    assert not list((tmp_path / "transcripts").rglob("repeat-*.jsonl"))


@needs_offline
def test_a_replay_that_meets_a_request_it_never_recorded_names_the_first_difference(
        tmp_path):
    entry = {"api": "chat", "request": {"messages": [{"content": "something else",
                                                      "role": "user"}], "model": "alk-script"},
             "status": 200, "body": "{}", "stream": False, "events": [], "fault": None}
    cassette = tmp_path / "other.jsonl"
    cassette.write_text(json.dumps(entry) + "\n")
    replay = lane(tmp_path, f'mode = "replay"\ncassette = "{cassette}"\n', "mismatch")
    document, calls = run(tmp_path, replay, "-n", "1")
    [repeat] = document["scenarios"][0]["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "replay_mismatch")
    assert "call 1:" in repeat["detail"] and "something else" in repeat["detail"]


@needs_offline
def test_a_proxy_run_counts_the_providers_tokens_and_keeps_to_its_budgets(tmp_path, upstream):
    # 120 tokens a call: a repeat's third call is refused at 240 of its 200 (its cause:
    # token_budget); the run starts no repeat once 3 of them reach 720 of its 500.
    upstream.usage = Usage(prompt_tokens=100, completion_tokens=20)
    proxy = lane(tmp_path, f"""mode = "proxy"
upstream = "http://127.0.0.1:{upstream.port}/v1"
key_env = "ALK_TEST_UPSTREAM_KEY"
name = "gpt-fake"
max_tokens = {{ run = 500, repeat = 200 }}
""", "budgeted")
    env = {**os.environ, "ALK_TEST_UPSTREAM_KEY": UPSTREAM_KEY}
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(proxy), "-n", "4",
                           "-j", "1"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 130, done.stderr  # a partial result, as an interrupted run's
    assert "stopped by its token budget (max_tokens.run = 500)" in done.stdout, done.stdout
    [result] = (tmp_path / "reports").glob("*/result.json")
    document = json.loads(result.read_text())
    repeats = document["scenarios"][0]["repeats"]
    assert [(r["outcome"], r["cause"]) for r in repeats] == [("agent", "token_budget")] * 3
    assert [r["model"]["cost"] for r in repeats] == [
        {"source": "provider", "input_tokens": 200, "output_tokens": 40, "calls": 2,
         "unreported": 0, "clamped": 0, "refused": 1}] * 3
    assert upstream.answered == 6  # the refused calls never reached it
    assert document["status"] == "interrupted"
    cost = document["cost"]
    assert cost["totals"] == {"source": "provider", "input_tokens": 600, "output_tokens": 120,
                              "repeats": 3, "unreported": 0, "clamped": 0, "refused": 3}
    assert cost["stopped"].startswith("stopped: token budget reached (720 of max_tokens.run = "
                                      "500 provider tokens) after 3 of 4 repeats")
    assert document["scenarios"][0]["model"]["cost"] == cost["totals"]
    # Resumed, the run goes on with a budget of its own: the fourth repeat runs, and it ends.
    again = subprocess.run([sys.executable, "-m", "alk", "run", "--resume",
                            document["run_id"], "-j", "1"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr  # every repeat failed
    document = json.loads(result.read_text())
    assert document["status"] == "complete"
    assert len(document["scenarios"][0]["repeats"]) == 4
    assert document["cost"]["totals"]["input_tokens"] == 800
    assert document["cost"]["stopped"] is None


def tool_lane(tmp_path: Path, model: str, name: str) -> Path:
    """A lane whose tools alk serves over MCP (tests/workers/mcp_tools.py calls them)."""
    from helpers.gateway_runs import EXPECT, TOOLS

    path = tmp_path / f"{name}.toml"
    path.write_text(f"""name = "{name}"
framework = "mcp-client"
version = ">=1"
command = ["{{python}}", "{ROOT / 'tests' / 'workers' / 'mcp_tools.py'}"]
network = "none"
timeout_s = 30

[model]
{model}
{TOOLS}
[[scenarios]]
id = "report"
task = "Prepare the report for order 742"
{EXPECT}
""")
    return path


@needs_offline
def test_a_proxied_runs_tool_calls_are_recorded_and_its_replay_is_held_to_them(
        tmp_path, upstream):
    """The cassette holds the tool calls alk ran beside the model calls; a replay with no
    upstream makes the same calls (and the effect, in its own workspace) and passes; a
    recording whose call differs from the replayed one is a mismatch, naming the argument."""
    pytest.importorskip("mcp")
    cassette = tmp_path / "recorded.jsonl"
    proxy = tool_lane(tmp_path, f"""mode = "proxy"
family = "openai"
upstream = "http://127.0.0.1:{upstream.port}/v1"
key_env = "ALK_TEST_UPSTREAM_KEY"
name = "{MODEL}"
record = "{cassette}"
""", "proxied")
    document, _ = run(tmp_path, proxy, "-n", "1")
    [repeat] = document["scenarios"][0]["repeats"]
    assert repeat["outcome"] == "pass", repeat["detail"]
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    tools = [line for line in lines if "tool" in line]
    assert [(t["tool"], t["args"], t["ok"], t["scenario"], t["repeat"], t["attempt"])
            for t in tools] == [("lookup_order", {"order": "742"}, True, "report", 1, 1),
                                ("write_report", {"order": "742"}, True, "report", 1, 1)]
    assert json.loads(tools[1]["result"]) == {"written": True, "effects": 1}
    assert len(lines) - len(tools) == 3  # the model calls, beside them

    upstream.close()
    replay = tool_lane(tmp_path, f'mode = "replay"\ncassette = "{cassette}"\nname = "{MODEL}"\n',
                       "replayed")
    document, _ = run(tmp_path, replay, "-n", "1")
    [repeat] = document["scenarios"][0]["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("pass", "passed"), repeat["detail"]

    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps({**line, "args": {"order": "743"}}
                                         if line.get("tool") == "write_report" else line) + "\n"
                              for line in lines))
    replay = tool_lane(tmp_path, f'mode = "replay"\ncassette = "{edited}"\nname = "{MODEL}"\n',
                       "mismatch")
    document, _ = run(tmp_path, replay, "-n", "1")
    [repeat] = document["scenarios"][0]["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "replay_mismatch")
    assert "tool call 2: args.order: expected '743', got '742'" in repeat["detail"]
