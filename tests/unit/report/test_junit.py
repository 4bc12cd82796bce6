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
import math
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest
import xmlschema

from alk.records import Outcome, RepeatResult
from alk.report.format import rerun_command as command
from alk.report.junit import (
    MESSAGE_CHARS,
    REPEATS_LISTED,
    TEXT_CHARS,
    VOID_LISTED,
    _seconds,
    _text,
    run_junit,
)
from alk.result.document import RunDocument
from alk.result.rule import PassRule

from helpers import documents
from helpers.documents import CRASHED, NEVER_READY, RUN, flaky, made, observation, passing
from helpers.rulings import CHANGED, UNCHANGED, rerun, ruled, three_lanes

pytestmark = pytest.mark.usefixtures("private_temp")

SCHEMAS = Path(__file__).resolve().parents[2] / "data" / "junit"
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
        alone.attrib.pop("timestamp", None)
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


def listed(repeat: RepeatResult, run_id: str = RUN) -> str:
    """A void or failed repeat as a case's text lists it: its cause and detail, its
    transcript, the command that reruns it."""
    return (f"repeat {repeat.repeat}: {repeat.outcome}/{repeat.cause}: {repeat.detail}\n"
            f"transcript: {repeat.transcript}\n"
            f"rerun: {command(run_id, repeat.scenario, repeat.repeat)}")


RULE = PassRule().describe()
# The worker's command cannot be started: a void repeat of another cause than NEVER_READY's.
SPAWN_FAILED = observation(0.0, spawned=False, ready=None, started=False, result=None,
                           exit_code=None, trajectory=())


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
    assert [(p.get("name"), p.get("value")) for p in suite.iter("property")] == [
        ("alk.run_id", RUN), ("alk.version", document.alk_version), ("alk.status", "complete"),
        ("alk.rule", RULE), ("lane.framework", "pydantic-ai"), ("lane.requirement", ">=1.0,<2"),
        ("worker.framework", "pydantic-ai"), ("worker.version", "1.0.3"), ("repeats", "20"),
        ("seed", "7")]
    assert case(root, "nominal").find("system-out").text == (
        "pass: 20/20 scored repeats passed; pass rate 100.0% [95% CI 83.9%–100.0%]\n"
        f"rule: {RULE}")


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
    assert failure.text == "no repeat failed: the pass rate is below the rule"
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
    void = document.scenario("remote").repeats
    assert skipped.text == ("\n\n".join(listed(r) for r in void[:VOID_LISTED])
                            + "\n… and 10 more void repeats: report.html has every one")
    # Its output is the summary alone: the void repeats are the skip's text.
    assert remote.find("system-out").text == (
        f"void: 0/0 scored repeats passed, 20 void\nrule: {RULE}")
    assert remote.find("failure") is None and remote.find("flakyFailure") is None


@pytest.mark.parametrize("extra", [0, 1])
def test_a_case_lists_so_many_void_repeats_and_counts_the_rest(tmp_path, extra):
    # VOID_LISTED void repeats, then one more: in a skipped case, and beside a scored repeat.
    void = VOID_LISTED + extra
    rest = "\n… and 1 more void repeat: report.html has every one" if extra else ""
    alone = made(tmp_path / "alone", observation(0.3), repeats=void, remote=[NEVER_READY] * void)
    repeats = alone.scenario("remote").repeats
    assert case(parsed([alone]), "remote").find("skipped").text == (
        "\n\n".join(listed(r) for r in repeats[:VOID_LISTED]) + rest)
    beside = made(tmp_path / "beside", observation(0.3), repeats=void + 1,
                  mostly=[NEVER_READY] * void + passing(1))
    repeats = beside.scenario("mostly").repeats
    assert case(parsed([beside]), "mostly").find("system-out").text == "\n".join(
        [f"pass: 1/1 scored repeats passed, {void} void; pass rate 100.0% [95% CI 20.7%–100.0%]",
         f"rule: {RULE}", f"{void} void repeats (not scored): exited_before_ready ×{void}",
         *(listed(r) for r in repeats[:VOID_LISTED])]) + rest


def test_void_repeats_beside_scored_ones_are_counted_in_the_case_output(tmp_path):
    document = documents.mostly_void(tmp_path)
    mostly = case(parsed([document]), "mostly-void")
    assert [child.tag for child in mostly] == ["system-out"]  # its one scored repeat passed
    out = mostly.find("system-out").text
    assert "19 void repeats (not scored): exited_before_ready ×19" in out
    void = [r for r in document.scenario("mostly-void").repeats if not r.scored]
    assert command(RUN, "mostly-void", void[0].repeat) in out
    assert out.endswith("\n… and 9 more void repeats: report.html has every one")


def test_void_causes_are_counted_commonest_first(tmp_path):
    # The rarer cause comes first, in the repeats and in the alphabet: neither decides.
    document = made(tmp_path, observation(0.3), remote=[NEVER_READY] * 3 + [SPAWN_FAILED] * 17,
                    mostly=[NEVER_READY] * 3 + [SPAWN_FAILED] * 7 + passing(10))
    root = parsed([document])
    assert case(root, "remote").find("skipped").get("message") == (
        "void: spawn_failed ×17, exited_before_ready ×3: nothing was scored")
    assert ("\n10 void repeats (not scored): spawn_failed ×7, exited_before_ready ×3\n"
            in case(root, "mostly").find("system-out").text)


def test_a_void_repeats_detail_is_cut_to_a_quarter_of_the_text_so_that_several_fit(tmp_path):
    document = documents.run(tmp_path)
    long = dataclasses.replace(document, scenarios=tuple(
        dataclasses.replace(s, repeats=tuple(dataclasses.replace(r, detail="d" * TEXT_CHARS)
                                             for r in s.repeats))
        for s in document.scenarios))
    text = case(parsed([long]), "remote").find("skipped").text
    cut_at = TEXT_CHARS // 4
    assert text.startswith(f"repeat 1: lane_infra/exited_before_ready: {'d' * (cut_at - 1)}…\n")
    assert text.count("…") == 4  # three details cut, then the whole text within the fourth


def test_a_scenario_the_run_never_reached_is_skipped_as_never_run(tmp_path):
    # Ctrl-C during the first repeat: nominal has none.
    document = made(tmp_path, observation(0.3), nominal=[KeyboardInterrupt()],
                    tool_error=passing(20))
    nominal = case(parsed([document]), "nominal")
    skipped = nominal.find("skipped")
    assert skipped.get("message") == ("void: no repeat ran (the run ended before this "
                                      "scenario's repeats)")
    assert skipped.text is None
    assert nominal.find("system-out").text == f"void: 0/0 scored repeats passed\nrule: {RULE}"


def test_a_refused_worker_skips_every_scenario_with_the_preflight_cause(tmp_path):
    document = documents.refused(tmp_path)
    root = parsed([document])
    refused = ("void: version_unsupported: the preflight refused the worker; pydantic-ai 0.9.1 "
               "does not satisfy the lane's requirement '>=1.0,<2'")
    assert [c.find("skipped").get("message") for c in root.iter("testcase")] == [refused] * 2
    assert [c.find("skipped").text for c in root.iter("testcase")] == [None] * 2
    assert root.find("testsuite").get("skipped") == "2"
    # A result.json edited to drop the cause still says that the preflight refused.
    edited = dataclasses.replace(document, gate=dataclasses.replace(document.gate, cause=None))
    assert case(parsed([edited]), "nominal").find("skipped").get("message") == refused.replace(
        "version_unsupported", "preflight_failed")


def test_a_worker_that_never_got_ready_has_no_framework_or_version(tmp_path):
    root = parsed([made(tmp_path, NEVER_READY, nominal=[])])
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert (properties["worker.framework"], properties["worker.version"]) == ("", "")
    assert case(root, "nominal").find("skipped").get("message").startswith(
        "void: exited_before_ready: the preflight refused the worker; worker ended (exit code 1)")


def test_a_run_of_three_lanes_is_a_suite_per_lane_and_a_case_per_lane_and_scenario(tmp_path):
    lanes = three_lanes(tmp_path)
    root = parsed(lanes)
    assert [s.get("name") for s in root.findall("testsuite")] == [
        "pydantic-ai", "langgraph", "openai-agents"]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("9", "3", "0")
    assert sum(int(s.get("skipped")) for s in root.findall("testsuite")) == 1
    assert root.get("name") == f"alk {RUN}"
    # The run's time is its lanes' (each to the millisecond, as a reader adds them up).
    times = [float(s.get("time")) for s in root.findall("testsuite")]
    assert min(times) > 1 and root.get("time") == f"{sum(times):.3f}"
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


@pytest.mark.parametrize("extra", [0, 1])
def test_a_case_lists_at_most_so_many_failed_repeats_and_counts_the_rest(tmp_path, extra):
    repeats = REPEATS_LISTED + extra
    document = made(tmp_path, observation(0.3), repeats=repeats, nominal=[CRASHED] * repeats)
    found = case(parsed([document]), "nominal")
    assert len(found.findall("failure")) + len(found.findall("rerunFailure")) == REPEATS_LISTED
    # After the summary's two lines, the count of those not listed, if any.
    assert found.find("system-out").text.split("\n")[2:] == (
        ["… and 1 more failed repeat: report.html has every one"] if extra else [])


def test_a_hand_edited_document_without_transcripts_or_a_pass_rate_still_says_the_rest(
        tmp_path):
    document = documents.run(tmp_path)
    nominal = document.scenario("nominal")
    edited = dataclasses.replace(
        nominal, stats=dataclasses.replace(nominal.stats, pass_rate=None, ci=None),
        repeats=tuple(dataclasses.replace(r, transcript="") for r in nominal.repeats))
    found = case(parsed([dataclasses.replace(document, scenarios=(edited,))]), "nominal")
    first, *later = [r for r in nominal.repeats if r.outcome is not Outcome.PASS]
    failure = found.find("failure")
    assert failure.get("message") == (f"{first.cause}: pass rate none, 3 of 20 scored repeats "
                                      "failed; the rule: every one must pass")
    assert failure.text == (f"repeat {first.repeat}: {first.outcome}/{first.cause}: "
                            f"{first.detail}\nrerun: {command(RUN, 'nominal', first.repeat)}")
    assert [e.find("system-out").text for e in found.findall("rerunFailure")] == [
        f"rerun: {command(RUN, 'nominal', r.repeat)}" for r in later]
    assert found.find("system-out").text == f"flaky: 17/20 scored repeats passed\nrule: {RULE}"


@pytest.fixture
def east_of_utc():
    """The machine's clock nine hours ahead of UTC (a POSIX zone: no zone database needed)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "JST-9")
        time.tzset()
        yield
    time.tzset()


def test_the_timestamp_is_utc_to_the_second_without_a_zone_wherever_alk_ran(tmp_path,
                                                                             east_of_utc):
    document = made(tmp_path, observation(0.3), nominal=passing(20))

    def stamp(started_at: str) -> str | None:
        edited = dataclasses.replace(document, started_at=started_at)
        return parsed([edited]).find("testsuite").get("timestamp")

    assert stamp("2026-11-29T13:40:07.25+01:00") == "2026-11-29T12:40:07"
    assert stamp("2026-11-29T12:40:07+00:00") == "2026-11-29T12:40:07"
    assert stamp("2026-11-29T12:40:07") == "2026-11-29T12:40:07"  # no zone: as it is written
    assert stamp("yesterday") is None  # a hand-edited document: none rather than a wrong one


def test_a_time_is_digits_and_three_decimals_without_a_sign_or_an_exponent():
    values = [1234.5678, 0.5, 1e20, 0.0, -0.0, -1.5, math.nan, math.inf, -math.inf]
    assert [_seconds(v) for v in values] == [
        "1234.568", "0.500", "100000000000000000000.000"] + ["0.000"] * 6


def test_text_that_is_not_a_string_is_shown_as_its_str():
    assert _text(42, MESSAGE_CHARS) == "42"
    assert _text(Outcome.FRAMEWORK_RUNTIME, TEXT_CHARS) == "framework_runtime"
