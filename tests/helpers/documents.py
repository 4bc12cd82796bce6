"""Result documents of every shape the views show, made by alk itself: `run_lane` with a
scripted runner, so that every count, rate and interval in them is one alk would compute."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from alk import api
from alk.cost import RunCost, TokenTotals
from alk.records import Expectations, Lane, Observation, Scenario
from alk.result.document import Resumption, RunDocument, from_json, to_json

from helpers.scripted import ScenarioRunner

RUN = "20261129-120000-ab12c3"
SECRET_ENV = {"PATH": "/bin"}


def observation(duration_s: float, trajectory: tuple[str, ...] = ("lookup_order:ok",),
                **fields: Any) -> Observation:
    values: dict[str, Any] = dict(
        spawned=True, ready={"framework": "pydantic-ai", "framework_version": "1.0.3"},
        started=True, exit_code=0, duration_s=duration_s, cpu_s=duration_s / 2,
        peak_rss_mb=48.5, trajectory=trajectory, containment="pid_namespace", network="none",
        filesystem="sandbox",
        result={"output": "Order 742 is open", "stop_reason": "accepted", "end_state": {}})
    values.update(fields)
    return Observation(**values)


def passing(n: int, seconds: float = 1.21) -> list[Observation]:
    return [observation(seconds + 0.01 * (i % 5)) for i in range(n)]


CRASHED = observation(0.84, result=None, exit_code=1, stderr_tail=(
    "Traceback (most recent call last):\n  File \"worker.py\", line 9, in <module>\n"
    "RuntimeError: [tool] lookup_order exploded\n"))
WRONG = observation(1.32, result={"output": "Order 742 is closed", "stop_reason": "accepted",
                                  "end_state": {}})
OTHER_PATH = observation(1.4, trajectory=("lookup_order:error", "lookup_order:ok"))
NEVER_READY = observation(0.31, ready=None, started=False, result=None, exit_code=1,
                          trajectory=(), stderr_tail="ImportError: cannot import name 'Agent'\n")


def lane(ids: tuple[str, ...], name: str = "orders") -> Lane:
    return Lane(
        name=name, description="A scripted order-lookup agent on Pydantic AI.",
        framework="pydantic-ai", requirement=">=1.0,<2", command=("{python}", "worker.py"),
        required_env=(), timeout_s=30.0, repeats=20,
        scenarios=tuple(Scenario(sid, f"Look up order 742 ({sid})", {},
                                 Expectations(output_contains="open")) for sid in ids),
        path=Path("lanes/orders.toml"), root=Path("."), transcript_cap_bytes=1 << 20)


def made(out: Path, probe: Observation, repeats: int = 20, name: str = "orders",
         **by_scenario: list) -> RunDocument:
    """The document alk writes for these scripted repeats, with a fixed run id."""
    done = api.run_lane(lane(tuple(by_scenario), name), api.RunOptions(repeats=repeats, seed=7),
                        api.RunSetup(out_dir=out, runner=ScenarioRunner(probe, **by_scenario),
                                     environ=SECRET_ENV))
    text = json.dumps(to_json(done.document)).replace(done.document.run_id, RUN)
    return from_json(json.loads(text))


def flaky() -> list[Observation]:
    # 20 repeats: 15 pass on one tool path, 2 on another, 2 crash, 1 answers wrongly.
    script = passing(15) + [OTHER_PATH] * 2
    script[3:3] = [CRASHED]
    script[6:6] = [CRASHED]
    script[9:9] = [WRONG]
    return script


def run(out: Path) -> RunDocument:
    return made(out, observation(0.3), nominal=flaky(), tool_error=passing(20, 0.92),
                remote=[NEVER_READY] * 20)


def one_scenario(out: Path) -> RunDocument:
    """One scenario, two repeats, one of them answering wrongly: too few for the ICC or
    consistency to mean anything."""
    return made(out, observation(0.3), repeats=2, nominal=[observation(1.21), WRONG])


def passed(out: Path) -> RunDocument:
    return made(out, observation(0.3), repeats=3, nominal=passing(3),
                tool_error=passing(3, 0.92))


def mostly_void(out: Path) -> RunDocument:
    return made(out, observation(0.3), nominal=flaky(), tool_error=passing(20, 0.92),
                **{"mostly-void": [NEVER_READY] * 19 + passing(1)})


def interrupted(out: Path) -> RunDocument:
    # Ctrl-C while the sixth repeat of each scenario runs.
    return made(out, observation(0.3), nominal=flaky()[:5] + [KeyboardInterrupt()],
                tool_error=passing(5) + [KeyboardInterrupt()])


def long_ids(out: Path) -> RunDocument:
    return made(out, observation(0.3), nominal=flaky(), **{
        "retries-a-rate-limited-tool-then-answers-from-the-cache": passing(20, 2.3)})


def refused(out: Path) -> RunDocument:
    old = dataclasses.replace(observation(0.3), ready={"framework": "pydantic-ai",
                                                       "framework_version": "0.9.1"})
    return made(out, old, nominal=[], tool_error=[])


def resumed(out: Path) -> RunDocument:
    # The run as alk wrote it, told (by hand: the view only reads these) that it ran 4 at once
    # and was resumed after 23 repeats had finished.
    document = run(out)
    return dataclasses.replace(
        document, settings=dataclasses.replace(document.settings, jobs=4),
        resumed=(Resumption("2026-11-29T12:40:07+00:00", 23),))


def budget_stopped(out: Path) -> RunDocument:
    """A proxy run its token budget stopped: the interrupted run, told (by hand: the view reads
    only these) what the provider counted and why no more repeats started."""
    document = interrupted(out)
    counts = document.aggregate.counts
    stopped = (f"stopped: token budget reached (15,210 of max_tokens.run = 15,000 provider "
               f"tokens) after {counts.completed} of {counts.requested} repeats; raise "
               f"max_tokens.run, or resume (alk run --resume {document.run_id}) for another 15,000")
    return dataclasses.replace(document, cost=RunCost(
        totals=TokenTotals("provider", 12_340, 2_870, counts.completed, unreported=2,
                           refused=1),
        max_tokens_run=15_000, max_tokens_repeat=2_000, stopped=stopped))


def two_lanes(out: Path) -> list[RunDocument]:
    """One run of two lanes on the same scenarios, as `alk run --lane a --lane b`."""
    return three_lanes(out)[:2]


def three_lanes(out: Path) -> list[RunDocument]:
    """One run of three lanes on the same scenarios, as `alk run --lane a --lane b --lane c`."""
    return [made(out / "a", observation(0.3), name="pydantic-ai", nominal=flaky(),
                 tool_error=passing(20, 0.92), remote=[NEVER_READY] * 20),
            made(out / "b", observation(0.3), name="langgraph", nominal=passing(20),
                 tool_error=[CRASHED] * 20, remote=passing(20)),
            made(out / "c", observation(0.3), name="openai-agents-sdk", nominal=passing(20),
                 tool_error=passing(19) + [WRONG], remote=passing(20))]
