"""The lanes that speak a provider's own API through alk's model gateway: the `anthropic` and
`google-genai` clients alone (a tool loop of the worker's own), and Pydantic AI and LangGraph
through their native Anthropic and Gemini models, each against the one family its lane serves,
with no network but the gateway. The findings measured with the versions installed by
`make test` (anthropic 2.16, google-genai 2.34, pydantic-ai-slim 2.68, langgraph 1.2 with
langchain-anthropic 1.7) are pinned, a few scenarios a lane, those where the lanes differ, so
that an upgrade that changes one is noticed."""

from __future__ import annotations

import importlib.util

import pytest

from helpers.gateway_lanes import findings, lane, needs_offline, run_lane

PASS = ("pass", [])
UNRECOVERED = ("fail", ["fault_unrecovered"])
MISHANDLED = ("fail", ["fault_mishandled"])

# lane -> (the framework its worker reports, the modules it needs, {scenario: finding}).
LANES = {
    "anthropic": ("anthropic", ["anthropic"], {
        # 529 overloaded is retried as any 5xx, after the client's backoff.
        "anthropic-529": PASS,
        # An error event after a 200: APIStatusError, which the client does not retry.
        "anthropic-stream-error": UNRECOVERED,
        # A message_delta without usage: the stream helper raises AttributeError on it.
        "anthropic-no-usage": MISHANDLED,
        # x-should-retry: false is obeyed: no third call, no report.
        "anthropic-no-retry": PASS,
        # Cut arguments are read as whatever of them parses: the tool runs on them.
        "wire-bad-args": MISHANDLED,
    }),
    "google-genai": ("google-genai", ["google.genai"], {
        # No retry_options, no retries: the 429 with its retryDelay ends the run (ClientError),
        # as OpenAI's 429 in the shared scenario does.
        "gemini-429": UNRECOVERED,
        "wire-429": UNRECOVERED,
        # SAFETY with no content: the loop ends on the empty answer, the report not written.
        "gemini-safety": PASS,
        # MAX_TOKENS: the loop ends on the cut text as if it were the answer.
        "gemini-max-tokens": UNRECOVERED,
        # The worker's loop hands the tool's error back: the model goes on.
        "tool-raises": PASS,
    }),
    "pydantic-ai-anthropic": ("pydantic-ai", ["pydantic_ai", "anthropic"], {
        "anthropic-529": PASS,
        # Asked unstreamed, the error object under a 200 is read as a message with no
        # content: TypeError.
        "anthropic-stream-error": UNRECOVERED,
        # A message without usage: AttributeError in AnthropicModel's usage mapping.
        "anthropic-no-usage": MISHANDLED,
        # Through OpenAI's client it is retried as well; here the anthropic client's retries.
        "wire-truncated": PASS,
        "wire-bad-args": PASS,
    }),
    "pydantic-ai-google": ("pydantic-ai", ["pydantic_ai", "google.genai"], {
        # GoogleProvider sets no retry_options: google-genai retries nothing, where the same
        # agent through OpenAIChatModel retries the 429 (lanes/pydantic-ai.toml).
        "wire-429": UNRECOVERED,
        "gemini-429": UNRECOVERED,
        # MAX_TOKENS with no part: OutputTokenLimitExceeded.
        "gemini-max-tokens": UNRECOVERED,
        # Unstreamed, the error object under a 200 has no candidates: the model is asked again.
        "gemini-stream-error": PASS,
    }),
    "langgraph-anthropic": ("langgraph", ["langgraph", "langchain_anthropic"], {
        # The same non-stream TypeError as Pydantic AI's.
        "anthropic-stream-error": UNRECOVERED,
        # ChatAnthropic reads a message without usage.
        "anthropic-no-usage": PASS,
        "anthropic-529": PASS,
        # Cut arguments fail AIMessage's validation (ValidationError), ending the graph.
        "wire-bad-args": UNRECOVERED,
    }),
}


def missing(modules: list[str]) -> list[str]:
    found = []
    for module in modules:
        try:
            found.append(importlib.util.find_spec(module) is not None)
        except ModuleNotFoundError:  # a parent package missing (google for google.genai)
            found.append(False)
    return [module for module, ok in zip(modules, found) if not ok]


@needs_offline
@pytest.mark.parametrize("name", list(LANES))
def test_native_lane_findings(tmp_path, name):
    framework, modules, expected = LANES[name]
    if absent := missing(modules):
        pytest.skip(f"{', '.join(absent)} not installed: {lane(name)['install']}")
    document = run_lane(tmp_path, name, list(expected), seed=7)
    assert document["gate"]["framework"] == framework
    assert findings(document) == expected
