"""alk worker for the `anthropic` package with no framework: a small agent loop written directly
on the Messages API, streamed (`client.messages.stream`), as Anthropic's tool-use guide shows:
each `tool_use` block is run and answered with a `tool_result` block, until the model ends its
turn. The loop is the worker's; everything below it is the client's, with its defaults (two
retries with backoff, its timeout, its stream parser and errors), pointed at the Anthropic
endpoint of the model alk serves (the lane serves that family only).

alk's gateway plays the scenario's `script` in Messages format, injects its `wire_faults`
(those shared by every family, and Anthropic's own: 529, an error event inside a 200 stream, an
answer without usage, Retry-After as a date, x-should-retry) and records every call. A tool
that raises is answered with `is_error: true` and its text, as the guide advises, and the
model goes on. Whatever the client raises ends the run with stop_reason `error:<ExceptionType>`:
what it did with a fault is the finding.
"""

from importlib.metadata import version

from alk import worker
from lab_tools import (
    ORDER_SCHEMA,
    TOOL_DOCS,
    Faults,
    family_endpoint,
    report_run,
    tool_outcome,
)

worker.hello()
# Imported after hello(): a package that prints on import cannot break the protocol.
import anthropic  # noqa: E402

MAX_TURNS = 10  # a loop that never ends is cut here, and says so


def run_loop(start, faults):
    name, base_url, api_key = family_endpoint(start, "anthropic")
    client = anthropic.Anthropic(base_url=base_url, api_key=api_key)
    tools = [{"name": tool, "description": doc, "input_schema": ORDER_SCHEMA}
             for tool, doc in TOOL_DOCS.items()]
    messages = [{"role": "user", "content": start.task}]
    for _ in range(MAX_TURNS):
        with client.messages.stream(model=name, max_tokens=1024, messages=messages,
                                    tools=tools) as stream:
            answer = stream.get_final_message()
        calls = [block for block in answer.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in answer.content if block.type == "text")
        messages.append({"role": "assistant",
                         "content": [block.model_dump(exclude_none=True)
                                     for block in answer.content]})
        results = []
        for call in calls:
            args = call.input if isinstance(call.input, dict) else {}
            output, ok = tool_outcome(call.name, args, faults)
            results.append({"type": "tool_result", "tool_use_id": call.id,
                            "content": str(output), "is_error": not ok})
        messages.append({"role": "user", "content": results})
    raise RuntimeError(f"no final answer in {MAX_TURNS} model turns")


def main():
    worker.ready("anthropic", version("anthropic"),
                 worker.package_paths("anthropic", "httpx", "httpcore"))
    start = worker.start()
    report_run(lambda: run_loop(start, Faults(start.faults)))


main()
