"""OpenAI's Codex CLI through alk's model gateway (lanes/codex.toml): `codex exec --json`, its
own agent loop, tools and retries, against the Responses API alk scripts, with no network but
the gateway. The findings measured with the lane's pinned version are pinned, so that an
upgrade that changes them is noticed."""

from __future__ import annotations

import shutil

import pytest
from helpers.gateway_lanes import ROOT, findings, lane, needs_offline, run_lane

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
    if not CODEX.exists() or shutil.which("node") is None:
        pytest.skip(f"the Codex CLI is not installed in {CODEX.parents[2].relative_to(ROOT)}"
                    f" (or no node on PATH): {lane('codex')['install']}")
    document = run_lane(tmp_path, "codex", list(FINDINGS), seed=7)
    assert document["gate"]["framework"] == "codex"
    assert findings(document) == FINDINGS
