"""The OpenAI Agents SDK for JavaScript through alk's model gateway (lanes/openai-agents-js.toml):
its Runner on the SDK's default model path (the Responses API, unstreamed, through the openai
package's client), run by Node 24 from the lane's own npm install, against the scripted model
alk serves, with no network but the gateway. The findings measured with the lane's versions are
pinned, so that an upgrade that changes them is noticed."""

from __future__ import annotations

from helpers.gateway_lanes import (
    needs_offline,
    pinned_findings,
    require_node_lane,
)

FINDINGS = {
    "nominal": ("pass", []),
    # The openai client retries the 429 after the 0.2 s its retry-after-ms header asks for.
    "wire-429": ("pass", []),
    # A body cut short under its Content-Length: the client reads the body after its retry loop,
    # so undici's TypeError (`terminated`) ends the run; the Runner's own retries are opt-in.
    "wire-truncated": ("fail", ["fault_unrecovered"]),
    # Tool arguments that are not JSON: the tool is not run, the error goes back to the model.
    "malformed-output": ("pass", []),
}


@needs_offline
def test_openai_agents_js_lane_findings(tmp_path):
    require_node_lane("openai-agents-js", "The OpenAI Agents SDK for JavaScript",
                      "@openai/agents")
    framework, found = pinned_findings(tmp_path, "openai-agents-js", list(FINDINGS))
    assert framework == "@openai/agents"
    assert found == FINDINGS
