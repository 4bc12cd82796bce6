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
    return SimpleNamespace(repeats=repeats, scenarios=[SimpleNamespace(id=s) for s in scenarios])


def finished(scenario: str, outcome: Outcome) -> SimpleNamespace:
    return SimpleNamespace(scenario=scenario, outcome=outcome)


def test_a_line_per_finished_scenario_with_tallies_and_what_remains():
    clock, out = Clock(), io.StringIO()
    progress = LineProgress(out, every_s=1_000, clock=clock)
    progress.plan(plan(("a", "b"), 2))
    clock.now += 4
    progress.advance(finished("a", Outcome.PASS))
    assert out.getvalue() == ""  # a is not done yet, and the interval has not passed
    clock.now += 4
    progress.advance(finished("a", Outcome.AGENT))
    assert out.getvalue() == "alk: 2/4 repeats · pass 1 fail 1 void 0 · 8 s, ~8 s left · a done\n"
    clock.now += 100
    progress.advance(finished("b", Outcome.LANE_INFRA))
    progress.advance(finished("b", Outcome.FRAMEWORK_RUNTIME))
    assert out.getvalue().splitlines()[-1] == \
        "alk: 4/4 repeats · pass 1 fail 2 void 1 · 1 min 48 s · b done"


def test_a_long_scenario_still_prints_a_line_every_interval():
    clock, out = Clock(), io.StringIO()
    progress = LineProgress(out, every_s=30, clock=clock)
    progress.plan(plan(("slow",), 100))
    for _ in range(3):
        clock.now += 11
        progress.advance(finished("slow", Outcome.PASS))
    assert out.getvalue() == "alk: 3/100 repeats · pass 3 fail 0 void 0 · 33 s, ~17 min 47 s left\n"


def test_the_bar_on_a_terminal_and_lines_elsewhere():
    terminal = Console(file=io.StringIO(), force_terminal=True)
    pipe = Console(file=io.StringIO(), force_terminal=False)
    assert isinstance(run_progress(terminal), LiveProgress)
    assert isinstance(run_progress(pipe), LineProgress)
    assert run_progress(pipe, enabled=False) is None
