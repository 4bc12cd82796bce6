"""The `alk` command: parses options, calls `alk.api`, renders, maps outcomes to exit codes.

Exit codes: 0 every scenario passed; 1 a scenario failed or was flaky; 2 usage or lane error;
3 void (something could not be scored: unsupported version, missing environment, ...);
130 interrupted.
"""

from __future__ import annotations

import json
import shlex
import signal
from pathlib import Path
from typing import List, NoReturn, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from alk import api, conformance
from alk.errors import AlkError, UsageError
from alk.lane import LANES_DIR
from alk.records import ExitCode, Plan, RepeatResult
from alk.report import listings, safe_text, terminal, transcript_view
from alk.transcript import TranscriptPage

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


def main() -> None:
    # A CI job cancelled (SIGTERM) or a closed terminal (SIGHUP) stops a run like Ctrl-C does:
    # the worker's group is ended and the repeats finished so far are saved.
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _interrupt)
    # Started in the background (`alk run &` in a script, nohup), alk may inherit SIGINT as
    # ignored, and so would every worker: then a timeout's SIGINT shows nothing of where a
    # worker hung. A handler (reset to the default on exec) gives workers the default back.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    app()


def _interrupt(number: int, frame: object) -> None:
    raise KeyboardInterrupt


def _fail(message: str, code: int = ExitCode.USAGE) -> NoReturn:
    # The message may quote a lane's values or a worker's text: never read it as markup, and
    # never let its control characters reach the terminal.
    Console(stderr=True).print(Text.assemble(("error: ", "bold red"), safe_text.printable(message)))
    raise typer.Exit(code)


def _echo_json(document: dict, source: str) -> None:
    # ASCII only: a worker's text may hold C1 controls and bidi overrides, and JSON's \u escapes
    # carry them to a parser without showing them to a terminal. NaN is not JSON.
    try:
        text = json.dumps(document, ensure_ascii=True, allow_nan=False, indent=1)
    except ValueError:
        _fail(f"{source}: holds a NaN or infinite number, which JSON cannot carry; "
              "`alk report` renders the run without --json")
    typer.echo(text)


@app.command()
def run(
    lane: str = LaneOpt,
    repeats: Optional[int] = typer.Option(None, "--repeats", "-n", help="Repeats per scenario "
                                          "(default: the lane's `repeats`)."),
    scenario: List[str] = typer.Option([], "--scenario", "-s", help="Run only this scenario "
                                       "(repeatable)."),
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
    out: Path = OutOpt,
) -> None:
    """Run a lane: every scenario, N fresh worker processes each; report and exit by verdict."""
    console = Console()
    try:
        loaded = api.load_lane(lane)
        limits = _parse_limits(limit)
        with _RunProgress(enabled=not as_json) as progress:
            result = api.run_lane(loaded, repeats=repeats, scenarios=scenario, seed=seed,
                                  timeout_s=timeout, limits=limits, out_dir=out,
                                  keep_workspaces=keep_workspaces,
                                  on_plan=progress.plan, on_repeat=progress.advance)
    except AlkError as exc:
        _fail(str(exc))
    if as_json:
        _echo_json(result.document, str(result.path))
    else:
        console.print(terminal.run_report(result.document))
    raise typer.Exit(ExitCode.INTERRUPTED if result.interrupted else result.exit_code)


@app.command()
def report(
    run_id: Optional[str] = typer.Argument(None, help="Run id, or 'latest' (the default)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result document."),
    out: Path = OutOpt,
) -> None:
    """Re-render a saved run from reports/RUN_ID/result.json."""
    try:
        document = api.read_run(run_id, out)
    except AlkError as exc:
        _fail(str(exc))
    if as_json:
        _echo_json(document, f"run {document.get('run_id')}")
    else:
        Console().print(terminal.run_report(document))


@app.command()
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
    channels = list(dict.fromkeys(channel)) or None
    try:
        document = api.read_run(run_id, out)
        entry = api.repeat_entry(document, scenario, repeat)
        page = api.read_repeat_page(entry, out, start=start, limit=limit, channels=channels,
                                    digest=transcript_view.event_row)
    except AlkError as exc:
        _fail(str(exc))
    console = Console()
    console.print(transcript_view.repeat_header(document["run_id"], scenario, repeat, entry))
    console.print(transcript_view.repeat_facts(entry))
    if page.rows:
        console.print(transcript_view.transcript_table(page.rows))
    more = _more_command(page, [document["run_id"], scenario, str(repeat)], channels, limit, out)
    # Unwrapped, so that the next page's command copies as one line.
    console.print(transcript_view.page_summary(page, channels, more), soft_wrap=True)
    console.print(transcript_view.transcript_hash(entry, api.transcript_intact(entry, out)))


def _more_command(page: TranscriptPage, target: List[str], channels: Optional[List[str]],
                  limit: int, out: Path) -> Optional[tuple[str, str]]:
    """The `alk show` command for the next page, or for the last one when this page is past the
    end; None when the page reached the end."""
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
def lanes(lanes_dir: Path = typer.Option(Path(LANES_DIR), "--dir", help="Lanes folder.")) -> None:
    """List the lanes: framework, version requirement, scenarios."""
    try:
        found, errors = api.list_lanes(lanes_dir)
    except AlkError as exc:
        _fail(str(exc))
    Console().print(listings.lanes_table(found, errors))
    if errors:
        raise typer.Exit(ExitCode.USAGE)


@app.command()
def causes() -> None:
    """List the cause codes: the stable vocabulary every repeat is attributed with."""
    Console().print(listings.causes_table())


@app.command()
def doctor() -> None:
    """Show how this machine contains workers, and why."""
    Console().print(listings.doctor_view(api.doctor()))


@app.command("check-worker")
def check_worker(lane: str = LaneOpt, out: Path = OutOpt) -> None:
    """Check a worker against protocol v1: the handshake, then one repeat of each scenario."""
    try:
        loaded = api.load_lane(lane)
        result = api.run_lane(loaded, repeats=1, out_dir=out)
        findings = conformance.review(result.document, out)
    except AlkError as exc:
        _fail(str(exc))
    Console().print(listings.findings_view(findings))
    raise typer.Exit(ExitCode.PASS if all(f.ok for f in findings) else ExitCode.FAIL)


def _parse_limits(values: List[str]) -> dict[str, int]:
    limits = {}
    for value in values:
        name, _, number = value.partition("=")
        if not number.isdigit():
            raise UsageError(f"--limit {value!r}: expected NAME=WHOLE_NUMBER, e.g. memory_mb=2048")
        limits[name.strip()] = int(number)
    return limits


class _RunProgress:
    """A rich progress bar on stderr, one line per scenario (nothing when disabled)."""

    def __init__(self, enabled: bool) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[tally]}"), TimeElapsedColumn(),
            console=Console(stderr=True), transient=True, disable=not enabled)
        self.tasks: dict[str, int] = {}
        self.tallies: dict[str, dict[str, int]] = {}

    def __enter__(self) -> _RunProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def plan(self, plan: Plan) -> None:
        for scenario in plan.scenarios:
            self.tasks[scenario.id] = self.progress.add_task(
                scenario.id, total=plan.repeats, tally="")
            self.tallies[scenario.id] = {}

    def advance(self, result: RepeatResult) -> None:
        tally = self.tallies[result.scenario]
        tally[result.outcome.value] = tally.get(result.outcome.value, 0) + 1
        text = " ".join(f"{name} {count}" for name, count in sorted(tally.items()))
        self.progress.update(self.tasks[result.scenario], advance=1, tally=text)
