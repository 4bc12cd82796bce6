"""OpenAI's Responses API (POST /v1/responses) as alk sends it: the response object, its output
items, and the events of a streamed reply.
"""

from __future__ import annotations

from typing import Any

from alk.gateway.wire.reply import (
    Reply,
    ToolCall,
    Usage,
    call_id,
    dump,
    function_item_id,
    message_id,
    pieces,
    response_id,
)


def usage_fields(usage: Usage) -> dict:
    return {"input_tokens": usage.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.prompt_tokens + usage.completion_tokens}


def output_text(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(text: str, call: int, status: str) -> dict:
    content = [output_text(text)] if status == "completed" else []
    return {"id": message_id(call), "type": "message", "status": status, "role": "assistant",
            "content": content}


def function_item(tool: ToolCall, call: int, index: int, status: str) -> dict:
    return {"id": function_item_id(call, index), "type": "function_call", "status": status,
            "call_id": call_id(call, index), "name": tool.name,
            "arguments": tool.arguments if status == "completed" else ""}


def output(reply: Reply, call: int) -> list[dict]:
    items = [message_item(reply.text, call, "completed")] if reply.text is not None else []
    return items + [function_item(tool, call, index, "completed")
                    for index, tool in enumerate(reply.tool_calls)]


def response_object(reply: Reply | None, *, model: str, call: int, usage: Usage | None,
                    created: int) -> dict:
    """A Responses API response object: in progress (reply None) or completed."""
    return {"id": response_id(call), "object": "response", "created_at": created,
            "status": "in_progress" if reply is None else "completed",
            "completed_at": None if reply is None else created,
            "error": None, "incomplete_details": None, "instructions": None,
            "max_output_tokens": None, "model": model,
            "output": [] if reply is None else output(reply, call),
            "parallel_tool_calls": True, "previous_response_id": None, "reasoning": None,
            "store": False, "temperature": 1.0, "text": {"format": {"type": "text"}},
            "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
            "usage": None if usage is None else usage_fields(usage), "metadata": {}}


def frames(reply: Reply, *, model: str, call: int, usage: Usage,
           created: int) -> list[bytes]:
    frames: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        frames.append(f"event: {kind}\n".encode("ascii") + b"data: " + dump(
            {"type": kind, "sequence_number": len(frames), **fields}) + b"\n\n")

    started = response_object(None, model=model, call=call, usage=None, created=created)
    event("response.created", response=started)
    event("response.in_progress", response=started)
    output_index = 0
    if reply.text is not None:
        item_id = message_id(call)
        place = {"item_id": item_id, "output_index": output_index, "content_index": 0}
        event("response.output_item.added", output_index=output_index,
              item=message_item(reply.text, call, "in_progress"))
        event("response.content_part.added", **place, part=output_text(""))
        for piece in pieces(reply.text):
            if piece:
                event("response.output_text.delta", **place, delta=piece, logprobs=[])
        event("response.output_text.done", **place, text=reply.text, logprobs=[])
        event("response.content_part.done", **place, part=output_text(reply.text))
        event("response.output_item.done", output_index=output_index,
              item=message_item(reply.text, call, "completed"))
        output_index += 1
    for index, tool in enumerate(reply.tool_calls):
        item_id = function_item_id(call, index)
        event("response.output_item.added", output_index=output_index,
              item=function_item(tool, call, index, "in_progress"))
        for piece in pieces(tool.arguments):
            if piece:
                event("response.function_call_arguments.delta", item_id=item_id,
                      output_index=output_index, delta=piece)
        event("response.function_call_arguments.done", item_id=item_id,
              output_index=output_index, name=tool.name, arguments=tool.arguments)
        event("response.output_item.done", output_index=output_index,
              item=function_item(tool, call, index, "completed"))
        output_index += 1
    event("response.completed",
          response=response_object(reply, model=model, call=call, usage=usage, created=created))
    return frames
