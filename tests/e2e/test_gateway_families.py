"""The gateway's three families through real processes: a worker that is nothing but a provider's
own client (`anthropic`, `google-genai`, `openai`), in alk's sandbox with no network, passes a
scripted lane; every fault the issue names reaches each client's real HTTP stack, and what the
client does with it is pinned here (a finding: a change of client version that changes it
shows up as this test failing, with the repeat's detail)."""

from __future__ import annotations

import pytest
from helpers.gateway_runs import (
    EXPECT,
    SCRIPT,
    lane_file,
    model_calls,
    needs_offline,
    run,
    scenario,
)

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

# (api, stream): each family, whole and streamed.
ENDPOINTS = [("gemini", False), ("gemini", True)]


@needs_offline
def test_each_familys_own_client_passes_a_scripted_lane_with_no_network(tmp_path):
    blocks = "".join(f"""
[[scenarios]]
id = "{api}-{'stream' if stream else 'whole'}"
task = "Prepare the report for order 742"
input = {{ api = "{api}", stream = {str(stream).lower()} }}
{SCRIPT}
{EXPECT}
model_calls = 3
""" for api, stream in ENDPOINTS)
    document = run(tmp_path, lane_file(tmp_path, blocks), "-n", "1")
    for api, stream in ENDPOINTS:
        [repeat] = scenario(document, f"{api}-{'stream' if stream else 'whole'}")["repeats"]
        assert (repeat["outcome"], repeat["network"]) == ("pass", "none"), repeat["detail"]
        calls = model_calls(tmp_path, repeat)
        # One kind of call whatever the family: the same fields, tools and turns.
        assert [(c["api"], c["status"], c["tool_calls"], c["turn"]) for c in calls] == [
            (api, 200, ["lookup_order"], 0), (api, 200, ["write_report"], 1), (api, 200, [], 2)]
        assert all(c["stream"] is stream and c["tokens"]["prompt"] > 0 for c in calls)
