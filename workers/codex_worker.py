"""alk worker for OpenAI's Codex CLI run non-interactively: `codex exec --json TASK`, the npm
package installed under .tools/codex, against the OpenAI Responses API alk's gateway serves.

Codex's own agent loop, tools (`exec_command` runs a shell command; a command that is an
`apply_patch` heredoc is taken by Codex and applied as a patch), HTTP client, retries and
stream reconnects run. Its model provider is one of its config's `model_providers`, pointed at
OPENAI_BASE_URL with the key read from OPENAI_API_KEY; its own sandbox and approvals are off,
since alk's sandbox is the boundary. The worker reports each item Codex streams (a command, a
patch) as a tool call and its result, and the last agent message as the result's output; the
lane's checks read the workspace's files.
"""

import os
import stat
import sys

from coding_cli import agent_env, cli_version, report, run_agent, seed_workspace

from alk import worker

worker.hello()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODEX = os.path.join(ROOT, ".tools", "codex", "node_modules", ".bin", "codex")
PACKAGE = os.path.join(ROOT, ".tools", "codex", "node_modules", "@openai")
# Codex's fixed settings for a run against the gateway. No update check, no analytics or
# feedback upload, no web search tool (the run has no network but the gateway): nothing but
# the task's model calls. Retries are Codex's defaults, what a user gets.
CONFIG = """model = "{model}"
model_provider = "alk"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
web_search = "disabled"

[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"

[model_providers.alk]
name = "alk gateway"
base_url = "{base_url}"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
"""
# The lane's policy for files under protected/: read-only to the agent's process (the sandbox
# runs it as an unprivileged user, so the mode binds). Codex's own sandbox, which could deny
# writes by path, is off: it needs namespaces of its own inside alk's.
PROTECTED = "protected"


def protect():
    for folder, _, files in os.walk(PROTECTED, topdown=False):
        for name in files:
            os.chmod(os.path.join(folder, name), stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP
                 | stat.S_IROTH | stat.S_IXOTH)


def parse(event):
    """One `codex exec --json` line as coding_cli events."""
    kind = event.get("type")
    item = event.get("item") or {}
    itype = item.get("type")
    if kind == "item.started" and itype == "command_execution":
        yield ("tool_call", item.get("id"), "exec_command", {"cmd": item.get("command")})
    elif kind == "item.completed" and itype == "command_execution":
        ok = item.get("status") == "completed" and item.get("exit_code") == 0
        yield ("tool_result", item.get("id"), ok, item.get("aggregated_output") or "")
    elif kind == "item.completed" and itype == "file_change":
        # A patch is reported once, done or refused: its call and its result together.
        changes = [{"path": os.path.relpath(c["path"]) if os.path.isabs(c.get("path") or "")
                    else c.get("path"), "kind": c.get("kind")} for c in item.get("changes") or ()]
        yield ("tool_call", item.get("id"), "apply_patch", {"changes": changes})
        yield ("tool_result", item.get("id"), item.get("status") == "completed",
               item.get("status") or "")
    elif kind == "item.completed" and itype == "agent_message":
        yield ("text", item.get("text"))
    elif kind == "turn.completed":
        yield ("final", True, None, None)
    elif kind == "turn.failed":
        yield ("final", False, None, "turn_failed: " + str((event.get("error") or {})
                                                          .get("message"))[:300])


def main():
    worker.ready("codex", cli_version(CODEX, -1), [PACKAGE])
    start = worker.start()
    seed_workspace(start)
    protect()
    env = agent_env()
    env["CODEX_HOME"] = os.path.join(env["HOME"], ".codex")
    os.makedirs(env["CODEX_HOME"], exist_ok=True)
    model = start.model.get("name") or "alk-script"
    base_url = (start.model.get("base_urls") or {}).get("openai") or env["OPENAI_BASE_URL"]
    with open(os.path.join(env["CODEX_HOME"], "config.toml"), "w") as handle:
        handle.write(CONFIG.format(model=model, base_url=base_url))
    argv = [CODEX, "exec", "--json", "--skip-git-repo-check", "--ephemeral",
            "--dangerously-bypass-approvals-and-sandbox", "-m", model, start.task]
    report(run_agent(argv, parse, env=env))


if __name__ == "__main__":
    main()
    sys.exit(0)
