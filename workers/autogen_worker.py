"""alk worker for AutoGen AgentChat: an `AssistantAgent`'s own tool loop and tool dispatch,
talking to the model through AutoGen's ordinary OpenAI client
(`autogen_ext.models.openai.OpenAIChatCompletionClient`, the `openai` SDK's AsyncOpenAI
underneath, non-streamed chat completions, the agent's default), pointed at alk's gateway.

alk serves the model: the environment holds OPENAI_BASE_URL and OPENAI_API_KEY (the attempt's
token), and the start message's `model.name` is the model to ask for. AutoGen only knows
OpenAI's own model names, so the client is told what the gateway's model can do (`model_info`).
The scenario's script and its wire faults live in the gateway, which writes every model call
to the transcript itself; this worker only reports the tool calls, their results and the run's
result. Tool faults (`faults = [{point = "tool", ...}]`) stay here: the n-th tool call raises.
Whatever the agent raises ends the run with stop_reason `error:<ExceptionType>`: what the
framework's stack did with a fault is the finding. Runtime tracing is off.

With `mcp` on the command line (lanes/autogen-mcp.toml) the tools are alk's, over MCP: AutoGen's
own `McpWorkbench` (autogen_ext.tools.mcp, the way AssistantAgent's documentation attaches an MCP
server), with `StreamableHttpServerParams` at the start message's `tools` URL and headers, its
defaults kept (a 30 s HTTP timeout, a 300 s read timeout for the session and for the response, no
retries), and no tool of the worker's.
"""

import asyncio
import os
import sys
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, model_endpoint, report_run, run_tool

worker.hello()
os.environ["AUTOGEN_DISABLE_RUNTIME_TRACING"] = "true"
# Imported after hello(): a framework that prints on import cannot break the protocol.
from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_agentchat.messages import TextMessage  # noqa: E402
from autogen_core.models import ModelFamily  # noqa: E402
from autogen_ext.models.openai import OpenAIChatCompletionClient  # noqa: E402

# The agent's bound: tool-call rounds (each a model call and its tools) before it gives up.
MAX_TOOL_ITERATIONS = 10
# What the gateway's model can do: call tools, nothing else AutoGen asks about.
MODEL_INFO = {"vision": False, "function_calling": True, "json_output": False,
              "structured_output": False, "family": ModelFamily.UNKNOWN}


class StepLimitReached(Exception):
    """The agent was still calling tools after MAX_TOOL_ITERATIONS rounds."""


def build_agent(start, faults):
    def lookup_order(order: str) -> dict:
        """Look up an order."""
        return run_tool("lookup_order", {"order": order}, faults)

    def write_report(order: str) -> dict:
        """Write the order's report (the side effect)."""
        return run_tool("write_report", {"order": order}, faults)

    def delete_records(order: str) -> str:
        """Delete the order's records."""
        return run_tool("delete_records", {"order": order}, faults)

    name, base_url, api_key = model_endpoint(start)
    client = OpenAIChatCompletionClient(model=name, base_url=base_url, api_key=api_key,
                                        model_info=MODEL_INFO)
    return AssistantAgent("alk", model_client=client, system_message="Follow the task.",
                          tools=[lookup_order, write_report, delete_records],
                          max_tool_iterations=MAX_TOOL_ITERATIONS)


def final_answer(result):
    final = result.messages[-1]
    if not isinstance(final, TextMessage):
        # A tool-call summary: the agent stopped on its bound, not on the model's answer.
        raise StepLimitReached(f"no answer after {MAX_TOOL_ITERATIONS} tool rounds: "
                               f"{type(final).__name__}")
    return final.content


async def run(start, faults):
    return final_answer(await build_agent(start, faults).run(task=start.task))


async def run_over_mcp(start):
    """The agent with the tools alk serves over MCP, through AutoGen's own MCP workbench."""
    # Imported here: the normal lane's environment may have no MCP client (or an mcp it
    # cannot import).
    from autogen_ext.tools.mcp import McpWorkbench, StreamableHttpServerParams

    name, base_url, api_key = model_endpoint(start)
    client = OpenAIChatCompletionClient(model=name, base_url=base_url, api_key=api_key,
                                        model_info=MODEL_INFO)
    params = StreamableHttpServerParams(url=start.tools["url"], headers=start.tools["headers"])
    # A workbench, not mcp_server_tools(): the agent's documented way, and one session for the
    # run rather than a new one per call.
    async with McpWorkbench(server_params=params) as workbench:
        agent = AssistantAgent("alk", model_client=client, system_message="Follow the task.",
                               workbench=workbench, max_tool_iterations=MAX_TOOL_ITERATIONS)
        return final_answer(await agent.run(task=start.task))


def main():
    worker.ready("autogen-agentchat", version("autogen-agentchat"),
                 worker.package_paths("autogen-agentchat", "autogen-core", "autogen-ext",
                                      "openai", "mcp"))
    start = worker.start()
    if sys.argv[1:] == ["mcp"]:
        report_run(lambda: asyncio.run(run_over_mcp(start)))
        return
    faults = Faults(start.faults)
    report_run(lambda: asyncio.run(run(start, faults)))


main()
