"""The terminal renderables, printed to an in-memory console and read back as plain text."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console, RenderableType

from alk.conformance import Finding, Level
from alk.records import Lane, Scenario
from alk.report.listings import (
    cause_suggestion,
    cause_view,
    causes_view,
    doctor_view,
    findings_view,
    lanes_view,
)
from alk.report.terminal import run_report
from alk.report.transcript_view import (
    event_row,
    page_summary,
    repeat_facts,
    repeat_header,
    transcript_hash,
    transcript_events,
)
from alk.transcript import TranscriptPage

RUN = "20261129-120000-ab12"


def render(renderable: RenderableType, width: int = 120) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def repeat(n: int, outcome: str = "pass", cause: str = "passed", detail: str = "",
           scenario: str = "nominal") -> dict[str, Any]:
    return {
        "repeat": n, "seed": 100 + n, "outcome": outcome, "cause": cause, "detail": detail,
        "duration_s": 0.05, "exit_code": 0 if outcome == "pass" else 1, "signal": None,
        "timed_out": False, "peak_rss_mb": 12.3, "cpu_s": 0.04, "violations": 0,
        "trajectory": ["lookup_order:ok"], "claimed": None,
        "transcript": f"transcripts/{RUN}/{scenario}/repeat-{n:02d}.jsonl", "sha256": "0" * 64,
    }


def scenario(id: str, verdict: str, repeats: list[dict], pass_rate: float | None,
             ci: list[float] | None, layers: dict, causes: dict) -> dict[str, Any]:
    scored = sum(r["outcome"] != "lane_infra" for r in repeats)
    passed = sum(r["outcome"] == "pass" for r in repeats)
    return {
        "id": id, "verdict": verdict,
        "counts": {"requested": len(repeats), "completed": len(repeats),
                   "void": len(repeats) - scored, "scored": scored, "passed": passed},
        "pass_rate": pass_rate, "ci": ci,
        "pass_hat_k": {str(k): (pass_rate or 0) ** k for k in range(1, len(repeats) + 1)},
        "pass_at_k": {}, "layers": layers, "causes": causes,
        "trajectories": {"distinct": 2, "entropy_bits": 0.6, "first_divergence": 2,
                         "signatures": []},
        "durations": {"p50": 0.05, "p95": 0.09, "mean": 0.06, "max": 0.1},
        "repeats": repeats,
    }


def document(preflight_ok: bool = True) -> dict[str, Any]:
    flaky = [repeat(n) for n in range(1, 21)]
    flaky[3] = repeat(4, "framework_runtime", "nonzero_exit",
                      "exit status 1; last stderr line: RuntimeError: [tool] lookup exploded")
    flaky[6] = repeat(7, "framework_runtime", "nonzero_exit", "exit status 1")
    flaky[9] = repeat(10, "agent", "wrong_output",
                      "output_contains: expected 'open' in output, got 'closed'")
    void = [repeat(n, "lane_infra", "env_missing", "OPENAI_API_KEY is not set", "remote")
            for n in range(1, 4)]
    scenarios = [
        scenario("nominal", "flaky", flaky, 0.85, [0.64, 0.948],
                 {"pass": 17, "framework_runtime": 2, "agent": 1},
                 {"passed": 17, "nonzero_exit": 2, "wrong_output": 1}),
        scenario("tool_error", "pass", [repeat(n, scenario="tool_error") for n in range(1, 21)],
                 1.0, [0.839, 1.0], {"pass": 20}, {"passed": 20}),
        scenario("remote", "void", void, None, None, {"lane_infra": 3}, {"env_missing": 3}),
    ]
    doc: dict[str, Any] = {
        "schema": "alk.result/1", "run_id": RUN, "status": "complete", "alk_version": "0.1.0",
        "started_at": "2026-11-29T12:00:00Z", "finished_at": "2026-11-29T12:00:09Z",
        "lane": {"name": "demo", "description": "A scripted order-lookup agent.",
                 "path": "lanes/demo.toml", "framework": "pydantic-ai",
                 "requirement": ">=1.0,<2", "reported_framework": "pydantic-ai",
                 "reported_version": "1.0.3"},
        "settings": {"repeats": 20, "timeout_s": 30.0, "seed": 123,
                     "scenarios": ["nominal", "tool_error", "remote"]},
        "preflight": {"ok": True, "cause": None, "detail": "", "framework": "pydantic-ai",
                      "version": "1.0.3"},
        "paths": {"result": f"reports/{RUN}/result.json", "transcripts": f"transcripts/{RUN}"},
        "scenarios": scenarios,
        "aggregate": {
            "counts": {"requested": 43, "completed": 43, "void": 3, "scored": 40, "passed": 37},
            "pass_rate": 0.925, "ci": [0.801, 0.974], "pass_hat_k": {"1": 0.925, "20": 0.21},
            "pass_at_k": {}, "layers": {"pass": 37, "framework_runtime": 2, "agent": 1,
                                        "lane_infra": 3},
            "causes": {"passed": 37, "nonzero_exit": 2, "wrong_output": 1, "env_missing": 3},
            "verdicts": {"pass": 1, "fail": 0, "flaky": 1, "void": 1},
            "icc": {"value": 0.0712, "k0": 20, "groups": 2, "observations": 40, "msb": 0.1,
                    "msw": 0.07, "design_effect": 2.35, "effective_n": 17.0, "reason": None},
        },
    }
    if not preflight_ok:
        detail = "pydantic-ai 0.9.1 does not satisfy >=1.0,<2"
        doc["preflight"] = {"ok": False, "cause": "version_unsupported", "detail": detail,
                            "framework": "pydantic-ai", "version": "0.9.1"}
        doc["lane"]["reported_version"] = "0.9.1"
        for s in doc["scenarios"]:
            s.update(verdict="void", repeats=[], pass_rate=None, ci=None, pass_hat_k={})
    return doc


def test_run_report_shows_verdicts_rates_and_causes():
    out = render(run_report(document()))
    assert "demo" in out and "pydantic-ai 1.0.3" in out and ">=1.0,<2" in out and RUN in out
    for verdict in ("flaky", "pass", "void"):
        assert verdict in out
    assert "85.0% [64.0–94.8]" in out
    assert "pass^n" in out and "0.04" in out  # 0.85 ** 20
    assert "framework_runtime 2" in out and "agent 1" in out and "void 3" in out
    assert "nonzero_exit×2" in out and "wrong_output×1" in out
    assert "0.05 s" in out
    assert "92.5% [80.1–97.4]" in out  # the pooled lane row
    assert re.search(r"ICC +0\.07", out)
    assert "INTERRUPTED" not in out


def test_run_report_explains_each_scenario_that_did_not_pass():
    out = render(run_report(document()))
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
    assert "why remote: void · of 3 repeats, 3 void (not scored)" in out and "OPENAI_API_KEY is not set" in out
    assert f"reports/{RUN}/result.json" in out


def test_run_report_marks_an_interrupted_run_and_missing_values():
    doc = document()
    doc["status"] = "interrupted"
    doc["aggregate"]["icc"] = {"value": None, "reason": "no variance: every repeat passed"}
    out = render(run_report(doc))
    assert "INTERRUPTED" in out
    assert re.search(r"ICC +— \(no variance: every repeat passed\)", out)
    assert "—" in out.split("remote", 1)[1]  # no pass rate for the void scenario


def test_every_framework_and_version_a_worker_reported_is_in_the_header():
    doc = document()
    doc["identities"] = [{"framework": "pydantic-ai", "version": "1.0.3", "repeats": 40},
                         {"framework": "pydantic-ai", "version": "9.9", "repeats": 3}]
    out = render(run_report(doc), width=80)
    assert "also reported: pydantic-ai 9.9 (3 repeats)" in " ".join(out.split())
    doc["identities"] = doc["identities"][:1]
    assert "also reported" not in render(run_report(doc))


def test_memory_a_worker_held_in_tmpfs_is_shown_beside_its_rss():
    doc = document()
    doc["scenarios"][0]["repeats"][2]["peak_tmpfs_mb"] = 128.0
    out = " ".join(render(run_report(doc), width=120).split())
    assert "/tmp and /dev/shm up to 128.0 MB (nominal)" in out
    assert "/tmp and /dev/shm" not in render(run_report(document()))


def test_run_report_puts_a_failed_preflight_first():
    out = render(run_report(document(preflight_ok=False)))
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


def void_document() -> dict[str, Any]:
    """The document above, and a scenario whose pass rests on 1 scored repeat of 20."""
    doc = document()
    mostly = [repeat(n, "lane_infra", "exited_before_ready",
                     "worker exited before framework_ready", "mostly-void") for n in range(1, 20)]
    mostly.append(repeat(20, scenario="mostly-void"))
    doc["scenarios"].append(scenario("mostly-void", "pass", mostly, 1.0, [0.207, 1.0],
                                     {"pass": 1, "lane_infra": 19},
                                     {"passed": 1, "exited_before_ready": 19}))
    aggregate = doc["aggregate"]
    aggregate["counts"] = {"requested": 63, "completed": 63, "void": 22, "scored": 41,
                           "passed": 38}
    aggregate["layers"]["lane_infra"] = 22
    aggregate["causes"]["exited_before_ready"] = 19
    return doc


def numbers(text: str) -> list[str]:
    return sorted(re.findall(r"\d+(?:[.,]\d+)*", text))


def test_void_repeats_are_plain_under_the_row_at_80_columns():
    out = render(run_report(void_document()), width=80)
    lines = [line.rstrip() for line in out.splitlines()]
    row = next(i for i, line in enumerate(lines) if line.startswith("mostly-void"))
    assert "pass?  1/1" in lines[row] and "100.0% [20.7–100.0]" in lines[row]
    assert lines[row + 1] == "  void 19 of 20: exited_before_ready×19"
    remote = next(i for i, line in enumerate(lines) if line.startswith("remote"))
    assert "void?" not in lines[remote] and "void 3 of 3: env_missing×3" in lines[remote + 1]
    assert "void 22 of 63" in out  # the pooled row
    flat = " ".join(out.split())
    void = lines.index("void: 22 of 63 repeats (35%) not scored — the rates above cover the "
                       "other 41")
    assert lines[void + 1] == "      commonest cause: exited_before_ready (19 of 22)"
    assert "? marks a verdict on fewer than half of its repeats: mostly-void (1 of 20 scored)" \
        in flat
    assert "why mostly-void: pass? · of 20 repeats, 19 void (not scored)" in out


@pytest.mark.parametrize("width", [80, 84, 89, 100])
def test_nothing_is_cut_or_split_mid_number(width):
    wide = render(run_report(void_document()), width=300)
    out = render(run_report(void_document()), width=width)
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width
    assert numbers(out) == numbers(wide)
    for cell in ("exited_before_ready", "nonzero_exit×2", "framework_runtime 2"):
        assert cell in out or width < 84


def test_a_run_without_void_repeats_gets_no_void_note():
    doc = document()
    doc["scenarios"] = doc["scenarios"][:2]
    doc["aggregate"]["counts"].update(void=0, requested=40, completed=40)
    doc["aggregate"]["layers"].pop("lane_infra")
    doc["aggregate"]["verdicts"]["void"] = 0
    out = render(run_report(doc), width=80)
    assert [line for line in out.splitlines() if "void" in line] == [
        "n/m beside a verdict: passed/scored (void repeats are never scored) · pass^n: "]
    assert "?" not in out


def test_an_interrupted_run_marks_a_verdict_on_few_repeats():
    doc = document()
    doc["scenarios"][1]["counts"].update(requested=20, completed=5, scored=5, passed=5)
    out = render(run_report(doc), width=80)
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
    doc = document()
    doc["lane"]["description"] = doc["lane"]["reported_version"] = HOSTILE
    doc["scenarios"][0]["repeats"][3]["detail"] = HOSTILE
    doc["scenarios"][0]["id"] = HOSTILE
    return run_report(doc)


def hostile_show() -> RenderableType:
    entry = {**repeat(4, "agent", HOSTILE, HOSTILE), "containment": HOSTILE,
             "transcript": HOSTILE}
    events = [{"seq": HOSTILE, "t": 0.1, "source": HOSTILE, "channel": HOSTILE, "type": kind,
               "payload": {"name": HOSTILE, "args": {HOSTILE: HOSTILE}, "text": HOSTILE,
                           "ok": True, "output": HOSTILE, "stop_reason": HOSTILE,
                           "detail": HOSTILE, "kind": HOSTILE}}
              for kind in ("call", "result", "line", "check", "attribution", "violation", "x")]
    events += [{**events[0], "channel": "tool"}, {**events[1], "channel": "tool"}]
    page = TranscriptPage([event_row(e) for e in events], 1, 9, 9)
    return [repeat_header(HOSTILE, HOSTILE, 4, entry), repeat_facts(entry),
            transcript_events(page.rows), page_summary(page, [HOSTILE], ("next page", HOSTILE)),
            transcript_hash(entry, False)]


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


# --- 80 columns first ------------------------------------------------------------------------


def test_repeats_that_differ_only_in_a_duration_are_one_reason_with_its_range():
    doc = document()
    hung = [repeat(n, "framework_runtime", "timeout",
                   f"no exit within the timeout ({seconds} s run); stderr: KeyboardInterrupt")
            for n, seconds in ((4, "10.2"), (7, "10.1"), (9, "10.4"))]
    hung.append(repeat(12, "framework_runtime", "timeout", "no exit within the timeout (10.1 s "
                                                           "run); stderr: OSError"))
    nominal = doc["scenarios"][0]
    nominal["repeats"] = [r for r in nominal["repeats"] if r["repeat"] not in (4, 7, 9, 10, 12)]
    nominal["repeats"] += hung
    flat = " ".join(render(run_report(doc), width=80).split())
    assert ("repeats 4, 7, 9: framework_runtime/timeout no exit within the timeout "
            "(10.1–10.4 s run); stderr: KeyboardInterrupt") in flat
    assert "repeat 12: framework_runtime/timeout no exit within the timeout (10.1 s run)" in flat


def test_a_long_scenario_id_gets_a_line_of_its_own_and_is_never_broken():
    doc = document()
    long_id = "a-scenario-id-long-enough-to-push-the-numbers-past-eighty-columns"
    doc["scenarios"][1]["id"] = long_id
    lines = render(run_report(doc), width=80).splitlines()
    at = lines.index(long_id)
    assert lines[at + 1].lstrip().startswith("pass   20/20  100.0% [83.9–100.0]")
    assert max(len(line.rstrip()) for line in lines) <= 80
    # Where there is room, the id and its numbers share a line.
    wide = render(run_report(doc), width=160).splitlines()
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
                            "agent: the run finished, the harness's check failed"]
    # A meaning's first sentence only: `alk causes CODE` has the rest.
    assert "`alk check-worker`" not in out and "alk causes CODE" in out
