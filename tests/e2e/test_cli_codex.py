"""OpenAI's Codex CLI through alk's model gateway (lanes/codex.toml): `codex exec --json`, its
own agent loop, tools and retries, against the Responses API alk scripts, with no network but
the gateway. The findings measured with the lane's pinned version are pinned, so that an
upgrade that changes them is noticed."""

from __future__ import annotations

from helpers.gateway_lanes import ROOT, findings, needs_offline, require_installed, run_lane

CODEX = ROOT / ".tools" / "codex" / "node_modules" / ".bin" / "codex"

FINDINGS = {
    # An apply_patch heredoc in exec_command: Codex applies the patch itself, two model calls.
    "write-file": ("pass", []),
    # The patch under protected/ (read-only to the agent) fails; the run still ends.
    "forbidden-path": ("pass", []),
    # The stream cut mid-answer: Codex reconnects and asks again.
    "wire-truncated": ("pass", []),
}


@needs_offline
def test_codex_lane_findings(tmp_path):
    require_installed("codex", "the Codex CLI", CODEX, node=True)
    document = run_lane(tmp_path, "codex", list(FINDINGS), seed=7)
    assert document["gate"]["framework"] == "codex"
    assert findings(document) == FINDINGS
