"""alk worker for Pydantic AI: the framework's own agent loop, tool dispatch and retries, driven
offline by a scripted model plugged in through its FunctionModel.

The scenario's `script` holds the model's turns: `{tool, args}` (a tool call), `{tool, raw}`
(a tool call whose arguments are malformed JSON) or `{text}` (the final answer). Its `faults`
are injected where they say: `before_model` (the n-th model call raises ModelHTTPError with the
fault's `error` as status, e.g. 429) or `tool` (the n-th tool call raises). Whatever run_sync raises
ends the run with stop_reason `error:<ExceptionType>`: what the framework did with a fault is
the finding, and the lane's expectations say what a robust run would have done.

Tools act on the workspace like the reference lane's: `lookup_order`, `write_report` (appends
an effect to lab-output/effects.json, with no idempotency key: Pydantic AI keeps no durable run
state, so a resumed run starts over) and `delete_records`, which the policy below denies
whatever the model proposes.
"""

import json
import os
from importlib.metadata import version

from alk import worker

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.exceptions import ModelHTTPError  # noqa: E402
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import FunctionModel  # noqa: E402

EFFECTS = os.path.join("lab-output", "effects.json")
ALLOWED_TOOLS = {"lookup_order", "write_report"}  # the policy, outside the model's proposals


class Faults:
    """The scenario's faults, by point and occurrence."""

    def __init__(self, faults):
        self.faults = faults
        self.seen = {}

    def due(self, point):
        """Counts a pass at `point` (every model call, every tool call) and returns the fault
        declared for this occurrence, after reporting it."""
        self.seen[point] = self.seen.get(point, 0) + 1
        for fault in self.faults:
            if fault["point"] == point and fault["occurrence"] == self.seen[point]:
                worker.fault(point, fault["occurrence"], fault.get("error", ""),
                             fault.get("retryable", False))
                return fault
        return None


def scripted_model(script, faults):
    turns = iter(enumerate(script))

    def respond(messages, info):
        fault = faults.due("before_model")
        if fault is not None:
            raise ModelHTTPError(status_code=int(fault.get("error") or 500),
                                 model_name="scripted", body="injected by alk")
        index, turn = next(turns, (None, {"text": "(script exhausted)"}))
        if index is not None:
            worker.emit("model", "turn", {"index": index})
        if "tool" in turn:
            args = turn.get("raw", turn.get("args", {}))
            return ModelResponse(parts=[ToolCallPart(turn["tool"], args,
                                                     tool_call_id=f"call-{index}")])
        return ModelResponse(parts=[TextPart(turn.get("text", ""))])

    return FunctionModel(respond)


def build_agent(start, faults):
    agent = Agent(scripted_model(start.script, faults), retries=2)

    def observed(name, action):
        def run(**args):
            worker.tool_call(name, args)
            if name not in ALLOWED_TOOLS:
                worker.tool_result(name, ok=False, error="policy_denied:tool_not_allowed")
                return "denied by policy: this tool is not allowed"
            fault = faults.due("tool")
            try:
                if fault is not None:
                    raise RuntimeError(fault.get("error") or "injected tool failure")
                output = action(**args)
            except Exception as exc:
                worker.tool_result(name, ok=False, error=f"{type(exc).__name__}: {exc}")
                raise
            worker.tool_result(name, ok=True, output=output)
            return output
        return run

    @agent.tool_plain(name="lookup_order")
    def lookup_order(order: str) -> dict:
        return observed("lookup_order", lambda order: {"order": order, "status": "open"})(
            order=order)

    @agent.tool_plain(name="write_report")
    def write_report(order: str) -> dict:
        def effect(order):
            os.makedirs("lab-output", exist_ok=True)
            effects = json.load(open(EFFECTS)) if os.path.exists(EFFECTS) else []
            effects.append({"order": order})
            with open(EFFECTS + ".tmp", "w") as handle:
                json.dump(effects, handle)
            os.replace(EFFECTS + ".tmp", EFFECTS)
            return {"written": True, "effects": len(effects)}
        return observed("write_report", effect)(order=order)

    @agent.tool_plain(name="delete_records")
    def delete_records(order: str) -> str:
        return observed("delete_records", lambda order: "deleted")(order=order)

    return agent


def main():
    worker.ready("pydantic-ai", version("pydantic-ai-slim"),
                 worker.package_paths("pydantic-ai-slim", "pydantic-graph"))
    start = worker.start()
    faults = Faults(start.faults)
    try:
        answer = build_agent(start, faults).run_sync(start.task).output
        stop, state = "accepted", {"phase": "stopped"}
    except Exception as exc:  # what the framework let through is the finding
        answer, stop = str(exc)[:500], f"error:{type(exc).__name__}"
        state = {"phase": "error"}
    worker.result(output=str(answer), stop_reason=stop, end_state=state)


main()
