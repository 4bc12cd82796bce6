"""The TypeScript framework lanes through alk's model gateway, each run by Node 24 from its own
npm install under workers/node/, against the scripted model alk serves, with no network but the
gateway. The findings measured with each lane's versions are pinned, so that an upgrade that
changes them is noticed; the whole of each lane's findings is in its lane file's comments."""

from __future__ import annotations

import pytest

from helpers.gateway_lanes import needs_offline, pinned_findings, require_node_lane

# Tool arguments that are not JSON: the tool is not run, the error goes back to the model.
ASKED_AGAIN = ("pass", [])

LANES = {
    # generateText's tool loop on @ai-sdk/openai's default model path (the Responses API).
    "ai-sdk": ("The AI SDK", "ai", {
        "nominal": ("pass", []),
        # A body cut short under its Content-Length: undici's `terminated` (UND_ERR_SOCKET) is
        # a network error to the SDK, which retries it after its 2 s backoff.
        "wire-truncated": ("pass", []),
        # A 200 whose body is not JSON: APICallError "Invalid JSON response", not retryable.
        "wire-malformed": ("fail", ["fault_unrecovered"]),
        "malformed-output": ASKED_AGAIN,
    }),
    # The Runner on the SDK's default model path (the Responses API, the openai client).
    "openai-agents-js": ("The OpenAI Agents SDK for JavaScript", "@openai/agents", {
        "nominal": ("pass", []),
        # The openai client retries the 429 after the 0.2 s its retry-after-ms header asks for.
        "wire-429": ("pass", []),
        # A cut body: the client reads the body after its retry loop, so undici's TypeError
        # (`terminated`) ends the run; the Runner's own retries are opt-in.
        "wire-truncated": ("fail", ["fault_unrecovered"]),
        "malformed-output": ASKED_AGAIN,
    }),
    # An Agent with createTool tools, the model as its router's `{ id, url, apiKey }`.
    "mastra": ("Mastra", "@mastra/core", {
        "nominal": ("pass", []),
        # The Agent's maxRetries is 0 by default: the first 429 ends the run (APICallError).
        "wire-429": ("fail", ["fault_unrecovered"]),
        "wire-bad-args": ASKED_AGAIN,
        # A tool's error is handed to the model as the call's result, and the run goes on.
        "tool-raises": ("pass", []),
    }),
    # A StateGraph with ToolNode and ChatOpenAI, checkpointed in SQLite (better-sqlite3, built
    # against Node 24's headers).
    "langgraph-js": ("LangGraph.js", "@langchain/langgraph", {
        "nominal": ("pass", []),
        # LangChain's caller retries the 429 (up to 6 times, with backoff).
        "wire-429": ("pass", []),
        # ChatOpenAI keeps a call whose arguments do not parse as an invalid tool call, which
        # toolsCondition does not route to ToolNode: the graph ends without the report.
        "wire-bad-args": ("fail", ["fault_unrecovered"]),
    }),
}


@needs_offline
@pytest.mark.parametrize("name", list(LANES))
def test_typescript_lane_findings(tmp_path, name):
    what, package, pinned = LANES[name]
    require_node_lane(name, what, package)
    framework, found = pinned_findings(tmp_path, name, list(pinned))
    assert framework == package
    assert found == pinned
