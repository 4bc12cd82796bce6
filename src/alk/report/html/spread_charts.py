"""The charts of how the repeats spread: each scenario's durations (from their quartiles past
MAX_POINTS repeats), its model calls and retries, and where its repeats part ways (the
divergence tree of the first MAX_DIVERGENCE scenarios that diverge, each of at most
`alk.stats.divergence.MAX_NODES` nodes).
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from alk.report.html.figure import (
    BLACK,
    BLUE,
    GRID,
    HEIGHT_PX,
    HOVER_CHARS,
    ORANGE,
    SHARE_SCALE,
    Chart,
    Row,
    base_layout,
    figure_json,
    label,
    more_note,
    rows_height,
    scenario_axis,
)
from alk.stats import divergence

MAX_DIVERGENCE = 10
MAX_POINTS = 500
PREFIX_SHOWN = 12  # steps of a shared prefix listed in its hover


# -- 4. durations -------------------------------------------------------------------------------


def durations_chart(go: Any, rows: Sequence[Row], hidden: int) -> Chart | None:
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
    layout = base_layout(rows_height(len(shown)),
                         xaxis={"title": "seconds", **GRID,
                                "rangemode": "tozero"},
                         yaxis=scenario_axis(shown))
    caption = ("Each box spans the middle half of a scenario's scored repeats' durations, the "
               "line inside is the median and each dot a repeat; a scenario of more than "
               f"{MAX_POINTS} repeats shows its box only, whiskers at its fastest and slowest."
               + more_note(hidden))
    return Chart("chart-durations", "Durations", caption, figure_json(go, traces, layout))


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    # "inclusive" is numpy's default (linear) percentile, as alk.stats.summary computes its p50
    # and p95.
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


# -- 5. model calls and retries -----------------------------------------------------------------


def model_chart(go: Any, rows: Sequence[Row], hidden: int) -> Chart | None:
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
    layout = base_layout(rows_height(2 * len(served)),
                         barmode="group", xaxis={"title": "per repeat (mean)",
                                                 **GRID},
                         yaxis=scenario_axis(served), legend={"orientation": "h", "y": 1.02,
                                                              "yanchor": "bottom", "x": 1,
                                                              "xanchor": "right"})
    caption = ("For each scenario served by alk's model gateway, the mean model calls a repeat "
               "made (solid blue) and the calls that retried a failed one (hatched orange)."
               + more_note(hidden))
    return Chart("chart-model", "Model calls and retries", caption, figure_json(go, traces, layout))


# -- 6. divergence ------------------------------------------------------------------------------


def divergence_charts(go: Any, rows: Sequence[Row]) -> list[Chart]:
    charts = []
    for row in rows:
        if len(charts) == MAX_DIVERGENCE:
            break
        chart = _divergence(go, row, f"chart-divergence-{len(charts) + 1}")
        if chart is not None:
            charts.append(chart)
    return charts


def _divergence(go: Any, row: Row, chart_id: str) -> Chart | None:
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
    layout = base_layout(HEIGHT_PX + 60, margin={"l": 10, "r": 10, "t": 10, "b": 10})
    caption = ("Read from left to right: each cell is a tool step some repeats took after the "
               "cells to its left, as tall as the repeats that took it and coloured by the "
               "share of them that passed (sky blue all, vermillion none); click a cell to follow "
               "its branch, \"(end)\" is a repeat that stopped there."
               + (f" {not_kept} repeat(s) whose steps the run did not keep are left out."
                  if not_kept else ""))
    return Chart(chart_id, f"Where the repeats of {row.text} diverge", caption,
                 figure_json(go, [icicle], layout))


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
