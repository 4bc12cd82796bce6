"""`alk run -j N`, `--resume` and several lanes in one run, through the real command line.

alk is killed (SIGKILL) or stopped (SIGTERM) midway with repeats running at once, then resumed;
every worker leaves a line outside alk at each start (`scale_worker.py`), so that a test sees
which repeats ran, and how often, whatever alk's own files say.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from alk.layout import worker_run_id
from alk.plan import repeat_seed

from helpers.processes import gone, run_alk, write_lane

WORKER = Path(__file__).with_name("scale_worker.py")
POLL_S = 0.02
WAIT_S = 30  # for an event a test waits on: far beyond it, on a loaded machine
EXIT_S = 5  # for the processes of a killed or stopped alk to end
STEADY = {"sleep_s": 0.25}
HELD = {"hold": True}  # waits while the test holds it (scale_worker.py)


class Scale:
    """A test's folder: lanes of the scale worker, the worker's log, and alk run there."""

    def __init__(self, folder: Path) -> None:
        self.cwd = folder
        self.log_dir = folder / "log"  # not a prefix of the lanes' paths: its value is redacted
        self.log_dir.mkdir()
        self.env = {"SCALE_DIR": str(self.log_dir)}
        self.started: list[subprocess.Popen] = []

    def lane(self, name: str, scenarios: dict[str, dict], fail: str = "") -> Path:
        """A lane whose scenarios pass when the worker answers "done"; `fail` names one that
        never does."""
        body = (f'framework = "scale"\nversion = ">=1,<2"\n'
                f'command = ["{{python}}", "{WORKER}"]\nrequired_env = ["SCALE_DIR"]\n'
                # The worker writes its log outside its workspace.
                'filesystem = "workspace"\nnetwork = "host"\ntimeout_s = 60\n')
        for scenario, given in scenarios.items():
            given = {**given, **({"fail_mod": 1} if scenario == fail else {})}
            table = ", ".join(f"{key} = {json.dumps(value)}" for key, value in given.items())
            body += (f'\n[[scenarios]]\nid = "{scenario}"\ntask = "t"\ninput = {{ {table} }}\n'
                     '[scenarios.expect]\noutput_equals = "done"\n')
        return write_lane(self.cwd, name, body)

    def alk(self, *args, **env) -> subprocess.CompletedProcess:
        return run_alk(*args, cwd=self.cwd, env={**self.env, **env})

    def start(self, *args) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "alk", *map(str, args)], cwd=self.cwd,
                                env={**os.environ, **self.env}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.started.append(proc)
        return proc

    def hold(self, on: bool) -> None:
        if on:
            (self.log_dir / "hold").touch()
        else:
            (self.log_dir / "hold").unlink()

    def starts(self) -> list[dict]:
        """Every start the workers logged, in order."""
        return json_lines(self.log_dir / "starts.log")

    def run_ids(self) -> list[str]:
        reports = self.cwd / "reports"
        return [path.name for path in reports.iterdir()] if reports.is_dir() else []

    def run_id(self) -> str:
        [run] = self.run_ids()
        return run

    def close(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        # A killed alk cannot remove its folder of workspaces.
        for root in {Path(start["cwd"]).parent for start in self.starts()}:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def scale(tmp_path):
    folder = Scale(tmp_path)
    yield folder
    folder.close()


def wait_until(condition, what: str, proc: subprocess.Popen | None = None):
    """Polls `condition` until it returns something true; fails when `proc` (alk) ends first."""
    deadline = time.monotonic() + WAIT_S
    while not (value := condition()):
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"alk ended (exit {proc.returncode}) before {what}:\n{out}\n{err}")
        assert time.monotonic() < deadline, f"waited {WAIT_S} s for {what}"
        time.sleep(POLL_S)
    return value


def json_lines(path: Path) -> list[dict]:
    """The JSON lines a file holds so far; a line being written (or cut by a kill) is not
    one yet."""
    text = path.read_text() if path.is_file() else ""
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def journal(cwd: Path, run_id: str) -> list[dict]:
    return json_lines(cwd / "reports" / run_id / "journal.jsonl")


def finished(records: list[dict]) -> list[tuple[str, int]]:
    return [(r["result"]["scenario"], r["result"]["repeat"]) for r in records
            if r["type"] == "repeat"]


def pairs(document) -> list[tuple[str, int]]:
    return [(s["id"], r["repeat"]) for s in document["scenarios"] for r in s["repeats"]]


def requested(scenarios, repeats: int) -> set[tuple[str, int]]:
    return {(s, n) for s in scenarios for n in range(1, repeats + 1)}


def assert_transcripts_intact(cwd: Path, document) -> None:
    for scenario in document["scenarios"]:
        for entry in scenario["repeats"]:
            data = (cwd / entry["transcript"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["transcript"]
            assert json.loads(data.splitlines()[-1])["type"] == "attribution", entry["transcript"]


def contents(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


def stopped(proc: subprocess.Popen, sig: int) -> tuple[str, str]:
    proc.send_signal(sig)
    return proc.communicate(timeout=WAIT_S)


# --- kill -9 midway, then resume ----------------------------------------------------------------

def test_a_run_killed_midway_resumes_and_runs_no_finished_repeat_again(scale, process_watch):
    scenarios, repeats, seed = ("alpha", "beta", "gamma"), 4, 11
    lane = scale.lane("steady", {"alpha": STEADY, "beta": STEADY, "gamma": HELD})
    # gamma's repeats stay running until the test lets them go: the kill always cuts some.
    scale.hold(True)
    proc = scale.start("run", "--lane", lane, "-j", 4, "-n", repeats, "--seed", seed, "-q")
    first = wait_until(scale.starts, "a first start", proc)
    with process_watch(Path(first[0]["cwd"]).parent) as watch:
        run_id = scale.run_id()
        wait_until(lambda: len(finished(journal(scale.cwd, run_id))) >= 3
                   and any(s["scenario"] == "gamma" for s in scale.starts()),
                   "3 finished repeats and a held one running", proc)
        assert f"{run_id}  running " in scale.alk("runs").stdout
        proc.kill()
        proc.communicate()
        # alk cannot end its workers now: they must die with it (a pdeathsig, their namespace).
        survivors = watch.left(within_s=EXIT_S)
    assert watch.workers(), "the test saw no worker process: it checks nothing"
    assert not survivors, f"workers outlived alk's SIGKILL: {survivors}"

    before = journal(scale.cwd, run_id)
    done_before = set(finished(before))
    assert "end" not in [r["type"] for r in before]
    starts_before = scale.starts()
    cut_short = {(s["scenario"], s["repeat"]) for s in starts_before} - done_before
    assert cut_short, "no repeat was running when alk was killed"

    # `alk runs` tells a killed run from one going on: nobody holds its journal's lock.
    listed = scale.alk("runs").stdout
    assert f"{run_id}  stopped " in listed
    assert f"ran {len(done_before)} of {len(scenarios) * repeats} " in listed
    assert f"its alk was killed; resume: alk run --resume {run_id}" in listed

    scale.hold(False)
    done = scale.alk("run", "--resume", run_id, "-j", 4, "-q", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document == json.loads((scale.cwd / "reports" / run_id / "result.json").read_text())
    assert document["status"] == "complete"
    want = requested(scenarios, repeats)
    assert sorted(pairs(document)) == sorted(want)
    after = journal(scale.cwd, run_id)
    assert Counter(finished(after)) == Counter(want)  # each repeat once, whenever it finished
    assert [r["type"] for r in after][-2:] == ["repeat", "end"]
    # The resumed run started exactly what had not finished, each once: the cut-short ones too.
    again = [(s["scenario"], s["repeat"]) for s in scale.starts()[len(starts_before):]]
    assert Counter(again) == Counter(want - done_before)
    assert cut_short <= set(again)
    # Every repeat has the seed --seed gives it, before the kill and after.
    for start in scale.starts():
        assert start["seed"] == repeat_seed(seed, start["scenario"], start["repeat"])
    for scenario in document["scenarios"]:
        assert [r["seed"] for r in scenario["repeats"]] == [
            repeat_seed(seed, scenario["id"], n) for n in range(1, repeats + 1)]
    [resumed] = document["resumed"]
    assert resumed["done"] == len(done_before)
    assert_transcripts_intact(scale.cwd, document)
    shown = scale.alk("report", run_id)
    plural = "repeat" if len(done_before) == 1 else "repeats"
    assert f"after {len(done_before)} finished {plural}" in shown.stdout
    listed = scale.alk("runs").stdout
    assert f"{run_id}  complete    pass  {len(want)}/{len(want)} passed" in listed
    assert "resumed once" in listed and "resume:" not in listed


# --- SIGTERM with repeats running at once ------------------------------------------------------

def test_sigterm_ends_every_running_worker_keeps_what_finished_and_resumes(scale,
                                                                           process_watch):
    lane = scale.lane("held", {"quick": {}, "slow": HELD})
    scale.hold(True)
    proc = scale.start("run", "--lane", lane, "-j", 4, "-n", 4, "-q")
    first = wait_until(scale.starts, "a first start", proc)
    with process_watch(Path(first[0]["cwd"]).parent) as watch:
        run_id = scale.run_id()
        # Quick repeats finish until each of the four threads holds a slow one (the first
        # four repeats of the plan hold two quick ones at least).
        wait_until(lambda: [s["scenario"] for s in scale.starts()].count("slow") == 4,
                   "4 slow repeats running", proc)
        stopped(proc, signal.SIGTERM)
        survivors = watch.left(within_s=EXIT_S)
    assert proc.returncode == 130
    assert len(watch.workers()) >= 4
    assert not survivors, f"workers outlived the SIGTERM: {survivors}"
    document = json.loads((scale.cwd / "reports" / run_id / "result.json").read_text())
    assert document["status"] == "interrupted"
    quick = {(s["scenario"], s["repeat"]) for s in scale.starts() if s["scenario"] == "quick"}
    assert len(quick) >= 2
    assert sorted(pairs(document)) == sorted(quick)
    assert sorted(finished(journal(scale.cwd, run_id))) == sorted(quick)
    assert_transcripts_intact(scale.cwd, document)
    for number in range(1, 5):
        cut = (scale.cwd / "transcripts" / run_id / "slow" / f"repeat-{number:02d}.jsonl")
        events = [json.loads(line) for line in cut.read_text().splitlines()]
        assert (events[-1]["source"], events[-1]["type"]) == ("harness", "interrupted")
        spawns = [e["payload"]["pid"] for e in events if e["type"] == "spawn"]
        assert spawns and all(map(gone, spawns))

    scale.hold(False)
    done = scale.alk("run", "--resume", run_id, "-q", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["status"] == "complete"
    assert [entry["done"] for entry in document["resumed"]] == [len(quick)]
    assert sorted(pairs(document)) == sorted(requested(["quick", "slow"], 4))
    # The slow repeats started again, each once; no quick one that had finished.
    starts = [(s["scenario"], s["repeat"]) for s in scale.starts()]
    assert Counter(starts) == Counter({**{("quick", n): 1 for n in range(1, 5)},
                                       **{("slow", n): 2 for n in range(1, 5)}})
    assert_transcripts_intact(scale.cwd, document)


# --- what a resume refuses ----------------------------------------------------------------------

def test_a_resume_is_refused_while_the_run_goes_on_after_its_lane_changed_and_once_complete(
        scale):
    lane = scale.lane("held", {"slow": HELD})
    scale.hold(True)
    proc = scale.start("run", "--lane", lane, "-j", 2, "-n", 2, "-q")
    wait_until(lambda: len(scale.starts()) == 2, "2 held repeats running", proc)
    run_id = scale.run_id()
    report = scale.cwd / "reports" / run_id

    def refused(*problem: str) -> None:
        """A resume refused, with a message that says `problem`, leaving the run as it was."""
        kept = contents(report)
        done = scale.alk("run", "--resume", run_id, "-q")
        assert done.returncode == 2, done.stdout + done.stderr
        message = " ".join(done.stderr.split())
        assert all(words in message for words in problem), message
        assert contents(report) == kept

    # Another alk holds the run: a second one would run its repeats twice.
    refused("another alk is running this run")
    stopped(proc, signal.SIGTERM)
    assert proc.returncode == 130

    text = lane.read_text()
    lane.write_text(text + "# a change after the run began\n")
    refused(str(lane.resolve()), "the lane file changed")
    lane.write_text(text)

    scale.hold(False)
    done = scale.alk("run", "--resume", run_id, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    refused(f"run {run_id} is complete")
    # Nothing ran but the run and its one resume: two starts a repeat.
    assert Counter((s["scenario"], s["repeat"]) for s in scale.starts()) == {
        ("slow", 1): 2, ("slow", 2): 2}


def interrupted(scale: Scale) -> str:
    """A run of one held repeat, stopped (SIGTERM) before it finished: its id."""
    lane = scale.lane("held", {"slow": HELD})
    scale.hold(True)
    proc = scale.start("run", "--lane", lane, "-n", 1, "-q")
    wait_until(scale.starts, "a held repeat running", proc)
    stopped(proc, signal.SIGTERM)
    scale.hold(False)
    return scale.run_id()


def test_a_resume_refused_for_another_framework_version_leaves_the_run_as_it_was(scale):
    run_id = interrupted(scale)
    report = scale.cwd / "reports" / run_id
    kept = contents(report)
    # Still within the lane's requirement, but not what the run began with.
    (scale.log_dir / "version").write_text("1.5\n")
    done = scale.alk("run", "--resume", run_id, "-q")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "now reports scale 1.5" in " ".join(done.stderr.split())
    assert contents(report) == kept


def test_a_resume_that_cannot_start_leaves_the_run_resumable(scale, alk):
    run_id = interrupted(scale)
    # Resumed from a shell that lacks the lane's variable: nothing can start.
    void = alk("run", "--resume", run_id, "-q", cwd=scale.cwd)
    assert void.returncode == 2 and "left as it was" in " ".join(void.stderr.split())
    done = scale.alk("run", "--resume", run_id, "-q", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert pairs(json.loads(done.stdout)) == [("slow", 1)]


# --- several lanes in one run ---------------------------------------------------------------------

def three_lanes(scale: Scale) -> None:
    """Lanes a, b and c with the same scenarios; b's beta always fails, and waits while the
    test holds it."""
    quick = {"sleep_s": 0.1}
    scale.lane("a", {"alpha": quick, "beta": quick})
    scale.lane("b", {"alpha": quick, "beta": {**quick, **HELD}}, fail="beta")
    scale.lane("c", {"alpha": quick, "beta": quick})


def matrix(stdout: str, lanes: list[str]) -> list[str]:
    """The lane x scenario matrix: from its header line to the end."""
    lines = stdout.splitlines()
    [header] = [n for n, line in enumerate(lines) if line.split() == ["scenario", *lanes]]
    return lines[header:]


def cells(row: str) -> list[tuple[str, int, int, int]]:
    """A matrix row's cells: verdict, pass rate and its interval, in percent."""
    return [(verdict, int(rate), int(low), int(high)) for verdict, rate, low, high in
            re.findall(r"(\w+) (\d+)%? \[(\d+)%?–(\d+)%?\]", row)]


def test_three_lanes_in_one_run_report_each_and_a_matrix(scale):
    three_lanes(scale)
    done = scale.alk("run", "--lane", "a", "--lane", "b", "--lane", "c", "-n", 2, "-j", 4, "--seed", 5, "-q",
                     COLUMNS="80")
    assert done.returncode == 1, done.stdout + done.stderr
    wide = [line for line in done.stdout.splitlines() if len(line) > 80]
    assert not wide, wide
    run_id = scale.run_id()
    group = json.loads((scale.cwd / "reports" / run_id / "group.json").read_text())
    assert [lane["name"] for lane in group["lanes"]] == ["a", "b", "c"]
    documents = [json.loads((scale.cwd / "reports" / run_id / name / "result.json").read_text())
                 for name in "abc"]
    assert [d["run_id"] for d in documents] == [f"{run_id}/{name}" for name in "abc"]
    for document in documents:
        assert f"run {document['run_id']}" in done.stdout  # each lane's own report
        assert sorted(pairs(document)) == sorted(requested(["alpha", "beta"], 2))
        for scenario in document["scenarios"]:  # one seed for the three lanes
            assert [r["seed"] for r in scenario["repeats"]] == [
                repeat_seed(5, scenario["id"], n) for n in (1, 2)]

    shown = matrix(done.stdout, ["a", "b", "c"])
    rows = {line.split()[0]: cells(line) for line in shown if cells(line)}
    assert list(rows) == ["alpha", "beta"]
    for scenario, row in rows.items():
        want = []
        for document in documents:
            [entry] = [s["stats"] for s in document["scenarios"] if s["id"] == scenario]
            want.append((entry["verdict"], round(entry["pass_rate"] * 100),
                         round(entry["ci"][0] * 100), round(entry["ci"][1] * 100)))
        assert row == want
    assert [verdict for verdict, *_ in rows["beta"]] == ["pass", "fail", "pass"]

    again = scale.alk("report", run_id, COLUMNS="80")
    assert again.returncode == 0, again.stderr
    assert matrix(again.stdout, ["a", "b", "c"]) == shown
    as_json = json.loads(scale.alk("report", run_id, "--json").stdout)
    assert as_json == {"run_id": run_id, "runs": documents}


def test_a_run_of_three_lanes_killed_in_the_second_resumes_there(scale):
    scale.hold(True)  # b's beta repeats stay running: the kill cuts them
    three_lanes(scale)
    # A pattern names them, in its files' order.
    proc = scale.start("run", "--lane", "lanes/*.toml", "-n", 2, "-j", 4, "--seed", 5, "-q")
    [run_id] = wait_until(scale.run_ids, "the run's folder", proc)
    # The run id a worker is told is a digest of its lane's (alk.layout.worker_run_id).
    lane_of = {worker_run_id(f"{run_id}/{name}"): name for name in "abc"}
    in_b = [worker_run_id(f"{run_id}/b"), "beta"]
    wait_until(lambda: len(finished(journal(scale.cwd, f"{run_id}/b"))) == 2
               and [[s["run_id"], s["scenario"]] for s in scale.starts()].count(in_b) == 2,
               "lane b's alpha finished and its beta running", proc)
    proc.kill()
    proc.communicate()
    report = scale.cwd / "reports" / run_id
    lane_a = contents(report / "a")
    assert not (report / "c").exists()
    starts_before = len(scale.starts())

    # `alk runs` tells a killed run from one going on: nobody holds its journal's lock.
    listed = scale.alk("runs").stdout
    assert f"{run_id}  stopped " in listed
    # a's four repeats and b's two of alpha, of at least a's and b's 2 scenarios x 2 repeats:
    # c's scenarios are not counted before it begins.
    ran = sum(len(finished(journal(scale.cwd, f"{run_id}/{name}"))) for name in "ab")
    assert ran == 6 and f"{run_id}  stopped     ran 6 of ≥8 " in listed, listed
    assert "3 lanes × 2 scenarios" in listed
    assert f"its alk was killed; resume: alk run --resume {run_id}" in listed

    scale.hold(False)
    done = scale.alk("run", "--resume", run_id, "-j", 4, "-q", "--json")
    assert done.returncode == 1, done.stdout + done.stderr  # b's beta fails
    result = json.loads(done.stdout)
    assert result["run_id"] == run_id
    a, b, c = result["runs"]
    assert [d["run_id"] for d in (a, b, c)] == [f"{run_id}/{name}" for name in "abc"]
    assert contents(report / "a") == lane_a
    assert a["resumed"] == [] and c["resumed"] == []
    assert [entry["done"] for entry in b["resumed"]] == [2]
    for document in (a, b, c):
        assert document["status"] == "complete"
        assert sorted(pairs(document)) == sorted(requested(["alpha", "beta"], 2))
    again = Counter((lane_of[s["run_id"]], s["scenario"], s["repeat"])
                    for s in scale.starts()[starts_before:])
    assert again == Counter([("b", "beta", 1), ("b", "beta", 2),
                             *[("c", s, n) for s in ("alpha", "beta") for n in (1, 2)]])


# --- repeats at once measure what one at a time does ------------------------------------------

def test_parallel_repeats_give_the_results_of_sequential_ones(scale):
    # A seed whose first four repeats make both scenarios flaky: their statistics say something.
    seed = next(s for s in range(1000) if all(
        len({repeat_seed(s, scenario, n) % mod == 0 for n in range(1, 5)}) == 2
        for scenario, mod in (("alpha", 2), ("beta", 3))))
    steady = {"sleep_s": 0.2}
    lane = scale.lane("coin", {"alpha": {**steady, "fail_mod": 2},
                               "beta": {**steady, "fail_mod": 3}})
    documents = {}
    for jobs in (1, 4):
        done = scale.alk("run", "--lane", lane, "-n", 4, "--seed", seed, "-j", jobs, "-q",
                         "--json")
        assert done.returncode == 1, done.stdout + done.stderr
        documents[jobs] = json.loads(done.stdout)
        assert documents[jobs]["settings"]["jobs"] == jobs
    sequential, parallel = (measured(documents[jobs]) for jobs in (1, 4))
    assert parallel == sequential
    assert [s["stats"]["verdict"] for s in documents[1]["scenarios"]] == ["flaky", "flaky"]
    # The repeats did run at once with -j 4 (two started within one's sleep), not with -j 1.
    for jobs, at_once in ((1, False), (4, True)):
        began = sorted(s["at"] for s in scale.starts() if s["run_id"] ==
                       worker_run_id(documents[jobs]["run_id"]))
        assert len(began) == 8
        assert any(b - a < steady["sleep_s"] for a, b in zip(began, began[1:])) == at_once


# A repeat's own measurements of time and resources, and where its transcript is: the rest of
# a repeat, and of the statistics, depends on the seeds alone.
TIMINGS = {"duration_s", "cpu_s", "peak_rss_mb", "peak_tmpfs_mb", "transcript", "sha256"}


def measured(document) -> dict:
    """What a run measured, but for what time decides: durations, CPU and memory, and the
    resource consistency made of them."""
    def untimed(stats: dict) -> dict:
        kept = {key: value for key, value in stats.items() if key != "durations"}
        kept["consistency"] = {key: value for key, value in stats["consistency"].items()
                               if key != "resources"}
        return kept

    scenarios = [{**scenario, "stats": untimed(scenario["stats"]),
                  "repeats": [{key: value for key, value in repeat.items()
                               if key not in TIMINGS} for repeat in scenario["repeats"]]}
                 for scenario in document["scenarios"]]
    return {"scenarios": scenarios, "aggregate": untimed(document["aggregate"])}
