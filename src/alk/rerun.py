"""`alk rerun RUN_ID SCENARIO REPEAT`: one repeat of a saved run, run again exactly as it ran.

The same lane (its sha256 checked), scenario, seed, repeat number and start message (which names
the original run), with the run's own timeout and limits. What it cannot hold the same it says:
a worker whose files changed since makes the rerun a check of a fix, not a reproduction. The
rerun is a run of its own (a new run id, its own transcript and reports), whose record names
the repeat it reproduces (`settings.rerun_of`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from alk.errors import RerunError
from alk.plan import build_plan, repeat_seed
from alk.records import Lane, Plan, RepeatResult, RepeatSpec
from alk.result.document import CutShort, RerunOf, RunDocument


@dataclass(frozen=True, slots=True)
class Rerun:
    """A repeat to run again: the plan of that one repeat, and what the new record says of it
    (the repeat it reproduces, and what changed since)."""

    plan: Plan
    of: RerunOf


def prepare(document: RunDocument, original: RepeatResult | CutShort, lane: Lane, run_id: str,
            *, timeout_s: float | None, limits: Mapping[str, int], anyway: bool = False
            ) -> Rerun:
    """The plan that runs `original` again as run `run_id`. `timeout_s` and `limits`: the
    overrides the run was given (its journal's), so that a limit it lifted stays lifted.
    Raises RerunError when the lane file changed since, unless `anyway`."""
    where = document.lane.path
    lane_changed = bool(document.lane.sha256) and lane.sha256 != document.lane.sha256
    if lane_changed and not anyway:
        raise RerunError(f"{where}: the lane file changed since run {document.run_id} (its "
                         "sha256 differs): the repeat would not run as it ran. Restore the "
                         "file, or pass --anyway to run the lane as it is now")
    if lane.model is not None and lane.model.record is not None:
        raise RerunError(f"{where}: model.record: the lane records a model cassette, which a "
                         "rerun of one repeat would replace; turn recording off to rerun")
    scenario = original.scenario
    if not any(s.id == scenario for s in lane.scenarios):
        raise RerunError(f"{where}: the lane has no scenario '{scenario}' any more")
    settings = document.settings
    plan = build_plan(lane, run_id, repeats=1, scenario_ids=[scenario], seed=settings.seed,
                      timeout_s=timeout_s, limits=limits)
    # The seed it ran with: recorded with the repeat (a repeat cut short has none on record,
    # and ran with the one its run seed gives it).
    seed = (original.seed if isinstance(original, RepeatResult)
            else repeat_seed(settings.seed, scenario, original.repeat))
    item = RepeatSpec(plan.scenarios[0], original.repeat, seed)
    # A rerun of a rerun reproduces the first run's repeat: its start message names that run.
    first = document.settings.rerun_of.run_id if document.settings.rerun_of else document.run_id
    plan = dataclasses.replace(plan, items=(item,), reproduces=first)
    # Changed since the repeat ran, or already before (a rerun of a rerun of a changed worker).
    worker_changed = ((bool(document.lane.worker_sha256)
                       and lane.worker_sha256 != document.lane.worker_sha256)
                      or bool(document.settings.rerun_of
                              and document.settings.rerun_of.worker_changed))
    return Rerun(plan, RerunOf(first, scenario, original.repeat, worker_changed, lane_changed))
