"""OpenAI's Chat Completions (POST /v1/chat/completions) as alk sends it: the message, its usage
and finish reason, and the chunks of a streamed reply.
"""

from __future__ import annotations

from typing import Any

from alk.gateway.wire.reply import Reply, Usage, call_id, completion_id, dump, pieces


def usage_fields(usage: Usage) -> dict:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


def finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def message(reply: Reply, call: int) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None,
                               "annotations": []}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call_id(call, index), "type": "function",
             "function": {"name": tool.name, "arguments": tool.arguments}}
            for index, tool in enumerate(reply.tool_calls)]
    return message


def frames(reply: Reply, *, model: str, call: int, usage: Usage,
           created: int) -> list[bytes]:
    def chunk(choices: list[dict], **extra: Any) -> bytes:
        return b"data: " + dump({"id": completion_id(call), "object": "chat.completion.chunk",
                                 "created": created, "model": model, "choices": choices,
                                 **extra}) + b"\n\n"

    def delta(fields: dict, finish: str | None = None) -> bytes:
        return chunk([{"index": 0, "delta": fields, "logprobs": None, "finish_reason": finish}])

    # The first chunk carries the role, as OpenAI's does; content stays null for a tool call.
    frames = [delta({"role": "assistant", "content": "" if reply.text is not None else None,
                     "refusal": None})]
    if reply.text is not None:
        frames += [delta({"content": piece}) for piece in pieces(reply.text) if piece]
    for index, tool in enumerate(reply.tool_calls):
        # The first delta of a tool call names it (id, type, name); the rest carry only the
        # index and a piece of the arguments, which the client joins.
        frames.append(delta({"tool_calls": [
            {"index": index, "id": call_id(call, index), "type": "function",
             "function": {"name": tool.name, "arguments": ""}}]}))
        frames += [delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in pieces(tool.arguments) if piece]
    frames.append(delta({}, finish_reason(reply)))
    # Usage in a last chunk with no choices, as OpenAI sends it under
    # stream_options.include_usage; the SDK and the frameworks tested take it unasked too.
    frames.append(chunk([], usage=usage_fields(usage)))
    frames.append(b"data: [DONE]\n\n")
    return frames
