"""alk worker for LlamaIndex: its FunctionAgent (the agent workflow, tool dispatch and error
handling) with the framework's ordinary OpenAI-compatible model, `OpenAILike` (the OpenAI LLM
without its checks of known model names), pointed at the model alk serves.

alk's gateway plays the scenario's `script` over the OpenAI Chat Completions API (streamed: a
FunctionAgent streams by default), injects the scenario's `wire_faults` and records every call:
the worker neither scripts nor reports the model. The model keeps its defaults (the openai
client's retries under LlamaIndex's own retry decorator, and their timeouts), so what it does
with a fault on the wire is what an application built the ordinary way gets. Worker-side faults
are the tools' only (`tool`: the n-th tool call raises). A run that reaches its iteration bound
ends with the WorkflowRuntimeError LlamaIndex raises; whatever the run raises ends it with
stop_reason `error:<ExceptionType>`.

Tools act on the workspace like the reference lane's: `lookup_order`, `write_report` (appends
an effect to lab-output/effects.json, with no idempotency key: the agent keeps no durable run
state here, so a resumed run starts over) and `delete_records`, which the policy in lab_tools
denies whatever the model proposes.

It runs in a virtual environment of its own (the lane's command): llama-index-llms-openai
requires openai<3, which the other frameworks' environment cannot hold.

With `mcp` on the command line (lanes/llamaindex-mcp.toml) the tools are alk's, over MCP:
LlamaIndex's own client (llama-index-tools-mcp: `BasicMCPClient` under `McpToolSpec`, as its
guide shows), at the start message's `tools` URL with its headers, its defaults kept (a new
session for every call, a 30 s read timeout, no retries), and no tool of the worker's.
"""

import asyncio
import sys
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, model_endpoint, report_run, run_tool

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402

MAX_ITERATIONS = 8  # the scripts need 3 or 4; a loop ends here, not at the worker's timeout

TOOLS = {"lookup_order": "Look up an order.",
         "write_report": "Write the order's report (the side effect).",
         "delete_records": "Delete the order's records."}


def lab_tool(name, faults):
    """One of lab_tools' tools as a LlamaIndex FunctionTool; its schema comes from `call`."""

    def call(order: str):
        return run_tool(name, {"order": order}, faults)

    return FunctionTool.from_defaults(fn=call, name=name, description=TOOLS[name])


def model(start):
    name, base_url, api_key = model_endpoint(start)
    # OpenAILike assumes neither chat nor tool calling of an unknown model: both are said here.
    return OpenAILike(model=name, api_base=base_url, api_key=api_key, is_chat_model=True,
                      is_function_calling_model=True)


def run_agent(start, faults):
    agent = FunctionAgent(tools=[lab_tool(tool, faults) for tool in TOOLS], llm=model(start))

    async def run():
        return await agent.run(user_msg=start.task, max_iterations=MAX_ITERATIONS)

    return str(asyncio.run(run()))


def run_over_mcp(start):
    """The FunctionAgent with the tools alk serves over MCP, through LlamaIndex's own client."""
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    async def run():
        # Made inside the loop: the client's HTTP client belongs to the loop that uses it.
        client = BasicMCPClient(start.tools["url"], headers=start.tools["headers"])
        tools = await McpToolSpec(client=client).to_tool_list_async()
        agent = FunctionAgent(tools=tools, llm=model(start))
        return await agent.run(user_msg=start.task, max_iterations=MAX_ITERATIONS)

    return str(asyncio.run(run()))


def main():
    worker.ready("llamaindex", version("llama-index-core"),
                 worker.package_paths("llama-index-core", "llama-index-llms-openai",
                                      "llama-index-llms-openai-like", "llama-index-workflows",
                                      "openai", "llama-index-tools-mcp", "mcp", "mcp-types",
                                      "httpx2"))
    start = worker.start()
    if sys.argv[1:] == ["mcp"]:
        report_run(lambda: run_over_mcp(start))
        return
    faults = Faults(start.faults)
    report_run(lambda: run_agent(start, faults))


main()
