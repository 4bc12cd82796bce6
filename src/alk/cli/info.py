"""The commands that tell what alk knows: `alk lanes` (the lanes of a folder), `alk causes` (the
cause codes, or one explained) and `alk doctor` (how this machine contains workers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from alk.cli.app import command, console, fail, warn


@command()
def lanes(lanes_dir: Optional[Path] = typer.Option(None, "--dir", help="Lanes folder "
                                                   "(default: ./lanes).")) -> None:
    """List the lanes: framework, version requirement, scenarios."""
    from alk import api
    from alk.layout import LANES_DIR
    from alk.records import ExitCode
    from alk.report import listings

    found, errors = api.list_lanes(lanes_dir or Path(LANES_DIR))
    console().print(listings.lanes_view(found, errors))
    for lane in found:
        warn(api.lane_warnings(lane))
    if errors:
        raise typer.Exit(ExitCode.USAGE)


@command(short_help="List the cause codes, or explain one.")
def causes(code: Optional[str] = typer.Argument(None, help="One cause code to explain.")
           ) -> None:
    """List the cause codes: the stable vocabulary every repeat is attributed with."""
    from alk.report import listings

    if code is None:
        console().print(listings.causes_view())
        return
    view = listings.cause_view(code)
    if view is None:
        fail(f"no cause {code!r}{listings.cause_suggestion(code)}; `alk causes` lists them all")
    console().print(view)


@command()
def doctor() -> None:
    """Show how this machine contains workers, and why."""
    from alk import api
    from alk.report import listings

    console().print(listings.doctor_view(api.doctor()))
