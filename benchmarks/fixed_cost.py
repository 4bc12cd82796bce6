"""A run's fixed cost: `alk run` of 100 repeats of the trivial worker, whole (the command from its
start to its exit: imports, the isolation probe, the preflight, every repeat, the statistics,
result.json and the three reports), against a bare spawn loop and a peer runner, side by side.

In every round, one after the other so that drift on a shared machine lands on all of them:

- the bare spawn loop: 100 spawns of tests/workers/well_behaved.py with no isolation, its two
  input lines written and its output read to the end (`benchmarks/overhead.py`'s bare side);
  then the same 100 behind the very command line alk builds for its isolation here
  (`--setup`: `sandbox`, bwrap, where it works; `workspace`, unshare and alk's init);
- the peer: agent-learning-kit's in-process loop (`fi.alk.live._stats.run_repeated` over
  `run_worker_once`, one fresh worker process a repeat, then its payload, junit and markdown
  written as its CLI does), as a process of its own under `--peer-python` (a venv where
  `pip install agent-learning-kit==0.1.0` was run). Its worker is the trivial worker in the
  peer's protocol, started by the same interpreter as the other sides. Without
  `--peer-python`, a plain loop of the peer's shape stands in (the same spawns, a pass count,
  a JSON file), and the output says so;
- `alk run --lane L -n 100 -j 1 -q` and `-n 20`, each a fresh process in a fresh folder: their
  difference over 80 is alk's marginal cost a repeat, and what the 100-repeat run costs beyond
  100 marginal repeats is its fixed part;
- `alk run` of a lane whose preflight refuses the worker (it reports a version outside the
  lane's): a run that never started, reports written.

Ratios are of wall time a repeat, medians over the rounds: the peer against the bare spawn with
no isolation (what it spawns), alk against the bare spawn with its own isolation (what it
spawns) and, beside it, against the one with none. alk's sources are compiled first (where
PYTHONDONTWRITEBYTECODE is set they would be compiled again in every process, unlike an
installed alk). Targets: alk's whole run ≤ the peer's whole run, and the run that never
started ≤ 0.5 s; the exit status is 1 when one is missed.

    python benchmarks/fixed_cost.py [--rounds 3] [--repeats 100] [--setup sandbox|workspace]
                                    [--peer-python VENV/bin/python] [--python /usr/bin/python3]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead  # noqa: E402  (the bare side and its setups: one definition of a bare spawn)

ROOT = Path(__file__).resolve().parent.parent
SHORT = 20
TARGET_NEVER_STARTED_S = 0.5

# The trivial worker in the peer's protocol: one boot line in, JSON lines out, a verdict.
PEER_WORKER = r'''import json, sys
def emit(channel, kind, payload):
    print(json.dumps({"channel": channel, "type": kind, "payload": payload}), flush=True)
boot = json.loads(sys.stdin.readline())
task = boot["scenario"]["name"]
emit("lane", "framework_ready", {"framework": "trivial", "framework_version": "1.0"})
emit("tool", "tool_call", {"name": "echo", "arguments": {"text": task}})
emit("tool", "tool_result", {"name": "echo", "ok": True, "output": task})
emit("agent", "verification", {"passed": True})
'''

# The peer's runner as its CLI drives a live lane: the loop, then the payload and its files.
PEER_DRIVER = r'''import json, sys, types, uuid
from pathlib import Path
from fi.alk import simulate
from fi.alk.live import _runner
from fi.alk.live._stats import lane_run_payload, run_repeated
import fi

repeats, python, worker, out = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
# Installed from PyPI, the kit looks for its own source checkout to put on the worker's path;
# and it starts workers with its own interpreter: the worker's is the other sides'.
_runner.kit_pythonpath = lambda: str(Path(fi.__file__).resolve().parent.parent)
_runner.sys = types.SimpleNamespace(executable=python)
boot = {"type": "boot", "lane": "trivial", "scenario": {"name": "Say hello"}, "config": {}}
out.mkdir(parents=True, exist_ok=True)

def once(index, transcript):
    return _runner.run_worker_once(worker, boot, lane="mcp", required_env=(), cwd=out,
                                   timeout_s=10, transcript=transcript,
                                   version_requirement=">=1.0,<2")

result = run_repeated(once, lane="mcp", evidence_class="live_lane", repeats=repeats, budget_s=10,
                      artifacts_dir=out, run_id=uuid.uuid4().hex, framework="trivial",
                      version_requirement=">=1.0,<2")
payload = lane_run_payload(result, name="trivial", scenario={"name": "Say hello"}, states={},
                           metadata={})
(out / "result.json").write_text(json.dumps(payload, indent=2, sort_keys=True, default=str))
(out / "junit.xml").write_text(simulate.render_junit(payload))
(out / "report.md").write_text(simulate.render_markdown(payload, source_path=out / "lane.json"))
assert payload["summary"]["verdict"] == "pass", payload["summary"]
'''

# Without the peer installed: its loop's shape in plain Python.
PLAIN_DRIVER = r'''import json, subprocess, sys
from pathlib import Path
repeats, python, worker, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
out.mkdir(parents=True, exist_ok=True)
boot = json.dumps({"type": "boot", "scenario": {"name": "Say hello"}}) + "\n"
rows = []
for index in range(repeats):
    done = subprocess.run([python, worker], input=boot, capture_output=True, text=True,
                          cwd=out, timeout=10)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    rows.append({"repeat": index, "passed": done.returncode == 0 and any(
        e.get("type") == "verification" and e["payload"].get("passed") for e in events)})
(out / "result.json").write_text(json.dumps({"passed": sum(r["passed"] for r in rows),
                                             "rows": rows}, indent=2))
assert all(r["passed"] for r in rows)
'''


def timed(argv: list[str], cwd: Path, codes: tuple[int, ...] = (0,)) -> float:
    """Seconds from the command's start to its exit."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - start
    if done.returncode not in codes:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def alk_run(lane: Path, repeats: int, folder: Path, codes: tuple[int, ...] = (0,)) -> float:
    folder.mkdir(parents=True)
    return timed([sys.executable, "-m", "alk", "run", "--lane", str(lane), "-n", str(repeats),
                  "-j", "1", "-q"], folder, codes)


def peer_works(python: str) -> bool:
    done = subprocess.run([python, "-c", "import fi.alk.live._stats, fi.alk.simulate"],
                          capture_output=True)
    return done.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--setup", choices=("sandbox", "workspace"), default=None,
                        help="alk's isolation (default: sandbox where bwrap works)")
    parser.add_argument("--peer-python", default=None,
                        help="the interpreter of a venv with agent-learning-kit 0.1.0")
    parser.add_argument("--python", default=overhead.SYSTEM_PYTHON
                        if os.access(overhead.SYSTEM_PYTHON, os.X_OK) else sys.executable,
                        help="the workers' interpreter, on every side")
    args = parser.parse_args()
    repeats = args.repeats
    compileall.compile_dir(ROOT / "src" / "alk", quiet=1)
    found = {setup.name: setup for setup in overhead.setups(["workspace", "sandbox"])}
    name = args.setup or ("sandbox" if "sandbox" in found else "workspace")
    if name not in found:
        raise SystemExit(f"setup {name!r} is not available here (alk doctor says why)")
    setup = found[name]
    peer = bool(args.peer_python) and peer_works(args.peer_python)
    if args.peer_python and not peer:
        print(f"{args.peer_python} cannot import agent-learning-kit: its plain loop stands in")
    times: dict[str, list[float]] = {key: [] for key in (
        "bare", "bare_same", "peer", "alk", "alk_short", "never")}
    with tempfile.TemporaryDirectory(prefix="alk-fixed-") as scratch_name:
        scratch = Path(scratch_name)
        bench = overhead.Bench(args.python, scratch)
        lane = bench.lane(setup).path
        refused = lane.with_name("refused.toml")
        refused.write_text(lane.read_text().replace('name = "bench"', 'name = "refused"')
                           .replace('version = ">=1.0,<2"', 'version = ">=2"'))
        (scratch / "peer_worker.py").write_text(PEER_WORKER)
        driver = scratch / "peer_driver.py"
        driver.write_text(PEER_DRIVER if peer else PLAIN_DRIVER)
        peer_python = args.peer_python if peer else sys.executable
        print(f"load before: {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {repeats} "
              f"repeats; alk's isolation: {name}; workers under {args.python}")
        for number in range(args.rounds):
            at = scratch / f"round-{number}"
            at.mkdir()
            times["bare"].append(bench.bare_round(None, repeats, at / "bare").wall / 1000)
            times["bare_same"].append(
                bench.bare_round(setup, repeats, at / "bare-same").wall / 1000)
            times["peer"].append(timed([peer_python, str(driver), str(repeats), args.python,
                                        str(scratch / "peer_worker.py"), str(at / "peer")],
                                       scratch) / repeats)
            times["alk"].append(alk_run(lane, repeats, at / "alk") / repeats)
            times["alk_short"].append(alk_run(lane, SHORT, at / "alk-short") / SHORT)
            times["never"].append(alk_run(refused, repeats, at / "never", codes=(3,)))
        print(f"load after: {os.getloadavg()[0]:.2f}")
    return report(times, repeats, name, peer)


def report(times: dict[str, list[float]], repeats: int, setup: str, peer: bool) -> int:
    ms = {key: statistics.median(values) * 1000 for key, values in times.items()}
    bare, same = ms["bare"], ms["bare_same"]
    marginal = (ms["alk"] * repeats - ms["alk_short"] * SHORT) / (repeats - SHORT)
    fixed_s = (ms["alk"] - marginal) * repeats / 1000
    peer_name = "peer (agent-learning-kit 0.1.0)" if peer else "peer (its plain loop, not the kit)"
    rows = [
        ("bare spawn loop, no isolation", bare, 1.0, None),
        (f"bare spawn loop, {setup}", same, same / bare, 1.0),
        (f"{peer_name}, whole", ms["peer"], ms["peer"] / bare, None),
        (f"alk run -n {repeats}, whole", ms["alk"], ms["alk"] / bare, ms["alk"] / same),
        ("alk, marginal a repeat", marginal, marginal / bare, marginal / same),
    ]
    print(f"\n{'ms a repeat (medians)':<44} {'ms':>8} {'÷ bare':>8} {'÷ same isolation':>17}")
    for label, value, plain, isolated in rows:
        shown = "" if isolated is None else f"{isolated:.2f}"
        print(f"{label:<44} {value:8.1f} {plain:8.2f} {shown:>17}")
    print(f"alk's fixed part: {fixed_s:.2f} s a run ({fixed_s * 1000 / repeats / same:.2f} of "
          f"the ratio above); a run that never started: {ms['never'] / 1000:.2f} s whole")
    whole, target = ms["alk"] / same, ms["peer"] / bare
    missed = []
    if whole > target:
        missed.append(f"alk's whole run {whole:.2f}× its bare spawns > the peer's {target:.2f}×")
    if ms["never"] / 1000 > TARGET_NEVER_STARTED_S:
        missed.append(f"a run that never started took {ms['never'] / 1000:.2f} s > "
                      f"{TARGET_NEVER_STARTED_S} s")
    for line in missed:
        print(f"MISSED: {line}")
    if not missed:
        print(f"targets met: alk whole {whole:.2f}× ≤ peer {target:.2f}×; never started "
              f"{ms['never'] / 1000:.2f} s ≤ {TARGET_NEVER_STARTED_S} s")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
