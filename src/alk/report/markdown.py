"""`reports/RUN_ID/report.md`: a run as a pull-request comment (GitHub or GitLab flavoured
Markdown): the verdict under the run's rule (and for an `alk rerun`, the repeat it reproduces
and whether the worker changed since), a table per lane (and the lane × scenario matrix of a
run of several), then what failed and why, each failed or void repeat with a relative
link to its transcript and the `alk rerun` command that reproduces it; last, the statistics
that mean something for the run (`alk.report.markdown_stats`): the terminal's order.

Bounded: GitHub refuses a comment over 65,536 characters, so the text stays under
`MAX_CHARS`, at most `REPEATS_PER_CAUSE` repeats are listed per scenario and cause, and what
is left out is counted and pointed to report.html, which has every repeat.

Links (to transcripts, report.html and result.json) are relative to the report's folder, which
works where the files sit together (a checkout, an artifact opened whole); pasted into a pull
request they lead nowhere, so a `link_base` (`--link-base URL`: the address at which the
folder `--out` names is served) makes every one absolute.

Every string that is not alk's own words (worker text: details, the framework and version a
worker reported; and names from the lane file) lands in a code span, on one line, its controls
escaped (`safe_text.inline`), with a fence longer than any run of backticks inside: there a
renderer shows `<img onerror=…>`, `**`, `[x](javascript:…)`, `@someone` and `#123` as the
characters they are, and GitHub links no mention or issue inside code.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Sequence

from alk.causes.advice import advice
from alk.layout import HTML_NAME, RESULT_NAME, group_of, report_folder
from alk.records import ExitCode, Outcome, RepeatResult, Verdict
from alk.report.cost import report_lines
from alk.report.format import PASS_HAT_K, rerun_words, share
from alk.report.format import rerun_command as command
from alk.report.links import Links, check_link_base
from alk.report.markdown_stats import statistics_section
from alk.report.safe_text import DASH, cut, inline, plural
from alk.result.document import RunDocument, ScenarioResult
from alk.result.rule import PassRule
from alk.result.verdict import Ruling, judge
from alk.stats.pass_k import pass_hat_k_at

# Under GitHub's 65,536, with room for a CI's own words around the report.
MAX_CHARS = 60_000
# The tables take at most this share of the budget: what failed and why needs the rest.
TABLE_SHARE = 0.4
REPEATS_PER_CAUSE = 3
DETAIL_CHARS = 300
NAME_CHARS = 80  # a scenario id, a lane name, a framework's version
LISTED = 10  # scenarios named in the rule's line, before "and N more"

# Whether a scenario meets the rule, by shape as well as by word in the legend.
BREAKS, HOLDS, UNSCORED = "✗", "✓", "–"
_TITLE = {ExitCode.PASS: "✅ PASS", ExitCode.FAIL: "❌ FAIL", ExitCode.VOID: "⚠️ VOID"}
_BACKTICKS = re.compile(r"`+")


def run_markdown(documents: Sequence[RunDocument], out_dir: Path,
                 link_base: str | None = None) -> str:
    """report.md of a run: one document, or one per lane of a run of several. Its links are
    relative to the report folder, or with `link_base` (`check_link_base`) absolute, under
    the address where `out_dir` is served."""
    if not documents:
        raise ValueError("run_markdown needs the documents of one run, got none")
    folder = report_folder(out_dir, documents[0].run_id)
    links = Links(None if link_base is None else check_link_base(link_base),
                  PurePath(os.path.relpath(folder, out_dir)).as_posix())
    page = _Page(MAX_CHARS)
    ruling = judge(documents)
    page.add(_title(documents, ruling))
    page.add(_reruns(documents))
    page.add(_ruling(documents, ruling))
    tables = _Page(int(MAX_CHARS * TABLE_SHARE))
    if len(documents) > 1:
        tables.add(_matrix(documents, tables, links))
    for document in documents:
        if len(documents) > 1:
            tables.add(f"### lane {code(document.lane.name)}")
        tables.add(_lane_table(document, tables, links))
    page.add(tables.text())
    page.add(_failures(documents, out_dir, page, links))
    page.add(statistics_section(documents, code))  # last: the answer comes first
    return page.text() + _footer(documents, page, links)


# ---------------------------------------------------------------------------------------------
# Text


def code(value: object, limit: int = NAME_CHARS, *, in_table: bool = False) -> str:
    """A code span of the value, on one line and at most `limit` characters: literal text in
    any Markdown renderer. In a table a `|` would end the cell even in code (GFM splits rows
    first): there it is escaped, and the cell shows it as it is."""
    text = value if isinstance(value, str) else str(value)
    shown = cut(inline(text[: limit * 4]), limit)  # cut first: a detail may be megabytes
    if not shown:
        return DASH
    if in_table:
        shown = shown.replace("|", "\\|")
    fence = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(shown)), default=0))
    # A backtick at an end would join the fence, and CommonMark strips one space from each end
    # of a span that has both: then a space each side, which a reader strips, keeps it whole.
    if shown[0] == "`" or shown[-1] == "`" or (shown[0] == shown[-1] == " "):
        return f"{fence} {shown} {fence}"
    return f"{fence}{shown}{fence}"


@dataclass
class _Page:
    """Blocks of Markdown, up to `limit` characters in all; what does not fit is counted."""

    limit: int
    blocks: list[str] = field(default_factory=list)
    size: int = 0
    left_out: int = 0

    def fits(self, text: str) -> bool:
        return self.size + len(text) + 2 <= self.limit

    def add(self, text: str) -> bool:
        if not text:
            return True
        if not self.fits(text):
            self.left_out += 1
            return False
        self.blocks.append(text)
        self.size += len(text) + 2
        return True

    def room(self) -> int:
        return self.limit - self.size

    def text(self) -> str:
        return "\n\n".join(self.blocks)


# ---------------------------------------------------------------------------------------------
# The answer at the top


def _title(documents: Sequence[RunDocument], ruling: Ruling) -> str:
    lines = [f"## {_TITLE.get(ruling.code, str(ruling.code))} · alk run "
             f"{code(group_of(documents[0].run_id))}"]
    for document in documents:
        lines.append(f"- {_lane_line(document)}")
    return "\n".join(lines)


def _lane_line(document: RunDocument) -> str:
    lane, gate, settings = document.lane, document.gate, document.settings
    framework = gate.framework if gate.framework is not None else lane.framework
    version = code(gate.version) if gate.version else "no version reported"
    text = (f"lane {code(lane.name)} · {code(framework)} {version} "
            f"(requires {code(lane.requirement or 'any')})")
    if gate.framework is not None and gate.framework != lane.framework:
        text += f", reported as {code(gate.framework)}"
    counts = document.aggregate.counts
    repeats = plural(settings.repeats, "repeat")
    if settings.adaptive is not None:
        repeats = f"up to {repeats}"
    text += f" · {repeats} × {plural(len(document.scenarios), 'scenario')}"
    if document.status != "complete":
        text += (f" · **{document.status}** after {counts.completed} of "
                 f"{plural(counts.requested, 'repeat')}: "
                 f"{code(f'alk run --resume {group_of(document.run_id)}')} goes on with it")
    if gate.ok is False:
        text += (f"\n  - preflight refused the worker, nothing was scored: "
                 f"{code(gate.cause or 'preflight_failed')} {code(gate.detail, DETAIL_CHARS)}")
    text += "".join(f"\n  - {line}" for line in report_lines(document.cost))
    return text


def _reruns(documents: Sequence[RunDocument]) -> str:
    reruns = dict.fromkeys(d.settings.rerun_of for d in documents if d.settings.rerun_of)
    lines = []
    for of in reruns:
        what, since = rerun_words(of, code)
        lines.append(f"**{what[0].upper()}{what[1:]}**: {since}.")
    return "\n\n".join(lines)


def _ruling(documents: Sequence[RunDocument], ruling: Ruling) -> str:
    """The rule, and whether the run meets it: the scenarios that break it, or those it could
    not judge."""
    rules = dict.fromkeys(d.settings.rule.describe() for d in documents)
    said = " ".join(f"{rule[0].upper()}{rule[1:]}." for rule in rules)
    several = len(documents) > 1
    if ruling.failing:
        verdict = (f"**Not met**: {plural(len(ruling.failing), 'scenario')} "
                   f"{'breaks' if len(ruling.failing) == 1 else 'break'} it: "
                   f"{_pairs(ruling.failing, several)}.")
    elif ruling.code is ExitCode.VOID:
        verdict = "**Void**: no scenario breaks it, but " + (
            f"nothing was scored in {_pairs(ruling.unscored, several)}." if ruling.unscored
            else "some repeats were void (not scored).")
    else:
        verdict = "**Met.**"
    return f"**Rule:** {said} {verdict}"


def _pairs(pairs: Sequence[tuple[str, str]], several: bool) -> str:
    named = [f"{code(scenario)} ({code(lane)})" if several else code(scenario)
             for lane, scenario in pairs[:LISTED]]
    more = len(pairs) - LISTED
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


# ---------------------------------------------------------------------------------------------
# Tables


def _mark(rule: PassRule, scenario: ScenarioResult) -> str:
    held = rule.holds(scenario)
    return UNSCORED if held is None else HOLDS if held else BREAKS


def _attention(rule: PassRule, scenario: ScenarioResult) -> int:
    """Breaking the rule first, then unscored, then flaky or with void repeats, then the rest."""
    held = rule.holds(scenario)
    if held is False:
        return 0
    if held is None:
        return 1
    return 2 if scenario.verdict != Verdict.PASS or scenario.stats.counts.void else 3


def _ordered(document: RunDocument) -> list[ScenarioResult]:
    rule = document.settings.rule
    return sorted(document.scenarios, key=lambda s: _attention(rule, s))


def _rate(scenario: ScenarioResult) -> str:
    stats = scenario.stats
    if stats.pass_rate is None:
        return DASH
    text = share(stats.pass_rate)
    if stats.ci is not None:
        text += f" [{stats.ci[0] * 100:.0f}–{stats.ci[1] * 100:.0f}]"
    return text


def _lane_table(document: RunDocument, budget: _Page, links: Links) -> str:
    rule = document.settings.rule
    rows = []
    for scenario in _ordered(document):
        stats = scenario.stats
        void = stats.void_rate
        hat = pass_hat_k_at(stats, PASS_HAT_K)
        rows.append(f"| {_mark(rule, scenario)} | {code(scenario.id, in_table=True)} "
                    f"| {scenario.verdict} | {stats.counts.passed}/{stats.counts.scored} "
                    f"| {_rate(scenario)} | {DASH if void is None else share(void)} "
                    f"| {DASH if hat is None else share(hat.value)} |")
    head = ["| rule | scenario | verdict | passed | pass rate [95% CI] | void "
            f"| pass^{PASS_HAT_K} |",
            "|:-:|---|---|--:|--:|--:|--:|"]
    tail = [f"\n{BREAKS} breaks the rule · {HOLDS} meets it · {UNSCORED} nothing scored · "
            "passed: of the scored repeats · void: share of the repeats run that were not "
            f"scored · pass^{PASS_HAT_K}: the chance that {PASS_HAT_K} repeats in a row all "
            f"pass ({DASH} with fewer than {PASS_HAT_K} scored)"]
    return _fitted(head, rows, tail, budget.room(), links)


def _matrix(documents: Sequence[RunDocument], budget: _Page, links: Links) -> str:
    """Scenarios by lane: each cell the rule's mark, the verdict and the pass rate. Half the
    tables' room at most: the lanes' own tables follow."""
    order: dict[str, None] = {}
    for document in documents:
        for scenario in document.scenarios:
            order.setdefault(scenario.id, None)
    rows = []
    for scenario_id in order:
        cells = []
        for document in documents:
            scenario = document.scenario(scenario_id)
            cells.append(DASH if scenario is None else
                         f"{_mark(document.settings.rule, scenario)} {scenario.verdict} "
                         f"{_rate(scenario)}")
        rows.append(f"| {code(scenario_id, in_table=True)} | " + " | ".join(cells) + " |")
    head = ["### lanes × scenarios",
            "| scenario | " + " | ".join(code(d.lane.name, in_table=True)
                                         for d in documents) + " |",
            "|---|" + "---|" * len(documents)]
    return _fitted(head, rows, [], budget.room() // 2, links)


# The line that counts the rows left out, at its longest.
_MORE_CHARS = len("\n… and 1,000,000 more scenarios: see [report.html](report.html)")


def _fitted(head: list[str], rows: list[str], tail: list[str], room: int,
            links: Links) -> str:
    """A table: its head, as many rows as fit in `room` characters with its tail, and a line
    that counts the rows left out."""
    used = (sum(len(line) + 1 for line in (*head, *tail)) + _MORE_CHARS + 1
            + len(links.to(HTML_NAME)) - len(HTML_NAME))
    kept = 0
    for row in rows:
        if used + len(row) + 1 > room:
            break
        used += len(row) + 1
        kept += 1
    more = len(rows) - kept
    page = links.to(HTML_NAME)
    note = [f"\n… and {plural(more, 'more scenario')}: see [{HTML_NAME}]({page})"
            ] if more else []
    return "\n".join([*head, *rows[:kept], *note, *tail])


# ---------------------------------------------------------------------------------------------
# What failed and why


def _failures(documents: Sequence[RunDocument], out_dir: Path, page: _Page,
              links: Links) -> str:
    """Each scenario with a failed or void repeat: its repeats grouped by cause, the first
    few of each with their detail, transcript and rerun command; as many as the page holds."""
    several = len(documents) > 1
    folder = report_folder(out_dir, documents[0].run_id)
    advised: set[tuple[str, str]] = set()  # what to do about a cause is said once
    blocks = ["### What failed and why"]
    size = len(blocks[0])
    missing = 0
    for document in documents:
        for scenario in _ordered(document):
            block = _scenario_failures(document, scenario, out_dir, folder, several, advised,
                                       links)
            if block is None:
                continue
            # Room kept for the note on what was left out, and the footer.
            if size + len(block) + 600 > page.room():
                missing += 1
                continue
            blocks.append(block)
            size += len(block) + 2
    if len(blocks) == 1:
        return ""
    if missing:
        blocks.append(f"… and {plural(missing, 'more scenario')} with failed or void repeats "
                      f"not shown here: see [{HTML_NAME}]({links.to(HTML_NAME)})")
    return "\n\n".join(blocks)


def _scenario_failures(document: RunDocument, scenario: ScenarioResult, out_dir: Path,
                       folder: Path, several: bool, advised: set[tuple[str, str]],
                       links: Links) -> str | None:
    bad = [r for r in scenario.repeats if not r.passed]
    counts = scenario.stats.counts
    if not bad:
        return None
    where = f" in {code(document.lane.name)}" if several else ""
    lines = [f"#### {code(scenario.id)}{where}: {scenario.verdict}, {counts.passed}/"
             f"{counts.scored} scored passed"
             + (f", {counts.void} void (not scored)" if counts.void else "")]
    groups: dict[tuple[str, str], list[RepeatResult]] = {}
    for repeat in bad:
        groups.setdefault((repeat.outcome, repeat.cause), []).append(repeat)
    # Scored failures explain a verdict before void repeats do; then the commonest cause.
    ordered = sorted(groups.items(), key=lambda g: (g[0][0] == Outcome.LANE_INFRA, -len(g[1])))
    for (outcome, cause), repeats in ordered:
        layer = "void" if outcome == Outcome.LANE_INFRA else str(outcome)
        line = f"- **{layer}** {code(cause)} · {plural(len(repeats), 'repeat')}"
        # Advice fitted to the fault each detail names (a raising tool is not a 429), each once.
        said = [a for a in dict.fromkeys(advice(cause, r.detail) for r in repeats)
                if a and (cause, a) not in advised]
        advised.update((cause, a) for a in said)
        if said:
            line += f" · what to do: {' '.join(said)}"
        lines.append(line)
        for repeat in repeats[:REPEATS_PER_CAUSE]:
            lines.append(f"  - {_repeat_line(document, repeat, out_dir, folder, links)}")
        more = len(repeats) - REPEATS_PER_CAUSE
        if more > 0:
            lines.append(f"  - … and {more} more: see [{HTML_NAME}]({links.to(HTML_NAME)})")
    return "\n".join(lines)


def _repeat_line(document: RunDocument, repeat: RepeatResult, out_dir: Path,
                 folder: Path, links: Links) -> str:
    parts = [f"repeat {repeat.repeat}", code(repeat.detail, DETAIL_CHARS)]
    if repeat.transcript:
        target = os.path.relpath(out_dir / repeat.transcript, folder)
        parts.append(f"[transcript]({links.to(PurePath(target).as_posix())})")
    # Never cut: a command cut short would rerun something else.
    rerun = command(document.run_id, repeat.scenario, repeat.repeat)
    parts.append(code(rerun, len(rerun)))
    return " · ".join(parts)


def _footer(documents: Sequence[RunDocument], page: _Page, links: Links) -> str:
    cut_note = (" (this comment is cut to fit: some sections are left out)"
                if page.left_out else "")
    # reports/R/ holds one run's result.json, or group.json and a folder per lane with its own.
    group = group_of(documents[0].run_id)
    records = [PurePath(os.path.relpath(PurePath(d.run_id, RESULT_NAME), group)).as_posix()
               for d in documents]
    if records == [RESULT_NAME]:
        said = f"the record: [{RESULT_NAME}]({links.to(RESULT_NAME)})"
    else:
        said = f"the {'record' if len(records) == 1 else 'records'}: " + ", ".join(
            f"[{code(record)}]({links.to(record)})" for record in records)
    return (f"\n\n---\nEvery repeat with its transcript: [{HTML_NAME}]({links.to(HTML_NAME)}) · "
            f"{said}{cut_note}\n")
