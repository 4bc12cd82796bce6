"""Google ADK through alk's model gateway (lanes/adk.toml): its Runner and default Gemini model,
google-genai's client asking generateContent of the Gemini API the gateway serves, in its own
environment (.venvs/adk), with no network but the gateway. The findings measured with the
lane's versions are pinned, so that an upgrade that changes them is noticed."""

from __future__ import annotations

from helpers.gateway_lanes import (
    ROOT,
    findings,
    lane,
    needs_offline,
    require_installed,
    run_lane,
    sampled_finding,
)

PYTHON = ROOT / ".venvs" / "adk" / "bin" / "python"

FINDINGS = {
    "nominal": ("pass", []),
    # The tool's exception is not given to the model: it propagates out of run_async.
    "tool-raises": ("fail", ["fault_unrecovered"]),
    # ADK's Gemini model gives google-genai no retry options, and then the client never retries.
    "wire-429": ("fail", ["fault_unrecovered"]),
    # A MALFORMED_FUNCTION_CALL finish ends the run with an error event, the model not asked
    # again.
    "wire-bad-args": ("fail", ["fault_unrecovered"]),
}


@needs_offline
def test_adk_lane_findings(tmp_path):
    require_installed("adk", "Google ADK", PYTHON, imports="google.adk.runners")
    document = run_lane(tmp_path, "adk", [*FINDINGS, "sampled"], seed=7)
    assert document["gate"]["framework"] == "google-adk"
    found = findings(document)
    assert found.pop("sampled") == sampled_finding(document, lane("adk"))
    assert found == FINDINGS
