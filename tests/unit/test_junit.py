"""alk.report.junit: junit.xml from documents alk made itself (`run_lane` with a scripted
runner), checked against the schemas CI systems read it with, and by its structure.

Two schemas, vendored in tests/data/junit/, and neither holds the whole file: Maven
Surefire's (surefire-test-report-3.0.xsd) defines flakyFailure and rerunFailure, with a
stackTrace each, but its root is one <testsuite> without a timestamp; Jenkins' (junit-10.xsd)
has <testsuites> and timestamp, but no flakyFailure, and a rerunFailure of text alone. So each
<testsuite> is validated against Surefire's without its timestamp, and the whole file against
Jenkins' without Surefire's rerun elements: every element and attribute is checked by a schema
that defines it.
"""

from __future__ import annotations

import copy
import dataclasses
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest
import xmlschema

import documents
from alk import api
from alk.pass_rule import PassRule
from alk.report.junit import MESSAGE_CHARS, REPEATS_LISTED, TEXT_CHARS, run_junit
from alk.rerun import command
from alk.result import RerunOf, RunDocument
from documents import (CRASHED, NEVER_READY, RUN, WRONG, flaky, made, observation, passing)
from scripted import ScenarioRunner

pytestmark = pytest.mark.usefixtures("private_temp")

SCHEMAS = Path(__file__).parent.parent / "data" / "junit"
SUREFIRE = xmlschema.XMLSchema(SCHEMAS / "surefire-test-report-3.0.xsd")
JENKINS = xmlschema.XMLSchema(SCHEMAS / "junit-10.xsd")
SUREFIRE_ONLY = ("flakyFailure", "rerunFailure")


def parsed(documents_: list[RunDocument]) -> ET.Element:
    """The run's junit.xml, validated against both schemas, as a tree."""
    data = run_junit(documents_)
    assert data.startswith(b"<?xml version='1.0' encoding='utf-8'?>")
    root = ET.fromstring(data)
    assert root.tag == "testsuites"
    for suite in root.findall("testsuite"):
        alone = copy.deepcopy(suite)
        alone.attrib.pop("timestamp")
        SUREFIRE.validate(alone)
    plain = copy.deepcopy(root)
    for case in plain.iter("testcase"):
        for element in [e for e in case if e.tag in SUREFIRE_ONLY]:
            case.remove(element)
    JENKINS.validate(plain)
    return root


def case(root: ET.Element, name: str, lane: str = "orders") -> ET.Element:
    [found] = [c for c in root.iter("testcase")
               if c.get("name") == name and c.get("classname") == lane]
    return found


def ruled(out: Path, rule: PassRule, run_id: str = RUN, name: str = "orders",
          **scripts: list) -> RunDocument:
    """The document alk writes under this rule (`--fail-under`), with a fixed run id."""
    return api.run_lane(documents.lane(tuple(scripts), name), repeats=20, seed=7, out_dir=out,
                        runner=ScenarioRunner(observation(0.3), **scripts),
                        environ=documents.SECRET_ENV, run_id=run_id, rule=rule).document


def rerun(document: RunDocument, *, worker_changed: bool) -> RunDocument:
    """The document as `alk rerun RUN nominal 4` writes it: its record names the repeat it
    reproduces, and whether the worker's files changed since."""
    of = RerunOf("20261128-090000-ff00aa/orders", "nominal", 4, worker_changed)
    return dataclasses.replace(document, settings=dataclasses.replace(document.settings,
                                                                      rerun_of=of))


CHANGED = ("the worker's files changed since it ran: this checks them as they are now, and is "
           "no reproduction")
UNCHANGED = ("worker and lane unchanged since (the lane file, the worker's program and the "
             "Python files beside it, by sha256)")


def three_lanes(out: Path) -> list[RunDocument]:
    """A run of three lanes (`alk run --lane a --lane b --lane c`): lane L's run id is R/L,
    its transcripts under R/L."""
    return [
        ruled(out, PassRule(), f"{RUN}/pydantic-ai", "pydantic-ai", nominal=flaky(),
              tool_error=passing(20, 0.92), remote=[NEVER_READY] * 20),
        ruled(out, PassRule(), f"{RUN}/langgraph", "langgraph", nominal=passing(20),
              tool_error=[CRASHED] * 20, remote=passing(20)),
        ruled(out, PassRule(), f"{RUN}/openai-agents", "openai-agents",
              nominal=passing(20), tool_error=passing(19) + [WRONG], remote=passing(20)),
    ]


def test_a_run_that_passed_is_one_suite_of_plain_passing_cases(tmp_path):
    document = made(tmp_path, observation(0.3), nominal=passing(20),
                    tool_error=passing(20, 0.92))
    root = parsed([document])
    [suite] = root.findall("testsuite")
    assert suite.get("name") == "orders"
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "2", "failures": "0", "errors": "0", "skipped": "0"}
    assert root.get("tests") == "2" and root.get("failures") == "0"
    for scenario in document.scenarios:
        found = case(root, scenario.id)
        assert [child.tag for child in found] == ["system-out"]
        # A case's time is the sum of its repeats' durations.
        assert float(found.get("time")) == pytest.approx(
            sum(r.duration_s for r in scenario.repeats), abs=5e-4)
    assert float(suite.get("time")) == pytest.approx(
        sum(r.duration_s for s in document.scenarios for r in s.repeats), abs=1e-3)
    started = datetime.fromisoformat(document.started_at).astimezone(timezone.utc)
    assert suite.get("timestamp") == started.strftime("%Y-%m-%dT%H:%M:%S")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["alk.run_id"] == RUN
    assert properties["alk.rule"] == PassRule().describe()
    assert properties["worker.version"] == "1.0.3"


def test_a_flaky_scenario_breaks_the_default_rule_its_first_failure_then_reruns(tmp_path):
    document = documents.run(tmp_path)
    root = parsed([document])
    [suite] = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    nominal = case(root, "nominal")
    assert [child.tag for child in nominal] == [
        "failure", "rerunFailure", "rerunFailure", "system-out"]
    failed = [r for r in document.scenario("nominal").repeats if r.scored and not r.passed]
    first, *later = failed
    failure = nominal.find("failure")
    assert failure.get("type") == str(first.outcome) == "framework_runtime"
    # Its message: the cause, and the pass rate against the rule.
    assert failure.get("message").startswith(f"{first.cause}: pass rate 85.0% [95% CI 64.0%")
    assert "3 of 20 scored repeats failed; the rule: every one must pass" in failure.get(
        "message")
    assert first.detail in failure.text
    assert f"transcript: {first.transcript}" in failure.text
    assert command(RUN, "nominal", first.repeat) in failure.text
    for element, repeat in zip(nominal.findall("rerunFailure"), later, strict=True):
        assert (element.get("message"), element.get("type")) == (repeat.cause,
                                                                 str(repeat.outcome))
        assert element.find("stackTrace").text == repeat.detail
        assert element.find("system-out").text == (
            f"transcript: {repeat.transcript}\nrerun: {command(RUN, 'nominal', repeat.repeat)}")
    assert nominal.find("flakyFailure") is None
    assert case(root, "tool_error").find("failure") is None


def test_a_flaky_scenario_under_its_threshold_passes_with_a_flaky_failure_each(tmp_path):
    # --fail-under 0.5: 17/20 meets it; each of the 3 failed repeats is a flakyFailure.
    document = ruled(tmp_path, PassRule(0.5), nominal=flaky(), tool_error=passing(20))
    root = parsed([document])
    nominal = case(root, "nominal")
    assert [child.tag for child in nominal] == ["flakyFailure"] * 3 + ["system-out"]
    assert root.find("testsuite").get("failures") == "0"
    failed = [r for r in document.scenario("nominal").repeats if not r.passed]
    for element, repeat in zip(nominal.findall("flakyFailure"), failed, strict=True):
        assert element.get("message") == repeat.cause
        assert element.get("type") == str(repeat.outcome)
        assert element.find("stackTrace").text == repeat.detail
        assert command(document.run_id, "nominal", repeat.repeat) in element.find(
            "system-out").text
    assert "each scenario's pass rate must be at least 50.0%" in nominal.find(
        "system-out").text


def test_a_rule_on_the_lower_bound_fails_a_scenario_that_never_failed(tmp_path):
    # 20/20 has a lower bound of 83.9%: under 90% the rule breaks, though no repeat failed.
    document = ruled(tmp_path, PassRule(0.9, lower=True), nominal=passing(20))
    root = parsed([document])
    failure = case(root, "nominal").find("failure")
    assert failure.get("type") == "rule"
    assert failure.get("message") == ("pass rate 100.0% [95% CI 83.9%–100.0%]; the rule: the "
                                      "lower bound of its 95% interval must be at least 90.0%")
    assert case(root, "nominal").find("rerunFailure") is None


def test_a_rule_on_the_pass_rate_names_it_in_the_failure(tmp_path):
    document = ruled(tmp_path, PassRule(0.9), nominal=flaky())
    failure = case(parsed([document]), "nominal").find("failure")
    assert failure.get("message").endswith("; the rule: the pass rate must be at least 90.0%")


@pytest.mark.parametrize("changed, since", [(True, CHANGED), (False, UNCHANGED)])
def test_a_rerun_says_what_it_reruns_and_whether_the_worker_changed(tmp_path, changed, since):
    root = parsed([rerun(documents.run(tmp_path), worker_changed=changed)])
    said = f"rerun of 20261128-090000-ff00aa/orders nominal repeat 4; {since}"
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["alk.rerun_of"] == said
    for found in root.iter("testcase"):
        assert found.find("system-out").text.startswith(said + "\n")
    plain = parsed([documents.run(tmp_path / "plain")])
    assert "alk.rerun_of" not in {p.get("name") for p in plain.iter("property")}
    assert "rerun of" not in ET.tostring(plain, encoding="unicode")


def test_a_void_scenario_is_skipped_with_its_cause_and_its_reruns(tmp_path):
    document = documents.run(tmp_path)
    remote = case(parsed([document]), "remote")
    skipped = remote.find("skipped")
    assert skipped.get("message") == "void: exited_before_ready ×20: nothing was scored"
    assert command(RUN, "remote", 1) in skipped.text
    assert "… and 10 more void repeats: report.html has every one" in skipped.text
    assert remote.find("failure") is None and remote.find("flakyFailure") is None


def test_void_repeats_beside_scored_ones_are_counted_in_the_case_output(tmp_path):
    document = documents.mostly_void(tmp_path)
    mostly = case(parsed([document]), "mostly-void")
    assert [child.tag for child in mostly] == ["system-out"]  # its one scored repeat passed
    out = mostly.find("system-out").text
    assert "19 void repeats (not scored): exited_before_ready ×19" in out
    void = [r for r in document.scenario("mostly-void").repeats if not r.scored]
    assert command(RUN, "mostly-void", void[0].repeat) in out


def test_a_refused_worker_skips_every_scenario_with_the_preflight_cause(tmp_path):
    root = parsed([documents.refused(tmp_path)])
    skips = [c.find("skipped").get("message") for c in root.iter("testcase")]
    assert len(skips) == 2
    assert all(m.startswith("void: version_unsupported: the preflight refused") for m in skips)
    assert root.find("testsuite").get("skipped") == "2"


def test_a_run_of_three_lanes_is_a_suite_per_lane_and_a_case_per_lane_and_scenario(tmp_path):
    lanes = three_lanes(tmp_path)
    root = parsed(lanes)
    assert [s.get("name") for s in root.findall("testsuite")] == [
        "pydantic-ai", "langgraph", "openai-agents"]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("9", "3", "0")
    assert sum(int(s.get("skipped")) for s in root.findall("testsuite")) == 1
    assert root.get("name") == f"alk {RUN}"
    for suite in root.findall("testsuite"):
        assert [c.get("classname") for c in suite.iter("testcase")] == [suite.get("name")] * 3
    failing = sorted((c.get("classname"), c.get("name")) for c in root.iter("testcase")
                     if c.find("failure") is not None)
    assert failing == [("langgraph", "tool_error"), ("openai-agents", "tool_error"),
                       ("pydantic-ai", "nominal")]
    # All 20 crashed: the first is the failure, the 19 others rerunFailures.
    assert len(case(root, "tool_error", "langgraph").findall("rerunFailure")) == 19
    assert command(f"{RUN}/langgraph", "tool_error", 20) in ET.tostring(
        case(root, "tool_error", "langgraph"), encoding="unicode")


HOSTILE = ("\x00nul \x1b[31mred\x1b[0m \x0cff \x7fdel \ud800lone \ufffe\uffff bom "
           "]]> <![CDATA[ x ]]> </system-out><script>alert(1)</script> & &amp; \"q\" 'a' "
           "\u202ereversed\r\n")


def hostile(document: RunDocument, detail: str) -> RunDocument:
    """The document with this detail in every repeat that did not pass, and in the lane's name
    and the worker's version: what a hand-edited or hostile result.json may hold."""
    scenarios = tuple(dataclasses.replace(s, repeats=tuple(
        r if r.passed else dataclasses.replace(r, detail=detail) for r in s.repeats))
        for s in document.scenarios)
    return dataclasses.replace(
        document, scenarios=scenarios,
        lane=dataclasses.replace(document.lane, name="orders" + HOSTILE),
        gate=dataclasses.replace(document.gate, version=HOSTILE))


def test_hostile_text_is_escaped_and_bounded_and_the_file_still_validates(tmp_path):
    huge = HOSTILE + "x" * 5_000_000
    document = hostile(documents.run(tmp_path), huge)
    data = run_junit([document])
    root = parsed([document])
    assert len(data) < 200_000  # 23 repeats of 5 MB each
    texts = [e.text or "" for e in root.iter()]
    values = [v for e in root.iter() for v in e.attrib.values()]
    assert max(map(len, texts)) <= TEXT_CHARS and max(map(len, values)) <= MESSAGE_CHARS
    [nominal] = [c for c in root.iter("testcase") if c.get("name") == "nominal"]
    shown = nominal.find("rerunFailure/stackTrace").text
    # Controls and invisible characters show as escapes; markup and ]]> as the text they are.
    assert shown.startswith("\\x00nul \\x1b[31mred\\x1b[0m \\x0cff \\x7fdel \\ud800lone "
                            "\ufffd\ufffd bom ]]> <![CDATA[ x ]]> </system-out><script>")
    assert "\\u202ereversed\\x0d\n" in shown
    assert shown.endswith("…")
    # Attributes stay on one line: a line break shows as \n.
    assert nominal.get("classname").endswith("\\u202ereversed\\x0d\\n")
    assert "<script>" not in data.decode() and "&lt;script&gt;" in data.decode()


def test_a_case_lists_at_most_so_many_failed_repeats_and_counts_the_rest(tmp_path):
    repeats = REPEATS_LISTED + 20
    document = made(tmp_path, observation(0.3), repeats=repeats, nominal=[CRASHED] * repeats)
    found = case(parsed([document]), "nominal")
    assert len(found.findall("failure")) + len(found.findall("rerunFailure")) == REPEATS_LISTED
    assert ("20 more failed repeats are not listed here: report.html has every one"
            in found.find("system-out").text)
