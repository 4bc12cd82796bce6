"""The run report: a result document (`alk.result/1`) as rich renderables — the header, the
scenario table, the void and ICC notes, why each scenario did not pass, and where the files are.

Nothing here prints or creates a `Console`; the CLI owns the console and prints what these return.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from alk.causes import CATALOGUE, Cause
from alk.records import Outcome, Verdict
from alk.report.safe_text import DASH, folded, joined, new_table, one_line, printable, style_of

# Failure layers in the order a reviewer should read them; a lane_infra repeat is void, not failed.
_LAYERS = ((Outcome.FRAMEWORK_RUNTIME, "framework_runtime"), (Outcome.AGENT, "agent"),
           (Outcome.LANE_INFRA, "void"))
WHY_REPEATS = 3
SCENARIO_CHARS = 24
# A verdict that rests on fewer than half of its scenario's repeats carries this mark.
THIN_MARK = "?"
THIN_LISTED = 5
VOID_STYLE = "bold magenta"
DETAIL_CHARS = 240


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
        ids = ", ".join(str(s.get("id")) for s in scenarios) or DASH
        parts.append(Text(f"not scored: {ids}", style="magenta"))
    else:
        parts.append(_scenario_table(scenarios, doc.get("aggregate") or {}))
        notes = _void_notes(scenarios, doc.get("aggregate") or {})
        if notes is not None:
            parts.append(notes)
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
    framework = lane.get("framework") or DASH
    reported = lane.get("reported_framework") or preflight.get("framework")
    version = lane.get("reported_version") or preflight.get("version")
    text = Text.assemble(
        ("lane ", "dim"), (str(lane.get("name") or DASH), "bold"), "  ", (str(framework), "bold"),
        " ", (str(version or "(no version reported)"),
              "green" if version and preflight.get("ok", True) else "red"),
        (f" (requires {lane.get('requirement') or 'any'})", "dim"))
    if reported and reported != framework:
        text.append(f" reported as {reported}", style="red")
    # The run on a line of its own: beside the lane it would not fit 80 columns.
    repeats = (doc.get("settings") or {}).get("repeats")
    text.append(f"\nrun {doc.get('run_id') or DASH} · {repeats or '?'} repeats", style="dim")
    if (doc.get("status") or "complete") != "complete":
        text.append(f"  {str(doc['status']).upper()}", style="bold yellow")
    others = _other_identities(doc, reported, version)
    if others:
        text.append(f"\nalso reported: {others}", style="bold red")
    if lane.get("description"):
        text.append("\n" + str(lane["description"]), style="dim italic")
    return text


def _other_identities(doc: Mapping[str, Any], framework: Any, version: Any) -> str:
    """Frameworks and versions a worker reported besides the probe's (a resumed attempt may
    report another): the header must never show only the first."""
    others = [i for i in doc.get("identities") or []
              if (i.get("framework"), i.get("version")) != (framework, version)]
    return " · ".join(f"{i.get('framework')} {i.get('version')} ({i.get('repeats')} repeats)"
                      for i in others[:3]) + (f" · +{len(others) - 3} more"
                                              if len(others) > 3 else "")


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
        body.append("\n" + one_line(preflight["detail"], DETAIL_CHARS))
    info = CATALOGUE.get(cause)
    if info is not None:
        body.append(f"\nwhat to do: {info.action}", style="italic")
    # The same panel explains every run that was void before its repeats: a failed version
    # check, a missing variable, an isolation level the machine cannot give.
    title = Text(f"Nothing ran: {cause} (the run is void)", style="bold red")
    return Panel(body, title=title, title_align="left", border_style="red", expand=False)


def _scenario_table(scenarios: Sequence[Mapping[str, Any]], aggregate: Mapping) -> Table:
    # Fits 80 columns, the width of a pipe or a CI log: counts sit under the verdict, void
    # repeats under the rate, and the failure column comes last and wraps. It is the only column
    # that may wrap: rich shrinks every wrappable column to fit, and one with a minimum width
    # grows back past the terminal's edge, where the console cuts it.
    table = new_table(("Scenario", {"style": "bold", "no_wrap": True}),
                   ("Verdict", {"no_wrap": True}),
                   ("Pass rate [95% CI]", {"no_wrap": True}),
                   ("pass^n", {"justify": "right", "no_wrap": True}),
                   ("p50", {"justify": "right", "no_wrap": True}),
                   ("Failures", {"ratio": 1, "overflow": "fold"}))
    for s in scenarios:
        table.add_row(Text(folded(str(s.get("id")), SCENARIO_CHARS)), _verdict(s),
                      _rate_cell(s), _pass_hat(s), _seconds(s.get("durations") or {}),
                      _failures(s.get("layers") or {}, s.get("causes") or {}))
    if aggregate:
        verdicts = [(f"{n} {v}", style_of(v)) for v, n in (aggregate.get("verdicts") or {}).items()
                    if n]
        # The pooled lane row is the table's footer, under a rule, so it never reads as a scenario.
        table.show_footer = True
        footers = (Text("lane (pooled)"), joined([*verdicts, (_passed_of_scored(aggregate), "")]),
                   _rate_cell(aggregate), _pass_hat(aggregate), Text(""),
                   _failures(aggregate.get("layers") or {}, aggregate.get("causes") or {}))
        for column, footer in zip(table.columns, footers):
            column.footer = footer
    return table


def _verdict(stats: Mapping[str, Any]) -> Text:
    """The verdict, marked when it rests on too few repeats, over passed/scored."""
    verdict = stats.get("verdict")
    text = Text(str(verdict or DASH), style=f"bold {style_of(verdict)}")
    if _thin(stats):
        text.append(THIN_MARK, style=VOID_STYLE)
    return text.append("\n" + _passed_of_scored(stats))


def _thin(stats: Mapping[str, Any]) -> bool:
    """Does a verdict rest on fewer than half of the repeats asked for (void ones, or ones an
    interrupted run never started)? Nothing scored is a void verdict, which says so itself."""
    counts = stats.get("counts") or {}
    scored = _number(counts.get("scored"))
    return 0 < scored and 2 * scored < _number(counts.get("requested"))


def _void_notes(scenarios: Sequence[Mapping[str, Any]], aggregate: Mapping) -> Table | None:
    """Under the table, whenever a repeat was void: how many were, and which verdicts rest on
    fewer than half of their repeats. A rate over the scored few must not pass for the run's."""
    notes = [*_void_note(aggregate), *_thin_note(scenarios)]
    if not notes:
        return None
    # A grid, so that a wrapped note hangs under its own text, clear of the label.
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, style=VOID_STYLE)
    grid.add_column(ratio=1, style=VOID_STYLE)
    for label, text in notes:
        grid.add_row(Text(label), Text(text))
    return grid


def _void_note(aggregate: Mapping[str, Any]) -> list[tuple[str, str]]:
    counts = aggregate.get("counts") or {}
    void, ran, scored = (_number(counts.get(key)) for key in ("void", "completed", "scored"))
    if not void:
        return []
    # Worded to fit 80 columns with up to a thousand repeats.
    rest = f"the rates above cover the other {scored}" if scored else "nothing was scored"
    rows = [("void:", f"{void} of {ran} repeats ({_percent(void, ran)}) not scored {DASH} {rest}")]
    cause = _commonest_void_cause(aggregate.get("causes") or {})
    if cause:
        rows.append(("", f"commonest cause: {cause[0]} ({cause[1]} of {void})"))
    return rows


def _thin_note(scenarios: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    thin = [s for s in scenarios if _thin(s)]
    if not thin:
        return []
    listed = ", ".join(f"{s.get('id')} ({_scored_of_requested(s)} scored)"
                       for s in thin[:THIN_LISTED])
    more = f", and {len(thin) - THIN_LISTED} more" if len(thin) > THIN_LISTED else ""
    return [(THIN_MARK, f"marks a verdict on fewer than half of its repeats: {listed}{more}")]


def _scored_of_requested(stats: Mapping[str, Any]) -> str:
    counts = stats.get("counts") or {}
    return f"{_number(counts.get('scored'))} of {_number(counts.get('requested'))}"


def _commonest_void_cause(causes: Mapping[str, Any]) -> tuple[str, int] | None:
    void = [(_number(n), str(c)) for c, n in causes.items()
            if c in CATALOGUE and CATALOGUE[Cause(c)].outcome == Outcome.LANE_INFRA
            and _number(n)]
    if not void:
        return None
    n, cause = min(void, key=lambda nc: (-nc[0], nc[1]))
    return cause, n


def _percent(part: int, whole: int) -> str:
    # Never "0%" for some, nor "100%" for not all: the reader must see that some were void.
    share = 100 * part / whole if whole else 0
    return ("<1%" if 0 < share < 1 else ">99%" if 99 < share < 100 else f"{share:.0f}%")


def _icc_line(icc: Mapping[str, Any]) -> Text:
    """The ICC says whether repeats of one scenario fail together, which widens the pooled CI."""
    text = Text("ICC ", style="dim")
    if icc.get("value") is None:
        text.append(DASH)
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
    # A private /tmp and /dev/shm are memory too: what the worker held there counts.
    tmpfs = [(r["peak_tmpfs_mb"], sid) for sid, r in repeats
             if isinstance(r.get("peak_tmpfs_mb"), (int, float)) and r["peak_tmpfs_mb"] >= 0.1]
    cpu = [(r["cpu_s"], sid) for sid, r in repeats if r.get("cpu_s") is not None]
    if not rss and not cpu:
        return None
    text = Text("workers      ", style="dim")
    if rss:
        top = max(rss)
        text.append(f"peak RSS up to {top[0]:.1f} MB ({top[1]})")
    if tmpfs:
        top = max(tmpfs)
        text.append(f" · /tmp and /dev/shm up to {top[0]:.1f} MB ({top[1]})")
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
                          (str(verdict), style_of(verdict)),
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
        text.append(f"{outcome}/{cause}", style=style_of(outcome))
        if detail:
            text.append(f" {DASH} {one_line(detail, DETAIL_CHARS)}")
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
    text = Text.assemble(("\nreport       ", "dim"), str(paths.get("result") or DASH),
                         ("\ntranscripts  ", "dim"), str(paths.get("transcripts") or DASH))
    if paths.get("workspaces"):
        text.append_text(Text.assemble(("\nworkspaces   ", "dim"), str(paths["workspaces"])))
    return text


# ---------------------------------------------------------------------------------------------
# Cells


def _rate(stats: Mapping[str, Any]) -> Text:
    rate, ci = stats.get("pass_rate"), stats.get("ci")
    text = Text(DASH if rate is None else f"{rate * 100:.1f}%")
    if rate is not None and ci and len(ci) == 2 and None not in ci:
        text.append(f" [{ci[0] * 100:.1f}–{ci[1] * 100:.1f}]")
    return text


def _rate_cell(stats: Mapping[str, Any]) -> Text:
    """The rate, and under it how many repeats were void: the rate covers only the others."""
    text = _rate(stats)
    counts = stats.get("counts") or {}
    void = _number(counts.get("void"))
    if void:
        text.append(f"\n{void} of {_number(counts.get('completed'))} void", style=VOID_STYLE)
    return text


def _passed_of_scored(stats: Mapping[str, Any]) -> str:
    """A rate means little without its n."""
    counts = stats.get("counts") or {}
    return f"{_number(counts.get('passed'))}/{_number(counts.get('scored'))}"


def _number(value: Any) -> int:
    """A count from a document, 0 when it is missing or not a whole number."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _pass_hat(stats: Mapping[str, Any]) -> Text:
    """pass^k at the largest k (k = n): the chance that n repeats in a row all pass."""
    ks = [(int(k), v) for k, v in (stats.get("pass_hat_k") or {}).items() if str(k).isdigit()]
    if not ks or stats.get("pass_rate") is None:  # nothing scored: no rate to raise to k
        return Text(DASH, style="dim")
    k, value = max(ks)
    return Text(DASH if value is None else "<0.01" if 0 < value < 0.005 else f"{value:.2f}")


def _failures(layers: Mapping[str, int], causes: Mapping[str, int]) -> RenderableType:
    """Each failing layer with its count, then its causes (most frequent first)."""
    lines = []
    for outcome, label in _LAYERS:
        if not layers.get(outcome):
            continue
        mine = sorted(((n, c) for c, n in causes.items()
                       if c in CATALOGUE and CATALOGUE[Cause(c)].outcome == outcome and n),
                      key=lambda nc: (-nc[0], nc[1]))
        lines.append((f"{label} ", str(layers[outcome]), style_of(outcome)))
        lines.extend((f"  {c}", f"×{n}", "") for n, c in mine[:3])
        if len(mine) > 3:
            lines.append(("  +", f"{len(mine) - 3} more", "dim"))
    return _CountedLines(lines) if lines else Text(DASH, style="dim")


class _CountedLines:
    """Lines that each end in a count, for a narrow column: a line too long breaks after an
    underscore where it can, keeps its indent, and never breaks inside its count, which would
    then read as two other numbers."""

    def __init__(self, lines: Sequence[tuple[str, str, str]]) -> None:
        self.lines = lines  # (text, count, style)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max(len(text + count) for text, count, _ in self.lines)
        narrowest = max(len(text) - len(text.lstrip()) + len(count)
                        for text, count, _ in self.lines)
        return Measurement(narrowest, widest).with_maximum(options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for text, count, style in self.lines:
            for piece in _fold_counted(text, count, max(1, options.max_width)):
                yield Text(piece, style=style, no_wrap=True, overflow="crop")


def _fold_counted(text: str, count: str, width: int) -> list[str]:
    indent = text[: len(text) - len(text.lstrip())]
    line, count_at, pieces = text + count, len(text), []
    while len(line) > width:
        cut = min(line.rfind("_", len(indent), width) + 1 or width, count_at)
        if cut <= len(indent):  # no room but for the count: the line stays whole
            break
        pieces.append(line[:cut])
        line, count_at = indent + line[cut:], count_at - cut + len(indent)
    return [*pieces, line]


def _seconds(durations: Mapping[str, Any]) -> Text:
    p50 = durations.get("p50")
    return Text(DASH, style="dim") if p50 is None else Text(f"{p50:.2f} s")
