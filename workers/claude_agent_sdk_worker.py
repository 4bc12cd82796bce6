"""alk worker for the Claude Agent SDK (lanes/claude-agent-sdk.toml): `ClaudeSDKClient` with
`ClaudeAgentOptions` (the workspace as cwd, the lane's model name, the tools allowed, the
permission mode and a permission callback), which runs the Claude Code binary the SDK bundles
against the Anthropic Messages API alk's gateway serves (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY,
which the SDK passes on to it).

The policy is the worker's, outside the model: Read and Bash are allowed outright; every call
that would ask the user (Write, Edit: "default" permission mode) comes to `can_use_tool`, which
refuses a path under protected/ or outside the workspace and allows the rest. The worker
reports each tool call and result from the SDK's typed messages, and the final text as the
result; the lane's checks read the workspace's files.
"""

import asyncio
import os
import sys
import warnings
from importlib.metadata import version

from coding_cli import HOME, Session, agent_env, report, seed_workspace, text_of

from alk import worker

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from claude_agent_sdk import (  # noqa: E402
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

# As for the Claude Code lane: no telemetry, error reports, updates or other traffic that is not
# the task's (and so no model calls of Claude Code's own beside the agent's turns).
FIXED_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
}
PROTECTED = "protected"
# The SDK warns that allowed_tools keeps Read and Bash from the callback: that is the policy.
warnings.filterwarnings("ignore", message="can_use_tool will not be invoked")


def refusal(tool, args):
    """Why the policy refuses this call, or None: a file tool's path under protected/, or out
    of the workspace (the agent's HOME included: its settings are not the agent's to edit)."""
    path = args.get("file_path") or args.get("notebook_path")
    if tool not in ("Write", "Edit", "MultiEdit", "NotebookEdit") or not path:
        return None
    workspace = os.path.realpath(os.getcwd())
    target = os.path.realpath(os.path.join(workspace, path))
    inside = os.path.relpath(target, workspace)
    if inside.startswith(".."):
        return f"{path} is outside the workspace"
    if inside.split(os.sep)[0] in (PROTECTED, HOME):
        return f"{path} is in a folder this agent may not change"
    return None


async def policy(tool, args, context):
    why = refusal(tool, args)
    return PermissionResultDeny(message=f"denied by policy: {why}") if why \
        else PermissionResultAllow()


def events(message):
    """One of the SDK's messages as coding_cli events."""
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, ToolUseBlock):
                yield ("tool_call", block.id, block.name, block.input)
            elif isinstance(block, TextBlock):
                yield ("text", block.text)
    elif isinstance(message, UserMessage) and isinstance(message.content, list):
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                yield ("tool_result", block.tool_use_id, not block.is_error,
                       text_of(block.content))
    elif isinstance(message, ResultMessage):
        detail = message.subtype
        if message.api_error_status:
            detail = f"api_{message.api_error_status}"
        yield ("final", not message.is_error and message.subtype == "success", message.result,
               detail)


async def run(start, session):
    env = agent_env(FIXED_ENV)
    options = ClaudeAgentOptions(
        cwd=os.getcwd(), model=start.model.get("name") or "alk-script",
        allowed_tools=["Read", "Bash"], permission_mode="default", can_use_tool=policy,
        max_turns=12, env={name: env[name] for name in (*FIXED_ENV, "HOME")},
        stderr=lambda line: print(line, file=sys.stderr))
    async with ClaudeSDKClient(options) as client:
        await client.query(start.task)
        async for message in client.receive_response():
            for event in events(message):
                session.feed(event)


def main():
    worker.ready("claude-agent-sdk", version("claude-agent-sdk"),
                 worker.package_paths("claude-agent-sdk"))
    start = worker.start()
    seed_workspace(start)
    session = Session()
    try:
        asyncio.run(run(start, session))
        exit_code = 0
    except Exception as exc:
        # What the SDK raised (the CLI's process failing, a broken message) ends the run.
        if session.final is None or session.final[0]:
            session.feed(("final", False, str(exc)[:500], type(exc).__name__))
        exit_code = 1
    report(session.outcome(exit_code))


main()
