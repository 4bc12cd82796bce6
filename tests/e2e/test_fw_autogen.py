"""AutoGen AgentChat through alk's model gateway (lanes/autogen.toml): an AssistantAgent with
AutoGen's OpenAIChatCompletionClient, the openai SDK's chat completions, against the scripted
model alk serves, with no network but the gateway. The findings measured with the lane's
versions are pinned, so that an upgrade that changes them is noticed."""

from __future__ import annotations

from importlib import metadata

import pytest
from packaging.specifiers import SpecifierSet

from helpers.gateway_lanes import findings, lane, needs_offline, run_lane, sampled_finding

FINDINGS = {
    "nominal": ("pass", []),
    # A non-streamed body cut mid-JSON is a transport error to the openai SDK: retried.
    "wire-truncated": ("pass", []),
    # A 200 whose body is not JSON: the SDK's JSONDecodeError, not retried, ends the run.
    "wire-malformed": ("fail", ["fault_unrecovered"]),
    # Tool arguments that are not JSON: the tool is not run, the error goes back to the model.
    "malformed-output": ("pass", []),
}


def autogen_problem() -> str | None:
    """Why the lane cannot run with this interpreter's AutoGen, or None."""
    wanted = SpecifierSet(lane("autogen")["version"])
    try:
        found = metadata.version("autogen-agentchat")
        metadata.version("autogen-ext")
    except metadata.PackageNotFoundError:
        return "AutoGen AgentChat is not installed"
    if found not in wanted:
        return f"autogen-agentchat {found} is installed, the lane needs {wanted}"
    return None


@needs_offline
def test_autogen_lane_findings(tmp_path):
    problem = autogen_problem()
    if problem:
        pytest.skip(f"{problem}: {lane('autogen')['install']}")
    document = run_lane(tmp_path, "autogen", [*FINDINGS, "sampled"], seed=7)
    assert document["gate"]["framework"] == "autogen-agentchat"
    found = findings(document)
    assert found.pop("sampled") == sampled_finding(document, lane("autogen"))
    assert found == FINDINGS
