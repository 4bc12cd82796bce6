"""Google's Gemini API (`generateContent`) as alk speaks it: POST
/v1beta/models/{model}:generateContent, and :streamGenerateContent?alt=sse for a stream.

The shapes follow Google's REST reference and what the `google-genai` client reads (its
`types.GenerateContentResponse`, the SSE reader of `_api_client.HttpResponse` and the errors of
`errors.APIError`); the unit tests feed every body and stream built here to the real client.
"""

from __future__ import annotations

from typing import Any, Callable, Literal
from urllib.parse import quote

from alk import untrusted_json
from alk.cost import MAX_CALL_TOKENS, bounded
from alk.gateway.wire.reply import (
    Reply,
    ToolCall,
    Usage,
    call_id,
    compact_json,
    dump,
    empty,
    pieces,
    reply_or_none,
    response_id,
    unquoted_key,
)
from alk.gateway.wire.request import MAX_TOOLS, MODEL_CHARS, TOOL_NAME_CHARS, Asked, json_kind

API = "gemini"
FAMILY = "gemini"
# formats.Finish, spelled again: formats imports this module, which may not import it back.
Finish = Literal["refused", "max_tokens"]

# Google's canonical status names by HTTP status (google.rpc.Code and its HTTP mapping). Google
# never answers 408 (its deadline is a 504); a 408 still names the deadline, its nearest meaning.
STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
            404: "NOT_FOUND", 408: "DEADLINE_EXCEEDED", 409: "ABORTED",
            429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED",
            503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
# The real API ends each line of its alt=sse stream with CRLF.
END = b"\r\n\r\n"
# A finishMessage quotes the broken call, as the API's does, cut to this length.
QUOTED_CHARS = 200
# What a real safety stop carries: the four rated categories, the one that blocked rated HIGH.
SAFETY_RATINGS = [
    {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT", "probability": "NEGLIGIBLE"}]


# --- reading a request -------------------------------------------------------------------------


def read(request: dict, *, size: int, model: str, stream: bool) -> Asked | str:
    """The request as alk reads it, or the problem with it (for a 400). Never raises."""
    if not isinstance(request, dict):
        return f"the request body must be a JSON object, not {json_kind(request)}"
    if not model:
        return ("the path names no model: POST /v1beta/models/MODEL:generateContent "
                "(or :streamGenerateContent?alt=sse)")
    contents = request.get("contents")
    if not isinstance(contents, list) or not contents:
        return f"'contents' must be a non-empty array, not {json_kind(contents)}"
    # systemInstruction is a content of its own, not one of the conversation's items;
    # generationConfig changes nothing alk sends.
    results = sum(1 for content in contents for part in _parts_of(content)
                  if isinstance(_field(part, "functionResponse", "function_response"), dict))
    answered = sum(1 for content in contents
                   if isinstance(content, dict) and content.get("role") == "model")
    return Asked(api="gemini", model=model[:MODEL_CHARS], stream=stream,
                 tools=_tool_names(request.get("tools")), items=len(contents),
                 tool_results=results, chars=size, answered=answered)


def _field(holder: Any, camel: str, snake: str) -> Any:
    """A field in either spelling: the REST API takes proto JSON, camelCase or snake_case."""
    if not isinstance(holder, dict):
        return None
    return holder[camel] if camel in holder else holder.get(snake)


def _parts_of(content: Any) -> list:
    parts = content.get("parts") if isinstance(content, dict) else None
    return parts if isinstance(parts, list) else []


def _tool_names(tools: Any) -> tuple[str, ...]:
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        declarations = _field(tool, "functionDeclarations", "function_declarations")
        for declaration in declarations if isinstance(declarations, list) else []:
            name = declaration.get("name") if isinstance(declaration, dict) else None
            if isinstance(name, str):
                names.append(name[:TOOL_NAME_CHARS])
            if len(names) == MAX_TOOLS:
                return tuple(names)
    return tuple(names)


# --- a reply's body and stream -----------------------------------------------------------------


def usage_fields(usage: Usage) -> dict:
    return {"promptTokenCount": usage.prompt_tokens,
            "candidatesTokenCount": usage.completion_tokens,
            "totalTokenCount": usage.prompt_tokens + usage.completion_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": usage.prompt_tokens}]}


def _args(call: ToolCall) -> dict | None:
    """A call's arguments as the object Gemini sends, or None when they are not a JSON object.

    Gemini's `args` is a Struct: the real API can never send arguments that do not parse. When
    its model writes a call that does not parse, the API sends no call at all and ends the
    candidate with MALFORMED_FUNCTION_CALL, quoting the call in `finishMessage`. That is what a
    client meets for broken arguments (the `bad_tool_args` fault, a script's `raw`)."""
    try:
        value = untrusted_json.parse(call.arguments)
    except untrusted_json.Rejected:
        return None
    return value if isinstance(value, dict) else None


def _call_part(call: ToolCall, args: dict, number: int, index: int) -> dict:
    return {"functionCall": {"id": call_id(number, index), "name": call.name, "args": args}}


def _broken(reply: Reply) -> ToolCall | None:
    return next((call for call in reply.tool_calls if _args(call) is None), None)


def _ending(reply: Reply, finish: Finish | None) -> dict:
    """How the candidate ends: its finishReason and what comes with it."""
    if finish == "refused":
        return {"finishReason": "SAFETY", "safetyRatings": SAFETY_RATINGS}
    if finish == "max_tokens":
        return {"finishReason": "MAX_TOKENS"}
    broken = _broken(reply)
    if broken is not None:
        quoted = f"{broken.name}({broken.arguments})"[:QUOTED_CHARS]
        return {"finishReason": "MALFORMED_FUNCTION_CALL",
                "finishMessage": f"Malformed function call: {quoted}"}
    # A function call ends with STOP too: Gemini has no finish reason of its own for tool use.
    return {"finishReason": "STOP"}


def _call_parts(reply: Reply, call: int, finish: Finish | None) -> list[dict]:
    """The calls sent: none when the reply is refused or one of them is broken (the API then
    sends none of the turn's calls); under MAX_TOKENS the broken ones are left out, as the
    limit cut them off."""
    if finish == "refused" or (finish is None and _broken(reply) is not None):
        return []
    parts = []
    for index, tool in enumerate(reply.tool_calls):
        args = _args(tool)
        if args is not None:
            parts.append(_call_part(tool, args, call, index))
    return parts


def _candidate(parts: list[dict] | None, **ending: Any) -> dict:
    candidate: dict[str, Any] = {}
    if parts is not None:
        candidate["content"] = {"parts": parts, "role": "model"}
    return {**candidate, **ending, "index": 0}


def _response(candidate: dict | None, *, model: str, call: int, usage: Usage | None) -> dict:
    """The response of one candidate, or of none (an empty reply: the `empty_choices` fault)."""
    response: dict[str, Any] = {"candidates": [candidate] if candidate is not None else []}
    if usage is not None:
        response["usageMetadata"] = usage_fields(usage)
    return {**response, "modelVersion": model, "responseId": response_id(call)}


def body(reply: Reply, *, model: str, call: int, usage: Usage | None, created: int,
         finish: Finish | None = None) -> bytes:
    """A GenerateContentResponse (`created` is not in Gemini's body)."""
    if empty(reply):
        return dump(_response(None, model=model, call=call, usage=usage))
    if finish == "refused":
        # A blocked candidate carries no content at all, only why it was blocked.
        parts = None
    else:
        parts = ([{"text": reply.text}] if reply.text is not None else []) + _call_parts(
            reply, call, finish)
        if not parts and reply.tool_calls:
            parts = None  # a malformed call leaves the candidate without content
    return dump(_response(_candidate(parts, **_ending(reply, finish)), model=model, call=call,
                          usage=usage))


def _frame(response: dict) -> bytes:
    return b"data: " + dump(response) + END


def frames(reply: Reply, *, model: str, call: int, usage: Usage | None, created: int,
           finish: Finish | None = None) -> list[bytes]:
    """The chunks of :streamGenerateContent?alt=sse: the text in pieces, the function calls
    whole in one chunk, the finishReason and usage on the last chunk. No [DONE]: the stream
    ends when the connection closes."""
    if empty(reply):
        return [_frame(_response(None, model=model, call=call, usage=usage))]
    texts = [piece for piece in pieces(reply.text) if piece] if reply.text is not None else []
    if finish == "refused":
        # The pieces that passed the filter, then the blocked chunk, which carries no content.
        chunks: list[list[dict] | None] = [[{"text": text}] for text in texts[:-1]] + [None]
    else:
        chunks = [[{"text": text}] for text in texts]
        calls = _call_parts(reply, call, finish)
        if calls:
            chunks.append(calls)
        if not chunks:
            chunks.append(None if reply.tool_calls else [{"text": ""}])
    last = len(chunks) - 1
    return [_frame(_response(
        _candidate(parts, **(_ending(reply, finish) if place == last else {})), model=model,
        call=call, usage=usage if place == last else None))
        for place, parts in enumerate(chunks)]


# --- errors and broken answers -----------------------------------------------------------------


def _status(status: int) -> str:
    return STATUSES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")


def _duration(seconds: float) -> str:
    """A google.protobuf.Duration as JSON: "2s", "0.5s"."""
    text = f"{max(0.0, seconds):.9f}".rstrip("0").rstrip(".")
    return f"{text}s"


def _error_object(status: int, message: str, retry_after_s: float | None = None) -> dict:
    error: dict[str, Any] = {"code": status, "message": message, "status": _status(status)}
    if retry_after_s is not None:
        error["details"] = [{"@type": RETRY_INFO, "retryDelay": _duration(retry_after_s)}]
    return {"error": error}


def error(status: int, message: str, *, retry_after_s: float | None = None) -> bytes:
    """`{"error": {"code", "message", "status"}}`, with a RetryInfo detail when a delay is
    given, as Gemini's 429 carries one."""
    return dump(_error_object(status, message, retry_after_s))


def error_frames(reply: Reply, *, model: str, call: int, created: int,
                 message: str) -> list[bytes]:
    """A first chunk of the reply's text, then the error object as the stream's next event:
    what the API sends when it fails after the 200 (google-genai raises it as an APIError)."""
    first = pieces(reply.text)[0] if reply.text else ""
    start = _response(_candidate([{"text": first}]), model=model, call=call, usage=None)
    return [_frame(start), _frame(_error_object(500, message))]


def malformed_body(call: int) -> bytes:
    """A 200 body that is not JSON: a whole object, its braces balanced, one key unquoted."""
    whole = body(Reply(text="The answer is"), model="alk", call=call, usage=Usage(1, 1),
                 created=0)
    return unquoted_key(whole, b'"candidates":')


def malformed_stream(call: int) -> bytes:
    return b"data: " + malformed_body(call) + END


# --- reading an upstream's answer --------------------------------------------------------------


def _first_candidate(response: Any) -> dict | None:
    candidates = response.get("candidates") if isinstance(response, dict) else None
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
        return candidates[0]
    return None


def _said(response: Any, texts: list[str], calls: list[ToolCall]) -> None:
    """Adds the text and function calls of a response's first candidate to `texts`, `calls`."""
    content = (_first_candidate(response) or {}).get("content")
    for part in _parts_of(content):
        if not isinstance(part, dict):
            continue
        # A thought is the model's reasoning summary, not its answer (google-genai's .text
        # leaves it out too).
        if isinstance(part.get("text"), str) and part.get("thought") is not True:
            texts.append(part["text"])
        function = _field(part, "functionCall", "function_call")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            args = function.get("args")
            arguments = compact_json(args) if isinstance(args, dict) else "{}"
            calls.append(ToolCall(function["name"], arguments))


def reply_of_body(response: dict) -> Reply | None:
    """The reply in a GenerateContentResponse, or None. Never raises."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    _said(response, texts, calls)
    return reply_or_none(texts, tuple(calls))


def reply_of_events(events: list[dict]) -> Reply | None:
    """The reply of a stream's chunks: their texts joined, their function calls in order."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for event in events if isinstance(events, list) else []:
        _said(event, texts, calls)
    return reply_or_none(texts, tuple(calls))


def usage_of_body(response: dict) -> Usage | None:
    """The usage in a response's usageMetadata, bounded where it enters, or None. Never raises.

    Gemini counts a thinking model's thoughts apart from the candidates, and the results of
    its built-in tools apart from the prompt, but bills both, so each is added to its side."""
    usage = response.get("usageMetadata") if isinstance(response, dict) else None
    if not isinstance(usage, dict) or not any(
            key in usage for key in ("promptTokenCount", "candidatesTokenCount")):
        return None
    sides = []
    clamped = 0
    for keys in (("promptTokenCount", "toolUsePromptTokenCount"),
                 ("candidatesTokenCount", "thoughtsTokenCount")):
        total = 0
        for key in keys:
            # A count left out, or null, is none: nothing to clamp.
            count, bad = bounded(usage[key]) if usage.get(key) is not None else (0, False)
            total, clamped = total + count, clamped + bad
        if total > MAX_CALL_TOKENS:
            total, clamped = MAX_CALL_TOKENS, clamped + 1
        sides.append(total)
    return Usage(prompt_tokens=sides[0], completion_tokens=sides[1], clamped=clamped)


def usage_of_events(events: list[dict]) -> Usage | None:
    """The usage of the last chunk that carries one (Gemini's counts are cumulative)."""
    for event in reversed(events if isinstance(events, list) else []):
        usage = usage_of_body(event)
        if usage is not None:
            return usage
    return None


def normalized(request: dict, renamed: Callable[[Any], Any]) -> dict:
    """The request with each functionCall's and functionResponse's id through `renamed`."""
    contents = request.get("contents") if isinstance(request, dict) else None
    if not isinstance(contents, list):
        return request
    return {**request, "contents": [_normalized_content(content, renamed)
                                    for content in contents]}


def _normalized_content(content: Any, renamed: Callable[[Any], Any]) -> Any:
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        return content
    parts = []
    for part in content["parts"]:
        if isinstance(part, dict):
            part = dict(part)
            for key in ("functionCall", "function_call", "functionResponse",
                        "function_response"):
                inner = part.get(key)
                if isinstance(inner, dict) and "id" in inner:
                    part[key] = {**inner, "id": renamed(inner["id"])}
        parts.append(part)
    return {**content, "parts": parts}


# --- the upstream ------------------------------------------------------------------------------


def _model_segment(model: str) -> str:
    # The model comes from a worker's path: quoted whole, so that it cannot reach another of
    # the upstream's paths ("../files") or add a query, with alk's key on the request.
    segment = quote(model, safe="")
    return segment.replace(".", "%2E") if segment in (".", "..") else segment


def upstream_path(model: str, stream: bool) -> str:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{_model_segment(model)}:{method}"


def check_path(model: str) -> str:
    return f"/v1beta/models/{_model_segment(model)}"


def upstream_headers(key: str) -> dict[str, str]:
    return {"x-goog-api-key": key}
