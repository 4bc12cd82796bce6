"""What a worker's request asks the gateway for: which endpoint (and so which wire format), the
model and stream that Gemini's path names, and the key it presents, whichever way its family
sends one. Every session serves all three families on one port (a framework may use more than
one); a lane's `[model] family` narrows that to one.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from typing import Mapping

from alk.gateway.wire.formats import FAMILIES
from alk.gateway.wire.request import MODEL_CHARS

# OpenAI's and Anthropic's paths, after an optional /v1 (OpenAI clients are given a base URL
# that ends in /v1; Anthropic's add /v1 themselves).
_CALLS = {"chat/completions": "chat", "responses": "responses", "messages": "messages"}
# Gemini names the model and the method in the path: models/NAME:generateContent.
_GEMINI = re.compile(r"^/(?:v1|v1beta|v1alpha)/models/([^/:]{1,200}):"
                     r"(generateContent|streamGenerateContent)$")
ENDPOINTS = ("POST /v1/chat/completions, /v1/responses (OpenAI), /v1/messages (Anthropic) "
             "and /v1beta/models/NAME:generateContent or :streamGenerateContent (Gemini)")
# The variables that hold a worker's key, by family, for the refusal of a wrong one.
KEY_VARIABLES = "OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY"


@dataclass(frozen=True, slots=True)
class Route:
    """An endpoint the gateway serves: a model call in a format (`api`), the list of models,
    or Anthropic's token count."""

    kind: str  # "call", "models" or "count_tokens"
    api: str = "chat"  # the format of a call (and of the errors a route answers with)
    model: str = ""  # Gemini: the model the path names
    stream: bool = False  # Gemini: streamGenerateContent
    sse: bool = True  # Gemini's stream: asked as server-sent events (?alt=sse)


def route(method: str, path: str, query: Mapping[str, str]) -> Route | None:
    """The endpoint of a request, or None for one alk does not serve."""
    path = path.rstrip("/")
    gemini = _GEMINI.match(path)
    if gemini is not None:
        if method != "POST":
            return None
        stream = gemini.group(2) == "streamGenerateContent"
        return Route("call", "gemini", model=gemini.group(1)[:MODEL_CHARS], stream=stream,
                     sse=not stream or query.get("alt") == "sse")
    inner = path[len("/v1"):] if path.startswith("/v1/") or path == "/v1" else path
    inner = inner.lstrip("/")
    if method == "GET" and inner == "models":
        return Route("models")
    if method == "POST" and inner == "messages/count_tokens":
        return Route("count_tokens", "messages")
    api = _CALLS.get(inner)
    return Route("call", api) if method == "POST" and api is not None else None


def holds_key(headers: Mapping[str, str], query: Mapping[str, str], key: str) -> bool:
    """Whether the request presents the attempt's key as any family's client sends one:
    `Authorization: Bearer` (OpenAI; Anthropic's auth token), `x-api-key` (Anthropic),
    `x-goog-api-key` or `?key=` (Gemini)."""
    presented = [headers.get("Authorization", "").removeprefix("Bearer "),
                 headers.get("x-api-key", ""), headers.get("x-goog-api-key", ""),
                 query.get("key", "")]
    wanted = key.encode()
    # Each compared, none skipped: the time taken says nothing of which one was close.
    matches = [hmac.compare_digest(given.encode("utf-8", "replace"), wanted)
               for given in presented]
    return any(matches)


def family_of(api: str) -> str:
    return next(family for family, apis in FAMILIES.items() if api in apis)


def environment(base_url: str, key: str) -> dict[str, str]:
    """The variables through which each family's unmodified client finds the gateway: OpenAI's
    (OPENAI_API_BASE for older integrations), Anthropic's (its base URL without /v1: the client
    adds it), and those google-genai, Google ADK and Gemini CLI read (GOOGLE_API_KEY, which
    google-genai prefers when both are set, holds the same key)."""
    root = base_url.removesuffix("/v1")
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_BASE": base_url, "OPENAI_API_KEY": key,
            "ANTHROPIC_BASE_URL": root, "ANTHROPIC_API_KEY": key,
            "GOOGLE_GEMINI_BASE_URL": root, "GEMINI_API_KEY": key, "GOOGLE_API_KEY": key,
            "GOOGLE_GENAI_USE_VERTEXAI": "false"}


def base_urls(base_url: str) -> dict[str, str]:
    """Each family's base URL, as its client takes it (the start message's `base_urls`)."""
    root = base_url.removesuffix("/v1")
    return {"openai": base_url, "anthropic": root, "gemini": root}
