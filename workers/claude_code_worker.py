"""alk worker for the Claude Code CLI run non-interactively: `claude -p TASK --output-format
stream-json --verbose`, the binary the Claude Agent SDK bundles (in .venvs/claude), against the
Anthropic Messages API alk's gateway serves (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY).

Claude Code's own agent loop, tools (Write, Edit, Read, Bash…), permission checks, HTTP client
and retries run; the gateway plays the scenario's script in Claude Code's tool names and
injects its wire faults. The worker reports each tool call and result Claude Code streams, and
its final text as the result; the lane's checks read the workspace's files.
"""

import os
import sys

from coding_cli import agent_env, cli_version, report, run_agent, seed_workspace, text_of

from alk import worker

# Written into the agent's HOME before each run: files under protected/ are not the agent's
# to change (Edit rules cover every built-in tool that edits files, Write included).
SETTINGS = '{"permissions": {"deny": ["Edit(./protected/**)"]}}'
# Claude Code's fixed settings for a run against the gateway: no telemetry, error reports,
# auto-updates or other traffic that is not the task's, and no extra model calls of its own.
FIXED_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1", "IS_SANDBOX": "1",
}


def claude_binary():
    """The Claude Code binary the SDK ships (the package's _bundled/claude)."""
    import claude_agent_sdk
    return os.path.join(os.path.dirname(claude_agent_sdk.__file__), "_bundled", "claude")


def parse(event):
    """One stream-json line of Claude Code as coding_cli events."""
    kind = event.get("type")
    message = event.get("message") or {}
    if kind == "assistant":
        for block in message.get("content") or ():
            if block.get("type") == "tool_use":
                yield ("tool_call", block.get("id"), block.get("name"), block.get("input"))
            elif block.get("type") == "text":
                yield ("text", block.get("text"))
    elif kind == "user":
        for block in message.get("content") or ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                yield ("tool_result", block.get("tool_use_id"), not block.get("is_error"),
                       text_of(block.get("content")))
    elif kind == "result":
        ok = not event.get("is_error") and event.get("subtype") == "success"
        detail = event.get("subtype")
        if event.get("api_error_status"):
            detail = f"api_{event['api_error_status']}"
        yield ("final", ok, event.get("result"), detail)


def main():
    worker.hello()
    binary = claude_binary()
    worker.ready("claude-code", cli_version(binary, 0, FIXED_ENV), [os.path.dirname(binary)])
    start = worker.start()
    seed_workspace(start)
    env = agent_env(FIXED_ENV)
    os.makedirs(os.path.join(env["HOME"], ".claude"), exist_ok=True)
    with open(os.path.join(env["HOME"], ".claude", "settings.json"), "w") as handle:
        handle.write(SETTINGS)
    argv = [binary, "-p", start.task, "--output-format", "stream-json", "--verbose",
            "--model", start.model.get("name") or "alk-script",
            "--permission-mode", "acceptEdits", "--allowedTools", "Bash,Read,Write,Edit",
            "--max-turns", "12"]
    report(run_agent(argv, parse, env=env))


if __name__ == "__main__":
    main()
    sys.exit(0)
