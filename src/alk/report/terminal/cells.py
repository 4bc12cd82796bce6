"""What every part of the terminal report shares: the mark of a verdict that rests on few repeats,
the style of void, the label column of the facts under the table, and a line of parts that
wraps between them.
"""

from __future__ import annotations

from typing import Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from alk.report.safe_text import hanging
from alk.stats.records import Counts

# A verdict that rests on fewer than half of its scenario's repeats carries this mark.
THIN_MARK = "?"
VOID_STYLE = "bold magenta"
DETAIL_CHARS = 240
LABEL_CHARS = len("transcripts")  # the widest label of the facts under the table


class Parts:
    """Parts joined by " · ", wrapped between parts: "framework_runtime 2: timeout×2" reads as
    one fact and never breaks inside, unless it is wider than the line by itself."""

    SEP = " · "

    def __init__(self, parts: Sequence[Text]) -> None:
        self.parts = parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = Text()
        for part in self.parts:
            if line and line.cell_len + len(self.SEP) + part.cell_len > options.max_width:
                yield line
                # A continued line starts with the separator, so that it reads as one.
                line = Text(self.SEP.lstrip(), style="dim").append_text(part)
                continue
            line.append(self.SEP if line else "", style="dim").append_text(part)
        yield line


def is_thin(counts: Counts) -> bool:
    """Does a verdict rest on fewer than half of the repeats asked for (void ones, or ones an
    interrupted run never started)? Nothing scored is a void verdict, which says so itself."""
    return 0 < counts.scored and 2 * counts.scored < counts.requested


def labelled(rows: Sequence[tuple[str, Text | None]]) -> Table:
    """Facts under a label each, the labels as wide as the widest ("transcripts")."""
    return hanging(rows, label_style="dim", label_width=LABEL_CHARS)
