"""Every view at 80 and 120 columns, against snapshots a person has read (tests/unit/snapshots/).

The views are designed for 80 columns first: these tests pin what a reviewer saw and approved,
so that a change to a view shows up as a diff to look at. After changing a view on purpose, run
`ALK_UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/report/test_views.py`, read the files it
rewrote, and commit them with the change.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import pytest
from rich.console import Group, RenderableType

from alk.api import RunEntry
from alk.causes.advice import advice
from alk.conformance import Finding, Level
from alk.records import Lane, Scenario, SharedScenarios
from alk.report.listings import cause_view, causes_view, findings_view, lanes_view, runs_view
from alk.report.matrix import lane_matrix
from alk.report.terminal.run import rerun_summary, run_report, runs_report
from alk.report.transcript_view import (
    event_row,
    page_summary,
    repeat_facts,
    repeat_header,
    transcript_events,
    transcript_hash,
)
from alk.result.document import RerunOf, RunDocument
from alk.transcript.reader import TranscriptPage

from helpers import documents
from helpers.snapshot import check_snapshot
from helpers.views import RUN, render, repeat

WIDTHS = (80, 120)


def lanes() -> RenderableType:
    lane = Lane(
        name="langgraph", framework="langgraph", requirement=">=1.0,<2",
        description=("LangGraph: a StateGraph with the prebuilt ToolNode, checkpointed in "
                     "SQLite, driven by a scripted model."),
        command=("{python}", "workers/langgraph_worker.py"), required_env=(), timeout_s=30.0,
        repeats=20, scenarios=tuple(Scenario(s, "t") for s in (
            "nominal", "tool-raises", "rate-limit", "malformed-output", "crash-after-effect",
            "denied-tool")),
        path=Path("lanes/langgraph.toml"), root=Path("."), transcript_cap_bytes=1 << 20)
    # A lane that takes its scenarios from a shared file: one its own in place of the file's,
    # one its own only, one skipped.
    sharing = Lane(
        name="strands", framework="strands-agents", requirement=">=1.50,<2", description="",
        command=(".venvs/strands/bin/python", "workers/strands_worker.py"), required_env=(),
        timeout_s=60.0, repeats=20, scenarios=tuple(Scenario(s, "t") for s in (
            "nominal", "tool-raises", "wire-429", "wire-500", "crash-after-effect", "sampled",
            "long-task")),
        path=Path("lanes/strands.toml"), root=Path("."), transcript_cap_bytes=1 << 20,
        shared=SharedScenarios(Path("lanes/scenarios/frameworks.toml"), replaced=("sampled",),
                               added=("long-task",), skipped=("malformed-output",)))
    return lanes_view([lane, sharing], [("lanes/broken.toml", "lanes/broken.toml: repeats: must be a "
                                                     "whole number, got a string")])


TRACEBACK = ["Traceback (most recent call last):",
             '  File "/srv/venv/lib/python3.12/site-packages/smolagents/agents.py", line 1187, '
             'in _step_stream',
             "    chat_message = self.model.generate(input_messages)",
             '  File "/srv/workers/smolagents_worker.py", line 41, in generate',
             '    raise RuntimeError(f"scripted model exhausted after {n} turns")',
             "RuntimeError: scripted model exhausted after 1 turns"]


def show(full: bool = False) -> RenderableType:
    """`alk show`'s page; `full`: with --full, every payload whole."""
    entry = repeat(3, "framework_runtime", "framework_exception",
                   "exit code 1; RuntimeError: scripted model exhausted after 1 turns; raised "
                   "at /srv/venv/lib/python3.12/site-packages/smolagents/agents.py:1187",
                   containment="pid_namespace", network="none", filesystem="sandbox")
    events = [
        {"seq": 1, "t": 0.002, "source": "harness", "channel": "harness", "type": "spawn",
         "payload": {"pid": 4242, "argv": ["/usr/bin/python3", "workers/smolagents_worker.py"],
                     "env": ["HOME", "LANG", "PATH", "PYTHONPATH", "TMPDIR"]}},
        {"seq": 2, "t": 0.041, "source": "worker", "channel": "framework",
         "type": "framework_ready", "payload": {"framework": "smolagents",
                                                "framework_version": "1.21.0"}},
        {"seq": 3, "t": 0.052, "source": "worker", "channel": "tool", "type": "call",
         "payload": {"name": "lookup_order", "args": {"order": "742"}}},
        {"seq": 4, "t": 0.053, "source": "worker", "channel": "tool", "type": "result",
         "payload": {"name": "lookup_order", "ok": True, "output": {"status": "open"}}},
        *({"seq": 5 + i, "t": 0.06, "source": "worker", "channel": "stderr", "type": "line",
           "payload": {"text": text}} for i, text in enumerate(TRACEBACK)),
        {"seq": 11, "t": 0.071, "source": "harness", "channel": "harness", "type": "exit",
         "payload": {"exit_code": 1, "signal": None, "timed_out": False}},
        {"seq": 12, "t": 0.072, "source": "harness", "channel": "harness",
         "type": "attribution", "payload": {"outcome": "framework_runtime",
                                            "cause": "framework_exception",
                                            "detail": entry.detail}},
    ]
    page = TranscriptPage([event_row(e, full=full) for e in events], first=1, matching=12,
                          total=12)
    return Group(repeat_header(RUN, "nominal", 3, entry), repeat_facts(entry),
                 transcript_events(page.rows), page_summary(page, None, None),
                 transcript_hash(entry, True))


def findings() -> RenderableType:
    hint = ("only protocol lines may go to stdout: call `worker.hello()` first, before "
            "importing the framework, and the SDK sends print() and fd 1 to stderr from then on")
    raised = ("the worker injected tool#2; then wrong_stop_reason: stop_reason: expected "
              "\"accepted\", got \"error:RuntimeError\"")
    return findings_view([
        Finding(Level.OK, "handshake", "framework_ready: smolagents 1.21.0 satisfies '>=1.20'"),
        Finding(Level.FAIL, "stdout line 1: not_json (the probe and scenarios nominal, "
                            "tool-raises)", "line is not JSON: 'smolagents banner'", hint),
        Finding(Level.WARN, "scenario nominal: protocol ok; an expectation failed "
                            "(wrong_output)", "output_contains: expected \"742\", got \"\"",
                "not a protocol problem: the agent's answer or effects differ"),
        Finding(Level.FINDING, "scenario tool-raises: framework finding, fault_unrecovered",
                raised, advice("fault_unrecovered", raised)),
    ])


def runs() -> RenderableType:
    """Each state a run can be in: running, stopped (its alk killed), interrupted, complete
    after a resume, a rerun, a run of several lanes one of which has not begun, unreadable."""
    return runs_view([
        RunEntry("20261130-120000-aa0001", "2026-11-30T12:00:00+00:00", "running",
                 ("orders",), ("pydantic-ai 1.0.3",), 14, 40, 42, 0, 1, cells=14, ran=42,
                 planned=280),
        RunEntry("20261130-111500-0dead0", "2026-11-30T11:15:00+00:00", "stopped",
                 ("orders",), ("pydantic-ai 1.0.3",), 3, 42, 42, 0, 0, cells=3, ran=42,
                 planned=150, resume="alk run --resume 20261130-111500-0dead0"),
        RunEntry("20261130-101500-5c0ffe", "2026-11-30T10:15:00+00:00", "complete",
                 ("orders",), ("pydantic-ai 1.0.3",), 1, 0, 1, 0, 1, cells=1, ran=1,
                 planned=1, rerun_of=f"{RUN} nominal 10"),
        RunEntry("20261130-091200-77aa01", "2026-11-30T09:12:00+00:00", "interrupted",
                 ("pydantic-ai", "langgraph", "openai-agents-sdk"),
                 ("pydantic-ai 1.0.3", "langgraph 1.0.2", ""), 14, 101, 120, 20, 1,
                 rule="rate ≥ 90.0%", cells=28, ran=140, planned=560, resumed=1,
                 resume="alk run --resume 20261130-091200-77aa01"),
        RunEntry("20261129-150000-ad0b1e", "2026-11-29T15:00:00+00:00", "stopped",
                 ("orders",), ("pydantic-ai 1.0.3",), 14, 30, 31, 1, 1, cells=14, ran=32,
                 planned=1400, adaptive=True, resume="alk run --resume 20261129-150000-ad0b1e"),
        RunEntry(RUN, "2026-11-29T12:00:00+00:00", "complete", ("orders",),
                 ("pydantic-ai 1.0.3",), 3, 57, 60, 0, 0, cells=3, ran=60, planned=60,
                 resumed=2),
        RunEntry("20261129-080000-2lanes", "2026-11-29T08:00:00+00:00", "complete",
                 ("langgraph", "strands"), ("langgraph 1.0.2", "strands-agents 1.9.0"), 14,
                 560, 560, 0, 0, cells=28, ran=560, planned=560),
        RunEntry("20261128-090000-0ld7e5", "2026-11-28T09:00:00+00:00", "complete",
                 ("orders",), ("pydantic-ai 0.9.1",), 3, 0, 0, 0, 3, cells=3, planned=60,
                 nothing_ran="version_unsupported"),
        RunEntry("20261128-080000-0ld0ne", "", "unreadable", (), (), 0, 0, 0, 0, None,
                 problem="reports/20261128-080000-0ld0ne/result.json: schema 'alk.result/1' "
                         "is not 'alk.result/2' or 'alk.result/3'; this alk cannot read it"),
    ])


def rerun(tmp_path: Path) -> RenderableType:
    """A rerun of the flaky scenario's wrongly answered repeat, after its worker changed."""
    before = documents.run(tmp_path)
    original = next(r for r in before.scenario("nominal").repeats if r.cause == "wrong_output")
    after = documents.made(tmp_path / "after", documents.observation(0.3),
                           repeats=1, nominal=documents.passing(1))
    after = dataclasses.replace(after, settings=dataclasses.replace(
        after.settings, rerun_of=RerunOf(RUN, "nominal", original.repeat, True)))
    return rerun_summary(after, original)


# The run reports are of documents alk made itself (tests/unit/documents.py).
RUNS: dict[str, Callable[[Path], RunDocument]] = {
    "run": documents.run,
    "run-void": documents.mostly_void,
    "run-interrupted": documents.interrupted,
    "run-budget": documents.budget_stopped,
    "run-long-ids": documents.long_ids,
    "run-preflight-refused": documents.refused,
    "run-resumed": documents.resumed,
    "run-one-scenario": documents.one_scenario,
}
# The same, with the statistics block (`--stats`): each figure only where it means something.
STATS_RUNS: dict[str, Callable[[Path], RunDocument]] = {
    "run-stats": documents.run,
    "run-one-scenario-stats": documents.one_scenario,
}
VIEWS: dict[str, Callable[[], RenderableType]] = {
    "show": show,
    "show-full": lambda: show(full=True),
    "lanes": lanes,
    "causes": causes_view,
    "cause": lambda: cause_view("timeout"),
    "cause-fault": lambda: cause_view("fault_unrecovered"),
    "check-worker": findings,
    "runs": runs,
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("view", [*RUNS, *STATS_RUNS, *VIEWS, "matrix", "rerun",
                                  "run-two-lanes"])
def test_view_matches_its_snapshot(view: str, width: int, tmp_path: Path,
                                   private_temp: None) -> None:
    if view == "matrix":
        made = lane_matrix(documents.three_lanes(tmp_path))
    elif view == "rerun":
        made = rerun(tmp_path)
    elif view == "run-two-lanes":
        made = runs_report(documents.two_lanes(tmp_path), Path("/home/ci/project"))
    elif view in STATS_RUNS:
        made = run_report(STATS_RUNS[view](tmp_path), Path("/home/ci/project"), stats=True)
    else:
        made = (run_report(RUNS[view](tmp_path), Path("/home/ci/project")) if view in RUNS
                else VIEWS[view]())
    text = "\n".join(line.rstrip() for line in render(made, width).splitlines()) + "\n"
    check_snapshot(view, text, width)


def split_ids(text: str, ids: list[str]) -> list[str]:
    """The ids that end one line and go on at the start of the next."""
    lines = [line.strip() for line in text.splitlines()]
    return [sid for sid in ids for a, b in zip(lines, lines[1:]) for cut in range(1, len(sid))
            if a.endswith(sid[:cut]) and b.startswith(sid[cut:])
            and not a.endswith(sid) and not b.startswith(sid)]


@pytest.mark.parametrize("view", [*RUNS, "run-two-lanes"])
def test_no_scenario_id_is_split_across_lines_at_80_columns(view: str, tmp_path: Path,
                                                            private_temp: None) -> None:
    docs = (documents.two_lanes(tmp_path) if view == "run-two-lanes"
            else [RUNS[view](tmp_path)])
    ids = sorted({s.id for doc in docs for s in doc.scenarios})
    for stats in (False, True):
        text = render(runs_report(docs, Path("/home/ci/project"), stats=stats), 80)
        assert split_ids(text, ids) == []
        assert all(sid in text for sid in ids)


def test_a_resume_command_under_out_names_that_folder_for_a_run_and_a_rerun() -> None:
    entries = [RunEntry(f"2026113{n}-111500-0dead0", "2026-11-30T11:15:00+00:00", "stopped",
                        ("orders",), ("pydantic-ai 1.0.3",), 1, 1, 1, 0, 0, cells=1, ran=1,
                        planned=20, resume=resume)
               for n, resume in enumerate(("alk run --resume 20261130-111500-0dead0",
                                           f"alk rerun {RUN} nominal 10"))]
    text = " ".join(render(runs_view(entries, out=Path("ci out")), width=120).split())
    assert "resume: alk run --resume 20261130-111500-0dead0 --out 'ci out'" in text
    assert f"resume: alk rerun {RUN} nominal 10 --out 'ci out'" in text
