"""The commands that read saved runs: `alk report` (a run shown, and its report files written
again), `alk compare` (two runs, and the regression gate), `alk runs` (the past runs), `alk show`
(a page of one repeat's transcript) and `alk export` (a run as OpenTelemetry traces).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from alk.cli.app import (
    KOpt,
    LinkBaseOpt,
    OutOpt,
    StatsOpt,
    command,
    console,
    echo_json,
    fail,
    jobs_option,
    print_runs,
    warn,
)

if TYPE_CHECKING:
    from alk.transcript.reader import TranscriptPage

# Events `alk show` prints at once: a screenful or two by default, and a bound on what it holds
# (a page is one table, kept whole until it is printed).
SHOW_LIMIT = 200
SHOW_LIMIT_MAX = 2_000


@command(short_help="Show a saved run again, and write its report files again.")
def report(
    run_id: Optional[str] = typer.Argument(None, help="Run id, or 'latest' (the default)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result document."),
    open_html: bool = typer.Option(False, "--open", help="Open report.html in a browser, "
                                   "where there is one."),
    k: int = KOpt,
    stats: bool = StatsOpt,
    link_base: Optional[str] = LinkBaseOpt,
    out: Path = OutOpt,
) -> None:
    """Re-render a saved run from reports/RUN_ID/result.json, and write its report.html,
    report.md and junit.xml again."""
    from alk import api
    from alk.layout import HTML_NAME

    documents = api.read_runs(run_id, out)
    written = api.write_reports(documents, out, link_base)
    if as_json:
        echo_json(api.runs_json(documents), f"run {run_id or 'latest'}")
    else:
        print_runs(documents, out, k, stats)
    warn(list(written.problems))
    if open_html:
        page = next((path for path in written.paths if path.name == HTML_NAME), None)
        if page is not None:
            _open_in_browser(page)


def _open_in_browser(page: Path) -> None:
    """Opens the page where a browser is known; else says where it is (a server, CI)."""
    import webbrowser

    try:
        opened = webbrowser.get().open(page.resolve().as_uri())
    except webbrowser.Error:
        opened = False
    if not opened:
        console(stderr=True).print(f"no browser to open here: open {page} where there is one",
                                   markup=False, highlight=False)


@command(short_help="Compare two runs of the same scenarios: did B regress?")
def compare(
    run_a: str = typer.Argument(..., help="The run before: a run id (RUN/LANE for a lane of a "
                                "run of several)."),
    run_b: str = typer.Argument(..., help="The run after."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression",
                                            help="Exit 1 when B regressed, 3 when B has void "
                                                 "repeats A had not (a CI gate)."),
    alpha: float = typer.Option(0.05, "--alpha", help="The family-wise chance of a false "
                                "regression (Holm–Tarone across scenarios)."),
    margin: float = typer.Option(0.1, "--margin", help="How far apart two pass rates may be and "
                                 "still be called unchanged."),
    until_decided: bool = typer.Option(False, "--until-decided", help="Run more repeats of "
                                       "both runs' undecided scenarios, round by round, until "
                                       "each is decided or --max-repeats ran; with "
                                       "--fail-on-regression, also at the first regression "
                                       "(a group-sequential gate: docs/compare.md)."),
    max_repeats: int = typer.Option(100, "--max-repeats", min=1, help="With --until-decided: "
                                    "repeats a run, at most."),
    round_size: int = typer.Option(10, "--round", min=1, help="With --until-decided: repeats "
                                   "a round adds to each undecided scenario, in each run."),
    jobs: int = jobs_option(1, "With --until-decided: repeats at once."),
    out: Path = OutOpt,
) -> None:
    """Compare two saved runs scenario by scenario, B against A: each scenario regressed,
    improved, unchanged or inconclusive, by the rule the report states (docs/compare.md)."""
    import msgspec

    from alk import api
    from alk.records import ExitCode
    from alk.report.compare_view import compare_view, look_line

    if until_decided:
        shown_looks = console(stderr=True)

        def on_look(ledger) -> None:  # each look on stderr as it is taken
            shown_looks.print(look_line(ledger), markup=False, highlight=False)

        comparison = api.compare_until_decided(
            run_a, run_b, alpha=alpha, margin=margin, max_repeats=max_repeats,
            round_size=round_size, setup=api.RunSetup(out_dir=out, jobs=jobs, reports=True),
            stop_at_regression=fail_on_regression, on_look=on_look)
    else:
        a, b = api.read_run(run_a, out), api.read_run(run_b, out)
        if a.run_id == b.run_id:
            # Every difference would be 0 and every verdict "unchanged" or "inconclusive": an
            # answer, but never the one asked for. The ids read back say it whatever the
            # spelling ('latest', or the id itself).
            named = (f": {run_a!r} and {run_b!r} both name run {a.run_id}" if run_a != run_b
                     else f", {a.run_id}")
            fail(f"A and B are the same run{named}; name two runs to compare (`alk runs` lists "
                 f"them), or see this one with `alk report {a.run_id}`")
        comparison = api.compare_runs(a, b, alpha=alpha, margin=margin)
    if as_json:
        echo_json(msgspec.to_builtins(comparison), f"comparison of {run_a} and {run_b}")
    else:
        shown = console()
        shown.print(compare_view(comparison))
        written = api.write_compare_page(comparison, out)
        for page in written.paths:
            shown.print(f"page        {page}", markup=False, highlight=False)
        warn(list(written.problems))
    if fail_on_regression:
        code, why = api.regression_gate(comparison)
        if why:
            fail(why, code)
        if code is not ExitCode.PASS:
            raise typer.Exit(code)


@command(short_help="Export a saved run as OpenTelemetry traces (OTLP).")
def export(
    run_id: Optional[str] = typer.Argument(None, help="Run id, or 'latest' (the default)."),
    otlp_file: Optional[Path] = typer.Option(None, "--otlp", help="Write the traces to this "
                                             "file as OTLP/JSON, one export request a line."),
    otlp_endpoint: Optional[str] = typer.Option(None, "--otlp-endpoint", help="Send them "
                                                "over OTLP/HTTP (protobuf) to this collector, "
                                                "e.g. http://localhost:4318."),
    otlp_header: List[str] = typer.Option([], "--otlp-header", help="A header for the "
                                          "collector, NAME=VALUE (repeatable): a vendor's key."),
    out: Path = OutOpt,
) -> None:
    """Export every repeat of a saved run as one OpenTelemetry trace: the repeat, its attempts,
    each model call and tool call, with the GenAI semantic conventions' names, for Jaeger,
    Phoenix, Langfuse, Grafana and other OTLP viewers (docs/reports.md)."""
    from alk import api

    headers = {}
    for given in otlp_header:
        name, equals, value = given.partition("=")
        if not equals or not name.strip():
            fail(f"--otlp-header {given!r}: expected NAME=VALUE, such as "
                 "'Authorization=Bearer KEY'")
        headers[name.strip()] = value
    documents = api.read_runs(run_id, out)
    tally = api.export_otlp(documents, out, file=otlp_file, endpoint=otlp_endpoint,
                            headers=headers)
    shown = console()
    where = " and ".join(str(place) for place in (otlp_file, otlp_endpoint) if place)
    shown.print(f"exported    {tally.traces} traces, {tally.spans} spans to {where}",
                markup=False, highlight=False)
    problems = []
    if tally.rejected:
        problems.append(f"the collector said it rejected {tally.rejected} of the spans")
    if tally.dropped:
        problems.append(f"{tally.dropped} spans and span events were past a trace's bounds "
                        "and left out (each trace's root span counts its own)")
    if tally.changed:
        problems.append(f"{len(tally.changed)} transcripts no longer hash to their recorded "
                        f"sha256 (first: {tally.changed[0]}); their traces say "
                        "alk.transcript.intact = false")
    if tally.unreadable:
        problems.append(f"{len(tally.unreadable)} transcripts are missing or hold a line alk "
                        f"could not have written (first: {tally.unreadable[0]}); their traces "
                        "hold what could be read")
    warn(problems)


@command(short_help="List past runs, newest first.")
def runs(
    limit: int = typer.Option(20, "--limit", min=1, help="Runs to list at most."),
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON."),
    out: Path = OutOpt,
) -> None:
    """List the runs saved under reports/, newest first: when, which lanes, what status
    (running, stopped when its alk was killed, interrupted, complete), how many of the planned
    repeats ran and passed, the verdict by each run's rule, and how to resume one not ended."""
    import msgspec

    from alk import api
    from alk.report import listings

    found = api.list_runs(out, limit=limit)
    if as_json:
        echo_json({"runs": msgspec.to_builtins(found)}, "runs")
    else:
        console().print(listings.runs_view(found, out))


@command(short_help="Print a page of one repeat's transcript.")
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
    full: bool = typer.Option(False, "--full", help="Print each event's payload whole, as "
                              "indented JSON (still redacted, control characters still "
                              "escaped), instead of one line cut at 240 characters."),
    out: Path = OutOpt,
) -> None:
    """Print a page of one repeat's transcript, readably, and the command for the next page."""
    import functools

    from alk import api
    from alk.report import transcript_view

    from alk.transcript.reader import check_channels

    channels = list(dict.fromkeys(channel)) or None
    check_channels(channels or ())
    document = api.read_run(run_id, out)
    entry = api.repeat_entry(document, scenario, repeat, out)
    page = api.read_repeat_page(entry, out, start=start, limit=limit, channels=channels,
                                digest=functools.partial(transcript_view.event_row, full=full))
    shown = console()
    shown.print(transcript_view.repeat_header(document.run_id, scenario, repeat, entry))
    shown.print(transcript_view.repeat_facts(entry))
    if page.rows:
        shown.print(transcript_view.transcript_events(page.rows))
    more = _more_command(page, [document.run_id, scenario, str(repeat)], channels, limit, out,
                         full)
    # Unwrapped, so that the next page's command copies as one line.
    shown.print(transcript_view.page_summary(page, channels, more), soft_wrap=True)
    shown.print(transcript_view.transcript_hash(entry, api.transcript_intact(entry, out)))


def _more_command(page: TranscriptPage, target: List[str], channels: Optional[List[str]],
                  limit: int, out: Path, full: bool = False) -> Optional[tuple[str, str]]:
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
    if full:
        argv.append("--full")
    if out != Path("."):
        argv += ["--out", str(out)]
    return label, shlex.join(argv)
