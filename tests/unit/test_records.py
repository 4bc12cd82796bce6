"""alk.records: the constructors of a repeat's record that no run in this process reaches (a
repeat void on a cluster), and what a record keeps of the gateway's evidence. A record built from
an observation is checked field by field through the executor (tests/unit/execute/)."""

from __future__ import annotations

import dataclasses
import json

from alk.attribution.outcome import void
from alk.causes import Cause
from alk.cost import TokenCost
from alk.records import Outcome, RepeatResult, RepeatSpec, Scenario
from alk.result.journal import result_from_json, result_to_json
from alk.served_model import ModelSeen

ITEM = RepeatSpec(Scenario(id="orders", task="look it up"), repeat=3, seed=41)


def test_a_repeat_void_on_a_cluster_is_never_scored_and_claims_nothing_was_observed():
    verdict = void(Cause.HARNESS_ERROR, "the task failed on the cluster: KilledWorker")
    result = RepeatResult.void(ITEM, verdict, "transcripts/R/orders/repeat-03.jsonl")
    assert (result.scenario, result.repeat, result.seed) == ("orders", 3, 41)
    assert (result.outcome, result.cause, result.detail) == (
        Outcome.LANE_INFRA, "harness_error", "the task failed on the cluster: KilledWorker")
    assert not result.scored
    assert result.transcript == "transcripts/R/orders/repeat-03.jsonl" and result.sha256 == ""
    # Nothing ran that alk saw: no process, no time, no resource, no step, no claim, no model.
    assert (result.exit_code, result.signal, result.timed_out) == (None, None, False)
    assert (result.duration_s, result.peak_rss_mb, result.cpu_s, result.peak_tmpfs_mb) == (
        0.0, None, None, None)
    assert (result.containment, result.network, result.filesystem) == (None, None, None)
    assert (result.attempts, result.violations, result.identities) == (1, 0, ())
    assert (result.trajectory, result.trajectory_hash, result.path, result.path_hash) == (
        (), "", (), "")
    assert (result.claimed, result.model) == (None, None)
    # ...and the journal keeps it as it is, for a resumed run to count.
    assert result_from_json(json.loads(json.dumps(result_to_json(result)))) == result


def test_a_record_keeps_the_gateways_counts_and_its_first_twenty_faults():
    seen = ModelSeen(calls=9, turns=4, retries=3, prompt_tokens=120, completion_tokens=45,
                     faults_fired=tuple(f"http_429@{n}" for n in range(1, 22)),
                     steps=("200:lookup",))
    assert seen.summary() == {"calls": 9, "turns": 4, "retries": 3, "prompt_tokens": 120,
                              "completion_tokens": 45,
                              "faults": [f"http_429@{n}" for n in range(1, 21)],
                              "cost": None}
    # The provider's own count, apart from the gateway's (in script mode an estimate).
    paid = dataclasses.replace(seen, cost=TokenCost("provider", 100, 40, calls=2))
    assert paid.summary()["cost"] == {"source": "provider", "input_tokens": 100,
                                      "output_tokens": 40, "calls": 2, "unreported": 0,
                                      "clamped": 0, "refused": 0}


def test_what_the_gateway_refused_is_in_the_summary_only_when_it_refused_some() -> None:
    assert ModelSeen(over_bounds=3).summary()["over_bounds"] == 3
    assert "over_bounds" not in ModelSeen().summary()
