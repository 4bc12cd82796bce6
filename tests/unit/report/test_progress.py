"""A run's progress: a live bar on a terminal, plain lines on stderr in a pipe or a CI log."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from alk.records import Outcome
from alk.report.progress import LineProgress, LiveProgress, run_progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def plan(scenarios: tuple[str, ...], repeats: int) -> SimpleNamespace:
    return SimpleNamespace(repeats=repeats, scenarios=[SimpleNamespace(id=s) for s in scenarios],
                           lane=SimpleNamespace(name="demo"))


def finished(scenario: str, outcome: Outcome) -> SimpleNamespace:
    return SimpleNamespace(scenario=scenario, outcome=outcome)


def test_a_line_after_the_first_repeat_every_interval_and_at_the_end():
    clock, out = Clock(), io.StringIO()
    progress = LineProgress(out, every_s=30, clock=clock)
    progress.plan(plan(("a", "b"), 50))
    for outcome in [Outcome.PASS] * 4 + [Outcome.AGENT, Outcome.LANE_INFRA,
                                         Outcome.FRAMEWORK_RUNTIME] + [Outcome.PASS] * 93:
        clock.now += 1.25
        progress.advance(finished("a", outcome))
    assert out.getvalue().splitlines() == [
        "alk demo: 1/100 · pass 1 fail 0 void 0 · 1 s, ~2 min 04 s left",  # alive
        "alk demo: 25/100 · pass 22 fail 2 void 1 · 31 s, ~1 min 34 s left",
        "alk demo: 49/100 · pass 46 fail 2 void 1 · 1 min 01 s, ~1 min 04 s left",
        "alk demo: 73/100 · pass 70 fail 2 void 1 · 1 min 31 s, ~34 s left",
        "alk demo: 97/100 · pass 94 fail 2 void 1 · 2 min 01 s, ~4 s left",
        "alk demo: 100/100 · pass 97 fail 2 void 1 · 2 min 05 s",  # done
    ]


def test_a_slow_repeat_does_not_hold_back_the_next_line():
    clock, out = Clock(), io.StringIO()
    progress = LineProgress(out, every_s=10, clock=clock)
    progress.plan(plan(("slow",), 3))
    clock.now += 4000
    progress.advance(finished("slow", Outcome.PASS))
    clock.now += 1
    progress.advance(finished("slow", Outcome.PASS))
    assert out.getvalue() == "alk demo: 1/3 · pass 1 fail 0 void 0 · 1 h 06 min, ~2 h 13 min left\n"


def test_the_bar_on_a_terminal_and_lines_elsewhere():
    terminal = Console(file=io.StringIO(), force_terminal=True)
    pipe = Console(file=io.StringIO(), force_terminal=False)
    assert isinstance(run_progress(terminal), LiveProgress)
    assert isinstance(run_progress(pipe), LineProgress)
    assert run_progress(pipe, enabled=False) is None


def test_a_line_counts_the_repeats_running_at_once():
    clock, out = Clock(), io.StringIO()
    progress = LineProgress(out, every_s=10, clock=clock)
    progress.plan(plan(("a",), 4))
    for _ in range(3):
        progress.start(SimpleNamespace(scenario=SimpleNamespace(id="a")))
    clock.now += 2
    progress.advance(finished("a", Outcome.PASS))
    assert out.getvalue() == "alk demo: 1/4 · pass 1 fail 0 void 0 · 2 running · 2 s, ~6 s left\n"


def test_a_resumed_run_counts_what_was_done_and_an_interrupted_one_says_where_it_stopped():
    clock, out = Clock(), io.StringIO()
    with LineProgress(out, every_s=60, clock=clock) as progress:
        progress.plan(plan(("a",), 10), done=[finished("a", Outcome.PASS)] * 6)
        clock.now += 2
        progress.advance(finished("a", Outcome.AGENT))
        clock.now += 2
        progress.advance(finished("a", Outcome.PASS))
    # The estimate rests on the repeats run now (2 s each), not on the six done before.
    assert out.getvalue().splitlines() == [
        "alk demo: 7/10 · pass 6 fail 1 void 0 · 2 s, ~6 s left",
        "alk demo: 8/10 · pass 7 fail 1 void 0 · 4 s, ~4 s left",  # at the interrupt
    ]
