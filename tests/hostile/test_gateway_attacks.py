"""Hostile workers of the model gateway, through the real CLI: what a worker can make of what
alk serves it (`gateway_worker.py`). docs/security.md names each threat and its defence."""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from alk.runner.isolation import Network, detect
from alk.transcript.reader import read_transcript

web = pytest.importorskip("aiohttp.web")

from helpers.upstream import LoopbackProvider  # noqa: E402

WORKER = Path(__file__).resolve().with_name("gateway_worker.py")


def lane(threat: str, *scenarios: str, model: str = 'mode = "script"', extra: str = "") -> str:
    return (f'framework = "hostile"\nversion = ">=1,<2"\n'
            f'command = ["{{python}}", "{WORKER}", "{threat}"]\ntimeout_s = 20\n{extra}\n'
            f"[model]\n{model}\n\n" + "".join(scenarios))


def scenario(id: str, script: str = '[ { text = "a turn" } ]', extra: str = "") -> str:
    return (f'[[scenarios]]\nid = "{id}"\ntask = "t"\nscript = {script}\n{extra}\n'
            '[scenarios.expect]\nstop_reason = "accepted"\noutput_equals = "done"\n')


def run(tmp_path: Path, text: str, *args: str, env: dict | None = None):
    """`alk run` on a lane text in tmp_path: (process, result document)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    path = tmp_path / "lanes" / "attack.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(path), *args],
                          cwd=tmp_path, capture_output=True, timeout=180,
                          env={**os.environ, "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "100",
                               **(env or {})})
    results = list((tmp_path / "reports").glob("*/result.json"))
    assert len(results) == 1, done.stderr.decode(errors="replace")[-3000:]
    return done, json.loads(results[0].read_bytes())


def causes(document: dict) -> dict[str, list[str]]:
    return {entry["id"]: [r["cause"] for r in entry["repeats"]]
            for entry in document["scenarios"]}


# --- nothing a worker sees before its gate depends on the scenario ---------------------------

def test_a_worker_cannot_ask_the_gateway_for_its_scenario_before_the_gate(tmp_path, init):
    # Had the gateway served the hard scenario's first turn before start, the worker would
    # exit before the gate there, and its failures would be void (exited_before_ready).
    # With network none it reaches the gateway through the listener alk's init made.
    text = lane("peek_model", scenario("easy"), scenario("hard", '[ { text = "hard" } ]'))
    done, document = run(tmp_path, text, "-n", "3")
    assert causes(document) == {"easy": ["passed"] * 3, "hard": ["script_not_followed"] * 3}
    assert done.returncode == 1


def test_a_worker_cannot_time_the_gateway_for_its_scenario_before_the_gate(tmp_path):
    # The hard scenario stalls its first model call: a call before start that stalled would
    # tell the worker where it is. Before start no fault fires and every answer is at once.
    stall = 'wire_faults = [ { call = 1, kind = "stall" } ]'
    text = lane("peek_model_timing", scenario("easy"), scenario("hard", extra=stall))
    done, document = run(tmp_path, text, "-n", "3")
    assert causes(document) == {"easy": ["passed"] * 3, "hard": ["script_not_followed"] * 3}


def test_the_probe_and_every_repeat_look_alike_until_start(tmp_path):
    """Variables (names and kinds of value), files and the gateway's answer, as the worker saw
    them before the gate, in the probe and in two repeats each of two scenarios."""
    text = lane("fingerprint", scenario("easy"), scenario("hard", '[ { text = "hard" } ]'))
    done, document = run(tmp_path, text, "-n", "2")
    [run_folder] = (tmp_path / "transcripts").iterdir()
    seen = {}
    for path in sorted(run_folder.rglob("*.jsonl")):
        [line] = [e["payload"]["text"] for e in read_transcript(path)
                  if e["channel"] == "stderr" and "FINGERPRINT" in e["payload"]["text"]]
        seen[str(path.relative_to(run_folder))] = line.split("FINGERPRINT ", 1)[1]
    assert len(seen) == 5 and "preflight.jsonl" in seen
    first = json.loads(seen["preflight.jsonl"])
    assert {"OPENAI_API_KEY", "OPENAI_BASE_URL"} <= set(first["env"]), first["env"]
    assert first["gateway"][0] == 503
    different = {name: text for name, text in seen.items() if json.loads(text) != first}
    assert not different, f"the probe saw {first}, these saw otherwise: {different}"


# --- a resumed attempt is answered from what the gateway served ------------------------------

def test_a_resumed_attempt_cannot_claim_turns_it_was_never_served(tmp_path):
    # Three turns; the first attempt is served one and crashed; the resumed one claims two.
    kill = 'kill_at = { channel = "tool", type = "call", name = "step" }\nmax_attempts = 2'
    text = lane("skip_turns", scenario(
        "a", '[ { text = "t1" }, { text = "t2" }, { text = "t3" } ]', extra=kill).replace(
        'output_equals = "done"', 'output_equals = "done"\nscript_consumed = true'))
    done, document = run(tmp_path, text, "-n", "2")
    for repeat in document["scenarios"][0]["repeats"]:
        assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime",
                                                        "protocol_violation"), repeat["detail"]
        assert "alk's gateway served 1 to this repeat" in repeat["detail"]


# --- the gateway's refusals, and alk's key ---------------------------------------------------

UPSTREAM_KEY = "sk-alk-hostile-" + secrets.token_hex(16)
MODEL = "gpt-fake"
needs_offline = pytest.mark.skipif(Network.NONE not in detect().networks,
                                   reason="no network namespace here: the proxy lanes say "
                                          "network = \"none\"")


class Upstream(LoopbackProvider):
    """A provider on loopback that refuses what a worker can make it refuse (403 for content
    it will not serve, 500 for a body it cannot take) and whose errors quote the request's
    headers, alk's key among them, as a debugging proxy's do; it answers alk's own check."""

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        headers = "".join(f"{k}: {v}\n" for k, v in request.headers.items())
        if request.headers.get("Authorization") != f"Bearer {UPSTREAM_KEY}":
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        if request.method == "GET":
            if request.path != f"/v1/models/{MODEL}":
                return web.json_response({"error": {"message": "no such model"}}, status=404)
            return web.json_response({"id": MODEL, "object": "model"})
        text = json.dumps(json.loads(await request.read()))
        if "forbidden" in text:
            return web.json_response({"error": {"message": "flagged by moderation"}}, status=403)
        if "poison" in text:
            return web.json_response({"error": {"message": "internal error"}}, status=500)
        if "echo" in text and '"stream": true' in text:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            delta = {"choices": [{"index": 0, "delta": {"content": f"you sent {headers}"}}]}
            await response.write(f"data: {json.dumps(delta)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            return response
        if "echo" in text:
            return web.json_response({"error": {"message": f"bad request; headers:\n{headers}"}},
                                     status=400)
        return web.json_response({"error": {"message": "unexpected"}}, status=400)



@pytest.fixture
def upstream():
    fake = Upstream()
    yield fake
    fake.close()


def proxied(upstream: Upstream) -> str:
    return (f'mode = "proxy"\nupstream = "http://127.0.0.1:{upstream.port}/v1"\n'
            f'key_env = "ALK_HOSTILE_UPSTREAM_KEY"\nname = "{MODEL}"')


KEY_ENV = {"ALK_HOSTILE_UPSTREAM_KEY": UPSTREAM_KEY}


@needs_offline
def test_a_refusal_the_worker_provoked_is_its_failure_not_a_void_repeat(tmp_path, upstream):
    done, document = run(tmp_path, lane("refused_first", scenario("a"), model=proxied(upstream)),
                         "-n", "2", env=KEY_ENV)
    [attack] = document["scenarios"]
    assert [(r["outcome"], r["cause"]) for r in attack["repeats"]] == [
        ("framework_runtime", "upstream_refused")] * 2, attack["repeats"][0]["detail"]
    assert "alk's own check was answered" in attack["repeats"][0]["detail"]
    assert attack["stats"]["counts"]["void"] == 0 and done.returncode == 1


@needs_offline
def test_alks_key_quoted_back_by_the_upstream_never_reaches_the_worker(tmp_path, upstream):
    done, document = run(tmp_path, lane("harvest_key", scenario("a"), model=proxied(upstream),
                                        extra="filesystem = \"sandbox\""),
                         "-n", "1", "--keep-workspaces", env=KEY_ENV)
    [repeat] = document["scenarios"][0]["repeats"]
    assert repeat["cause"] == "passed", repeat["detail"]  # it found no token to harvest
    forms = [UPSTREAM_KEY, UPSTREAM_KEY[::-1], UPSTREAM_KEY.encode().hex(),
             base64.b64encode(UPSTREAM_KEY.encode()).decode()]
    report = subprocess.run([sys.executable, "-m", "alk", "report", "--json"], cwd=tmp_path,
                            capture_output=True, env={**os.environ, **KEY_ENV})
    blobs = [done.stdout, done.stderr, report.stdout,
             *(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()
               and "tmp" not in p.relative_to(tmp_path).parts[:1])]
    for blob in blobs:
        text = blob.decode("utf-8", "replace")
        assert not [form for form in forms if form in text]


@pytest.mark.parametrize("name_line, why", [
    ("", "is required in mode 'proxy'"),
    ('name = "gpt-unknown"', "the upstream does not serve a model named 'gpt-unknown'")])
def test_a_proxy_that_names_no_model_or_one_the_upstream_lacks_is_the_lanes_error(
        tmp_path, upstream, name_line, why):
    """Not a failure of the framework's: alk says so before any worker starts."""
    model = proxied(upstream).replace(f'name = "{MODEL}"', name_line)
    path = tmp_path / "lanes" / "attack.toml"
    path.parent.mkdir()
    path.write_text(lane("refused_first", scenario("a"), model=model))
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(path), "-n", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **KEY_ENV, "COLUMNS": "200"})
    assert done.returncode == 2, done.stdout + done.stderr
    shown = " ".join(done.stderr.split())
    assert "attack.toml: model.name" in shown and why in shown, done.stderr
    assert not list(tmp_path.glob("transcripts/**/repeat-*.jsonl"))
