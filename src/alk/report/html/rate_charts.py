"""The charts of how often the repeats passed: each scenario's pass rate with its Wilson interval
and the rule's threshold (the rows that break the rule marked), its pass^k curve with its 95%
interval beside the lane's mean with its own, and its failures stacked by layer and cause (for
the scenarios that had some).
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
from alk.stats.pass_k import pass_hat_k_at

if TYPE_CHECKING:
    from alk.result.document import RunDocument
    from alk.stats.records import LaneStats, ScenarioStats


MAX_CURVES = 10
BAND_CURVES = 3  # scenario curves drawn with their interval's band
FAILING_ROW = "rgba(213,94,0,0.13)"  # vermillion, light enough for black text over it


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
    # The rows to see: those that break the rule are shaded across the chart and marked ✗
    # before their name; a bar too short to see (0%) gets a cross at its rate, and its words.
    breaking = [row.document.settings.rule.holds(row.scenario) is False for row in scored]
    shapes = [{"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
               "y0": at - 0.5, "y1": at + 0.5, "layer": "below", "line": {"width": 0},
               "fillcolor": FAILING_ROW} for at, breaks in enumerate(breaking) if breaks]
    lines, notes = _rule_lines(documents)
    shapes += lines
    notes += [{"x": r, "y": row.name, "xref": "x", "yref": "y", "text": f"<b>{words}</b>",
               "showarrow": False, "xanchor": "left", "xshift": 10, "bgcolor": "#FFFFFF"}
              for row, r, words in zip(scored, rates, verdict_words) if r < SHORT_BAR]
    short = [(row, r, v) for row, r, v in zip(scored, rates, verdicts) if r < SHORT_BAR]
    crosses = [go.Scatter(
        x=[r for _, r, _ in short], y=[row.name for row, _, _ in short], mode="markers",
        marker={"symbol": "x", "size": 12, "color": [VERDICT_COLOURS[v] for *_, v in short],
                "line": {"color": BLACK, "width": 1}},
        hoverinfo="skip", showlegend=False, cliponaxis=False)] if short else []
    axis = scenario_axis(scored)
    axis.update(tickmode="array", tickvals=[row.name for row in scored],
                ticktext=[f"✗ {row.name}" if breaks else row.name
                          for row, breaks in zip(scored, breaking)])
    layout = base_layout(rows_height(len(scored)),
                         # Room left of 0% for a cross: it never covers a scenario's name.
                         xaxis={"range": [-0.025, 1.02], "tickformat": ".0%",
                                "title": "pass rate", **GRID},
                         yaxis=axis, shapes=shapes, annotations=notes)
    unscored = len(rows) - len(scored)
    caption = ("Each bar is a scenario's share of scored repeats that passed, its whisker the "
               "95% Wilson interval, with the verdict written on the bar (beside it, with a "
               "cross at its rate, when the bar is too short to see)"
               + ("; a scenario that breaks the rule is shaded and marked ✗ before its name"
                  if any(breaking) else "")
               + ("; the dashed line is the rule's threshold." if lines else ".")
               + (f" {unscored} scenario(s) scored no repeat and have no bar." if unscored else "")
               + more_note(hidden))
    return Chart("chart-pass-rate", "Pass rate by scenario", caption,
                 figure_json(go, [bar, *crosses], layout))


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
    # Bands for the few that fall furthest from k = 1 (the flaky ones: a curve flat at 0% or
    # 100% falls nowhere): ten bands over each other would hide every line.
    banded = {id(row) for row in sorted(shown, key=_fall)[:BAND_CURVES]}
    shown.sort(key=curved.index)
    traces: list[Any] = []
    short = False  # a lane mean whose interval is drawn for its first k only
    for i, row in enumerate(shown):
        colour = LINE_COLOURS[i % len(LINE_COLOURS)]
        stats, curve = row.scenario.stats, row.scenario.stats.curve
        band = _band(stats, curve.k)
        if id(row) in banded:
            traces += _band_traces(go, row.name, curve.k, band, colour, 0.14)
        traces.append(_curve_trace(go, row.name, curve.k, curve.pass_hat_k, band, {
            "line": {"color": colour, "width": 1.5,
                     "dash": DASHES[i // len(LINE_COLOURS) % len(DASHES)]},
            "marker": {"size": 4}}))
    for i, document in enumerate(documents):
        curve = document.aggregate.curve
        if not curve.k:
            continue
        name = label(f"{document.lane.name}: mean" if len(documents) > 1 else "lane mean")
        band = _band(document.aggregate, curve.k, _lane_ks(document.aggregate, curve.k))
        short = short or len(band) < len(curve.k)
        traces += _band_traces(go, name, curve.k, band, BLACK, 0.10)
        # Lanes' means are black, told apart by their dashes and marks.
        traces.append(_curve_trace(go, name, curve.k, curve.pass_hat_k, band, {
            "line": {"color": BLACK, "width": 3, "dash": DASHES[i % len(DASHES)]},
            "marker": {"size": 7, "symbol": MARKS[i % len(MARKS)]}}))
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
               "falls fast belongs to a scenario that fails now and then. A shaded band is a "
               "95% interval, as the tables give it at one k: a grey one a lane mean's (the "
               "mean ± 1.96 standard errors), a coloured one a scenario's (its pass rate's "
               "Wilson interval raised to the power k), drawn for the "
               f"{min(BAND_CURVES, len(shown))} that fall furthest; every line's interval is "
               "in its hover. A wide band says these repeats cannot tell the curve from one "
               "far above or below it."
               + (" The mean's band stops where computing it would take too long for a page; "
                  "the line goes on." if short else "")
               + (f" {more} more scenario(s) that fall less are not drawn." if more else ""))
    return Chart("chart-pass-k", "pass^k curves", caption, figure_json(go, traces, layout))


def _fall(row: Row) -> tuple[float, float]:
    curve = row.scenario.stats.curve.pass_hat_k
    return curve[-1] - curve[0], curve[-1]


# How much arithmetic the lane mean's band may take (terms of its variance's sums): half a second or
# so; past it the band stops at the last k it reached (`_lane_ks`).
BAND_TERMS = 250_000
VARIANCE_RATES = 17  # the rates of its Wilson interval each scenario's variance is taken at


def _lane_ks(stats: LaneStats, ks: Sequence[int]) -> int:
    """How many of the first `ks` the lane's band is drawn for: its interval sums over
    about `min(k, n − k)` terms at each of VARIANCE_RATES rates, for each distinct tally."""
    n = min(t.scored for t in stats.tallies) if stats.tallies else 0
    cost, reached = 0, 0
    for k in ks:
        cost += (min(k, n - k) + 1) * VARIANCE_RATES * len(stats.tallies)
        if cost > BAND_TERMS:
            break
        reached += 1
    return reached


def _band(stats: ScenarioStats | LaneStats, ks: Sequence[int],
          upto: int | None = None) -> list[tuple[float, float]]:
    """The 95% interval of pass^k at each k (`alk.stats.pass_k.pass_hat_k_at`, the one the
    tables print), for the first `upto` of `ks` (all by default)."""
    band = []
    for k in ks[:upto]:
        estimate = pass_hat_k_at(stats, k)
        if estimate is None:
            break
        band.append((estimate.low, estimate.high))
    return band


def _band_traces(go: Any, name: str, ks: Sequence[int], band: Sequence[tuple[float, float]],
                 colour: str, alpha: float) -> list[Any]:
    """The band as two lines of no width, the second filled up to the first; in the line's
    legend group, so that hiding the line hides its band."""
    if not band:
        return []
    ks = list(ks[:len(band)])
    edge = {"mode": "lines", "line": {"width": 0, "color": colour}, "hoverinfo": "skip",
            "showlegend": False, "legendgroup": name}
    return [go.Scatter(x=ks, y=[high for _, high in band], **edge),
            go.Scatter(x=ks, y=[low for low, _ in band], fill="tonexty",
                       fillcolor=_translucent(colour, alpha), **edge)]


def _curve_trace(go: Any, name: str, ks: Sequence[int], values: Sequence[float],
                 band: Sequence[tuple[float, float]], style: dict[str, Any]) -> Any:
    intervals = [f"[{low:.1%} to {high:.1%}]" for low, high in band]
    intervals += ["(no interval drawn)"] * (len(ks) - len(band))
    return go.Scatter(
        x=list(ks), y=list(values), mode="lines+markers", name=name, legendgroup=name,
        customdata=[[name, words] for words in intervals],
        hovertemplate="%{customdata[0]}: pass^%{x} = %{y:.3f}, 95% interval "
                      "%{customdata[1]}<extra></extra>", **style)


def _translucent(colour: str, alpha: float) -> str:
    red, green, blue = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


# -- 3. failures by layer and cause -------------------------------------------------------------


def failures_chart(go: Any, rows: Sequence[Row], hidden: int) -> Chart | None:
    # A row only for a scenario that has something to stack: the others are counted.
    clean = sum(1 for row in rows if all(r.outcome is Outcome.PASS for r in row.scenario.repeats))
    rows = [row for row in rows if any(r.outcome is not Outcome.PASS
                                       for r in row.scenario.repeats)]
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
               "each bar says what happened, its cause code on hover."
               + (f" No failures in {clean} scenario{'' if clean == 1 else 's'}: "
                  f"{'it has' if clean == 1 else 'they have'} no row." if clean else "")
               + more_note(hidden))
    return Chart("chart-failures", "Failures by layer and cause", caption,
                 figure_json(go, traces, layout))


def _most_stacked(counts: dict[tuple[Outcome, str, str], list[int]]) -> int:
    """The longest stacked bar: the most repeats of one scenario that did not pass."""
    return max(sum(column) for column in zip(*counts.values()))
