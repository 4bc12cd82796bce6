"""report.md's last section, "Statistics": per lane, the figures that mean something there
(`alk.report.meaning`: the clustered interval, the ICC and its design effect, consistency, fault
robustness), each with its interval as the record holds it, and the ones withheld with why. It
comes after what failed and why, as in the terminal and report.html: the answer first.
"""

from __future__ import annotations

from typing import Callable, Sequence

from alk.estimate import Estimate
from alk.report.format import icc_mark
from alk.report.meaning import clustered_shown, consistency_shown, withheld
from alk.result.document import RunDocument

_CONSISTENCY = (("outcome", "outcome"), ("tool_use", "tool use"), ("steps", "steps"),
                ("resources", "resources"))


def statistics_section(documents: Sequence[RunDocument], code: Callable[[object], str]) -> str:
    """The section, one bullet a lane (`code` makes a lane's name a code span)."""
    lines = ["### Statistics"]
    for document in documents:
        figures = _figures(document)
        gone = withheld(document)
        name = f"lane {code(document.lane.name)}: " if len(documents) > 1 else ""
        said = " · ".join(figures) if figures else "no figure means something here"
        lines.append(f"- {name}{said}")
        if gone:
            lines.append(f"  - withheld: {'; '.join(gone)}")
    return "\n".join(lines)


def _figures(document: RunDocument) -> list[str]:
    scenarios, aggregate = document.scenarios, document.aggregate
    figures = []
    if clustered_shown(scenarios):
        rate = aggregate.clustered_rate
        if rate is not None:
            figures.append(f"clustered pass rate {_percent(rate)}")
        icc = aggregate.icc
        if icc.value is not None:
            interval = (f" {icc_mark(icc)}[{icc.ci[0]:.2f}, {icc.ci[1]:.2f}]"
                        if icc.ci is not None else "")
            figures.append(f"ICC {icc.value:.2f}{interval}")
        if icc.design_effect is not None and icc.effective_n is not None:
            figures.append(f"design effect {icc.design_effect:.2f} (effective n "
                           f"{icc.effective_n:.1f} of {icc.observations})")
    if consistency_shown(scenarios):
        shown = [f"{words} {_ratio(e)}" for name, words in _CONSISTENCY
                 if (e := getattr(aggregate.consistency, name)) is not None]
        if shown:
            figures.append("consistency: " + ", ".join(shown))
    robustness = aggregate.fault_robustness
    if robustness is not None and robustness.value is None:
        figures.append("fault robustness: none, no faulted scenario has an unfaulted twin")
    elif robustness is not None:
        high = "∞)" if robustness.high is None else f"{robustness.high:.2f}]"
        paired = (f" (faulted ÷ unfaulted twin, {len(robustness.pairs)} "
                  f"pair{'s' if len(robustness.pairs) != 1 else ''})"
                  if robustness.method == "paired" else "")
        figures.append(f"fault robustness {robustness.value:.2f} "
                       f"[{robustness.low:.2f}–{high}{paired}")
    return figures


def _percent(estimate: Estimate) -> str:
    return f"{estimate.value * 100:.1f}% [{estimate.low * 100:.1f}–{estimate.high * 100:.1f}]"


def _ratio(estimate: Estimate) -> str:
    return f"{estimate.value:.2f} [{estimate.low:.2f}–{estimate.high:.2f}]"
