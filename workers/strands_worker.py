"""alk worker for Strands Agents: the framework's own event loop, tool dispatch and retries,
talking to the model through its ordinary OpenAI provider (`strands.models.openai.OpenAIModel`,
the `openai` SDK's AsyncOpenAI underneath, streaming chat completions), pointed at alk's gateway.

alk serves the model: the environment holds OPENAI_BASE_URL and OPENAI_API_KEY (the attempt's
token), and the start message's `model.name` is the model to ask for. The scenario's script and
its wire faults live in the gateway, which writes every model call to the transcript itself;
this worker only reports the tool calls, their results and the run's result. Tool faults
(`faults = [{point = "tool", ...}]`) stay here: the n-th tool call raises. Whatever the agent
raises ends the run with stop_reason `error:<ExceptionType>`: what the framework's stack did
with a fault is the finding.

Strands needs `openai<3` while the project's other frameworks need `openai>=3`, so it runs from
its own environment (`.venvs/strands`, see the lane's `install`). Telemetry stays off: nothing
is exported unless configured, and OTEL_SDK_DISABLED says so to OpenTelemetry too.

With `mcp` on the command line (lanes/strands-mcp.toml) the tools are alk's, over MCP: Strands'
own `MCPClient`, given the start message's `tools` URL and headers (its streamable HTTP transport,
built by Strands on mcp 2.x's HTTP client), its defaults kept (no tool-call timeout of its own,
the HTTP client's 300 s read timeout, no retries), and no tool of the worker's.
"""

import os
import sys
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, model_endpoint, report_run, run_tool

worker.hello()
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
# Imported after hello(): a framework that prints on import cannot break the protocol.
from strands import Agent, tool  # noqa: E402
from strands.hooks import BeforeModelCallEvent, HookProvider  # noqa: E402
from strands.models.openai import OpenAIModel  # noqa: E402

# Strands' loop has no turn limit of its own: past this many model calls the run is cancelled.
MAX_MODEL_CALLS = 12


class StepLimitReached(Exception):
    """The agent asked the model more than MAX_MODEL_CALLS times."""


class StepLimit(HookProvider):
    def __init__(self):
        self.calls = 0

    def register_hooks(self, registry, **kwargs):
        registry.add_callback(BeforeModelCallEvent, self.count)

    def count(self, event):
        self.calls += 1
        if self.calls > MAX_MODEL_CALLS:
            event.cancel = f"stopped after {MAX_MODEL_CALLS} model calls"


def build_agent(start, faults, limit):
    @tool
    def lookup_order(order: str) -> dict:
        """Look up an order.

        Args:
            order: The order number.
        """
        return run_tool("lookup_order", {"order": order}, faults)

    @tool
    def write_report(order: str) -> dict:
        """Write the order's report (the side effect).

        Args:
            order: The order number.
        """
        return run_tool("write_report", {"order": order}, faults)

    @tool
    def delete_records(order: str) -> str:
        """Delete the order's records.

        Args:
            order: The order number.
        """
        return run_tool("delete_records", {"order": order}, faults)

    return Agent(model=build_model(start), tools=[lookup_order, write_report, delete_records],
                 system_prompt="Follow the task.", callback_handler=None, hooks=[limit])


def build_model(start):
    name, base_url, api_key = model_endpoint(start)
    return OpenAIModel(client_args={"base_url": base_url, "api_key": api_key}, model_id=name)


def run(start, faults):
    limit = StepLimit()
    result = build_agent(start, faults, limit)(start.task)
    if limit.calls > MAX_MODEL_CALLS:
        raise StepLimitReached(f"more than {MAX_MODEL_CALLS} model calls")
    return str(result)


def run_over_mcp(start):
    """The agent with the tools alk serves over MCP, through Strands' own MCP client."""
    from strands.tools.mcp import MCPClient

    limit = StepLimit()
    # url and headers, as Strands documents them: it builds the streamable HTTP transport itself
    # (on mcp 2.x, mcp's own HTTP client carrying the headers), so its defaults are the ones kept.
    client = MCPClient(url=start.tools["url"], headers=start.tools["headers"])
    # The client as a tool provider: the agent starts it, lists its tools and stops it on cleanup.
    agent = Agent(model=build_model(start), tools=[client], system_prompt="Follow the task.",
                  callback_handler=None, hooks=[limit])
    try:
        result = agent(start.task)
    finally:
        agent.cleanup()
    if limit.calls > MAX_MODEL_CALLS:
        raise StepLimitReached(f"more than {MAX_MODEL_CALLS} model calls")
    return str(result)


def main():
    worker.ready("strands-agents", version("strands-agents"),
                 worker.package_paths("strands-agents", "openai", "mcp", "mcp-types"))
    start = worker.start()
    if sys.argv[1:] == ["mcp"]:
        report_run(lambda: run_over_mcp(start))
        return
    faults = Faults(start.faults)
    report_run(lambda: run(start, faults))


main()
