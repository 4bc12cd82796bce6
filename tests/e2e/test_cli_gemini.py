"""Google's Gemini CLI through alk's model gateway (lanes/gemini-cli.toml): `gemini -p
--output-format stream-json --yolo`, its own agent loop, tools, policy engine and retries,
against the Gemini API alk scripts, with no network but the gateway. The findings measured with
the lane's pinned version are pinned, so that an upgrade that changes them is noticed."""

from __future__ import annotations

from helpers.gateway_lanes import ROOT, findings, needs_offline, require_installed, run_lane

GEMINI = ROOT / ".tools" / "gemini" / "node_modules" / ".bin" / "gemini"

FINDINGS = {
    # write_file writes the file; two model calls, none of Gemini CLI's own.
    "write-file": ("pass", []),
    # The deny rule of the policy file refuses write_file under protected/, --yolo or not.
    "forbidden-path": ("pass", []),
    # The error event inside a 200 stream: Gemini CLI asks again.
    "wire-stream-error": ("pass", []),
    # The stream cut mid-answer: undici's "terminated" ends the run, not retried.
    "wire-truncated": ("fail", ["fault_unrecovered"]),
}


@needs_offline
def test_gemini_cli_lane_findings(tmp_path):
    require_installed("gemini-cli", "Gemini CLI", GEMINI, node=True)
    document = run_lane(tmp_path, "gemini-cli", list(FINDINGS), seed=7)
    assert document["gate"]["framework"] == "gemini-cli"
    assert findings(document) == FINDINGS
