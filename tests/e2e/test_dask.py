"""`alk run --executor dask`: repeats on a real Dask cluster (a LocalCluster of two worker
processes) give what a local run gives, secrets stay in the workers' environment, and Ctrl-C
stops the cluster's repeats."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alk import api
from alk.errors import UsageError
from alk.plan import repeat_seed
from alk.result.document import from_json

distributed = pytest.importorskip("distributed")

from alk.execute import dask as dask_engine  # noqa: E402 - only with distributed
from alk.execute.dask import DaskEngine, _delivered  # noqa: E402

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
LANES = TESTS / "lanes"
ACTS = TESTS / "workers" / "acts.py"
HANGS = TESTS / "workers" / "hangs.py"
# Set in the Dask workers' environment only, never in this process's.
WORKER_SECRET_NAME = "E2E_DASK_WORKER_SECRET"
WORKER_SECRET = "worker-only-secret-4b7e19"


@pytest.fixture(scope="module")
def worker_tmp(tmp_path_factory):
    """The Dask workers' temporary folder: theirs alone, so that another suite running beside
    this one (its own alk-dask-* folders in the system's) cannot change what is found there."""
    return tmp_path_factory.mktemp("dask-workers-tmp")


@pytest.fixture(scope="module")
def cluster(worker_tmp):
    assert WORKER_SECRET_NAME not in os.environ
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None,
                                  env={WORKER_SECRET_NAME: WORKER_SECRET,
                                       "TMPDIR": str(worker_tmp)}) as local:
        with distributed.Client(local) as client:
            yield local.scheduler_address, client


def repeats_of(document):
    return {(s.id, r.repeat): r for s in document.scenarios for r in s.repeats}


def write_lane(folder, name, body):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(body)
    return folder / f"{name}.toml"


def assert_transcripts_intact(document, out):
    for repeat in repeats_of(document).values():
        data = (out / repeat.transcript).read_bytes()
        assert hashlib.sha256(data).hexdigest() == repeat.sha256, repeat.transcript
        assert json.loads(data.splitlines()[-1])["type"] == "attribution"
    assert (out / document.paths.transcripts / "preflight.jsonl").stat().st_size > 0


def test_a_dask_run_gives_what_a_local_run_gives(tmp_path, cluster, worker_tmp):
    address, _ = cluster
    lane = api.load_lane(ROOT / "lanes" / "reference.toml")
    local = api.run_lane(lane, api.RunOptions(repeats=2, seed=11),
                         api.RunSetup(out_dir=tmp_path / "local", jobs=1))
    folders = set(worker_tmp.glob("alk-dask-*"))
    dask = api.run_lane(lane, api.RunOptions(repeats=2, seed=11),
                        api.RunSetup(out_dir=tmp_path / "dask", engine=DaskEngine(address)))
    # Each worker's lane was closed at the end: the folder its transcripts waited in is gone.
    assert set(worker_tmp.glob("alk-dask-*")) == folders
    assert (local.exit_code, dask.exit_code) == (0, 0)
    ours, theirs = local.document, dask.document
    assert theirs.settings.executor == "dask" and theirs.status == "complete"
    assert repeats_of(theirs).keys() == repeats_of(ours).keys() and len(repeats_of(ours)) == 10
    for key, repeat in repeats_of(theirs).items():
        mine = repeats_of(ours)[key]
        for name in ("seed", "outcome", "cause", "attempts", "containment", "network",
                     "filesystem", "path_hash", "trajectory"):
            assert getattr(repeat, name) == getattr(mine, name), (key, name)
    for scenario, mine in zip(theirs.scenarios, ours.scenarios):
        # pass^k follows from the counts, whatever shape it is kept in.
        for name in ("id", "verdict", "counts", "pass_rate", "ci", "layers", "causes"):
            assert getattr(scenario.stats, name) == getattr(mine.stats, name), (mine.id, name)
    assert theirs.aggregate.verdicts == ours.aggregate.verdicts
    assert theirs.gate == ours.gate
    assert_transcripts_intact(theirs, tmp_path / "dask")


def test_an_interrupted_dask_run_resumes_with_the_same_seeds(tmp_path, cluster):
    # flaky.py passes on even seeds and fails on odd ones: each outcome is its seed's.
    address, client = cluster
    lane = api.load_lane(LANES / "flaky.toml")
    seen = []

    def interrupt_after_three(result):
        seen.append(result)
        if len(seen) == 3:
            raise KeyboardInterrupt  # what Ctrl-C raises in the calling thread

    first = api.run_lane(lane, api.RunOptions(repeats=8, seed=5),
                         api.RunSetup(out_dir=tmp_path, engine=DaskEngine("", client=client),
                                      on_repeat=interrupt_after_three))
    assert first.interrupted and first.document.status == "interrupted"
    kept = repeats_of(first.document)
    assert 3 <= len(kept) < 8  # those that finished while the others stopped are kept too
    resumed = api.resume(first.document.run_id,
                         api.RunSetup(out_dir=tmp_path, engine=DaskEngine("", client=client),
                                      reports=True))
    [run] = resumed.runs
    document = run.document
    assert document.status == "complete" and len(document.resumed) == 1
    repeats = repeats_of(document)
    assert sorted(repeats) == [("nominal", n) for n in range(1, 9)]
    for (scenario, number), repeat in repeats.items():
        assert repeat.seed == repeat_seed(5, scenario, number)
        assert repeat.outcome == ("pass" if repeat.seed % 2 == 0 else "agent")
        if (scenario, number) in kept:
            assert repeat == kept[(scenario, number)]  # kept as it was, never run again
    assert_transcripts_intact(document, tmp_path)


def program_lane(tmp_path, name, source, argument, extra=""):
    """A lane of one scenario whose worker is `source`, written to tmp_path (readable by alk's
    user only, hence filesystem = "workspace"), given `argument`; framework `name`."""
    program = tmp_path / f"{name}.py"
    program.write_text(source)
    return api.load_lane(write_lane(tmp_path / "lanes", name, (
        f'framework = "{name}"\nversion = ">=1,<2"\nfilesystem = "workspace"\n{extra}'
        f'command = ["{{python}}", "{program}", "{argument}"]\n'
        '[[scenarios]]\nid = "a"\ntask = "t"\n[scenarios.expect]\nstop_reason = "accepted"\n')))


# Reports version 1.0 at its first start (the probe) and 1.1 at every start after it.
SHIFTING_WORKER = """
import os, sys
from alk import worker
# Read while another start rewrites it, the file may be empty: a later start all the same.
count = int(open(sys.argv[1]).read() or 1) if os.path.exists(sys.argv[1]) else 0
open(sys.argv[1], "w").write(str(count + 1))
worker.hello()
worker.ready("shifty", "1.0" if count == 0 else "1.1")
worker.start()
worker.result(output="done", stop_reason="accepted", end_state={})
"""


def test_every_worker_holds_its_repeats_to_the_probes_identity(tmp_path, cluster):
    _, client = cluster
    lane = program_lane(tmp_path, "shifty", SHIFTING_WORKER, tmp_path / "starts")
    done = api.run_lane(lane, api.RunOptions(repeats=4),
                        api.RunSetup(out_dir=tmp_path, engine=DaskEngine("", client=client)))
    assert done.document.gate.version == "1.0"
    causes = [(r.outcome, r.cause) for r in repeats_of(done.document).values()]
    assert causes == [("framework_runtime", "identity_changed")] * 4


# Writes "start" and "end" to a shared log around a short wait: two repeats at once interleave.
LOGGING_WORKER = """
import os, sys, time
from alk import worker
worker.hello()
worker.ready("logged", "1.0")
worker.start()
log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(log, b"start\\n")
time.sleep(0.3)
os.write(log, b"end\\n")
worker.result(output="done", stop_reason="accepted", end_state={})
"""


def test_a_lanes_max_parallel_holds_on_the_cluster(tmp_path, cluster):
    _, client = cluster
    log = tmp_path / "log"
    lane = program_lane(tmp_path, "logged", LOGGING_WORKER, log, extra="max_parallel = 1\n")
    done = api.run_lane(lane, api.RunOptions(repeats=4),
                        api.RunSetup(out_dir=tmp_path, engine=DaskEngine("", client=client)))
    assert done.exit_code == 0, done.document
    assert log.read_text().split() == ["start", "end"] * 4  # one at a time, on two workers


def test_the_cli_runs_on_the_cluster(tmp_path, cluster, alk):
    address, _ = cluster
    done = alk("run", "--lane", ROOT / "lanes" / "reference.toml", "-n", 1, "-s", "nominal",
               "-s", "crash-after-effect", "--executor", "dask", "--scheduler", address, "-q",
               "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["settings"]["executor"] == "dask"
    assert [s["stats"]["verdict"] for s in document["scenarios"]] == ["pass", "pass"]
    assert_transcripts_intact(from_json(document), tmp_path)


def test_an_unreachable_scheduler_or_no_distributed_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(dask_engine, "CONNECT_TIMEOUT_S", 1)
    with socket_closed() as address, pytest.raises(UsageError) as refused:
        DaskEngine(address)
    assert str(refused.value).startswith(f"--scheduler {address}: no Dask scheduler answered "
                                         "within 1 s (OSError: ")
    monkeypatch.setitem(sys.modules, "distributed", None)  # as where it is not installed
    with pytest.raises(UsageError, match=r"needs Dask distributed, which is not installed: "
                                         r"pip install 'alk\[dask\]'"):
        DaskEngine("tcp://127.0.0.1:8786")


class socket_closed:
    """A loopback address where nothing listens."""

    def __enter__(self):
        import socket

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))  # held, never listening: connections are refused
        return f"tcp://127.0.0.1:{self.socket.getsockname()[1]}"

    def __exit__(self, *exc):
        self.socket.close()


def test_secrets_come_from_the_workers_environment(tmp_path, cluster):
    _, client = cluster
    env_lane = write_lane(tmp_path / "lanes", "env", (
        f'framework = "acts"\nversion = ">=1"\ncommand = ["{{python}}", "{ACTS}", "env"]\n'
        f'required_env = ["{WORKER_SECRET_NAME}"]\n[[scenarios]]\nid = "a"\ntask = "t"\n'))
    done = api.run_lane(api.load_lane(env_lane), api.RunOptions(repeats=1),
                        api.RunSetup(out_dir=tmp_path / "env",
                                     engine=DaskEngine("", client=client)))
    assert done.exit_code == 0, done.document
    [repeat] = repeats_of(done.document).values()
    events = [json.loads(line) for line in
              (tmp_path / "env" / repeat.transcript).read_text().splitlines()]
    seen = next(e for e in events if e["type"] == "env")["payload"]["env"]
    assert seen[WORKER_SECRET_NAME] == "[REDACTED]"  # the worker's value, its redactor's mask
    for path in (tmp_path / "env").rglob("*.json*"):
        assert WORKER_SECRET.encode() not in path.read_bytes(), path

    # The coordinator's value never travels: a worker without it voids the run.
    never_lane = write_lane(tmp_path / "lanes", "never", env_lane.read_text().replace(
        WORKER_SECRET_NAME, "E2E_DASK_NEVER_SET"))
    coordinator_env = {**os.environ, "E2E_DASK_NEVER_SET": "on-the-coordinator"}
    void = api.run_lane(api.load_lane(never_lane), api.RunOptions(repeats=2),
                        api.RunSetup(out_dir=tmp_path / "never", environ=coordinator_env,
                                     engine=DaskEngine("", client=client)))
    assert void.exit_code == 3
    gate = void.document.gate
    assert gate.cause == "env_missing"
    assert "on Dask worker tcp://" in gate.detail
    assert "E2E_DASK_NEVER_SET" in gate.detail
    assert repeats_of(void.document) == {}


def test_a_worker_with_another_alk_voids_the_run(tmp_path, cluster, monkeypatch):
    _, client = cluster
    monkeypatch.setattr(dask_engine, "__version__", "9.9.9")  # what the coordinator says
    void = api.run_lane(api.load_lane(LANES / "trivial.toml"), api.RunOptions(repeats=1),
                        api.RunSetup(out_dir=tmp_path, engine=DaskEngine("", client=client)))
    assert void.exit_code == 3
    gate = void.document.gate
    assert gate.cause == "harness_error"
    assert "alk 9.9.9 on the coordinator: install the same alk on both" in gate.detail


def test_ctrl_c_stops_the_repeats_running_on_the_cluster(tmp_path, cluster):
    address, _ = cluster
    token = f"dask-interrupt-{os.getpid()}-{time.monotonic_ns()}"  # names this test's workers
    lane = write_lane(tmp_path / "lanes", "hangs", (LANES / "hangs.toml").read_text().replace(
        '"workers/hangs.py"', f'"{HANGS}", "{token}"').replace("timeout_s = 2", "timeout_s = 60"))
    proc = subprocess.Popen([sys.executable, "-m", "alk", "run", "--lane", str(lane), "-n", "4",
                             "--executor", "dask", "--scheduler", address, "-q"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        running = hanging(token)
        while len(running) < 2:  # one repeat on each of the two workers
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the cluster never ran two repeats at once"
            time.sleep(0.05)
            running = hanging(token)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    deadline = time.monotonic() + 10
    while hanging(token):
        assert time.monotonic() < deadline, f"workers left running: {hanging(token)}"
        time.sleep(0.05)
    [result] = tmp_path.glob("reports/*/result.json")
    document = json.loads(result.read_text())
    assert document["status"] == "interrupted" and repeats_of(from_json(document)) == {}
    # The two repeats cut short left their transcripts, as locally; the two queued never ran.
    logs = sorted(tmp_path.glob("transcripts/*/nominal/repeat-*.jsonl"))
    assert len(logs) == 2
    for log in logs:
        assert json.loads(log.read_text().splitlines()[-1])["type"] == "interrupted"


def hanging(token):
    """The pids of hangs.py workers started with `token`: argv is exactly that, not a wrapper
    that names it."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")[:-1]
                state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if argv[1:] == [str(HANGS).encode(), token.encode()] and state != "Z":
                found.add(int(entry.name))
    return found


def test_a_transcript_that_arrives_changed_voids_its_repeat(tmp_path):
    from alk.records import Outcome, RepeatResult

    data = b'{"seq":1}\n'
    result = RepeatResult(
        scenario="echo", repeat=1, seed=1, outcome=Outcome.PASS, cause="passed", detail="",
        duration_s=0.1, exit_code=0, signal=None, timed_out=False, peak_rss_mb=None,
        cpu_s=None, containment=None, network=None, filesystem=None, attempts=1, path_hash="",
        violations=0, trajectory=(), claimed=None, transcript="transcripts/r/echo/repeat-01.jsonl",
        sha256=hashlib.sha256(data).hexdigest())
    assert _delivered(result, data, tmp_path) == result
    assert (tmp_path / result.transcript).read_bytes() == data
    changed = _delivered(result, data + b"x", tmp_path)
    assert (changed.outcome, changed.cause, changed.sha256) == ("lane_infra", "harness_error", "")
    assert "another sha256" in changed.detail
    assert not [p for p in tmp_path.rglob(".*.tmp")]  # no temporary file left beside it

