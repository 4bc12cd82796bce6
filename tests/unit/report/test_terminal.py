"""The terminal renderables, printed to an in-memory console and read back as plain text."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timezone
from math import comb
from pathlib import Path
from typing import Any

import pytest
from rich.console import Group, RenderableType
from scipy.stats import f as f_dist
from scipy.stats import t as t_dist
from statsmodels.stats.proportion import proportion_confint

from alk.conformance import Finding, Level
from alk.plan import build_plan
from alk.records import (
    Attribution,
    Execution,
    Fault,
    Lane,
    Outcome,
    Preflight,
    RepeatResult,
    Scenario,
)
from alk.report.listings import (
    cause_suggestion,
    cause_view,
    causes_view,
    doctor_view,
    findings_view,
    lanes_view,
)
from alk.report.safe_text import printable
from alk.report.terminal.run import run_report
from alk.report.meaning import MIN_REPEATS, MIN_SCENARIOS
from alk.report.transcript_view import (
    event_row,
    page_summary,
    repeat_facts,
    repeat_header,
    transcript_events,
    transcript_hash,
)
from alk.result.document import CutShort, RunDocument, build_document
from alk.transcript.reader import TranscriptPage

from helpers.views import RUN, render, repeat

STARTED = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)


def full_report(doc: RunDocument, *args: Any, **kwargs: Any) -> RenderableType:
    """The report with its statistics block (`--stats`), which most tests here read."""
    return run_report(doc, *args, stats=True, **kwargs)
PROBE = Preflight(True, "pydantic-ai", "1.0.3")


def built(repeats: dict[str, list[RepeatResult]], *, status: str = "complete",
          probe: Preflight = PROBE, void: Attribution | None = None,
          description: str = "A scripted order-lookup agent.",
          faulted: tuple[str, ...] = ()) -> RunDocument:
    """The document alk's own builder makes of these repeats (20 asked of each scenario);
    the lane injects a fault into the `faulted` scenarios."""
    lane = Lane(
        name="demo", description=description, framework="pydantic-ai", requirement=">=1.0,<2",
        command=("{python}", "worker.py"), required_env=(), timeout_s=30.0, repeats=20,
        scenarios=tuple(Scenario(sid, "t", faults=(Fault("tool"),) if sid in faulted else ())
                        for sid in repeats), path=Path("lanes/demo.toml"),
        root=Path("."), transcript_cap_bytes=1 << 20)
    plan = build_plan(lane, RUN, seed=123, shuffle=lambda order: None)
    execution = Execution(preflight=probe, void=void,
                          repeats=[r for rs in repeats.values() for r in rs])
    return build_document(plan, execution, status=status, started_at=STARTED,
                          finished_at=None if status != "complete" else STARTED,
                          harness_peak_rss_mb=80.0)


def nominal() -> list[RepeatResult]:
    """17 of 20 pass; two crash, one answers wrongly."""
    flaky = [repeat(n) for n in range(1, 21)]
    flaky[3] = repeat(4, "framework_runtime", "nonzero_exit",
                      "exit status 1; last stderr line: RuntimeError: [tool] lookup exploded")
    flaky[6] = repeat(7, "framework_runtime", "nonzero_exit", "exit status 1")
    flaky[9] = repeat(10, "agent", "wrong_output",
                      "output_contains: expected 'open' in output, got 'closed'")
    return flaky


def scenarios() -> dict[str, list[RepeatResult]]:
    """A flaky scenario, one that passes, and one whose every repeat is void."""
    return {"nominal": nominal(),
            "tool_error": [repeat(n, scenario="tool_error") for n in range(1, 21)],
            "remote": [repeat(n, "lane_infra", "env_missing", "OPENAI_API_KEY is not set",
                              "remote", exit_code=None, identities=()) for n in range(1, 21)]}


def document() -> RunDocument:
    return built(scenarios())


def refused() -> RunDocument:
    detail = "pydantic-ai 0.9.1 does not satisfy >=1.0,<2"
    return built({"nominal": [], "tool_error": [], "remote": []},
                 probe=Preflight(False, "pydantic-ai", "0.9.1", "version_unsupported", detail),
                 void=Attribution(Outcome.LANE_INFRA, "version_unsupported", detail))


def test_run_report_shows_verdicts_rates_and_causes():
    doc = document()
    out = render(full_report(doc))
    assert "demo" in out and "pydantic-ai 1.0.3" in out and ">=1.0,<2" in out and RUN in out
    for verdict in ("flaky", "pass", "void"):
        assert verdict in out
    assert "85.0% [64.0–94.8]" in out  # Wilson, 17 of 20
    assert "pass^5 [CI]" in out  # checked in the tests of pass^k below
    assert "framework_runtime 2" in out and "agent 1" in out and "void 20" in out
    assert "nonzero_exit×2" in out and "wrong_output×1" in out
    assert "0.05 s" in out
    assert "92.5% [80.1–97.4]" in out  # the pooled lane row, 37 of 40
    icc = three_scored().aggregate.icc
    assert icc.value is not None and icc.design_effect is not None
    out = render(full_report(three_scored()))
    # 57 of 60 passed: a pooled rate above 0.8, where the F interval is marked approximate.
    assert icc.approximate and re.search(rf"ICC +{icc.value:.2f} ≈\[", out)
    assert f"design effect {icc.design_effect:.2f}" in out
    assert "INTERRUPTED" not in out


def test_run_report_explains_each_scenario_that_did_not_pass():
    out = render(full_report(document()))
    assert "why nominal: flaky · of 20 repeats, 3 failed" in out
    assert "why tool_error" not in out
    # the bracketed detail survives because values are never parsed as markup
    lines = [line.strip() for line in out.splitlines()]
    at = lines.index("repeat 4: framework_runtime/nonzero_exit")
    assert lines[at + 1:at + 3] == [
        "exit status 1; last stderr line: RuntimeError: [tool] lookup exploded",
        f"alk show {RUN} nominal 4"]
    assert "repeat 10: agent/wrong_output" in out
    assert "repeat 11" not in out
    assert "why remote: void · of 20 repeats, 20 void (not scored)" in out
    assert "OPENAI_API_KEY is not set" in out
    assert f"reports/{RUN}/result.json" in out


def test_run_report_marks_an_interrupted_run_and_missing_values():
    # Ctrl-C after the fifth round.
    cut = {sid: repeats[:5] for sid, repeats in scenarios().items()}
    out = render(full_report(built(cut, status="interrupted")))
    assert "INTERRUPTED after 15 of 60 repeats" in out
    assert f"`alk run --resume {RUN}` goes on with it" in out
    assert "—" in out.split("remote", 1)[1]  # no pass rate for the void scenario
    passing = {sid: [repeat(n, scenario=sid) for n in range(1, 21)] for sid in ("a", "b", "c")}
    out = render(full_report(built(passing)))
    assert re.search(r"ICC +— \(no variance: every scored repeat had the same outcome\)", out)


def test_every_framework_and_version_a_worker_reported_is_in_the_header():
    repeats = scenarios()
    repeats["tool_error"][:3] = [repeat(n, scenario="tool_error",
                                        identities=(("pydantic-ai", "9.9"),)) for n in (1, 2, 3)]
    out = render(full_report(built(repeats)), width=80)
    assert "also reported: pydantic-ai 9.9 (3 repeats)" in " ".join(out.split())
    assert "also reported" not in render(full_report(document()))


def test_memory_a_worker_held_in_tmpfs_is_shown_beside_its_rss():
    repeats = scenarios()
    repeats["nominal"][2] = repeat(3, peak_tmpfs_mb=128.0)
    out = " ".join(render(full_report(built(repeats)), width=120).split())
    assert "/tmp and /dev/shm up to 128.0 MB (nominal)" in out
    assert "/tmp and /dev/shm" not in render(full_report(document()))


def test_run_report_puts_a_failed_preflight_first():
    out = render(full_report(refused()))
    assert "Nothing ran: version_unsupported" in out
    assert "pydantic-ai 0.9.1" in out and ">=1.0,<2" in out
    assert "does not satisfy" in out
    assert "Install a version the lane supports" in out
    assert "not scored: nominal, tool_error, remote" in out
    assert "pass rate" not in out  # no empty table


EVENTS = [
    {"seq": 1, "t": 0.0, "source": "harness", "channel": "harness", "type": "spawn",
     "payload": {"command": ["python", "worker.py"]}},
    {"seq": 2, "t": 0.0123, "source": "worker", "channel": "tool", "type": "call",
     "payload": {"name": "lookup_order", "args": {"order": 742}}},
    {"seq": 3, "t": 0.02, "source": "worker", "channel": "tool", "type": "result",
     "payload": {"name": "lookup_order", "ok": False, "error": "no such order"}},
    {"seq": 4, "t": 0.03, "source": "worker", "channel": "stderr", "type": "line",
     "payload": {"text": "warning: retrying"}},
    {"seq": 5, "t": 0.04, "source": "worker", "channel": "agent", "type": "result",
     "payload": {"output": "order is closed", "stop_reason": "accepted", "end_state": {}}},
    {"seq": 6, "t": 0.05, "source": "harness", "channel": "harness", "type": "check",
     "payload": {"name": "output_contains", "ok": False, "expected": "open",
                 "actual": "order is closed"}},
    {"seq": 7, "t": 0.05, "source": "harness", "channel": "harness", "type": "attribution",
     "payload": {"outcome": "agent", "cause": "wrong_output", "detail": "expected 'open'"}},
]


def transcript_view(events: list[dict[str, Any]]) -> RenderableType:
    return transcript_events([event_row(event) for event in events])


def test_transcript_view_summarises_payloads():
    out = render(transcript_view(EVENTS))
    assert "0.012" in out
    assert 'lookup_order(order=742)' in out
    assert "lookup_order error: no such order" in out
    assert "stop_reason=accepted output='order is closed'" in out
    assert '✗ output_contains expected "open" actual "order is closed"' in out
    assert "agent/wrong_output — expected 'open'" in out


def test_page_summary_counts_the_page_and_gives_the_next_command():
    page = TranscriptPage(rows=[event_row(e) for e in EVENTS[1:3]], first=201, matching=40_000,
                          total=680_000)
    out = render(page_summary(page, ["tool"], ("next page", "alk show R s 1 -c tool --from 203")))
    assert "events 201–202 of 40,000 on tool (680,000 in all)" in out
    assert "next page: alk show R s 1 -c tool --from 203" in out
    everything = TranscriptPage(rows=[event_row(e) for e in EVENTS], first=1, matching=7, total=7)
    out = render(page_summary(everything, None, None))
    assert out.strip() == "events 1–7 of 7"
    past = TranscriptPage(rows=[], first=900, matching=7, total=7)
    out = render(page_summary(past, None, ("last page", "alk show R s 1")))
    assert "no event at 900: there are 7" in out and "last page: alk show R s 1" in out


def test_event_rows_hold_short_cells_only():
    huge = {"seq": 9, "t": 10 ** 400, "source": "worker", "channel": "stderr", "type": "y" * 5000,
            "payload": {"text": "x" * 1_000_000}}
    row = event_row(huge)
    assert sum(map(len, (row.seq, row.t, row.source, row.channel, row.type, row.summary))) < 400
    # A payload that is not an object, as a changed file may hold, is shown, not a crash.
    assert event_row({"type": "check", "payload": [1, 2]}).summary == "[1,2]"


def test_transcript_view_cuts_long_payloads():
    event = {"seq": 1, "t": 0.1, "source": "harness", "channel": "harness", "type": "exit",
             "payload": {"blob": "x" * 1000}}
    out = render(transcript_view([event]), width=400)
    assert "…" in out and "x" * 300 not in out


def test_lanes_view_lists_lanes_and_load_errors():
    lane = Lane(
        name="demo", description="", framework="pydantic-ai", requirement=">=1.0,<2",
        command=("{python}", "worker.py"), required_env=(), timeout_s=30.0, repeats=20,
        scenarios=(Scenario("nominal", "look up"), Scenario("tool_error", "fail")),
        path=Path("lanes/demo.toml"), root=Path("lanes"), transcript_cap_bytes=1 << 20,
    )
    out = render(lanes_view([lane], [("lanes/broken.toml", "repeats: expected an integer")]))
    assert "demo" in out and "nominal, tool_error" in out and "30 s" in out
    assert "lanes/demo.toml" in out
    assert "lanes/broken.toml" in out and "repeats: expected an integer" in out


def test_causes_view_lists_the_whole_catalogue():
    out = render(causes_view(), width=200)
    for code in ("passed", "env_missing", "nonzero_exit", "wrong_files"):
        assert code in out
    assert "framework_runtime" in out and "lane_infra" in out


def test_control_characters_from_a_worker_never_reach_the_terminal():
    events = [{"seq": 1, "t": 0.0, "source": "worker", "channel": "stderr", "type": "line",
               "payload": {"text": "\x1b[2J\x1b]0;pwned\x07 all 20 passed"}}]
    out = render(transcript_view(events))
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out


# --- void repeats beside the rate ------------------------------------------------------------


def three_scored() -> RunDocument:
    """The document above, and a third scenario every repeat of which passed: three scored,
    the fewest the ICC and the clustered interval are shown for."""
    return built({**scenarios(), "steady": [repeat(n, scenario="steady") for n in range(1, 21)]})


def void_document() -> RunDocument:
    """The document above, and a scenario whose pass rests on 1 scored repeat of 20."""
    repeats = scenarios()
    repeats["mostly-void"] = [repeat(n, "lane_infra", "exited_before_ready",
                                     "worker exited before framework_ready", "mostly-void")
                              for n in range(1, 20)] + [repeat(20, scenario="mostly-void")]
    return built(repeats)


def numbers(text: str) -> list[str]:
    return sorted(re.findall(r"\d+(?:[.,]\d+)*", text))


def test_void_repeats_are_plain_under_the_row_at_80_columns():
    out = render(full_report(void_document()), width=80)
    lines = [line.rstrip() for line in out.splitlines()]
    row = next(i for i, line in enumerate(lines) if line.startswith("mostly-void"))
    assert "pass?    1/1" in lines[row] and "100.0% [20.7–100.0]" in lines[row]
    assert lines[row + 1] == "  void 19 of 20: exited_before_ready×19"
    remote = next(i for i, line in enumerate(lines) if line.startswith("remote"))
    assert "void?" not in lines[remote] and "void 20 of 20: env_missing×20" in lines[remote + 1]
    assert "void 39 of 80" in out  # the pooled row
    flat = " ".join(out.split())
    void = lines.index("void: 39 of 80 repeats (49%) not scored — the rates above cover the "
                       "other 41")
    assert lines[void + 1] == "      commonest cause: env_missing (20 of 39)"
    assert "? marks a verdict on fewer than half of its repeats: mostly-void (1 of 20 scored)" \
        in flat
    assert "why mostly-void: pass? · of 20 repeats, 19 void (not scored)" in out


@pytest.mark.parametrize("width", [80, 84, 89, 100])
def test_nothing_is_cut_or_split_mid_number(width):
    wide = render(full_report(void_document()), width=300)
    out = render(full_report(void_document()), width=width)
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width
    assert numbers(out) == numbers(wide)
    for cell in ("exited_before_ready", "nonzero_exit×2", "framework_runtime 2"):
        assert cell in out or width < 84


def test_a_run_without_void_repeats_gets_no_void_note():
    repeats = scenarios()
    del repeats["remote"]
    out = render(full_report(built(repeats)), width=80)
    assert not re.search(r"^void:|void \d", out, re.M)  # no void note, none under a row
    assert [cells_of(out, s)[-3] for s in ("nominal", "tool_error")] == ["0%", "0%"]
    assert cells_of(out, "lane (pooled)")[-2] == "0%"
    assert "?" not in out


def test_an_interrupted_run_marks_a_verdict_on_few_repeats():
    repeats = scenarios()
    repeats["tool_error"] = repeats["tool_error"][:5]
    out = render(full_report(built(repeats, status="interrupted")), width=80)
    assert "pass?" in out and "tool_error (5 of 20 scored)" in " ".join(out.split())
    row = out.splitlines().index(next(line for line in out.splitlines()
                                      if line.startswith("tool_error")))
    assert out.splitlines()[row + 1].strip() == "5 of 20 repeats ran"


# --- hostile text in every view --------------------------------------------------------------

HOSTILE = "ok\x1b[2J\x9b31m\u202eevil\u2066x\u200by\ufeffz\u2028\ud800"
RAW = ("\x1b", "\x9b", "\u202e", "\u2066", "\u200b", "\ufeff", "\u2028", "\ud800")


def hostile_lane() -> Lane:
    return Lane(
        name=HOSTILE, description=HOSTILE, framework=HOSTILE, requirement=HOSTILE,
        command=("{python}", "worker.py"), required_env=(), timeout_s=30.0, repeats=20,
        scenarios=(Scenario(HOSTILE, "t"),), path=Path(HOSTILE), root=Path("lanes"),
        transcript_cap_bytes=1 << 20,
    )


def hostile_run() -> RenderableType:
    """Worker text in every place a run report shows it: the version a worker reported and a
    repeat's detail; and, though they come from the lane, a scenario id and the description."""
    repeats = scenarios()
    repeats["nominal"][3] = dataclasses.replace(repeats["nominal"][3], detail=HOSTILE)
    doc = built(repeats, probe=Preflight(True, "pydantic-ai", HOSTILE), description=HOSTILE)
    # After the plan: a lane's TOML cannot spell a lone surrogate, so no plan holds one.
    return full_report(dataclasses.replace(doc, scenarios=(
        dataclasses.replace(doc.scenarios[0], id=HOSTILE), *doc.scenarios[1:])))


def hostile_show() -> RenderableType:
    entry = repeat(4, "agent", HOSTILE, HOSTILE, containment=HOSTILE, transcript=HOSTILE)
    events = [{"seq": HOSTILE, "t": 0.1, "source": HOSTILE, "channel": HOSTILE, "type": kind,
               "payload": {"name": HOSTILE, "args": {HOSTILE: HOSTILE}, "text": HOSTILE,
                           "ok": True, "output": HOSTILE, "stop_reason": HOSTILE,
                           "detail": HOSTILE, "kind": HOSTILE}}
              for kind in ("call", "result", "line", "check", "attribution", "violation", "x")]
    events += [{**events[0], "channel": "tool"}, {**events[1], "channel": "tool"}]
    page = TranscriptPage([event_row(e) for e in events], 1, 9, 9)
    cut_short = CutShort(HOSTILE, 5, HOSTILE, HOSTILE)
    return [repeat_header(HOSTILE, HOSTILE, 4, entry), repeat_facts(entry),
            transcript_events(page.rows), page_summary(page, [HOSTILE], ("next page", HOSTILE)),
            transcript_hash(entry, False), repeat_header(HOSTILE, HOSTILE, 5, cut_short),
            transcript_hash(cut_short, False)]


VIEWS = {
    "run and report": hostile_run,
    "show": hostile_show,
    "check-worker": lambda: findings_view([Finding(Level.FAIL, HOSTILE, HOSTILE, HOSTILE)]),
    "lanes": lambda: lanes_view([hostile_lane()], [(HOSTILE, HOSTILE)]),
    "doctor": lambda: doctor_view([(HOSTILE, HOSTILE, HOSTILE)]),
}


@pytest.mark.parametrize("view", VIEWS)
def test_control_and_invisible_characters_never_reach_the_terminal(view):
    made = VIEWS[view]()
    out = "".join(render(part, width=200) for part in (made if isinstance(made, list) else [made]))
    for char in RAW:
        assert char not in out, (view, hex(ord(char)))
    for escape in ("\\x1b[2J", "\\x9b31m", "\\u202eevil", "\\u2066", "\\u200b", "\\ufeff"):
        assert escape in out, (view, escape)


def test_escaping_a_record_keeps_its_types_and_copies_only_what_changed():
    clean = document()
    assert printable(clean) is clean  # nothing to escape: a walk, not a copy
    doc = built({**scenarios(), "nominal": [repeat(1, "agent", "wrong_output", HOSTILE,
                                                    trajectory=(HOSTILE,))]})
    safe = printable(doc)
    entry = safe.scenarios[0].repeats[0]
    assert type(safe) is RunDocument and type(entry) is RepeatResult
    assert entry.outcome is Outcome.AGENT and entry.trajectory == (printable(HOSTILE),)
    assert "\\x1b[2J" in entry.detail and not any(char in entry.detail for char in RAW)
    assert safe.scenarios[1] is doc.scenarios[1]  # what held no worker text is shared
    assert doc.scenarios[0].repeats[0].detail == HOSTILE  # the record itself is left as it was


def test_no_character_slips_past_the_quick_look_at_a_record():
    # printable first looks at a record's JSON, and walks it only when something may need
    # escaping: for every character of the first plane and the tags, it escapes a repeat's
    # strings (a field, and one in a tuple) as it escapes a string alone.
    for code in (*range(0xd800), *range(0xe000, 0x10000), *range(0xe0000, 0xe0080)):
        text = f"a{chr(code)}b"
        entry = printable(repeat(1, detail=text, trajectory=("ok", text)))
        assert (entry.detail, entry.trajectory[1]) == (printable(text),) * 2, hex(code)
    surrogate = repeat(1, detail="a\ud800b")  # no JSON holds it: the walk escapes it
    assert printable(surrogate).detail == "a\\ud800b"
    # A backslash a worker wrote reads like an escape in JSON, and is kept as it is.
    written = repeat(1, detail="C:\\repo\\u0041 \\b")
    assert printable(written) is written


def test_show_says_a_repeat_an_interrupt_cut_short_never_finished():
    detail = "the run was interrupted before this repeat finished: it was never scored"
    cut_short = CutShort("nominal", 6, detail, f"transcripts/{RUN}/nominal/repeat-06.jsonl")
    lines = render(Group(repeat_header(RUN, "nominal", 6, cut_short), repeat_facts(cut_short),
                         transcript_hash(cut_short, False))).splitlines()
    assert lines == [f"run {RUN} · nominal · repeat 6", f"interrupted — {detail}",
                     "interrupted: no exit, no verdict",
                     f"transcript  transcripts/{RUN}/nominal/repeat-06.jsonl",
                     "sha256      none: the repeat never finished, so alk never hashed its "
                     "transcript"]


def test_show_says_what_a_proxied_repeat_cost_and_a_scripted_one_nothing():
    cost = {"source": "provider", "input_tokens": 1200, "output_tokens": 40, "calls": 2,
            "unreported": 1, "clamped": 0, "refused": 1}
    proxied = dataclasses.replace(repeat(2, "agent", "token_budget", "refused"),
                                  model={"calls": 3, "cost": cost})
    lines = render(repeat_header(RUN, "nominal", 2, proxied)).splitlines()
    assert lines[-1] == ("tokens: 1,200 in · 40 out (provider usage) · 1 call refused past the "
                         "budget · 1 answer had no usage")
    replayed = dataclasses.replace(proxied, model={"cost": {**cost, "source": "replayed",
                                                            "refused": 0, "unreported": 0}})
    assert render(repeat_header(RUN, "nominal", 2, replayed)).splitlines()[-1] == (
        "tokens: 1,200 in · 40 out (replayed: the usage the cassette recorded)")
    scripted = dataclasses.replace(proxied, model={"calls": 3, "cost": None})
    assert "tokens" not in render(repeat_header(RUN, "nominal", 2, scripted))


# --- 80 columns first ------------------------------------------------------------------------


def test_repeats_that_differ_only_in_a_duration_are_one_reason_with_its_range():
    repeats = scenarios()
    hung = [repeat(n, "framework_runtime", "timeout",
                   f"no exit within the timeout ({seconds} s run); stderr: KeyboardInterrupt")
            for n, seconds in ((4, "10.2"), (7, "10.1"), (9, "10.4"))]
    hung.append(repeat(12, "framework_runtime", "timeout", "no exit within the timeout (10.1 s "
                                                           "run); stderr: OSError"))
    repeats["nominal"] = [r for r in repeats["nominal"]
                          if r.repeat not in (4, 7, 9, 10, 12)] + hung
    flat = " ".join(render(full_report(built(repeats)), width=80).split())
    assert ("repeats 4, 7, 9: framework_runtime/timeout no exit within the timeout "
            "(10.1–10.4 s run); stderr: KeyboardInterrupt") in flat
    assert "repeat 12: framework_runtime/timeout no exit within the timeout (10.1 s run)" in flat


def test_a_long_scenario_id_gets_a_line_of_its_own_and_is_never_broken():
    long_id = "a-scenario-id-long-enough-to-push-the-numbers-past-eighty-columns"
    repeats = scenarios()
    repeats[long_id] = [dataclasses.replace(r, scenario=long_id) for r in repeats["tool_error"]]
    del repeats["tool_error"]
    doc = built(repeats)
    lines = render(full_report(doc), width=80).splitlines()
    at = lines.index(long_id)
    assert lines[at + 1].lstrip().startswith("pass   20/20  100.0% [83.9–100.0]")
    assert max(len(line.rstrip()) for line in lines) <= 80
    # Where there is room, the id and its numbers share a line.
    wide = render(full_report(doc), width=160).splitlines()
    assert any(line.startswith(long_id) and "100.0% [83.9–100.0]" in line for line in wide)


def test_one_cause_explained_and_an_unknown_one_answered_with_the_closest():
    out = render(cause_view("timeout"), width=80)
    assert out.splitlines()[0] == "timeout  framework_runtime: the framework failed"
    assert "meaning" in out and "what to do" in out and "Open the transcript" in out
    assert cause_view("no_such_cause") is None
    assert cause_suggestion("timout") == " (did you mean timeout?)"
    assert cause_suggestion("zzzz") == ""


def test_the_cause_list_is_a_code_and_a_sentence_each_grouped_by_outcome():
    out = render(causes_view(), width=80)
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    sections = [line for line in lines if line and not line.startswith(" ")]
    assert sections[:4] == ["pass", "lane_infra: the repeat is void, never scored",
                            "framework_runtime: the framework failed",
                            "agent: a check failed on the model's or agent code's choice"]
    # A meaning's first sentence only: `alk causes CODE` has the rest.
    assert "`alk check-worker`" not in out and "alk causes CODE" in out


# --- the statistics beside each rate, checked against independent computations ---------------


def wilson(passed: int, n: float) -> tuple[float, float]:
    """statsmodels' Wilson interval: `n` may be an effective number of repeats."""
    low, high = proportion_confint(passed, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def cells_of(out: str, first: str) -> list[str]:
    """The table row that begins with `first`, cut into its cells (2+ spaces apart)."""
    [line] = [line for line in out.splitlines() if line.startswith(first + "  ")]
    return re.split(r"\s{2,}", line.strip())[1:]


def whole(value: float) -> str:
    assert 0.01 <= value <= 0.99 or value in (0.0, 1.0), value  # no "<1%" or ">99%" here
    return f"{value * 100:.0f}%"


def hat_cell(point: float, low: float, high: float) -> str:
    return f"{whole(point)} [{low * 100:.0f}–{high * 100:.0f}]"


@pytest.mark.parametrize("k", [2, 5, 20])
def test_pass_hat_k_at_the_chosen_k_is_the_unbiased_point_in_the_wilson_bounds_to_the_k(k):
    out = render(full_report(document(), k=k), width=80)
    [header] = [line for line in out.splitlines() if line.startswith("scenario ")]
    assert header.split()[-3:] == [f"pass^{k}", "[CI]", "p50"]
    low, high = wilson(17, 20)
    nominal = comb(17, k) / comb(20, k)
    assert cells_of(out, "nominal")[-2] == hat_cell(nominal, low**k, high**k)
    low, high = wilson(20, 20)
    assert cells_of(out, "tool_error")[-2] == hat_cell(1.0, low**k, 1.0)
    # The lane's is the same quantity: the mean of its scored scenarios' pass^k.
    assert cells_of(out, "lane (pooled)")[-1].startswith(whole((nominal + 1.0) / 2) + " [")
    assert "pass^n" not in out


def test_pass_hat_1_is_the_pass_rate():
    out = render(full_report(document(), k=1), width=80)
    for scenario in ("nominal", "tool_error"):
        cells = cells_of(out, scenario)
        rate = re.fullmatch(r"([\d.]+)% \[([\d.]+)–([\d.]+)\]", cells[-4])
        assert rate, cells
        point, low, high = (float(x) for x in rate.groups())
        assert cells[-2] == f"{point:.0f}% [{low:.0f}–{high:.0f}]"
    assert "pass^1      the pass rate" in out


def test_pass_hat_k_beyond_the_scored_repeats_is_a_dash_and_the_legend_says_why():
    out = render(full_report(void_document(), k=5), width=80)
    assert cells_of(out, "mostly-void")[-2] == "—"
    assert cells_of(out, "nominal")[-2] != "—"
    # The lane's mean needs k scored repeats in each scenario that scored any.
    assert cells_of(out, "lane (pooled)")[-1] == "—"
    flat = " ".join(out.split())
    assert ("— fewer than 5 scored repeats: mostly-void; the lane's pass^5 needs 5 in every "
            "scenario") in flat
    out = render(full_report(document(), k=21), width=80)
    assert [cells_of(out, s)[-2] for s in ("nominal", "tool_error")] == ["—", "—"]
    assert "fewer than 21 scored repeats: nominal, tool_error" in " ".join(out.split())
    assert "fewer than" not in render(full_report(document(), k=20), width=80)
    with pytest.raises(ValueError, match="k >= 1"):
        full_report(document(), k=0)


def test_void_is_a_rate_beside_every_pass_rate():
    out = render(full_report(void_document()), width=80)
    assert cells_of(out, "nominal")[-3] == "0%"
    assert cells_of(out, "mostly-void")[-3] == whole(19 / 20)
    assert cells_of(out, "remote")[-3] == "100%"
    assert cells_of(out, "lane (pooled)")[-2] == whole(39 / 80)
    assert "void: share of the repeats run that were not scored" in out


def anova(groups: list[tuple[int, int]]) -> tuple[float, float, float, float, float]:
    """ICC(1) of 0/1 groups given as (passed, scored), by the textbook one-way ANOVA, with
    k0, Kish's m = Σn²/N, and McGraw & Wong's F interval (scipy's F quantiles)."""
    values = [[1.0] * c + [0.0] * (n - c) for c, n in groups]
    a, big_n = len(values), sum(len(v) for v in values)
    grand = sum(map(sum, values)) / big_n
    means = [sum(v) / len(v) for v in values]
    msb = sum(len(v) * (m - grand) ** 2 for v, m in zip(values, means)) / (a - 1)
    msw = sum((x - m) ** 2 for v, m in zip(values, means) for x in v) / (big_n - a)
    k0 = (big_n - sum(len(v) ** 2 for v in values) / big_n) / (a - 1)
    icc = (msb - msw) / (msb + (k0 - 1) * msw)
    f0 = msb / msw
    f_low = f0 / f_dist.ppf(0.975, a - 1, big_n - a)
    f_high = f0 * f_dist.ppf(0.975, big_n - a, a - 1)
    low = (f_low - 1) / (f_low + k0 - 1)
    high = (f_high - 1) / (f_high + k0 - 1)
    return icc, low, high, k0, sum(len(v) ** 2 for v in values) / big_n


def minus(value: float) -> str:
    return f"{value:.2f}".replace("-", "−")


def test_the_lane_shows_its_pooled_and_its_clustered_interval_and_which_to_read():
    out = render(full_report(three_scored()), width=80)
    pooled = wilson(57, 60)
    assert cells_of(out, "lane (pooled)")[1] == (f"95.0% [{pooled[0] * 100:.1f}–"
                                                 f"{pooled[1] * 100:.1f}]")
    # Kish's design effect at the ICC's upper bound, and Wilson with t on m − 1 = 2 degrees of
    # freedom for z, written out: three scenarios say little of tasks like them.
    _, _, icc_high, _, m = anova([(17, 20), (20, 20), (20, 20)])
    effective, t, rate = 60 / (1 + (m - 1) * icc_high), t_dist.ppf(0.975, 2), 57 / 60
    centre = (rate + t * t / (2 * effective)) / (1 + t * t / effective)
    half = (t * (rate * (1 - rate) / effective + t * t / (4 * effective ** 2)) ** 0.5
            / (1 + t * t / effective))
    low, high = centre - half, min(1.0, centre + half)
    [clustered] = [line for line in out.splitlines() if line.startswith("  clustered ")]
    assert clustered.split() == ["clustered", "95.0%", f"[{low * 100:.1f}–{high * 100:.1f}]"]
    assert low < pooled[0] - 0.05  # the clustered one is wider here
    flat = " ".join(out.split())
    assert ("clustered the scenarios as a sample of tasks: read it to generalise beyond them; "
            "pooled: these scenarios only") in flat


def test_the_icc_has_its_f_interval_design_effect_and_effective_n():
    flat = " ".join(render(full_report(three_scored()), width=80).split())
    icc, low, high, k0, m = anova([(17, 20), (20, 20), (20, 20)])
    assert (f"ICC {minus(icc)} ≈[{minus(low)}, {minus(high)}] · 3 scenarios, cluster size "
            f"{m:.1f} design effect {1 + (m - 1) * icc:.2f}: effective n "
            f"{60 / (1 + (m - 1) * icc):.1f} of 60 scored repeats approximate: the F interval, "
            "for pass/fail repeats at a pooled pass rate of 0.95; only 3 scenarios: the "
            "interval is wide") in flat
    assert low < 0  # a minus that reads as one
    # Unequal counts: the ICC's k0 differs from Kish's cluster size, and both are shown.
    doc = void_document()
    doc = built({**{s.id: list(s.repeats) for s in doc.scenarios},
                 "steady": [repeat(n, scenario="steady") for n in range(1, 21)]})
    flat = " ".join(render(full_report(doc), width=80).split())
    icc, low, high, k0, m = anova([(17, 20), (20, 20), (1, 1), (20, 20)])
    assert (f"ICC {minus(icc)} ≈[{minus(low)}, {minus(high)}] · 4 scenarios, cluster size "
            f"{m:.1f} (k0 {k0:.1f}) design effect {1 + (m - 1) * icc:.2f}") in flat


def test_an_icc_without_variance_says_why_and_that_the_design_effect_is_its_worst():
    passing = {sid: [repeat(n, scenario=sid) for n in range(1, 21)] for sid in ("a", "b", "c")}
    flat = " ".join(render(full_report(built(passing)), width=80).split())
    assert ("ICC — (no variance: every scored repeat had the same outcome) · 3 scenarios, "
            "cluster size 20.0 design effect 20.00: effective n 3.0 of 60 scored repeats "
            "design effect at its worst case, ICC = 1: each scenario counts once") in flat
    # Wilson's lower bound of 3/3 with t on 2 degrees of freedom for z: n / (n + t²).
    low = 3 / (3 + t_dist.ppf(0.975, 2) ** 2)
    assert f"clustered 100.0% [{low * 100:.1f}–100.0]" in flat


def test_failures_not_seen_and_the_repeats_it_takes_to_see_one():
    flat = " ".join(render(full_report(document()), width=80).split())
    # 3 of 20 failed: the least n with 1 − (1 − low)ⁿ ≥ 0.95, low the failure rate's Wilson
    # lower bound, the rate the repeats cannot rule out below.
    low = wilson(3, 20)[0]
    seen = next(n for n in range(1, 1000) if 1 - (1 - low) ** n >= 0.95)
    assert (f"failures nominal: 15.0% failed; {seen} repeats show one 95% of the time, even at "
            f"{low:.1%}") in flat
    # None of 20 failed: failure rates up to Wilson's upper bound are not ruled out.
    bound = 1 - wilson(20, 20)[0]
    assert f"tool_error: no failure in 20 scored; up to {bound:.1%} not ruled out" in flat
    five, one = (next(n for n in range(1, 1000) if 1 - (1 - p) ** n >= 0.95) for p in (.05, .01))
    assert (five, one) == (59, 299)
    assert f"to see a 5% failure 95% of the time takes {five} repeats, a 1% one {one}" in flat
    # Scenarios that share the numbers share a line; all of them are "every scenario".
    passing = {sid: [repeat(n, scenario=sid) for n in range(1, 21)] for sid in ("a", "b", "c")}
    flat = " ".join(render(full_report(built(passing)), width=80).split())
    assert f"failures every scenario: no failure in 20 scored; up to {bound:.1%}" in flat


def failing(passed: int, scenario: str = "nominal") -> list[RepeatResult]:
    """20 repeats alike but for their outcome: the first `passed` pass, the others answer
    wrongly."""
    return [repeat(n, scenario=scenario) if n <= passed else
            repeat(n, "agent", "wrong_output", "expected 'open'", scenario) for n in range(1, 21)]


def consistency_lines(out: str) -> list[str]:
    """The report's lines from the consistency label to the next label, stripped."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("consistency "))
    end = next(i for i in range(start + 1, len(lines)) if lines[i][:1] not in (" ", ""))
    return [line.strip() for line in lines[start:end]]


def figure(name: str, value: float, low: float, high: float) -> str:
    return f"{name} {value:.2f} [{low:.2f}–{high:.2f}]"


def test_the_lanes_consistency_shows_the_records_figures_with_their_intervals():
    # 16 of 20 pass in nominal, all 20 in tool_error; every repeat alike otherwise.
    doc = built({"nominal": failing(16), "tool_error": failing(20, "tool_error")})
    lines = consistency_lines(render(full_report(doc), width=120))
    # Outcome consistency (2p − 1)²: nominal's p = 0.8 gives 0.36, its interval the Wilson
    # bounds of 16/20 mapped alike; tool_error's 20/20 gives 1 over [(2·0.839 − 1)², 1]. The
    # lane's is the mean of 0.36 and 1, its interval that of the two scenarios resampled (the
    # means of (0.36, 0.36) and (1, 1)), widened to the mean of their own bounds:
    # (0.03 + 0.46)/2 = 0.24.
    low, high = wilson(16, 20)
    nominal = figure("outcome", 0.36, (2 * low - 1) ** 2, (2 * high - 1) ** 2)
    assert nominal.startswith("outcome 0.36 [0.03–0.70]")
    all_passed = (2 * wilson(20, 20)[0] - 1) ** 2
    lane_low = ((2 * low - 1) ** 2 + all_passed) / 2
    assert lines[0].startswith(f"consistency outcome 0.68 [{lane_low:.2f}–1.00] · ")
    assert f"{lane_low:.2f}" == "0.24"
    # A scenario whose every figure is 1 says nothing new: tool_error has no line.
    assert lines[1] == f"nominal: {nominal}"
    assert " ".join(lines[2:]) == ("1 = all repeats alike in outcome, tool counts, step "
                                   "sequence, and time, CPU, memory, model calls; listed: what "
                                   "varies beyond timing")
    # The figures are the record's, whatever they are.
    lane = doc.aggregate.consistency
    assert lines[0] == "consistency " + " · ".join(
        figure(name, e.value, e.low, e.high) for name, e in (
            ("outcome", lane.outcome), ("tool use", lane.tool_use), ("steps", lane.steps),
            ("resources", lane.resources)))


def test_a_scenario_lists_only_its_figures_below_1_and_a_figure_none_is_left_out():
    # nominal's repeats took two tool paths and two durations: four figures below 1.
    nominal = [dataclasses.replace(r, trajectory=("search_orders:ok", "lookup_order:ok"),
                                   duration_s=0.5) if r.repeat % 2 else r
               for r in failing(16)]
    # mostly_void: one scored repeat, too few for a figure; the lane leaves it out.
    void = [repeat(n, "lane_infra", "env_missing", "OPENAI_API_KEY is not set", "mostly_void",
                   exit_code=None) for n in range(1, 20)] + [repeat(20, scenario="mostly_void")]
    doc = built({"nominal": nominal, "mostly_void": void})
    consistency = next(s for s in doc.scenarios if s.id == "nominal").stats.consistency
    assert all(e.value < 0.995 for e in (consistency.outcome, consistency.tool_use,
                                         consistency.steps, consistency.resources))
    assert next(s for s in doc.scenarios if s.id == "mostly_void").stats.consistency.outcome is None
    flat = " ".join(" ".join(consistency_lines(render(full_report(doc), width=80))).split())
    # At 20 repeats, tool use's and resources' intervals are marked approximate (steps' holds
    # from 20), and the legend says what the mark means.
    assert consistency.approximate == ("tool_use", "resources")
    marks = {"tool use": " approx.", "resources": " approx."}
    assert ("nominal: " + " · ".join(figure(name, e.value, e.low, e.high) + marks.get(name, "")
                                     for name, e in (
        ("outcome", consistency.outcome), ("tool use", consistency.tool_use),
        ("steps", consistency.steps), ("resources", consistency.resources)))) in flat
    assert "approx.: an interval that holds less than 95% at these repeats" in flat
    assert "mostly_void" not in flat


def test_timing_noise_alone_lists_no_scenario_and_resources_far_apart_do():
    # Durations 10% apart: resources exp(-CV) near 0.95, below 1 but no news.
    noisy = [dataclasses.replace(r, duration_s=1.1 if r.repeat % 2 else 1.0)
             for r in failing(20)]
    # Durations and CPU 0.2 s and 2 s: coefficients of variation near 0.8, beyond any noise.
    apart = [dataclasses.replace(r, duration_s=2.0 if r.repeat % 2 else 0.2,
                                 cpu_s=2.0 if r.repeat % 2 else 0.2)
             for r in failing(20, "apart")]
    doc = built({"nominal": noisy, "apart": apart})
    by_id = {s.id: s.stats.consistency.resources.value for s in doc.scenarios}
    assert 0.6 < by_id["nominal"] < 1 and by_id["apart"] < 0.6
    lines = consistency_lines(render(full_report(doc), width=120))
    assert [line.split(":")[0] for line in lines[1:2]] == ["apart"]
    assert not any(line.startswith("nominal") for line in lines)


def test_at_most_a_handful_of_scenarios_least_consistent_first_then_how_many_more():
    # Outcome consistency (2p − 1)² at 20, 19, ..., 14 of 20 passed: 1, 0.81, 0.64, 0.49, ...
    runs = {f"s{passed}": failing(passed, f"s{passed}") for passed in range(20, 13, -1)}
    lines = consistency_lines(render(full_report(built(runs)), width=120))
    assert [line.split(":")[0] for line in lines[1:6]] == ["s14", "s15", "s16", "s17",
                                                             "+2 more scenarios"]
    assert lines[1].startswith("s14: outcome 0.16 [")
    assert not any(line.startswith("s20") for line in lines)


def test_consistency_and_its_legend_only_when_the_lane_has_a_figure():
    void = {"remote": [repeat(n, "lane_infra", "env_missing", "OPENAI_API_KEY is not set",
                              "remote", exit_code=None) for n in range(1, 21)]}
    out = render(full_report(built(void)), width=80)
    assert "consistency outcome" not in out and "1 = all repeats alike" not in out
    assert "consistency outcome" in render(full_report(document()), width=80)


def test_fault_robustness_is_the_faulted_pass_rate_over_the_others_only_with_faults():
    runs = {"nominal": failing(16), "tool_error": failing(15, "tool_error")}
    assert "robustness  to faults" not in render(full_report(built(runs)), width=80)
    doc = built(runs, faulted=("tool_error",))
    robustness = doc.aggregate.fault_robustness
    assert robustness is not None and robustness.high is not None
    out = render(full_report(doc), width=80)
    # 15 of 20 passed with the fault, 16 of 20 without: 0.75 / 0.8.
    assert (f"robustness  to faults 0.94 [{robustness.low:.2f}–{robustness.high:.2f}]: "
            "faulted ÷ unfaulted twin, 1 pair") in out
    assert "no upper bound" not in out
    # One pass in 20 without faults: the ratio has no upper bound, and the report says so.
    doc = built({"nominal": failing(1), "tool_error": failing(15, "tool_error")},
                faulted=("tool_error",))
    robustness = doc.aggregate.fault_robustness
    assert robustness is not None and robustness.high is None
    flat = " ".join(render(full_report(doc), width=80).split())
    assert (f"robustness to faults 15.00 [{robustness.low:.2f}–∞): faulted ÷ unfaulted twin, "
            "1 pair no upper bound: too few repeats passed without faults") in flat



# --- statistics where they mean something (docs/reports.md) ----------------------------------


def lane_of(scenarios: int, repeats: int) -> RunDocument:
    """`scenarios` scenarios of `repeats` repeats, the first of each failing: every figure has
    a value to show, if it is shown."""
    return built({f"s{i}": [repeat(n, scenario=f"s{i}") if n > 1 else
                            repeat(n, "agent", "wrong_output", "expected 'open'", f"s{i}")
                            for n in range(1, repeats + 1)] for i in range(scenarios)})


def test_by_default_the_report_has_no_statistics_block_and_says_how_to_see_it():
    out = render(run_report(three_scored()), width=80)
    for figure in ("ICC ", "consistency ", "design effect", "failures ", "workers ", "rule "):
        assert not any(line.startswith(figure) for line in out.splitlines()), figure
    assert "pass^5      chance" not in out  # the legend is part of the block
    flat = " ".join(out.split())
    assert f"statistics alk report {RUN} --stats adds the legend, ICC," in flat
    assert "statistics " not in render(full_report(three_scored()), width=80)


def test_the_icc_and_clustered_interval_need_several_scenarios_of_several_repeats():
    shown = render(full_report(lane_of(MIN_SCENARIOS, MIN_REPEATS)), width=80)
    assert re.search(r"^ICC +", shown, re.M) and "  clustered " in shown
    assert "withheld    ICC" not in shown
    for doc in (lane_of(MIN_SCENARIOS - 1, MIN_REPEATS), lane_of(MIN_SCENARIOS, MIN_REPEATS - 1)):
        out = render(full_report(doc), width=80)
        assert not re.search(r"^ICC +", out, re.M) and "  clustered " not in out
        assert "design effect" not in out.split("withheld")[0]
        flat = " ".join(out.split())
        assert (f"withheld ICC, design effect and clustered interval (they need "
                f"{MIN_SCENARIOS} scenarios of {MIN_REPEATS}+ scored repeats") in flat


def test_consistency_needs_repeats_and_robustness_a_faulted_scenario():
    assert "consistency outcome" in render(full_report(lane_of(1, MIN_REPEATS)), width=80)
    out = render(full_report(lane_of(1, MIN_REPEATS - 1)), width=80)
    flat = " ".join(out.split())
    assert "consistency outcome" not in out
    assert (f"consistency (it needs a scenario of {MIN_REPEATS}+ scored repeats; the most "
            f"here is {MIN_REPEATS - 1})") in flat
    assert "fault robustness (no faulted scenario to set beside its twin)" in flat


# --- 80 columns: nothing split or cut mid-value ----------------------------------------------


def test_a_long_detail_is_cut_between_values_with_an_ellipsis():
    values = [f"file out/report-{n}.json: json length expected {n}, got {n + 1} items"
              for n in range(12)]
    detail = "; ".join(values)
    assert len(detail) > 240
    repeats = {"nominal": [repeat(n, "agent", "wrong_files", detail) for n in range(1, 21)]}
    out = render(run_report(built(repeats)), width=80)
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "agent/wrong_files" in line)
    shown = " ".join(" ".join(lines[at + 1:at + 6]).split())
    shown = shown[:shown.index(" alk show")]
    assert shown.endswith(" …")
    kept = shown[:-2].rstrip(";,")
    assert detail.startswith(kept) and len(kept) <= 240
    # What is kept ends where a whole check ends: never inside a value, nor between a check's
    # "got" and its value.
    assert detail[len(kept)] == ";" and kept.split("; ")[-1] in values


def test_an_id_wider_than_the_terminal_is_cut_with_an_ellipsis_not_folded():
    long_id = "retries-" + "-".join(["a-rate-limited-tool"] * 5)
    assert len(long_id) > 80
    repeats = {"nominal": [repeat(n) for n in range(1, 21)],
               long_id: [repeat(n, scenario=long_id) for n in range(1, 21)]}
    lines = render(run_report(built(repeats)), width=80).splitlines()
    [row] = [line for line in lines if line.startswith("retries-")]
    assert row.rstrip().endswith("…") and len(row.rstrip()) == 80
    assert long_id.startswith(row.rstrip()[:-1])
    tail = long_id[79:]
    assert not any(line.strip().startswith(tail) for line in lines)


def test_what_to_do_about_a_cause_is_said_once_a_lane():
    crashed = [repeat(n, "framework_runtime", "nonzero_exit", "exit status 1", sid)
               for sid in ("a", "b") for n in range(1, 21)]
    repeats = {"a": crashed[:20], "b": crashed[20:]}
    out = render(run_report(built(repeats)), width=80)
    assert out.count("→ nonzero_exit:") == 1
    assert out.index("why a:") < out.index("→ nonzero_exit:") < out.index("why b:")



def test_an_older_files_failures_line_is_worded_as_conditional():
    # A result.json written before the lower bound holds only the repeats at the rate seen.
    doc = document()
    nominal = doc.scenarios[0]
    stats = dataclasses.replace(nominal.stats, repeats_needed=dataclasses.replace(
        nominal.stats.repeats_needed, low_rate=None, repeats_at_low=None))
    doc = dataclasses.replace(doc, scenarios=(dataclasses.replace(nominal, stats=stats),
                                              *doc.scenarios[1:]))
    flat = " ".join(render(full_report(doc), width=80).split())
    seen = next(n for n in range(1, 100) if 1 - 0.85**n >= 0.95)
    assert (f"nominal: 15.0% failed; if that is the rate, {seen} repeats show one 95% of the "
            "time") in flat


def test_what_to_do_about_a_fault_fits_where_it_was_injected():
    # The same cause after a raising tool and after a 429 on the wire: two advices, each once.
    tool = "the worker injected tool#2; then wrong_stop_reason: stop_reason: expected x"
    wire = ("the gateway injected http_429@call1 and no model call after it was answered in "
            "full; then wrong_stop_reason: stop_reason: expected x")
    repeats = {sid: [repeat(n, "framework_runtime", "fault_unrecovered", detail, sid)
                     for n in range(1, 21)]
               for sid, detail in (("raises", tool), ("raises-too", tool), ("wire", wire))}
    out = " ".join(render(run_report(built(repeats)), width=120).split())
    assert out.count("→ fault_unrecovered: A tool raised") == 1
    assert out.count("→ fault_unrecovered: Read the transcript's model/call events") == 1
    assert out.index("why raises:") < out.index("A tool raised") < out.index("why wire:") \
        < out.index("Retry-After")
