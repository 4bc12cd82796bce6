"""Where a run's repeats run: an engine opens a lane, probes its worker once, then runs repeats.

- `threads.ThreadEngine` runs them in this process's threads, `-j N` at a time (each still a
  fresh, isolated worker process of its own);
- `dask.DaskEngine` sends each to a worker of a Dask distributed cluster, which runs it with the
  same runner, sandbox and gateway and sends back its result and transcript.

Both call `on_start` and `on_result` in the thread that called `run`, one at a time, so that the
executor and the journal never see two results at once.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence

from alk.records import Observation, Plan, Preflight, RepeatResult, RepeatSpec
from alk.redaction import Redactor


class OpenLane(Protocol):
    """A lane opened on an engine. `jobs`: how many repeats run at once on this machine
    (None when they run elsewhere)."""

    jobs: int | None

    @property
    def workspaces(self) -> Path | None:
        """The folder of kept workspaces (--keep-workspaces), else None."""

    def probe(self) -> Observation:
        """Runs the preflight-only probe."""

    def identify(self, preflight: Preflight) -> None:
        """Every start from now on must report this framework and version."""

    def run(self, items: Sequence[RepeatSpec], *,
            on_start: Callable[[RepeatSpec], None] | None,
            on_result: Callable[[RepeatResult], None]) -> None:
        """Runs the repeats; on KeyboardInterrupt ends every running worker, hands over what
        had finished, and raises it again."""


class Engine(Protocol):
    name: str  # what the result's settings.executor says: "local", "dask"

    def open(self, plan: Plan, out_dir: Path, redactor: Redactor, environ: Mapping[str, str],
             keep_workspaces: bool) -> AbstractContextManager[OpenLane]:
        """Raises `alk.execute.repeat.RunVoid` when the lane cannot run at all."""
