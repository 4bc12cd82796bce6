"""LlamaIndex through alk's model gateway (lanes/llamaindex.toml): a FunctionAgent with
LlamaIndex's OpenAILike model, the openai SDK's streamed chat completions, in its own environment
(.venvs/llamaindex), against the scripted model alk serves, with no network but the gateway. The
findings measured with the lane's versions are pinned, so that an upgrade that changes them is
noticed."""

from __future__ import annotations

from helpers.framework_lanes import measured, venv_problem
from helpers.gateway_lanes import needs_offline

FINDINGS = {
    "nominal": ("pass", []),
    # A stream cut mid-message: httpx's ReadError while the agent reads it; neither the SDK nor
    # LlamaIndex's retry (around the request, not the stream) tries again.
    "wire-truncated": ("fail", ["fault_unrecovered"]),
    # Arguments cut mid-JSON are repaired by LlamaIndex's partial-JSON parser into
    # {"order": None}, and the tool runs with it: a report for no order, then the right one.
    "wire-bad-args": ("fail", ["fault_mishandled"]),
    # The same parser with the script's own cut arguments: lookup_order runs with
    # {"order": None} before the model asks again.
    "malformed-output": ("fail", ["script_not_followed"]),
}


@needs_offline
def test_llamaindex_lane_findings(tmp_path):
    problem = venv_problem("llamaindex", "llama_index.llms.openai_like")
    assert measured(tmp_path, "llamaindex", "llamaindex", [*FINDINGS], problem) == FINDINGS
