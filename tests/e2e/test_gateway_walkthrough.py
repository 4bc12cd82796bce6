"""docs/gateway.md's walk-through, "From a scripted model to a real provider", run as written:
its lane files and its commands, taken from the page, with the worker the authors' guide
writes, against a fake provider on loopback (the only change: the upstream's address). The
scripted run, the proxied run that records a cassette in a folder that does not exist yet, and
the replay with the key unset all pass, and the replay asks the provider nothing."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from alk.runner.isolation import Network, detect

pytest.importorskip("openai")
from aiohttp import web  # noqa: E402

from alk.gateway.wire.bodies import error_body, response_body  # noqa: E402
from alk.gateway.wire.reply import Reply, ToolCall, estimate_usage  # noqa: E402
from alk.gateway.wire.formats import read_request  # noqa: E402

from helpers.upstream import LoopbackProvider  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs"
MARKER = "<!-- walk-through: "
# What the page sends the provider to: the fake's address stands in for it.
REAL_UPSTREAM = "https://api.openai.com/v1"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(Network.NONE not in detect().networks,
                                 reason="no network namespaces on this machine")]


def walkthrough() -> list[tuple[str, str]]:
    """(what the marker names, the fenced block after it), in the page's order."""
    lines = (DOCS / "gateway.md").read_text(encoding="utf-8").splitlines()
    blocks = []
    for index, line in enumerate(lines):
        if line.startswith(MARKER):
            name = line[len(MARKER):].removesuffix("-->").strip()
            assert lines[index + 1].startswith("```"), f"{name}: a fenced block must follow"
            end = lines.index("```", index + 2)
            blocks.append((name, "\n".join(lines[index + 2:end]) + "\n"))
    return blocks


def authors_worker() -> str:
    """The complete worker of docs/framework-authors.md, "Write the worker"."""
    lines = (DOCS / "framework-authors.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Here is a complete worker"))
    begin = next(i for i in range(start, len(lines)) if lines[i] == "```python")
    return "\n".join(lines[begin + 1:lines.index("```", begin + 1)]) + "\n"


class FakeProvider(LoopbackProvider):
    """Chat Completions to the key the page exports: a lookup of order 742, then the answer;
    `GET /v1/models/gpt-4o-mini` for alk's own check. Counts every request it gets."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.requests: list[str] = []
        super().__init__()

    async def _answer(self, request: web.BaseRequest) -> web.Response:
        self.requests.append(f"{request.method} {request.path}")
        if request.headers.get("Authorization") != f"Bearer {self.key}":
            return web.Response(status=401, body=error_body(401, "bad key"))
        if request.method == "GET":
            found = request.path == "/v1/models/gpt-4o-mini"
            return web.json_response({"id": "gpt-4o-mini", "object": "model"},
                                     status=200 if found else 404)
        asked = read_request("chat", await request.read())
        assert not isinstance(asked, str), asked
        reply = (Reply(text="Order 742 is open") if asked.tool_results else
                 Reply(tool_calls=(ToolCall("lookup_order", '{"order": "742"}'),)))
        return web.Response(body=response_body("chat", reply, model=asked.model,
                                               call=asked.items,
                                               usage=estimate_usage(asked, reply), created=1),
                            content_type="application/json")


def test_the_walkthrough_runs_as_written_scripted_then_recorded_then_replayed(tmp_path):
    blocks = walkthrough()
    files = {name: text for name, text in blocks if name != "commands"}
    [commands] = [text for name, text in blocks if name == "commands"]
    assert sorted(files) == ["lanes/orders-live.toml", "lanes/orders-replay.toml",
                             "lanes/orders.toml"]
    exports = [line.split()[1].split("=", 1) for line in commands.splitlines()
               if line.startswith("export ")]
    [(key_name, key)] = exports
    provider = FakeProvider(key)
    try:
        for name, text in files.items():
            assert REAL_UPSTREAM in text or "proxy" not in text
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text.replace(REAL_UPSTREAM, provider.url))
        (tmp_path / "workers").mkdir()
        (tmp_path / "workers" / "openai_loop_worker.py").write_text(authors_worker())
        cassette = tmp_path / "cassettes" / "orders.jsonl"
        assert not cassette.parent.exists()  # the recording makes its folder

        env = {k: v for k, v in os.environ.items() if k != key_name}
        ran = []
        for line in commands.splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            if words[0] == "export":
                env[key_name] = key
                continue
            if words[0] == "unset":
                assert words[1:] == [key_name]
                env.pop(key_name)
                continue
            assert words[0] == "alk", f"the walk-through's commands are alk's: {line!r}"
            asked_before = len(provider.requests)
            done = subprocess.run([sys.executable, "-m", "alk", *words[1:]], cwd=tmp_path,
                                  env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "warning:" not in done.stderr, done.stderr
            result = max((tmp_path / "reports").glob("*/result.json"),
                         key=lambda path: path.stat().st_mtime)
            document = json.loads(result.read_text())
            outcomes = [r["outcome"] for s in document["scenarios"] for r in s["repeats"]]
            assert outcomes == ["pass"] * 3, document["scenarios"]
            ran.append((words[words.index("--lane") + 1], key_name in env,
                        len(provider.requests) - asked_before))
    finally:
        provider.close()

    scripted, live, replayed = ran
    assert scripted == ("orders", False, 0)
    # Recorded once: alk's own check, then two calls a repeat, all with the key alk holds.
    assert live[:2] == ("orders-live", True) and live[2] >= 7
    assert provider.requests.count("POST /v1/chat/completions") == 6
    recorded = cassette.read_text()
    assert len(recorded.splitlines()) == 6 and key not in recorded
    # Replayed with no key in alk's environment, and nothing asked of the provider.
    assert replayed == ("orders-replay", False, 0)
