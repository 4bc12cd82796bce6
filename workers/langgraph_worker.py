"""alk worker for LangGraph: a StateGraph with a model node and the prebuilt ToolNode, checkpointed
in SQLite in the workspace, so that a resumed run continues from its last checkpoint. The model
node is langchain-openai's ordinary `ChatOpenAI`, bound to the tools and pointed at the model
alk serves; with `anthropic` on the command line, langchain-anthropic's `ChatAnthropic` (the
anthropic client underneath) at the gateway's Anthropic endpoint instead.

alk's gateway plays the scenario's `script` over the OpenAI API, answers a call past the script
with a final text, injects the scenario's `wire_faults` (429, 500, 503, a reset, a stall, a
truncated or malformed body, broken tool arguments) and records every call: the worker neither
scripts nor reports the model. The chat model keeps its defaults (the openai or anthropic
package's retries and timeouts, two retries each; the graph has no retry policy of its own), so what it does with a fault on the wire is
what an application built the ordinary way gets. Worker-side faults are the tools' only
(`tool`: the n-th tool call raises). Whatever the graph raises ends the run with stop_reason
`error:<ExceptionType>`: what the framework did with a fault is the finding.

With `mcp` on the command line (lanes/langgraph-mcp.toml) the tools are alk's, over MCP: the
same graph, its ToolNode given the tools of langchain-mcp-adapters' `MultiServerMCPClient` at
the start message's `tools` URL with its headers, and no tool of the worker's. The client is
used as its documentation shows first (`get_tools()`: a new MCP session for each call) with its
defaults kept (a 30 s HTTP timeout with a 300 s read timeout, no session timeout, no retries;
an error result goes back to the model). Its tools are async only, so the graph runs async,
checkpointed by the SQLite saver's async variant.
"""

import asyncio
import sqlite3
import sys
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, family_endpoint, model_endpoint, report_run, run_tool

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from langchain_core.messages import HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

MCP = sys.argv[1:] == ["mcp"]
# `mcp` keeps the OpenAI model path: only the tools change.
PROVIDER = sys.argv[1] if len(sys.argv) > 1 and not MCP else "openai"
# The chat model's integration and client, for the paths alk attributes a crash to.
CLIENTS = {"openai": ("langchain-openai", "openai"),
           "anthropic": ("langchain-anthropic", "anthropic")}
# Imported before ready, as the framework is: not on the repeat's time.
if PROVIDER == "anthropic":
    from langchain_anthropic import ChatAnthropic
else:
    from langchain_openai import ChatOpenAI
if MCP:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver


def chat_model(start):
    """The provider's ordinary LangChain chat model, at its family's endpoint of the gateway."""
    if PROVIDER == "anthropic":
        name, base_url, api_key = family_endpoint(start, "anthropic")
        return ChatAnthropic(model=name, base_url=base_url, api_key=api_key)
    name, base_url, api_key = model_endpoint(start)
    return ChatOpenAI(model=name, base_url=base_url, api_key=api_key)


def build_graph(start, faults, checkpointer):
    @tool
    def lookup_order(order: str) -> dict:
        """Look up an order."""
        return run_tool("lookup_order", {"order": order}, faults)

    @tool
    def write_report(order: str) -> dict:
        """Write the order's report (the side effect)."""
        return run_tool("write_report", {"order": order}, faults)

    @tool
    def delete_records(order: str) -> str:
        """Delete the order's records."""
        return run_tool("delete_records", {"order": order}, faults)

    return compile_graph(start, [lookup_order, write_report, delete_records], checkpointer)


def compile_graph(start, tools, checkpointer):
    """The graph both modes run: the model node, bound to `tools`, and the prebuilt ToolNode."""
    llm = chat_model(start).bind_tools(tools)

    def model(state: MessagesState):
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=checkpointer)


CONFIG = {"configurable": {"thread_id": "repeat"}, "recursion_limit": 25}


async def run_over_mcp(start):
    """The graph with the tools alk serves over MCP, through langchain-mcp-adapters' client."""
    client = MultiServerMCPClient({"alk-tools": {"transport": "streamable_http",
                                                 "url": start.tools["url"],
                                                 "headers": start.tools["headers"]}})
    tools = await client.get_tools()
    async with AsyncSqliteSaver.from_conn_string("checkpoints.sqlite") as checkpointer:
        graph = compile_graph(start, tools, checkpointer)
        pending = start.resume and (await graph.aget_state(CONFIG)).next
        # On resume, continue from the last checkpoint; otherwise start the task.
        state = await graph.ainvoke(None if pending else {"messages": [HumanMessage(start.task)]},
                                    CONFIG)
        return state["messages"][-1].content


def main():
    mcp = ("langchain-mcp-adapters", "mcp", "aiosqlite") if MCP else ()
    worker.ready("langgraph", version("langgraph"),
                 worker.package_paths("langgraph", "langgraph-prebuilt", "langgraph-checkpoint",
                                      "langgraph-checkpoint-sqlite", "langchain-core",
                                      *CLIENTS[PROVIDER], *mcp))
    start = worker.start()
    if MCP:
        report_run(lambda: asyncio.run(run_over_mcp(start)))
        return
    connection = sqlite3.connect("checkpoints.sqlite", check_same_thread=False)
    graph = build_graph(start, Faults(start.faults), SqliteSaver(connection))

    def run():
        pending = start.resume and graph.get_state(CONFIG).next
        # On resume, continue from the last checkpoint; otherwise start the task.
        state = graph.invoke(None if pending else {"messages": [HumanMessage(start.task)]},
                             CONFIG)
        return state["messages"][-1].content

    report_run(run)


main()
