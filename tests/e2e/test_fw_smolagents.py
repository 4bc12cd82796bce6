"""smolagents through alk's model gateway (lanes/smolagents.toml): a ToolCallingAgent with
smolagents' OpenAIServerModel, the openai SDK's non-streamed chat completions, against the
scripted model alk serves, with no network but the gateway. The findings measured with the
lane's versions are pinned, so that an upgrade that changes them is noticed."""

from __future__ import annotations

from helpers.framework_lanes import dist_problem, measured
from helpers.gateway_lanes import needs_offline

FINDINGS = {
    "nominal": ("pass", []),
    # A 200 whose body is not JSON: the SDK's JSONDecodeError, not retried, which smolagents
    # wraps in AgentGenerationError and ends the run with.
    "wire-malformed": ("fail", ["fault_unrecovered"]),
    # Tool arguments that are not JSON are handed to the one-argument tool as its string: the
    # report is written for order '{"order": "742', then again when the model asks properly.
    "wire-bad-args": ("fail", ["fault_mishandled"]),
    # The same with the script's own cut arguments: lookup_order runs with order '{"order": '
    # before the model asks again.
    "malformed-output": ("fail", ["script_not_followed"]),
}


@needs_offline
def test_smolagents_lane_findings(tmp_path):
    problem = dist_problem("smolagents", "smolagents")
    assert measured(tmp_path, "smolagents", "smolagents", [*FINDINGS], problem) == FINDINGS
