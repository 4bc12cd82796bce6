"""alk worker for the OpenAI Agents SDK: its real Runner loop and tool dispatch, driven offline by
a scripted model, a subclass of the SDK's own `Model` interface.

The scenario's `script` holds the model's turns: `{tool, args}` (a function call), `{tool, raw}`
(a function call whose arguments are malformed JSON) or `{text}` (the final message); a turn
asked past the script is reported to alk (`script_exhausted`) and answered with an empty
message. Faults: `before_model` (the n-th model call raises, as a provider's 429 would) and
`tool` (the n-th tool call raises). Whatever the Runner raises ends the run with stop_reason
`error:<ExceptionType>`: what the framework did with a fault is the finding. Tracing is off:
nothing may try the network.
"""

import json
from importlib.metadata import version

from alk import worker
from lab_tools import Faults, RateLimited, report_run, run_tool

worker.hello()
# Imported after hello(): a framework that prints on import cannot break the protocol.
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

set_tracing_disabled(True)


class ScriptedModel(Model):
    def __init__(self, script, faults):
        self.script, self.faults, self.index, self.asked = script, faults, 0, 0

    async def get_response(self, *args, **kwargs):
        if self.faults.due("before_model") is not None:
            raise RateLimited("429 Too Many Requests (injected by alk)")
        self.asked += 1
        index = self.index
        turn = self.script[index] if index < len(self.script) else {"text": ""}
        if index < len(self.script):
            worker.emit("model", "turn", {"index": index})
            self.index += 1
        else:
            worker.script_exhausted(self.asked, len(self.script))
        if "tool" in turn:
            arguments = turn.get("raw", json.dumps(turn.get("args", {})))
            item = ResponseFunctionToolCall(arguments=arguments, call_id=f"call-{index}",
                                            name=turn["tool"], type="function_call",
                                            id=f"fc-{index}", status="completed")
        else:
            item = ResponseOutputMessage(
                id=f"msg-{index}", role="assistant", status="completed", type="message",
                content=[ResponseOutputText(text=turn.get("text", ""), type="output_text",
                                            annotations=[])])
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the scripted model does not stream")


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

    return Agent(name="alk", instructions="Follow the task.",
                 model=ScriptedModel(start.script, faults),
                 tools=[lookup_order, write_report, delete_records])


def main():
    worker.ready("openai-agents", version("openai-agents"),
                 worker.package_paths("openai-agents"))
    start = worker.start()
    faults = Faults(start.faults)
    report_run(lambda: Runner.run_sync(build_agent(start, faults), start.task, max_turns=12,
                                       run_config=RunConfig(tracing_disabled=True)).final_output)


main()
