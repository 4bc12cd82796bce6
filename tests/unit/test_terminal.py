"""The terminal renderables, printed to an in-memory console and read back as plain text."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType

from alk.records import Lane, Scenario
from alk.report.terminal import causes_table, lanes_table, run_report, transcript_view

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
    assert "ICC 0.07" in out
    assert "INTERRUPTED" not in out


def test_run_report_explains_each_scenario_that_did_not_pass():
    out = render(run_report(document()))
    assert "why nominal is flaky" in out
    assert "why tool_error" not in out
    # the bracketed detail survives because values are never parsed as markup
    assert ("repeat 4: framework_runtime/nonzero_exit — exit status 1; last stderr line: "
            "RuntimeError: [tool] lookup exploded") in out
    assert f"transcripts/{RUN}/nominal/repeat-04.jsonl" in out
    assert "repeat 10: agent/wrong_output" in out
    assert "repeat 11" not in out
    assert "why remote is void" in out and "OPENAI_API_KEY is not set" in out
    assert f"reports/{RUN}/result.json" in out


def test_run_report_marks_an_interrupted_run_and_missing_values():
    doc = document()
    doc["status"] = "interrupted"
    doc["aggregate"]["icc"] = {"value": None, "reason": "no variance: every repeat passed"}
    out = render(run_report(doc))
    assert "INTERRUPTED" in out
    assert "ICC — (no variance: every repeat passed)" in out
    assert "—" in out.split("remote", 1)[1]  # no pass rate for the void scenario


def test_run_report_puts_a_failed_preflight_first():
    out = render(run_report(document(preflight_ok=False)))
    assert "Nothing ran: version_unsupported" in out
    assert "pydantic-ai 0.9.1" in out and ">=1.0,<2" in out
    assert "does not satisfy" in out
    assert "Install a version the lane supports" in out
    assert "not scored: nominal, tool_error, remote" in out
    assert "Pass rate" not in out  # no empty table


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


def test_transcript_view_summarises_payloads():
    out = render(transcript_view(EVENTS))
    assert "0.012" in out
    assert 'lookup_order(order=742)' in out
    assert "lookup_order error: no such order" in out
    assert "stop_reason=accepted output='order is closed'" in out
    assert '✗ output_contains expected "open" actual "order is closed"' in out
    assert "agent/wrong_output — expected 'open'" in out


def test_transcript_view_filters_by_channel():
    out = render(transcript_view(EVENTS, channels={"tool"}))
    assert "lookup_order(order=742)" in out
    assert "warning: retrying" not in out and "output_contains" not in out
    assert "2 of 7 events on tool" in out


def test_transcript_view_cuts_long_payloads():
    event = {"seq": 1, "t": 0.1, "source": "harness", "channel": "harness", "type": "exit",
             "payload": {"blob": "x" * 500}}
    out = render(transcript_view([event]), width=400)
    assert "…" in out and "x" * 200 not in out


def test_lanes_table_lists_lanes_and_load_errors():
    lane = Lane(
        name="demo", description="", framework="pydantic-ai", requirement=">=1.0,<2",
        command=("{python}", "worker.py"), required_env=(), timeout_s=30.0, repeats=20,
        scenarios=(Scenario("nominal", "look up"), Scenario("tool_error", "fail")),
        path=Path("lanes/demo.toml"), root=Path("lanes"), transcript_cap_bytes=1 << 20,
    )
    out = render(lanes_table([lane], [("lanes/broken.toml", "repeats: expected an integer")]))
    assert "demo" in out and "nominal, tool_error" in out and "30 s" in out
    assert "lanes/demo.toml" in out
    assert "lanes/broken.toml" in out and "repeats: expected an integer" in out


def test_causes_table_lists_the_whole_catalogue():
    out = render(causes_table(), width=200)
    for code in ("passed", "env_missing", "nonzero_exit", "wrong_files"):
        assert code in out
    assert "framework_runtime" in out and "lane_infra" in out


def test_control_characters_from_a_worker_never_reach_the_terminal():
    events = [{"seq": 1, "t": 0.0, "source": "worker", "channel": "stderr", "type": "line",
               "payload": {"text": "\x1b[2J\x1b]0;pwned\x07 all 20 passed"}}]
    out = render(transcript_view(events))
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out
