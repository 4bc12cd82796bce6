"""Per-repeat cost of `alk run` against a bare spawn of the same worker, side by side.

Both sides run the trivial worker (tests/workers/well_behaved.py) with the same interpreter, the
same scrubbed environment and the same two input lines; the bare side is `subprocess.run` with
the output collected and nothing else. Rounds alternate (bare, alk, bare, alk, ...) so that drift
in a shared machine lands on both sides; the medians of the per-round per-repeat times are
compared. Target: alk / bare ≤ 1.10, each side set up the same way: once with the least alk
does (no limits but core dumps off, no namespace) and once as alk sets a worker up by default
here (rlimits, the sandbox and its namespaces, its seccomp filter, alk's init as PID 1: the same
command line), so
that each ratio is alk's own cost; the isolation's cost is printed apart, and so is alk's
default against what a user without alk would run, a bare spawn with no isolation. A run has fixed costs (the preflight probe is one more
spawn, then statistics and result.json), so `--repeats` defaults to a run long enough for them
to be spread as they are in real use; both figures are printed.

    python benchmarks/overhead.py [--repeats 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from alk import api
from alk.executor import SAFE_ENV_NAMES
from alk.limits import NAMES as LIMIT_NAMES
from alk.limits import prlimit_prefix
from alk.records import Limits
from alk.runner.isolation import PROCESS_GROUP_ONLY, Filesystem, Isolation, detect
from alk.runner.process import LocalRunner
from alk.runner.request import RunRequest
from alk.runner.sandbox import give_workspace, visible_paths, worker_uid
from alk.runner.seccomp import program as seccomp_program
from alk.runner.spawn import command_line

ROOT = Path(__file__).resolve().parent.parent
LANE = ROOT / "tests" / "lanes" / "trivial.toml"
WORKER = ROOT / "tests" / "workers" / "well_behaved.py"
TARGET = 1.10


def bare_round(repeats: int, sdk: Path, scratch: Path,
               argv: Callable[[Path, int], tuple[tuple[str, ...], tuple[int, ...]]]) -> float:
    env = {name: os.environ[name] for name in SAFE_ENV_NAMES if name in os.environ}
    env["PYTHONPATH"] = str(sdk)
    lines = (json.dumps({"type": "hello", "protocol": 1, "lane": "trivial"}) + "\n" +
             json.dumps({"type": "start", "run_id": "bench", "repeat": 1, "seed": 1,
                         "scenario": {"id": "echo", "task": "Say hello", "input": {}}}) + "\n")
    status = os.open(os.devnull, os.O_WRONLY)  # where alk's init, on that side, says its line
    try:
        began = time.perf_counter()
        for number in range(repeats):
            workspace = scratch / f"bare-{number}"
            workspace.mkdir()
            command, fds = argv(workspace, status)
            done = subprocess.run(command, input=lines.encode(), env=env, cwd=workspace,
                                  capture_output=True, pass_fds=(status, *fds))
            for fd in fds:
                os.close(fd)
            assert done.returncode == 0 and b'"result"' in done.stdout, done.stderr
        return (time.perf_counter() - began) / repeats
    finally:
        os.close(status)


def alk_round(repeats: int, out: Path, isolation: Isolation, limits: dict[str, int]) -> float:
    lane = api.load_lane(LANE)
    began = time.perf_counter()
    run = api.run_lane(lane, repeats=repeats, out_dir=out, runner=LocalRunner(isolation),
                       limits=limits)
    elapsed = time.perf_counter() - began
    assert run.exit_code == 0, run.document["scenarios"][0]["causes"]
    return elapsed / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="alk-bench-"))
    # Each pair compares alk with a bare spawn set up the same way (limits, namespace), so that
    # the ratio is alk's own cost; what the OS mechanisms cost is the difference between the
    # two bare lines.
    no_limits = {name: 0 for name in LIMIT_NAMES}
    unlimited = Limits(**{name: None for name in LIMIT_NAMES})
    isolation = detect()

    def least(workspace: Path, status: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
        return (*(prlimit_prefix(unlimited) or ()), sys.executable, str(WORKER)), ()

    def defaults(workspace: Path, status: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
        # The same command line alk's runner builds: rlimits, the sandbox, alk's init.
        request = RunRequest(
            argv=(sys.executable, str(WORKER)), cwd=str(workspace), env={}, timeout_s=10,
            hello={}, start=None, network=isolation.strongest_network,
            filesystem=isolation.strongest_filesystem,
            visible=visible_paths((sys.executable, str(WORKER)), str(ROOT), None,
                                  extra=(str(sdk.parent),)))
        filter_fd = None
        if request.filesystem is Filesystem.SANDBOX:
            give_workspace(str(workspace), worker_uid())
            if seccomp_program() is not None:
                filter_fd = os.memfd_create("seccomp", 0)
                os.write(filter_fd, seccomp_program())
                os.lseek(filter_fd, 0, os.SEEK_SET)
        return (command_line(request, isolation, status_fd=status, seccomp_fd=filter_fd),
                () if filter_fd is None else (filter_fd,))

    pairs = [("least setup", PROCESS_GROUP_ONLY, no_limits, least),
             ("alk's defaults", isolation, {}, defaults)]
    try:
        sdk = scratch / "sdk" / "alk"
        sdk.mkdir(parents=True)
        (sdk / "__init__.py").write_text("")
        shutil.copyfile(ROOT / "src" / "alk" / "worker.py", sdk / "worker.py")
        times: dict[str, list[float]] = {}
        for number in range(args.rounds):
            for label, setup, limits, prefix in pairs:
                round_dir = scratch / f"round-{number}-{label[0]}"
                round_dir.mkdir()
                times.setdefault(f"bare spawn, {label}", []).append(
                    bare_round(args.repeats, sdk.parent, round_dir, prefix))
                times.setdefault(f"alk run, {label}", []).append(
                    alk_round(args.repeats, round_dir, setup, limits))
        median = {name: statistics.median(values) * 1000 for name, values in times.items()}
        print(f"worker: {WORKER.relative_to(ROOT)}  interpreter: {sys.version.split()[0]}")
        print(f"{args.rounds} alternating rounds of {args.repeats} repeats each")
        print(f"{'':28}{'median ms/repeat':>18}    rounds (ms/repeat)")
        for name, values in times.items():
            print(f"{name:28}{median[name]:18.2f}    "
                  + " ".join(f"{v * 1000:6.2f}" for v in values))
        for label, *_ in pairs:
            ratio = median[f"alk run, {label}"] / median[f"bare spawn, {label}"]
            print(f"ratio alk / bare, {label}: {ratio:.3f}  (target ≤ {TARGET:.2f}: "
                  f"{'met' if ratio <= TARGET else 'NOT met'})")
        plain = median["alk run, alk's defaults"] / median["bare spawn, least setup"]
        print(f"ratio alk (its defaults) / a bare spawn with no isolation: {plain:.3f}  (what "
              "a user without alk would run; the difference is the isolation below)")
        cost = median["bare spawn, alk's defaults"] - median["bare spawn, least setup"]
        print(f"alk's default setup ({isolation.containment.value}, network "
              f"{isolation.strongest_network.value}, filesystem "
              f"{isolation.strongest_filesystem.value}, rlimits) costs "
              f"{cost:.2f} ms a spawn more than the least (no limits but core dumps off, no "
              f"namespace); the bare lines pay it too")
        print("alk's side includes each run's fixed costs (one more spawn for the preflight "
              "probe, statistics, result.json), spread over the run's repeats.")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
