"""Documents alk writes under a given pass rule, a rerun's, and a run of three lanes, for the tests
of the reports that state the rule and the verdict.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from alk import api
from alk.result.document import RerunOf, RunDocument
from alk.result.rule import PassRule

from helpers import documents
from helpers.documents import CRASHED, NEVER_READY, RUN, WRONG, flaky, observation, passing
from helpers.scripted import ScenarioRunner


def ruled(out: Path, rule: PassRule, run_id: str = RUN, name: str = "orders",
          **scripts: list) -> RunDocument:
    """The document alk writes under this rule (`--fail-under`), with a fixed run id."""
    return api.run_lane(documents.lane(tuple(scripts), name),
                        api.RunOptions(repeats=20, seed=7, rule=rule),
                        api.RunSetup(out_dir=out,
                                     runner=ScenarioRunner(observation(0.3), **scripts),
                                     environ=documents.SECRET_ENV),
                        run_id=run_id).document


def rerun(document: RunDocument, *, worker_changed: bool) -> RunDocument:
    """The document as `alk rerun RUN nominal 4` writes it: its record names the repeat it
    reproduces, and whether the worker's files changed since."""
    of = RerunOf("20261128-090000-ff00aa/orders", "nominal", 4, worker_changed)
    return dataclasses.replace(document, settings=dataclasses.replace(document.settings,
                                                                      rerun_of=of))


CHANGED = ("the worker's files changed since it ran: this checks them as they are now, and is "
           "no reproduction")
UNCHANGED = ("worker and lane unchanged since (the lane file, the worker's program and the "
             "Python files beside it, by sha256)")


def three_lanes(out: Path) -> list[RunDocument]:
    """A run of three lanes (`alk run --lane a --lane b --lane c`): lane L's run id is R/L,
    its transcripts under R/L."""
    return [
        ruled(out, PassRule(), f"{RUN}/pydantic-ai", "pydantic-ai", nominal=flaky(),
              tool_error=passing(20, 0.92), remote=[NEVER_READY] * 20),
        ruled(out, PassRule(), f"{RUN}/langgraph", "langgraph", nominal=passing(20),
              tool_error=[CRASHED] * 20, remote=passing(20)),
        ruled(out, PassRule(), f"{RUN}/openai-agents", "openai-agents",
              nominal=passing(20), tool_error=passing(19) + [WRONG], remote=passing(20)),
    ]
