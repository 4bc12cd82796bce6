"""alk worker for LangGraph: a StateGraph with a model node and the prebuilt ToolNode, checkpointed
in SQLite in the workspace, so that a resumed run continues from its last checkpoint.

The model node plays the scenario's `script`: `{tool, args}` becomes an AIMessage with a tool
call, `{tool, raw}` one whose call has malformed JSON arguments (an invalid tool call, as a
chat model parser leaves it), `{text}` the final answer; a turn asked past the script is
reported to alk (`script_exhausted`) and answered with an empty final answer. Faults:
`before_model` (the n-th model call raises, as a provider's 429 would) and `tool` (the n-th tool
call raises). Whatever the graph raises ends the run with stop_reason `error:<ExceptionType>`:
what the framework did with a fault is the finding.
"""

import sqlite3
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, RateLimited, report_run, run_tool

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

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

    def model(state: MessagesState):
        if faults.due("before_model") is not None:
            raise RateLimited("429 Too Many Requests (injected by alk)")
        # Turns already answered are in the (checkpointed) state: a resumed run continues.
        index = sum(1 for message in state["messages"] if isinstance(message, AIMessage))
        turn = start.script[index] if index < len(start.script) else {"text": ""}
        if index < len(start.script):
            worker.emit("model", "turn", {"index": index})
        else:
            worker.script_exhausted(index + 1, len(start.script))
        if "raw" in turn:
            call = {"name": turn["tool"], "args": turn["raw"], "id": f"call-{index}",
                    "error": "malformed JSON arguments", "type": "invalid_tool_call"}
            return {"messages": [AIMessage(content="", invalid_tool_calls=[call],
                                           id=f"ai-{index}")]}
        if "tool" in turn:
            call = {"name": turn["tool"], "args": turn.get("args", {}), "id": f"call-{index}",
                    "type": "tool_call"}
            return {"messages": [AIMessage(content="", tool_calls=[call], id=f"ai-{index}")]}
        return {"messages": [AIMessage(content=turn.get("text", ""), id=f"ai-{index}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([lookup_order, write_report, delete_records]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=checkpointer)


def main():
    worker.ready("langgraph", version("langgraph"),
                 worker.package_paths("langgraph", "langgraph-prebuilt", "langgraph-checkpoint",
                                      "langgraph-checkpoint-sqlite", "langchain-core"))
    start = worker.start()
    connection = sqlite3.connect("checkpoints.sqlite", check_same_thread=False)
    graph = build_graph(start, Faults(start.faults), SqliteSaver(connection))
    config = {"configurable": {"thread_id": "repeat"}, "recursion_limit": 25}

    def run():
        pending = start.resume and graph.get_state(config).next
        # On resume, continue from the last checkpoint; otherwise start the task.
        state = graph.invoke(None if pending else {"messages": [HumanMessage(start.task)]},
                             config)
        return state["messages"][-1].content

    report_run(run)


main()
