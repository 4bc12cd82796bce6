"""The lane × scenario matrix of a run of several lanes: how frameworks compare on the same
scenarios. A row per scenario, a column per lane; a cell holds the scenario's verdict there and
its pass rate with the Wilson interval, so that two cells are compared with their uncertainty.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from alk.records import Verdict
from alk.report.safe_text import DASH, printable

_VERDICT_STYLE = {Verdict.PASS.value: "green", Verdict.FAIL.value: "red",
                  Verdict.FLAKY.value: "yellow", Verdict.VOID.value: "magenta"}


def lane_matrix(documents: Sequence[Mapping[str, Any]]) -> RenderableType:
    documents = [printable(doc) for doc in documents]
    # Percent figures without their signs: three lanes beside the scenario fit 80 columns.
    table = Table(title="lanes × scenarios: verdict, pass % [95% interval]",
                  title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False)
    table.add_column("scenario", overflow="fold", min_width=8)
    for doc in documents:
        lane = doc.get("lane") or {}
        table.add_column(Text(str(lane.get("name") or DASH), style="bold"), overflow="fold")
    order: dict[str, None] = {}
    for doc in documents:
        for scenario in doc.get("scenarios") or []:
            order.setdefault(str(scenario.get("id")), None)
    for scenario_id in order:
        row: list[RenderableType] = [Text(scenario_id)]
        for doc in documents:
            entry = next((s for s in doc.get("scenarios") or []
                          if str(s.get("id")) == scenario_id), None)
            row.append(_cell(entry, doc))
        table.add_row(*row)
    return table


def _cell(entry: Mapping[str, Any] | None, doc: Mapping[str, Any]) -> Text:
    if entry is None:
        return Text(DASH, style="dim")
    if (doc.get("preflight") or {}).get("ok") is False:
        return Text("void (preflight)", style="magenta")
    verdict = str(entry.get("verdict") or DASH)
    text = Text(verdict, style=_VERDICT_STYLE.get(verdict, ""))
    rate, ci = entry.get("pass_rate"), entry.get("ci") or ()
    if isinstance(rate, (int, float)):
        text.append(f" {rate * 100:.0f}")
        if len(ci) == 2 and all(isinstance(bound, (int, float)) for bound in ci):
            text.append(f" [{ci[0] * 100:.0f}–{ci[1] * 100:.0f}]", style="dim")
    return text
