"""The framework lanes whose tools alk serves over MCP, through each framework's own MCP
client, with no network but the gateway: the findings measured with the versions `make test`
installs are pinned, so that an upgrade that changes what a framework does with a tool that
fails, hangs, is slow or answers malformed is noticed. Each lane's comments say why each
verdict is what it is."""

from __future__ import annotations

import pytest

from helpers.gateway_lanes import (
    ROOT,
    findings,
    needs_offline,
    require_installed,
    require_node_lane,
    run_lane,
)

PASS = ("pass", [])
CRASH = ("fail", ["effect_repeated"])  # no framework keeps its run across alk's kill
HANGS = ("fail", ["fault_unrecovered"])  # the call that never answers is never given up
RECOVERS = {"nominal": PASS, "tool-error": PASS, "tool-timeout": PASS, "tool-slow": PASS,
            "tool-malformed": PASS, "crash-after-effect": CRASH}
VENV = ROOT / ".venv" / "bin" / "python"
# lane: (framework, the interpreter, a module the client needs, findings); a
# TypeScript lane names its worker's folder under workers/node/ and its client's npm package.
LANES = {
    # The client's 5 s session timeout ends the call alk never answers.
    "openai-agents-mcp": ("openai-agents", VENV, "agents.mcp", RECOVERS),
    # A 30 s session read timeout (BasicMCPClient's), past which the model is told.
    "llamaindex-mcp": ("llamaindex", ROOT / ".venvs/llamaindex/bin/python",
                       "llama_index.tools.mcp", RECOVERS),
    # No bound but the HTTP read timeout's 300 s.
    "pydantic-ai-mcp": ("pydantic-ai", VENV, "pydantic_ai.mcp",
                        {**RECOVERS, "tool-timeout": HANGS}),
    "langgraph-mcp": ("langgraph", ROOT / ".venvs/langgraph-mcp/bin/python",
                      "langchain_mcp_adapters.client", {**RECOVERS, "tool-timeout": HANGS}),
    "smolagents-mcp": ("smolagents", ROOT / ".venvs/smolagents-mcp/bin/python",
                       "mcpadapt.core", {**RECOVERS, "tool-timeout": HANGS}),
    "strands-mcp": ("strands-agents", ROOT / ".venvs/strands/bin/python",
                    "strands.tools.mcp", {**RECOVERS, "tool-timeout": HANGS}),
    "autogen-mcp": ("autogen-agentchat", ROOT / ".venvs/autogen-mcp/bin/python",
                    "autogen_ext.tools.mcp", {**RECOVERS, "tool-timeout": HANGS}),
    # No request timeout at all: only Node's fetch's 300 s for the answer's headers.
    "ai-sdk-mcp": ("ai", "ai-sdk", "@ai-sdk/mcp", {**RECOVERS, "tool-timeout": HANGS}),
    # The MCP client's 60 s request timeout (DEFAULT_REQUEST_TIMEOUT_MSEC), then the model.
    "openai-agents-js-mcp": ("@openai/agents", "openai-agents-js",
                             "@modelcontextprotocol/client", RECOVERS),
    "mastra-mcp": ("@mastra/core", "mastra", "@mastra/mcp", RECOVERS),
    "langgraph-js-mcp": ("@langchain/langgraph", "langgraph-js", "@langchain/mcp-adapters",
                         RECOVERS),
}


@needs_offline
@pytest.mark.slow
@pytest.mark.parametrize("name", list(LANES))
def test_mcp_lane_findings(tmp_path, name):
    pytest.importorskip("mcp")  # alk's side of MCP
    framework, program, module, expected = LANES[name]
    if isinstance(program, str):
        require_node_lane(name, framework, module, worker=program)
    else:
        require_installed(name, framework, program, imports=module)
    document = run_lane(tmp_path, name, list(expected), seed=7)
    assert document["gate"]["framework"] == framework
    assert findings(document) == expected
