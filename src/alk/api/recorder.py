"""A run's record as it is made (`RunRecorder`), one lifecycle for a new run, a resumed one and
one written up from its journal alone:

- `begin`: a new run's result.json is on disk from its start, so that `alk report RUN_ID`
  works while it goes on;
- `preflight`: the probe passed; a resumed run checks its worker reports what it did before,
  and only then goes on (nothing on disk changes until it does);
- `repeat`: a repeat finished (the journal holds it already): result.json is written again
  now and then (`checkpoint`), never taking more than a twentieth of the run;
- `finish`: the final document, its exit code taken before redaction, written, and the
  journal's end.

result.json is written through `alk.result.store.write_document`, looked up when it is
called, so that one patch there sees every document a run writes.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from alk.errors import ResumeError
from alk.layout import result_path
from alk.records import Execution, ExitCode, Plan, Preflight
from alk.redaction import Redactor
from alk.result import store
from alk.result.document import RerunOf, Resumption, RunDocument, build_document
from alk.result.journal import JournalWriter
from alk.result.options import RunOptions
from alk.result.verdict import exit_code
from alk.runner.procfs import own_peak_rss_mb

# While a run goes on, result.json is rewritten after a repeat ends, at most this often (a
# killed run loses at most the repeats of this long); after every repeat would cost a fast lane
# a few percent.
CHECKPOINT_INTERVAL_S = 1.0
# A checkpoint waits at least this many times as long as the last one took.
CHECKPOINT_SHARE = 20


class RunRecorder:
    """Records the run of `plan` whose `journal` is open. `identity`: the framework and version
    a resumed run's worker reported before; `resumed_at`: when this resumption began (None for
    a new run, or one written up from its journal)."""

    def __init__(self, plan: Plan, journal: JournalWriter, options: RunOptions, *,
                 out_dir: Path, redactor: Redactor, started_at: datetime, jobs: int,
                 executor: str, rerun_of: RerunOf | None = None,
                 resumed: Sequence[Resumption] = (),
                 identity: tuple[str | None, str | None] | None = None,
                 resumed_at: datetime | None = None) -> None:
        self.plan, self.journal, self.options = plan, journal, options
        self.out_dir, self.redactor = out_dir, redactor
        self.started_at, self.jobs, self.executor = started_at, jobs, executor
        self.rerun_of = rerun_of
        self.resumed = list(resumed)
        self.identity = identity
        self.resumed_at = resumed_at
        self.path = result_path(out_dir, plan.run_id)
        # A resumed run goes on once its probe passed as before.
        self.going_on = resumed_at is None
        self._next_checkpoint = 0.0

    def document(self, execution: Execution, status: str,
                 finished_at: datetime | None = None) -> RunDocument:
        # How many ran at once, as the engine decided (max_parallel, RLIMIT_NPROC), not asked.
        return build_document(self.plan, execution, status=status, started_at=self.started_at,
                              finished_at=finished_at, resumed=self.resumed,
                              jobs=execution.jobs or self.jobs, executor=self.executor,
                              adaptive=self.options.adaptive, rule=self.options.rule,
                              rerun_of=self.rerun_of, harness_peak_rss_mb=own_peak_rss_mb())

    def checkpoint(self, execution: Execution) -> None:
        store.write_document(self.path, self.document(execution, "running"), self.redactor)

    def begin(self) -> None:
        """Before the probe: a new run is on disk from its start (a resumed one changes
        nothing yet); the first checkpoint after it is due a second later."""
        if self.resumed_at is None:
            self.checkpoint(Execution())
        self._next_checkpoint = time.monotonic() + CHECKPOINT_INTERVAL_S

    def preflight(self, preflight: Preflight, done: Sequence) -> None:
        """The probe passed: a new run journals its worker's identity; a resumed one must
        report the identity it began with, and then goes on from its `done` repeats."""
        reported = (preflight.framework, preflight.version)
        if self.identity is None:
            self.journal.preflight(preflight)
        elif reported != tuple(self.identity):
            raise ResumeError(
                f"run {self.plan.run_id} ran {self.identity[0]} {self.identity[1]}; its worker "
                f"now reports {reported[0]} {reported[1]}: resuming would mix two versions in "
                "one result; start a new run, or reinstall the version it began with")
        if self.resumed_at is not None:
            self.going_on = True
            self.journal.resumed(self.resumed_at, len(done))
            self.resumed.append(Resumption(self.resumed_at.isoformat(timespec="seconds"),
                                           len(done)))
            self.checkpoint(Execution(preflight=preflight, repeats=list(done)))

    def repeat(self, execution: Execution) -> None:
        """A repeat finished: result.json again, when a checkpoint is due."""
        began = time.monotonic()
        if began >= self._next_checkpoint:
            self.checkpoint(execution)
            # A document grows with the run (about a second to write at 10,000 repeats): the
            # next waits at least 20 times as long as this one took, so that checkpoints never
            # take more than a twentieth of the run.
            finished = time.monotonic()
            self._next_checkpoint = finished + max(CHECKPOINT_INTERVAL_S,
                                                   CHECKPOINT_SHARE * (finished - began))

    def finish(self, execution: Execution) -> tuple[RunDocument, ExitCode]:
        """The final document as written, and the run's exit code. A resumption that never
        began (its probe refused or void, or interrupted first) leaves the run as it was: its
        document then is the one on disk, or ResumeError says why it cannot go on here."""
        if not self.going_on:
            if execution.interrupted:
                before = store.read_document(self.out_dir, self.plan.run_id)
                return before, exit_code(before)
            why = execution.void.detail if execution.void else "its worker never got ready"
            raise ResumeError(f"run {self.plan.run_id} cannot go on here: {why}; it is left as "
                              "it was, to be resumed where it can run")
        status = "interrupted" if execution.interrupted else "complete"
        final = self.document(execution, status, datetime.now(timezone.utc))
        # The verdict is taken before redaction: what is masked for people never changes it.
        code = exit_code(final)
        written = store.write_document(self.path, final, self.redactor)
        self.journal.end(status)
        return written, code
