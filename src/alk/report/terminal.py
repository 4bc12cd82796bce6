"""Rich renderables for the terminal, built from plain data: result documents, transcripts, lanes.

Nothing here prints or creates a `Console`; the CLI owns the console and prints what these return.
Every value from a document is wrapped in `Text`, never passed as a string, because rich would
parse a string as markup and a worker's output may well contain `[brackets]`.
"""

from __future__ import annotations

import json
from typing import Any, Collection, Iterable, Mapping, Sequence

from rich import box
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from alk.causes import CATALOGUE, Cause
from alk.records import Lane, Outcome, Verdict

# Verdicts and outcomes share one palette: green passes, red crashes, yellow doubts, magenta void.
STYLES = {
    Verdict.PASS: "green", Verdict.FAIL: "red", Verdict.FLAKY: "yellow", Verdict.VOID: "magenta",
    Outcome.FRAMEWORK_RUNTIME: "red", Outcome.AGENT: "yellow", Outcome.LANE_INFRA: "magenta",
}
# Failure layers in the order a reviewer should read them; a lane_infra repeat is void, not failed.
_LAYERS = ((Outcome.FRAMEWORK_RUNTIME, "framework_runtime"), (Outcome.AGENT, "agent"),
           (Outcome.LANE_INFRA, "void"))
WHY_REPEATS = 3
PAYLOAD_CHARS = 160
DETAIL_CHARS = 240
_DASH = "—"


# Control characters a worker may send (ESC starts terminal sequences that clear the screen,
# retitle the window, or fake colours): shown as escapes, never sent to the terminal.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), *range(0x7f, 0xa0))
             if code not in (0x09, 0x0a)}


def printable(value: Any) -> Any:
    """The value with every control character in its strings (keys too) made visible."""
    if isinstance(value, str):
        return value.translate(_CONTROLS)
    if isinstance(value, Mapping):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable(item) for item in value]
    return value


# ---------------------------------------------------------------------------------------------
# Run report


def run_report(doc: Mapping[str, Any]) -> RenderableType:
    """A result document (`alk.result/1`) as header, scenario table, why-sections and paths.

    When the preflight failed nothing was scored, so a panel explaining the failure replaces the
    table: an all-void table would hide the one fact that matters.
    """
    doc = printable(doc)
    parts: list[RenderableType] = [_header(doc)]
    preflight, scenarios = doc.get("preflight") or {}, doc.get("scenarios") or []
    # ok is None when alk was interrupted before the probe answered: not a failed preflight.
    if preflight.get("ok") is False:
        parts.append(_preflight_panel(doc))
        ids = ", ".join(str(s.get("id")) for s in scenarios) or _DASH
        parts.append(Text(f"not scored: {ids}", style="magenta"))
    else:
        parts.append(_scenario_table(scenarios, doc.get("aggregate") or {}))
        parts.append(_icc_line((doc.get("aggregate") or {}).get("icc") or {}))
        parts.append(Text("n/m under a verdict: passed/scored (void repeats are never scored) · "
                          "pass^n: chance that n repeats in a row all pass", style="dim"))
        resources = _resources(scenarios)
        if resources is not None:
            parts.append(resources)
        parts.extend(_paths_line(s) for s in scenarios
                     if ((s.get("trajectories") or {}).get("distinct") or 0) > 1)
        parts.extend(_event_paths_line(s) for s in scenarios
                     if ((s.get("paths") or {}).get("distinct") or 0) > 1)
        # A pass with void repeats still needs its why: those repeats were not scored.
        parts.extend(_why(s) for s in scenarios if s.get("verdict") != Verdict.PASS
                     or (s.get("counts") or {}).get("void"))
    parts.append(_paths(doc.get("paths") or {}))
    containment = _containment(scenarios)
    if containment is not None:
        parts.append(containment)
    return Group(*parts)


def _header(doc: Mapping[str, Any]) -> Text:
    lane, preflight = doc.get("lane") or {}, doc.get("preflight") or {}
    framework = lane.get("framework") or _DASH
    reported = lane.get("reported_framework") or preflight.get("framework")
    version = lane.get("reported_version") or preflight.get("version")
    text = Text.assemble(
        ("lane ", "dim"), (str(lane.get("name") or _DASH), "bold"), "  ", (str(framework), "bold"),
        " ", (str(version or "(no version reported)"),
              "green" if version and preflight.get("ok", True) else "red"),
        (f" (requires {lane.get('requirement') or 'any'})", "dim"))
    if reported and reported != framework:
        text.append(f" reported as {reported}", style="red")
    repeats = (doc.get("settings") or {}).get("repeats")
    text.append(f"  run {doc.get('run_id') or _DASH}  {repeats or '?'} repeats", style="dim")
    if (doc.get("status") or "complete") != "complete":
        text.append(f"  {str(doc['status']).upper()}", style="bold yellow")
    if lane.get("description"):
        text.append("\n" + str(lane["description"]), style="dim italic")
    return text


def _preflight_panel(doc: Mapping[str, Any]) -> Panel:
    lane, preflight = doc.get("lane") or {}, doc.get("preflight") or {}
    cause = preflight.get("cause") or "preflight_failed"
    framework = preflight.get("framework") or lane.get("reported_framework")
    version = preflight.get("version") or lane.get("reported_version") or "(no version)"
    reported = f"{framework} {version}" if framework else "nothing (no framework_ready)"
    body = Text.assemble(
        ("worker reported  ", "dim"), (reported, "bold red"),
        ("\nlane requires    ", "dim"),
        (f"{lane.get('framework') or '?'} {lane.get('requirement') or 'any'}", "bold"))
    if preflight.get("detail"):
        body.append("\n" + _one_line(preflight["detail"], DETAIL_CHARS))
    info = CATALOGUE.get(cause)
    if info is not None:
        body.append(f"\nwhat to do: {info.action}", style="italic")
    # The same panel explains every run that was void before its repeats: a failed version
    # check, a missing variable, an isolation level the machine cannot give.
    title = Text(f"Nothing ran: {cause} (the run is void)", style="bold red")
    return Panel(body, title=title, title_align="left", border_style="red", expand=False)


def _scenario_table(scenarios: Sequence[Mapping[str, Any]], aggregate: Mapping) -> Table:
    # Fits 80 columns, the width of a pipe or a CI log: counts sit under the verdict, and the
    # failure column comes last and wraps, so that no other column is ever cut.
    table = _table(("Scenario", {"style": "bold", "overflow": "fold", "min_width": 18,
                                 "max_width": 24}),
                   ("Verdict", {"no_wrap": True}),
                   ("Pass rate [95% CI]", {"no_wrap": True}),
                   ("pass^n", {"justify": "right", "no_wrap": True}),
                   ("p50", {"justify": "right", "no_wrap": True}),
                   ("Failures by layer", {"ratio": 1, "min_width": 12, "overflow": "fold"}))
    for s in scenarios:
        table.add_row(Text(str(s.get("id"))), _verdict(s), _rate(s), _pass_hat(s),
                      _seconds(s.get("durations") or {}),
                      _failures(s.get("layers") or {}, s.get("causes") or {}))
    if aggregate:
        verdicts = [(f"{n} {v}", _style(v)) for v, n in (aggregate.get("verdicts") or {}).items()
                    if n]
        # The pooled lane row is the table's footer, under a rule, so it never reads as a scenario.
        table.show_footer = True
        footers = (Text("lane (pooled)"), _joined([*verdicts, *_counts(aggregate)]),
                   _rate(aggregate), _pass_hat(aggregate), Text(""),
                   _failures(aggregate.get("layers") or {}, aggregate.get("causes") or {}))
        for column, footer in zip(table.columns, footers):
            column.footer = footer
    return table


def _verdict(stats: Mapping[str, Any]) -> Text:
    verdict = stats.get("verdict")
    return _joined([(str(verdict or _DASH), f"bold {_style(verdict)}"), *_counts(stats)])


def _icc_line(icc: Mapping[str, Any]) -> Text:
    """The ICC says whether repeats of one scenario fail together, which widens the pooled CI."""
    text = Text("ICC ", style="dim")
    if icc.get("value") is None:
        text.append(_DASH)
        return text.append(f" ({icc['reason']})", style="dim") if icc.get("reason") else text
    text.append(f"{icc['value']:.2f}", style="bold")
    extras = [shape.format(icc[key]) for key, shape in (
        ("design_effect", "design effect {:.2f}"), ("effective_n", "effective n {:.1f}"),
        ("groups", "{} scenarios"), ("observations", "{} scored repeats"),
    ) if isinstance(icc.get(key), int | float)]
    return text.append("  " + " · ".join(extras), style="dim") if extras else text


def _resources(scenarios: Sequence[Mapping[str, Any]]) -> Text | None:
    """The workers' footprint: the largest peak RSS and CPU time of any repeat, and where."""
    repeats = [(s.get("id"), r) for s in scenarios for r in s.get("repeats") or []]
    rss = [(r["peak_rss_mb"], sid) for sid, r in repeats if r.get("peak_rss_mb") is not None]
    cpu = [(r["cpu_s"], sid) for sid, r in repeats if r.get("cpu_s") is not None]
    if not rss and not cpu:
        return None
    text = Text("workers      ", style="dim")
    if rss:
        top = max(rss)
        text.append(f"peak RSS up to {top[0]:.1f} MB ({top[1]})")
    if cpu:
        top = max(cpu)
        text.append(f"{' · ' if rss else ''}CPU up to {top[0]:.2f} s a repeat ({top[1]})")
    return text


def _event_paths_line(scenario: Mapping[str, Any]) -> Text:
    """Repeats whose normalized event paths differ; with a scripted model, that is the
    framework's own nondeterminism."""
    paths = scenario["paths"]
    text = Text.assemble((str(scenario.get("id")), "bold"),
                         f": {paths['distinct']} distinct event paths")
    difference = paths.get("first_difference")
    if difference:
        text.append(f", first differing at event {difference['event']} "
                    f"({' vs '.join(difference['events'])})")
    if scenario.get("scripted"):
        text.append(" — the model is scripted: this nondeterminism is the framework's",
                    style="bold yellow")
    return text


def _paths_line(scenario: Mapping[str, Any]) -> Text:
    """Repeats that took different tool paths: a finding even when they all passed."""
    trajectories = scenario["trajectories"]
    text = Text.assemble((str(scenario.get("id")), "bold"),
                         f": {trajectories['distinct']} distinct tool paths")
    if trajectories.get("first_divergence"):
        text.append(f", first diverging at step {trajectories['first_divergence']}")
    if trajectories.get("entropy_bits") is not None:
        text.append(f" (entropy {trajectories['entropy_bits']:.2f} bits)", style="dim")
    return text


def _why(scenario: Mapping[str, Any]) -> RenderableType:
    """Why a scenario is not `pass`, from the repeats alone, so nobody has to open a file first.

    Repeats that failed the same way are shown once: twenty void repeats with one missing
    variable are one reason, not twenty.
    """
    verdict, repeats = scenario.get("verdict"), scenario.get("repeats") or []
    bad = [r for r in repeats if r.get("outcome") != Outcome.PASS]
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in sorted(bad, key=lambda r: r.get("repeat") or 0):
        groups.setdefault((r.get("outcome"), r.get("cause"), r.get("detail") or ""), []).append(r)
    title = Text.assemble("\n", (f"why {scenario.get('id')} is ", "bold"),
                          (str(verdict), _style(verdict)),
                          (f": {len(bad)} of {len(repeats)} repeats did not pass", "dim"))
    text = Text() if repeats else Text.assemble(("no repeat ran", "dim"))
    # Scored failures explain a verdict better than void repeats; then the commonest mode first.
    shown = sorted(groups.items(), key=lambda g: (g[0][0] == Outcome.LANE_INFRA, -len(g[1]),
                                                  g[1][0].get("repeat") or 0))[:WHY_REPEATS]
    for (outcome, cause, detail), members in shown:
        numbers = [str(r.get("repeat")) for r in members]
        label = f"repeat {numbers[0]}" if len(numbers) == 1 else (
            f"repeats {', '.join(numbers[:5])}" + (f" … ({len(numbers)} in all)"
                                                   if len(numbers) > 5 else ""))
        text.append(f"\n{label}: " if text else f"{label}: ")
        text.append(f"{outcome}/{cause}", style=_style(outcome))
        if detail:
            text.append(f" {_DASH} {_one_line(detail, DETAIL_CHARS)}")
        if members[0].get("transcript"):
            text.append(f"\n  {members[0]['transcript']}", style="dim")
    rest = len(bad) - sum(len(members) for _, members in shown)
    if rest:
        text.append(f"\n… and {rest} more", style="dim")
    for cause in dict.fromkeys(cause for (_, cause, _), _ in shown):
        if cause in CATALOGUE:
            text.append(f"\n{cause}: {CATALOGUE[cause].action}", style="italic dim")
    # Padding rather than leading spaces, so that a wrapped detail stays indented too.
    return Group(title, Padding(text, (0, 0, 0, 2), expand=False))


def _containment(scenarios: Sequence[Mapping[str, Any]]) -> Text | None:
    """How the repeats' workers were contained: a reviewer weighs a verdict by it."""
    used: dict[str, int] = {}
    for scenario in scenarios:
        for repeat in scenario.get("repeats") or []:
            if repeat.get("containment"):
                level = (f"{repeat['containment']}, network {repeat.get('network') or '?'}, "
                         f"filesystem {repeat.get('filesystem') or '?'}")
                used[level] = used.get(level, 0) + 1
    if not used:
        return None
    return Text.assemble(("isolation    ", "dim"),
                         "; ".join(f"{name} ({count} repeats)" for name, count in used.items()))


def _paths(paths: Mapping[str, Any]) -> Text:
    text = Text.assemble(("\nreport       ", "dim"), str(paths.get("result") or _DASH),
                         ("\ntranscripts  ", "dim"), str(paths.get("transcripts") or _DASH))
    if paths.get("workspaces"):
        text.append_text(Text.assemble(("\nworkspaces   ", "dim"), str(paths["workspaces"])))
    return text


# ---------------------------------------------------------------------------------------------
# Cells


def _table(*columns: tuple[str, Mapping[str, Any]], leading: int = 0) -> Table:
    table = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, collapse_padding=True,
                  leading=leading)
    for header, options in columns:
        table.add_column(header, **options)
    return table


def _style(value: Any) -> str:
    return STYLES.get(str(value), "")


def _rate(stats: Mapping[str, Any]) -> Text:
    rate, ci = stats.get("pass_rate"), stats.get("ci")
    text = Text(_DASH if rate is None else f"{rate * 100:.1f}%")
    if rate is not None and ci and len(ci) == 2 and None not in ci:
        text.append(f" [{ci[0] * 100:.1f}–{ci[1] * 100:.1f}]")
    return text


def _counts(stats: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Passed of scored, and void apart: a rate means little without its n."""
    counts = stats.get("counts") or {}
    parts = [(f"{counts.get('passed', 0)}/{counts.get('scored', 0)}", "")]
    if counts.get("void"):
        parts.append((f"+{counts['void']} void", "magenta"))
    return parts


def _pass_hat(stats: Mapping[str, Any]) -> Text:
    """pass^k at the largest k (k = n): the chance that n repeats in a row all pass."""
    ks = [(int(k), v) for k, v in (stats.get("pass_hat_k") or {}).items() if str(k).isdigit()]
    if not ks or stats.get("pass_rate") is None:  # nothing scored: no rate to raise to k
        return Text(_DASH, style="dim")
    k, value = max(ks)
    return Text(_DASH if value is None else "<0.01" if 0 < value < 0.005 else f"{value:.2f}")


def _failures(layers: Mapping[str, int], causes: Mapping[str, int]) -> Text:
    """Each failing layer with its count, then its causes (most frequent first)."""
    parts = []
    for outcome, label in _LAYERS:
        if not layers.get(outcome):
            continue
        mine = sorted(((n, c) for c, n in causes.items()
                       if c in CATALOGUE and CATALOGUE[Cause(c)].outcome == outcome and n),
                      key=lambda nc: (-nc[0], nc[1]))
        parts.append((f"{label} {layers[outcome]}", _style(outcome)))
        parts.extend((f"  {c}×{n}", "") for n, c in mine[:3])
        if len(mine) > 3:
            parts.append((f"  +{len(mine) - 3} more", "dim"))
    return _joined(parts)


def _seconds(durations: Mapping[str, Any]) -> Text:
    p50 = durations.get("p50")
    return Text(_DASH, style="dim") if p50 is None else Text(f"{p50:.2f} s")


def _joined(parts: Iterable[tuple[str, str]], sep: str = "\n") -> Text:
    text = Text()
    for label, style in parts:
        if text:
            text.append(sep)
        text.append(label, style=style)
    return text or Text(_DASH, style="dim")


def _one_line(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else _json(value)
    text = " ⏎ ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# ---------------------------------------------------------------------------------------------
# Transcripts


def transcript_view(events: Sequence[Mapping[str, Any]],
                    channels: Collection[str] | None = None) -> RenderableType:
    """Transcript events as one table row each; only the given channels when `channels` is set."""
    shown = [printable(e) for e in events if channels is None or e.get("channel") in channels]
    table = _table(("seq", {"justify": "right"}), ("t (s)", {"justify": "right"}), ("source", {}),
                   ("channel", {}), ("type", {}), ("payload", {"overflow": "fold", "ratio": 1}))
    for event in shown:
        t = event.get("t")
        table.add_row(
            Text(str(event.get("seq", ""))),
            Text(f"{t:.3f}" if isinstance(t, int | float) else ""),
            Text(str(event.get("source", ""))), Text(str(event.get("channel", ""))),
            Text(str(event.get("type", ""))), Text(_summary(event)), style=_event_style(event),
        )
    if channels is not None:
        table.caption = f"{len(shown)} of {len(events)} events on {', '.join(sorted(channels))}"
    return table


def _event_style(event: Mapping[str, Any]) -> str:
    """Worker rows plain, harness rows cyan, so the harness's own voice stands apart."""
    payload, kind = event.get("payload") or {}, event.get("type")
    if kind == "violation" or (kind == "check" and not payload.get("ok")):
        return "bold red"
    if event.get("source") != "harness":
        return ""
    if kind == "attribution":
        return "bold " + (_style(payload.get("outcome")) or "green")
    return "yellow" if kind in ("abort", "timeout", "truncated") else "cyan"


def _summary(event: Mapping[str, Any]) -> str:
    """A one-line digest of a payload; the kinds a reviewer reads most get a bespoke shape."""
    payload, kind, channel = event.get("payload"), event.get("type"), event.get("channel")
    if not isinstance(payload, Mapping):
        line = payload if payload is not None else ""
    elif channel == "tool" and kind == "call":
        args = payload.get("args")
        inner = (", ".join(f"{k}={_json(v)}" for k, v in args.items())
                 if isinstance(args, Mapping) else _json(args or ""))
        line = f"{payload.get('name')}({inner})"
    elif channel == "tool" and kind == "result":
        if payload.get("ok"):
            output = f" → {_json(payload['output'])}" if "output" in payload else ""
            line = f"{payload.get('name')} ok{output}"
        else:
            line = f"{payload.get('name')} error: {payload.get('error', '')}"
    elif kind == "result" and "stop_reason" in payload:
        line = (f"stop_reason={payload.get('stop_reason')} "
                f"output={_one_line(payload.get('output', ''), 100)!r}")
    elif kind == "check":
        # Cut each side alone so that a long expected value cannot hide the actual one.
        line = (f"{'✓' if payload.get('ok') else '✗'} {payload.get('name')} "
                f"expected {_one_line(_json(payload.get('expected')), 70)} "
                f"actual {_one_line(_json(payload.get('actual')), 70)}")
    elif kind == "attribution":
        line = (f"{payload.get('outcome')}/{payload.get('cause')} {_DASH} "
                f"{payload.get('detail', '')}")
    elif kind == "violation" and "kind" in payload:
        line = f"{payload['kind']} (line {payload.get('line')}): {payload.get('detail', '')}"
    elif kind == "line" and "text" in payload:
        line = payload["text"]
    else:
        line = payload
    return _one_line(line, PAYLOAD_CHARS)


# ---------------------------------------------------------------------------------------------
# Lanes and causes


def lanes_table(lanes: Sequence[Lane], errors: Sequence[tuple[str, str]] = ()) -> RenderableType:
    """The lanes found, then one red row per lane file that failed to load, with its message."""
    table = _table(("Lane", {"style": "bold", "no_wrap": True}), ("Framework", {}),
                   ("Requirement", {}),
                   ("Scenarios", {"ratio": 1}), ("Timeout", {"justify": "right"}),
                   ("Repeats", {"justify": "right"}), ("Path", {"overflow": "fold"}))
    for lane in lanes:
        table.add_row(
            Text(lane.name), Text(lane.framework), Text(lane.requirement or "any"),
            Text(", ".join(s.id for s in lane.scenarios)), Text(f"{lane.timeout_s:g} s"),
            Text(str(lane.repeats)), Text(str(lane.path)),
        )
    if lanes and errors:
        table.add_section()
    for path, message in errors:
        # The message goes in the widest column; the path column says which file to fix.
        table.add_row(Text("✗ not loaded"), Text(""), Text(""), Text(_one_line(message, 400)),
                      Text(""), Text(""), Text(str(path)), style="red")
    if not lanes and not errors:
        table.add_row(Text("no lanes found", style="dim"))
    return table


def causes_table() -> RenderableType:
    """The cause vocabulary, grouped by outcome as `docs/causes.md` lists it."""
    table = _table(("Cause", {"style": "bold", "no_wrap": True}), ("Outcome", {"no_wrap": True}),
                   ("Meaning", {"ratio": 3}), ("What to do", {"ratio": 2}))
    previous = None
    for cause, info in CATALOGUE.items():
        if previous is not None and info.outcome != previous:
            table.add_section()
        previous = info.outcome
        table.add_row(Text(cause.value), Text(info.outcome.value, style=_style(info.outcome)),
                      Text(info.meaning), Text(info.action))
    return table


_LEVEL_MARKS = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "bold red")}


def findings_view(findings: Sequence[Any]) -> RenderableType:
    """`alk check-worker`'s findings: a mark, what was seen, and what to change."""
    lines = []
    for finding in findings:
        mark, style = _LEVEL_MARKS[str(finding.level)]
        line = Text.assemble((f"{mark} ", style), (printable(finding.title), style))
        if finding.detail:
            line.append(f"\n    {_one_line(printable(finding.detail), 300)}")
        if finding.hint:
            line.append(f"\n    → {finding.hint}", style="dim")
        lines.append(line)
    failed = sum(1 for f in findings if not f.ok)
    verdict = (Text("the worker speaks protocol v1", style="bold green") if not failed
               else Text(f"{failed} problem(s) to fix", style="bold red"))
    return Group(*lines, Text(), verdict)


def doctor_view(facts: Sequence[tuple[str, str, str]]) -> RenderableType:
    """`alk doctor`: what this machine gives a worker, and why."""
    table = _table(("", {"style": "bold", "no_wrap": True}), ("", {"no_wrap": True}),
                   ("", {"style": "dim"}))
    table.show_header = False
    for name, value, why in facts:
        table.add_row(Text(name), Text(value), Text(why))
    return table


def repeat_facts(entry: Mapping[str, Any]) -> Text:
    """One repeat's process facts, for `alk show`."""
    status = (f"signal {entry['signal']}" if entry.get("signal") is not None
              else f"exit {entry.get('exit_code')}")
    facts = [status, f"{entry.get('duration_s') or 0:.2f} s"]
    if entry.get("peak_rss_mb") is not None:
        facts.append(f"peak RSS {entry['peak_rss_mb']:.1f} MB")
    if entry.get("cpu_s") is not None:
        facts.append(f"CPU {entry['cpu_s']:.2f} s")
    levels = [f"{name} {entry[name]}" for name in ("containment", "network", "filesystem")
              if entry.get(name)]
    return Text(" · ".join(facts + levels), style="dim")
