"""How long alk takes to turn 100,000 repeat results into its statistics, in four layouts.

The layouts are 1 × 100,000, 100 × 1,000, 1,000 × 100 and 10,000 × 10 (scenarios × repeats).
Each is made of seeded, varied repeats, as a run would hand them to alk: most scenarios pass
every time and some are flaky, 2% of repeats are void, each scenario has a few tool trajectories
and event paths, and durations, CPU and memory vary. alk's side is what the result record's
builder does with them: group the repeats by scenario, `summarize_scenarios` (every scenario
at once, so that the consistency metrics compare what scenarios share once), then
`summarize_lane`; the time spent in alk.stats.consistency's functions is shown apart. Beside it, a
plain Python loop over the same rows that counts the passes and the scored repeats of each
scenario: the least any aggregation costs. Then the size of the statistics as result.json
holds them (`msgspec.json.encode` of every scenario's and the lane's statistics) per repeat,
which must stay proportionate (no curve of 100,000 entries).

Times are medians over the rounds, on a machine others may share: the load average is printed
before and after. Target: alk under 1 s in every layout; the exit status is 1 when one misses
it. `--profile` then shows where alk's time goes in each layout (cProfile, by own time).

    python benchmarks/aggregate.py [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from alk.records import Outcome, RepeatResult
from alk.stats import summary as stats
from alk.stats.records import LaneStats, ScenarioStats
from alk.stats.summary import summarize_lane, summarize_scenarios

ROOT = Path(__file__).resolve().parent.parent
TOTAL = 100_000
LAYOUTS = ((1, 100_000), (100, 1_000), (1_000, 100), (10_000, 10))
TARGET_S = 1.0
VOID_SHARE = 0.02
TOOLS = ("lookup_order", "search", "write_file", "send_email")
CONSISTENCY = ("outcome_consistency", "tool_use_consistencies", "sequence_consistencies",
               "resource_consistencies", "pooled_fault_robustness", "lane_mean")
CAUSES = {Outcome.PASS: "passed", Outcome.LANE_INFRA: "spawn_failed",
          Outcome.FRAMEWORK_RUNTIME: "nonzero_exit", Outcome.AGENT: "wrong_output"}


def make_rows(scenarios: int, repeats: int, seed: int = 12) -> list[RepeatResult]:
    """Repeats in the order a run finishes them: repeat 1 of every scenario, then repeat 2."""
    rng = random.Random(seed)
    kinds = []
    for index in range(scenarios):
        # Three in four scenarios pass every time; the others pass at some rate in (0.3, 1).
        rate = 1.0 if rng.random() < 0.75 else rng.uniform(0.3, 1.0)
        paths = [tuple(f"{rng.choice(TOOLS)}:ok" for _ in range(rng.randint(1, 6)))
                 for _ in range(rng.randint(1, 3))]
        kinds.append((f"scenario-{index:05d}", rate, paths))
    rows = []
    for repeat in range(1, repeats + 1):
        for sid, rate, paths in kinds:
            if rng.random() < VOID_SHARE:
                outcome = Outcome.LANE_INFRA
            elif rng.random() < rate:
                outcome = Outcome.PASS
            else:
                outcome = rng.choice((Outcome.AGENT, Outcome.FRAMEWORK_RUNTIME))
            path = rng.randrange(len(paths))
            rows.append(RepeatResult(
                scenario=sid, repeat=repeat, seed=repeat, outcome=outcome,
                cause=CAUSES[outcome], detail="", duration_s=rng.lognormvariate(0.0, 0.4),
                exit_code=0, signal=None, timed_out=False,
                peak_rss_mb=rng.uniform(40.0, 60.0), cpu_s=rng.uniform(0.1, 0.5),
                containment="pid_namespace", network="none", filesystem="sandbox", attempts=1,
                path_hash=f"path-{path}", violations=0, trajectory=paths[path], claimed=None,
                transcript="", sha256="", path=tuple(f"tool/call {step}@{path}"
                                                     for step in paths[path]),
                trajectory_hash=f"trajectory-{path}"))
    return rows


def aggregate(rows: list[RepeatResult], requested: int
              ) -> tuple[tuple[ScenarioStats, ...], LaneStats]:
    """What the result record's builder does with a run's repeats."""
    by_scenario: dict[str, list[RepeatResult]] = {}
    for row in rows:
        by_scenario.setdefault(row.scenario, []).append(row)
    scenarios = summarize_scenarios(by_scenario, requested)
    return scenarios, summarize_lane(scenarios)


class Stopwatch:
    """Time spent in alk.stats.consistency's functions, as alk.stats.summary calls them."""

    def __init__(self) -> None:
        self.seconds = 0.0
        for name in CONSISTENCY:
            setattr(stats, name, self.timed(getattr(stats, name)))

    def timed(self, function: Callable) -> Callable:
        def run(*args: object, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
        return run


def plain_loop(rows: list[RepeatResult]) -> dict[str, tuple[int, int]]:
    """The baseline: passes and scored repeats per scenario, one pass over the rows."""
    counts: dict[str, list[int]] = {}
    void, passed = Outcome.LANE_INFRA, Outcome.PASS
    for row in rows:
        count = counts.get(row.scenario)
        if count is None:
            count = counts[row.scenario] = [0, 0]
        if row.outcome is not void:
            count[1] += 1
            if row.outcome is passed:
                count[0] += 1
    return {sid: (c[0], c[1]) for sid, c in counts.items()}


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def machine() -> None:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.machine())
    python = Path(sys.executable)
    shown = python.relative_to(ROOT) if python.is_relative_to(ROOT) else python
    print(f"machine   {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), {model}")
    print(f"          load average {load()} at the start")
    print(f"python    {shown} (Python {platform.python_version()})")


def load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def profile(rows: list[RepeatResult], requested: int, lines: int = 12) -> str:
    profiler = cProfile.Profile()
    profiler.runcall(aggregate, rows, requested)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(lines)
    # The table only, its paths shortened to the repository's.
    table = out.getvalue().split("ncalls", 1)[-1]
    return ("   ncalls" + table).replace(str(ROOT) + os.sep, "").rstrip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true",
                        help="then show where alk's time goes in each layout")
    args = parser.parse_args()
    machine()
    print(f"\naggregating {TOTAL:,} repeats, medians of {args.rounds} rounds "
          f"(target: alk under {TARGET_S:.2f} s)\n")
    print(f"{'':19}{'alk':>9}{'of which':>11}{'plain':>9}{'alk ÷':>8}{'stats JSON':>14}")
    print(f"{'scenarios × repeats':>19}{'s':>9}{'consist. s':>11}{'loop s':>9}{'loop':>8}"
          f"{'bytes/repeat':>14}")
    missed = []
    layouts = {}
    watch = Stopwatch()
    for scenarios, repeats in LAYOUTS:
        rows = layouts[(scenarios, repeats)] = make_rows(scenarios, repeats)
        aggregate(rows[:1000], repeats)  # warm up: imports, caches
        mine, consistency = [], []
        for _ in range(args.rounds):
            watch.seconds = 0.0
            mine.append(timed(lambda: aggregate(rows, repeats)))
            consistency.append(watch.seconds)
        alk_s = statistics.median(mine)
        loop_s = statistics.median(timed(lambda: plain_loop(rows)) for _ in range(args.rounds))
        size = len(msgspec.json.encode(aggregate(rows, repeats))) / len(rows)
        if alk_s >= TARGET_S:
            missed.append(f"{scenarios:,} × {repeats:,}: {alk_s:.2f} s")
        layout = f"{scenarios:,} × {repeats:,}"
        print(f"{layout:>19}{alk_s:9.3f}{statistics.median(consistency):11.3f}{loop_s:9.3f}"
              f"{alk_s / loop_s:7.1f}×{size:14.2f}{'  ok' if alk_s < TARGET_S else '  SLOW':>6}")
    if args.profile:
        for (scenarios, repeats), rows in layouts.items():
            print(f"\nwhere alk's time goes, {scenarios:,} × {repeats:,} (cProfile, own time):")
            print(profile(rows, repeats))
    print(f"\nload average {load()} at the end")
    if missed:
        print(f"targets missed: {'; '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
