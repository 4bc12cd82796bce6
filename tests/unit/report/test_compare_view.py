"""alk.report.compare_view: `alk compare` at 80 and 120 columns, against snapshots a person has
read (tests/unit/snapshots/compare-*.txt), from result records alk made itself.

After changing the view on purpose, run
`ALK_UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/report/test_compare_view.py`, read the files it
rewrote, and commit them with the change.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from alk.compare import Change, Comparison, compare_runs
from alk.report.compare_view import compare_view, verdict

from helpers import documents
from helpers.snapshot import check_snapshot
from helpers.views import render

NEWER = {"framework": "pydantic-ai", "framework_version": "1.1.0"}


def newer(observations: list) -> list:
    return [dataclasses.replace(o, ready=NEWER) for o in observations]


def comparison(out: Path) -> Comparison:
    """1.0.3 against 1.1.0: nominal went from 20/20 to 12/20, remote from flaky to passing,
    cache had void repeats in A, and `old` is in A only."""
    a = documents.made(out / "a", documents.observation(0.3), nominal=documents.passing(20),
                       **{"crash-after-effect": documents.passing(20, 0.92)},
                       remote=documents.flaky(),
                       cache=[documents.NEVER_READY] * 3 + documents.passing(17),
                       old=documents.passing(20))
    b = documents.made(out / "b", newer([documents.observation(0.3)])[0],
                       nominal=newer(documents.passing(12, 1.5) + [documents.CRASHED] * 6
                                     + [documents.WRONG] * 2),
                       **{"crash-after-effect": newer(documents.passing(20, 0.95))},
                       remote=newer(documents.passing(20)), cache=newer(documents.passing(20)))
    return compare_runs(a, dataclasses.replace(b, run_id="20261130-093000-cd34e5"))


def plain(made: Comparison, width: int) -> str:
    return "\n".join(line.rstrip() for line in render(compare_view(made), width).splitlines())


@pytest.mark.parametrize("width", [80, 120])
def test_the_view_matches_its_snapshot(width: int, tmp_path: Path, private_temp: None) -> None:
    check_snapshot("compare", plain(comparison(tmp_path), width) + "\n", width)


def test_a_row_holds_its_numbers_and_its_verdict_mark(tmp_path: Path,
                                                      private_temp: None) -> None:
    lines = plain(comparison(tmp_path), 80).splitlines()
    row = next(line for line in lines if line.startswith("nominal "))
    assert row.split() == ["nominal", "100%", "20/20", "60%", "12/20", "−40", "[−61,", "−16]",
                           "0.0016", "▼", "regressed"]
    # One-sided: the only table as extreme holds all 8 failures in B, C(32,12)/C(40,20).
    assert f"{math.comb(32, 12) / math.comb(40, 20):.2g}" == "0.0016"
    assert "B against A: ▼ regressed (1 regressed, 3 inconclusive of 4 scenarios)" in lines
    # Void beside the rate, as a rate, under it.
    cache = lines.index(next(line for line in lines if line.startswith("cache ")))
    assert lines[cache + 1].split() == ["void", "15%"]


@pytest.mark.parametrize("width", [80, 120])
def test_no_scenario_id_or_number_is_split(width: int, tmp_path: Path,
                                           private_temp: None) -> None:
    lines = plain(comparison(tmp_path), width).splitlines()
    row = next(line for line in lines if line.startswith("crash-after-effect "))
    assert row.split() == ["crash-after-effect", "100%", "20/20", "100%", "20/20", "0", "[−16,",
                           "+16]", "1.00", "?", "inconclusive"]
    assert not any("…" in line for line in lines)  # nothing cut short either


def test_three_digit_counts_beside_a_long_id_keep_the_verdict_whole(tmp_path: Path,
                                                                   private_temp: None) -> None:
    # The reference lane's five scenarios at 30 repeats a run, as --until-decided leaves them:
    # the pooled row's three-digit counts and an 18-letter id make the table with each rate
    # and its counts wider than 80 columns, where rich would crop the verdict mid-word; the
    # counts alone are shown instead, and every number and verdict stays whole.
    ids = ("nominal", "deny-tenant", "deny-egress", "budget-exhausted", "crash-after-effect")
    a, b = (documents.made(tmp_path / side, documents.observation(0.3), repeats=30,
                           **{sid: documents.passing(30) for sid in ids}) for side in "ab")
    made = compare_runs(a, dataclasses.replace(b, run_id="20261130-093000-cd34e5"))
    narrow, wide = plain(made, 80).splitlines(), plain(made, 120).splitlines()
    assert not any("…" in line for line in narrow)
    row = next(line for line in narrow if line.startswith("crash-after-effect "))
    assert row.split() == ["crash-after-effect", "30/30", "30/30", "0", "[−11,", "+11]",
                           "1.00", "?", "inconclusive"]
    assert next(line for line in narrow if line.startswith("pooled ")).split()[1:3] == [
        "150/150", "150/150"]
    row = next(line for line in wide if line.startswith("crash-after-effect "))
    assert row.split()[1:5] == ["100%", "30/30", "100%", "30/30"]


@pytest.mark.parametrize("change,mark", [(Change.REGRESSED, "▼"), (Change.IMPROVED, "▲"),
                                         (Change.UNCHANGED, "="), (Change.INCONCLUSIVE, "?")])
def test_verdicts_read_without_colour(change: Change, mark: str) -> None:
    assert render(verdict(change)).strip() == f"{mark} {change.value}"


def test_worker_text_is_shown_escaped(tmp_path: Path, private_temp: None) -> None:
    made = comparison(tmp_path)
    hostile = "1.1.0\x1b[2J\u202e[bold]"
    made = dataclasses.replace(
        made, b=dataclasses.replace(made.b, version=hostile),
        scenarios=(dataclasses.replace(made.scenarios[0], id="[red]nominal\x07"),
                   *made.scenarios[1:]),
        notes=(f"framework: pydantic-ai 1.0.3 in A, pydantic-ai {hostile} in B",))
    text = render(compare_view(made), 120)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "1.1.0\\x1b[2J\\u202e[bold]" in text  # in the header, and in the note
    assert text.count("1.1.0\\x1b[2J\\u202e[bold]") == 2
    # Markup shown as it is, never obeyed: in its row and above its details.
    assert text.count("[red]nominal\\x07") == 2


# --- through the command line ------------------------------------------------------------------


def test_alk_compare_flags_a_regression_and_gates_on_it(tmp_path, monkeypatch):
    """The issue's case through `alk compare`: one scenario went from 20/20 to 12/20."""
    import json

    from typer.testing import CliRunner

    from alk import api
    from alk.cli import app

    def saved(steady: list, changed: list) -> str:
        runner = documents.ScenarioRunner(documents.observation(0.3), steady=steady,
                                          changed=changed)
        done = api.run_lane(documents.lane(("steady", "changed")),
                            api.RunOptions(repeats=20, seed=7),
                            api.RunSetup(out_dir=tmp_path, environ=documents.SECRET_ENV,
                                         runner=runner))
        return done.document.run_id

    before = saved(documents.passing(20), documents.passing(20))
    after = saved(documents.passing(20), documents.passing(12) + [documents.WRONG] * 8)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")

    def alk(*args: str):
        return CliRunner().invoke(app, ["compare", *args])

    shown = alk(before, after)
    assert shown.exit_code == 0, shown.output  # no gate asked for: the report is the answer
    assert "regressed" in shown.output and max(map(len, shown.output.splitlines())) <= 80
    # The comparison is also a page, in B's report folder, named after A; --json writes none.
    page = tmp_path / "reports" / after / f"compare-{before}.html"
    assert f"page        reports/{after}/compare-{before}.html" in shown.output
    assert "B against A:" in page.read_text() and "regressed" in page.read_text()
    page.unlink()
    gated = alk(before, after, "--fail-on-regression", "--json")
    assert not page.exists()
    assert gated.exit_code == 1, gated.output
    found = json.loads(gated.output)
    assert found["change"] == "regressed"
    [changed] = [s for s in found["scenarios"] if s["id"] == "changed"]
    assert changed["change"] == "regressed"
    assert changed["p"] <= changed["level"] and changed["difference"]["high"] < 0
    [steady] = [s for s in found["scenarios"] if s["id"] == "steady"]
    assert steady["change"] != "regressed"
    # The other way round, B improved: the gate lets it through.
    assert alk(after, before, "--fail-on-regression").exit_code == 0
    missing = alk(before, "nope")
    assert missing.exit_code == 2 and "nope" in missing.output


def test_a_line_break_in_a_workers_framework_name_forges_no_line(tmp_path: Path) -> None:
    """A worker names its framework "lg\\nB against A: ▲ improved": the report and the
    comparison show it on its own line, escaped, never as a line of alk's."""
    from alk.report.terminal.run import run_report

    forged = "lg\nB against A: ▲ improved"
    probe = dataclasses.replace(documents.observation(0.3), ready={
        "framework": forged, "framework_version": "1.0\nall good"})
    a = documents.made(tmp_path / "a", documents.observation(0.3), nominal=documents.passing(20))
    b = dataclasses.replace(
        documents.made(tmp_path / "b", probe, nominal=documents.passing(20)), run_id="run-b")
    for view in (compare_view(compare_runs(a, b)), run_report(b)):
        out = render(view, 120)
        assert not any(line.lstrip().startswith(("B against A: ▲ improved", "all good"))
                       for line in out.splitlines()), out
        assert "lg\\nB against A: ▲ improved" in out


def test_a_run_b_that_scored_nothing_does_not_pass_the_gate(tmp_path, monkeypatch):
    """Voiding is an outcome a worker may choose: a B whose repeats were all void is no pass."""
    from typer.testing import CliRunner

    from alk import api
    from alk.cli import app

    def saved(observations: list) -> str:
        runner = documents.ScenarioRunner(documents.observation(0.3), nominal=observations)
        return api.run_lane(documents.lane(("nominal",)), api.RunOptions(repeats=20, seed=7),
                            api.RunSetup(out_dir=tmp_path, environ=documents.SECRET_ENV,
                                         runner=runner)).document.run_id

    before = saved(documents.passing(20))
    after = saved([documents.NEVER_READY] * 20)
    monkeypatch.chdir(tmp_path)
    gated = CliRunner().invoke(app, ["compare", before, after, "--fail-on-regression"])
    assert gated.exit_code == 3, gated.output
    assert "scored no repeat of nominal" in gated.output
    assert CliRunner().invoke(app, ["compare", before, after]).exit_code == 0


def test_void_repeats_in_b_where_a_had_none_do_not_pass_the_gate(tmp_path, monkeypatch):
    """The audit's case: A at 20/20, B at 14 passes and 6 void (a version that hangs at import
    30% of the time). Through `alk compare` on saved runs: exit 3, naming the scenario."""
    from typer.testing import CliRunner

    from alk import api
    from alk.cli import app

    def saved(steady: list, hangs: list) -> str:
        runner = documents.ScenarioRunner(documents.observation(0.3), steady=steady,
                                          hangs=hangs)
        return api.run_lane(documents.lane(("steady", "hangs")),
                            api.RunOptions(repeats=20, seed=7),
                            api.RunSetup(out_dir=tmp_path, environ=documents.SECRET_ENV,
                                         runner=runner)).document.run_id

    before = saved(documents.passing(20), documents.passing(20))
    after = saved(documents.passing(20), documents.passing(14) + [documents.NEVER_READY] * 6)
    monkeypatch.chdir(tmp_path)
    gated = CliRunner().invoke(app, ["compare", before, after, "--fail-on-regression"])
    assert gated.exit_code == 3, gated.output
    assert f"run {after} has void repeats where run {before} had none: hangs (6 of 20 void)" \
        in " ".join(gated.output.split())
    assert "steady" not in gated.output.split("void repeats where")[1]
    # Without the gate the comparison is shown, and exits 0; A's own voids are no reason.
    assert CliRunner().invoke(app, ["compare", before, after]).exit_code == 0
    assert CliRunner().invoke(app, ["compare", after, before, "--fail-on-regression"]
                              ).exit_code == 0
