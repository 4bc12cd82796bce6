"""The report's first line is the run's answer: PASS, FAIL or VOID by its pass rule (INTERRUPTED
while it has not finished), with the count that decides it, at 80 columns and wider, for a run
of one lane or several. These tests read line 1 only: the verdict moving down fails them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from alk.report.html.run_page import run_page
from alk.report.terminal.run import run_report, runs_report
from alk.result.rule import PassRule
from alk.result.verdict import judge

from helpers import documents
from helpers.views import render

WIDTHS = (80, 120)


def first_line(text: str) -> str:
    return text.splitlines()[0].rstrip()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_failing_run_says_fail_and_how_many_scenarios_broke_the_rule(tmp_path: Path,
                                                                        width: int) -> None:
    doc = documents.run(tmp_path)
    assert judge([doc]).failing == (("orders", "nominal"),)
    for stats in (False, True):
        line = first_line(render(run_report(doc, stats=stats), width))
        assert line.startswith("FAIL  1 of 3 scenarios broke the rule (every scored repeat "
                               "passes): nominal;")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_passing_run_says_pass_and_its_count(tmp_path: Path, width: int) -> None:
    doc = documents.passed(tmp_path)
    line = first_line(render(run_report(doc), width))
    assert line == ("PASS  all 2 scenarios met the rule (every scored repeat passes); 6/6 "
                    "passed")


def test_a_rule_of_a_rate_is_named_in_the_verdict(tmp_path: Path) -> None:
    doc = documents.run(tmp_path)
    # nominal's 17 of 20 (85%) meets 0.8; remote scored nothing: the run is void.
    doc = dataclasses.replace(doc, settings=dataclasses.replace(
        doc.settings, rule=PassRule(0.8)))
    line = " ".join(render(run_report(doc), 80).split())
    assert line.startswith("VOID no scenario broke the rule, but 1 of 3 scenarios scored "
                           "nothing: remote; read: why remote, below")
    doc = dataclasses.replace(doc, settings=dataclasses.replace(
        doc.settings, rule=PassRule(0.9)))
    assert first_line(render(run_report(doc), 120)).startswith(
        "FAIL  1 of 3 scenarios broke the rule (pass rate ≥ 90.0%): nominal")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_void_run_says_void_and_what_was_void(tmp_path: Path, width: int) -> None:
    refused = documents.refused(tmp_path)
    assert first_line(render(run_report(refused), width)).startswith("VOID  nothing ran")
    # No scenario failed, but most of one's repeats were void.
    mostly = documents.made(tmp_path / "m", documents.observation(0.3),
                            nominal=documents.passing(20),
                            remote=[documents.NEVER_READY] * 19 + documents.passing(1))
    line = first_line(render(run_report(mostly), width))
    assert line.startswith("VOID  no scenario broke the rule, but 19 of 40 repeats were void")


def test_an_interrupted_run_says_so_first_and_what_it_holds_so_far(tmp_path: Path) -> None:
    line = first_line(render(run_report(documents.interrupted(tmp_path)), 120))
    assert line.startswith("INTERRUPTED  after 10 of 40 repeats; so far FAIL: 1 of 2 "
                           "scenarios broke the rule")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_run_of_several_lanes_opens_with_its_verdict_then_the_matrix(tmp_path: Path,
                                                                        width: int) -> None:
    out = render(runs_report(documents.two_lanes(tmp_path)), width)
    assert first_line(out).startswith("FAIL  2 of 6 scenarios in 2 lanes broke the rule")
    lines = out.splitlines()
    matrix = next(i for i, line in enumerate(lines) if line.startswith("lanes × scenarios"))
    first_table = next(i for i, line in enumerate(lines) if line.startswith("scenario  "))
    assert matrix < 8 and first_table == matrix + 1  # the matrix's own header comes first
    assert matrix < next(i for i, line in enumerate(lines) if line.startswith("─── lane "))


def test_report_html_opens_with_the_same_answer(tmp_path: Path) -> None:
    page = run_page([documents.run(tmp_path)], tmp_path)
    top = page.split('<main>', 1)[0]
    assert ('<p class="answer">FAIL  1 of 3 scenarios broke the rule (every scored repeat '
            'passes): nominal; 1 scored nothing: remote') in top
