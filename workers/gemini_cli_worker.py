"""alk worker for Google's Gemini CLI run non-interactively: `gemini -p TASK -m MODEL
--output-format stream-json --yolo`, the npm package installed under .tools/gemini, against the
Gemini API alk's gateway serves (GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY).

Gemini CLI's own agent loop, tools (write_file, replace, read_file, run_shell_command…), policy
engine, the google-genai client and Gemini CLI's retries run; the gateway plays the scenario's
script in Gemini CLI's tool names and injects its wire faults. The worker reports each tool
call and result Gemini CLI streams, and its final text as the result; the lane's checks read
the workspace's files.
"""

import json
import os
import sys

from coding_cli import agent_env, report, run_agent, seed_workspace

from alk import worker

worker.hello()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEMINI = os.path.join(ROOT, ".tools", "gemini", "node_modules", ".bin", "gemini")
PACKAGE = os.path.join(ROOT, ".tools", "gemini", "node_modules", "@google", "gemini-cli")
# Gemini CLI's settings for a run against the gateway. The API key's auth: with
# GOOGLE_GEMINI_BASE_URL set and no auth chosen, it picks a "gateway" auth that its
# non-interactive check refuses. No usage statistics, telemetry or update checks: nothing but
# the task's model calls.
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}
# The lane's policy, in Gemini CLI's own policy engine (a user policy file in its HOME): its
# file tools may not write under protected/, whatever --yolo approves.
POLICY = """[[rule]]
toolName = ["write_file", "replace"]
argsPattern = '"file_path":"(\\\\./)?protected/'
decision = "deny"
priority = 900
denyMessage = "protected/ is not the agent's to change"
"""
# Fixed variables: trust the workspace folder (headless runs of an untrusted folder are
# refused), and no relaunch of node in a child process with a larger heap.
FIXED_ENV = {"GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_CLI_NO_RELAUNCH": "true"}


def gemini_version():
    with open(os.path.join(PACKAGE, "package.json")) as handle:
        return json.load(handle)["version"]


class Parser:
    """Gemini CLI's `--output-format stream-json` lines as coding_cli events. The model's text
    comes in pieces (`"delta": true`): they are joined into one text, ended by a tool call or
    the run's end."""

    def __init__(self):
        self.pieces = []

    def flush(self):
        text, self.pieces = "".join(self.pieces), []
        return [("text", text)] if text else []

    def __call__(self, event):
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            if not event.get("delta"):
                self.flush()
            self.pieces.append(event.get("content") or "")
            return []
        if kind == "tool_use":
            return self.flush() + [("tool_call", event.get("tool_id"), event.get("tool_name"),
                                    event.get("parameters"))]
        if kind == "tool_result":
            ok = event.get("status") == "success"
            error = event.get("error")
            if isinstance(error, dict):
                error = error.get("message")
            output = event.get("output") if ok else error or event.get("output")
            return [("tool_result", event.get("tool_id"), ok, output or "")]
        if kind == "result":
            ok = event.get("status") == "success"
            error = event.get("error") or {}
            return self.flush() + [("final", ok, None,
                                    None if ok else str(error.get("message"))[:300])]
        return []


def main():
    worker.ready("gemini-cli", gemini_version(), [PACKAGE])
    start = worker.start()
    seed_workspace(start)
    env = agent_env(FIXED_ENV)
    config = os.path.join(env["HOME"], ".gemini")
    os.makedirs(os.path.join(config, "policies"), exist_ok=True)
    with open(os.path.join(config, "settings.json"), "w") as handle:
        json.dump(SETTINGS, handle)
    with open(os.path.join(config, "policies", "protected.toml"), "w") as handle:
        handle.write(POLICY)
    argv = [GEMINI, "-p", start.task, "-m", start.model.get("name") or "alk-script",
            "--output-format", "stream-json", "--yolo"]
    report(run_agent(argv, Parser(), env=env))


if __name__ == "__main__":
    main()
    sys.exit(0)
