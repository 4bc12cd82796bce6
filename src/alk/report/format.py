"""What every report says the same way, whatever it is written in: the shares and the pass^k
they show, the command that reruns a repeat and the words for a rerun, the note under an
adaptive run. The terminal, report.html, report.md and junit.xml all take them from here, so
that they never disagree.
"""

from __future__ import annotations

import shlex
from typing import Callable

from alk.result.document import RerunOf
from alk.stats.records import Icc

# The k of the pass^k shown when the reader names none (`alk run --k`).
PASS_HAT_K = 5

# What the report says under an adaptive run's table.
ADAPTIVE_NOTE = ("adaptive repeats: each scenario stopped once its verdict looked settled; its "
                 "interval is Clopper–Pearson's for a scripted scenario (at least 97%) and exact "
                 "over the stop rule's stopping points for a sampled one (at least 95%); its "
                 "rate is biased low, by up to 5 points")


def icc_mark(icc: Icc) -> str:
    """"≈" before the ICC's interval where its record marks it approximate (pass/fail data
    near 0 or 1, or a high ICC), else "": every report marks it the same way."""
    return "≈" if icc.approximate else ""


def share(value: float) -> str:
    """A share as a whole percent: never "0%" for some, nor "100%" for not all, so that a
    reader sees that some were void, or that k repeats in a row may fail."""
    percent = 100 * value
    return ("<1%" if 0 < percent < 1 else ">99%" if 99 < percent < 100 else f"{percent:.0f}%")


def rerun_command(run_id: str, scenario: str, repeat: int) -> str:
    """The one command that reproduces a repeat, quoted for a POSIX shell: what every report
    prints beside a failed or void repeat."""
    return shlex.join(["alk", "rerun", run_id, scenario, str(repeat)])


def rerun_words(of: RerunOf, name: Callable[[str], str] = str) -> tuple[str, str]:
    """What an `alk rerun` reproduces, and whether it can: "rerun of RUN SCENARIO repeat N",
    then what changed since. Every report of a rerun says both; `name` writes the run id and
    the scenario in the report's own form (a code span in Markdown, say)."""
    what = f"rerun of {name(of.run_id)} {name(of.scenario)} repeat {of.repeat}"
    changed = [part for part, flag in (("the worker's files", of.worker_changed),
                                       ("the lane file (run --anyway)", of.lane_changed)) if flag]
    if changed:
        return what, (f"{' and '.join(changed)} changed since it ran: this checks them as they "
                      "are now, and is no reproduction")
    return what, ("worker and lane unchanged since (the lane file, the worker's program and "
                  "the Python files beside it, by sha256)")
