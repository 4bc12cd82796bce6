"""alk.report.charts: each chart's data is the document's, worker text reaches no figure
unescaped, and a chart with nothing to draw is left out. The documents are alk's own
(`documents.py`: `run_lane` with a scripted runner) or hand-made repeats where a shape is rare."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterator

import pytest
from helpers import documents
from helpers.trajectories import repeat, scenario_of

from alk.records import Outcome
from alk.report.html import figure, rate_charts, spread_charts
from alk.report.html.charts import run_charts
from alk.report.html.figure import Chart, plotly_js
from alk.result.document import ModelTotals, RunDocument
from alk.result.rule import PassRule
from alk.served_model import ModelSeen
from alk.stats.pass_k import pass_hat_k_at
from alk.stats.summary import summarize_lane

HOSTILE = "<img src=x onerror=alert(1)>"
TEMPLATE = "%{x}<b>"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> RunDocument:
    """nominal: flaky, two tool paths; tool_error: every repeat passes; remote: all void."""
    return documents.run(tmp_path_factory.mktemp("run"))


def by_id(made: tuple[Chart, ...]) -> dict[str, Chart]:
    return {chart.id: chart for chart in made}


def traces(chart: Chart) -> list[dict[str, Any]]:
    return chart.figure["data"]


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item)


def with_rule(document: RunDocument, rule: PassRule) -> RunDocument:
    return dataclasses.replace(document, settings=dataclasses.replace(document.settings,
                                                                      rule=rule))


def with_scenarios(document: RunDocument, *scenarios) -> RunDocument:
    return dataclasses.replace(document, scenarios=tuple(scenarios),
                               aggregate=summarize_lane([s.stats for s in scenarios]))


# -- what a run shows ---------------------------------------------------------------------------


def test_a_run_has_its_charts_in_reading_order(run):
    made = run_charts([run])
    # No gateway: no model chart. nominal took two paths: its divergence.
    assert [c.id for c in made] == ["chart-pass-rate", "chart-pass-k", "chart-failures",
                                    "chart-durations", "chart-divergence-1"]
    for chart in made:
        assert chart.title and chart.caption.endswith(".")
        assert set(chart.figure) == {"data", "layout"} and chart.figure["data"]
        assert chart.config["displaylogo"] is False and chart.config["responsive"] is True
        # Responsive width, fixed height: it prints as it shows.
        assert "width" not in chart.figure["layout"] and chart.figure["layout"]["height"] > 0
        json.dumps(chart.figure)  # plain JSON, nothing numpy


def test_the_pass_rate_bars_and_whiskers_are_the_statistics(run):
    (bar,) = traces(by_id(run_charts([run]))["chart-pass-rate"])
    scored = [s.stats for s in run.scenarios if s.stats.counts.scored]
    assert list(bar["y"]) == ["nominal", "tool_error"]  # remote scored nothing: no bar
    assert list(bar["x"]) == [s.pass_rate for s in scored]
    assert list(bar["error_x"]["array"]) == [s.ci[1] - s.pass_rate for s in scored]
    assert list(bar["error_x"]["arrayminus"]) == [s.pass_rate - s.ci[0] for s in scored]
    # The verdict in words, not by colour alone.
    assert list(bar["text"]) == ["85% flaky", "100% pass"]


def test_the_rule_threshold_is_drawn_only_when_the_rule_has_one(run):
    plain = by_id(run_charts([run]))["chart-pass-rate"].figure["layout"]
    assert not [shape for shape in plain.get("shapes", ()) if shape["type"] == "line"]
    ruled = by_id(run_charts([with_rule(run, PassRule(0.955, lower=True))]))["chart-pass-rate"]
    (line,) = [shape for shape in ruled.figure["layout"]["shapes"] if shape["type"] == "line"]
    assert (line["x0"], line["x1"]) == (0.955, 0.955)
    # As the rule's sentence says it, never rounded to a threshold it is not (96%).
    assert ruled.figure["layout"]["annotations"][0]["text"] == "rule: lower bound ≥ 95.5%"
    assert "threshold" in ruled.caption


def test_a_scenario_with_no_bar_to_hold_its_words_has_them_beside_it(run):
    nominal = run.scenarios[0]
    failed = scenario_of(*(repeat(i, ("a:ok",), passed=False) for i in range(1, 6)), sid="down")
    chart = by_id(run_charts([with_scenarios(run, nominal, failed)]))["chart-pass-rate"]
    bar, cross = traces(chart)
    assert list(bar["text"]) == ["85% flaky", ""]
    assert [(a["y"], a["text"]) for a in chart.figure["layout"]["annotations"]] == [
        ("down", "<b>0% fail</b>")]
    # A 0% bar is no bar: a cross marks its rate, in the verdict's colour.
    assert (list(cross["x"]), list(cross["y"]), cross["marker"]["symbol"]) == ([0.0], ["down"],
                                                                               "x")
    assert cross["marker"]["color"] == [figure.VERMILLION]


def test_the_rows_that_break_the_rule_are_shaded_and_marked_not_by_colour_alone(run):
    nominal = run.scenarios[0]  # flaky: under the default rule it breaks it
    failed = scenario_of(*(repeat(i, ("a:ok",), passed=False) for i in range(1, 6)), sid="down")
    steady = scenario_of(*(repeat(i, ("a:ok",)) for i in range(1, 6)), sid="steady")
    chart = by_id(run_charts([with_scenarios(run, nominal, steady, failed)]))["chart-pass-rate"]
    layout = chart.figure["layout"]
    bands = [(shape["y0"], shape["y1"]) for shape in layout["shapes"] if shape["type"] == "rect"]
    assert bands == [(-0.5, 0.5), (1.5, 2.5)]  # rows 0 and 2: nominal and down, not steady
    axis = layout["yaxis"]
    assert list(axis["tickvals"]) == ["nominal", "steady", "down"]
    assert list(axis["ticktext"]) == ["✗ nominal", "steady", "✗ down"]
    assert "shaded and marked ✗" in chart.caption
    # Under a rule of 50% the flaky one meets it: only the one at 0% is shaded.
    ruled = with_rule(with_scenarios(run, nominal, steady, failed), PassRule(0.5))
    layout = by_id(run_charts([ruled]))["chart-pass-rate"].figure["layout"]
    assert [shape["y0"] for shape in layout["shapes"] if shape["type"] == "rect"] == [1.5]


def test_pass_k_draws_each_scenarios_curve_and_the_lane_mean(run):
    drawn = traces(by_id(run_charts([run]))["chart-pass-k"])
    lines = [trace for trace in drawn if trace.get("showlegend") is not False]
    assert [line["name"] for line in lines] == ["nominal", "tool_error", "lane mean"]
    for line, scenario in zip(lines, run.scenarios[:2]):
        assert list(line["x"]) == list(scenario.stats.curve.k)
        assert list(line["y"]) == list(scenario.stats.curve.pass_hat_k)
    assert list(lines[-1]["y"]) == list(run.aggregate.curve.pass_hat_k)


def test_each_pass_k_curve_has_its_95_interval_as_a_band_the_tables_interval(run):
    chart = by_id(run_charts([run]))["chart-pass-k"]
    drawn = traces(chart)
    for stats, name in ((run.scenarios[0].stats, "nominal"), (run.scenarios[1].stats,
                                                              "tool_error"),
                        (run.aggregate, "lane mean")):
        high, low, line = [t for t in drawn if t.get("legendgroup") == name]
        assert (low["fill"], line["name"]) == ("tonexty", name)  # filled up to the high edge
        estimates = [pass_hat_k_at(stats, k) for k in stats.curve.k]
        assert list(low["x"]) == list(high["x"]) == list(stats.curve.k)
        assert list(low["y"]) == [e.low for e in estimates]
        assert list(high["y"]) == [e.high for e in estimates]
        assert all(lo <= v <= hi for lo, v, hi in zip(low["y"], line["y"], high["y"]))
        assert line["customdata"][0][1] == (f"[{estimates[0].low:.1%} to "
                                            f"{estimates[0].high:.1%}]")
    # nominal is flaky: its band is there to read, not a line's width.
    nominal_low = [t for t in drawn if t.get("legendgroup") == "nominal"][1]
    assert nominal_low["y"][4] < 0.6
    assert "95% interval" in chart.caption and "Wilson interval raised to the power k" in (
        chart.caption)


def test_the_lane_means_band_stops_where_it_would_cost_too_much(run, monkeypatch):
    monkeypatch.setattr(rate_charts, "BAND_TERMS", 2_000)
    chart = by_id(run_charts([run]))["chart-pass-k"]
    high, low, line = [t for t in traces(chart) if t.get("legendgroup") == "lane mean"]
    assert 0 < len(low["x"]) < len(line["x"])
    assert line["customdata"][-1][1] == "(no interval drawn)"
    assert "The mean's band stops" in chart.caption


@pytest.mark.parametrize("repeats, k_step, count_step",
                         [(3, 1, 1), (20, 2, 1), (40, 5, 2), (130, None, 5)])
def test_counts_and_k_are_told_on_whole_numbers_only(run, repeats, k_step, count_step):
    # Plotly ticks a range of 3 at 0.5, 1, 1.5…: a k or a count of repeats is never 1.5.
    flaky = scenario_of(*(repeat(i, ("a:ok",), passed=i % 3 != 1) for i in range(1, repeats + 1)))
    made = by_id(run_charts([with_scenarios(run, flaky)]))
    k_axis = made["chart-pass-k"].figure["layout"]["xaxis"]
    count_axis = made["chart-failures"].figure["layout"]["xaxis"]
    whole = {"tickmode": "linear", "tick0": 0, "tickformat": "d"}
    assert {key: count_axis[key] for key in whole} == whole
    assert count_axis["dtick"] == count_step  # ten ticks at most
    if k_step is None:  # past 50 repeats k is drawn on a log axis: 1, 10, 100
        assert (k_axis["type"], k_axis["tickformat"]) == ("log", "d")
    else:
        assert {key: k_axis[key] for key in whole} == whole and k_axis["dtick"] == k_step


def test_the_stacked_failures_add_up_to_the_repeats_that_did_not_pass(run):
    chart = by_id(run_charts([run]))["chart-failures"]
    bars = traces(chart)
    rows = list(bars[0]["y"])
    # A row only for a scenario with a repeat that did not pass: tool_error passed them all.
    assert rows == ["nominal", "remote"]
    assert "No failures in 1 scenario: it has no row." in chart.caption
    failing = [s for s in run.scenarios if s.id in rows]
    for index, scenario in enumerate(failing):
        stacked = sum(bar["x"][index] or 0 for bar in bars)
        assert stacked == scenario.stats.counts.completed - scenario.stats.counts.passed
    # One trace a (layer, what happened, cause): its totals are the statistics' causes.
    causes = {bar["customdata"][0][2]: sum(n or 0 for n in bar["x"]) for bar in bars}
    assert causes == {cause: n for cause, n in run.aggregate.causes if cause != "passed"}
    # The layer is told by pattern as well as colour.
    shapes = {bar["legendgroup"]: bar["marker"]["pattern"]["shape"] for bar in bars}
    assert shapes == {"framework_runtime": "/", "agent": ".", "lane_infra": "x"}


def test_a_failure_bar_says_what_happened_under_the_layer_that_failed(run):
    """Issue 24: the legend named the framework's layer "framework crashed" and the agent's
    "agent answered wrongly", guesses; a fault not recovered from read "framework crashed"
    when the worker stopped with an error. The layer's title says whose failure it is, the
    bar what happened, its hover the code."""
    def failed(number: int, cause: str, detail: str, outcome: Outcome):
        return dataclasses.replace(repeat(number, ("a:ok",), outcome=outcome), cause=cause,
                                   detail=detail)

    stopped = failed(1, "fault_unrecovered", "the gateway injected malformed_json@call1 and no "
                     "model call after it was answered in full; then wrong_stop_reason: "
                     'stop_reason: expected "accepted", got "error:JSONDecodeError"',
                     Outcome.FRAMEWORK_RUNTIME)
    crashed = failed(2, "fault_unrecovered", "the worker injected tool#2; then "
                     "framework_exception: exit code 1; RuntimeError: boom",
                     Outcome.FRAMEWORK_RUNTIME)
    twice = failed(3, "effect_repeated", "alk killed the worker ...", Outcome.FRAMEWORK_RUNTIME)
    mistake = failed(4, "wrong_tool_calls", "tool_calls.write_report: expected 1, got 0",
                     Outcome.AGENT)
    document = with_scenarios(run, scenario_of(stopped, crashed, twice, mistake))
    bars = traces(by_id(run_charts([document]))["chart-failures"])
    shown = sorted((bar["legendgrouptitle"]["text"], bar["name"], bar["customdata"][0][2])
                   for bar in bars)
    assert shown == [("agent: model or agent code", "wrong tool calls", "wrong_tool_calls"),
                     ("framework runtime", "crash after a fault", "fault_unrecovered"),
                     ("framework runtime", "effect repeated on resume", "effect_repeated"),
                     ("framework runtime", "error stop after a fault", "fault_unrecovered")]
    assert not any("crashed" in text or "wrongly" in text for bar in bars
                   for text in strings(bar["legendgrouptitle"]))


def test_the_duration_boxes_hold_each_scored_repeats_duration(run):
    boxes = traces(by_id(run_charts([run]))["chart-durations"])
    assert [box["name"] for box in boxes] == ["nominal", "tool_error"]
    for box, scenario in zip(boxes, run.scenarios):
        assert list(box["x"]) == [r.duration_s for r in scenario.repeats if r.scored]


def test_a_scenario_of_many_repeats_is_drawn_from_its_quartiles(run):
    many = scenario_of(*(repeat(i, ("a:ok",), duration_s=float(i))
                         for i in range(1, spread_charts.MAX_POINTS + 2)))
    (box,) = traces(by_id(run_charts([with_scenarios(run, many)]))["chart-durations"])
    assert "x" not in box
    n = spread_charts.MAX_POINTS + 1
    assert [box["lowerfence"], box["median"], box["upperfence"]] == [[1.0], [(n + 1) / 2],
                                                                     [float(n)]]
    assert list(box["q1"]) == [1 + (n - 1) / 4]


def test_model_calls_and_retries_are_per_repeat_means_of_the_gateways_totals(tmp_path):
    seen = [ModelSeen(calls=3 + i % 2, retries=i % 3) for i in range(6)]
    document = documents.made(tmp_path, documents.observation(0.3), repeats=6, served=[
        documents.observation(1.0, model=m) for m in seen], plain=documents.passing(6))
    chart = by_id(run_charts([document]))["chart-model"]
    calls, retries = traces(chart)
    assert list(calls["y"]) == list(retries["y"]) == ["served"]  # plain had no gateway
    assert list(calls["x"]) == [sum(m.calls for m in seen) / 6]
    assert list(retries["x"]) == [sum(m.retries for m in seen) / 6]
    assert retries["marker"]["pattern"]["shape"] == "/"


def test_the_divergence_icicle_is_the_tree_with_counts_and_pass_shares(run):
    (icicle,) = traces(by_id(run_charts([run]))["chart-divergence-1"])
    nominal = run.scenarios[0]
    kept = [r for r in nominal.repeats if r.scored]
    rows = dict(zip(icicle["ids"], zip(icicle["labels"], icicle["values"],
                                       icicle["marker"]["colors"])))
    assert rows["s"] == ("start", len(kept), sum(r.passed for r in kept) / len(kept))
    # Below the start, two first steps with their repeats; the ends are branches too.
    first = {label: value for node_id, (label, value, _) in rows.items()
             if node_id.count(".") == 1}
    on_error = sum(r.trajectory[0] == "lookup_order:error" for r in kept)
    assert first == {"lookup_order:ok": len(kept) - on_error, "lookup_order:error": on_error}
    assert sum(label == "(end)" for label, _, _ in rows.values()) == 2
    for node_id, (_, value, _) in rows.items():
        children = [v for other, (_, v, _) in rows.items()
                    if other.rpartition(".")[0] == node_id and other != node_id]
        if node_id != "s" and children:
            assert sum(children) == value


def test_a_long_shared_prefix_is_one_cell_and_unkept_repeats_are_counted(run):
    common = tuple(f"step{i}:ok" for i in range(5))
    repeats = [repeat(1, common + ("a:ok",)), repeat(2, common + ("b:ok",), passed=False),
               repeat(3, common + ("a:ok",)), repeat(4, ("lost:ok",), kept=False)]
    chart = by_id(run_charts([with_scenarios(run, scenario_of(*repeats))]))[
        "chart-divergence-1"]
    (icicle,) = traces(chart)
    labels = dict(zip(icicle["ids"], icicle["labels"]))
    assert labels["p"] == "5 shared steps"
    assert " → ".join(common) == icicle["customdata"][icicle["ids"].index("p")][0]
    assert sorted(labels[i] for i in icicle["ids"] if i.count(".") == 1) == ["a:ok", "b:ok"]
    assert "1 repeat(s) whose steps the run did not keep" in chart.caption


# -- several lanes ------------------------------------------------------------------------------


def test_several_lanes_label_their_scenarios_lane_slash_scenario(tmp_path):
    lanes = documents.three_lanes(tmp_path)
    made = by_id(run_charts(lanes))
    bar = traces(made["chart-pass-rate"])[0]
    assert list(bar["y"][:2]) == ["pydantic-ai/nominal", "pydantic-ai/tool_error"]
    assert "pydantic-ai/remote" not in bar["y"]  # void: no bar
    means = [line["name"] for line in traces(made["chart-pass-k"])
             if "mean" in line.get("name", "")]
    assert means == ["pydantic-ai: mean", "langgraph: mean", "openai-agents-sdk: mean"]
    assert made["chart-divergence-1"].title == "Where the repeats of pydantic-ai/nominal diverge"


def test_many_scenarios_show_those_that_need_attention_first(run):
    good = [scenario_of(*(repeat(i, ("a:ok",), scenario=f"good{k:02}") for i in range(1, 4)),
                        sid=f"good{k:02}") for k in range(figure.MAX_ROWS)]
    bad = scenario_of(repeat(1, ("a:ok",), passed=False, scenario="bad"), sid="bad")
    chart = by_id(run_charts([with_scenarios(run, *good, bad)]))["chart-pass-rate"]
    bar = traces(chart)[0]
    assert len(bar["y"]) == figure.MAX_ROWS and "bad" in bar["y"]
    assert list(bar["y"][-2:]) == [f"good{figure.MAX_ROWS - 2:02}", "bad"]  # in the run's order
    assert "1 more are in the table" in chart.caption


# -- hostile text -------------------------------------------------------------------------------


def hostile_run(run: RunDocument) -> RunDocument:
    """A scenario, a lane and tool steps named with markup and a hover template."""
    steps = (f"{HOSTILE}:ok", f"{TEMPLATE}:error")
    served = {"calls": 2, "turns": 1, "retries": 1, "prompt_tokens": 1, "completion_tokens": 1,
              "faults": []}
    repeats = [repeat(1, steps, scenario=HOSTILE, model=served),
               repeat(2, steps[::-1], passed=False, scenario=HOSTILE, model=served),
               repeat(3, (), outcome=Outcome.FRAMEWORK_RUNTIME, scenario=HOSTILE, model=served)]
    scenario = dataclasses.replace(scenario_of(*repeats, sid=HOSTILE),
                                   model=ModelTotals(repeats=3, calls=6, retries=3, tokens=6))
    lane = dataclasses.replace(run.lane, name=f"L{HOSTILE}")
    return dataclasses.replace(run, lane=lane, scenarios=(scenario,))


def test_worker_text_reaches_every_figure_escaped(run):
    hostile = hostile_run(run)
    made = run_charts([hostile, run])
    assert {"chart-pass-rate", "chart-failures", "chart-model",
            "chart-divergence-1"} <= {c.id for c in made}
    text = [s for chart in made for s in strings(chart.figure)]
    # No tag of a worker's anywhere in a figure, and its text is there, as entities.
    assert not [s for s in text if "<img" in s or "<b>" in s]
    escaped = "&lt;img src=x onerror=alert(1)&gt;"
    assert any(escaped + ":ok" in s for s in text)  # a step
    assert any(f"L{escaped}/{escaped}" == s for s in text)  # a lane and a scenario
    # A worker's `%{...}` is never in a template Plotly fills in, only in the data it fills.
    for chart in made:
        for trace in chart.figure["data"]:
            for key in ("hovertemplate", "texttemplate"):
                assert "%{x}&lt;b&gt;" not in str(trace.get(key, ""))
    assert any("%{x}&lt;b&gt;:error" in s for s in text)


def test_the_pages_own_text_is_not_escaped_twice(run):
    # Titles and captions go into the page, which escapes them itself.
    chart = by_id(run_charts([hostile_run(run)]))["chart-divergence-1"]
    assert chart.title == f"Where the repeats of {HOSTILE} diverge"


def test_control_characters_and_long_names_are_shown_on_one_bounded_line():
    assert figure.label("a\nb\x1b[2Jc") == "a\\nb\\x1b[2Jc"
    assert figure.label("x" * 500) == "x" * (figure.LABEL_CHARS - 1) + "…"
    assert figure.label("&lt; \"q\"") == "&amp;lt; \"q\""


# -- nothing to draw ----------------------------------------------------------------------------


def test_charts_with_nothing_to_draw_are_left_out(run):
    passing = [scenario_of(*(repeat(i, ("a:ok",)) for i in range(1, 4)))]
    made = run_charts([with_scenarios(run, *passing)])
    # Every repeat passed on one path: no failures, no divergence; no gateway: no model.
    assert [c.id for c in made] == ["chart-pass-rate", "chart-pass-k", "chart-durations"]
    void = scenario_of(*(repeat(i, (), outcome=Outcome.LANE_INFRA) for i in range(1, 4)))
    assert [c.id for c in run_charts([with_scenarios(run, void)])] == ["chart-failures"]
    assert run_charts([with_scenarios(run)]) == ()


def test_plotly_js_is_the_bundle_read_once():
    assert plotly_js() is plotly_js()
    assert "Plotly" in plotly_js()[:5000] and len(plotly_js()) > 1_000_000
