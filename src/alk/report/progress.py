"""Progress of a run while it goes on, on stderr so that `--json` on stdout stays clean: a live
bar on a terminal, and plain lines in a pipe or a CI log, where a bar prints nothing until the end.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from alk.records import Outcome, Plan, RepeatResult, RepeatSpec

# Without a terminal: a line this often (and after the first repeat and the last).
LINE_EVERY_S = 10.0

# The counts a line shows, in this order; a lane_infra repeat is void, never a failure.
_TALLY = (("pass", (Outcome.PASS,)), ("fail", (Outcome.FRAMEWORK_RUNTIME, Outcome.AGENT)),
          ("void", (Outcome.LANE_INFRA,)))


class LiveProgress:
    """A rich progress bar per scenario, cleared when the run ends (the report follows)."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
            TextColumn("{task.fields[tally]}"), TextColumn("{task.fields[running]}"),
            TimeElapsedColumn(),
            console=console, transient=True)
        self.tasks: dict[str, int] = {}
        self.tallies: dict[str, dict[str, int]] = {}
        self.running = 0
        self.overall = 0

    def __enter__(self) -> LiveProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def plan(self, plan: Plan, done: Sequence[RepeatResult] = ()) -> None:
        """A lane's run begins (`done`: the repeats a resumed run had finished before).
        A lane of a run of several starts afresh: the bars of the one before go."""
        for task in self.progress.task_ids:
            self.progress.remove_task(task)
        self.running, self.tasks, self.tallies = 0, {}, {}
        self.overall = self.progress.add_task(
            plan.lane.name[:24], total=plan.repeats * len(plan.scenarios), tally="",
            running="running 0")
        for scenario in plan.scenarios:
            self.tasks[scenario.id] = self.progress.add_task(
                "  " + scenario.id[:22], total=plan.repeats, tally="", running="")
            self.tallies[scenario.id] = {}
        for result in done:
            self._count(result)

    def _count(self, result: RepeatResult) -> None:
        self.progress.update(self.overall, advance=1)
        tally = self.tallies[result.scenario]
        name = _tally_name(result.outcome)
        tally[name] = tally.get(name, 0) + 1
        text = " ".join(f"{label} {tally[label]}" for label, _ in _TALLY if label in tally)
        self.progress.update(self.tasks[result.scenario], advance=1, tally=text)

    def start(self, item: RepeatSpec) -> None:
        self.running += 1
        self.progress.update(self.overall, running=f"running {self.running}")

    def advance(self, result: RepeatResult) -> None:
        self.running = max(0, self.running - 1)
        self.progress.update(self.overall, running=f"running {self.running}")
        self._count(result)


class LineProgress:
    """Plain lines: after the first repeat (the run is alive), then every `every_s` seconds,
    and when the last repeat is done. Each says done of total, pass/fail/void so far, the time
    elapsed and an estimate of what remains. Repeats are interleaved across scenarios, so the
    run's count, not a scenario's, is what moves."""

    def __init__(self, stream: TextIO, every_s: float = LINE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.every_s, self.clock = stream, every_s, clock
        self.started = self.last_line = clock()
        self.total = self.done = self.running = self.before = self.last_done = 0
        self.lane = ""
        self.tally = {label: 0 for label, _ in _TALLY}

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        # Cut short (Ctrl-C), the run still says where it stopped.
        if self.total and self.done != self.total and self.last_done != self.done:
            self._line(self.clock())

    def plan(self, plan: Plan, done: Sequence[RepeatResult] = ()) -> None:
        """`done`: the repeats a resumed run had finished before: counted, but not in the
        rate that the estimate of what remains is drawn from."""
        self.started = self.last_line = self.clock()
        self.total = plan.repeats * len(plan.scenarios)
        self.running = 0
        self.lane = plan.lane.name
        self.tally = {label: 0 for label, _ in _TALLY}
        for result in done:
            self.tally[_tally_name(result.outcome)] += 1
        self.before = self.done = self.last_done = len(done)

    def start(self, item: RepeatSpec) -> None:
        self.running += 1

    def advance(self, result: RepeatResult) -> None:
        self.running = max(0, self.running - 1)
        self.done += 1
        self.tally[_tally_name(result.outcome)] += 1
        now = self.clock()
        if self.done in (self.before + 1, self.total) or now - self.last_line >= self.every_s:
            self._line(now)

    def _line(self, now: float) -> None:
        self.last_line, self.last_done = now, self.done
        self.stream.write(self.line(now) + "\n")
        self.stream.flush()

    def line(self, now: float) -> str:
        elapsed = now - self.started
        counts = " ".join(f"{label} {n}" for label, n in self.tally.items())
        running = f"{self.running} running · " if self.running else ""
        text = (f"alk {self.lane}: {self.done}/{self.total} · {counts} · {running}"
                f"{_clock(elapsed)}")
        left, ran = self.total - self.done, self.done - self.before
        return text + (f", ~{_clock(elapsed / ran * left)} left" if left and ran else "")


def run_progress(console: Console, enabled: bool = True) -> LiveProgress | LineProgress | None:
    """The progress a run shows on `console` (stderr): None when disabled."""
    if not enabled:
        return None
    if console.is_terminal:
        return LiveProgress(console)
    return LineProgress(console.file)


def _tally_name(outcome: Outcome) -> str:
    return next(label for label, outcomes in _TALLY if outcome in outcomes)


def _clock(seconds: float) -> str:
    """12 s, 3 min 05 s, 1 h 02 min: short, and never a float's noise."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"
