"""The model's reply as alk makes it, whatever the format it is sent in: text and tool calls
(`Reply`), a script turn made into one, its usage (an estimate: alk has no tokenizer), and the
ids and encoding every format shares. Ids are derived from the call's number, never random, so
that two runs of one script send the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from alk.cost import bounded
from alk.gateway.wire.request import Asked, json_kind

# The honest estimate of usage: about 4 bytes of English text a token, the rule of thumb OpenAI
# gives for its tokenizers. alk has no tokenizer and a usage figure is only ever an estimate.
BYTES_PER_TOKEN = 4
# A text or a tool call's arguments is streamed in this many deltas at most (fewer when short),
# so that a client's accumulation of deltas is exercised, as against a real model's token stream.
DELTAS = 4


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: str  # JSON text as sent; may be invalid JSON on purpose (bad_tool_args, `raw`)


@dataclass(frozen=True, slots=True)
class Reply:
    """What the model says in one turn: a text, tool calls, or both."""
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    clamped: int = 0  # an upstream's counts that were out of bounds (alk.cost.bounded)


# --- a script's turn and its usage -------------------------------------------------------------


def reply_from_turn(turn: Mapping) -> Reply:
    """A script turn as the model's reply: `{tool, args}` (a tool call, its arguments serialised
    compactly), `{tool, raw}` (a tool call whose arguments are the text given, valid JSON or
    not), `{text}` (a final answer). A turn with a text and a tool carries both. Raises
    ValueError for a turn of none of these shapes (the lane's loader checks turns first)."""
    text = turn.get("text")
    if text is not None and not isinstance(text, str):
        raise ValueError(f"a script turn's 'text' must be a string, not {json_kind(text)}")
    tool = turn.get("tool")
    if tool is None:
        if text is None:
            raise ValueError("a script turn needs 'tool' (with 'args' or 'raw') or 'text'")
        return Reply(text=text)
    if not isinstance(tool, str) or not tool:
        raise ValueError(f"a script turn's 'tool' must be a tool's name, not {json_kind(tool)}")
    if "raw" in turn:
        arguments = turn["raw"]
        if not isinstance(arguments, str):
            raise ValueError(f"a script turn's 'raw' must be a string, not {json_kind(arguments)}")
    else:
        arguments = compact_json(turn.get("args", {}))
    return Reply(text=text, tool_calls=(ToolCall(tool, arguments),))


def compact_json(value: Any) -> str:
    """JSON as OpenAI's models write tool arguments: no spaces, non-ASCII as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def broken_arguments(reply: Reply) -> Reply:
    """The reply with each tool call's arguments made invalid JSON (the `bad_tool_args` fault):
    the object cut before its end, as a model that stopped mid-call leaves it."""
    broken = tuple(ToolCall(call.name, call.arguments[:max(1, len(call.arguments) // 2)]
                            if len(call.arguments) > 2 else '{"')
                   for call in reply.tool_calls)
    return Reply(text=reply.text, tool_calls=broken)


def estimate_usage(asked: Asked, reply: Reply) -> Usage:
    """Usage as an estimate, about BYTES_PER_TOKEN bytes a token on each side, at least 1: the
    prompt from the request body's size (which also counts its JSON punctuation and the tools'
    schemas, as a real prompt's tokens count the tool definitions), the completion from the
    reply's text, tool names and arguments."""
    produced = len((reply.text or "").encode("utf-8", "surrogatepass")) + sum(
        len(call.name.encode("utf-8", "surrogatepass"))
        + len(call.arguments.encode("utf-8", "surrogatepass")) for call in reply.tool_calls)
    return Usage(prompt_tokens=max(1, asked.chars // BYTES_PER_TOKEN),
                 completion_tokens=max(1, produced // BYTES_PER_TOKEN))


# --- ids ---------------------------------------------------------------------------------------


def completion_id(call: int) -> str:
    return f"chatcmpl-alk-{call}"


def response_id(call: int) -> str:
    return f"resp_alk_{call}"


def call_id(call: int, index: int) -> str:
    """The id of the index-th tool call of the call-th model call (the same on both APIs)."""
    return f"call_alk_{call}_{index}"


def message_id(call: int) -> str:
    return f"msg_alk_{call}"


def function_item_id(call: int, index: int) -> str:
    return f"fc_alk_{call}_{index}"


# --- what every format's reader shares ---------------------------------------------------------

# What a broken body or stream is made of (the `malformed_json` fault): a short text.
BROKEN = Reply(text="The answer is")


def empty(reply: Reply) -> bool:
    """A reply of neither text nor tool call: each format sends it as an empty list of choices,
    output items, content blocks or candidates (the `empty_choices` fault)."""
    return reply.text is None and not reply.tool_calls


def unquoted_key(body: bytes, key: bytes) -> bytes:
    """The body with its first `key` (e.g. `"choices":`) unquoted: balanced braces that no JSON
    parser reads, as a broken upstream or proxy garbles a body (a cut one is `truncated_body`)."""
    return body.replace(key, key.replace(b'"', b""), 1)


def array(holder: Any, key: str) -> list:
    """holder[key] when holder is an object and that is an array; else an empty one."""
    value = holder.get(key) if isinstance(holder, dict) else None
    return value if isinstance(value, list) else []


def tool_call(function: Any) -> ToolCall | None:
    """{name, arguments} (OpenAI's function call) as a ToolCall, or None."""
    if not isinstance(function, dict):
        return None
    name, arguments = function.get("name"), function.get("arguments")
    if isinstance(name, str) and isinstance(arguments, str):
        return ToolCall(name, arguments)
    return None


def reply_or_none(texts: list[str], calls: tuple[ToolCall, ...]) -> Reply | None:
    """The reply of texts (joined) and calls; None when there are neither."""
    if not texts and not calls:
        return None
    return Reply(text="".join(texts) if texts else None, tool_calls=calls)


def usage_of(usage: Any, prompt_key: str, completion_key: str, *,
             also_prompt: tuple[str, ...] = ()) -> Usage | None:
    """The counts of a usage object, or None when it has neither. Bounded where they enter: an
    upstream's negative, huge or fractional count is clamped (and the clamp counted), never
    summed as given, nor the reason to drop the usage; a count left out (or null) is none, not
    one to clamp. `also_prompt`: further input counts (cached tokens, say) added to the prompt."""
    if not isinstance(usage, dict) or not any(
            key in usage for key in (prompt_key, completion_key)):
        return None
    counts = [bounded(usage[key]) if usage.get(key) is not None else (0, False)
              for key in (prompt_key, completion_key, *also_prompt)]
    prompt = counts[0][0] + sum(count for count, _ in counts[2:])
    return Usage(prompt_tokens=prompt, completion_tokens=counts[1][0],
                 clamped=sum(bad for _, bad in counts))


# --- non-streamed bodies -----------------------------------------------------------------------


def dump(value: Any) -> bytes:
    # ASCII only: a text the script or a request carried (a lone surrogate included) can always
    # be encoded, and a cut of the bytes can never split a character.
    return json.dumps(value, separators=(",", ":")).encode("ascii")


# --- streams -----------------------------------------------------------------------------------


def pieces(text: str) -> list[str]:
    """`text` in at most DELTAS non-empty pieces (one empty piece for an empty text)."""
    size = max(1, -(-len(text) // DELTAS))
    return [text[start:start + size] for start in range(0, len(text), size)] or [""]
