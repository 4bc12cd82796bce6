"""How and where a run runs, and who listens (`RunSetup`): what every entry point of the API
shares, none of which changes what is measured (that is `RunOptions`); and the engine and the
repeats at once that `alk run --executor`, `--scheduler` and `--jobs` ask for (`engine_for`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from alk.errors import UsageError
from alk.execute.engine import Engine
from alk.execute.slots import cores
from alk.records import Plan, RepeatResult, RepeatSpec
from alk.report.links import check_link_base
from alk.runner.request import Runner


@dataclass(frozen=True)
class RunSetup:
    """`out_dir`: the folder that holds transcripts/ and reports/. `runner`: what starts each
    worker (the sandboxed local runner when None). `environ`: alk's own environment, from
    which a lane's `required_env` crosses (the process's when None). `keep_workspaces`: leave
    each repeat's workspace folder. `jobs`: repeats at once on this machine; `engine`: where
    they run instead (a Dask cluster), else this process's threads. `reports`: write the run's
    report.html, report.md and junit.xml at its end. `on_plan`, `on_batch`, `on_start` and
    `on_repeat` hear the plan (with the repeats already done), the repeats about to run (once,
    or once a round of `--repeats auto`), each repeat's start and each repeat's result, in the
    calling thread. `link_base`: the URL at which `out_dir` is served, for report.md's links
    (checked when the setup is made, before anything runs)."""

    out_dir: Path = Path(".")
    runner: Runner | None = None
    environ: Mapping[str, str] | None = None
    keep_workspaces: bool = False
    jobs: int = 1
    engine: Engine | None = None
    reports: bool = False
    on_plan: Callable[[Plan, Sequence[RepeatResult]], None] | None = None
    on_batch: Callable[[Sequence[RepeatSpec]], None] | None = None
    on_start: Callable[[RepeatSpec], None] | None = None
    on_repeat: Callable[[RepeatResult], None] | None = None
    link_base: str | None = None

    def __post_init__(self) -> None:
        if self.link_base is not None:
            object.__setattr__(self, "link_base", check_link_base(self.link_base))

    @property
    def env(self) -> Mapping[str, str]:
        """The environment a run reads: `environ`, or this process's."""
        return os.environ if self.environ is None else self.environ


def engine_for(executor: str, scheduler: str | None,
               jobs: int | None) -> tuple[Engine | None, int]:
    """The engine `alk run --executor` names (None: this machine's threads) and how many
    repeats run at once here: `jobs`, or the cores alk may use. Raises UsageError for options
    that cannot work together."""
    if executor == "local":
        if scheduler:
            raise UsageError("--scheduler is for --executor dask")
        return None, jobs or cores()
    if executor != "dask":
        raise UsageError(f"--executor {executor!r}: expected local or dask")
    if not scheduler:
        raise UsageError("--executor dask needs --scheduler tcp://HOST:PORT, the address of a "
                         "running Dask scheduler")
    if jobs:
        raise UsageError("--jobs is for --executor local: on Dask, each worker runs as many "
                         "repeats at once as it has threads (dask worker --nthreads)")
    from alk.execute.dask import DaskEngine  # distributed, only for a run on Dask

    return DaskEngine(scheduler), cores()
