"""The commands that run workers: `alk run` (lanes, or a run resumed), `alk rerun` (one repeat
of a saved run again) and `alk check-worker` (one repeat of each scenario, for the protocol).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from alk.cli.app import (
    KOpt,
    LaneOpt,
    LinkBaseOpt,
    OutOpt,
    StatsOpt,
    command,
    console,
    echo_json,
    jobs_option,
    print_runs,
    warn,
)
from alk.errors import UsageError

if TYPE_CHECKING:
    from alk.api import Adaptive


@command(short_help="Run lanes: N fresh worker processes a scenario; report.")
def run(
    lane: List[str] = typer.Option([], "--lane", "-l", help="A lane name in ./lanes/ or a path "
                                   "to a .toml; repeatable, and a quoted pattern such as "
                                   "'lanes/*.toml' names every lane it matches."),
    repeats: Optional[str] = typer.Option(None, "--repeats", "-n", metavar="N|auto",
                                          help="Repeats per scenario (default: the lane's "
                                          "`repeats`), or auto: sample each scenario until "
                                          "its verdict is settled (--max-repeats, --ci-width)."),
    max_repeats: Optional[int] = typer.Option(None, "--max-repeats", min=1, help="With "
                                              "--repeats auto: at most this many repeats a "
                                              "scenario, void ones included (default 100)."),
    ci_width: Optional[float] = typer.Option(None, "--ci-width", help="With --repeats auto: "
                                             "stop a scenario once the 95% interval of its "
                                             "pass rate is narrower than this (default 0.2)."),
    scenario: List[str] = typer.Option([], "--scenario", "-s", help="Run only this scenario "
                                       "(repeatable)."),
    jobs: Optional[int] = jobs_option(None, "Repeats at once, each its own worker process "
                                      "(default: the number of cores; a lane's max_parallel "
                                      "caps it)."),
    resume: Optional[str] = typer.Option(None, "--resume", metavar="RUN_ID", help="Continue an "
                                         "interrupted or killed run: its finished repeats are "
                                         "kept, the rest run with the same seeds."),
    executor: str = typer.Option("local", "--executor", help="Where repeats run: local, or "
                                 "dask (a Dask distributed cluster; needs alk[dask] and "
                                 "--scheduler)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", metavar="ADDRESS",
                                            help="The Dask scheduler, e.g. tcp://HOST:8786."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds per repeat "
                                            "(default: the lane's `timeout_s`)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Run seed; each repeat's seed "
                                       "derives from it. Default: random, recorded."),
    as_json: bool = typer.Option(False, "--json", help="Print the result document instead of "
                                 "the report."),
    keep_workspaces: bool = typer.Option(False, "--keep-workspaces", help="Keep each repeat's "
                                         "workspace folder (in the system temp folder)."),
    limit: List[str] = typer.Option([], "--limit", help="NAME=VALUE, over the lane's [limits] "
                                    "(repeatable; 0 lifts one): memory_mb, cpu_s, max_processes, "
                                    "max_open_files, max_file_mb, disk_mb."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    warm: bool = typer.Option(False, "--warm", help="Fork every repeat from one prepared "
                              "process of the worker, its framework imported once: faster, "
                              "with a weaker guarantee (docs/security.md, 'Warm start')."),
    fail_under: Optional[float] = typer.Option(None, "--fail-under", metavar="RATE",
                                               help="Exit 1 only when a scenario's pass rate "
                                               "is below RATE (e.g. 0.95), instead of on any "
                                               "failed repeat."),
    fail_under_lower: bool = typer.Option(False, "--fail-under-lower", help="With "
                                          "--fail-under: judge the lower bound of each "
                                          "pass rate's 95% interval, not the rate."),
    k: int = KOpt,
    stats: bool = StatsOpt,
    link_base: Optional[str] = LinkBaseOpt,
    out: Path = OutOpt,
) -> None:
    """Run lanes: every scenario, N fresh worker processes each; report and exit by verdict.
    With several lanes, one run holds them all and the report adds a lane x scenario matrix."""
    from alk import api
    from alk.records import ExitCode
    from alk.report import progress

    engine, jobs = api.engine_for(executor, scheduler, jobs)
    rule = (api.PassRule(fail_under, fail_under_lower).check()
            if fail_under is not None or fail_under_lower else None)
    shown = progress.run_progress(console(stderr=True), enabled=not quiet)
    setup = api.RunSetup(out_dir=out, keep_workspaces=keep_workspaces, jobs=jobs, engine=engine,
                         reports=True, link_base=link_base,
                         on_plan=shown.plan if shown else None,
                         on_batch=shown.batch if shown else None,
                         on_start=shown.start if shown else None,
                         on_repeat=shown.advance if shown else None)
    if resume is not None:
        if (lane or scenario or repeats or seed is not None or timeout or limit
                or max_repeats is not None or ci_width is not None or rule is not None):
            raise UsageError("--resume RUN_ID continues a run as it began: leave out "
                             "--lane, --scenario, --repeats, --seed, --timeout, --limit, "
                             "--max-repeats, --ci-width and --fail-under")
        with shown or contextlib.nullcontext(), engine or contextlib.nullcontext():
            results = api.resume(resume, setup)
    else:
        if not lane:
            raise UsageError("name a lane: --lane NAME (repeatable), or --resume RUN_ID")
        count, adaptive = _parse_repeats(repeats, max_repeats, ci_width)
        loaded = [dataclasses.replace(one, warm=True) if warm else one
                  for one in api.load_lanes(lane)]
        for one in loaded:
            warn(api.lane_warnings(one))
        options = api.RunOptions(repeats=count, scenarios=tuple(scenario), seed=seed,
                                 timeout_s=timeout, limits=_parse_limits(limit),
                                 adaptive=adaptive, rule=rule or api.PassRule())
        with shown or contextlib.nullcontext(), engine or contextlib.nullcontext():
            results = api.run_lanes(loaded, options, setup)
    documents = [result.document for result in results.runs]
    if as_json:
        echo_json(api.runs_json(documents), f"run {results.run_id}")
    else:
        print_runs(documents, out, k, stats)
    if results.reports is not None:
        warn(list(results.reports.problems))
    raise typer.Exit(ExitCode.INTERRUPTED if results.interrupted else results.exit_code)

@command(short_help="Run one repeat of a saved run again, exactly as it ran.")
def rerun(
    run_id: str = typer.Argument(..., help="Run id (RUN/LANE for a lane of a run of several), "
                                 "or 'latest'."),
    scenario: str = typer.Argument(..., help="Scenario id."),
    repeat: int = typer.Argument(..., help="Repeat number (1-based)."),
    anyway: bool = typer.Option(False, "--anyway", help="Run it even though the lane file "
                                "changed since (then it is not the same repeat)."),
    k: int = KOpt,
    out: Path = OutOpt,
) -> None:
    """Run one repeat of a saved run again: the same lane (its sha256 checked), scenario,
    seed, repeat number and start message, as a new run. Says when the worker changed since,
    and what the repeat did then and now. Exits by the new repeat's verdict."""
    from alk import api
    from alk.records import ExitCode
    from alk.report.terminal.run import rerun_summary, run_report

    result = api.rerun(run_id, scenario, repeat, api.RunSetup(out_dir=out, reports=True),
                       anyway=anyway)
    run = result.run.runs[0]
    shown = console()
    shown.print(run_report(run.document, out.resolve(), k=k))
    shown.print()
    shown.print(rerun_summary(run.document, result.original))
    if result.run.reports is not None:
        warn(list(result.run.reports.problems))
    raise typer.Exit(ExitCode.INTERRUPTED if run.interrupted else run.exit_code)

@command("check-worker", short_help="Check that a worker speaks protocol v1.")
def check_worker(
    lane: str = LaneOpt,
    scenario: List[str] = typer.Option([], "--scenario", "-s", help="Check only this scenario "
                                       "(repeatable)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds per repeat "
                                            "(default: the lane's `timeout_s`)."),
    out: Path = OutOpt,
) -> None:
    """Check a worker against protocol v1: the handshake, then one repeat of each scenario,
    every problem listed at once. Exit 0 when the worker speaks the protocol and its adapter
    did its part: a finding about the framework (its own handling of a fault, a kill or an
    answer alk served, such as fault_unrecovered) and a failed expectation are listed, not
    counted against it. Exit 1 when a problem is the worker's to fix (a protocol violation, no
    result, a crash or hang, a void repeat), 2 for a lane or usage error, 130 when
    interrupted."""
    from alk import api
    from alk.records import ExitCode
    from alk.report import listings

    loaded = api.load_lane(lane)
    warn(api.lane_warnings(loaded))
    result, findings = api.check_worker(
        loaded, api.RunOptions(repeats=1, scenarios=tuple(scenario), timeout_s=timeout),
        api.RunSetup(out_dir=out))
    console().print(listings.findings_view(findings))
    if result.interrupted:
        raise typer.Exit(ExitCode.INTERRUPTED)
    raise typer.Exit(ExitCode.PASS if all(f.ok for f in findings) else ExitCode.FAIL)

def _parse_repeats(value: Optional[str], max_repeats: Optional[int],
                   ci_width: Optional[float]) -> tuple[int | None, Adaptive | None]:
    """--repeats N, or auto with its options."""
    from alk.api import Adaptive

    if value == "auto":
        options = {"max_repeats": max_repeats, "ci_width": ci_width}
        return None, Adaptive(**{name: v for name, v in options.items()
                                  if v is not None}).check()
    if max_repeats is not None or ci_width is not None:
        raise UsageError("--max-repeats and --ci-width are for --repeats auto")
    if value is None:
        return None, None
    if not (value.isascii() and value.isdigit()):
        raise UsageError(f"--repeats must be a whole number or auto, got {value!r}")
    return int(value), None


def _parse_limits(values: List[str]) -> dict[str, int]:
    limits = {}
    for value in values:
        name, _, number = value.partition("=")
        if not (number.isascii() and number.isdigit()):
            raise UsageError(f"--limit {value!r}: expected NAME=WHOLE_NUMBER, e.g. memory_mb=2048")
        limits[name.strip()] = int(number)
    return limits
