"""The rule that sets a run's exit code (`alk.result.rule`), on documents alk itself made: the
default, a threshold on the pass rate, one on its Wilson lower bound, and voids that never
pass a rule."""

from __future__ import annotations

import dataclasses
import math

import pytest
from statsmodels.stats.proportion import proportion_confint

from alk.errors import UsageError
from alk.records import ExitCode
from alk.result.rule import PassRule
from alk.result.verdict import exit_code, judge

from helpers import documents


def ruled(document, rule: PassRule):
    return dataclasses.replace(document, settings=dataclasses.replace(document.settings,
                                                                      rule=rule))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # nominal 17/20 (flaky), tool_error 20/20, remote 0 scored (20 void).
    return documents.run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def lanes(tmp_path_factory):
    # a: nominal 17/20, tool_error 20/20, remote void; b: tool_error 0/20; c: tool_error 19/20.
    return documents.three_lanes(tmp_path_factory.mktemp("lanes"))


def test_by_default_any_failed_repeat_fails_the_run(run):
    ruling = judge([run])
    assert ruling.code is ExitCode.FAIL and exit_code(run) is ExitCode.FAIL
    assert ruling.failing == (("orders", "nominal"),)
    assert ruling.unscored == (("orders", "remote"),)


def test_a_threshold_on_the_rate_passes_a_flaky_scenario_at_or_above_it(run):
    nominal = run.scenario("nominal")
    assert PassRule(0.85).holds(nominal) is True  # 17/20 is exactly 0.85
    assert PassRule(0.86).holds(nominal) is False
    assert PassRule(0.85).holds(run.scenario("remote")) is None
    # Nothing fails the rule, but a scenario scored nothing: the run is void, never green.
    assert judge([ruled(run, PassRule(0.85))]).code is ExitCode.VOID
    assert judge([ruled(run, PassRule(0.9))]).code is ExitCode.FAIL


def test_the_lower_bound_is_wilsons_and_is_judged_instead_of_the_rate(run):
    nominal = run.scenario("nominal")
    low, _ = proportion_confint(17, 20, alpha=0.05, method="wilson")
    assert PassRule(0.5, lower=True).judged(nominal) == pytest.approx(low, abs=1e-9)
    assert PassRule(0.5).judged(nominal) == pytest.approx(0.85)
    assert PassRule(round(low - 0.001, 4), lower=True).holds(nominal) is True
    assert PassRule(round(low + 0.001, 4), lower=True).holds(nominal) is False
    # 20/20 clears 0.95 as a rate, not at its lower bound (about 0.84).
    clean = run.scenario("tool_error")
    assert PassRule(0.95).holds(clean) is True
    assert PassRule(0.95, lower=True).holds(clean) is False


def test_a_void_repeat_beside_passes_makes_a_passing_run_void(tmp_path):
    document = documents.mostly_void(tmp_path)  # mostly-void: 1/1 scored, 19 void
    rule = PassRule(0.8)
    assert rule.holds(document.scenario("mostly-void")) is True
    only_passing = dataclasses.replace(
        document, scenarios=tuple(s for s in document.scenarios if s.id != "nominal"))
    assert judge([ruled(only_passing, rule)]).code is ExitCode.VOID


def test_several_lanes_are_judged_together_each_by_its_own_rule(lanes):
    a, b, c = lanes
    ruling = judge([ruled(a, PassRule(0.8)), ruled(b, PassRule(0.8)), ruled(c, PassRule(0.9))])
    assert ruling.code is ExitCode.FAIL
    assert ruling.failing == (("langgraph", "tool_error"),)
    assert ruling.unscored == (("pydantic-ai", "remote"),)
    # A rule given for the call overrides each document's own.
    assert judge([c], PassRule(0.9)).code is ExitCode.PASS
    assert judge([c]).code is ExitCode.FAIL
    assert judge([]).code is ExitCode.VOID


@pytest.mark.parametrize("rule, message", [
    (PassRule(1.5), "--fail-under 1.5: expected a pass rate from 0 to 1, such as 0.95"),
    (PassRule(-0.1), "--fail-under -0.1: expected a pass rate from 0 to 1, such as 0.95"),
    (PassRule(math.nan), "--fail-under nan: expected a pass rate from 0 to 1, such as 0.95"),
    (PassRule(None, lower=True), "--fail-under-lower judges the lower bound against "
                                 "--fail-under: give both, e.g. --fail-under 0.9 "
                                 "--fail-under-lower"),
])
def test_a_rule_out_of_range_is_a_usage_error(rule, message):
    with pytest.raises(UsageError) as caught:
        rule.check()
    assert str(caught.value) == message
    assert PassRule(0.0).check() == PassRule(0.0) and PassRule(1.0).check() == PassRule(1.0)


def test_each_rule_says_itself():
    assert (PassRule().tag(), PassRule(0.95).tag(), PassRule(0.9, lower=True).tag()) == (
        "", "rate ≥ 95.0%", "lower bound ≥ 90.0%")
    assert PassRule().describe().startswith("every scored repeat must pass")
    assert "pass rate must be at least 95.0%" in PassRule(0.95).describe()
    assert "lower bound of its 95% interval, must be at least 90.0%" in (
        PassRule(0.9, lower=True).describe())
    assert all(r.describe().endswith("else a void repeat makes the run void")
               for r in (PassRule(), PassRule(0.5), PassRule(0.5, lower=True)))
