"""The Vercel AI SDK through alk's model gateway (lanes/ai-sdk.toml): generateText's tool loop on
@ai-sdk/openai's default model path (the Responses API, unstreamed), run by Node 24 from the
lane's own npm install, against the scripted model alk serves, with no network but the gateway.
The findings measured with the lane's versions are pinned, so that an upgrade that changes them
is noticed."""

from __future__ import annotations

from helpers.gateway_lanes import (
    needs_offline,
    pinned_findings,
    require_node_lane,
)

FINDINGS = {
    "nominal": ("pass", []),
    # A body cut short under its Content-Length: undici's `terminated` (UND_ERR_SOCKET) is a
    # network error to the SDK, which retries it after its 2 s backoff.
    "wire-truncated": ("pass", []),
    # A 200 whose body is not JSON: APICallError "Invalid JSON response", not retryable.
    "wire-malformed": ("fail", ["fault_unrecovered"]),
    # Tool arguments that are not JSON: the tool is not run, the error goes back to the model.
    "malformed-output": ("pass", []),
}


@needs_offline
def test_ai_sdk_lane_findings(tmp_path):
    require_node_lane("ai-sdk", "The AI SDK", "ai")
    framework, found = pinned_findings(tmp_path, "ai-sdk", list(FINDINGS))
    assert framework == "ai"
    assert found == FINDINGS
