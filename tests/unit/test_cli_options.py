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


def test_a_run_compared_with_itself_is_an_error_however_it_is_spelled(saved, root):
    same = error_of(alk_here("compare", saved, saved, cwd=root))
    assert f"A and B are the same run, {saved}; name two runs to compare" in same
    assert f"`alk report {saved}`" in same
    spelled = error_of(alk_here("compare", "latest", saved, cwd=root))
    assert f"'latest' and '{saved}' both name run {saved}" in spelled


def test_show_refuses_a_channel_alk_never_writes_and_lists_them(saved, root):
    message = error_of(alk_here("show", saved, "a", 1, "-c", "tool", "--channel", "bogus",
                                cwd=root))
    assert message == ("error: --channel 'bogus': no such channel; a transcript's channels are "
                       "agent, tool, model, user, framework, stderr, harness")
    assert alk_here("show", saved, "a", 1, "-c", "harness", cwd=root).returncode == 0


def test_show_full_prints_a_long_payload_whole_and_still_escaped(saved, root):
    def joined(done) -> str:
        assert done.returncode == 0, done.stderr
        return " ".join(line.strip() for line in done.stdout.splitlines())

    # The header gives the repeat's detail whole; the attribution event's payload is cut.
    cut = joined(alk_here("show", saved, "a", 2, "-c", "harness", cwd=root, columns=80))
    assert cut.count("END-OF-LINE") == 1 and "…" in cut
    whole = alk_here("show", saved, "a", 2, "-c", "harness", "--full", cwd=root, columns=80)
    # The attribution's detail, whole: the stderr line to its last word.
    assert joined(whole).count("END-OF-LINE") == 2
    assert "\x1b" not in whole.stdout and "\u202e" not in whole.stdout
    assert "\\u202e" in whole.stdout
    # The payload as JSON: the attribution's fields one a line.
    assert '"outcome": "framework_runtime"' in whole.stdout


def test_show_full_is_kept_in_the_next_pages_command(saved, root):
    shown = alk_here("show", saved, "a", 1, "--full", "--limit", 1, cwd=root)
    assert f"next page: alk show {saved} a 1 --from 2 --limit 1 --full" in shown.stdout


@pytest.mark.parametrize("make, expected", [
    (None, "--resume 'garbage': no such run, reports/garbage does not exist; `alk runs` lists "
           "the runs there are"),
    ("folder", "--resume 'garbage': reports/garbage is not a run, it holds no journal.jsonl, "
               "group.json or result.json"),
])
def test_resume_of_what_is_not_a_run_says_so(root, make, expected):
    if make:
        (root / "reports" / "garbage").mkdir(parents=True)
    message = error_of(alk_here("run", "--resume", "garbage", cwd=root))
    assert expected in message and "only a run started by this alk" not in message
    assert error_of(alk_here("run", "--resume", "../x", cwd=root)).startswith(
        "error: --resume '../x' is not a run id")


def test_resume_of_a_run_without_a_journal_still_names_its_provenance(saved, root):
    (root / "reports" / saved / "journal.jsonl").unlink()
    assert "only a run started by this alk can be resumed" in error_of(
        alk_here("run", "--resume", saved, cwd=root))


def test_lanes_takes_lanes_dir_and_the_old_dir_with_a_note(root):
    other = root / "elsewhere" / "lanes"
    other.mkdir(parents=True)
    (root / "elsewhere" / "workers").mkdir()
    (root / "elsewhere" / "workers" / "w.py").write_text("")
    write(root, lane_toml(scenario("only-here")), "demo")
    (other / "mine.toml").write_text(lane_toml(scenario("from-elsewhere")), encoding="utf-8")
    assert "only-here" in alk_here("lanes", cwd=root).stdout
    listed = alk_here("lanes", "--lanes-dir", other, cwd=root)
    assert listed.returncode == 0 and "from-elsewhere" in listed.stdout
    assert "only-here" not in listed.stdout and listed.stderr == ""
    old = alk_here("lanes", "--dir", other, cwd=root)
    assert old.returncode == 0 and "from-elsewhere" in old.stdout
    assert "warning: --dir is now --lanes-dir" in old.stderr
    # --out is where other commands write; here it would seem obeyed and be ignored.
    assert "takes no --out; the folder of lanes to list is --lanes-dir" in error_of(
        alk_here("lanes", "--out", other, cwd=root))
