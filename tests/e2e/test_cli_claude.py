"""The Claude Agent SDK and the Claude Code CLI as lanes (lanes/claude-agent-sdk.toml,
lanes/claude-code.toml), run through `alk run` against the scripted Anthropic gateway, in the
SDK's own environment (.venvs/claude, whose package bundles the Claude Code binary both run).
The findings measured with the pinned versions are pinned, so that an upgrade that changes one
is noticed; the checks are the workspace's files and the calls the gateway served."""

from __future__ import annotations

import pytest
from helpers.gateway_lanes import ROOT, findings, needs_offline, require_installed, run_lane

PYTHON = ROOT / ".venvs" / "claude" / "bin" / "python"

FINDINGS = {
    # The Write tool's file is in the workspace, with what the script wrote.
    "write-file": ("pass", []),
    # Read, Edit and Bash: the test the agent ran reports the fix (test-report.json).
    "fix-test": ("pass", []),
    # The write under protected/ is refused (the CLI's deny rule; the SDK worker's callback)
    # and the run still ends with an answer.
    "forbidden-path": ("pass", []),
    # Anthropic's overload: Claude Code retries it.
    "wire-529": ("pass", []),
    # Arguments that do not parse: the tool does not run, the model is asked again.
    "wire-bad-args": ("pass", []),
}
# Claude Code's deny rule in its user settings let the write through in 1 of 20 repeats of the
# CLI's lane (the file made, the answer the script's). A repeat that fails so is run again, up
# to three in all, and one of them must pass: a rule that never holds fails the test.
SOMETIMES = {"claude-code": {"forbidden-path": ("fail", ["script_not_followed"])}}
# The calls the gateway served for write-file: the tool turn and the answer, none of Claude
# Code's own (titles, quota checks, telemetry), which the workers' settings turn off.
WRITE_FILE_CALLS = 2


@needs_offline
@pytest.mark.parametrize("name, framework", [("claude-code", "claude-code"),
                                             ("claude-agent-sdk", "claude-agent-sdk")])
def test_claude_lane_findings(tmp_path, name, framework):
    require_installed(name, "the Claude Agent SDK", PYTHON, imports="claude_agent_sdk")
    document = run_lane(tmp_path, name, [*FINDINGS], seed=7)
    assert document["gate"]["framework"] == framework
    found = findings(document)
    for sid, failure in SOMETIMES.get(name, {}).items():
        for seed in (8, 9):
            if found[sid] != failure:
                break
            found[sid] = findings(run_lane(tmp_path, name, [sid], seed=seed))[sid]
    assert found == FINDINGS
    [write_file] = [s for s in document["scenarios"] if s["id"] == "write-file"]
    assert [r["model"]["calls"] for r in write_file["repeats"]] == [WRITE_FILE_CALLS]
