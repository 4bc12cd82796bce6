"""workers/coding_cli.py, the coding-agent workers' shared part, with Claude Code's stream parser
(workers/claude_code_worker.py): a real subprocess (tests/workers/fake_coding_cli.py) prints a
run as Claude Code's stream-json does, and the events the worker writes for alk are read back
from its protocol stream."""

from __future__ import annotations

import io
import json
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from alk import worker

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workers"))
import claude_code_worker  # noqa: E402
import coding_cli  # noqa: E402

FAKE = [sys.executable, str(ROOT / "tests" / "workers" / "fake_coding_cli.py")]
pytestmark = pytest.mark.slow  # each test starts an interpreter


@pytest.fixture
def sent(monkeypatch):
    """The protocol lines the worker writes, as a function returning them parsed."""
    stream = io.StringIO()
    monkeypatch.setattr(worker, "_default", worker.Worker(reader=io.StringIO(), writer=stream))
    return lambda: [json.loads(line) for line in stream.getvalue().splitlines()]


def run(mode, *args):
    return coding_cli.run_agent([*FAKE, mode, *args], claude_code_worker.parse)


def test_a_run_is_reported_tool_by_tool_and_its_answer_is_the_output(sent):
    output, stop, end = run("ok")
    assert (output, stop) == ("Wrote notes/a.json", "accepted")
    assert end == {"phase": "stopped", "exit_code": 0, "tool_calls": 1, "non_json_lines": 1}
    assert sent() == [
        {"channel": "tool", "type": "call",
         "payload": {"name": "Write", "args": {"file_path": "notes/a.json", "content": "{}"}}},
        {"channel": "tool", "type": "result",
         "payload": {"name": "Write", "ok": True, "output": "File created"}}]


def test_an_api_error_at_the_end_is_the_stop_reason(sent):
    output, stop, end = run("error")
    assert stop == "error:api_529"
    assert output == "API Error: 529 overloaded"
    assert end["phase"] == "error" and end["exit_code"] == 1
    assert sent()[1]["payload"] == {"name": "Write", "ok": False, "error": "File created"}


def test_an_agent_that_dies_without_ending_its_run_is_an_error_with_its_exit_code(sent):
    output, stop, end = run("crash")
    assert stop == "error:exit_3"
    assert output == "Writing it."  # the last text it streamed, nothing more
    assert end["detail"] == "no final event"
    assert [e["type"] for e in sent()] == ["call"]  # the call, never a result


def test_each_event_reaches_alk_while_the_agent_still_runs(sent, tmp_path):
    go = tmp_path / "go"
    done = {}
    thread = threading.Thread(target=lambda: done.update(outcome=run("wait", str(go))))
    thread.start()
    try:
        for _ in range(3000):  # the tool call is reported before the agent goes on
            if sent():
                break
            threading.Event().wait(0.01)
        assert [e["type"] for e in sent()] == ["call"]
        assert "outcome" not in done
    finally:
        go.touch()
        thread.join(60)
    assert done["outcome"][1] == "accepted"
    assert [e["type"] for e in sent()] == ["call", "result"]


def test_the_workspace_gets_the_scenarios_files_and_nothing_outside_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    start = SimpleNamespace(input={"files": {"calc.py": "x = 1\n", "protected/o.json": "{}"}})
    coding_cli.seed_workspace(start)
    assert (tmp_path / "calc.py").read_text() == "x = 1\n"
    assert (tmp_path / "protected" / "o.json").read_text() == "{}"
    for path in ("../escape.py", "/tmp/escape.py", "a/../../escape.py"):
        with pytest.raises(ValueError, match="not a path inside the workspace"):
            coding_cli.seed_workspace(SimpleNamespace(input={"files": {path: ""}}))
    assert not (tmp_path.parent / "escape.py").exists()


def test_the_agents_home_is_a_folder_of_the_workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = coding_cli.agent_env({"DISABLE_TELEMETRY": "1"})
    assert env["HOME"] == str(tmp_path / coding_cli.HOME)
    assert (tmp_path / coding_cli.HOME).is_dir()
    assert env["DISABLE_TELEMETRY"] == "1"
