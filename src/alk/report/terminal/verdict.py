"""The first line of every run report: the run's answer by its pass rule (PASS, FAIL or VOID,
INTERRUPTED while it has not finished), the count that decides it, and what to read next.

"FAIL  2 of 14 scenarios broke the rule (every scored repeat passes): nominal, tool-raises;
read: why nominal, below". It wraps under itself, so that its first line still starts with the
word and the count at 80 columns.
"""

from __future__ import annotations

from typing import Sequence

from rich.table import Table
from rich.text import Text

from alk.records import ExitCode
from alk.report.safe_text import hanging, plural
from alk.result.document import RunDocument
from alk.result.rule import PassRule
from alk.result.verdict import Ruling, judge

WORDS = {ExitCode.PASS: ("PASS", "bold green"), ExitCode.FAIL: ("FAIL", "bold red"),
         ExitCode.VOID: ("VOID", "bold magenta")}
INTERRUPTED = ("INTERRUPTED", "bold yellow")
NAMED = 3  # scenarios named in the verdict, before "and N more"


def verdict_line(documents: Sequence[RunDocument]) -> Table:
    """The run's verdict (one document, or one per lane of a run of several) in one sentence
    under its word: the count that decides it, and what to read next."""
    word, style, text = _verdict(documents)
    return hanging([(Text(word, style=style), text)], gap=2)


def verdict_words(documents: Sequence[RunDocument]) -> str:
    """The verdict line as plain words, for report.html's top line."""
    word, _, text = _verdict(documents)
    return f"{word}  {text.plain}"


def _verdict(documents: Sequence[RunDocument]) -> tuple[str, str, Text]:
    ruling = judge(documents)
    word, style = WORDS.get(ruling.code, ("VOID", "bold magenta"))
    text = Text()
    unfinished = [d for d in documents if d.status != "complete"]
    if unfinished:
        word, style = INTERRUPTED
        done = sum(d.aggregate.counts.completed for d in documents)
        asked = sum(d.aggregate.counts.requested for d in documents)
        text.append(f"after {done} of {plural(asked, 'repeat')}; so far "
                    f"{WORDS.get(ruling.code, ('VOID', ''))[0]}: ")
    text.append_text(_sentence(documents, ruling))
    return word, style, text


def _sentence(documents: Sequence[RunDocument], ruling: Ruling) -> Text:
    several = len(documents) > 1
    scenarios = sum(len(d.scenarios) for d in documents)
    within = f" in {len(documents)} lanes" if several else ""
    rule = _rule(documents)
    if ruling.code is ExitCode.FAIL and scenarios == 1:
        # One scenario: what decides is its repeats.
        [(_, scenario)] = ruling.failing
        counts = documents[0].scenarios[0].stats.counts
        text = Text.assemble((scenario, "bold"), f" broke the rule ({rule}): "
                             f"{counts.scored - counts.passed} of "
                             f"{plural(counts.scored, 'scored repeat')} failed")
        return text.append(_read(ruling.failing, several))
    if ruling.code is ExitCode.FAIL:
        failing = ruling.failing
        text = Text(f"{len(failing)} of {plural(scenarios, 'scenario')}{within} broke the rule "
                    f"({rule}): ")
        text.append(_named(failing, several), style="bold")
        if ruling.unscored:
            text.append(f"; {len(ruling.unscored)} scored nothing: ")
            text.append(_named(ruling.unscored, several), style="bold")
        return text.append(_read(failing, several))
    if ruling.code is ExitCode.PASS:
        scored = sum(d.aggregate.counts.scored for d in documents)
        passed = sum(d.aggregate.counts.passed for d in documents)
        every = "the" if scenarios == 1 else f"all {scenarios}"
        return Text(f"{every} {plural(scenarios, 'scenario').split(' ', 1)[1]}{within} met the "
                    f"rule ({rule}); {passed}/{scored} passed")
    # Void: nothing broke the rule, but something could not be scored.
    refused = [d for d in documents if d.gate.ok is False]
    if refused:
        causes = ", ".join(dict.fromkeys(d.gate.cause or "preflight_failed" for d in refused))
        lanes = f" of {', '.join(d.lane.name for d in refused)}" if several else ""
        return Text(f"nothing ran{lanes}: the preflight refused the worker ({causes}); "
                    "read: the panel below")
    if ruling.unscored:
        text = Text(f"no scenario broke the rule, but {len(ruling.unscored)} of "
                    f"{plural(scenarios, 'scenario')}{within} scored nothing: ")
        text.append(_named(ruling.unscored, several), style="bold")
        return text.append(_read(ruling.unscored, several))
    void = sum(d.aggregate.counts.void for d in documents)
    ran = sum(d.aggregate.counts.completed for d in documents)
    text = Text(f"no scenario broke the rule, but {void} of {plural(ran, 'repeat')} were void "
                "(not scored), in ")
    hit = [(d.lane.name, s.id) for d in documents for s in d.scenarios if s.stats.counts.void]
    text.append(_named(hit, several), style="bold")
    return text.append(_read(hit, several)) if hit else text


def _read(pairs: Sequence[tuple[str, str]], several: bool) -> str:
    """What to read next: the first scenario's why, or in a run of several the matrix."""
    if several:
        return "; read: the matrix, then each lane's why, below"
    return f"; read: why {pairs[0][1]}, below"


def _rule(documents: Sequence[RunDocument]) -> str:
    """The rule in a few words; the full sentence is in the statistics block (`--stats`)."""
    rules = list(dict.fromkeys(d.settings.rule for d in documents))
    return short_rule(rules[0]) if len(rules) == 1 else "each lane's own"


def short_rule(rule: PassRule) -> str:
    """"every scored repeat passes", "pass rate ≥ 95.0%", "lower bound ≥ 90.0%"."""
    if rule.fail_under is None:
        return "every scored repeat passes"
    return f"{'lower bound' if rule.lower else 'pass rate'} ≥ {rule.fail_under:.1%}"


def _named(pairs: Sequence[tuple[str, str]], several: bool) -> str:
    """The first few scenarios, by id (and lane, in a run of several)."""
    named = [f"{lane}/{scenario}" if several else scenario for lane, scenario in pairs[:NAMED]]
    more = len(pairs) - NAMED
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")
