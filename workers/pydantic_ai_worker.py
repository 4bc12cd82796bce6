"""alk worker for Pydantic AI: the framework's own agent loop, tool dispatch and retries, with its
ordinary OpenAI model (`OpenAIChatModel` through `OpenAIProvider`) pointed at the model alk serves,
or with the provider the command line names: `anthropic` (`AnthropicModel` through
`AnthropicProvider`, the anthropic client underneath) or `google` (`GoogleModel` through
`GoogleProvider`, google-genai underneath), each at that family's endpoint of the gateway.

alk's gateway plays the scenario's `script` over the OpenAI Chat Completions API, answers a
call past the script with a final text, injects the scenario's `wire_faults` (429, 500, 503,
a reset, a stall, a truncated or malformed body, broken tool arguments) and records every call:
the worker neither scripts nor reports the model. The provider's client keeps its defaults
(the openai and anthropic packages' retries and timeouts; google-genai's, which retry nothing
unless asked, and Pydantic AI asks nothing of them), so what it does with a fault on the wire is what
an application built the ordinary way gets. Worker-side faults are the tools' only (`tool`: the
n-th tool call raises). Whatever run_sync raises ends the run with stop_reason
`error:<ExceptionType>`: what the framework did with a fault is the finding, and the lane's
expectations say what a robust run would have done.

Tools act on the workspace like the reference lane's: `lookup_order`, `write_report` (appends
an effect to lab-output/effects.json, with no idempotency key: Pydantic AI keeps no durable run
state, so a resumed run starts over) and `delete_records`, which the policy below denies
whatever the model proposes.

With `mcp` on the command line (lanes/pydantic-ai-mcp.toml) the tools are alk's, over MCP:
Pydantic AI's own `MCPToolset` (its MCP client in 2.x, on the FastMCP client), at the start
message's `tools` URL with its headers, its defaults kept (a 5 s init timeout, a 300 s read
timeout, a server's error result turned into a retry prompt, the agent's default retries), the
OpenAI model as in the normal mode, and no tool of the worker's.
"""

import asyncio
import sys
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, family_endpoint, model_endpoint, report_run, run_tool

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from pydantic_ai import Agent  # noqa: E402

MCP = sys.argv[1:] == ["mcp"]
# The MCP mode keeps the normal mode's model: the OpenAI one.
PROVIDER = sys.argv[1] if len(sys.argv) > 1 and not MCP else "openai"
# Each provider's client library, for the paths alk attributes a crash to.
CLIENTS = {"openai": ("openai",), "anthropic": ("anthropic",), "google": ("google-genai",)}
# The provider's modules are imported here, before ready: importing them after start would
# spend the repeat's time on it (seconds on a busy machine), as no other lane does.
if PROVIDER == "anthropic":
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
elif PROVIDER == "google":
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider
else:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
if MCP:  # its MCP client too, for the same reason
    from pydantic_ai.mcp import MCPToolset


def build_model(start):
    """The provider's ordinary model class, pointed at its family's endpoint of the gateway."""
    if PROVIDER == "anthropic":
        name, base_url, api_key = family_endpoint(start, "anthropic")
        return AnthropicModel(name, provider=AnthropicProvider(base_url=base_url,
                                                               api_key=api_key))
    if PROVIDER == "google":
        name, base_url, api_key = family_endpoint(start, "gemini")
        return GoogleModel(name, provider=GoogleProvider(base_url=base_url, api_key=api_key))
    name, base_url, api_key = model_endpoint(start)
    return OpenAIChatModel(name, provider=OpenAIProvider(base_url=base_url, api_key=api_key))


def build_agent(start, faults):
    agent = Agent(build_model(start), retries=2)

    @agent.tool_plain
    def lookup_order(order: str) -> dict:
        """Look up an order."""
        return run_tool("lookup_order", {"order": order}, faults)

    @agent.tool_plain
    def write_report(order: str) -> dict:
        """Write the order's report (the side effect)."""
        return run_tool("write_report", {"order": order}, faults)

    @agent.tool_plain
    def delete_records(order: str) -> str:
        """Delete the order's records."""
        return run_tool("delete_records", {"order": order}, faults)

    return agent


async def run_over_mcp(start):
    """The agent with the tools alk serves over MCP, through Pydantic AI's own MCP client."""
    toolset = MCPToolset(start.tools["url"], headers=start.tools["headers"])
    agent = Agent(build_model(start), toolsets=[toolset])
    # Entered around the run, as the docs advise: one MCP session for the whole run.
    async with agent:
        return (await agent.run(start.task)).output


def main():
    # The MCP client's layers too: fastmcp's client over the SDK and its HTTP client.
    mcp_clients = ("fastmcp-slim", "mcp", "mcp-types", "httpx2") if MCP else ()
    worker.ready("pydantic-ai", version("pydantic-ai-slim"),
                 worker.package_paths("pydantic-ai-slim", "pydantic-graph", *CLIENTS[PROVIDER],
                                      *mcp_clients))
    start = worker.start()
    if MCP:
        report_run(lambda: asyncio.run(run_over_mcp(start)))
        return
    faults = Faults(start.faults)
    report_run(lambda: build_agent(start, faults).run_sync(start.task).output)


main()
