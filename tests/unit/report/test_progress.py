"""A run's progress: a live bar on a terminal, plain lines on stderr in a pipe or a CI log.

The clock is the test's: each test drives the callbacks in the order the engine calls them
(`drive`: as `ThreadLane` does, a finished repeat's result, then the start of the repeat that
takes its place), never waiting on the wall clock."""

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


def plan(scenarios: tuple[str, ...], repeats: int, lane: str = "demo") -> SimpleNamespace:
    return SimpleNamespace(repeats=repeats, scenarios=[SimpleNamespace(id=s) for s in scenarios],
                           lane=SimpleNamespace(name=lane))


def item(scenario: str, repeat: int) -> SimpleNamespace:
    return SimpleNamespace(scenario=SimpleNamespace(id=scenario), repeat=repeat)


def finished(scenario: str, repeat: int, outcome: Outcome = Outcome.PASS) -> SimpleNamespace:
    return SimpleNamespace(scenario=scenario, repeat=repeat, outcome=outcome)


def items(scenarios: str, repeats: range) -> list[SimpleNamespace]:
    return [item(s, n) for n in repeats for s in scenarios]


def planned_lines(scenarios: tuple[str, ...], repeats: int
                  ) -> tuple[Clock, io.StringIO, LineProgress]:
    """Plain lines with a fake clock, for a plan whose every repeat is about to run."""
    clock, out = Clock(), io.StringIO()
    progress = LineProgress(out, every_s=10, clock=clock)
    progress.plan(plan(scenarios, repeats))
    progress.batch(items(scenarios, range(1, repeats + 1)))
    return clock, out, progress


def drive(progress, clock: Clock, batch, jobs: int, took: float,
          outcomes=lambda k: Outcome.PASS) -> None:
    """The engine's callbacks for `batch`, `jobs` at once, each repeat `took` seconds."""
    todo, running = list(batch), []
    progress.batch(batch)
    for _ in range(min(jobs, len(todo))):
        running.append((clock.now + took, todo.pop(0)))
        progress.start(running[-1][1])
    k = 0
    while running:
        running.sort(key=lambda pair: pair[0])
        end, one = running.pop(0)
        clock.now = max(clock.now, end)
        progress.advance(finished(one.scenario.id, one.repeat, outcomes(k)))
        k += 1
        if todo:
            running.append((clock.now + took, todo.pop(0)))
            progress.start(running[-1][1])


def test_a_line_after_the_first_repeat_every_interval_and_at_the_end():
    clock, out = Clock(), io.StringIO()
    progress = LineProgress(out, every_s=30, clock=clock)
    progress.plan(plan(("a", "b"), 50))
    mix = [Outcome.PASS] * 4 + [Outcome.AGENT, Outcome.LANE_INFRA, Outcome.FRAMEWORK_RUNTIME]
    drive(progress, clock, items("ab", range(1, 51)), 1, 1.25,
          lambda k: mix[k] if k < len(mix) else Outcome.PASS)
    assert out.getvalue().splitlines() == [
        "alk demo: 1/100 · pass 1 fail 0 void 0 · 1 running · 1 s, ~2 min 04 s left",  # alive
        "alk demo: 25/100 · pass 22 fail 2 void 1 · 1 running · 31 s, ~1 min 34 s left",
        # Past 80 columns with the time elapsed: it gives way.
        "alk demo: 49/100 · pass 46 fail 2 void 1 · 1 running · ~1 min 04 s left",
        "alk demo: 73/100 · pass 70 fail 2 void 1 · 1 running · 1 min 31 s, ~34 s left",
        "alk demo: 97/100 · pass 94 fail 2 void 1 · 1 running · 2 min 01 s, ~4 s left",
        "alk demo: 100/100 · pass 97 fail 2 void 1 · 2 min 05 s",  # done
    ]


def test_with_two_at_once_a_line_counts_both_and_the_first_estimate_leaves_out_start_up():
    clock, out = Clock(), io.StringIO()
    progress = LineProgress(out, every_s=10, clock=clock)
    progress.plan(plan(("a", "b"), 5))
    clock.now += 5  # the worker's start-up and the probe, before any repeat
    drive(progress, clock, items("ab", range(1, 6)), 2, 2.0)
    # Ten repeats of 2 s, two at once: 8 s remain after the first pair. Not 9 × 7 s: the
    # time since the run began (start-up included) over one repeat, as if one ran at a time.
    assert out.getvalue().splitlines() == [
        "alk demo: 1/10 · pass 1 fail 0 void 0 · 2 running · 7 s, ~8 s left",
        "alk demo: 10/10 · pass 10 fail 0 void 0 · 15 s",
    ]


def test_a_line_waits_for_the_repeat_that_takes_the_finished_ones_place():
    clock, out, progress = planned_lines(("a",), 4)
    for number in (1, 2, 3):
        progress.start(item("a", number))
    clock.now += 2
    progress.advance(finished("a", 1))
    assert out.getvalue() == ""  # the fourth is about to start
    progress.start(item("a", 4))
    assert out.getvalue() == ("alk demo: 1/4 · pass 1 fail 0 void 0 · 3 running · 2 s, "
                              "~2 s left\n")


def test_a_line_is_written_at_once_when_no_repeat_will_take_the_place():
    clock, out, progress = planned_lines(("a",), 2)
    progress.start(item("a", 1))
    progress.start(item("a", 2))
    clock.now += 3
    progress.advance(finished("a", 1))
    assert out.getvalue() == "alk demo: 1/2 · pass 1 fail 0 void 0 · 1 running · 3 s\n"


def test_a_slow_repeat_does_not_hold_back_the_next_line():
    clock, out, progress = planned_lines(("slow",), 3)
    progress.start(item("slow", 1))
    clock.now += 4000
    progress.advance(finished("slow", 1))
    progress.start(item("slow", 2))
    clock.now += 1
    progress.advance(finished("slow", 2))
    progress.start(item("slow", 3))
    assert out.getvalue() == ("alk demo: 1/3 · pass 1 fail 0 void 0 · 1 running · 1 h 06 min, "
                              "~2 h 13 min left\n")


def test_every_line_fits_80_columns_and_keeps_the_count_running_while_it_can():
    clock, out = Clock(), io.StringIO()
    progress = LineProgress(out, every_s=10, clock=clock)
    progress.plan(plan(("a", "b"), 600, "openai-agents-sdk-with-litellm"))
    kinds = [Outcome.PASS, Outcome.AGENT, Outcome.LANE_INFRA]
    drive(progress, clock, items("ab", range(1, 601)), 16, 30.0, lambda k: kinds[k % 3])
    lines = out.getvalue().splitlines()
    assert len(lines) > 20
    assert max(len(line) for line in lines) <= 80, lines
    # The time elapsed gave way, then the end of the lane's name; the count running stays.
    assert lines[0] == ("alk openai-agents-sd…: 1/1200 · pass 1 fail 0 void 0 · 16 running · "
                        "~37 min left")
    assert lines[-1] == ("alk openai-agents-sdk-with-litellm: 1200/1200 · pass 400 fail 400 "
                         "void 400")


def test_under_repeats_auto_a_line_counts_the_rounds_asked_so_far_of_an_upper_bound():
    clock, out = Clock(), io.StringIO()
    with LineProgress(out, every_s=10, clock=clock) as progress:
        progress.plan(plan(("a", "b"), 100))
        drive(progress, clock, items("ab", range(1, 6)), 2, 4.0)
        drive(progress, clock, items("a", range(6, 11)), 2, 4.0)  # b settled after a round
    assert out.getvalue().splitlines() == [
        "alk demo: 1/10 (≤200) · pass 1 fail 0 void 0 · 2 running · ~16 s left in round",
        "alk demo: 7/10 (≤200) · pass 7 fail 0 void 0 · 2 running · ~4 s left in round",
        "alk demo: 13/15 (≤200) · pass 13 fail 0 void 0 · 2 running · ~4 s left in round",
        "alk demo: 15/15 (≤200) · pass 15 fail 0 void 0 · 32 s",  # when the run ends
    ]


def test_the_bar_on_a_terminal_and_lines_elsewhere():
    terminal = Console(file=io.StringIO(), force_terminal=True)
    pipe = Console(file=io.StringIO(), force_terminal=False)
    assert isinstance(run_progress(terminal), LiveProgress)
    assert isinstance(run_progress(pipe), LineProgress)
    assert run_progress(pipe, enabled=False) is None


def test_a_resumed_run_counts_what_was_done_and_an_interrupted_one_says_where_it_stopped():
    clock, out = Clock(), io.StringIO()
    with LineProgress(out, every_s=60, clock=clock) as progress:
        progress.plan(plan(("a",), 10), done=[finished("a", n) for n in range(1, 7)])
        progress.batch(items("a", range(7, 11)))
        progress.start(item("a", 7))
        clock.now += 2
        progress.advance(finished("a", 7, Outcome.AGENT))
        progress.start(item("a", 8))
        clock.now += 2
        progress.advance(finished("a", 8))
    # The estimate rests on the repeats run now (2 s each), not on the six done before.
    assert out.getvalue().splitlines() == [
        "alk demo: 7/10 · pass 6 fail 1 void 0 · 1 running · 2 s, ~6 s left",
        "alk demo: 8/10 · pass 7 fail 1 void 0 · 4 s, ~4 s left",  # at the interrupt
    ]


def live_text(progress: LiveProgress, width: int = 80) -> list[str]:
    console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    console.print(progress.progress.get_renderable())
    return console.file.getvalue().splitlines()


def test_the_live_bars_carry_an_estimate_and_fill_under_repeats_auto():
    clock = Clock()
    console = Console(file=io.StringIO(), force_terminal=True)
    progress = LiveProgress(console, clock=clock)
    progress.plan(plan(("nominal", "tool-raises-in-the-middle"), 100, "pydantic-ai"))
    drive(progress, clock, items(("nominal", "tool-raises-in-the-middle"), range(1, 6)), 2, 2.0)
    progress.batch(items(("nominal",), range(6, 11)))  # the next round: one scenario is settled
    progress.start(item("nominal", 6))
    progress.start(item("nominal", 7))
    clock.now += 1
    progress.advance(finished("nominal", 6))
    lane, nominal, settled = live_text(progress)
    assert lane.startswith("pydantic-ai") and lane.rstrip().endswith(
        "11/15 ≤200 1 running · ~3 s left")
    assert "6/10 ≤100" in nominal and "pass 6" in nominal
    assert "5/5 ≤100" in settled
    tasks = progress.progress.tasks
    assert [task.finished for task in tasks] == [False, False, True]  # the settled one is full
    assert all(len(line) <= 80 for line in live_text(progress))


def test_a_run_under_repeats_auto_tells_its_progress_each_round(tmp_path):
    """The executor hears the rounds (`on_batch`): a scenario that settles is counted as
    planned no further, so that the run ends at done of planned, not of the maximum."""
    from alk import api

    from helpers.documents import SECRET_ENV, lane, observation, passing
    from helpers.scripted import ScenarioRunner

    clock, out = Clock(), io.StringIO()
    with LineProgress(out, every_s=3600, clock=clock) as progress:
        api.run_lane(lane(("nominal",)),
                     api.RunOptions(seed=1, adaptive=api.Adaptive(max_repeats=40, round_size=5)),
                     api.RunSetup(out_dir=tmp_path, environ=SECRET_ENV,
                                  runner=ScenarioRunner(observation(0.3), nominal=passing(40)),
                                  on_plan=progress.plan, on_batch=progress.batch,
                                  on_start=progress.start, on_repeat=progress.advance))
    # 16 agreeing repeats settle the width rule at 0.2: four rounds of five, of at most 40.
    assert out.getvalue().splitlines()[-1] == ("alk orders: 20/20 (≤40) · pass 20 fail 0 void 0 "
                                               "· 0 s")
