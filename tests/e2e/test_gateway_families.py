"""The gateway's three families through real processes: a worker that is nothing but a provider's
own client (`anthropic`, `google-genai`, `openai`), in alk's sandbox with no network, passes a
scripted lane; every fault the issue names reaches each client's real HTTP stack, and what the
client does with it is pinned here (a finding: a change of client version that changes it
shows up as this test failing, with the repeat's detail)."""

from __future__ import annotations

from pathlib import Path

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
ENDPOINTS = [("messages", False), ("messages", True), ("gemini", False), ("gemini", True)]


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


# The faults each family's clients meet in the wild, and the ones every family shares: (kind,
# extra fields, streamed or not). Status faults are asked unstreamed only (a status comes
# before any stream); what only a stream can break is asked both ways.
FAULTS = [
    ("http_529", "", False), ("http_408", "", False),
    ("http_503", "should_retry = false", False),
    ("http_429", "retry_after_s = 1, retry_after_date = true", False),
    ("stream_error", "", False), ("stream_error", "", True),
    ("no_usage", "", False), ("no_usage", "", True),
    ("finish_safety", "", False), ("finish_safety", "", True),
    ("finish_max_tokens", "", False), ("finish_max_tokens", "", True),
    ("empty_choices", "", False), ("empty_choices", "", True),
    ("unknown_tool", "", False), ("bad_tool_args", "", True), ("truncated_stream", "", True),
]
# What each client did (anthropic 2.15 and 2.16, google-genai 2.34 and 3.6, openai 3.57; 2
# retries): the repeat's outcome, "" for a pass. R: recovered (passed); U: fault_unrecovered
# (the client raised, or the run ended on the broken answer); M: fault_mishandled (the client
# went on as if the answer were whole, and the run failed); T: unrecovered through the lane's
# timeout.
SEEN = {
    "messages": "RRUR" "UU" "RM" "UU" "UM" "UU" "R" "M" "U",
    "gemini": "URRR" "UU" "RR" "UU" "UU" "UU" "R" "U" "U",
    "chat": "RRUR" "UU" "RR" "UU" "UU" "UU" "R" "U" "U",
}
# A Retry-After of 120 s, beyond the 60 s up to which the openai and anthropic clients say they
# honour one: whether the client waits it out (past the lane's timeout) or backs off on its own.
BEYOND_CAP = {"messages": "T", "gemini": "R", "chat": "T"}
CAUSES = {"R": "passed", "U": "fault_unrecovered", "M": "fault_mishandled",
          "T": "fault_unrecovered"}


def _fault_lane(tmp_path: Path, faults: list[tuple[str, str, bool]], timeout_s: int) -> Path:
    blocks = []
    for api in SEEN:
        for index, (kind, extra, stream) in enumerate(faults):
            fields = f", {extra}" if extra else ""
            blocks.append(f"""
[[scenarios]]
id = "{api}-{kind}-{index}-{'stream' if stream else 'whole'}"
task = "Prepare the report for order 742"
input = {{ api = "{api}", stream = {str(stream).lower()}, timeout_s = 2 }}
{SCRIPT}
wire_faults = [ {{ call = 2, kind = "{kind}"{fields} }} ]
{EXPECT}""")
    lane = lane_file(tmp_path, "".join(blocks))
    lane.write_text(lane.read_text().replace("timeout_s = 20", f"timeout_s = {timeout_s}"))
    return lane


def _letters(tmp_path: Path, document: dict, faults: list[tuple[str, str, bool]]
             ) -> dict[str, str]:
    """What each family's client did with each fault, a letter each (SEEN's)."""
    seen = {}
    for api in SEEN:
        letters = ""
        for index, (kind, _, stream) in enumerate(faults):
            [repeat] = scenario(document, f"{api}-{kind}-{index}-"
                                          f"{'stream' if stream else 'whole'}")["repeats"]
            calls = model_calls(tmp_path, repeat)
            assert len(calls) > 1 and calls[1]["fault"] == kind and calls[1]["api"] == api, (
                api, kind, repeat["detail"])
            letter = {"passed": "R", "fault_mishandled": "M"}.get(repeat["cause"], "U")
            if letter == "U" and "timeout" in repeat["detail"]:
                letter = "T"
            assert letter == "R" or repeat["cause"] in ("fault_unrecovered",
                                                        "fault_mishandled"), repeat["detail"]
            letters += letter
        seen[api] = letters
    return seen


@needs_offline
def test_each_familys_faults_reach_its_clients_real_http_stack(tmp_path):
    document = run(tmp_path, _fault_lane(tmp_path, FAULTS, 30), "-n", "1", "-j", "2")
    assert _letters(tmp_path, document, FAULTS) == SEEN


@needs_offline
def test_a_retry_after_beyond_the_clients_cap(tmp_path):
    faults = [("http_429", "retry_after_s = 120", False)]
    document = run(tmp_path, _fault_lane(tmp_path, faults, 12), "-n", "1", "-j", "3")
    assert _letters(tmp_path, document, faults) == BEYOND_CAP
