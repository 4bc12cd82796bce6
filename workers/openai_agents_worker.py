"""alk worker for the OpenAI Agents SDK: its real Runner loop and tool dispatch, with the SDK's
default model path (the Responses API through its default OpenAI client), that client pointed at
the model alk serves.

alk's gateway plays the scenario's `script` over the Responses API, answers a call past the
script with a final text, injects the scenario's `wire_faults` (429, 500, 503, a reset, a stall,
a truncated or malformed body, broken tool arguments) and records every call: the worker neither
scripts nor reports the model. The client keeps the openai package's defaults (retries,
timeouts), so what the SDK does with a fault on the wire is what an application built the
ordinary way gets. Worker-side faults are the tools' only (`tool`: the n-th tool call raises).
Whatever the Runner raises ends the run with stop_reason `error:<ExceptionType>`: what the
framework did with a fault is the finding. Tracing is off: nothing may try the network.

With `mcp` on the command line (lanes/openai-agents-mcp.toml) the tools are alk's, over MCP:
the SDK's own `MCPServerStreamableHttp` client, at the start message's `tools` URL with its
headers, its defaults kept (a 5 s session timeout, no retries), and no tool of the worker's.
"""

import asyncio
import sys
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, model_endpoint, report_run, run_tool

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from agents import (  # noqa: E402
    Agent,
    RunConfig,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI  # noqa: E402

set_tracing_disabled(True)


def build_agent(start, faults):
    @function_tool
    def lookup_order(order: str) -> dict:
        """Look up an order."""
        return run_tool("lookup_order", {"order": order}, faults)

    @function_tool
    def write_report(order: str) -> dict:
        """Write the order's report (the side effect)."""
        return run_tool("write_report", {"order": order}, faults)

    @function_tool
    def delete_records(order: str) -> str:
        """Delete the order's records."""
        return run_tool("delete_records", {"order": order}, faults)

    name, base_url, api_key = model_endpoint(start)
    set_default_openai_client(AsyncOpenAI(base_url=base_url, api_key=api_key),
                              use_for_tracing=False)
    return Agent(name="alk", instructions="Follow the task.", model=name,
                 tools=[lookup_order, write_report, delete_records])


async def run_over_mcp(start):
    """The Runner with the tools alk serves over MCP, through the SDK's own MCP client."""
    from agents.mcp import MCPServerStreamableHttp

    name, base_url, api_key = model_endpoint(start)
    set_default_openai_client(AsyncOpenAI(base_url=base_url, api_key=api_key),
                              use_for_tracing=False)
    params = {"url": start.tools["url"], "headers": start.tools["headers"]}
    async with MCPServerStreamableHttp(params, name="alk-tools") as server:
        agent = Agent(name="alk", instructions="Follow the task.", model=name,
                      mcp_servers=[server])
        result = await Runner.run(agent, start.task, max_turns=12,
                                  run_config=RunConfig(tracing_disabled=True))
        return result.final_output


def main():
    worker.ready("openai-agents", version("openai-agents"),
                 worker.package_paths("openai-agents", "openai", "mcp"))
    start = worker.start()
    if sys.argv[1:] == ["mcp"]:
        report_run(lambda: asyncio.run(run_over_mcp(start)))
        return
    faults = Faults(start.faults)
    report_run(lambda: Runner.run_sync(build_agent(start, faults), start.task, max_turns=12,
                                       run_config=RunConfig(tracing_disabled=True)).final_output)


main()
