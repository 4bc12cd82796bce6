"""`alk compare A B --until-decided`: the sequential gate of `alk.stats.sequential`, run on
two saved runs. Each look compares them; each round after it runs more repeats of the
scenarios not yet decided, in both runs, until every one is decided or the maximum is reached.

A run is extended in place (`extend_run`), the way `alk run --resume` continues one: its
journal is opened under its lock, its lane file is loaded again from where the run recorded it
and must be byte for byte the one it ran (sha256), its worker must report the framework and
version it did, and the plan is the run's own with more repeats, so each new repeat gets
`repeat_seed(seed, scenario, n)` for an n the run never used. The journal takes the new
repeats, and result.json is written again at the end with every repeat: the extended runs are
saved runs like any other (`alk report RUN`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from alk.api.read import read_run
from alk.api.run import RunResult, _plan, _run_plan, recorded_lane
from alk.api.setup import RunSetup
from alk.cleanup import remove_left_folders
from alk.compare import Change, Comparison, compare_runs, with_sequence
from alk.errors import ResumeError, UsageError
from alk.layout import journal_path
from alk.result.document import RunDocument
from alk.result.journal import JournalWriter, read_journal
from alk.result.options import StopReason
from alk.stats import sequential

ROUND = 10  # repeats a round adds to each undecided scenario, in each run
MAX_REPEATS = 100  # a run, at most


def extend_run(run_id: str, targets: Mapping[str, int], setup: RunSetup = RunSetup()
               ) -> RunResult:
    """Runs more repeats of a saved run of one lane, in place, so that each scenario named in
    `targets` has that many; the others keep theirs. Raises ResumeError when the run's lane
    file changed since it ran or is gone, when it is a rerun or an adaptive run, or when its
    worker now reports another version; the run is then left as it was."""
    path = journal_path(setup.out_dir, run_id)
    if not path.is_file():
        read_journal(path)  # refuses it, naming the missing journal
    with JournalWriter(path) as journal:
        remove_left_folders(run_id)
        past = read_journal(path)
        start = past.start
        if start.rerun_of or start.options.adaptive is not None:
            kind = "a rerun of one repeat" if start.rerun_of else "an adaptive run"
            raise ResumeError(f"run {run_id} is {kind}: only a run of fixed repeats can be "
                              "extended; compare two runs made with `alk run -n N`")
        lane = recorded_lane(run_id, start, "more repeats")
        unknown = sorted(set(targets) - set(start.options.scenarios))
        if unknown:
            raise UsageError(f"run {run_id} ran no scenario {', '.join(unknown)}")
        have = {sid: 0 for sid in start.options.scenarios}
        for result in past.repeats:
            have[result.scenario] = max(have[result.scenario], result.repeat)
        # A scenario not named keeps what it has (an interrupted run's missing repeats run too).
        asked = {sid: max(n, targets[sid] if sid in targets else start.options.repeats)
                 for sid, n in have.items()}
        options = dataclasses.replace(start.options, repeats=max(asked.values()))
        plan = _plan(lane, run_id, options)
        plan = dataclasses.replace(plan, items=tuple(
            item for item in plan.items if item.repeat <= asked[item.scenario.id]))
        stopped = {sid: StopReason.MAX_REPEATS for sid, n in asked.items()
                   if n < plan.repeats}
        return _run_plan(plan, journal, options, setup,
                         started_at=datetime.fromisoformat(start.started_at),
                         done=past.repeats, identity=past.identity, resumed=past.resumed,
                         resumed_at=datetime.now(timezone.utc), asked=stopped)


def compare_until_decided(run_a: str, run_b: str, *, alpha: float = 0.05,
                          margin: float = 0.1, max_repeats: int = MAX_REPEATS,
                          round_size: int = ROUND, setup: RunSetup = RunSetup(),
                          stop_at_regression: bool = False,
                          on_look: Callable[[sequential.Ledger], None] | None = None
                          ) -> Comparison:
    """Looks at the two runs, extends both by a round for the scenarios still undecided, and
    looks again, until each is decided or `max_repeats` ran; with `stop_at_regression` (a
    CI gate), also once a scenario is decided regressed, since no later look can undo it.
    The comparison at the end, with the looks' record (`Comparison.sequence`)."""
    out = setup.out_dir
    a, b = read_run(run_a, out), read_run(run_b, out)
    if a.run_id == b.run_id:
        raise UsageError(f"A and B are the same run, {a.run_id}: --until-decided needs two")
    shared = [s.id for s in a.scenarios if b.scenario(s.id) is not None]
    if not shared:
        compare_runs(a, b, alpha=alpha, margin=margin)  # raises, naming both runs' scenarios
    first = min(_ran(document, sid) for document in (a, b) for sid in shared)
    if max_repeats < first:
        raise UsageError(f"--max-repeats {max_repeats} is below the repeats the runs have "
                         f"({first}): give at least {first}")
    if round_size < 1:
        raise UsageError(f"--round must be at least 1, got {round_size}")
    design = sequential.Design(alpha, margin, max(1, first), max_repeats, round_size,
                               len(shared))
    ledger = sequential.start(design)
    spent = {a.run_id: 0, b.run_id: 0}
    for j, n in enumerate(design.looks()):
        if j:
            targets = {shared[i]: n for i in ledger.open()}
            for document in (a, b):
                spent[document.run_id] += sum(max(0, n - _ran(document, sid))
                                              for sid in targets)
                extend_run(document.run_id, targets, setup)
            a, b = read_run(a.run_id, out), read_run(b.run_id, out)
        ledger = sequential.look(ledger, [_table(a, b, sid) for sid in shared],
                                 [_void(a, sid) + _void(b, sid) for sid in shared])
        if on_look is not None:
            on_look(ledger)
        regressed = any(d.change is Change.REGRESSED for d in ledger.decisions)
        if ledger.finished or (stop_at_regression and regressed):
            break
    return with_sequence(compare_runs(a, b, alpha=alpha, margin=margin), ledger, shared,
                         (spent[a.run_id], spent[b.run_id]))


def _ran(document: RunDocument, sid: str) -> int:
    scenario = document.scenario(sid)
    return scenario.stats.counts.completed if scenario is not None else 0


def _void(document: RunDocument, sid: str) -> int:
    scenario = document.scenario(sid)
    return scenario.stats.counts.void if scenario is not None else 0


def _table(a: RunDocument, b: RunDocument, sid: str) -> tuple[int, int, int, int] | None:
    x, y = a.scenario(sid), b.scenario(sid)
    if x is None or y is None or not x.stats.counts.scored or not y.stats.counts.scored:
        return None
    return (x.stats.counts.passed, x.stats.counts.scored, y.stats.counts.passed,
            y.stats.counts.scored)
