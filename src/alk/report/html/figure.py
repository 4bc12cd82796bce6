"""What every chart of the HTML report shares: the `Chart` record the page draws, Plotly's bundle,
the colours (Okabe and Ito's), font, layout and axes, labels made safe for a figure, and the
scenarios as the charts' rows, bounded for a run of 10,000 scenarios.

Worker text is hostile: Plotly reads a subset of HTML in every text it draws (labels, hover,
legend, titles: `<a href>`, `<span style>`, `<br>`), so every string that is not alk's own
goes through `label` (one line, controls shown as escapes, cut, then `&`, `<` and `>` as
entities, which Plotly shows as the characters) before it reaches a figure, and none goes
into a hover template, whose `%{...}` Plotly would read: those name `customdata` instead.

Colours are Okabe and Ito's (told apart by readers who cannot tell red from green); an outcome
or a layer is told by a word or a pattern as well as by its colour. Each figure is as wide as
the page and of a fixed height, so that it prints as it shows.
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from alk.records import Outcome, Verdict
from alk.report.safe_text import cut, inline

if TYPE_CHECKING:
    from alk.result.document import RunDocument, ScenarioResult


MAX_ROWS = 40
LABEL_CHARS = 60  # a label in a figure; hover shows up to HOVER_CHARS
HOVER_CHARS = 200

# Okabe & Ito (2008), "Color Universal Design".
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
LINE_COLOURS = (BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY)  # no yellow: too pale on white
DASHES = ("solid", "dash", "dot", "dashdot")
MARKS = ("diamond", "square", "circle", "triangle-up")
VERDICT_COLOURS = {Verdict.PASS: GREEN, Verdict.FLAKY: ORANGE, Verdict.FAIL: VERMILLION,
                   Verdict.VOID: PURPLE}
# A layer: its name in the legend, its colour and its bar pattern. The name says whose failure
# it is (docs/causes.md's rule), never how it happened: the cause's label says that.
LAYERS = {Outcome.FRAMEWORK_RUNTIME: ("framework runtime", VERMILLION, "/"),
          Outcome.AGENT: ("agent: model or agent code", ORANGE, "."),
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
class Row:
    """A scenario as the charts show it, `lane/scenario` in a run of several lanes: `text`
    on one line for the page (which escapes it), `name` escaped for a figure."""

    text: str
    name: str
    scenario: ScenarioResult
    document: RunDocument


# -- which scenarios, by which names ------------------------------------------------------------


def scenario_rows(documents: Sequence[RunDocument]) -> tuple[list[Row], int]:
    """The scenarios to chart, in document order, and how many more there were: past MAX_ROWS,
    those below the rule and then those of the lowest pass rate are kept."""
    several = len(documents) > 1
    rows = []
    for document in documents:
        for scenario in document.scenarios:
            text = cut(inline(f"{document.lane.name}/{scenario.id}" if several else scenario.id),
                       LABEL_CHARS)
            rows.append(Row(text, html.escape(text, quote=False), scenario, document))
    if len(rows) <= MAX_ROWS:
        return rows, 0

    def attention(row: Row) -> tuple[bool, float]:
        held = row.document.settings.rule.holds(row.scenario)
        rate = row.scenario.stats.pass_rate
        return held is not False, 2.0 if rate is None else rate

    chosen = {id(row) for row in sorted(rows, key=attention)[:MAX_ROWS]}
    return [row for row in rows if id(row) in chosen], len(rows) - MAX_ROWS


def more_note(hidden: int) -> str:
    return (f" It shows the {MAX_ROWS} scenarios that need attention first; {hidden} more are "
            "in the table." if hidden else "")


def base_layout(height: int, **extra: Any) -> dict[str, Any]:
    # No title in the figure: the page shows the chart's title and caption above it.
    return {"template": "none", "autosize": True, "height": height, "font": FONT,
            "margin": {"l": 10, "r": 10, "t": 30, "b": 48, "autoexpand": True},
            "paper_bgcolor": "#FFFFFF", "plot_bgcolor": "#FFFFFF",
            "hoverlabel": {"font": {"family": FONT["family"]}}, **extra}


def rows_height(count: int) -> int:
    return 120 + ROW_PX * max(count, 3)


def scenario_axis(rows: Sequence[Row]) -> dict[str, Any]:
    # Categories in document order, the first at the top; the names already escaped.
    return {"type": "category", "categoryorder": "array",
            "categoryarray": [row.name for row in rows], "autorange": "reversed",
            "automargin": True, "ticksuffix": " "}


def whole_ticks(top: float) -> dict[str, Any]:
    """A linear axis of counts from 0 to `top`: ticks on whole numbers only (1, 2, 5, 10, 20,
    … apart, ten at most), never Plotly's 0.5 steps on a short range."""
    power, step = 1, 1
    while top / step > 10:
        for step in (2 * power, 5 * power, 10 * power):
            if top / step <= 10:
                break
        power *= 10
    return {"tickmode": "linear", "tick0": 0, "dtick": step, "tickformat": "d"}


def figure_json(go: Any, data: list[Any], layout: dict[str, Any]) -> dict[str, Any]:
    return go.Figure(data=data, layout=layout).to_plotly_json()
