"""The `alk` command: parses options, calls `alk.api`, renders, maps outcomes to exit codes.

Exit codes: 0 every scenario passed; 1 a scenario failed or was flaky; 2 usage or lane error;
3 void (something could not be scored: unsupported version, missing environment, ...);
130 interrupted.

Only typer is imported up front: each command imports what it needs (rich, numpy, the runner)
when it runs, so that `alk --help` and a mistyped option answer at once.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import TYPE_CHECKING, List, NoReturn, Optional

import typer

from alk.errors import AlkError, UsageError

if TYPE_CHECKING:
    from alk.transcript.reader import TranscriptPage

app = typer.Typer(
    name="alk", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
    help="alk, the agent lane kit: run agent-framework workers as untrusted subprocesses, "
         "many times, and measure how reliably they run.",
)

# Events `alk show` prints at once: a screenful or two by default, and a bound on what it holds
# (a page is one table, kept whole until it is printed).
SHOW_LIMIT = 200
SHOW_LIMIT_MAX = 2_000

LaneOpt = typer.Option(..., "--lane", "-l", help="A lane name in ./lanes/ or a path to a .toml.")
OutOpt = typer.Option(Path("."), "--out", help="Folder that holds transcripts/ and reports/.")
KOpt = typer.Option(5, "--k", min=1, help="The k of pass^k in the report: the chance that k "
                    "repeats in a row all pass.")


def main() -> None:
    # A CI job cancelled (SIGTERM) or a closed terminal (SIGHUP) stops a run like Ctrl-C does:
    # the worker's group is ended and the repeats finished so far are saved.
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _interrupt)
    # Started in the background (`alk run &` in a script, nohup), alk may inherit SIGINT as
    # ignored, and so would every worker: then a timeout's SIGINT shows nothing of where a
    # worker hung. A handler (reset to the default on exec) gives workers the default back.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # "alk" in every usage line, `python -m alk` too: the help `alk.launch` prints from a copy
    # is the same whichever way alk was started.
    app(prog_name="alk")


def _interrupt(number: int, frame: object) -> None:
    raise KeyboardInterrupt


def _fail(message: str, code: int | None = None) -> NoReturn:
    from rich.console import Console
    from rich.text import Text

    from alk.records import ExitCode
    from alk.report import safe_text

    # The message may quote a lane's values or a worker's text: never read it as markup, and
    # never let its control characters reach the terminal.
    Console(stderr=True).print(Text.assemble(("error: ", "bold red"), safe_text.printable(message)))
    raise typer.Exit(ExitCode.USAGE if code is None else code)


def _echo_json(document: dict, source: str) -> None:
    import json

    # ASCII only: a worker's text may hold C1 controls and bidi overrides, and JSON's \u escapes
    # carry them to a parser without showing them to a terminal. NaN is not JSON.
    try:
        text = json.dumps(document, ensure_ascii=True, allow_nan=False, indent=1)
    except ValueError:
        _fail(f"{source}: holds a NaN or infinite number, which JSON cannot carry; "
              "`alk report` renders the run without --json")
    typer.echo(text)


@app.command(short_help="Run lanes: N fresh worker processes a scenario; report.")
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
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Repeats at once, each "
                                       "its own worker process (default: the number of cores; "
                                       "a lane's max_parallel caps it)."),
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
                                    "max_open_files, max_file_mb."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    fail_under: Optional[float] = typer.Option(None, "--fail-under", metavar="RATE",
                                               help="Exit 1 only when a scenario's pass rate "
                                               "is below RATE (e.g. 0.95), instead of on any "
                                               "failed repeat."),
    fail_under_lower: bool = typer.Option(False, "--fail-under-lower", help="With "
                                          "--fail-under: judge the lower bound of each "
                                          "pass rate's 95% interval, not the rate."),
    k: int = KOpt,
    out: Path = OutOpt,
) -> None:
    """Run lanes: every scenario, N fresh worker processes each; report and exit by verdict.
    With several lanes, one run holds them all and the report adds a lane x scenario matrix."""
    from rich.console import Console

    from alk import api
    from alk.execute.slots import cores
    from alk.lane.load import lane_warnings
    from alk.records import ExitCode
    from alk.report import progress
    from alk.result.rule import PassRule

    try:
        engine = _engine(executor, scheduler)
        if engine is not None and jobs:
            raise UsageError("--jobs is for --executor local: on Dask, each worker runs as "
                             "many repeats at once as it has threads (dask worker --nthreads)")
        jobs = jobs or cores()  # default: the cores alk may use
        rule = (PassRule(fail_under, fail_under_lower).check()
                if fail_under is not None or fail_under_lower else None)
        shown = progress.run_progress(Console(stderr=True), enabled=not quiet)
        hooks = dict(on_plan=shown.plan if shown else None,
                     on_start=shown.start if shown else None,
                     on_repeat=shown.advance if shown else None)
        if resume is not None:
            if (lane or scenario or repeats or seed is not None or timeout or limit
                    or max_repeats is not None or ci_width is not None or rule is not None):
                raise UsageError("--resume RUN_ID continues a run as it began: leave out "
                                 "--lane, --scenario, --repeats, --seed, --timeout, --limit, "
                                 "--max-repeats, --ci-width and --fail-under")
            with shown or contextlib.nullcontext(), engine or contextlib.nullcontext():
                results = api.resume(resume, out_dir=out, jobs=jobs, engine=engine,
                                     keep_workspaces=keep_workspaces, **hooks)
        else:
            if not lane:
                raise UsageError("name a lane: --lane NAME (repeatable), or --resume RUN_ID")
            count, adaptive = _parse_repeats(repeats, max_repeats, ci_width)
            loaded = api.load_lanes(lane)
            for one in loaded:
                _warn(lane_warnings(one))
            with shown or contextlib.nullcontext(), engine or contextlib.nullcontext():
                results = api.run_lanes(loaded, repeats=count, scenarios=scenario, seed=seed,
                                        timeout_s=timeout, limits=_parse_limits(limit),
                                        out_dir=out, keep_workspaces=keep_workspaces,
                                        jobs=jobs, engine=engine, adaptive=adaptive,
                                        rule=rule or PassRule(), **hooks)
    except AlkError as exc:
        _fail(str(exc))
    documents = [result.document for result in results.runs]
    if as_json:
        _echo_json(api.runs_json(documents), f"run {results.run_id}")
    else:
        _print_runs(documents, out, k)
    if results.reports is not None:
        _warn(list(results.reports.problems))
    raise typer.Exit(ExitCode.INTERRUPTED if results.interrupted else results.exit_code)


def _engine(executor: str, scheduler: Optional[str]):  # -> alk.execute.engine.Engine | None
    """The engine --executor names (None: this machine's threads)."""
    if executor == "local":
        if scheduler:
            raise UsageError("--scheduler is for --executor dask")
        return None
    if executor != "dask":
        raise UsageError(f"--executor {executor!r}: expected local or dask")
    if not scheduler:
        raise UsageError("--executor dask needs --scheduler tcp://HOST:PORT, the address of a "
                         "running Dask scheduler")
    from alk.execute.dask import DaskEngine

    return DaskEngine(scheduler)


def _print_runs(documents: list, out: Path, k: int) -> None:  # list[RunDocument]
    """Each lane's report; with several lanes, the lane x scenario matrix after them."""
    from rich.console import Console

    from alk.report import matrix
    from alk.report.terminal.run import run_report

    console = Console()
    for number, document in enumerate(documents):
        if number:
            console.print()  # the lanes of one run, apart
        console.print(run_report(document, out.resolve(), k=k))
    if len(documents) > 1:
        console.print()
        console.print(matrix.lane_matrix(documents))


@app.command(short_help="Show a saved run again, and write its report files again.")
def report(
    run_id: Optional[str] = typer.Argument(None, help="Run id, or 'latest' (the default)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result document."),
    open_html: bool = typer.Option(False, "--open", help="Open report.html in a browser, "
                                   "where there is one."),
    k: int = KOpt,
    out: Path = OutOpt,
) -> None:
    """Re-render a saved run from reports/RUN_ID/result.json, and write its report.html,
    report.md and junit.xml again."""
    from alk import api
    from alk.layout import HTML_NAME

    try:
        documents = api.read_runs(run_id, out)
    except AlkError as exc:
        _fail(str(exc))
    written = api.write_reports(documents, out)
    if as_json:
        _echo_json(api.runs_json(documents), f"run {run_id or 'latest'}")
    else:
        _print_runs(documents, out, k)
    _warn(list(written.problems))
    if open_html:
        page = next((path for path in written.paths if path.name == HTML_NAME), None)
        if page is not None:
            _open_in_browser(page)


def _open_in_browser(page: Path) -> None:
    """Opens the page where a browser is known; else says where it is (a server, CI)."""
    import webbrowser

    from rich.console import Console

    try:
        opened = webbrowser.get().open(page.resolve().as_uri())
    except webbrowser.Error:
        opened = False
    if not opened:
        Console(stderr=True).print(f"no browser to open here: open {page} where there is one",
                                   markup=False, highlight=False)


@app.command(short_help="Compare two runs of the same scenarios: did B regress?")
def compare(
    run_a: str = typer.Argument(..., help="The run before: a run id (RUN/LANE for a lane of a "
                                "run of several)."),
    run_b: str = typer.Argument(..., help="The run after."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression",
                                            help="Exit 1 when a scenario regressed (a CI gate)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level, after Holm's "
                                "correction across scenarios."),
    margin: float = typer.Option(0.1, "--margin", help="How far apart two pass rates may be and "
                                 "still be called unchanged."),
    out: Path = OutOpt,
) -> None:
    """Compare two saved runs scenario by scenario, B against A: each scenario regressed,
    improved, unchanged or inconclusive, by the rule the report states."""
    import msgspec
    from rich.console import Console

    from alk import api
    from alk.compare import Change, compare_runs
    from alk.records import ExitCode
    from alk.report.compare_view import compare_view

    try:
        comparison = compare_runs(api.read_run(run_a, out), api.read_run(run_b, out),
                                  alpha=alpha, margin=margin)
    except AlkError as exc:
        _fail(str(exc))
    if as_json:
        _echo_json(msgspec.to_builtins(comparison), f"comparison of {run_a} and {run_b}")
    else:
        Console().print(compare_view(comparison))
        written = api.write_compare_page(comparison, out)
        for page in written.paths:
            Console().print(f"page        {page}", markup=False, highlight=False)
        _warn(list(written.problems))
    if fail_on_regression and comparison.change is Change.REGRESSED:
        raise typer.Exit(ExitCode.FAIL)
    # A gate must not be passed by voiding: a scenario B could not score is not a pass.
    unscored = [s.id for s in comparison.scenarios if s.b.scored == 0]
    if fail_on_regression and unscored:
        _fail(f"run {run_b} scored no repeat of {', '.join(unscored)}: nothing to compare "
              "there, so no gate passes; see `alk report " + run_b + "`", ExitCode.VOID)


@app.command(short_help="Run one repeat of a saved run again, exactly as it ran.")
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
    from rich.console import Console

    from alk import api
    from alk.records import ExitCode
    from alk.report.terminal.run import rerun_summary, run_report

    try:
        result = api.rerun(run_id, scenario, repeat, out_dir=out, anyway=anyway)
    except AlkError as exc:
        _fail(str(exc))
    run = result.run.runs[0]
    console = Console()
    console.print(run_report(run.document, out.resolve(), k=k))
    console.print()
    console.print(rerun_summary(run.document, result.original))
    if result.run.reports is not None:
        _warn(list(result.run.reports.problems))
    raise typer.Exit(ExitCode.INTERRUPTED if run.interrupted else run.exit_code)


@app.command(short_help="List past runs, newest first.")
def runs(
    limit: int = typer.Option(20, "--limit", min=1, help="Runs to list at most."),
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON."),
    out: Path = OutOpt,
) -> None:
    """List the runs saved under reports/, newest first: when, which lanes, what status,
    how many repeats passed, and the verdict by each run's rule."""
    import msgspec
    from rich.console import Console

    from alk import api
    from alk.report import listings

    try:
        found = api.list_runs(out, limit=limit)
    except AlkError as exc:
        _fail(str(exc))
    if as_json:
        _echo_json({"runs": msgspec.to_builtins(found)}, "runs")
    else:
        Console().print(listings.runs_view(found))


@app.command(short_help="Print a page of one repeat's transcript.")
def show(
    run_id: str = typer.Argument(..., help="Run id, or 'latest'."),
    scenario: str = typer.Argument(..., help="Scenario id."),
    repeat: int = typer.Argument(..., help="Repeat number (1-based)."),
    channel: List[str] = typer.Option([], "--channel", "-c", help="Show only this channel "
                                      "(repeatable): agent, tool, model, user, framework, "
                                      "stderr, harness."),
    start: int = typer.Option(1, "--from", min=1, help="First event to show, by position in "
                              "the transcript (1-based; among the chosen channels' events with "
                              "--channel), not by the seq column."),
    limit: int = typer.Option(SHOW_LIMIT, "--limit", min=1, max=SHOW_LIMIT_MAX,
                              help="Events to show at most; the next page starts where "
                                   "this one ends (--from)."),
    out: Path = OutOpt,
) -> None:
    """Print a page of one repeat's transcript, readably, and the command for the next page."""
    from rich.console import Console

    from alk import api
    from alk.report import transcript_view

    channels = list(dict.fromkeys(channel)) or None
    try:
        document = api.read_run(run_id, out)
        entry = api.repeat_entry(document, scenario, repeat, out)
        page = api.read_repeat_page(entry, out, start=start, limit=limit, channels=channels,
                                    digest=transcript_view.event_row)
    except AlkError as exc:
        _fail(str(exc))
    console = Console()
    console.print(transcript_view.repeat_header(document.run_id, scenario, repeat, entry))
    console.print(transcript_view.repeat_facts(entry))
    if page.rows:
        console.print(transcript_view.transcript_events(page.rows))
    more = _more_command(page, [document.run_id, scenario, str(repeat)], channels, limit, out)
    # Unwrapped, so that the next page's command copies as one line.
    console.print(transcript_view.page_summary(page, channels, more), soft_wrap=True)
    console.print(transcript_view.transcript_hash(entry, api.transcript_intact(entry, out)))


def _more_command(page: TranscriptPage, target: List[str], channels: Optional[List[str]],
                  limit: int, out: Path) -> Optional[tuple[str, str]]:
    """The `alk show` command for the next page, or for the last one when this page is past the
    end; None when the page reached the end."""
    import shlex

    shown_to = page.first + len(page.rows) - 1
    if page.rows and shown_to < page.matching:
        label, start = "next page", shown_to + 1
    elif not page.rows and page.matching:
        label, start = "last page", max(1, page.matching - limit + 1)
    else:
        return None
    argv = ["alk", "show", *target]
    for name in channels or ():
        argv += ["--channel", name]
    argv += ["--from", str(start)]
    if limit != SHOW_LIMIT:
        argv += ["--limit", str(limit)]
    if out != Path("."):
        argv += ["--out", str(out)]
    return label, shlex.join(argv)


@app.command()
def lanes(lanes_dir: Optional[Path] = typer.Option(None, "--dir", help="Lanes folder "
                                                   "(default: ./lanes).")) -> None:
    """List the lanes: framework, version requirement, scenarios."""
    from rich.console import Console

    from alk import api
    from alk.layout import LANES_DIR
    from alk.records import ExitCode
    from alk.report import listings

    try:
        found, errors = api.list_lanes(lanes_dir or Path(LANES_DIR))
    except AlkError as exc:
        _fail(str(exc))
    Console().print(listings.lanes_view(found, errors))
    if errors:
        raise typer.Exit(ExitCode.USAGE)


@app.command(short_help="List the cause codes, or explain one.")
def causes(code: Optional[str] = typer.Argument(None, help="One cause code to explain.")
           ) -> None:
    """List the cause codes: the stable vocabulary every repeat is attributed with."""
    from rich.console import Console

    from alk.report import listings

    if code is None:
        Console().print(listings.causes_view())
        return
    view = listings.cause_view(code)
    if view is None:
        _fail(f"no cause {code!r}{listings.cause_suggestion(code)}; `alk causes` lists them all")
    Console().print(view)


@app.command()
def doctor() -> None:
    """Show how this machine contains workers, and why."""
    from rich.console import Console

    from alk import api
    from alk.report import listings

    Console().print(listings.doctor_view(api.doctor()))


@app.command("check-worker", short_help="Check that a worker speaks protocol v1.")
def check_worker(
    lane: str = LaneOpt,
    scenario: List[str] = typer.Option([], "--scenario", "-s", help="Check only this scenario "
                                       "(repeatable)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds per repeat "
                                            "(default: the lane's `timeout_s`)."),
    out: Path = OutOpt,
) -> None:
    """Check a worker against protocol v1: the handshake, then one repeat of each scenario.
    Exit 0 when it speaks the protocol (a failed expectation is only a warning), 1 when not."""
    from rich.console import Console

    from alk import api, conformance
    from alk.lane.load import lane_warnings
    from alk.records import ExitCode
    from alk.report import listings

    try:
        loaded = api.load_lane(lane)
        _warn(lane_warnings(loaded))
        result = api.run_lane(loaded, repeats=1, scenarios=scenario, timeout_s=timeout,
                              out_dir=out)
        findings = conformance.review(result.document, out)
    except AlkError as exc:
        _fail(str(exc))
    Console().print(listings.findings_view(findings))
    if result.interrupted:
        raise typer.Exit(ExitCode.INTERRUPTED)
    raise typer.Exit(ExitCode.PASS if all(f.ok for f in findings) else ExitCode.FAIL)


def _parse_repeats(value: Optional[str], max_repeats: Optional[int],
                   ci_width: Optional[float]):  # -> (int | None, alk.records.Adaptive | None)
    """--repeats N, or auto with its options."""
    from alk.records import Adaptive

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


def _warn(warnings: List[str]) -> None:
    """What a lane file holds that alk accepts but its author likely did not mean."""
    if not warnings:
        return
    from rich.console import Console
    from rich.text import Text

    from alk.report import safe_text

    console = Console(stderr=True)
    for warning in warnings:
        console.print(Text.assemble(("warning: ", "bold yellow"), safe_text.printable(warning)))
