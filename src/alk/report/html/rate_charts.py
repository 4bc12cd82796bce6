"""The charts of how often the repeats passed: each scenario's pass rate with its Wilson interval
and the rule's threshold, its pass^k curve beside the lane's mean, and its failures stacked by
layer and cause.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

from alk.causes.labels import label as happened
from alk.records import Outcome
from alk.report.html.figure import (
    BLACK,
    DASHES,
    GRID,
    HEIGHT_PX,
    LAYERS,
    LINE_COLOURS,
    MARKS,
    SHORT_BAR,
    VERDICT_COLOURS,
    Chart,
    Row,
    base_layout,
    figure_json,
    label,
    more_note,
    rows_height,
    scenario_axis,
    whole_ticks,
)

if TYPE_CHECKING:
    from alk.result.document import RunDocument


MAX_CURVES = 10


# -- 1. pass rate -------------------------------------------------------------------------------


def pass_rate_chart(go: Any, rows: Sequence[Row], hidden: int,
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
    layout = base_layout(rows_height(len(scored)),
                         xaxis={"range": [0, 1.02], "tickformat": ".0%", "title": "pass rate",
                                **GRID},
                         yaxis=scenario_axis(scored), shapes=shapes, annotations=notes)
    unscored = len(rows) - len(scored)
    caption = ("Each bar is a scenario's share of scored repeats that passed, its whisker the "
               "95% Wilson interval, with the verdict written on the bar"
               + ("; the dashed line is the rule's threshold." if shapes else ".")
               + (f" {unscored} scenario(s) scored no repeat and have no bar." if unscored else "")
               + more_note(hidden))
    return Chart("chart-pass-rate", "Pass rate by scenario", caption,
                 figure_json(go, [bar], layout))


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


def pass_k_chart(go: Any, rows: Sequence[Row], documents: Sequence[RunDocument]) -> Chart | None:
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
    layout = base_layout(HEIGHT_PX + 60,
                         xaxis={"title": "k (repeats)", **GRID,
                                **({"type": "log", "tickformat": "d"} if longest > 50
                                   else whole_ticks(longest))},
                         yaxis={"title": "pass^k", "range": [0, 1.04], "tickformat": ".0%",
                                **GRID},
                         legend={"orientation": "h", "y": -0.25, "yanchor": "top"},
                         margin={"l": 10, "r": 10, "t": 30, "b": 10, "autoexpand": True})
    more = len(curved) - len(shown)
    caption = ("Each line is a scenario's chance that k repeats in a row all pass (τ-bench's "
               "pass^k), the thick black line the mean over the lane's scenarios: a line that "
               "falls fast belongs to a scenario that fails now and then."
               + (f" {more} more scenario(s) that fall less are not drawn." if more else ""))
    return Chart("chart-pass-k", "pass^k curves", caption, figure_json(go, traces, layout))


# -- 3. failures by layer and cause -------------------------------------------------------------


def failures_chart(go: Any, rows: Sequence[Row], hidden: int) -> Chart | None:
    # (layer, what happened, cause) -> counts per row; the repeats hold what the statistics
    # count apart. What happened is the cause's label, and for a fault not recovered from how
    # the run then ended (an error stop reason is not a crash).
    counts: dict[tuple[Outcome, str, str], list[int]] = {}
    for index, row in enumerate(rows):
        for repeat in row.scenario.repeats:
            if repeat.outcome is not Outcome.PASS:
                key = (repeat.outcome, happened(repeat.cause, repeat.detail), repeat.cause)
                counts.setdefault(key, [0] * len(rows))[index] += 1
    if not counts:
        return None
    order = {layer: i for i, layer in enumerate(LAYERS)}
    traces = []
    for (layer, what, cause), per_row in sorted(
            counts.items(), key=lambda kv: (order[kv[0][0]], -sum(kv[1]), kv[0][1:])):
        name, colour, pattern = LAYERS[layer]
        cause_label = label(what)
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
            customdata=[[name, cause_label, label(cause)]] * len(rows),
            hovertemplate=("%{y}: %{x} repeat(s), %{customdata[0]}: %{customdata[1]} "
                           "(%{customdata[2]})<extra></extra>")))
    failed = sum(sum(v) for v in counts.values())
    # The legend below the bars: a column per layer, its title over its causes.
    per_layer = Counter(layer for layer, *_ in counts)
    legend_px = 22 * (1 + max(per_layer.values()))
    layout = base_layout(rows_height(len(rows)) + legend_px,
                         barmode="stack",
                         xaxis={"title": "repeats", "rangemode": "tozero", **GRID,
                                **whole_ticks(_most_stacked(counts))},
                         yaxis=scenario_axis(rows),
                         legend={"groupclick": "toggleitem", "orientation": "h",
                                 "yref": "container", "y": 0, "yanchor": "bottom", "x": 0,
                                 "xanchor": "left"},
                         margin={"l": 10, "r": 10, "t": 30, "b": 56 + legend_px,
                                 "autoexpand": True},
                         uniformtext={"minsize": 9, "mode": "hide"})
    caption = ("Each bar counts a scenario's repeats that did not pass "
               f"({failed} in all), stacked by cause; the colour and hatching tell the layer: "
               "hatched lines for the framework's runtime (a crash, or a failure after alk's "
               "kill or fault, or on model turns alk served meaning them right), dots for the "
               "agent (the model's or the agent code's choice), crosses for a void repeat; "
               "each bar says what happened, its cause code on hover." + more_note(hidden))
    return Chart("chart-failures", "Failures by layer and cause", caption,
                 figure_json(go, traces, layout))


def _most_stacked(counts: dict[tuple[Outcome, str, str], list[int]]) -> int:
    """The longest stacked bar: the most repeats of one scenario that did not pass."""
    return max(sum(column) for column in zip(*counts.values()))
