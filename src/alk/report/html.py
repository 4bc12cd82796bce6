"""The HTML report: one self-contained page per run (`reports/RUN_ID/report.html`), and one per
comparison (`alk compare`).

A page opens from disk with no network. Plotly's bundle and the page's own script are inline,
and a Content-Security-Policy allows those two scripts by their sha256, inline styles, and
images from `blob:` and `data:` (a chart's PNG download draws through one), and nothing else
(`default-src 'none'`: no fetch, no remote image, no font, no form), so that markup that
slipped past the escaping could neither run nor reach anywhere. Every value reaches the page
through Jinja2 with autoescaping on; chart data sits in `<script type="application/json">`
blocks whose `<`, `>` and `&` are JSON escapes, so no worker string can end the block.

Transcripts are embedded as bounded views: a repeat's first events and its last (where the
exit, the checks and the verdict are), each part read within a byte bound, each payload cut and
folded, and a budget for the whole page that failed and void repeats spend first. What is left
out is said, and every repeat links its file. A run whose one transcript is 64 MiB gets a page
the size of any other.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

from alk.causes import CATALOGUE
from alk.compare import Change, Comparison, RunSide, Side
from alk.estimate import Estimate
from alk.pass_rule import judge
from alk.plan import group_of
from alk.records import ExitCode, Outcome, RepeatResult, Verdict
from alk.report.safe_text import DASH, cut, inline, plural, printable
from alk.report.transcript_view import event_row
from alk.rerun import command as rerun_command
from alk.result import RunDocument, ScenarioResult

# A repeat's embedded view: its first events and its last, each part read within a bound.
HEAD_EVENTS = 150
TAIL_EVENTS = 50
HEAD_READ_BYTES = 256 * 1024
TAIL_READ_BYTES = 64 * 1024
# What one repeat's view may add to the page (K), and every view together: failed and void
# repeats are served first, then the passes of scenarios that did not pass, then the rest.
REPEAT_EMBED_CHARS = 48 * 1024
PAGE_EMBED_CHARS = 6 * 1024 * 1024
# A payload its one-line summary cuts is folded under it, itself cut at FOLD_CHARS.
FOLD_CHARS = 4000
FOLD_SLACK_CHARS = 32
# What an event's markup costs beyond its text, counted against the budgets.
EVENT_MARKUP_CHARS = 220
# Scenarios listed under "needs attention"; the charts and the tables show the rest.
ATTENTION_ITEMS = 25
# Repeats listed in the table (failed and void first); the rest are counted.
TABLE_ROWS = 2000
DETAIL_CHARS = 1000
# Steps shown side by side from the first difference of two diverging repeats, and the shared
# steps shown before it.
DIVERGENCE_ROWS = 24
DIVERGENCE_CONTEXT = 3

TEMPLATES = Path(__file__).parent / "templates"
_CHANNELS = frozenset({"agent", "tool", "model", "user", "framework", "stderr", "harness"})
# Outcomes and verdicts as a symbol and a word, never by colour alone.
_VERDICTS = {Verdict.PASS: "✓", Verdict.FAIL: "✗", Verdict.FLAKY: "≈", Verdict.VOID: "∅"}
_OUTCOMES = {Outcome.PASS: ("✓", "pass", "pass"), Outcome.AGENT: ("✗", "agent", "fail"),
             Outcome.FRAMEWORK_RUNTIME: ("✗", "framework_runtime", "fail"),
             Outcome.LANE_INFRA: ("∅", "void", "void")}
_CHANGES = {Change.REGRESSED: ("▼", "fail"), Change.IMPROVED: ("▲", "pass"),
            Change.UNCHANGED: ("=", "same"), Change.INCONCLUSIVE: ("?", "flaky")}
_RULING = {ExitCode.PASS: ("✓", "pass", "the run meets the rule"),
           ExitCode.FAIL: ("✗", "fail", "the run breaks the rule"),
           ExitCode.VOID: ("∅", "void", "the run is void: something could not be scored")}


# ---------------------------------------------------------------------------------------------
# The run page


def run_page(documents: Sequence[RunDocument], out_dir: Path) -> str:
    """The report of one run (one document per lane) as one HTML page. Transcripts are read
    from under `out_dir` and linked relative to the run's report folder."""
    from alk.report.charts import run_charts  # plotly: only when a page is made

    if not documents:
        raise ValueError("a run page needs at least one document")
    folder = out_dir / "reports" / group_of(documents[0].run_id)
    shown = [printable(document) for document in documents]  # worker text, controls escaped
    ruling = judge(shown)  # its (lane, scenario) pairs as the page spells them
    lanes = [_lane(index, document) for index, document in enumerate(shown)]
    rows, left_out = _table_rows(shown)
    attention = _attention(shown, ruling.failing, ruling.unscored)
    views = _transcripts(rows, out_dir, folder)
    symbol, tone, sentence = _RULING.get(ruling.code, ("∅", "void", "the run is void"))
    context = {
        "title": f"alk · {group_of(documents[0].run_id)}",
        "run_id": group_of(documents[0].run_id),
        "lanes": lanes,
        "several": len(documents) > 1,
        "ruling": {"symbol": symbol, "tone": tone, "sentence": sentence,
                   "rules": list(dict.fromkeys(d.settings.rule.describe() for d in documents))},
        "attention": attention[:ATTENTION_ITEMS],
        "attention_more": max(0, len(attention) - ATTENTION_ITEMS),
        "matrix": _matrix(shown) if len(documents) > 1 else None,
        "charts": [_chart(chart) for chart in run_charts(documents)],
        "divergences": _divergences(shown),
        "tables": _tables(shown, rows, views, folder, out_dir),
        "left_out": left_out,
    }
    return _render("run.html.j2", context)


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
        "pass): result.json holds every one")


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
        "refused": (f"{gate.cause}: {gate.detail}" if gate.ok is False else None),
        "run_id": document.run_id, "status": document.status,
        "started": document.started_at, "finished": document.finished_at,
        "repeats": document.settings.repeats, "seed": document.settings.seed,
        "alk_version": document.alk_version,
        "verdicts": [(_VERDICTS.get(v, "?"), v, n) for v, n in aggregate.verdicts if n],
        "counts": counts,
        "rate": _rate(aggregate.pass_rate, aggregate.ci),
        "void": _share(aggregate.void_rate),
        "scenarios": [_scenario_line(index, i, s) for i, s in enumerate(document.scenarios)],
    }


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
            item = {"lane": document.lane.name, "id": scenario.id,
                    "anchor": _anchor(lane, index), "verdict": _verdict(scenario),
                    "rate": _rate(stats.pass_rate, stats.ci),
                    "actions": _actions(scenario)}
            if key in failing_set:
                judged = rule.judged(scenario)
                item["why"] = (f"breaks the rule: {_percent(judged)} "
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
    ordered = [sorted(group, key=lambda pair: pair[0]) for group in (breaking, flaky, void)]
    return [item for group in ordered for _, item in group]


def _actions(scenario: ScenarioResult) -> list[str]:
    """What to do about the scenario's commonest causes, from the cause catalogue."""
    causes = [cause for cause, _ in sorted(scenario.stats.causes, key=lambda c: -c[1])
              if cause != "passed"]
    return [f"{cause}: {CATALOGUE[cause].action}" for cause in causes[:3]
            if cause in CATALOGUE]  # type: ignore[index]


def _matrix(documents: Sequence[RunDocument]) -> dict[str, Any]:
    """The lane × scenario matrix: a row a scenario, a column a lane (what `alk.report.matrix`
    shows in the terminal)."""
    order = list(dict.fromkeys(s.id for d in documents for s in d.scenarios))
    rows = []
    for scenario_id in order:
        cells = []
        for lane, document in enumerate(documents):
            found = next(((i, s) for i, s in enumerate(document.scenarios)
                          if s.id == scenario_id), None)
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


def _chart(chart: Any) -> dict[str, Any]:
    payload = {"figure": chart.figure, "config": getattr(chart, "config", {}) or {}}
    return {"id": chart.id, "title": chart.title, "caption": chart.caption,
            "data": json_for_script(payload)}


def _divergences(documents: Sequence[RunDocument]) -> list[dict[str, Any]]:
    """Two repeats side by side at their first difference, for each scenario whose repeats
    took different paths."""
    from alk.divergence import diverging_pair

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
            rows = [row for row in rows if row["a"] or row["b"]]
            found.append({"lane": document.lane.name, "id": scenario.id,
                          "anchor": _anchor(lane, index),
                          "a": _pair_side(pair.a), "b": _pair_side(pair.b),
                          "shared": len(pair.shared), "earlier": start,
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
    model = repeat.model if isinstance(repeat.model, Mapping) else {}
    calls = model.get("calls")
    retries = model.get("retries")
    return {
        "repeat": repeat.repeat, "symbol": symbol, "word": word, "tone": tone,
        "cause": repeat.cause, "detail": cut(repeat.detail, DETAIL_CHARS),
        "duration": _seconds(repeat.duration_s),
        "memory": DASH if repeat.peak_rss_mb is None else f"{repeat.peak_rss_mb:.1f} MB",
        "model": (DASH if not isinstance(calls, int) else
                  f"{calls}" + (f" ({retries} retried)" if isinstance(retries, int) and retries
                                else "")),
        "claimed": (None if repeat.claimed is None else
                    cut(printable(_json(repeat.claimed)), DETAIL_CHARS)),
        "rerun": (None if repeat.passed else
                  rerun_command(document.run_id, repeat.scenario, repeat.repeat)),
        "link": _link(repeat.transcript, folder, out_dir),
        "transcript": view,
    }


def _link(transcript: str, folder: Path, out_dir: Path) -> str | None:
    """The transcript's address relative to the report folder, as a URL path."""
    if not transcript:
        return None
    relative = os.path.relpath(os.path.abspath(out_dir / transcript), os.path.abspath(folder))
    return quote(Path(relative).as_posix())


# ---------------------------------------------------------------------------------------------
# Transcripts, bounded


@dataclass(frozen=True, slots=True)
class _Excerpt:
    head: list[tuple[dict[str, Any] | None, int]]  # (event, or None when unreadable; bytes)
    tail: list[tuple[dict[str, Any] | None, int]]
    size: int  # the file's bytes
    gap: int  # bytes between head and tail, not read


def _transcripts(rows: Sequence[_Row], out_dir: Path, folder: Path) -> dict[int, dict[str, Any]]:
    """Each listed repeat's view, by its place in `rows`: failed and void repeats read first,
    while the page's budget lasts."""
    budget = PAGE_EMBED_CHARS
    views: dict[int, dict[str, Any]] = {}
    root = (out_dir / "transcripts").resolve()
    for at in sorted(range(len(rows)), key=lambda i: rows[i].rank):
        transcript = rows[at].repeat.transcript
        if budget <= 0:
            views[at] = _unread(f"not embedded: the page's {_bytes(PAGE_EMBED_CHARS)} for "
                                "transcripts went to failed and void repeats first; open the "
                                "file")
            continue
        views[at] = _view(out_dir / transcript, root, min(REPEAT_EMBED_CHARS, budget))
        budget -= views[at]["chars"]
    return views


def _unread(note: str) -> dict[str, Any]:
    return {"head": [], "tail": [], "gap": None, "note": note, "chars": len(note),
            "events": 0}


def _view(path: Path, root: Path, allowance: int) -> dict[str, Any]:
    """A repeat's transcript as the page embeds it, within `allowance` characters."""
    try:
        resolved = path.resolve()
        if not resolved.is_relative_to(root):
            return _unread("not read: the path is outside the run's transcripts folder")
        excerpt = _excerpt(resolved)
    except OSError as exc:
        return _unread(f"not readable: {exc.strerror or exc}")
    spent = 0
    head: list[dict[str, Any]] = []
    tail: list[dict[str, Any]] = []
    # The tail is served its part first: a failure's verdict is at the end.
    tail_allowance = allowance // 4 if excerpt.tail else 0
    for part, events, limit in ((tail, reversed(excerpt.tail), tail_allowance),
                                (head, iter(excerpt.head), allowance - tail_allowance)):
        used = 0
        for event, size in events:
            shown = _event(event, size)
            if used + shown["chars"] > limit and part:
                break
            part.append(shown)
            used += shown["chars"]
        spent += used
    tail.reverse()
    dropped_head = len(excerpt.head) - len(head)
    dropped_tail = len(excerpt.tail) - len(tail)
    gap = None
    if excerpt.gap or dropped_head or dropped_tail:
        first = _seq(excerpt.head[len(head)][0]) if dropped_head else None
        last = _seq(excerpt.tail[dropped_tail - 1][0]) if dropped_tail else None
        around = (f"events {first}–{last}" if first and last else
                  f"the events after {head[-1]['seq']}" if head and head[-1]["seq"] else
                  "events")
        gap = (f"{around} left out here ({_bytes(excerpt.gap)} not read"
               f"{', more not embedded' if dropped_head or dropped_tail else ''}; "
               f"the file is {_bytes(excerpt.size)}): open the file for every event")
    return {"head": head, "tail": tail, "gap": gap, "note": None,
            "chars": spent + len(gap or ""), "events": len(head) + len(tail)}


def _excerpt(path: Path) -> _Excerpt:
    """The first events (up to HEAD_EVENTS, within HEAD_READ_BYTES) and the last (up to
    TAIL_EVENTS, within TAIL_READ_BYTES), and the bytes between them, never read."""
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        head: list[tuple[dict[str, Any] | None, int]] = []
        used = 0
        while len(head) < HEAD_EVENTS and used < HEAD_READ_BYTES:
            raw = file.readline(HEAD_READ_BYTES - used)
            if not raw:
                break
            if not raw.endswith(b"\n") and file.tell() < size:  # longer than what is left
                file.seek(-len(raw), os.SEEK_CUR)
                break
            used += len(raw)
            head.append((_parse(raw), len(raw)))
        head_end = file.tell()
        if head_end >= size:
            return _Excerpt(head, [], size, 0)
        start = max(head_end, size - TAIL_READ_BYTES)
        at_line = start == head_end
        if not at_line:
            file.seek(start - 1)
            at_line = file.read(1) == b"\n"
        file.seek(start)
        block = file.read(size - start)
    lines = block.split(b"\n")
    if not at_line:
        lines = lines[1:]  # the end of a line begun before the block
    if lines and not lines[-1]:
        lines.pop()
    kept = lines[-TAIL_EVENTS:]
    gap = size - head_end - sum(len(line) + 1 for line in kept)
    return _Excerpt(head, [(_parse(line), len(line) + 1) for line in kept], size, max(0, gap))


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def _event(event: dict[str, Any] | None, size: int) -> dict[str, Any]:
    """One event as the page shows it: a line of short escaped cells, and the payload folded
    under it when it is long."""
    if event is None:
        summary = f"not a transcript event ({_bytes(size)}: a line cut or changed after the run)"
        return {"seq": "", "t": "", "source": "", "channel": "other", "name": "?",
                "type": "unreadable", "summary": summary, "harness": False, "tone": "warn",
                "payload": None, "chars": len(summary) + EVENT_MARKUP_CHARS}
    row = event_row(event)
    harness = event.get("source") == "harness"
    channel = row.channel if row.channel in _CHANNELS else "other"
    payload = None
    if _folds(event.get("payload"), row.summary):
        text = _json(event.get("payload"), indent=1)
        payload = {"text": printable(cut(text, FOLD_CHARS)), "chars": len(text),
                   "cut": len(text) > FOLD_CHARS}
    chars = len(row.summary) + EVENT_MARKUP_CHARS + (len(payload["text"]) if payload else 0)
    # alk's own channel is named once: "alk"; another channel alk observed, "alk · model".
    name = "alk" if harness and row.channel == "harness" else (
        f"alk · {row.channel}" if harness else row.channel)
    return {"seq": row.seq, "t": row.t, "source": row.source, "channel": channel,
            "name": name, "type": row.type, "summary": row.summary, "harness": harness,
            "tone": _tone(row.style) if harness else "", "payload": payload, "chars": chars}


def _folds(payload: Any, summary: str) -> bool:
    """Whether the one-line summary leaves some of the payload out: then it is folded under
    it. A summary reshapes some payloads (`name(args)`), a few characters shorter than their
    JSON: those are not folded."""
    if summary.endswith("…"):
        return True
    return len(_json(payload)) > len(summary) + FOLD_SLACK_CHARS


def _tone(style: str) -> str:
    for colour, tone in (("red", "alert"), ("yellow", "warn"), ("magenta", "void"),
                         ("green", "good")):
        if colour in style:
            return tone
    return ""


def _seq(event: dict[str, Any] | None) -> str:
    value = event.get("seq") if event else None
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else ""


# ---------------------------------------------------------------------------------------------
# The compare page


def compare_page(comparison: Comparison, out_dir: Path) -> str:
    """`alk compare A B` as one HTML page: each scenario's change with both rates and their
    intervals, the difference and its adjusted p, the rule that named the change, the notes."""
    comparison = printable(comparison)
    symbol, tone = _CHANGES[comparison.change]
    rows = [{"id": s.id, "a": _side(s.a), "b": _side(s.b),
             "difference": _difference(s.difference), "p": _p(s.p), "p_holm": _p(s.p_holm),
             "change": {"symbol": _CHANGES[s.change][0], "tone": _CHANGES[s.change][1],
                        "word": s.change.value},
             "reason": s.reason,
             "settle": s.repeats_to_settle}
            for s in comparison.scenarios]
    context = {
        "title": f"alk compare · {comparison.a.run_id} → {comparison.b.run_id}",
        "a": _run_side(comparison.a), "b": _run_side(comparison.b),
        "change": {"symbol": symbol, "tone": tone, "word": comparison.change.value},
        "counts": ", ".join(f"{n} {c.value}" for c in Change if (n := comparison.count(c))),
        "rows": rows,
        "pooled": {"a": _side(comparison.pooled_a), "b": _side(comparison.pooled_b),
                   "difference": _difference(comparison.pooled_difference),
                   "p": _p(comparison.pooled_p)},
        "rule": _compare_rule(comparison),
        "notes": list(comparison.notes),
        "only_a": list(comparison.only_a), "only_b": list(comparison.only_b),
    }
    return _render("compare.html.j2", context)


def _compare_rule(comparison: Comparison) -> list[str]:
    alpha, margin = f"{comparison.alpha:g}", f"±{comparison.margin * 100:g} points"
    return [f"regressed (▼) or improved (▲): Fisher's exact test, Holm-adjusted across the "
            f"compared scenarios, gives p < {alpha}, and the 95% Newcombe interval of B − A "
            "lies wholly below (above) 0",
            f"unchanged (=): no significant difference, no void repeat in either run, and the "
            f"interval lies within {margin}",
            "inconclusive (?): anything else: too few repeats to tell, or void repeats"]


def _run_side(side: RunSide) -> dict[str, Any]:
    return {"run_id": side.run_id, "lane": side.lane,
            "framework": f"{inline(side.framework or DASH)} "
                         f"{inline(side.version or '(no version)')}",
            "repeats": plural(side.repeats, "repeat"), "status": side.status,
            "seed": side.seed}


def _side(side: Side) -> dict[str, Any]:
    return {"rate": _percent(side.rate) if side.scored else "void",
            "tally": f"{side.passed}/{side.scored}",
            "void": (f"void {_percent(side.void_rate)} ({side.void} of {side.completed})"
                     if side.void else None)}


def _difference(estimate: Estimate | None) -> str:
    if estimate is None:
        return DASH
    return (f"{_signed(estimate.value * 100)} [{_signed(estimate.low * 100)}, "
            f"{_signed(estimate.high * 100)}]")


def _signed(points: float) -> str:
    shown = f"{points:.0f}"
    if float(shown) == 0:
        return "0"
    return shown.replace("-", "−") if points < 0 else "+" + shown


def _p(p: float | None) -> str:
    if p is None:
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.2f}" if p >= 0.1 else f"{p:.2g}"


# ---------------------------------------------------------------------------------------------
# Shared


def json_for_script(value: Any) -> str:
    """JSON safe inside a `<script type="application/json">` block: `<`, `>` and `&` are
    escapes (`\\u003c`), so that `</script>` or `<!--` in a string cannot end or bend the
    block; JSON.parse reads them back as the characters."""
    from plotly.utils import PlotlyJSONEncoder  # numpy arrays and NaN, as plotly writes them

    text = json.dumps(value, cls=PlotlyJSONEncoder, ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _render(name: str, context: dict[str, Any]) -> str:
    """The page: the template filled in, the inline scripts hashed into its policy."""
    from alk.report.charts import plotly_js

    scripts = [plotly_js(), _asset("report.js")] if context.get("charts") else []
    for script in scripts:
        if "</script" in script.lower():  # would end the element early: never embed it
            raise ValueError("an inline script holds '</script': it cannot be embedded")
    hashes = " ".join(f"'sha256-{_sha256(script)}'" for script in scripts)
    policy = ("default-src 'none'; "
              f"script-src {hashes or chr(39) + 'none' + chr(39)}; "
              # Images only from the page itself: a chart's "download as PNG" draws its SVG
              # through a blob: (or data:) image; neither reaches the network.
              "style-src 'unsafe-inline'; img-src blob: data:; base-uri 'none'; "
              "form-action 'none'")
    from markupsafe import Markup

    return _environment().get_template(name).render(
        **context, policy=policy, style=Markup(_asset("report.css")),
        scripts=[Markup(script) for script in scripts])


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


@functools.cache
def _asset(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


@functools.cache
def _environment() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


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


def _share(estimate: Estimate | None) -> str:
    if estimate is None:
        return DASH
    percent = estimate.value * 100
    return "<1%" if 0 < percent < 1 else ">99%" if 99 < percent < 100 else f"{percent:.0f}%"


def _percent(value: float | None) -> str:
    return DASH if value is None else f"{value * 100:.1f}%"


def _seconds(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f} s"


def _bytes(count: int) -> str:
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def _json(value: Any, indent: int | None = None) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str, indent=indent)
    except (RecursionError, ValueError):
        return "(not shown: nested too deeply)"
