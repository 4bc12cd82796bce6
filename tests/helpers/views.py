"""A view rendered to text at a width, as a person reads it on a terminal without colour, and
the repeat records the terminal report's tests show.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console, RenderableType

from alk.records import Outcome, RepeatResult

RUN = "20261129-120000-ab12"


def render(renderable: RenderableType, width: int = 120) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def repeat(n: int, outcome: str = "pass", cause: str = "passed", detail: str = "",
           scenario: str = "nominal", **fields: Any) -> RepeatResult:
    """One repeat's record as the executor makes it."""
    values: dict[str, Any] = dict(
        scenario=scenario, repeat=n, seed=100 + n, outcome=Outcome(outcome), cause=cause,
        detail=detail, duration_s=0.05, exit_code=0 if outcome == "pass" else 1, signal=None,
        timed_out=False, peak_rss_mb=12.3, cpu_s=0.04, containment=None, network=None,
        filesystem=None, attempts=1, path_hash="", violations=0,
        trajectory=("lookup_order:ok",), claimed=None,
        transcript=f"transcripts/{RUN}/{scenario}/repeat-{n:02d}.jsonl", sha256="0" * 64,
        identities=(("pydantic-ai", "1.0.3"),))
    values.update(fields)
    return RepeatResult(**values)
