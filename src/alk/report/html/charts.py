"""The HTML report's charts, as Plotly figures the page draws with Plotly's own bundle.

`run_charts(documents)` gives each chart as a `Chart` (`alk.report.html.figure`): its stable HTML
id, title, a one-sentence caption saying how to read it, the figure as Plotly's JSON
(`{"data": [...], "layout": {...}}`, built through `plotly.graph_objects`, which checks every
property) and the config the page passes to `Plotly.newPlot`. A chart with nothing to draw is
left out, never returned empty. The charts of rates are in `rate_charts`, those of spread in
`spread_charts`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from alk.report.html.figure import Chart, scenario_rows
from alk.report.html.rate_charts import failures_chart, pass_k_chart, pass_rate_chart
from alk.report.html.spread_charts import divergence_charts, durations_chart, model_chart

if TYPE_CHECKING:
    from alk.result.document import RunDocument


def run_charts(documents: Sequence[RunDocument]) -> tuple[Chart, ...]:
    """Every chart of a run of one or more lanes that has something to draw, in reading order:
    pass rate, pass^k, failures, durations, model calls, then divergence per scenario."""
    import plotly.graph_objects as go

    rows, hidden = scenario_rows(documents)
    made = (pass_rate_chart(go, rows, hidden, documents), pass_k_chart(go, rows, documents),
            failures_chart(go, rows, hidden), durations_chart(go, rows, hidden),
            model_chart(go, rows, hidden))
    return (*(chart for chart in made if chart is not None), *divergence_charts(go, rows))
