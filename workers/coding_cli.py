"""What the coding-agent workers share (standard library and the alk SDK only): seeding the
workspace with the scenario's files, the agent's own HOME, running the agent's command line as
the worker's subprocess, and turning its JSON event stream into alk's tool events and result.

A coding agent (Claude Code, Codex, Gemini CLI) is a program of its own: the worker starts it
in the workspace, reads one JSON object a line from its stdout, and each worker's `parse`
function maps one object to the events below. Its stderr is the worker's, which alk keeps. The
harness judges the run from the workspace's files and the calls its gateway served, never from
what the agent says it did: the final text is the result's output, nothing more.

Events a `parse` function yields, as tuples:
    ("tool_call", id, name, args)      the agent called a tool (id: the agent's own call id)
    ("tool_result", id, ok, output)    that call's result (output: text, or the error's)
    ("text", text)                     the model's text (the last one is the answer, unless…)
    ("final", ok, text, detail)        the agent's own end of run: ok or not, its answer, why
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from alk import worker

HOME = ".agent-home"  # the agent's HOME, inside the workspace: its config and state go there
OUTPUT_CHARS = 2000   # a tool's output is cut to this in the events alk records


def seed_workspace(start):
    """Writes the scenario's `input.files` ({relative path: text}) into the workspace, the
    files the task is about (a failing test, a file the policy protects)."""
    for path, text in (start.input.get("files") or {}).items():
        if os.path.isabs(path) or ".." in path.split("/"):
            raise ValueError(f"input.files: {path!r} is not a path inside the workspace")
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)


def agent_env(extra=None):
    """The agent's environment: the worker's own (alk's scrubbed one: the gateway's variables,
    PATH, TMPDIR), HOME a folder of the workspace, and `extra` (the lane's fixed settings)."""
    home = os.path.join(os.getcwd(), HOME)
    os.makedirs(home, exist_ok=True)
    return {**os.environ, "HOME": home, **(extra or {})}


def cli_version(binary, word, env=None):
    """The version a CLI prints for `--version`: its `word`-th word (-1: the last), or
    "unknown" when it prints none."""
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60,
                          env=agent_env(env))
    words = done.stdout.split()
    return words[word] if done.returncode == 0 and words else "unknown"


class Session:
    """Reports the agent's events to alk as they come: each tool call and its result (the
    result named after its call's id), and keeps the answer and the agent's own end."""

    def __init__(self):
        self.names, self.texts, self.final = {}, [], None
        self.calls = 0

    def feed(self, event):
        kind = event[0]
        if kind == "tool_call":
            _, call_id, name, args = event
            self.names[call_id] = name
            self.calls += 1
            worker.tool_call(str(name), args if isinstance(args, dict) else {"args": args})
        elif kind == "tool_result":
            _, call_id, ok, output = event
            name = self.names.pop(call_id, "unknown")
            text = output if isinstance(output, str) else json.dumps(output, default=str)
            text = text[:OUTPUT_CHARS]
            if ok:
                worker.tool_result(name, ok=True, output=text)
            else:
                worker.tool_result(name, ok=False, error=text or "failed")
        elif kind == "text":
            if event[1]:
                self.texts.append(event[1])
        elif kind == "final":
            self.final = event[1:]

    def outcome(self, exit_code, noise=0):
        """(output, stop_reason, end_state): accepted when the agent ended its run itself, ok,
        and its process exited 0; `error:...` otherwise, saying which."""
        ok, text, detail = self.final if self.final else (False, None, "no final event")
        answer = text if text else (self.texts[-1] if self.texts else "")
        end = {"phase": "stopped", "exit_code": exit_code, "tool_calls": self.calls}
        if noise:
            end["non_json_lines"] = noise
        if self.final is None:
            stop = f"error:exit_{exit_code}" if exit_code else "error:no_final_event"
        elif not ok:
            stop = f"error:{detail or 'agent_error'}"
        elif exit_code:
            stop = f"error:exit_{exit_code}"
        else:
            stop = "accepted"
        if stop != "accepted":
            end["phase"] = "error"
            end["detail"] = str(detail)[:500]
        return str(answer)[:4000], stop, end


def run_agent(argv, parse, env=None, stdin_text=None):
    """Runs the agent's command (argv, no shell) in the workspace, feeds each JSON line of its
    stdout through `parse` to a Session as it comes, and returns (output, stop_reason,
    end_state) once it exits. A line that is not a JSON object is counted, not parsed."""
    session, noise = Session(), 0
    process = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin_text is not None else
                               subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=sys.stderr,
                               env=env, text=True, bufsize=1)
    if stdin_text is not None:
        process.stdin.write(stdin_text)
        process.stdin.close()
    for line in process.stdout:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            noise += 1
            continue
        for item in parse(event) or ():
            session.feed(item)
    exit_code = process.wait()
    return session.outcome(exit_code, noise)


def report(outcome):
    output, stop, end = outcome
    worker.result(output=output, stop_reason=stop, end_state=end)


def text_of(content):
    """The text of a tool result's content: a string, or a list of text blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) if isinstance(block, dict) else str(block)
                         for block in content)
    return json.dumps(content, default=str)
