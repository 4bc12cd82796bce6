"""Strands Agents through alk's model gateway (lanes/strands.toml): its OpenAI provider, the
openai SDK's streamed chat completions, in its own environment (.venvs/strands), against the
scripted model alk serves, with no network but the gateway. The findings measured with the
lane's versions are pinned, so that an upgrade that changes them is noticed."""

from __future__ import annotations

from helpers.gateway_lanes import (
    ROOT,
    needs_offline,
    pinned_findings,
    require_installed,
)

PYTHON = ROOT / ".venvs" / "strands" / "bin" / "python"

FINDINGS = {
    "nominal": ("pass", []),
    # The openai SDK retries the 429 after the 0.2 s its retry-after-ms header asks for.
    "wire-429": ("pass", []),
    # A stream cut mid-message: httpx's ReadError, wrapped in Strands' EventLoopException; the
    # SDK does not retry inside a stream, and Strands retries throttling alone.
    "wire-truncated": ("fail", ["fault_unrecovered"]),
    # Tool arguments that are not JSON: the tool is not run, the error goes back to the model.
    "malformed-output": ("pass", []),
}


@needs_offline
def test_strands_lane_findings(tmp_path):
    require_installed("strands", "Strands", PYTHON, imports="strands.models.openai")
    framework, found = pinned_findings(tmp_path, "strands", list(FINDINGS))
    assert framework == "strands-agents"
    assert found == FINDINGS
