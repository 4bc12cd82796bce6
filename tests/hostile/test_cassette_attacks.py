"""Attacks on the cassette alk records under `[model] mode = "proxy"`, through the real CLI
against a fake provider on loopback: a cassette is a file people commit, so it must hold no
secret of the run, and what alk records must be what a later replay loads.

The worker is tests/hostile/cassette_worker.py: `leak` puts the declared secret in every part of
its requests, `flood` sends requests until the recording would pass what replay loads.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
from aiohttp import web  # noqa: E402

from alk.gateway.cassette import Cassette  # noqa: E402
from alk.gateway.wire.bodies import response_body, stream_events  # noqa: E402
from alk.gateway.wire.reply import Reply, Usage  # noqa: E402
from alk.redaction import MASK  # noqa: E402

from helpers.upstream import LoopbackProvider  # noqa: E402

WORKER = Path(__file__).resolve().with_name("cassette_worker.py")
UPSTREAM_KEY = "sk-upstream-" + secrets.token_hex(12)
# What replay loads (`Cassette.load`), as a user knows it: the unit tests hold alk to it.
REPLAY_LOADS = 64 * 1024 * 1024
# 18 requests of 3.9 MiB (a request is read up to 4 MiB): 70 MiB asked to be recorded, of
# which 16 fit in the 64 MiB replay loads.
FLOOD_CALLS, FLOOD_MIB = 18, 3.9

pytestmark = pytest.mark.slow


class Provider(LoopbackProvider):
    """A provider on loopback that answers both APIs, streamed or not. Not streamed, it echoes
    the request's first text (a model repeating its prompt), as one JSON string."""

    def __init__(self) -> None:
        self.calls = 0
        super().__init__()

    async def _answer(self, request: web.BaseRequest) -> web.Response:
        if request.method == "GET":  # alk's own check of the model it names, before the run
            return web.json_response({"id": "m", "object": "model"})
        self.calls += 1
        asked = json.loads(await request.content.read())  # no 1 MiB cap, as read() has
        api = "chat" if request.path.endswith("chat/completions") else "responses"
        first = asked.get("instructions") or asked["messages"][0]["content"]
        answer = dict(model="m", call=self.calls, usage=Usage(3, 2), created=1)
        if asked.get("stream"):
            frames = stream_events(api, Reply(text="streamed answer"), **answer)
            return web.Response(body=b"".join(frames), content_type="text/event-stream")
        reply = Reply(text=f"you said: {first[:200]}")
        return web.Response(body=response_body(api, reply, **answer),
                            content_type="application/json")



@pytest.fixture
def provider():
    fake = Provider()
    yield fake
    fake.close()


def lane_text(model: str, *args: str) -> str:
    argv = ", ".join(f'"{a}"' for a in ("{python}", str(WORKER), *args))
    return (f'name = "cassette"\nframework = "cassette-attack"\nversion = ">=1"\n'
            f'command = [{argv}]\nrequired_env = ["HOSTILE_TOKEN"]\ntimeout_s = 60\n\n'
            f'[model]\n{model}\n\n[[scenarios]]\nid = "attack"\ntask = "t"\n'
            f'[scenarios.expect]\nstop_reason = "accepted"\noutput_equals = "done"\n')


def alk_run(tmp_path: Path, name: str, lane: str, token: str, *args: str):
    """`alk run` of a lane text; the process, its repeats, and each repeat's call statuses as
    the gateway recorded them in the transcript."""
    path = tmp_path / "lanes" / f"{name}.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(lane.replace('name = "cassette"', f'name = "{name}"'))
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(path), "-q",
                           *args], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HOSTILE_TOKEN": token, "COLUMNS": "200",
                               "ALK_TEST_UPSTREAM_KEY": UPSTREAM_KEY})
    result = max((tmp_path / "reports").glob("*/result.json"), key=lambda p: p.stat().st_mtime)
    repeats = json.loads(result.read_text())["scenarios"][0]["repeats"]
    statuses = []
    for repeat in repeats:
        events = map(json.loads, (tmp_path / repeat["transcript"]).read_text().splitlines())
        statuses.append([e["payload"]["status"] for e in events
                         if (e["source"], e["channel"], e["type"]) == ("harness", "model",
                                                                       "call")])
    return done, repeats, statuses


def proxy(upstream: str, record: Path) -> str:
    return (f'mode = "proxy"\nupstream = "{upstream}"\nkey_env = "ALK_TEST_UPSTREAM_KEY"\n'
            f'name = "m"\nrecord = "{record}"')


def test_the_declared_secret_in_every_part_of_a_request_never_reaches_the_cassette(
        tmp_path, provider):
    core = secrets.token_hex(12)
    # Characters that JSON and repr spell otherwise: the secret is looked for in every form.
    token = f"tok-{core}\"\\é/"
    cassette = tmp_path / "recorded.jsonl"
    done, repeats, statuses = alk_run(tmp_path, "record", lane_text(
        proxy(provider.url, cassette), "leak"), token, "-n", "2")
    assert [r["outcome"] for r in repeats] == ["pass", "pass"], [r["detail"] for r in repeats]
    assert statuses == [[200] * 4] * 2 and provider.calls == 8
    data = cassette.read_bytes()
    forms = {token, json.dumps(token)[1:-1], json.dumps(token, ensure_ascii=False)[1:-1],
             json.dumps(json.dumps(token)[1:-1])[1:-1], core}
    found = [form for form in forms if form.encode() in data]
    assert not found, (found, data[data.find(found[0].encode()) - 80:][:200])
    assert MASK.encode() in data
    entries = Cassette.load(cassette)
    assert len(entries) == 8
    for entry in entries:
        assert core not in json.dumps(entry.request, ensure_ascii=False)  # keys, too
        assert core not in entry.body + "".join(entry.events)
    for path in [*tmp_path.glob("transcripts/**/*"), *tmp_path.glob("reports/**/*")]:
        assert not path.is_file() or core.encode() not in path.read_bytes(), path
    assert core not in done.stdout + done.stderr

    # The redacted recording still matches the same requests on replay, both sides redacted:
    # with the secret it was recorded with, and with another value of it.
    replay = f'mode = "replay"\ncassette = "{cassette}"'
    for value in (token, f"tok-{secrets.token_hex(12)}"):
        done, repeats, statuses = alk_run(tmp_path, "replay", lane_text(replay, "leak"),
                                          value, "-n", "2")
        assert [r["outcome"] for r in repeats] == ["pass", "pass"], [r["detail"] for r in repeats]
        assert statuses == [[200] * 4] * 2, done.stderr[-2000:]
    assert provider.calls == 8  # replay never reached the provider


def test_a_flood_of_calls_stops_the_recording_at_what_replay_loads_and_the_replay_runs(
        tmp_path, provider):
    token = f"tok-{secrets.token_hex(12)}"
    cassette = tmp_path / "flood.jsonl"
    flood = ("flood", str(FLOOD_CALLS), str(FLOOD_MIB))
    done, repeats, statuses = alk_run(tmp_path, "record", lane_text(
        proxy(provider.url, cassette), *flood), token, "-n", "1")
    assert [r["outcome"] for r in repeats] == ["pass"], [r["detail"] for r in repeats]
    assert statuses == [[200] * FLOOD_CALLS]  # the worker's run is not changed by the cut
    size = cassette.stat().st_size
    assert size <= REPLAY_LOADS, f"alk recorded {size:,} bytes, more than replay loads"
    recorded = len(Cassette.load(cassette))
    assert recorded == 16
    said = " ".join(done.stderr.split())
    assert (f"warning: {cassette}: the recording stopped at {REPLAY_LOADS:,} bytes"
            in said), done.stderr[-2000:]
    assert f"{FLOOD_CALLS - recorded} model call(s) were not recorded" in said
    assert "record fewer repeats or scenarios at a time" in said
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".flood")] == []

    # The cassette loads: the replay run is not void, and serves every recorded call.
    replay = f'mode = "replay"\ncassette = "{cassette}"'
    done, repeats, statuses = alk_run(tmp_path, "replay", lane_text(replay, *flood), token,
                                      "-n", "1")
    [repeat] = repeats
    assert repeat["outcome"] == "pass", repeat["detail"]
    assert statuses == [[200] * recorded + [500] * (FLOOD_CALLS - recorded)]
