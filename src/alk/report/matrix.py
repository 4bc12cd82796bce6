"""The lane × scenario matrix of a run of several lanes: how frameworks compare on the same
scenarios. A row per scenario, a column per lane; a cell holds the scenario's verdict there and
its pass rate with the Wilson interval, so that two cells are compared with their uncertainty,
and under them, the share of its repeats that were void when some were. The last row is each
lane's void rate: a lane that voided half its repeats is not compared on the same footing.
"""

from __future__ import annotations

from typing import Sequence

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from alk.records import Verdict
from alk.report.format import share
from alk.report.safe_text import DASH, printable
from alk.result.document import RunDocument, ScenarioResult

_VERDICT_STYLE = {Verdict.PASS: "green", Verdict.FAIL: "red", Verdict.FLAKY: "yellow",
                  Verdict.VOID: "magenta"}


# The widest a cell gets ("pass 100 [84–100]"), and the most a name or an id may take before
# it is cut with an ellipsis (never folded mid-word: "pydantic-a/i" misreads).
CELL_CHARS = 17
NAME_CHARS = 24
GAP_CHARS = 3  # between two columns: a space of padding each side, and the box's divider


def lane_matrix(documents: Sequence[RunDocument]) -> RenderableType:
    """Tables of as many lanes as the width holds (three at 80 columns), each with the
    scenario column, so that no cell is folded or cropped however many lanes ran."""
    return _Matrix([printable(doc) for doc in documents])


class _Matrix:
    def __init__(self, documents: list[RunDocument]) -> None:
        self.documents = documents
        order: dict[str, None] = {}
        for doc in documents:
            for scenario in doc.scenarios:
                order.setdefault(scenario.id, None)
        self.scenarios = list(order)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        first = min(NAME_CHARS, max([8, *map(len, self.scenarios)]))
        groups: list[list[RunDocument]] = [[]]
        used = first
        for doc in self.documents:
            width = GAP_CHARS + _lane_chars(doc)
            if groups[-1] and used + width > options.max_width:
                groups.append([])
                used = first
            groups[-1].append(doc)
            used += width
        for number, group in enumerate(groups):
            if number:
                yield Text()
            yield self._table(group, first, title=number == 0)

    def _table(self, documents: list[RunDocument], first: int, title: bool) -> Table:
        # Percent figures without their signs: three lanes beside the scenario fit 80 columns.
        table = Table(title="lanes × scenarios: verdict, pass % [95% interval]" if title
                      else None, title_justify="left", title_style="bold",
                      box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        table.add_column("scenario", no_wrap=True, overflow="ellipsis", width=first)
        for doc in documents:
            table.add_column(Text(_lane_name(doc), style="bold"), no_wrap=True,
                             overflow="ellipsis", width=_lane_chars(doc))
        for scenario_id in self.scenarios:
            row: list[RenderableType] = [Text(scenario_id)]
            for doc in documents:
                row.append(_cell(doc.scenario(scenario_id), doc))
            table.add_row(*row)
        table.add_section()
        table.add_row(Text("void", style="dim"), *map(_void, documents))
        return table


def _lane_name(doc: RunDocument) -> str:
    return doc.lane.name or DASH


def _lane_chars(doc: RunDocument) -> int:
    return min(NAME_CHARS, max(CELL_CHARS, len(_lane_name(doc))))


def _cell(entry: ScenarioResult | None, doc: RunDocument) -> Text:
    if entry is None:
        return Text(DASH, style="dim")
    if doc.gate.ok is False:
        return Text("void (preflight)", style="magenta")
    text = Text(str(entry.verdict), style=_VERDICT_STYLE.get(entry.verdict, ""))
    rate, ci = entry.stats.pass_rate, entry.stats.ci
    if rate is not None:
        text.append(f" {rate * 100:.0f}")
        if ci is not None:
            text.append(f" [{ci[0] * 100:.0f}–{ci[1] * 100:.0f}]", style="dim")
        void = entry.stats.void_rate
        # Some repeats void, some scored: the rate above rests on fewer than ran.
        if void is not None and void > 0:
            text.append(f"\nvoid {share(void)}", style="magenta")
    return text


def _void(doc: RunDocument) -> Text:
    """The lane's void repeats, as a share of those that ran: a dash when none ran."""
    void = doc.aggregate.void_rate
    if void is None:
        return Text(DASH, style="dim")
    return Text(share(void), style="magenta" if void else "dim")
