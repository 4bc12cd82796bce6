"""Strands Agents through alk's model gateway (lanes/strands.toml): its OpenAI provider, the
openai SDK's streamed chat completions, in its own environment (.venvs/strands), against the
scripted model alk serves, with no network but the gateway. The findings measured with the
lane's versions are pinned, so that an upgrade that changes them is noticed."""

from __future__ import annotations

import subprocess

import pytest

from helpers.gateway_lanes import ROOT, findings, lane, needs_offline, run_lane, sampled_finding

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


def strands_installed() -> bool:
    if not PYTHON.exists():
        return False
    done = subprocess.run([str(PYTHON), "-c", "import strands.models.openai"],
                          capture_output=True)
    return done.returncode == 0


@needs_offline
def test_strands_lane_findings(tmp_path):
    if not strands_installed():
        pytest.skip(f"Strands is not installed in {PYTHON.relative_to(ROOT)}: "
                    f"{lane('strands')['install']}")
    document = run_lane(tmp_path, "strands", [*FINDINGS, "sampled"], seed=7)
    assert document["gate"]["framework"] == "strands-agents"
    found = findings(document)
    assert found.pop("sampled") == sampled_finding(document, lane("strands"))
    assert found == FINDINGS
