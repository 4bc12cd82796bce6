"""The command line's small promises, through typer in this process on a run a scripted runner
made: bad values get alk's own `error: ...` and exit 2, and `alk show` shows what it is asked."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from alk import api
from alk.lane.load import load_lane

from helpers.cli import alk_here
from helpers.lane_files import lane_toml, scenario, write
from helpers.scripted import PASSING, ScriptedRunner

pytestmark = pytest.mark.usefixtures("private_temp")

# A stderr line longer than `alk show` cuts a payload to (240), with an escape sequence the
# worker wrote in it and a bidi override: neither may reach the terminal as it is.
STDERR = "RuntimeError: " + "word " * 40 + "\x1b[2Jcleared \u202eesrever END-OF-LINE"


@pytest.fixture
def saved(root: Path) -> str:
    """A run of one scenario, two repeats, the second ending with a long stderr: its id."""
    failed = dataclasses.replace(PASSING, exit_code=1, result=None, stderr_tail=STDERR + "\n")
    lane = load_lane(write(root, lane_toml(scenario("a", expect='output_equals = "hi"'))))
    done = api.run_lane(lane, api.RunOptions(repeats=2, seed=1),
                        api.RunSetup(out_dir=root, runner=ScriptedRunner(PASSING, PASSING, failed),
                                     environ={"PATH": "/bin"}))
    return done.document.run_id


def error_of(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and "Usage:" not in done.stderr
    return " ".join(done.stderr.split())


@pytest.mark.parametrize("args", [("run", "--lane", "demo", "-j", "0"),
                                  ("run", "--lane", "demo", "--jobs", "-2"),
                                  ("compare", "A", "B", "-j", "0")])
def test_jobs_below_one_is_alks_own_error(root, args):
    message = error_of(alk_here(*args, cwd=root))
    assert message.startswith("error: --jobs must be 1 or more (the repeats that run at once)")
