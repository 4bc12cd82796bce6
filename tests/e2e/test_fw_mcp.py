"""The framework lanes whose tools alk serves over MCP, through each framework's own MCP
client, with no network but the gateway: the findings measured with the versions `make test`
installs (openai-agents 0.24, mcp 2.3) are pinned, so that an upgrade that changes what a
framework does with a tool that fails, hangs, is slow or answers malformed is noticed."""

from __future__ import annotations

import importlib.util

import pytest

from helpers.gateway_lanes import findings, needs_offline, run_lane

PASS = ("pass", [])
LANES = {
    "openai-agents-mcp": ("openai-agents", ["agents", "mcp"], {
        "nominal": PASS,
        # The error result reaches the model, which calls the tool again.
        "tool-error": PASS,
        # The client's 5 s session timeout ends the call alk never answers.
        "tool-timeout": PASS,
        "tool-slow": PASS,
        # The client fails on the result; the effect alk made is there once.
        "tool-malformed": PASS,
        # Judged from alk's own record: the resumed run wrote again.
        "crash-after-effect": ("fail", ["effect_repeated"]),
    }),
}


@needs_offline
@pytest.mark.parametrize("name", list(LANES))
def test_mcp_lane_findings(tmp_path, name):
    framework, modules, expected = LANES[name]
    if absent := [m for m in modules if importlib.util.find_spec(m) is None]:
        pytest.skip(f"{', '.join(absent)} not installed: pip install -e '.[openai-agents,tools]'")
    document = run_lane(tmp_path, name, list(expected), seed=7)
    assert document["gate"]["framework"] == framework
    assert findings(document) == expected
