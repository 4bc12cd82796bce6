"""Which interval the result record gives a scenario's pass rate: Wilson's at a fixed number of
repeats, Clopper–Pearson's (checked against statsmodels) when an adaptive run's stop rule chose
the number, and for a sampled scenario of an adaptive run the interval exact over the rule's
stopping points."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from statsmodels.stats.proportion import proportion_confint

from alk.plan import build_plan
from alk.records import Execution, Lane, Preflight, Scenario
from alk.result.document import build_document
from alk.result.options import Adaptive
from alk.stats.stopped_interval import StopRule, stopped_interval

from helpers.views import RUN, repeat

STARTED = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)


SAMPLED = ({"choices": [{"weight": 1, "text": "a"}, {"weight": 1, "text": "b"}]},)


def built(adaptive: Adaptive | None, script: tuple = ()):
    lane = Lane(
        name="demo", description="", framework="pydantic-ai", requirement=">=1.0,<2",
        command=("{python}", "worker.py"), required_env=(), timeout_s=30.0, repeats=20,
        scenarios=(Scenario("nominal", "t", script=script),), path=Path("lanes/demo.toml"),
        root=Path("."), transcript_cap_bytes=1 << 20)
    plan = build_plan(lane, RUN, seed=1, shuffle=lambda order: None, adaptive=adaptive,
                      repeats=adaptive.max_repeats if adaptive else 20)
    repeats = [repeat(n, "agent", "wrong_output") if n in (3, 9) else repeat(n)
               for n in range(1, 21)]
    return build_document(plan, Execution(preflight=Preflight(True, "pydantic-ai", "1.0.3"),
                                           void=None, repeats=repeats),
                          status="complete", started_at=STARTED, finished_at=STARTED,
                          harness_peak_rss_mb=1.0, adaptive=adaptive)


def test_an_adaptive_runs_scenarios_get_clopper_pearson_and_a_fixed_runs_wilson() -> None:
    [adaptive] = built(Adaptive()).scenarios
    assert adaptive.stats.ci_method == "clopper-pearson"
    assert adaptive.stats.ci == pytest.approx(
        proportion_confint(18, 20, alpha=0.05, method="beta"), abs=1e-10)
    [fixed] = built(None).scenarios
    assert fixed.stats.ci_method == "wilson"
    assert fixed.stats.ci == pytest.approx(
        proportion_confint(18, 20, alpha=0.05, method="wilson"), abs=1e-12)


def test_an_adaptive_runs_sampled_scenario_gets_the_interval_exact_over_its_stopping_points():
    rules = Adaptive(max_repeats=40, ci_width=0.3, round_size=4)
    [sampled] = built(rules, SAMPLED).scenarios
    assert sampled.stats.ci_method == "exact-stopped"
    assert sampled.stats.ci == stopped_interval(18, 20, StopRule(4, 0.3, 40))
    # Not Clopper–Pearson's: the stop rule changes it.
    assert sampled.stats.ci[0] != pytest.approx(
        proportion_confint(18, 20, alpha=0.05, method="beta")[0], abs=1e-6)
    [fixed] = built(None, SAMPLED).scenarios
    assert fixed.stats.ci_method == "wilson"
