"""alk worker for Pydantic AI: the framework's own agent loop, tool dispatch and retries, driven
offline by a scripted model plugged in through its FunctionModel.

The scenario's `script` holds the model's turns: `{tool, args}` (a tool call), `{tool, raw}`
(a tool call whose arguments are malformed JSON) or `{text}` (the final answer). A turn asked
past the script is reported to alk (`script_exhausted`) and answered "(script exhausted)". Its
`faults` are injected where they say: `before_model` (the n-th model call raises ModelHTTPError
with the fault's `error` as status, e.g. 429) or `tool` (the n-th tool call raises). Whatever
run_sync raises ends the run with stop_reason `error:<ExceptionType>`: what the framework did
with a fault is the finding, and the lane's expectations say what a robust run would have done.

Tools act on the workspace like the reference lane's: `lookup_order`, `write_report` (appends
an effect to lab-output/effects.json, with no idempotency key: Pydantic AI keeps no durable run
state, so a resumed run starts over) and `delete_records`, which the policy below denies
whatever the model proposes.
"""

from importlib.metadata import version

from alk import worker
from lab_tools import Faults, report_run, run_tool

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.exceptions import ModelHTTPError  # noqa: E402
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import FunctionModel  # noqa: E402


def scripted_model(script, faults):
    turns = iter(enumerate(script))
    asked = 0

    def respond(messages, info):
        nonlocal asked
        fault = faults.due("before_model")
        if fault is not None:
            raise ModelHTTPError(status_code=int(fault.get("error") or 500),
                                 model_name="scripted", body="injected by alk")
        asked += 1
        index, turn = next(turns, (None, {"text": "(script exhausted)"}))
        if index is not None:
            worker.emit("model", "turn", {"index": index})
        else:
            worker.script_exhausted(asked, len(script))
        if "tool" in turn:
            args = turn.get("raw", turn.get("args", {}))
            return ModelResponse(parts=[ToolCallPart(turn["tool"], args,
                                                     tool_call_id=f"call-{index}")])
        return ModelResponse(parts=[TextPart(turn.get("text", ""))])

    return FunctionModel(respond)


def build_agent(start, faults):
    agent = Agent(scripted_model(start.script, faults), retries=2)

    @agent.tool_plain
    def lookup_order(order: str) -> dict:
        return run_tool("lookup_order", {"order": order}, faults)

    @agent.tool_plain
    def write_report(order: str) -> dict:
        return run_tool("write_report", {"order": order}, faults)

    @agent.tool_plain
    def delete_records(order: str) -> str:
        return run_tool("delete_records", {"order": order}, faults)

    return agent


def main():
    worker.ready("pydantic-ai", version("pydantic-ai-slim"),
                 worker.package_paths("pydantic-ai-slim", "pydantic-graph"))
    start = worker.start()
    faults = Faults(start.faults)
    report_run(lambda: build_agent(start, faults).run_sync(start.task).output)


main()
