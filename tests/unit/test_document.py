"""The result document as `alk run` writes it: built by the real executor from scripted
observations, written, read back, and turned into the CLI's exit code."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import types
from datetime import datetime, timezone
from pathlib import Path

import pytest

from alk import __version__
from alk.api import read_run, run_lane
from alk.causes import Cause
from alk.errors import RunNotFoundError, TranscriptError
from alk.plan import build_plan
from alk.records import (
    Execution,
    ExitCode,
    Expectations,
    Fault,
    KillAt,
    Limits,
    Observation,
    Scenario,
    WireFault,
)
from alk.report import document
from alk.report.document import (
    build_document,
    exit_code,
    latest_run_id,
    read_document,
    result_path,
    write_document,
)
from alk.redaction import MASK, Redactor
from scripted import PASSING, SECRET, ScenarioRunner, ready

pytestmark = pytest.mark.usefixtures("private_temp")

ENVIRON = {"TOKEN": SECRET, "PATH": "/bin"}
WRONG = dataclasses.replace(PASSING, result={**PASSING.result, "output": "bye"})
CRASHED = dataclasses.replace(PASSING, result=None, exit_code=1, stderr_tail="boom\n")


def scenario(sid: str, **fields) -> Scenario:
    return Scenario(sid, f"task {sid}", {}, Expectations(output_equals="hi"), **fields)


def run(tmp_path, make_lane, runner, scenarios=(scenario("a"), scenario("b")), repeats=2,
        **lane_fields):
    lane = make_lane(scenarios=tuple(scenarios), required_env=("TOKEN",), **lane_fields)
    return run_lane(lane, repeats=repeats, seed=7, out_dir=tmp_path, runner=runner,
                    environ=ENVIRON)


def peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/self/status")


def test_a_run_is_written_whole_and_reads_back_as_returned(tmp_path, make_lane):
    runner = ScenarioRunner(PASSING, a=[PASSING, PASSING], b=[PASSING, WRONG])
    before = peak_rss_kb()
    done = run(tmp_path, make_lane, runner, description="two scenarios")
    after = peak_rss_kb()
    doc = done.document
    run_id = doc["run_id"]
    assert done.path == result_path(tmp_path, run_id) == (
        tmp_path / "reports" / run_id / "result.json")
    assert read_run("latest", tmp_path) == read_run(run_id, tmp_path) == doc
    assert (doc["schema"], doc["status"], doc["alk_version"]) == (
        "alk.result/1", "complete", __version__)
    started = datetime.fromisoformat(doc["started_at"])
    assert started.microsecond == 0 and started.tzinfo is not None
    assert datetime.fromisoformat(doc["finished_at"]) >= started
    assert doc["lane"] == {"name": "demo", "description": "two scenarios",
                           "path": "lanes/demo.toml", "framework": "fw",
                           "requirement": ">=1.0,<2", "reported_framework": "fw",
                           "reported_version": "1.0"}
    assert doc["settings"]["repeats"] == 2 and doc["settings"]["seed"] == 7
    assert doc["settings"]["scenarios"] == ["a", "b"]
    assert doc["settings"]["timeout_s"] == 30.0 and doc["settings"]["limits"] == Limits().applied()
    assert doc["preflight"] == {"ok": True, "cause": None, "detail": "", "framework": "fw",
                                "version": "1.0"}
    assert doc["identities"] == [{"framework": "fw", "version": "1.0", "repeats": 4}]
    assert before / 1024 - 0.1 <= doc["harness"]["peak_rss_mb"] <= after / 1024 + 0.1
    assert doc["paths"] == {"result": f"reports/{run_id}/result.json",
                            "transcripts": f"transcripts/{run_id}", "workspaces": None}
    a, b = doc["scenarios"]
    assert (a["id"], a["verdict"], b["id"], b["verdict"]) == ("a", "pass", "b", "flaky")
    assert [r["repeat"] for r in b["repeats"]] == [1, 2]
    failed = next(r for r in b["repeats"] if r["outcome"] != "pass")
    assert failed["cause"] == Cause.WRONG_OUTPUT and '"bye"' in failed["detail"]
    assert failed["exit_code"] == 0 and failed["attempts"] == 1
    assert (tmp_path / failed["transcript"]).is_file() and len(failed["sha256"]) == 64
    assert doc["aggregate"]["counts"] == {"requested": 4, "completed": 4, "void": 0,
                                          "scored": 4, "passed": 3}
    assert done.exit_code is ExitCode.FAIL == exit_code(doc)


def test_every_field_of_a_repeat_is_recorded(tmp_path, make_lane):
    measured = dataclasses.replace(
        PASSING, duration_s=1.5, exit_code=0, peak_rss_mb=12.5, peak_tmpfs_mb=3.0, cpu_s=0.25,
        containment="pid_namespace", network="none", filesystem="sandbox",
        trajectory=("read:ok",), trajectory_hash="a" * 64, path_hash="b" * 64,
        result={**PASSING.result, "verification": {"passed": True}})
    runner = ScenarioRunner(PASSING, a=[measured])
    [entry] = run(tmp_path, make_lane, runner, (scenario("a"),), 1).document["scenarios"]
    [repeat] = entry["repeats"]
    transcript = repeat.pop("transcript")
    assert transcript.endswith("a/repeat-01.jsonl") and len(repeat.pop("sha256")) == 64
    assert isinstance(repeat.pop("seed"), int)
    assert repeat == {
        "repeat": 1, "outcome": "pass", "cause": "passed", "detail": "1 checks held",
        "duration_s": 1.5, "exit_code": 0, "signal": None, "timed_out": False,
        "peak_rss_mb": 12.5, "peak_tmpfs_mb": 3.0, "cpu_s": 0.25,
        "containment": "pid_namespace", "network": "none", "filesystem": "sandbox",
        "attempts": 1, "identities": [{"framework": "fw", "version": "1.0"}], "path_hash": "b" * 64, "trajectory_hash": "a" * 64,
        "violations": 0, "trajectory": ["read:ok"], "claimed": {"passed": True},
        "model": None}


@pytest.mark.parametrize("fields, scripted", [
    ({"script": ({"say": "hi"},)}, True),
    ({}, False),
    ({"script": ({"say": "hi"},), "faults": (Fault("tool"),)}, False),
    ({"script": ({"say": "hi"},), "kill_at": KillAt("tool", "call", 1), "max_attempts": 2},
     False),
    ({"script": ({"say": "hi"},), "wire_faults": (WireFault(1, "http_500"),)}, False),
    ({"script": ({"choices": [{"weight": 1, "text": "a"}, {"weight": 1, "text": "b"}]},)},
     False),
])
def test_only_a_scenario_scripted_whole_is_marked_scripted(tmp_path, make_lane, fields,
                                                            scripted):
    runner = ScenarioRunner(PASSING, a=[PASSING])
    [entry] = run(tmp_path, make_lane, runner, (scenario("a", **fields),), 1
                  ).document["scenarios"]
    assert entry["scripted"] is scripted


def test_every_identity_a_worker_reported_is_counted_once_per_repeat(tmp_path, make_lane):
    killed = dataclasses.replace(PASSING, kill_fired=True)

    def resumed(version):
        return dataclasses.replace(PASSING, ready=ready(version))

    resuming = scenario("a", kill_at=KillAt("tool", "call"), max_attempts=2)
    runner = ScenarioRunner(PASSING, a=[killed, resumed("1.0"), killed, resumed("9.9")])
    doc = run(tmp_path, make_lane, runner, (resuming,)).document
    assert doc["identities"] == [{"framework": "fw", "version": "1.0", "repeats": 2},
                                 {"framework": "fw", "version": "9.9", "repeats": 1}]
    assert [r["identities"] for r in doc["scenarios"][0]["repeats"]] == [
        [{"framework": "fw", "version": "1.0"}] * 2,
        [{"framework": "fw", "version": "1.0"}, {"framework": "fw", "version": "9.9"}]]


def test_a_probe_that_named_nothing_is_no_identity(tmp_path, make_lane):
    anonymous = Observation(spawned=True, ready={}, exit_code=0)
    doc = run(tmp_path, make_lane, ScenarioRunner(anonymous)).document
    assert doc["identities"] == []
    assert doc["preflight"] == {"ok": False, "cause": "framework_mismatch",
                                "detail": "worker reports framework None, lane 'demo' expects 'fw'",
                                "framework": None,
                                "version": None}


def test_a_refused_version_voids_the_run_and_names_what_was_found(tmp_path, make_lane):
    old = Observation(spawned=True, ready=ready("0.1"), exit_code=0)
    done = run(tmp_path, make_lane, ScenarioRunner(old))
    doc = done.document
    assert doc["preflight"] == {"ok": False, "cause": "version_unsupported",
                                "detail": "fw 0.1 does not satisfy the lane's requirement '>=1.0,<2'",
                                "framework": "fw",
                                "version": "0.1"}
    assert (doc["lane"]["reported_framework"], doc["lane"]["reported_version"]) == ("fw", "0.1")
    assert doc["identities"] == [{"framework": "fw", "version": "0.1", "repeats": 0}]
    assert [s["verdict"] for s in doc["scenarios"]] == ["void", "void"]
    assert done.exit_code is ExitCode.VOID


def test_a_run_that_never_started_says_why_and_names_no_framework(tmp_path, make_lane):
    lane = make_lane(required_env=("TOKEN",))
    done = run_lane(lane, repeats=1, out_dir=tmp_path, runner=ScenarioRunner(PASSING),
                    environ={"PATH": "/bin"})
    gate = done.document["preflight"]
    assert (gate["ok"], gate["cause"], gate["framework"], gate["version"]) == (
        False, "env_missing", None, None)
    assert "TOKEN" in gate["detail"] and done.exit_code is ExitCode.VOID


def test_kept_workspaces_are_named(tmp_path, make_lane):
    lane = make_lane(scenarios=(scenario("a"),), required_env=("TOKEN",))
    done = run_lane(lane, repeats=1, out_dir=tmp_path, runner=ScenarioRunner(PASSING, a=[
        PASSING]), environ=ENVIRON, keep_workspaces=True)
    kept = done.document["paths"]["workspaces"]
    assert kept and Path(kept).is_dir()


@pytest.mark.parametrize("a, b, code", [
    ([PASSING, PASSING], [PASSING, PASSING], ExitCode.PASS),
    ([PASSING, PASSING], [WRONG, WRONG], ExitCode.FAIL),
    ([PASSING, PASSING], [PASSING, CRASHED], ExitCode.FAIL),
    # One void repeat beside passes is not green, nor is a scenario with nothing scored.
    ([PASSING, PASSING], [PASSING, OSError("disk full")], ExitCode.VOID),
    ([PASSING, PASSING], [OSError("disk full"), OSError("disk full")], ExitCode.VOID),
    # A failure outranks a void.
    ([WRONG, WRONG], [OSError("disk full"), OSError("disk full")], ExitCode.FAIL),
])
def test_the_exit_code_is_the_worst_verdict(tmp_path, make_lane, a, b, code):
    done = run(tmp_path, make_lane, ScenarioRunner(PASSING, a=a, b=b))
    assert done.exit_code is code and exit_code(done.document) is code


def test_a_document_without_scenarios_is_not_green():
    assert exit_code({"scenarios": [], "aggregate": {"counts": {"void": 0}}}) is ExitCode.VOID


def test_the_file_is_redacted_strict_ascii_json(tmp_path):
    path = tmp_path / "reports" / "r1" / "result.json"
    doc = {"detail": f"leaked {SECRET} \u202e\x1b[31m", "n": 1.5}
    returned = write_document(path, doc, Redactor([SECRET]))
    text = path.read_text(encoding="ascii")
    assert SECRET not in text and "\\u202e" in text and "\\u001b" in text
    assert json.loads(text) == returned and SECRET not in returned["detail"]
    with pytest.raises(ValueError):
        write_document(path, {"rate": float("nan")}, Redactor())
    assert json.loads(path.read_text()) == returned  # the earlier document stands


def test_a_secret_that_spells_one_of_alks_words_masks_only_what_was_quoted(tmp_path):
    # A lane's MODE=pass: the worker's text loses it, alk's field names and codes keep it.
    doc = {"schema": "alk.result/1", "status": "complete", "pass_rate": 1.0,
           "scenarios": [{"verdict": "pass", "causes": {"passed": 1}, "repeats": [
               {"outcome": "pass", "cause": "passed", "detail": "a pass was quoted",
                "network": "none", "claimed": {"pass": "pass"}}]}]}
    returned = write_document(tmp_path / "result.json", doc, Redactor(["pass", "none"]))
    [scenario] = returned["scenarios"]
    [repeat] = scenario["repeats"]
    assert returned["pass_rate"] == 1.0 and returned["status"] == "complete"
    assert scenario["verdict"] == "pass" and scenario["causes"] == {"passed": 1}
    assert (repeat["outcome"], repeat["cause"], repeat["network"]) == ("pass", "passed", "none")
    assert repeat["detail"] == f"a {MASK} was quoted"
    # The claim is the worker's own JSON, keys and all.
    assert repeat["claimed"] == {MASK: MASK}


def test_a_write_that_fails_leaves_the_earlier_document_and_no_debris(tmp_path, monkeypatch):
    path = tmp_path / "r1" / "result.json"
    write_document(path, {"n": 1}, Redactor())

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        write_document(path, {"n": 2}, Redactor())
    assert json.loads(path.read_text()) == {"n": 1}
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]


def test_reading_a_run_that_is_not_there_or_not_a_result(tmp_path):
    path = result_path(tmp_path, "r1")
    with pytest.raises(RunNotFoundError) as missing:
        read_document(tmp_path, "r1")
    assert str(missing.value) == (f"no result for run 'r1': {path} does not exist (run ids "
                                  "are the folder names under reports/)")
    path.parent.mkdir(parents=True)
    for text, message in (
            ("{not json", f"{path}: not a readable result document: "),
            ('["alk.result/1"]', f"{path}: schema None is not 'alk.result/1'; "),
            ('{"schema": "alk.result/0"}', f"{path}: schema 'alk.result/0' is not 'alk.result/1'; "
                                           "this alk cannot render it")):
        path.write_text(text)
        with pytest.raises(TranscriptError) as caught:
            read_document(tmp_path, "r1")
        assert str(caught.value).startswith(message)
    path.write_text('{"schema": "alk.result/1", "run_id": "r1"}')
    assert read_document(tmp_path, "r1") == {"schema": "alk.result/1", "run_id": "r1"}


def test_the_latest_run_is_the_last_by_id_with_a_result(tmp_path):
    with pytest.raises(RunNotFoundError, match="no runs in .*reports/; start one"):
        latest_run_id(tmp_path)
    for run_id in ("20260101-a", "20260301-c", "20260201-b"):
        write_document(result_path(tmp_path, run_id), {}, Redactor())
    (tmp_path / "reports" / "20260401-started").mkdir()  # no result yet
    assert latest_run_id(tmp_path) == "20260301-c"
    empty = tmp_path / "empty"
    (empty / "reports").mkdir(parents=True)
    with pytest.raises(RunNotFoundError):
        latest_run_id(empty)


def test_alk_measures_its_own_peak_memory_even_without_proc(monkeypatch):
    before = peak_rss_kb()
    assert before <= document._own_peak_rss_kb() <= peak_rss_kb()

    def no_proc(*args, **kwargs):
        raise OSError("no /proc")

    monkeypatch.setattr(document, "open", no_proc, raising=False)
    assert document._own_peak_rss_kb() == resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # macOS gives ru_maxrss in bytes.
    monkeypatch.setattr(document.sys, "platform", "darwin")
    monkeypatch.setattr(document.resource, "getrusage",
                        lambda who: types.SimpleNamespace(ru_maxrss=1_000_000_000))
    assert document._own_peak_rss_kb() == 976_562


def test_a_run_on_disk_before_its_probe_says_nothing_was_judged(tmp_path, make_lane):
    lane = make_lane(scenarios=(scenario("a"),))
    plan = build_plan(lane, "r1", repeats=1, seed=1)
    doc = build_document(plan, Execution(), status="running",
                         started_at=datetime.now(timezone.utc), finished_at=None)
    assert doc["preflight"] == {"ok": None, "cause": None, "detail": "", "framework": None,
                                "version": None}
    assert doc["finished_at"] is None and doc["identities"] == []
    peak = doc["harness"]["peak_rss_mb"]
    assert isinstance(peak, float) and peak > 0 and peak == round(peak, 1)


def test_a_probe_that_named_only_its_framework_is_an_identity(tmp_path, make_lane):
    unversioned = Observation(spawned=True, ready={"framework": "fw"}, exit_code=0)
    doc = run(tmp_path, make_lane, ScenarioRunner(unversioned)).document
    assert doc["preflight"]["cause"] == "version_invalid"
    assert doc["identities"] == [{"framework": "fw", "version": None, "repeats": 0}]


def test_the_file_is_indented_for_people_and_takes_any_value(tmp_path):
    path = tmp_path / "result.json"
    returned = write_document(path, {"lane": {"path": Path("lanes/x.toml")}}, Redactor())
    assert returned == {"lane": {"path": "lanes/x.toml"}}
    assert path.read_text() == '{\n "lane": {\n  "path": "lanes/x.toml"\n }\n}\n'


def test_a_document_is_written_beside_its_place_then_renamed(tmp_path, monkeypatch):
    """The rename is atomic only within one file system; the temporary name is hidden."""
    path = tmp_path / "r1" / "result.json"
    renamed = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: renamed.append((src, dst)) or real(
        src, dst))
    write_document(path, {"n": 1}, Redactor())
    [(src, dst)] = renamed
    assert Path(dst) == path and Path(src).parent == path.parent
    assert Path(src).name.startswith(".result.json.") and Path(src).name.endswith(".tmp")


def test_alk_does_not_count_the_memory_of_what_started_it(tmp_path):
    """On Linux a child's ru_maxrss starts from its parent's peak: measured that way, a run
    started by a large process would report that process's memory as alk's."""
    ballast = bytearray(256 * 1024 * 1024)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touched, so that it is resident
    code = "from alk.report.document import _own_peak_rss_kb as own; print(own())"
    own = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout)
    assert document._own_peak_rss_kb() > 256 * 1024  # this process does hold it
    del ballast
    assert own < 128 * 1024


def test_checkpoints_take_a_bounded_share_of_a_long_run(tmp_path, make_lane, monkeypatch):
    # A clock that moves 0.4 s a repeat, and 3 s for each checkpoint written: a large document.
    from alk import api

    now = [1000.0]
    written = []
    write = api.write_document

    def slow_write(path, doc, redactor):
        written.append((now[0], doc["status"]))
        now[0] += 3.0
        return write(path, doc, redactor)

    def ticking(result):
        now[0] += 0.4

    monkeypatch.setattr(api.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(api, "write_document", slow_write)
    lane = make_lane(scenarios=(scenario("a"),), required_env=("TOKEN",))
    run_lane(lane, repeats=200, out_dir=tmp_path, runner=ScenarioRunner(PASSING),
             environ=ENVIRON, on_repeat=ticking)
    running = [t for t, status in written if status == "running"]
    # The first when the run starts, the next after a second, then 60 s (20 x 3 s) apart.
    assert running[0] == 1000.0 and running[1] == pytest.approx(1004.2)
    assert [round(b - a, 1) for a, b in zip(running[1:], running[2:])] == [63.0] * (
        len(running) - 2)
    assert len(running) == 3 and written[-1][1] == "complete"
