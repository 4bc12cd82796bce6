"""The HTML report's charts, as Plotly figures the page draws with Plotly's own bundle.

`run_charts(documents)` gives each chart as a `Chart`: its stable HTML id, title, a one-sentence
caption saying how to read it, the figure as Plotly's JSON (`{"data": [...], "layout": {...}}`,
built through `plotly.graph_objects`, which checks every property) and the config the page
passes to `Plotly.newPlot`. A chart with nothing to draw is left out, never returned empty.
`plotly_js()` is the bundle the page embeds inline (no network).

Worker text is hostile: Plotly reads a subset of HTML in every text it draws (labels, hover,
legend, titles: `<a href>`, `<span style>`, `<br>`), so every string that is not alk's own
goes through `label` (one line, controls shown as escapes, cut, then `&`, `<` and `>` as
entities, which Plotly shows as the characters) before it reaches a figure, and none goes
into a hover template, whose `%{...}` Plotly would read: those name `customdata` instead.

Colours are Okabe and Ito's (told apart by readers who cannot tell red from green); an outcome
or a layer is told by a word or a pattern as well as by its colour. Each figure is as wide as
the page and of a fixed height, so that it prints as it shows.

Bounded for a run of 10,000 scenarios of 100,000 repeats: the per-scenario charts show the
MAX_ROWS scenarios that need attention first (below the rule, then by pass rate), the pass^k
chart MAX_CURVES of them, divergence the first MAX_DIVERGENCE scenarios that diverge (each a
tree of at most `alk.stats.divergence.MAX_NODES` nodes), and a duration box of more than MAX_POINTS
repeats is drawn from its quartiles rather than from every point.
"""

from __future__ import annotations

import functools
import html
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from alk.records import Outcome, Verdict
from alk.report.safe_text import cut, inline
from alk.stats import divergence

if TYPE_CHECKING:
    from alk.result.document import RunDocument, ScenarioResult

MAX_ROWS = 40
MAX_CURVES = 10
MAX_DIVERGENCE = 10
MAX_POINTS = 500
LABEL_CHARS = 60  # a label in a figure; hover shows up to HOVER_CHARS
HOVER_CHARS = 200
PREFIX_SHOWN = 12  # steps of a shared prefix listed in its hover

# Okabe & Ito (2008), "Color Universal Design".
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
LINE_COLOURS = (BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY)  # no yellow: too pale on white
DASHES = ("solid", "dash", "dot", "dashdot")
MARKS = ("diamond", "square", "circle", "triangle-up")
VERDICT_COLOURS = {Verdict.PASS: GREEN, Verdict.FLAKY: ORANGE, Verdict.FAIL: VERMILLION,
                   Verdict.VOID: PURPLE}
# A layer: its name in the legend, its colour and its bar pattern.
LAYERS = {Outcome.FRAMEWORK_RUNTIME: ("framework crashed", VERMILLION, "/"),
          Outcome.AGENT: ("agent answered wrongly", ORANGE, "."),
          Outcome.LANE_INFRA: ("void (lane or harness)", PURPLE, "x")}
# The divergence tree's pass share: vermillion (none passed) to sky blue (all passed), both
# light enough for black text to read on them.
SHARE_SCALE = [[0.0, VERMILLION], [0.5, "#F5F5F5"], [1.0, SKY]]

# What the page passes to `Plotly.newPlot`: no logo, a mode bar of the one tool a reader of a
# report uses (a PNG of the chart), redrawn to the page's width, and never MathJax (a `$` in a
# worker's text is text).
CONFIG = {"displaylogo": False, "responsive": True, "typesetMath": False,
          "modeBarButtons": [["toImage"]]}
FONT = {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12,
        "color": "#222222"}
# A value axis: light grid lines, no bold zero line, room made for its tick labels.
GRID = {"gridcolor": "#E5E5E5", "zeroline": False, "automargin": True}
ROW_PX = 24  # height per scenario in a chart of horizontal bars
HEIGHT_PX = 360  # a chart whose height does not grow with its rows
SHORT_BAR = 0.15  # a pass-rate bar shorter than this has its words beside it


@dataclass(frozen=True)
class Chart:
    """One figure for the page: `id` is its element's HTML id, `figure` Plotly's JSON and
    `config` the third argument of `Plotly.newPlot`."""

    id: str
    title: str
    caption: str
    figure: dict[str, Any]
    config: dict[str, Any] = field(default_factory=lambda: dict(CONFIG))


@functools.cache
def plotly_js() -> str:
    """Plotly's JavaScript bundle (about 4.6 MiB), read once."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def label(value: Any, limit: int = LABEL_CHARS) -> str:
    """Any text for a figure: on one line, controls and invisible characters as escapes, at
    most `limit` characters, and `&`, `<`, `>` as entities Plotly shows as the characters
    (it knows `&amp;`, `&lt;` and `&gt;`, not `&quot;`: quotes stay, outside any tag)."""
    return html.escape(cut(inline(value), limit), quote=False)


@dataclass(frozen=True, slots=True)
class _Row:
    """A scenario as the charts show it, `lane/scenario` in a run of several lanes: `text`
    on one line for the page (which escapes it), `name` escaped for a figure."""

    text: str
    name: str
    scenario: ScenarioResult
    document: RunDocument


def run_charts(documents: Sequence[RunDocument]) -> tuple[Chart, ...]:
    """Every chart of a run of one or more lanes that has something to draw, in reading order:
    pass rate, pass^k, failures, durations, model calls, then divergence per scenario."""
    import plotly.graph_objects as go

    rows, hidden = _rows(documents)
    made = (_pass_rate(go, rows, hidden, documents), _pass_k(go, rows, documents),
            _failures(go, rows, hidden), _durations(go, rows, hidden), _model(go, rows, hidden))
    return (*(chart for chart in made if chart is not None), *_divergences(go, rows))


# -- which scenarios, by which names ------------------------------------------------------------


def _rows(documents: Sequence[RunDocument]) -> tuple[list[_Row], int]:
    """The scenarios to chart, in document order, and how many more there were: past MAX_ROWS,
    those below the rule and then those of the lowest pass rate are kept."""
    several = len(documents) > 1
    rows = []
    for document in documents:
        for scenario in document.scenarios:
            text = cut(inline(f"{document.lane.name}/{scenario.id}" if several else scenario.id),
                       LABEL_CHARS)
            rows.append(_Row(text, html.escape(text, quote=False), scenario, document))
    if len(rows) <= MAX_ROWS:
        return rows, 0

    def attention(row: _Row) -> tuple[bool, float]:
        held = row.document.settings.rule.holds(row.scenario)
        rate = row.scenario.stats.pass_rate
        return held is not False, 2.0 if rate is None else rate

    chosen = {id(row) for row in sorted(rows, key=attention)[:MAX_ROWS]}
    return [row for row in rows if id(row) in chosen], len(rows) - MAX_ROWS


def _more(hidden: int) -> str:
    return (f" It shows the {MAX_ROWS} scenarios that need attention first; {hidden} more are "
            "in the table." if hidden else "")


def _layout(height: int, **extra: Any) -> dict[str, Any]:
    # No title in the figure: the page shows the chart's title and caption above it.
    return {"template": "none", "autosize": True, "height": height, "font": FONT,
            "margin": {"l": 10, "r": 10, "t": 30, "b": 48, "autoexpand": True},
            "paper_bgcolor": "#FFFFFF", "plot_bgcolor": "#FFFFFF",
            "hoverlabel": {"font": {"family": FONT["family"]}}, **extra}


def _rows_height(count: int) -> int:
    return 120 + ROW_PX * max(count, 3)


def _scenario_axis(rows: Sequence[_Row]) -> dict[str, Any]:
    # Categories in document order, the first at the top; the names already escaped.
    return {"type": "category", "categoryorder": "array",
            "categoryarray": [row.name for row in rows], "autorange": "reversed",
            "automargin": True, "ticksuffix": " "}


def _whole_ticks(top: float) -> dict[str, Any]:
    """A linear axis of counts from 0 to `top`: ticks on whole numbers only (1, 2, 5, 10, 20,
    … apart, ten at most), never Plotly's 0.5 steps on a short range."""
    power, step = 1, 1
    while top / step > 10:
        for step in (2 * power, 5 * power, 10 * power):
            if top / step <= 10:
                break
        power *= 10
    return {"tickmode": "linear", "tick0": 0, "dtick": step, "tickformat": "d"}


def _figure(go: Any, data: list[Any], layout: dict[str, Any]) -> dict[str, Any]:
    return go.Figure(data=data, layout=layout).to_plotly_json()


# -- 1. pass rate -------------------------------------------------------------------------------


def _pass_rate(go: Any, rows: Sequence[_Row], hidden: int,
               documents: Sequence[RunDocument]) -> Chart | None:
    scored = [row for row in rows if row.scenario.stats.pass_rate is not None
              and row.scenario.stats.ci is not None]
    if not scored:
        return None
    rates = [row.scenario.stats.pass_rate for row in scored]
    lows = [row.scenario.stats.ci[0] for row in scored]  # type: ignore[index]
    highs = [row.scenario.stats.ci[1] for row in scored]  # type: ignore[index]
    verdicts = [row.scenario.stats.verdict for row in scored]
    verdict_words = [f"{r:.0%} {v.value}" for r, v in zip(rates, verdicts)]
    bar = go.Bar(
        orientation="h", y=[row.name for row in scored], x=rates,
        error_x={"type": "data", "symmetric": False, "color": BLACK, "thickness": 1.5,
                 "array": [h - r for h, r in zip(highs, rates)],
                 "arrayminus": [r - lo for r, lo in zip(rates, lows)]},
        marker={"color": [VERDICT_COLOURS[v] for v in verdicts],
                "line": {"color": BLACK, "width": 0.5}},
        # The verdict in words on each bar (beside one too short to hold it): its colour is
        # never the only sign.
        text=[words if r >= SHORT_BAR else "" for r, words in zip(rates, verdict_words)],
        textposition="inside", insidetextanchor="start", textfont={"color": BLACK},
        customdata=[[row.scenario.stats.counts.passed, row.scenario.stats.counts.scored,
                     f"{lo:.1%}", f"{h:.1%}"] for row, lo, h in zip(scored, lows, highs)],
        hovertemplate=("%{y}: %{customdata[0]}/%{customdata[1]} passed, %{x:.1%} "
                       "(95% interval %{customdata[2]} to %{customdata[3]})<extra></extra>"),
        showlegend=False)
    shapes, notes = _rule_lines(documents)
    notes += [{"x": r, "y": row.name, "xref": "x", "yref": "y", "text": words,
               "showarrow": False, "xanchor": "left", "xshift": 4, "bgcolor": "#FFFFFF"}
              for row, r, words in zip(scored, rates, verdict_words) if r < SHORT_BAR]
    layout = _layout(_rows_height(len(scored)),
                     xaxis={"range": [0, 1.02], "tickformat": ".0%", "title": "pass rate",
                            **GRID},
                     yaxis=_scenario_axis(scored), shapes=shapes, annotations=notes)
    unscored = len(rows) - len(scored)
    caption = ("Each bar is a scenario's share of scored repeats that passed, its whisker the "
               "95% Wilson interval, with the verdict written on the bar"
               + ("; the dashed line is the rule's threshold." if shapes else ".")
               + (f" {unscored} scenario(s) scored no repeat and have no bar." if unscored else "")
               + _more(hidden))
    return Chart("chart-pass-rate", "Pass rate by scenario", caption,
                 _figure(go, [bar], layout))


def _rule_lines(documents: Sequence[RunDocument]) -> tuple[list[dict], list[dict]]:
    """A dashed vertical line at each threshold the lanes' rules set, with its words."""
    shapes, notes = [], []
    rules = {(d.settings.rule.fail_under, d.settings.rule.lower) for d in documents
             if d.settings.rule.fail_under is not None}
    for threshold, lower in sorted(rules):
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": threshold,
                       "x1": threshold, "y0": 0, "y1": 1,
                       "line": {"color": BLACK, "width": 1.5, "dash": "dash"}})
        what = "lower bound" if lower else "pass rate"
        notes.append({"xref": "x", "yref": "paper", "x": threshold, "y": 1, "yanchor": "bottom",
                      "xanchor": "right", "showarrow": False,
                      # As the rule's sentence says it: 95.5% is not 96%.
                      "text": f"rule: {what} ≥ {threshold:.1%}", "font": {"size": 11}})
    return shapes, notes


# -- 2. pass^k ----------------------------------------------------------------------------------


def _pass_k(go: Any, rows: Sequence[_Row], documents: Sequence[RunDocument]) -> Chart | None:
    curved = [row for row in rows if row.scenario.stats.curve.k]
    # The scenarios that fall furthest, then the first in order.
    shown = sorted(curved, key=lambda row: row.scenario.stats.curve.pass_hat_k[-1])[:MAX_CURVES]
    shown.sort(key=curved.index)
    traces = []
    for i, row in enumerate(shown):
        curve = row.scenario.stats.curve
        traces.append(go.Scatter(
            x=list(curve.k), y=list(curve.pass_hat_k), mode="lines+markers", name=row.name,
            line={"color": LINE_COLOURS[i % len(LINE_COLOURS)], "width": 1.5,
                  "dash": DASHES[i // len(LINE_COLOURS) % len(DASHES)]},
            marker={"size": 4}, customdata=[row.name] * len(curve.k),
            hovertemplate="%{customdata}: pass^%{x} = %{y:.3f}<extra></extra>"))
    for i, document in enumerate(documents):
        curve = document.aggregate.curve
        if not curve.k:
            continue
        name = label(f"{document.lane.name}: mean" if len(documents) > 1 else "lane mean")
        # Lanes' means are black, told apart by their dashes and marks.
        traces.append(go.Scatter(
            x=list(curve.k), y=list(curve.pass_hat_k), mode="lines+markers", name=name,
            line={"color": BLACK, "width": 3, "dash": DASHES[i % len(DASHES)]},
            marker={"size": 7, "symbol": MARKS[i % len(MARKS)]},
            customdata=[name] * len(curve.k),
            hovertemplate="%{customdata}: pass^%{x} = %{y:.3f}<extra></extra>"))
    if not traces:
        return None
    longest = max(max(trace.x) for trace in traces)
    layout = _layout(HEIGHT_PX + 60,
                     xaxis={"title": "k (repeats)", **GRID,
                            **({"type": "log", "tickformat": "d"} if longest > 50
                               else _whole_ticks(longest))},
                     yaxis={"title": "pass^k", "range": [0, 1.04], "tickformat": ".0%",
                            **GRID},
                     legend={"orientation": "h", "y": -0.25, "yanchor": "top"},
                     margin={"l": 10, "r": 10, "t": 30, "b": 10, "autoexpand": True})
    more = len(curved) - len(shown)
    caption = ("Each line is a scenario's chance that k repeats in a row all pass (τ-bench's "
               "pass^k), the thick black line the mean over the lane's scenarios: a line that "
               "falls fast belongs to a scenario that fails now and then."
               + (f" {more} more scenario(s) that fall less are not drawn." if more else ""))
    return Chart("chart-pass-k", "pass^k curves", caption, _figure(go, traces, layout))


# -- 3. failures by layer and cause -------------------------------------------------------------


def _failures(go: Any, rows: Sequence[_Row], hidden: int) -> Chart | None:
    # (layer, cause) -> counts per row; the repeats hold what the statistics count apart.
    counts: dict[tuple[Outcome, str], list[int]] = {}
    for index, row in enumerate(rows):
        for repeat in row.scenario.repeats:
            if repeat.outcome is not Outcome.PASS:
                key = (repeat.outcome, repeat.cause)
                counts.setdefault(key, [0] * len(rows))[index] += 1
    if not counts:
        return None
    order = {layer: i for i, layer in enumerate(LAYERS)}
    traces = []
    for (layer, cause), per_row in sorted(counts.items(), key=lambda kv: (order[kv[0][0]],
                                                                          -sum(kv[1]), kv[0][1])):
        name, colour, pattern = LAYERS[layer]
        cause_label = label(cause)
        traces.append(go.Bar(
            orientation="h", y=[row.name for row in rows], x=[n or None for n in per_row],
            name=cause_label, legendgroup=layer.value,
            legendgrouptitle={"text": name},
            marker={"color": colour, "pattern": {"shape": pattern, "fillmode": "overlay",
                                                 "fgcolor": BLACK, "fgopacity": 0.45,
                                                 "size": 7},
                    "line": {"color": "#FFFFFF", "width": 1.5}},
            text=[cause_label if n else "" for n in per_row], textposition="inside",
            insidetextanchor="middle", textfont={"color": BLACK},
            customdata=[[name, cause_label]] * len(rows),
            hovertemplate=("%{y}: %{x} repeat(s), %{customdata[0]}: %{customdata[1]}"
                           "<extra></extra>")))
    failed = sum(sum(v) for v in counts.values())
    # The legend below the bars: a column per layer, its title over its causes.
    per_layer = Counter(layer for layer, _ in counts)
    legend_px = 22 * (1 + max(per_layer.values()))
    layout = _layout(_rows_height(len(rows)) + legend_px,
                     barmode="stack", xaxis={"title": "repeats", "rangemode": "tozero", **GRID,
                                             **_whole_ticks(_most_stacked(counts))},
                     yaxis=_scenario_axis(rows),
                     legend={"groupclick": "toggleitem", "orientation": "h", "yref": "container",
                             "y": 0, "yanchor": "bottom", "x": 0, "xanchor": "left"},
                     margin={"l": 10, "r": 10, "t": 30, "b": 56 + legend_px,
                             "autoexpand": True},
                     uniformtext={"minsize": 9, "mode": "hide"})
    caption = ("Each bar counts a scenario's repeats that did not pass "
               f"({failed} in all), stacked by cause; the colour and hatching tell the layer: "
               "hatched lines for a crashed framework, dots for a wrong answer, crosses for a "
               "void repeat." + _more(hidden))
    return Chart("chart-failures", "Failures by layer and cause", caption,
                 _figure(go, traces, layout))


def _most_stacked(counts: dict[tuple[Outcome, str], list[int]]) -> int:
    """The longest stacked bar: the most repeats of one scenario that did not pass."""
    return max(sum(column) for column in zip(*counts.values()))


# -- 4. durations -------------------------------------------------------------------------------


def _durations(go: Any, rows: Sequence[_Row], hidden: int) -> Chart | None:
    traces = []
    for row in rows:
        scored = [r for r in row.scenario.repeats if r.scored]
        if not scored:
            continue
        common = {"name": row.name, "orientation": "h", "showlegend": False,
                  "marker": {"color": BLUE, "size": 5}, "line": {"color": BLUE, "width": 1.5},
                  "fillcolor": "rgba(86,180,233,0.25)"}
        if len(scored) <= MAX_POINTS:
            traces.append(go.Box(
                x=[r.duration_s for r in scored], y=[row.name] * len(scored),
                boxpoints="all", jitter=0.4, pointpos=0,
                customdata=[[r.repeat, r.outcome.value] for r in scored],
                hovertemplate=("repeat %{customdata[0]} (%{customdata[1]}): %{x:.2f} s"
                               "<extra></extra>"), **common))
        else:
            q1, median, q3 = _quartiles([r.duration_s for r in scored])
            traces.append(go.Box(
                y=[row.name], q1=[q1], median=[median], q3=[q3],
                lowerfence=[min(r.duration_s for r in scored)],
                upperfence=[max(r.duration_s for r in scored)], boxpoints=False,
                hoverinfo="x", **common))
    if not traces:
        return None
    shown = [row for row in rows if any(r.scored for r in row.scenario.repeats)]
    layout = _layout(_rows_height(len(shown)),
                     xaxis={"title": "seconds", **GRID,
                            "rangemode": "tozero"},
                     yaxis=_scenario_axis(shown))
    caption = ("Each box spans the middle half of a scenario's scored repeats' durations, the "
               "line inside is the median and each dot a repeat; a scenario of more than "
               f"{MAX_POINTS} repeats shows its box only, whiskers at its fastest and slowest."
               + _more(hidden))
    return Chart("chart-durations", "Durations", caption, _figure(go, traces, layout))


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    # "inclusive" is numpy's default (linear) percentile, as alk.stats.summary computes its p50 and p95.
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


# -- 5. model calls and retries -----------------------------------------------------------------


def _model(go: Any, rows: Sequence[_Row], hidden: int) -> Chart | None:
    served = [row for row in rows if row.scenario.model is not None
              and row.scenario.model.repeats]
    if not served:
        return None
    totals = [row.scenario.model for row in served]
    names = [row.name for row in served]
    traces = [
        go.Bar(orientation="h", y=names, x=[t.calls / t.repeats for t in totals],
               name="model calls", marker={"color": BLUE},
               customdata=[[t.calls, t.repeats] for t in totals],
               hovertemplate=("%{y}: %{x:.2f} calls a repeat (%{customdata[0]} over "
                              "%{customdata[1]} repeats)<extra></extra>")),
        go.Bar(orientation="h", y=names, x=[t.retries / t.repeats for t in totals],
               name="retries", marker={"color": ORANGE, "pattern": {
                   "shape": "/", "fillmode": "overlay", "fgcolor": BLACK, "fgopacity": 0.45,
                   "size": 7}},
               customdata=[[t.retries, t.repeats] for t in totals],
               hovertemplate=("%{y}: %{x:.2f} retries a repeat (%{customdata[0]} over "
                              "%{customdata[1]} repeats)<extra></extra>"))]
    layout = _layout(_rows_height(2 * len(served)),
                     barmode="group", xaxis={"title": "per repeat (mean)",
                                             **GRID},
                     yaxis=_scenario_axis(served), legend={"orientation": "h", "y": 1.02,
                                                           "yanchor": "bottom", "x": 1,
                                                           "xanchor": "right"})
    caption = ("For each scenario served by alk's model gateway, the mean model calls a repeat "
               "made (solid blue) and the calls that retried a failed one (hatched orange)."
               + _more(hidden))
    return Chart("chart-model", "Model calls and retries", caption, _figure(go, traces, layout))


# -- 6. divergence ------------------------------------------------------------------------------


def _divergences(go: Any, rows: Sequence[_Row]) -> list[Chart]:
    charts = []
    for row in rows:
        if len(charts) == MAX_DIVERGENCE:
            break
        chart = _divergence(go, row, f"chart-divergence-{len(charts) + 1}")
        if chart is not None:
            charts.append(chart)
    return charts


def _divergence(go: Any, row: _Row, chart_id: str) -> Chart | None:
    repeats, not_kept = divergence.kept(row.scenario)
    root = divergence.tree([(r.trajectory, r.passed) for r in repeats])  # kept ones only
    if not _branches(root):
        return None
    shared = divergence.shared_prefix(root)
    ids: list[str] = []
    labels: list[str] = []
    parents: list[str] = []
    values: list[int] = []
    shares: list[float] = []
    hover: list[list[Any]] = []

    def add(node_id: str, parent: str, text: str, full: str, node: divergence.Node) -> None:
        ids.append(node_id)
        parents.append(parent)
        labels.append(text)
        values.append(node.count)
        shares.append(node.passed / node.count if node.count else 0.0)
        hover.append([full, node.passed, f"{shares[-1]:.0%}"])

    add("s", "", "start", "the scenario's start", root)
    # The shared prefix as one cell (its steps in the hover): the chart opens at the branch.
    top, parent = root, "s"
    if len(shared) > 1:
        for _ in shared:
            top = top.children[0]
        steps = " → ".join(label(step, 40) for step in shared[:PREFIX_SHOWN])
        more = f" → … ({len(shared) - PREFIX_SHOWN} more)" if len(shared) > PREFIX_SHOWN else ""
        add("p", "s", f"{len(shared)} shared steps", steps + more, top)
        parent = "p"
    stack = [(child, f"{parent}.{i}", parent) for i, child in enumerate(top.children)]
    while stack:
        node, node_id, parent_id = stack.pop()
        add(node_id, parent_id, _marker_label(node.step), label(node.step, HOVER_CHARS), node)
        stack.extend((child, f"{node_id}.{i}", node_id) for i, child in enumerate(node.children))
    depth = max(node_id.count(".") for node_id in ids) + 1
    icicle = go.Icicle(
        ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
        # Six columns at most (a click on a cell goes deeper), and no empty ones.
        maxdepth=min(6, depth), tiling={"orientation": "h"}, sort=False,
        marker={"colors": shares, "colorscale": SHARE_SCALE, "cmin": 0, "cmax": 1,
                "showscale": True, "line": {"color": "#FFFFFF", "width": 1},
                "colorbar": {"title": {"text": "passed"}, "tickformat": ".0%",
                             "thickness": 12, "len": 0.8}},
        customdata=hover,
        texttemplate="%{label}<br>%{value} · %{customdata[2]} passed",
        hovertemplate=("%{customdata[0]}<br>%{value} repeat(s), %{customdata[1]} passed "
                       "(%{customdata[2]})<extra></extra>"),
        textfont={"size": 11}, insidetextfont={"color": BLACK})
    layout = _layout(HEIGHT_PX + 60, margin={"l": 10, "r": 10, "t": 10, "b": 10})
    caption = ("Read from left to right: each cell is a tool step some repeats took after the "
               "cells to its left, as tall as the repeats that took it and coloured by the "
               "share of them that passed (sky blue all, vermillion none); click a cell to follow "
               "its branch, \"(end)\" is a repeat that stopped there."
               + (f" {not_kept} repeat(s) whose steps the run did not keep are left out."
                  if not_kept else ""))
    return Chart(chart_id, f"Where the repeats of {row.text} diverge", caption,
                 _figure(go, [icicle], layout))


def _branches(node: divergence.Node) -> bool:
    """Some node under `node` has two children or more."""
    while len(node.children) == 1:
        node = node.children[0]
    return len(node.children) > 1


def _marker_label(step: str) -> str:
    if step == divergence.OTHER:
        return "other branches"
    if step == divergence.MORE:
        return "… (not drawn)"
    return label(step, 40)
