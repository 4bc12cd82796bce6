"""alk worker for smolagents: its ToolCallingAgent (the agent loop, tool dispatch and error
handling) with the framework's ordinary OpenAI model, `OpenAIServerModel`, pointed at the model
alk serves.

alk's gateway plays the scenario's `script` over the OpenAI Chat Completions API, injects the
scenario's `wire_faults` and records every call: the worker neither scripts nor reports the
model. The model keeps its defaults (the openai client's own retries and timeouts under
smolagents' retry of rate limits), so what it does with a fault on the wire is what an
application built the ordinary way gets. A ToolCallingAgent ends a run only when the model calls
its built-in `final_answer` tool, so the lane's scripts end with that call, as a real model
prompted by smolagents does. Worker-side faults are the tools' only (`tool`: the n-th tool call
raises). A run that reaches its step bound without a final answer ends with stop_reason
`error:AgentMaxStepsError`; whatever `run` raises ends it with `error:<ExceptionType>`.

Tools act on the workspace like the reference lane's: `lookup_order`, `write_report` (appends
an effect to lab-output/effects.json, with no idempotency key: smolagents keeps no durable run
state, so a resumed run starts over) and `delete_records`, which the policy in lab_tools denies
whatever the model proposes.

With `mcp` on the command line (lanes/smolagents-mcp.toml) the tools are alk's, over MCP:
smolagents' own `MCPClient` (mcpadapt underneath, on the official `mcp` client), given the start
message's `tools` URL and headers over streamable HTTP, its defaults kept (no retries; a 5 s
session timeout that mcpadapt drops, leaving the transport's 300 s read), and no tool of the
worker's. mcpadapt 0.1.19 imports names mcp 2.x no longer has, so that mode runs from a virtual
environment of its own beside mcp 1.x (the lane's command).
"""

import sys
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, model_endpoint, report_run, run_tool

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from smolagents import OpenAIServerModel, Tool, ToolCallingAgent  # noqa: E402
from smolagents.monitoring import LogLevel  # noqa: E402
from smolagents.utils import AgentMaxStepsError  # noqa: E402

MAX_STEPS = 8  # the scripts need 3 or 4; a loop ends here, not at the worker's timeout

TOOLS = {"lookup_order": "Look up an order.",
         "write_report": "Write the order's report (the side effect).",
         "delete_records": "Delete the order's records."}


class LabTool(Tool):
    """One of lab_tools' tools as a smolagents Tool (a class, so that the three share one
    signature instead of three decorated functions)."""

    inputs = {"order": {"type": "string", "description": "The order's number."}}
    output_type = "object"

    def __init__(self, name, faults):
        self.name, self.description, self.faults = name, TOOLS[name], faults
        super().__init__()

    def forward(self, order: str):
        return run_tool(self.name, {"order": order}, self.faults)


def run_agent(start, tools):
    name, base_url, api_key = model_endpoint(start)
    model = OpenAIServerModel(model_id=name, api_base=base_url, api_key=api_key)
    # ERROR: the step errors smolagents hands back to the model still reach stderr (evidence),
    # without its per-step panels.
    agent = ToolCallingAgent(tools=tools, model=model, max_steps=MAX_STEPS,
                             verbosity_level=LogLevel.ERROR)
    result = agent.run(start.task, return_full_result=True)
    if result.state != "success":
        # smolagents answers from memory once its steps are spent; the run still failed.
        raise AgentMaxStepsError(f"no final answer in {MAX_STEPS} steps; the model's last "
                                 f"word: {str(result.output)[:200]}", agent.logger)
    return result.output


def run_over_mcp(start):
    """The same agent with the tools alk serves over MCP, through smolagents' own MCPClient."""
    from smolagents import MCPClient

    params = {"url": start.tools["url"], "headers": start.tools["headers"],
              "transport": "streamable-http"}
    # The client connects as it is made: a server it cannot reach or speak to fails the run here.
    with MCPClient(params) as tools:
        return run_agent(start, tools)


def main():
    worker.ready("smolagents", version("smolagents"),
                 worker.package_paths("smolagents", "openai", "mcp", "mcpadapt"))
    start = worker.start()
    if sys.argv[1:] == ["mcp"]:
        report_run(lambda: run_over_mcp(start))
        return
    faults = Faults(start.faults)
    report_run(lambda: run_agent(start, [LabTool(tool, faults) for tool in TOOLS]))


main()
