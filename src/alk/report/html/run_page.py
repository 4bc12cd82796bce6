"""The run page of the HTML report: one self-contained page per run (`reports/RUN_ID/report.html`)
(the page of `alk compare` is `alk.report.html.compare_page`).

A page opens from disk with no network. Plotly's bundle and the page's own script are inline,
and a Content-Security-Policy allows those two scripts by their sha256, inline styles, and
images from `blob:` and `data:` (a chart's PNG download draws through one), and nothing else
(`default-src 'none'`: no fetch, no remote image, no font, no form), so that markup that
slipped past the escaping could neither run nor reach anywhere. Every value reaches the page
through Jinja2 with autoescaping on; chart data sits in `<script type="application/json">`
blocks whose `<`, `>` and `&` are JSON escapes, so no worker string can end the block.

Transcripts are embedded as bounded views (`alk.report.html.excerpts`), and every repeat links its
file: a run whose one transcript is 64 MiB gets a page the size of any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from alk.causes import CATALOGUE
from alk.causes.advice import advice
from alk.layout import RESULT_NAME, group_of, report_folder
from alk.records import ExitCode, Outcome, RepeatResult, Verdict
from alk.report.cost import report_lines
from alk.report.failures import FailureGroup, failure_groups
from alk.report.format import rerun_command, rerun_words, share
from alk.report.html.excerpts import as_json, excerpts, transcript_link
from alk.report.html.refusal import refused_lane, with_probes
from alk.report.html.page import json_for_script, percent, render, stream
from alk.report.safe_text import DASH, cut, inline, one_line, printable
from alk.report.terminal.verdict import verdict_words
from alk.result.document import RerunOf, RunDocument, ScenarioResult
from alk.result.verdict import judge

# Scenarios listed under "needs attention"; the charts and the tables show the rest.
ATTENTION_ITEMS = 25
ATTENTION_FAILURES = 3  # ways a scenario failed, each with its detail, under its item
# Repeats listed in the table (failed and void first); the rest are counted.
TABLE_ROWS = 2000
DETAIL_CHARS = 1000
# Steps shown side by side from the first difference of two diverging repeats, and the shared
# steps shown before it.
DIVERGENCE_ROWS = 24
DIVERGENCE_CONTEXT = 3
DIVERGENCE_PAIRS = 20  # scenarios shown side by side at most: each is a table of its own
# Outcomes and verdicts as a symbol and a word, never by colour alone.
_VERDICTS = {Verdict.PASS: "✓", Verdict.FAIL: "✗", Verdict.FLAKY: "≈", Verdict.VOID: "∅"}
_OUTCOMES = {Outcome.PASS: ("✓", "pass", "pass"), Outcome.AGENT: ("✗", "agent", "fail"),
             Outcome.FRAMEWORK_RUNTIME: ("✗", "framework_runtime", "fail"),
             Outcome.LANE_INFRA: ("∅", "void", "void")}
_RULING = {ExitCode.PASS: ("✓", "pass", "the run meets the rule"),
           ExitCode.FAIL: ("✗", "fail", "the run breaks the rule"),
           ExitCode.VOID: ("∅", "void", "the run is void: something could not be scored")}


def run_page(documents: Sequence[RunDocument], out_dir: Path) -> str:
    """The report of one run (one document per lane) as one HTML page. Transcripts are read
    from under `out_dir` and linked relative to the run's report folder."""
    return render("run.html.j2", _context(documents, out_dir))


def run_page_pieces(documents: Sequence[RunDocument], out_dir: Path) -> Iterator[bytes]:
    """The same page in UTF-8 pieces as they are made, to be written as they come: a long
    run's page is never whole in memory, nor is Plotly's bundle (`page.stream`)."""
    return stream("run.html.j2", _context(documents, out_dir))


def _context(documents: Sequence[RunDocument], out_dir: Path) -> dict[str, Any]:
    from alk.report.html.charts import run_charts  # plotly: only when a page is made

    if not documents:
        raise ValueError("a run page needs at least one document")
    folder = report_folder(out_dir, documents[0].run_id)
    shown = [printable(document) for document in documents]  # worker text, controls escaped
    if all(d.gate.ok is False for d in shown):
        return _nothing_ran(shown, out_dir, folder)
    divergences = _divergences(shown)
    ruling = judge(shown)  # its (lane, scenario) pairs as the page spells them
    lanes = with_probes([_lane(index, d) for index, d in enumerate(shown)], shown, folder,
                         out_dir)
    rows, left_out = _table_rows(shown)
    attention = _attention(shown, ruling.failing, ruling.unscored)
    views = excerpts([(row.repeat.transcript, row.rank) for row in rows], out_dir)
    symbol, tone, sentence = _RULING.get(ruling.code, ("∅", "void", "the run is void"))
    context = {
        "title": f"alk · {group_of(documents[0].run_id)}",
        "run_id": group_of(documents[0].run_id),
        "lanes": lanes,
        "several": len(documents) > 1,
        "ruling": {"symbol": symbol, "tone": tone, "sentence": sentence,
                   "answer": verdict_words(shown),
                   "rules": list(dict.fromkeys(d.settings.rule.describe() for d in documents))},
        "reruns": [_rerun_of(of) for of in dict.fromkeys(
            d.settings.rerun_of for d in shown if d.settings.rerun_of)],
        "attention": attention[:ATTENTION_ITEMS],
        "attention_more": max(0, len(attention) - ATTENTION_ITEMS),
        "matrix": _matrix(shown) if len(documents) > 1 else None,
        "charts": [_chart(chart) for chart in run_charts(documents)],
        "divergences": divergences[:DIVERGENCE_PAIRS],
        "divergences_more": max(0, len(divergences) - DIVERGENCE_PAIRS),
        "tables": _tables(shown, rows, views, folder, out_dir),
        "left_out": left_out,
        "nothing_ran": False,
    }
    return context


def _nothing_ran(documents: Sequence[RunDocument], out_dir: Path,
                 folder: Path) -> dict[str, Any]:
    """A run none of whose lanes ran a repeat: the page says why and what to do, lane by lane,
    and nothing else (no chart: no Plotly bundle, a page of a few kilobytes)."""
    ruling = judge(documents)
    symbol, tone, sentence = _RULING.get(ruling.code, ("∅", "void", "the run is void"))
    lanes = with_probes([_lane(index, d) for index, d in enumerate(documents)], documents,
                         folder, out_dir)
    return {"title": f"alk · {group_of(documents[0].run_id)}",
            "run_id": group_of(documents[0].run_id), "lanes": lanes,
            "several": len(documents) > 1, "nothing_ran": True,
            "ruling": {"symbol": symbol, "tone": tone, "sentence": sentence,
                       "answer": verdict_words(documents),
                       "rules": list(dict.fromkeys(d.settings.rule.describe()
                                                   for d in documents))},
            "reruns": [], "attention": [], "attention_more": 0, "matrix": None, "charts": [],
            "divergences": [], "divergences_more": 0, "tables": [], "left_out": None}


def _rerun_of(of: RerunOf) -> dict[str, Any]:
    what, since = rerun_words(of)
    return {"what": f"{what[0].upper()}{what[1:]}", "since": since,
            "changed": of.worker_changed}


@dataclass(frozen=True, slots=True)
class _Row:
    lane: int  # the document's index
    index: int  # the scenario's, in its document
    scenario: ScenarioResult
    repeat: RepeatResult
    rank: int  # 0 failed or void, 1 a pass of a scenario that did not pass, 2 any other


def _rank(scenario: ScenarioResult, repeat: RepeatResult) -> int:
    if not repeat.passed:
        return 0
    return 1 if scenario.verdict is not Verdict.PASS else 2


def _table_rows(documents: Sequence[RunDocument]) -> tuple[list[_Row], str | None]:
    """The repeats the table lists, in lane, scenario and repeat order: at most TABLE_ROWS,
    the failed and void ones chosen first."""
    rows = [_Row(lane, index, scenario, repeat, _rank(scenario, repeat))
            for lane, document in enumerate(documents)
            for index, scenario in enumerate(document.scenarios)
            for repeat in scenario.repeats]
    if len(rows) <= TABLE_ROWS:
        return rows, None
    chosen = set(sorted(range(len(rows)), key=lambda i: rows[i].rank)[:TABLE_ROWS])
    failed = sum(1 for i, row in enumerate(rows) if i not in chosen and not row.repeat.passed)
    return [row for i, row in enumerate(rows) if i in chosen], (
        f"{len(rows) - TABLE_ROWS:,} of {len(rows):,} repeats are not listed here (at most "
        f"{TABLE_ROWS:,}, failed and void ones first; {failed:,} of those left out did not "
        f"pass): {RESULT_NAME} holds every one")


def _lane(index: int, document: RunDocument) -> dict[str, Any]:
    gate, lane, aggregate = document.gate, document.lane, document.aggregate
    counts = aggregate.counts
    reported = [f"{inline(i.framework or DASH)} {inline(i.version or '(no version)')}"
                for i in document.identities]
    return {
        "index": index, "name": lane.name or DASH, "description": lane.description,
        "framework": lane.framework or DASH, "requirement": lane.requirement or "any",
        "reported": (f"{inline(gate.framework)} {inline(gate.version or '(no version)')}"
                     if gate.framework is not None else "(none reported)"),
        "also": [r for r in dict.fromkeys(reported)][1:],
        "refused": refused_lane(document) if gate.ok is False else None,
        "run_id": document.run_id, "status": document.status,
        "started": document.started_at, "finished": document.finished_at,
        "repeats": document.settings.repeats, "seed": document.settings.seed,
        "alk_version": document.alk_version,
        "verdicts": [(_VERDICTS.get(v, "?"), v, n) for v, n in aggregate.verdicts if n],
        "counts": counts,
        "rate": _rate(aggregate.pass_rate, aggregate.ci),
        "void": _share(aggregate.void_rate),
        "scenarios": [_scenario_line(index, i, s) for i, s in enumerate(document.scenarios)],
        "cost": _cost(document),
    }


def _cost(document: RunDocument) -> list[str]:
    """A proxy or replay run's cost, as the provider counted it (nothing for a script)."""
    return report_lines(document.cost)


def _scenario_line(lane: int, index: int, scenario: ScenarioResult) -> dict[str, Any]:
    stats = scenario.stats
    return {"id": scenario.id, "anchor": _anchor(lane, index), "verdict": _verdict(scenario),
            "tally": f"{stats.counts.passed}/{stats.counts.scored}",
            "rate": _rate(stats.pass_rate, stats.ci), "void": _share(stats.void_rate),
            "p50": _seconds(stats.durations.p50)}


def _attention(documents: Sequence[RunDocument], failing: Sequence[tuple[str, str]],
               unscored: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The scenarios to read first: those that break the rule (lowest judged rate first), then
    the flaky ones by pass rate, then the void ones."""
    breaking, flaky, void = [], [], []
    failing_set, unscored_set = set(failing), set(unscored)
    for lane, document in enumerate(documents):
        rule = document.settings.rule
        for index, scenario in enumerate(document.scenarios):
            key = (document.lane.name, scenario.id)
            stats = scenario.stats
            groups = failure_groups(scenario)[:ATTENTION_FAILURES]
            item = {"lane": document.lane.name, "id": scenario.id,
                    "anchor": _anchor(lane, index), "verdict": _verdict(scenario),
                    "rate": _rate(stats.pass_rate, stats.ci),
                    "failures": [_failure(document, g, _anchor(lane, index)) for g in groups],
                    "actions": _actions(groups)}
            if key in failing_set:
                judged = rule.judged(scenario)
                item["why"] = (f"breaks the rule: {percent(judged)} "
                               f"({'lower bound' if rule.lower else 'pass rate'})"
                               if rule.fail_under is not None else
                               f"breaks the rule: {stats.counts.scored - stats.counts.passed} "
                               f"of {stats.counts.scored} scored repeats did not pass")
                breaking.append((judged if judged is not None else 0.0, item))
            elif scenario.verdict is Verdict.FLAKY:
                item["why"] = f"flaky: {stats.counts.passed} of {stats.counts.scored} passed"
                flaky.append((stats.pass_rate or 0.0, item))
            elif key in unscored_set or stats.counts.void:
                item["why"] = (f"void: {stats.counts.void} of {stats.counts.completed} "
                               "repeats not scored" if stats.counts.completed else
                               "void: no repeat ran")
                void.append((-(stats.counts.void), item))
    ordered = [item for group in (breaking, flaky, void)
               for _, item in sorted(group, key=lambda pair: pair[0])]
    # What to do is said once, under the first scenario it explains (a cause whose advice
    # differs by fault is advised on again where it differs).
    advised: set[str] = set()
    for item in ordered:
        item["actions"] = [a for a in item["actions"] if a not in advised]
        advised.update(item["actions"])
    return ordered


def _failure(document: RunDocument, group: FailureGroup, anchor: str) -> dict[str, Any]:
    """One way the scenario's repeats did not pass: which repeats, the layer and cause, and
    what actually happened (the detail), with the command that runs the first again and a
    link to its row in the table, where its transcript is."""
    first = group.repeats[0]
    return {"label": group.label, "cause": f"{group.layer}/{group.cause}",
            "detail": one_line(group.detail, DETAIL_CHARS, whole_words=True) or DASH,
            "rerun": rerun_command(document.run_id, first.scenario, first.repeat),
            "repeat": first.repeat, "anchor": f"{anchor}-r{first.repeat}"}


def _actions(groups: Sequence[FailureGroup]) -> list[str]:
    """What to do about the causes of the failures shown, each once, fitted to the fault its
    detail names (a raising tool is not a 429: alk.causes.advice)."""
    return list(dict.fromkeys(f"{group.cause}: {advice(group.cause, group.detail)}"
                              for group in groups if group.cause in CATALOGUE))


def _matrix(documents: Sequence[RunDocument]) -> dict[str, Any]:
    """The lane × scenario matrix: a row a scenario, a column a lane (what `alk.report.matrix`
    shows in the terminal)."""
    order = list(dict.fromkeys(s.id for d in documents for s in d.scenarios))
    # Each lane's scenarios by id, once: a run may have thousands of scenarios.
    places = [{s.id: (i, s) for i, s in enumerate(d.scenarios)} for d in documents]
    rows = []
    for scenario_id in order:
        cells = []
        for lane, document in enumerate(documents):
            found = places[lane].get(scenario_id)
            if found is None:
                cells.append(None)
                continue
            index, scenario = found
            refused = document.gate.ok is False
            cells.append({"verdict": _verdict(scenario), "anchor": _anchor(lane, index),
                          "rate": None if refused else _rate(scenario.stats.pass_rate,
                                                             scenario.stats.ci),
                          "void": _share(scenario.stats.void_rate),
                          "refused": refused})
        rows.append({"id": scenario_id, "cells": cells})
    return {"lanes": [d.lane.name or DASH for d in documents], "rows": rows,
            "void": [_share(d.aggregate.void_rate) for d in documents]}


def _chart(chart: Any) -> dict[str, Any]:  # alk.report.html.figure.Chart
    payload = {"figure": chart.figure, "config": chart.config}
    return {"id": chart.id, "title": chart.title, "caption": chart.caption,
            "data": json_for_script(payload)}


def _divergences(documents: Sequence[RunDocument]) -> list[dict[str, Any]]:
    """Two repeats side by side at their first difference, for each scenario whose repeats
    took different paths."""
    from alk.stats.divergence import diverging_pair

    found = []
    for lane, document in enumerate(documents):
        for index, scenario in enumerate(document.scenarios):
            pair = diverging_pair(scenario)
            if pair is None:
                continue
            a, b = pair.a.trajectory, pair.b.trajectory
            start = max(0, pair.index - DIVERGENCE_CONTEXT)
            end = min(max(len(a), len(b)) + 1, pair.index + DIVERGENCE_ROWS)
            rows = [{"number": step + 1, "a": _step(a, step), "b": _step(b, step),
                     "same": step < pair.index, "first": step == pair.index}
                    for step in range(start, end)]
            found.append({"lane": document.lane.name, "id": scenario.id,
                          "anchor": _anchor(lane, index),
                          "a": _pair_side(pair.a), "b": _pair_side(pair.b),
                          "shared": pair.index, "earlier": start,
                          "rows": rows, "more": max(len(a), len(b)) + 1 - end})
    return found


def _step(steps: Sequence[str], at: int) -> str:
    if at < len(steps):
        return cut(steps[at], 200)
    return "(end)" if at == len(steps) else ""


def _pair_side(repeat: RepeatResult) -> dict[str, Any]:
    symbol, word, tone = _OUTCOMES.get(repeat.outcome, ("?", str(repeat.outcome), "void"))
    return {"repeat": repeat.repeat, "symbol": symbol, "word": word, "tone": tone,
            "cause": repeat.cause, "steps": len(repeat.trajectory)}


def _tables(documents: Sequence[RunDocument], rows: Sequence[_Row],
            views: Mapping[int, dict[str, Any]], folder: Path, out_dir: Path
            ) -> list[dict[str, Any]]:
    """Per lane, its repeats grouped by scenario."""
    tables: list[dict[str, Any]] = []
    for lane, document in enumerate(documents):
        groups: dict[str, dict[str, Any]] = {}
        for at, row in enumerate(rows):
            if row.lane != lane:
                continue
            group = groups.setdefault(row.scenario.id, {
                "id": row.scenario.id, "anchor": _anchor(lane, row.index),
                "verdict": _verdict(row.scenario), "repeats": []})
            group["repeats"].append(_repeat(document, row.repeat, views[at], folder, out_dir))
        tables.append({"lane": document.lane.name or DASH, "scenarios": list(groups.values())})
    return tables


def _repeat(document: RunDocument, repeat: RepeatResult, view: dict[str, Any], folder: Path,
            out_dir: Path) -> dict[str, Any]:
    symbol, word, tone = _OUTCOMES.get(repeat.outcome, ("?", str(repeat.outcome), "void"))
    return {
        "repeat": repeat.repeat, "symbol": symbol, "word": word, "tone": tone,
        "cause": repeat.cause, "detail": cut(repeat.detail, DETAIL_CHARS),
        "duration": _seconds(repeat.duration_s),
        "memory": DASH if repeat.peak_rss_mb is None else f"{repeat.peak_rss_mb:.1f} MB",
        "model": _model_calls(repeat.model),
        "claimed": (None if repeat.claimed is None else
                    cut(printable(as_json(repeat.claimed)), DETAIL_CHARS)),
        "rerun": (None if repeat.passed else
                  rerun_command(document.run_id, repeat.scenario, repeat.repeat)),
        "link": transcript_link(repeat.transcript, folder, out_dir),
        "transcript": view,
    }


def _model_calls(model: Any) -> str:
    """The gateway's calls, those retried, and what it refused past its bounds (unread)."""
    model = model if isinstance(model, Mapping) else {}
    calls, retries, refused = (model.get(key) for key in ("calls", "retries", "over_bounds"))
    if not isinstance(calls, int):
        return DASH
    notes = [f"{n} {word}" for n, word in ((retries, "retried"), (refused, "refused"))
             if isinstance(n, int) and n]
    return f"{calls}" + (f" ({', '.join(notes)})" if notes else "")


def _anchor(lane: int, scenario: int) -> str:
    """An element id of alk's own making: never a worker's or a lane's text."""
    return f"s{lane}-{scenario}"


def _verdict(scenario: ScenarioResult) -> dict[str, str]:
    verdict = scenario.verdict
    return {"symbol": _VERDICTS.get(verdict, "?"), "word": str(verdict),
            "tone": str(verdict) if verdict in _VERDICTS else "void"}


def _rate(rate: float | None, ci: tuple[float, float] | None) -> str:
    if rate is None:
        return DASH
    interval = f" [{ci[0] * 100:.1f}–{ci[1] * 100:.1f}]" if ci is not None else ""
    return f"{rate * 100:.1f}%{interval}"


def _share(rate: float | None) -> str:
    return DASH if rate is None else share(rate)


def _seconds(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f} s"
