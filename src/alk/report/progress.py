"""Progress of a run while it goes on, on stderr so that `--json` on stdout stays clean: a live
bar on a terminal, and plain lines in a pipe or a CI log, where a bar prints nothing until the end.

Both count what is planned so far: every repeat of a run of fixed repeats, and under
`--repeats auto` the rounds asked for until now, the maximum shown as an upper bound (≤N), so
that a bar fills when its scenario settles. Both estimate what remains from how long repeats
take and how many run at once (`_Pace`), never from the time since the run began, which holds
the worker's start-up and the probe.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from alk.records import Outcome, Plan, RepeatResult, RepeatSpec

# Without a terminal: a line this often (and after the first repeat and the last).
LINE_EVERY_S = 10.0
# A plain line fits this many columns, a CI log's and a terminal's narrowest.
LINE_WIDTH = 80

# The counts a line shows, in this order; a lane_infra repeat is void, never a failure.
_TALLY = (("pass", (Outcome.PASS,)), ("fail", (Outcome.FRAMEWORK_RUNTIME, Outcome.AGENT)),
          ("void", (Outcome.LANE_INFRA,)))


class _Pace:
    """When the running repeats started and how long the finished ones took: what remains is
    the work left (the running repeats' rest, the others' whole) shared among the repeats that
    run at once."""

    def __init__(self) -> None:
        self.started: dict[tuple[str, int], float] = {}
        self.took = 0.0
        self.finished = 0
        self.at_once = 1

    def start(self, key: tuple[str, int], now: float) -> None:
        self.started[key] = now
        self.at_once = max(self.at_once, len(self.started))

    def finish(self, key: tuple[str, int], now: float) -> None:
        began = self.started.pop(key, None)
        if began is not None:
            self.took += now - began
            self.finished += 1

    def left(self, repeats: int, now: float) -> float | None:
        """Seconds until `repeats` more (the running ones among them) have finished; None
        before any repeat was timed."""
        if not self.finished or repeats <= 0:
            return None
        mean = self.took / self.finished
        rests = [max(0.0, mean - (now - began)) for began in self.started.values()]
        waiting = max(0, repeats - len(rests))
        return max(max(rests, default=0.0), (sum(rests) + waiting * mean) / self.at_once)


class _Count:
    """A lane's repeats: done of planned so far (`planned`), and the plan's maximum."""

    def __init__(self, plan: Plan, done: Sequence[RepeatResult]) -> None:
        self.most = plan.repeats * len(plan.scenarios)
        self.before = len(done)  # a resumed run's, finished before
        self.done = len(done)
        self.asked = len(done)
        self.batched = False
        self.per_scenario = {scenario.id: 0 for scenario in plan.scenarios}
        self.asked_of = {scenario.id: 0 for scenario in plan.scenarios}
        for result in done:
            self.per_scenario[result.scenario] += 1
            self.asked_of[result.scenario] += 1
        self.repeats = plan.repeats

    def batch(self, items: Sequence[RepeatSpec]) -> None:
        self.batched = True
        self.asked += len(items)
        for item in items:
            self.asked_of[item.scenario.id] += 1

    @property
    def planned(self) -> int:
        return self.asked if self.batched else self.most

    def planned_of(self, scenario: str) -> int:
        return self.asked_of[scenario] if self.batched else self.repeats

    @property
    def bounded(self) -> bool:
        """Is the maximum only an upper bound (an adaptive run, rounds still to decide)?"""
        return self.planned < self.most


class LiveProgress:
    """A rich progress bar per scenario under one for the lane, which says how many run at
    once and the estimate of what remains; cleared when the run ends (the report follows)."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=12),
            TextColumn("{task.fields[count]}"), TextColumn("{task.fields[status]}"),
            console=console, transient=True, get_time=clock)
        self.tasks: dict[str, int] = {}
        self.tallies: dict[str, dict[str, int]] = {}
        self.running = 0
        self.overall = 0
        self.count: _Count | None = None
        self.pace = _Pace()

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
        self.pace = _Pace()
        self.count = _Count(plan, done)
        self.overall = self.progress.add_task(plan.lane.name[:20], count="", status="")
        for scenario in plan.scenarios:
            self.tasks[scenario.id] = self.progress.add_task(
                "  " + scenario.id[:18], count="", status="")
            self.tallies[scenario.id] = {}
        for result in done:
            self._tally(result)
        self._show()

    def batch(self, items: Sequence[RepeatSpec]) -> None:
        if self.count is not None:
            self.count.batch(items)
            self._show()

    def start(self, item: RepeatSpec) -> None:
        self.running += 1
        self.pace.start((item.scenario.id, item.repeat), self.clock())
        self._show()

    def advance(self, result: RepeatResult) -> None:
        self.running = max(0, self.running - 1)
        self.pace.finish((result.scenario, result.repeat), self.clock())
        if self.count is not None:
            self.count.done += 1
            self.count.per_scenario[result.scenario] += 1
        self._tally(result)
        self._show()

    def _tally(self, result: RepeatResult) -> None:
        tally = self.tallies[result.scenario]
        name = _tally_name(result.outcome)
        tally[name] = tally.get(name, 0) + 1

    def _show(self) -> None:
        count = self.count
        if count is None:
            return
        bound = f" ≤{count.most}" if count.bounded else ""
        left = self.pace.left(count.planned - count.done, self.clock())
        status = f"{self.running} running" + (f" · ~{_clock(left)} left"
                                              if left is not None and left >= 1 else "")
        self.progress.update(self.overall, total=count.planned, completed=count.done,
                             count=f"{count.done}/{count.planned}{bound}", status=status)
        for scenario, task in self.tasks.items():
            tally = self.tallies[scenario]
            planned = count.planned_of(scenario)
            self.progress.update(
                task, total=planned, completed=count.per_scenario[scenario],
                count=f"{count.per_scenario[scenario]}/{planned}"
                      + (f" ≤{count.repeats}" if planned < count.repeats else ""),
                status=" ".join(f"{label} {tally[label]}" for label, _ in _TALLY
                                if label in tally))


class LineProgress:
    """Plain lines: after the first repeat (the run is alive), then every `every_s` seconds,
    and when the last repeat is done. Each says done of planned, pass/fail/void so far, how
    many run at once, the time elapsed and an estimate of what remains, in at most 80 columns.
    Repeats are interleaved across scenarios, so the run's count, not a scenario's, is what
    moves.

    A line that falls due when a repeat finishes waits for the repeat that takes its place
    (heard a moment later), so that it counts the repeats running at once, not one fewer; when
    none will start, it is written at once."""

    def __init__(self, stream: TextIO, every_s: float = LINE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.every_s, self.clock = stream, every_s, clock
        self.started = self.last_line = clock()
        self.running = self.last_done = 0
        self.due = False
        self.lane = ""
        self.count: _Count | None = None
        self.pace = _Pace()
        self.tally = {label: 0 for label, _ in _TALLY}

    @property
    def done(self) -> int:
        return self.count.done if self.count else 0

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        # Cut short (Ctrl-C), or an adaptive run's last round: the run says where it stopped.
        self._flush()

    def plan(self, plan: Plan, done: Sequence[RepeatResult] = ()) -> None:
        """`done`: the repeats a resumed run had finished before: counted, but not in the
        pace that the estimate of what remains is drawn from."""
        self._flush()  # the lane before's last words
        self.started = self.last_line = self.clock()
        self.count = _Count(plan, done)
        self.running, self.due, self.pace = 0, False, _Pace()
        self.lane = plan.lane.name
        self.tally = {label: 0 for label, _ in _TALLY}
        for result in done:
            self.tally[_tally_name(result.outcome)] += 1
        self.last_done = len(done)

    def batch(self, items: Sequence[RepeatSpec]) -> None:
        if self.count is not None:
            self.count.batch(items)

    def start(self, item: RepeatSpec) -> None:
        now = self.clock()
        self.running += 1
        self.pace.start((item.scenario.id, item.repeat), now)
        if self.due:
            self._line(now)

    def advance(self, result: RepeatResult) -> None:
        now = self.clock()
        count = self.count
        assert count is not None, "a repeat finished before its plan was heard"
        self.running = max(0, self.running - 1)
        count.done += 1
        self.pace.finish((result.scenario, result.repeat), now)
        self.tally[_tally_name(result.outcome)] += 1
        if count.done == count.before + 1 or now - self.last_line >= self.every_s:
            self.due = True
        if count.done >= count.most or (self.due and count.done + self.running >= count.planned):
            self._line(now)  # the last, or none will start to take this one's place

    def _flush(self) -> None:
        if self.count is not None and self.last_done != self.done:
            self._line(self.clock())

    def _line(self, now: float) -> None:
        self.last_line, self.last_done, self.due = now, self.done, False
        self.stream.write(self.line(now) + "\n")
        self.stream.flush()

    def line(self, now: float) -> str:
        count = self.count
        assert count is not None
        head = f"{count.done}/{count.planned}" + (f" (≤{count.most})" if count.bounded else "")
        counts = " ".join(f"{label} {n}" for label, n in self.tally.items())
        running = f"{self.running} running" if self.running else ""
        elapsed = _clock(now - self.started)
        left = self.pace.left(count.planned - count.done, now)
        eta = (f"~{_clock(left)} left" + (" in round" if count.bounded else "")
               if left is not None and left >= 1 else "")
        # What gives way past 80 columns: the time elapsed, then the end of the lane's name
        # (to 8 characters), then the count running, then more of the name.
        text = ""
        for shown, shortest in (((running, elapsed), None), ((running, ""), 8), (("", ""), 1)):
            tail = " · ".join(part for part in (counts, *shown) if part)
            if eta:
                tail += (", " if shown[1] else " · ") + eta
            text = f"alk {self.lane}: {head} · {tail}"
            over = len(text) - LINE_WIDTH
            if over <= 0:
                return text
            if shortest is not None and len(self.lane) - over - 1 >= shortest:
                return f"alk {self.lane[:len(self.lane) - over - 1]}…: {head} · {tail}"
        return text  # counts past 80 columns alone: no name could make them fit


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
    """12 s, 3 min 05 s, 36 min, 1 h 02 min: short, and never a float's noise (nor seconds
    past ten minutes, which no estimate is good to)."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"
