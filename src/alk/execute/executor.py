"""Walks a plan: the preflight probe, then every repeat not yet done, on an engine.

The engine (`alk.execute.engine`) is where repeats run: threads of this process (`-j N`) or a Dask
cluster. This module decides what runs and in what order of events, keeps what comes back, and
says why a run is void; nothing here prints. An adaptive run (`alk.execute.adaptive`) runs its
repeats round by round, each round one batch on the engine, until every scenario is settled.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from alk.attribution.outcome import attribute, void
from alk.causes import Cause
from alk.execute.adaptive import Sampling
from alk.execute.budget import RunBudget
from alk.execute.engine import Engine
from alk.execute.repeat import DETAIL_CHARS, RunVoid
from alk.execute.threads import ThreadEngine
from alk.records import Attribution, Execution, Plan, Preflight, RepeatResult, RepeatSpec
from alk.redaction import Redactor
from alk.result.options import Adaptive
from alk.runner.request import Runner

__all__ = ["execute"]


def execute(plan: Plan, out_dir: Path, redactor: Redactor, *, runner: Runner | None = None,
            environ: Mapping[str, str] = os.environ, keep_workspaces: bool = False,
            jobs: int = 1, engine: Engine | None = None, done: Iterable[RepeatResult] = (),
            adaptive: Adaptive | None = None,
            on_preflight: Callable[[Preflight], None] | None = None,
            on_batch: Callable[[Sequence[RepeatSpec]], None] | None = None,
            on_start: Callable[[RepeatSpec], None] | None = None,
            on_record: Callable[[RepeatResult], None] | None = None,
            on_repeat: Callable[[RepeatResult, Execution], None] | None = None) -> Execution:
    """Runs the plan's repeats but those in `done` (a resumed run's finished ones, kept as
    they are). On KeyboardInterrupt every running worker is ended, the repeats finished so far
    are kept, and `interrupted` is set; the exception does not propagate. `on_preflight` hears
    the probe's passing verdict before any repeat starts, and may raise to stop the run there
    (a resumed run whose worker reports another version). `on_record` makes a finished repeat
    durable (the journal) before it counts. `on_batch` hears the repeats about to run, once
    for a run of fixed repeats and once a round for an adaptive one (progress counts what is
    planned so far). `redactor` holds the values of the lane's
    `required_env` as found in `environ`.

    With `adaptive`, the plan holds `max_repeats` repeats a scenario and a prefix of each
    scenario's runs: the stopping state is re-derived from `done`, and `Execution.stopped`
    says why each scenario stopped.

    With a lane's `max_tokens.run`, once the provider tokens of the repeats run here reach it
    no new repeat starts: the run ends interrupted, and `budget_spent` says why."""
    engine = engine or ThreadEngine(runner, jobs)
    execution = Execution(repeats=list(done))
    sampling = None if adaptive is None else Sampling(plan, adaptive, execution.repeats)
    budget = RunBudget(plan)
    if sampling is not None:
        execution.stopped = sampling.stopped  # filled in as scenarios settle
    try:
        with engine.open(plan, out_dir, redactor, environ, keep_workspaces) as lane:
            execution.workspaces = lane.workspaces
            execution.jobs = lane.jobs
            try:
                probe = lane.probe()
            except (KeyboardInterrupt, RunVoid):
                raise  # an interrupt, or the lane cannot run where the probe ran (on a cluster)
            except Exception as exc:  # noqa: BLE001 - alk's own failure voids the run
                execution.void = void(Cause.HARNESS_ERROR, redactor.cut(
                    f"the preflight probe failed: {type(exc).__name__}: {exc}", DETAIL_CHARS))
                return execution
            execution.preflight = probe.preflight
            if probe.preflight is None or not probe.preflight.ok:
                execution.void = _with_install_hint(attribute(probe, (), redactor),
                                                    plan.lane.install)
                return execution
            if on_preflight:
                on_preflight(probe.preflight)
            lane.identify(probe.preflight)

            def keep(result: RepeatResult) -> None:
                # Recorded (the journal) before it is counted: a Ctrl-C between the two
                # leaves an interrupted result one repeat short, which a resume takes back
                # from the journal, never one that lists a repeat the journal lacks.
                if on_record:
                    on_record(result)
                execution.repeats.append(result)
                budget.add(result)
                if sampling is not None:
                    sampling.add(result)
                if on_repeat:
                    on_repeat(result, execution)

            if sampling is None:
                finished = {(result.scenario, result.repeat) for result in execution.repeats}
                batch = [item for item in plan.items
                         if (item.scenario.id, item.repeat) not in finished]
                if on_batch:
                    on_batch(batch)
                lane.run(budget.gate(batch), on_start=on_start, on_result=keep)
            else:
                while batch := sampling.next_round():
                    if budget.reached:
                        budget.held_back += len(batch)
                        break
                    if on_batch:
                        on_batch(batch)
                    lane.run(budget.gate(batch), on_start=on_start, on_result=keep)
                    if budget.held_back:
                        break  # the round's rest was held back: asking again would repeat it
            execution.budget_spent = budget.why(len(execution.repeats))
            if execution.budget_spent is not None:
                # A partial result, as an interrupted one: `alk run --resume` goes on with it.
                execution.interrupted = True
                if sampling is not None:
                    sampling.interrupt()
    except RunVoid as exc:
        execution.void = exc.attribution
    except KeyboardInterrupt:
        execution.interrupted = True
        if sampling is not None:
            sampling.interrupt()
    return execution


def _with_install_hint(verdict: Attribution, install: str) -> Attribution:
    if verdict.cause != Cause.FRAMEWORK_MISSING or not install:
        return verdict
    return dataclasses.replace(verdict, detail=f"{verdict.detail}; install it: {install}")
