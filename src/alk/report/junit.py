"""`reports/RUN_ID/junit.xml`: a run as the JUnit XML that CI systems read (GitLab's test
report, Jenkins, GitHub's test-report actions).

`<testsuites>` holds a `<testsuite>` per lane and a `<testcase>` per scenario (classname the
lane, so that each lane × scenario of a run of several is a case of its own), its time the sum
of its repeats' durations. The case's verdict is the run's rule's (`alk.result.rule`):

- the rule holds and no repeat failed: a plain passing case;
- the rule holds though some repeats failed (flaky, under a threshold): passing, with a
  `<flakyFailure>` per failed repeat, Maven Surefire's convention for a test that passed on a
  rerun, which Jenkins and Surefire-aware readers show as flaky;
- the rule breaks: `<failure>` for the first failed repeat (its message: the cause and the
  pass rate against the rule), then a `<rerunFailure>` for each later one;
- nothing scored: `<skipped message="void: CAUSE …">`;
- void repeats beside scored ones: counted, with their causes, in the case's `<system-out>`.

A rerun's suite has the property `alk.rerun_of` (the repeat it reproduces and whether the
worker changed since), which each of its cases' `<system-out>` repeats first.

Every failed or void repeat carries its detail, its transcript's path (relative to the folder
alk ran in) and the `alk rerun` command that reproduces it. The element order and the
children of each follow Surefire's schema (`surefire-test-report-3.0.xsd`), which the tests
validate against. Worker text is escaped by ElementTree, its controls shown as escapes first
(XML 1.0 cannot hold most of them at all), and each text is bounded (`TEXT_CHARS`).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from io import BytesIO
from typing import Sequence
from xml.etree.ElementTree import Element, ElementTree, SubElement, indent

from alk.layout import HTML_NAME
from alk.records import RepeatResult
from alk.report.format import rerun_command as command
from alk.report.format import rerun_words
from alk.report.safe_text import cut, inline, plural, printable
from alk.result.document import RerunOf, RunDocument, ScenarioResult
from alk.result.rule import PassRule

TEXT_CHARS = 4096  # a detail or a system-out: a few KiB, however much the worker wrote
MESSAGE_CHARS = 500  # an attribute: one line a CI's table shows
# Elements for one case's failed repeats: the rest are counted in its system-out, so that
# 100,000 repeats do not make a file no CI can load.
REPEATS_LISTED = 100
VOID_LISTED = 10

# Anything XML 1.0 cannot hold (Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
# [#x10000-#x10FFFF]): `printable` escapes every control and surrogate already; this catches
# what it leaves (U+FFFE, U+FFFF).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def run_junit(documents: Sequence[RunDocument]) -> bytes:
    """junit.xml of a run (one document per lane), UTF-8 with its declaration."""
    root = Element("testsuites")
    # Jenkins' schema has no `skipped` on the root: each suite says it.
    totals = dict.fromkeys(("tests", "failures", "errors"), 0)
    seconds = 0.0
    for document in documents:
        suite = _suite(document)
        root.append(suite)
        for name in totals:
            totals[name] += int(suite.attrib[name])
        seconds += float(suite.attrib["time"])
    if documents:
        root.set("name", _text(f"alk {documents[0].run_id.split('/', 1)[0]}", MESSAGE_CHARS))
    for name, count in totals.items():
        root.set(name, str(count))
    root.set("time", _seconds(seconds))
    indent(root)  # for a person who opens it; readers ignore the whitespace between elements
    out = BytesIO()
    ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return out.getvalue() + b"\n"


def _suite(document: RunDocument) -> Element:
    rule = document.settings.rule
    suite = Element("testsuite", name=_text(document.lane.name or document.run_id,
                                            MESSAGE_CHARS))
    properties = SubElement(suite, "properties")
    for name, value in _properties(document):
        SubElement(properties, "property", name=name, value=_text(value, MESSAGE_CHARS))
    failures = skipped = 0
    seconds = 0.0
    for scenario in document.scenarios:
        case = _case(document, scenario, rule)
        suite.append(case)
        failures += case.find("failure") is not None
        skipped += case.find("skipped") is not None
        seconds += float(case.attrib["time"])
    suite.set("tests", str(len(document.scenarios)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    suite.set("time", _seconds(seconds))
    timestamp = _timestamp(document.started_at)
    if timestamp:
        suite.set("timestamp", timestamp)
    return suite


def _properties(document: RunDocument) -> list[tuple[str, str]]:
    lane, gate, settings = document.lane, document.gate, document.settings
    return [("alk.run_id", document.run_id), ("alk.version", document.alk_version),
            ("alk.status", document.status), ("alk.rule", settings.rule.describe()),
            ("lane.framework", lane.framework), ("lane.requirement", lane.requirement),
            ("worker.framework", gate.framework or ""), ("worker.version", gate.version or ""),
            ("repeats", str(settings.repeats)), ("seed", str(settings.seed)),
            *([("alk.rerun_of", _rerun_of(settings.rerun_of))] if settings.rerun_of else [])]


def _rerun_of(of: RerunOf) -> str:
    """A rerun's: the repeat it reproduces, and whether the worker changed since."""
    return "; ".join(rerun_words(of))


def _case(document: RunDocument, scenario: ScenarioResult, rule: PassRule) -> Element:
    case = Element("testcase", classname=_text(document.lane.name or document.run_id,
                                               MESSAGE_CHARS),
                   name=_text(scenario.id, MESSAGE_CHARS),
                   time=_seconds(sum(r.duration_s for r in scenario.repeats
                                     if math.isfinite(r.duration_s))))
    failed = [r for r in scenario.repeats if r.scored and not r.passed]
    void = [r for r in scenario.repeats if not r.scored]
    held = rule.holds(scenario)
    notes = [_summary(scenario, rule)]
    if document.settings.rerun_of:
        notes.insert(0, _rerun_of(document.settings.rerun_of))
    if held is None:
        skipped = SubElement(case, "skipped", message=_text(_void_message(document, void),
                                                            MESSAGE_CHARS))
        skipped.text = _text("\n\n".join(_repeat_text(document, r) for r in void[:VOID_LISTED])
                             + _more(len(void) - VOID_LISTED, "void repeat"), TEXT_CHARS)
    elif held:
        for repeat in failed[:REPEATS_LISTED]:
            _rerun(case, "flakyFailure", document, repeat)
    else:
        first, *later = failed or [None]
        failure = SubElement(case, "failure", message=_text(_failure_message(scenario, rule,
                                                                             first),
                                                            MESSAGE_CHARS),
                             type=str(first.outcome) if first else "rule")
        failure.text = _text(_repeat_text(document, first) if first else
                             "no repeat failed: the pass rate is below the rule", TEXT_CHARS)
        for repeat in later[:REPEATS_LISTED - 1]:
            _rerun(case, "rerunFailure", document, repeat)
    if len(failed) > REPEATS_LISTED:
        notes.append(_more(len(failed) - REPEATS_LISTED, "failed repeat").lstrip("\n"))
    if void and held is not None:
        notes.append(_void_note(document, void))
    out = SubElement(case, "system-out")
    out.text = _text("\n".join(notes), TEXT_CHARS)
    return case


def _rerun(case: Element, tag: str, document: RunDocument, repeat: RepeatResult) -> None:
    """A flakyFailure or rerunFailure: Surefire's schema has the detail in its stackTrace and
    where to look in its system-out."""
    element = SubElement(case, tag, message=_text(repeat.cause, MESSAGE_CHARS),
                         type=str(repeat.outcome))
    SubElement(element, "stackTrace").text = _text(repeat.detail, TEXT_CHARS)
    SubElement(element, "system-out").text = _text(_where(document, repeat), TEXT_CHARS)


def _summary(scenario: ScenarioResult, rule: PassRule) -> str:
    counts, stats = scenario.stats.counts, scenario.stats
    text = (f"{scenario.verdict}: {counts.passed}/{counts.scored} scored repeats passed"
            + (f", {counts.void} void" if counts.void else ""))
    if stats.pass_rate is not None:
        text += f"; pass rate {_rate(scenario)}"
    return f"{text}\nrule: {rule.describe()}"


def _rate(scenario: ScenarioResult) -> str:
    stats = scenario.stats
    if stats.pass_rate is None:
        return "none"
    text = f"{stats.pass_rate:.1%}"
    if stats.ci is not None:
        text += f" [95% CI {stats.ci[0]:.1%}–{stats.ci[1]:.1%}]"
    return text


def _failure_message(scenario: ScenarioResult, rule: PassRule,
                     first: RepeatResult | None) -> str:
    counts = scenario.stats.counts
    cause = f"{first.cause}: " if first else ""
    if rule.fail_under is None:
        return (f"{cause}pass rate {_rate(scenario)}, {counts.scored - counts.passed} of "
                f"{counts.scored} scored repeats failed; the rule: every one must pass")
    judged = "the lower bound of its 95% interval" if rule.lower else "the pass rate"
    return (f"{cause}pass rate {_rate(scenario)}; the rule: {judged} must be at least "
            f"{rule.fail_under:.1%}")


def _void_message(document: RunDocument, void: Sequence[RepeatResult]) -> str:
    if document.gate.ok is False:
        return (f"void: {document.gate.cause or 'preflight_failed'}: the preflight refused "
                f"the worker; {document.gate.detail}")
    if not void:
        return "void: no repeat ran (the run ended before this scenario's repeats)"
    return f"void: {_causes(void)}: nothing was scored"


def _void_note(document: RunDocument, void: Sequence[RepeatResult]) -> str:
    lines = [f"{plural(len(void), 'void repeat')} (not scored): {_causes(void)}"]
    lines += [_repeat_text(document, r) for r in void[:VOID_LISTED]]
    return "\n".join(lines) + _more(len(void) - VOID_LISTED, "void repeat")


def _causes(repeats: Sequence[RepeatResult]) -> str:
    counts: dict[str, int] = {}
    for repeat in repeats:
        counts[repeat.cause] = counts.get(repeat.cause, 0) + 1
    return ", ".join(f"{cause} ×{count}" for cause, count in
                     sorted(counts.items(), key=lambda item: -item[1]))


def _repeat_text(document: RunDocument, repeat: RepeatResult) -> str:
    return (f"repeat {repeat.repeat}: {repeat.outcome}/{repeat.cause}: "
            f"{cut(repeat.detail, TEXT_CHARS // 4)}\n{_where(document, repeat)}")


def _where(document: RunDocument, repeat: RepeatResult) -> str:
    lines = [f"transcript: {repeat.transcript}"] if repeat.transcript else []
    lines.append(f"rerun: {command(document.run_id, repeat.scenario, repeat.repeat)}")
    return "\n".join(lines)


def _more(count: int, noun: str) -> str:
    if count <= 0:
        return ""
    return f"\n… and {plural(count, 'more ' + noun)}: {HTML_NAME} has every one"


def _text(value: object, limit: int) -> str:
    """Worker text fit for XML: controls and invisible characters shown as escapes, at most
    `limit` characters. An attribute keeps its line breaks as escapes: one line in a table."""
    text = str(value)[: limit * 2]  # a detail may be megabytes: cut before any walk over it
    shown = inline(text) if limit <= MESSAGE_CHARS else printable(text)
    return cut(_NOT_XML.sub("\N{REPLACEMENT CHARACTER}", shown), limit)


def _seconds(value: float) -> str:
    """Surefire's time: digits and at most three decimals (no exponent, no sign)."""
    return f"{value:.3f}" if math.isfinite(value) and value > 0 else "0.000"


def _timestamp(started_at: str) -> str:
    """Ant's form, which every reader parses: UTC, to the second, without a zone."""
    try:
        moment = datetime.fromisoformat(started_at)
    except ValueError:
        return ""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")
