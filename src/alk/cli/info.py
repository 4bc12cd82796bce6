"""The commands that tell what alk knows: `alk lanes` (the lanes of a folder), `alk causes` (the
cause codes, or one explained) and `alk doctor` (how this machine contains workers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from alk.cli.app import command, console, fail, warn


@command()
def lanes(
    lanes_dir: Optional[Path] = typer.Option(None, "--lanes-dir", metavar="FOLDER",
                                             help="The folder of lane files to list (default: "
                                                  "./lanes, where --lane NAME looks)."),
    old_dir: Optional[Path] = typer.Option(None, "--dir", hidden=True),
    out: Optional[Path] = typer.Option(None, "--out", hidden=True),
) -> None:
    """List the lanes: framework, version requirement, scenarios."""
    from alk import api
    from alk.layout import LANES_DIR
    from alk.records import ExitCode
    from alk.report import listings

    # Elsewhere --out is the folder a run writes in, and lanes are not looked up there: a
    # --out here would only seem to be obeyed. --dir, the old spelling, still works.
    if out is not None:
        fail("alk lanes writes nothing and takes no --out; the folder of lanes to list is "
             f"--lanes-dir (e.g. --lanes-dir {out / LANES_DIR})")
    if old_dir is not None:
        warn([f"--dir is now --lanes-dir (the folder of lanes to list): --lanes-dir {old_dir}"])
    found, errors = api.list_lanes(lanes_dir or old_dir or Path(LANES_DIR))
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
