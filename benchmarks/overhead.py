"""alk's cost per repeat against a bare spawn of the same worker, side by side, and where it goes.

The worker is the trivial one (tests/workers/well_behaved.py), run by the system's interpreter
(`/usr/bin/python3` where there is one: what a lane's `command` names, not alk's own venv), with
the scrubbed environment alk gives it and the SDK on its PYTHONPATH, compiled. In every round,
one after the other so that drift on a shared machine lands on all of them:

- a bare spawn with no isolation at all: the worker started with pipes, the two input lines
  written, its output read to the end, in a fresh folder: what a user without alk would run;
- for each setup alk can run a worker with here, a bare spawn with the same isolation (the very
  command line alk's runner builds: rlimits through `prlimit`; `setpriv` and `unshare` for the
  PID and network namespaces, or `bwrap` for the sandbox, its seccomp filter and namespaces;
  alk's init as PID 1: the compiled one where it builds, as alk runs it; `ALK_INIT=python`
  measures the Python one), then `alk run` of 20 and of 100 repeats. alk's marginal cost per repeat
  is (T(100) − T(20)) / 80: the run's fixed costs (the preflight probe, statistics, the result
  document) cancel out.

Setups: `least` (core dumps off, no namespace, no other limit), `workspace` (rlimits, `setpriv`
and `unshare`, alk's init) and `sandbox` (rlimits, `bwrap`, alk's init), those this machine
has. Targets, on wall time: alk's marginal cost per repeat ≤ 1.20× the bare spawn with no
isolation, and ≤ 1.05× the bare spawn with the same isolation; the exit status is 1 when one
is missed. CPU time a repeat is printed beside it, the parent's own (alk, or the bare loop)
and its children's (wrappers, init and worker): less moved by other work on the machine,
and it says whose processes did the work.

Runs of 100 repeats take seconds each, and load on a shared machine comes and goes within
them: so each round also makes one run of 100 repeats with two bare spawns after each repeat's
worker has ended (in the repeat's own thread, one after the other with alk's own work: see
`PairedRunner`), one with the same isolation and one with none, and compares them a repeat
apart (medians), the steadier figure when the machine is busy.

Then, from the 100-repeat runs, where a repeat's time goes, the bare sides timed at the same
points (medians over every repeat): starting the process (alk: from opening the transcript
until the spawn event), spawn → framework_ready, framework_ready → the result, the result → the
exit status, alk's checks and attribution, and what lies outside the transcript (alk: the
workspace, closing and hashing the transcript, removing the workspace, the result document;
bare: making and removing the folder).

    python benchmarks/overhead.py [--rounds 3] [--python /usr/bin/python3]
                                  [--setups least,workspace,sandbox]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from alk import api
from alk.cleanup import remove_tree
from alk.execute.repeat import SAFE_ENV_NAMES
from alk.layout import run_transcripts
from alk.limits import NAMES as LIMIT_NAMES
from alk.limits import prlimit_prefix
from alk.records import Lane, Limits, Observation
from alk.runner.isolation import PROCESS_GROUP_ONLY, Filesystem, Isolation, detect
from alk.runner.process import LocalRunner
from alk.runner.request import ReadyCheck, RunRequest
from alk.runner.sandbox import give_workspace, visible_paths, worker_uid
from alk.runner.seccomp import program as seccomp_program
from alk.runner import cinit
from alk.runner.spawn import command_line, init_prefix
from alk.transcript.reader import read_transcript
from alk.transcript.writer import TranscriptWriter

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "workers" / "well_behaved.py"
SYSTEM_PYTHON = "/usr/bin/python3"
SHORT, LONG = 20, 100
TARGET_PLAIN = 1.20  # against a bare spawn with no isolation
TARGET_SAME = 1.05  # against a bare spawn with the same isolation
HELLO = {"type": "hello", "protocol": 1, "lane": "bench"}
START = {"type": "start", "run_id": "bench", "repeat": 1, "seed": 1,
         "scenario": {"id": "echo", "task": "Say hello", "input": {}}}
LANE = """name = "bench"
description = "The overhead benchmark's lane: the trivial worker under the system's interpreter."
framework = "trivial"
version = ">=1.0,<2"
command = [{command}]
timeout_s = 10
{filesystem}
[[scenarios]]
id = "echo"
task = "Say hello"
[scenarios.expect]
stop_reason = "accepted"
output_equals = "Say hello"
end_state = {{ phase = "stopped" }}
tool_calls = {{ echo = 1 }}
"""
# The phases of a repeat, in order; each side times those it can see.
PHASES = ("start the process", "spawn → ready", "ready → result", "result → exit",
          "checks, attribution", "outside the transcript")


@dataclass
class Sample:
    """What one side cost in one round, a repeat: wall time and CPU time (alk's or the bare
    loop's own, and its children's: wrappers reap what they start, so the whole tree counts),
    ms; and each repeat's phases, ms."""

    wall: float
    own_cpu: float
    child_cpu: float
    phases: dict[str, list[float]]


@dataclass
class Setup:
    """One way alk runs a worker here, the same isolation for the bare side, and the rounds."""

    name: str
    isolation: Isolation
    limits: dict[str, int]  # alk run's --limit overrides
    filesystem: Filesystem
    bare: list[Sample] = field(default_factory=list)
    bare_no_init: list[Sample] = field(default_factory=list)  # the same wrappers, no init
    bare_python_init: list[Sample] = field(default_factory=list)  # with the fallback init
    alk: list[Sample] = field(default_factory=list)  # marginal: T(100) − T(20), over 80
    # (alk's repeat, a bare spawn with the same isolation, one with none), ms, a repeat apart
    paired: list[tuple[float, float, float]] = field(default_factory=list)

    @property
    def has_init(self) -> bool:
        return self.isolation is not PROCESS_GROUP_ONLY


class Clock:
    """Wall and CPU time from its start."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.own, self.children = self.cpu()

    @staticmethod
    def cpu() -> tuple[float, float]:
        own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                             resource.RUSAGE_CHILDREN))
        return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime

    def sample(self, repeats: int, phases: dict[str, list[float]]) -> Sample:
        own, children = self.cpu()
        return Sample((time.perf_counter() - self.wall) * 1000 / repeats,
                      (own - self.own) * 1000 / repeats,
                      (children - self.children) * 1000 / repeats, phases)


def marginal(short: Sample, long: Sample) -> Sample:
    """Per repeat, what the long run cost beyond the short one (its fixed costs cancel)."""
    def extra(name: str) -> float:
        return (getattr(long, name) * LONG - getattr(short, name) * SHORT) / (LONG - SHORT)
    return Sample(extra("wall"), extra("own_cpu"), extra("child_cpu"), long.phases)


class Bench:
    def __init__(self, python: str, scratch: Path) -> None:
        self.python = python
        self.scratch = scratch
        self.argv = (python, str(WORKER))
        self.sdk = scratch / "sdk"
        package = self.sdk / "alk"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        shutil.copyfile(ROOT / "src" / "alk" / "worker.py", package / "worker.py")
        # Compiled for the worker's interpreter: the bare side starts as fast as it can.
        subprocess.run([python, "-m", "compileall", "-q", str(package)], check=True)
        compileall.compile_dir(package, quiet=1)
        for path in (*package.rglob("*"), package, self.sdk):
            path.chmod(0o555 if path.is_dir() else 0o444)
        self.env = {name: os.environ[name] for name in SAFE_ENV_NAMES if name in os.environ}
        self.env["PYTHONPATH"] = str(self.sdk)
        self.input = (json.dumps(HELLO) + "\n" + json.dumps(START) + "\n").encode()
        self.lanes: dict[str, Lane] = {}
        self.status = os.open(os.devnull, os.O_WRONLY)  # where alk's init says its line
        # What the sandbox shows, looked up once as alk does for a run.
        self.visible = visible_paths(self.argv, str(WORKER.parent), None,
                                     extra=(str(self.sdk),))

    def lane(self, setup: Setup) -> Lane:
        if setup.name not in self.lanes:
            folder = self.scratch / f"lane-{setup.name}"
            (folder / "lanes").mkdir(parents=True)
            path = folder / "lanes" / "bench.toml"
            path.write_text(LANE.format(command=", ".join(json.dumps(a) for a in self.argv),
                                        filesystem=f'filesystem = "{setup.filesystem}"'))
            self.lanes[setup.name] = api.load_lane(path)
        return self.lanes[setup.name]

    # -- the bare side -------------------------------------------------------------------------

    def command(self, setup: Setup | None, workspace: Path, init: bool | str = True
                ) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """The argv for a bare spawn: the worker's own, or behind the same wrappers alk puts
        it (then also the descriptors it needs: the seccomp filter's, for bwrap, and the
        compiled init's, where alk runs that one); without `init`, the worker is the
        namespace's PID 1 itself, to tell the init's cost from the wrappers'; with "python",
        the Python init, alk's fallback, beside the compiled one."""
        if setup is None:
            return self.argv, ()
        limits = Limits(**{name: None for name in LIMIT_NAMES}) if setup.limits else Limits()
        if setup.isolation is PROCESS_GROUP_ONLY:
            return (*(prlimit_prefix(limits) or ()), *self.argv), ()
        request = RunRequest(
            argv=self.argv, cwd=str(workspace), env={}, timeout_s=10, hello={}, start=None,
            limits=limits, network=setup.isolation.strongest_network,
            filesystem=setup.filesystem,
            visible=self.visible)
        filter_fd = None
        if setup.filesystem is Filesystem.SANDBOX:
            give_workspace(str(workspace), worker_uid())
            if seccomp_program() is not None:
                filter_fd = os.memfd_create("seccomp", 0)
                os.write(filter_fd, seccomp_program())
                os.lseek(filter_fd, 0, os.SEEK_SET)
        init_fd = cinit.open_binary() if init is True else None
        argv = command_line(request, setup.isolation, status_fd=self.status,
                            seccomp_fd=filter_fd, init_fd=init_fd)
        if not init:  # python -I -S -c CODE STATUS_FD UID GID GATEWAY --
            prefix = init_prefix(None)
            at = next(i for i in range(len(argv)) if argv[i:i + len(prefix)] == prefix)
            argv = argv[:at] + argv[argv.index("--", at + len(prefix)) + 1:]
        return argv, tuple(fd for fd in (filter_fd, init_fd) if fd is not None)

    def bare_round(self, setup: Setup | None, repeats: int, folder: Path,
                   init: bool | str = True) -> Sample:
        phases: dict[str, list[float]] = {name: [] for name in PHASES}
        folder.mkdir()
        clock = Clock()
        for number in range(repeats):
            self.bare_once(setup, folder / f"w-{number}", phases, init)
        return clock.sample(repeats, phases)

    def bare_once(self, setup: Setup | None, workspace: Path, phases: dict[str, list[float]],
                  init: bool | str = True) -> float:
        """One bare spawn in a fresh folder: its phases go to `phases`; returns its ms."""
        t0 = time.perf_counter()
        workspace.mkdir()
        argv, fds = self.command(setup, workspace, init)
        t1 = time.perf_counter()
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=workspace, start_new_session=True,
            env={**self.env, "HOME": str(workspace), "TMPDIR": str(workspace)},
            pass_fds=(self.status, *fds))
        t2 = time.perf_counter()
        for fd in fds:
            os.close(fd)
        proc.stdin.write(self.input)
        proc.stdin.close()
        seen = {}
        for line in proc.stdout:
            seen.setdefault(_kind(json.loads(line)), time.perf_counter())
        proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
        code = proc.wait()
        t3 = time.perf_counter()
        assert code == 0 and "result" in seen, (argv, code, seen)
        remove_tree(workspace)
        t4 = time.perf_counter()
        ready, result = seen["framework_ready"], seen["result"]
        for name, seconds in zip(PHASES, (t2 - t1, ready - t2, result - ready, t3 - result,
                                          None, (t1 - t0) + (t4 - t3))):
            if seconds is not None:
                phases[name].append(seconds * 1000)
        return (t4 - t0) * 1000

    # -- alk's side ----------------------------------------------------------------------------

    def alk_run(self, setup: Setup, repeats: int, out: Path) -> Sample:
        """A run of `repeats`, with its repeats' phases (from their transcripts, and the time
        between one repeat's end and the next's)."""
        ends: list[float] = []
        clock = Clock()
        run = api.run_lane(self.lane(setup), api.RunOptions(repeats=repeats, limits=setup.limits),
                           api.RunSetup(out_dir=out, runner=LocalRunner(setup.isolation),
                                        on_repeat=lambda _: ends.append(time.perf_counter())))
        sample = clock.sample(repeats, {name: [] for name in PHASES})
        assert run.exit_code == 0, dict(run.document.scenarios[0].stats.causes)
        folder = out / run_transcripts(run.document.run_id) / "echo"
        for number in range(2, repeats + 1):  # the first repeat follows the probe
            t = {}
            for event in read_transcript(folder / f"repeat-{number:02d}.jsonl"):
                t.setdefault(_kind(event), event["t"])
            wall = ends[number - 1] - ends[number - 2]
            for name, seconds in zip(PHASES, (
                    t["spawn"], t["framework_ready"] - t["spawn"],
                    t["result"] - t["framework_ready"], t["exit"] - t["result"],
                    t["attribution"] - t["exit"], wall - t["attribution"])):
                sample.phases[name].append(seconds * 1000)
        return sample

    def paired(self, setup: Setup, repeats: int, out: Path) -> list[tuple[float, float, float]]:
        """A run of `repeats` with two bare spawns after each of its repeats' workers, one with
        the same isolation and one with none: (alk's repeat, the first, the second), ms. Side
        by side a repeat apart, load that comes and goes on a shared machine lands on all three
        alike. alk's checkpoints of result.json, which it makes once a second, come a little
        less often per repeat than in a run of its own."""
        folder = out / "bare"
        folder.mkdir(parents=True)
        phases: dict[str, list[float]] = {name: [] for name in PHASES}  # not reported

        def spawns(number: int) -> tuple[float, float]:
            return (self.bare_once(setup, folder / f"w-{number}", phases),
                    self.bare_once(None, folder / f"plain-{number}", phases))

        runner = PairedRunner(LocalRunner(setup.isolation), spawns)
        run = api.run_lane(self.lane(setup), api.RunOptions(repeats=repeats, limits=setup.limits),
                           api.RunSetup(out_dir=out, runner=runner))
        assert run.exit_code == 0, dict(run.document.scenarios[0].stats.causes)
        return runner.pairs()


class PairedRunner:
    """alk's runner with bare spawns after each repeat's worker, in the repeat's own thread.

    With one repeat at a time alk still runs it in a thread of its own and hands its result to
    the calling thread, whose callbacks (on_repeat) run while the next repeat has begun: bare
    spawns made there would overlap alk's repeat and each side would be timed under the other's
    load. Made here they run one after the other with alk's own work, and nothing of alk's runs
    meanwhile: the next repeat waits for this one, and the calling thread's part of the
    previous one (its journal line, a checkpoint) ended while this repeat's worker ran."""

    def __init__(self, runner: LocalRunner,
                 spawns: Callable[[int], tuple[float, float]]) -> None:
        self.runner, self.spawns = runner, spawns
        self.began: list[float] = []  # when each repeat's worker was to start
        self.bare: list[tuple[float, float, float]] = []  # (same, none, time away from alk), ms

    @property
    def isolation(self) -> Isolation:
        return self.runner.isolation

    def run(self, request: RunRequest, gate: ReadyCheck, transcript: TranscriptWriter
            ) -> Observation:
        if request.start is None:  # the preflight probe: not a repeat
            return self.runner.run(request, gate, transcript)
        self.began.append(time.perf_counter())
        seen = self.runner.run(request, gate, transcript)
        away = time.perf_counter()
        same, plain = self.spawns(len(self.began))
        self.bare.append((same, plain, (time.perf_counter() - away) * 1000))
        return seen

    def pairs(self) -> list[tuple[float, float, float]]:
        """(alk's repeat, the bare spawns made within it), ms: alk's repeat runs from one
        worker's start to the next one's (its checks, transcript, workspace and result, and
        the next repeat's workspace and transcript, all alk's), less the time spent in the
        bare spawns; the last repeat has no next one."""
        return [((after - before) * 1000 - away, same, plain)
                for before, after, (same, plain, away) in zip(self.began, self.began[1:],
                                                               self.bare)]


def _kind(event: dict) -> str:
    """An event's type, the tool's result told apart from the agent's."""
    return "tool" if event.get("channel") == "tool" else event["type"]


def setups(names: list[str]) -> list[Setup]:
    isolation = detect()
    found = {"least": Setup("least", PROCESS_GROUP_ONLY, {name: 0 for name in LIMIT_NAMES},
                            Filesystem.WORKSPACE)}
    if isolation.unshare:
        found["workspace"] = Setup("workspace", isolation, {}, Filesystem.WORKSPACE)
    if Filesystem.SANDBOX in isolation.filesystems:
        found["sandbox"] = Setup("sandbox", isolation, {}, Filesystem.SANDBOX)
    for name in names:
        if name not in found:
            print(f"setup {name!r} is not available here (alk doctor says why); skipped")
    return [found[name] for name in names if name in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--python", default=SYSTEM_PYTHON if os.access(SYSTEM_PYTHON, os.X_OK)
                        else sys.executable, help="the worker's interpreter")
    parser.add_argument("--setups", default="least,workspace,sandbox",
                        help="comma-separated: least (core dumps off, no namespace), workspace "
                             "(prlimit, setpriv, unshare, alk's init), sandbox (bwrap)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="alk-bench-"))
    chosen = setups(args.setups.split(","))
    plain: list[Sample] = []
    try:
        bench = Bench(args.python, scratch)
        for setup in chosen:  # warm up: page cache, bytecode, the isolation probes
            bench.alk_run(setup, 2, scratch / f"warm-{setup.name}")
        for number in range(args.rounds):
            plain.append(bench.bare_round(None, LONG, scratch / f"bare-{number}"))
            for setup in chosen:
                name = f"{setup.name}-{number}"
                setup.bare.append(bench.bare_round(setup, LONG, scratch / f"bare-{name}"))
                if setup.has_init:
                    setup.bare_no_init.append(bench.bare_round(
                        setup, LONG, scratch / f"bare-{name}-no-init", init=False))
                    setup.bare_python_init.append(bench.bare_round(
                        setup, LONG, scratch / f"bare-{name}-python-init", init="python"))
                short = bench.alk_run(setup, SHORT, scratch / f"alk-{name}-short")
                setup.alk.append(marginal(short, bench.alk_run(setup, LONG,
                                                               scratch / f"alk-{name}")))
                setup.paired += bench.paired(setup, LONG, scratch / f"paired-{name}")
        missed = report(args, bench, chosen, plain)
    finally:
        remove_tree(scratch)
    sys.exit(1 if missed else 0)


def _median(samples: list[Sample], name: str) -> float:
    return statistics.median(getattr(sample, name) for sample in samples)


def _cpu(samples: list[Sample]) -> float:
    return statistics.median(sample.own_cpu + sample.child_cpu for sample in samples)


def report(args: argparse.Namespace, bench: Bench, chosen: list[Setup],
           plain: list[Sample]) -> list[str]:
    version = subprocess.run([bench.python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()
    print(f"worker: {WORKER.relative_to(ROOT)} under {bench.python} (Python {version}); alk "
          f"under Python {sys.version.split()[0]}; alk's init: {cinit.why()}")
    print(f"{args.rounds} rounds; alk's marginal cost a repeat is (T({LONG}) − T({SHORT})) / "
          f"{LONG - SHORT}; the bare sides run {LONG} repeats a round")
    rows = [("bare spawn, no isolation", plain)]
    for setup in chosen:
        if setup.has_init:
            rows += [(f"bare spawn, {setup.name}, no init", setup.bare_no_init),
                     (f"bare spawn, {setup.name}, Python init", setup.bare_python_init)]
        rows += [(f"bare spawn, {setup.name} isolation", setup.bare),
                 (f"alk run, {setup.name} (marginal)", setup.alk)]
    print(f"\n{'ms a repeat':40}{'wall':>8}{'CPU':>8}{'own':>7}{'children':>10}"
          "    wall, per round")
    for name, samples in rows:
        own, children = _median(samples, "own_cpu"), _median(samples, "child_cpu")
        print(f"{name:40}{_median(samples, 'wall'):8.2f}{own + children:8.2f}{own:7.2f}"
              f"{children:10.2f}    " + " ".join(f"{s.wall:6.2f}" for s in samples))
    missed = []
    print()
    for setup in chosen:
        alk = _median(setup.alk, "wall")
        for against, samples, target in (("no isolation", plain, TARGET_PLAIN),
                                          (f"the same isolation ({setup.name})", setup.bare,
                                           TARGET_SAME)):
            ratio = alk / _median(samples, "wall")
            met = ratio <= target
            if not met:
                missed.append(f"{setup.name} against {against}")
            print(f"alk ({setup.name}) / bare spawn with {against}: {ratio:.3f}  "
                  f"(target ≤ {target:.2f}: {'met' if met else 'NOT met'})")
    print("\nside by side a repeat apart (alk's repeats, each next to a bare spawn with the same "
          "isolation and one with none), medians:")
    for setup in chosen:
        alk, same, plain_ms = (statistics.median(row[i] for row in setup.paired)
                               for i in range(3))
        print(f"  {setup.name:10} alk {alk:6.2f} ms · same isolation {same:6.2f} ms "
              f"({alk / same:.3f}×) · no isolation {plain_ms:6.2f} ms ({alk / plain_ms:.3f}×)")
    print("\nwhat each layer adds to a bare spawn with no isolation, ms a repeat (wall, CPU):")
    base = _median(plain, "wall"), _cpu(plain)
    for setup in chosen:
        layers = ([("its wrappers", setup.bare_no_init), ("alk's init", setup.bare)]
                  if setup.has_init else [("its rlimits", setup.bare)])
        cells, below = [], base
        for name, samples in (*layers, ("alk itself", setup.alk)):
            here = _median(samples, "wall"), _cpu(samples)
            cells.append(f"{name} {here[0] - below[0]:+.2f} ({here[1] - below[1]:+.2f})")
            below = here
        if setup.has_init:  # the fallback in the compiled init's place, over the wrappers
            wrappers = _median(setup.bare_no_init, "wall"), _cpu(setup.bare_no_init)
            python = _median(setup.bare_python_init, "wall"), _cpu(setup.bare_python_init)
            cells.append(f"(the Python init instead: {python[0] - wrappers[0]:+.2f} "
                         f"({python[1] - wrappers[1]:+.2f}))")
        print(f"  {setup.name:10} " + " · ".join(cells))
    print("\nwhere a repeat's time goes, ms (medians over every repeat of every round):")
    columns = [("bare, none", plain)]
    for setup in chosen:
        columns += [(f"bare, {setup.name}", setup.bare), (f"alk, {setup.name}", setup.alk)]
    print(f"{'':24}" + "".join(f"{name:>16}" for name, _ in columns))
    for phase in PHASES:
        cells = [[v for sample in samples for v in sample.phases[phase]] for _, samples in columns]
        print(f"{phase:24}" + "".join(f"{statistics.median(v):16.2f}" if v else f"{'—':>16}"
                                      for v in cells))
    if missed:
        print(f"\ntargets missed: {'; '.join(missed)}")
    return missed


if __name__ == "__main__":
    main()
