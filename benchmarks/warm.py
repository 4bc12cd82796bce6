"""A warm start against a cold one: whole framework lanes, side by side in one run.

For each lane, in every round one after the other (so that drift on a shared machine lands on
both): `alk run --lane L --repeats R` cold, then the same with `--warm`, same seed, same `-j`.
It prints each one's wall time, the ratio, and whether every repeat came to the same outcome
and cause; and, as what a user without alk pays at the least for a fresh process a repeat,
the framework's import alone (`python -c 'import MODULE'`, once a repeat, one at a time).
Target: warm at least 5x faster than cold on each lane, with the same verdicts; the exit
status is 1 when one is missed.

What it cannot see: a lane's scenarios that wait on purpose (a stalled stream, a retry's
back-off) cost the same warm or cold, so a lane made of them gains less; and the figures are
wall time on whatever else the machine is doing.

    python benchmarks/warm.py [--lanes pydantic-ai,langgraph,openai-agents] [--repeats 5]
                              [--rounds 2] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 5.0
# Scenarios whose verdict is a race cold as warm (LangGraph's resumed graph finds its last
# checkpoint or not: tests/e2e/test_fw_warm.py), left out of the verdicts' comparison.
RACING = {("langgraph", "crash-after-effect")}
# What each lane's worker imports, for the import-alone baseline.
MODULES = {
    "pydantic-ai": "pydantic_ai, pydantic_ai.models.openai",
    "langgraph": "langgraph.prebuilt, langchain_openai",
    "openai-agents": "agents",
    "smolagents": "smolagents",
    "autogen": "autogen_agentchat, autogen_ext.models.openai",
}


def run(lane: str, repeats: int, jobs: int, warm: bool) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="alk-bench-warm-") as folder:
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "alk", "run", "--lane", str(ROOT / "lanes" / f"{lane}.toml"),
             "--repeats", str(repeats), "-j", str(jobs), "--seed", "5", "--json", "-q",
             *(("--warm",) if warm else ())],
            cwd=folder, capture_output=True, text=True)
        spent = time.perf_counter() - began
    if done.returncode not in (0, 1):
        sys.exit(f"{lane}: alk run failed ({done.returncode}): {done.stderr[-1500:]}")
    document = json.loads(done.stdout)
    verdicts = {(r["scenario"], r["repeat"]): (r["outcome"], r["cause"])
                for s in document["scenarios"] for r in s["repeats"]
                if (lane, r["scenario"]) not in RACING}
    kinds = {r["containment"] for s in document["scenarios"] for r in s["repeats"]}
    if warm and kinds != {"warm_fork"}:
        sys.exit(f"{lane}: the warm run ran {sorted(kinds)}: {done.stderr[-500:]}")
    return spent, verdicts


def import_alone(lane: str) -> float | None:
    module = MODULES.get(lane)
    if module is None:
        return None
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lanes", default="pydantic-ai,langgraph,openai-agents")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    lanes = args.lanes.split(",")
    times: dict[str, dict[str, list[float]]] = {lane: {"cold": [], "warm": []} for lane in lanes}
    same: dict[str, bool] = {lane: True for lane in lanes}
    counts: dict[str, int] = {}
    imports: dict[str, list[float]] = {lane: [] for lane in lanes}
    for round_number in range(1, args.rounds + 1):
        for lane in lanes:
            cold_s, cold = run(lane, args.repeats, args.jobs, warm=False)
            warm_s, warm = run(lane, args.repeats, args.jobs, warm=True)
            times[lane]["cold"].append(cold_s)
            times[lane]["warm"].append(warm_s)
            same[lane] = same[lane] and cold == warm
            for key in sorted(set(cold) | set(warm)):
                if cold.get(key) != warm.get(key):
                    print(f"  {lane} {key[0]} #{key[1]}: cold {cold.get(key)}, warm "
                          f"{warm.get(key)}", file=sys.stderr)
            counts[lane] = len(cold)
            alone = import_alone(lane)
            if alone is not None:
                imports[lane].append(alone)
            print(f"round {round_number} {lane}: cold {cold_s:.1f} s, warm {warm_s:.1f} s",
                  file=sys.stderr)
    print(f"whole lanes at --repeats {args.repeats}, -j {args.jobs}, medians of "
          f"{args.rounds} rounds")
    print(f"{'lane':<15} {'repeats':>7} {'cold':>8} {'warm':>8} {'faster':>7} "
          f"{'verdicts':>9} {'import x n':>11}")
    missed = False
    for lane in lanes:
        cold_s = statistics.median(times[lane]["cold"])
        warm_s = statistics.median(times[lane]["warm"])
        ratio = cold_s / warm_s
        floor = (f"{statistics.median(imports[lane]) * counts[lane]:>9.1f} s"
                 if imports[lane] else f"{'—':>11}")
        print(f"{lane:<15} {counts[lane]:>7} {cold_s:>6.1f} s {warm_s:>6.1f} s "
              f"{ratio:>6.1f}x {'same' if same[lane] else 'DIFFER':>9} {floor}")
        missed = missed or ratio < TARGET or not same[lane]
    print(f"target: warm at least {TARGET:g}x faster, the same verdicts; 'import x n': the "
          "framework's import alone, once a repeat, as any fresh process a repeat pays it")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
