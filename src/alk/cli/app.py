"""What the `alk` command's parts share: the typer app, the options several commands take, the
one error boundary (`command`: an AlkError is printed without a traceback and exits 2), and how
a command makes its consoles, prints JSON, warnings and the report of a run.

Only typer is imported up front: each command imports what it needs (rich, numpy, the runner)
when it runs, so that `alk --help` and a mistyped option answer at once.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, List, NoReturn, Optional

import typer

from alk.errors import AlkError

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(
    name="alk", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
    help="alk, the agent lane kit: run agent-framework workers as untrusted subprocesses, "
         "many times, and measure how reliably they run.",
)



def _version(asked: bool) -> None:
    if asked:
        from alk import installed_version

        typer.echo(f"alk {installed_version()}")
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                          help="Print alk's version and exit.")) -> None:
    """The options of `alk` itself, before any command (`alk.launch` answers `alk --version`
    without importing typer; this answers it everywhere else, `python -m alk.cli` say)."""


LaneOpt = typer.Option(..., "--lane", "-l", help="A lane name in ./lanes/ or a path to a .toml.")
OutOpt = typer.Option(Path("."), "--out", help="Folder that holds transcripts/ and reports/.")
LinkBaseOpt = typer.Option(None, "--link-base", metavar="URL", help="The URL at which the "
                           "--out folder is served (e.g. a CI job's artifacts): report.md's "
                           "links to transcripts and reports become absolute under it, so they "
                           "still work pasted into a pull-request comment.")
KOpt = typer.Option(5, "--k", min=1, help="The k of pass^k in the report: the chance that k "
                    "repeats in a row all pass.")
StatsOpt = typer.Option(False, "--stats", help="Add the statistics block to the report: the "
                        "legend, ICC and design effect, consistency, fault robustness, repeats "
                        "to see a failure, tool paths, the workers' footprint, each where it "
                        "means something (docs/reports.md).")


def command(name: Optional[str] = None, short_help: Optional[str] = None
            ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Makes a function an `alk` command (registered by `alk.cli`, in the order `alk --help`
    lists them) behind the one error boundary: an AlkError anywhere in it is printed for a
    person and exits 2 (`ExitCode.USAGE`)."""
    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except AlkError as exc:
                fail(str(exc))

        registration = {"name": name, "short_help": short_help}
        guarded.registration = registration  # type: ignore[attr-defined]
        return guarded
    return mark


def console(stderr: bool = False) -> Console:
    """A console on stdout (a command's output), or on stderr (progress, warnings, errors)."""
    from rich.console import Console

    return Console(stderr=True) if stderr else Console()


def fail(message: str, code: int | None = None) -> NoReturn:
    from rich.text import Text

    from alk.records import ExitCode
    from alk.report import safe_text

    # The message may quote a lane's values or a worker's text: never read it as markup, and
    # never let its control characters reach the terminal.
    console(stderr=True).print(Text.assemble(("error: ", "bold red"),
                                             safe_text.printable(message)))
    raise typer.Exit(ExitCode.USAGE if code is None else code)


def at_least_one(value: Optional[int], option: str, meaning: str) -> Optional[int]:
    """An option's number checked as alk checks every other value (`error: ...`, exit 2), not
    by typer's `min=`, whose error reads like no other of alk's."""
    if value is not None and value < 1:
        fail(f"{option} must be 1 or more ({meaning}), got {value}")
    return value


def jobs_option(default: Optional[int], help: str) -> Any:
    """`--jobs/-j`, the repeats at once, for every command that runs repeats."""
    return typer.Option(default, "--jobs", "-j", help=help, callback=lambda value: at_least_one(
        value, "--jobs", "the repeats that run at once"))


def echo_json(document: dict, source: str) -> None:
    import json

    # ASCII only: a worker's text may hold C1 controls and bidi overrides, and JSON's \u escapes
    # carry them to a parser without showing them to a terminal. NaN is not JSON.
    try:
        text = json.dumps(document, ensure_ascii=True, allow_nan=False, indent=1)
    except ValueError:
        fail(f"{source}: holds a NaN or infinite number, which JSON cannot carry; "
             "`alk report` renders the run without --json")
    typer.echo(text)


def warn(warnings: List[str]) -> None:
    """What a lane file holds that alk accepts but its author likely did not mean."""
    if not warnings:
        return
    from rich.text import Text

    from alk.report import safe_text

    err = console(stderr=True)
    for warning in warnings:
        err.print(Text.assemble(("warning: ", "bold yellow"), safe_text.printable(warning)))


def print_runs(documents: list, out: Path, k: int, stats: bool = False) -> None:
    """The run's report (`alk.report.terminal.run.runs_report`): its verdict first; with
    several lanes, the lane x scenario matrix, then each lane's report. `stats`: with the
    statistics block (`--stats`)."""
    from alk.report.terminal.run import runs_report

    console().print(runs_report(documents, out.resolve(), k=k, stats=stats))
