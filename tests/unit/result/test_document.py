"""The result record as `alk run` writes it: built by the real executor from scripted
observations, written, read back typed, and turned into the CLI's exit code."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import resource
import subprocess
import sys
import types
from datetime import datetime, timezone
from pathlib import Path

import pytest
from helpers.scripted import PASSING, SECRET, ScenarioRunner, ready

from alk import __version__
from alk.api import RunOptions, RunSetup, read_run, run_lane
from alk.causes import Cause
from alk.errors import ResultFormatError, RunNotFoundError, TranscriptError
from alk.layout import result_path
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
)
from alk.redaction import MASK, Redactor
from alk.result.document import (
    SCHEMA,
    Gate,
    Identity,
    LaneInfo,
    Paths,
    RunDocument,
    build_document,
    from_json,
    to_json,
)
from alk.result.store import latest_run_id, read_document, write_document
from alk.result.verdict import exit_code
from alk.runner import procfs
from alk.served_model import WireFault

pytestmark = pytest.mark.usefixtures("private_temp")

ENVIRON = {"TOKEN": SECRET, "PATH": "/bin"}
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
WRONG = dataclasses.replace(PASSING, result={**PASSING.result, "output": "bye"})
CRASHED = dataclasses.replace(PASSING, result=None, exit_code=1, stderr_tail="boom\n")
RUN = "20261129-120000-ab12c3"  # a run of several lanes


def scenario(sid: str, **fields) -> Scenario:
    return Scenario(sid, f"task {sid}", {}, Expectations(output_equals="hi"), **fields)


def run(tmp_path, make_lane, runner, scenarios=(scenario("a"), scenario("b")), repeats=2,
        **lane_fields):
    lane = make_lane(scenarios=tuple(scenarios), required_env=("TOKEN",), **lane_fields)
    return run_lane(lane, RunOptions(repeats=repeats, seed=7),
                    RunSetup(out_dir=tmp_path, runner=runner, environ=ENVIRON))


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
    run_id = doc.run_id
    assert done.path == result_path(tmp_path, run_id) == (
        tmp_path / "reports" / run_id / "result.json")
    assert read_run("latest", tmp_path) == read_run(run_id, tmp_path) == doc
    assert json.loads(done.path.read_text()) == json.loads(json.dumps(to_json(doc)))
    assert (doc.schema, doc.status, doc.alk_version) == ("alk.result/3", "complete", __version__)
    started = datetime.fromisoformat(doc.started_at)
    assert started.microsecond == 0 and started.tzinfo is not None
    assert datetime.fromisoformat(doc.finished_at) >= started
    assert doc.lane == LaneInfo(name="demo", description="two scenarios",
                                path="lanes/demo.toml", framework="fw",
                                requirement=">=1.0,<2", sha256="")
    assert doc.settings.repeats == 2 and doc.settings.seed == 7
    assert doc.settings.scenarios == ("a", "b")
    assert doc.settings.timeout_s == 30.0 and doc.settings.limits == Limits().applied()
    assert doc.gate == Gate(ok=True, cause=None, detail="", framework="fw", version="1.0")
    assert doc.identities == (Identity("fw", "1.0", 4),)
    assert before / 1024 - 0.1 <= doc.harness_peak_rss_mb <= after / 1024 + 0.1
    assert doc.paths == Paths(result=f"reports/{run_id}/result.json",
                              transcripts=f"transcripts/{run_id}", workspaces=None)
    a, b = doc.scenarios
    assert (a.id, a.verdict, b.id, b.verdict) == ("a", "pass", "b", "flaky")
    assert [r.repeat for r in b.repeats] == [1, 2]
    failed = next(r for r in b.repeats if r.outcome != "pass")
    assert failed.cause == Cause.WRONG_OUTPUT and '"bye"' in failed.detail
    assert failed.exit_code == 0 and failed.attempts == 1
    assert (tmp_path / failed.transcript).is_file() and len(failed.sha256) == 64
    counts = doc.aggregate.counts
    assert (counts.requested, counts.completed, counts.void, counts.scored, counts.passed) == (
        4, 4, 0, 4, 3)
    assert done.exit_code is ExitCode.FAIL == exit_code(doc)


def test_every_field_of_a_repeat_is_recorded(tmp_path, make_lane):
    measured = dataclasses.replace(
        PASSING, duration_s=1.5, exit_code=0, peak_rss_mb=12.5, peak_tmpfs_mb=3.0, cpu_s=0.25,
        containment="pid_namespace", network="none", filesystem="sandbox",
        trajectory=("read:ok",), trajectory_hash="a" * 64, path_hash="b" * 64,
        result={**PASSING.result, "verification": {"passed": True}})
    runner = ScenarioRunner(PASSING, a=[measured])
    [entry] = run(tmp_path, make_lane, runner, (scenario("a"),), 1).document.scenarios
    [repeat] = to_json(entry)["repeats"]
    transcript = repeat.pop("transcript")
    assert transcript.endswith("a/repeat-01.jsonl") and len(repeat.pop("sha256")) == 64
    assert isinstance(repeat.pop("seed"), int)
    assert repeat == {
        "scenario": "a", "repeat": 1, "outcome": "pass", "cause": "passed", "detail": "1 checks held",
        "duration_s": 1.5, "exit_code": 0, "signal": None, "timed_out": False,
        "peak_rss_mb": 12.5, "peak_tmpfs_mb": 3.0, "cpu_s": 0.25,
        "containment": "pid_namespace", "network": "none", "filesystem": "sandbox",
        "attempts": 1, "identities": (("fw", "1.0"),), "path_hash": "b" * 64,
        "trajectory_hash": "a" * 64, "violations": 0, "trajectory": ("read:ok",),
        "claimed": {"passed": True}, "model": None,
        # The event path's steps stay in the journal: in the document they would grow it by
        # up to 8 KiB a repeat.
        "path": ()}


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
                  ).document.scenarios
    assert entry.scripted is scripted


def test_every_identity_a_worker_reported_is_counted_once_per_repeat(tmp_path, make_lane):
    killed = dataclasses.replace(PASSING, kill_fired=True)

    def resumed(version):
        return dataclasses.replace(PASSING, ready=ready(version))

    resuming = scenario("a", kill_at=KillAt("tool", "call"), max_attempts=2)
    runner = ScenarioRunner(PASSING, a=[killed, resumed("1.0"), killed, resumed("9.9")])
    doc = run(tmp_path, make_lane, runner, (resuming,)).document
    assert doc.identities == (Identity("fw", "1.0", 2), Identity("fw", "9.9", 1))
    assert [r.identities for r in doc.scenarios[0].repeats] == [
        (("fw", "1.0"),) * 2, (("fw", "1.0"), ("fw", "9.9"))]


def test_a_probe_that_named_nothing_is_no_identity(tmp_path, make_lane):
    anonymous = Observation(spawned=True, ready={}, exit_code=0)
    doc = run(tmp_path, make_lane, ScenarioRunner(anonymous)).document
    assert doc.identities == ()
    assert doc.gate == Gate(False, "framework_mismatch",
                            "worker reports framework None, lane 'demo' expects 'fw'", None, None)


def test_a_refused_version_voids_the_run_and_names_what_was_found(tmp_path, make_lane):
    old = Observation(spawned=True, ready=ready("0.1"), exit_code=0)
    done = run(tmp_path, make_lane, ScenarioRunner(old))
    doc = done.document
    assert doc.gate == Gate(False, "version_unsupported",
                            "fw 0.1 does not satisfy the lane's requirement '>=1.0,<2'",
                            "fw", "0.1")
    assert doc.identities == (Identity("fw", "0.1", 0),)
    assert [s.verdict for s in doc.scenarios] == ["void", "void"]
    assert done.exit_code is ExitCode.VOID


def test_a_run_that_never_started_says_why_and_names_no_framework(tmp_path, make_lane):
    lane = make_lane(required_env=("TOKEN",))
    done = run_lane(lane, RunOptions(repeats=1),
                    RunSetup(out_dir=tmp_path, runner=ScenarioRunner(PASSING),
                             environ={"PATH": "/bin"}))
    gate = done.document.gate
    assert (gate.ok, gate.cause, gate.framework, gate.version) == (
        False, "env_missing", None, None)
    assert "TOKEN" in gate.detail and done.exit_code is ExitCode.VOID


def test_kept_workspaces_are_named(tmp_path, make_lane):
    lane = make_lane(scenarios=(scenario("a"),), required_env=("TOKEN",))
    done = run_lane(lane, RunOptions(repeats=1),
                    RunSetup(out_dir=tmp_path, runner=ScenarioRunner(PASSING, a=[PASSING]),
                             environ=ENVIRON, keep_workspaces=True))
    kept = done.document.paths.workspaces
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


def test_a_document_without_scenarios_is_not_green(make_lane):
    plan = build_plan(make_lane(), "r1", repeats=1, seed=1)
    empty = dataclasses.replace(plan, scenarios=(), items=())
    doc = build_document(empty, Execution(), status="complete", started_at=NOW,
                         finished_at=NOW, harness_peak_rss_mb=1.0)
    assert doc.scenarios == () and exit_code(doc) is ExitCode.VOID


def one_repeat(tmp_path, make_lane, **repeat_fields) -> RunDocument:
    """A real document of one passing repeat, its repeat's fields replaced."""
    doc = run(tmp_path, make_lane, ScenarioRunner(PASSING, a=[PASSING]), (scenario("a"),),
              1).document
    [entry] = doc.scenarios
    repeat = dataclasses.replace(entry.repeats[0], **repeat_fields)
    return dataclasses.replace(doc, scenarios=(dataclasses.replace(entry, repeats=(repeat,)),))


def test_the_file_is_redacted_strict_ascii_json(tmp_path, make_lane):
    path = tmp_path / "reports" / "r1" / "result.json"
    doc = one_repeat(tmp_path, make_lane, detail=f"leaked {SECRET} \u202e\x1b[31m")
    returned = write_document(path, doc, Redactor([SECRET]))
    text = path.read_text(encoding="ascii")
    assert SECRET not in text and "\\u202e" in text and "\\u001b" in text
    assert from_json(json.loads(text)) == returned
    assert returned.scenarios[0].repeats[0].detail == f"leaked {MASK} \u202e\x1b[31m"
    with pytest.raises(ValueError):
        write_document(path, one_repeat(tmp_path, make_lane, duration_s=float("nan")), Redactor())
    assert from_json(json.loads(path.read_text())) == returned  # the earlier document stands


def test_a_secret_that_spells_one_of_alks_words_masks_only_what_was_quoted(tmp_path, make_lane):
    # A lane's MODE=pass: the worker's text loses it, alk's field names and codes keep it.
    doc = one_repeat(tmp_path, make_lane, detail="a pass was quoted", network="none",
                  claimed={"pass": "pass"})
    returned = write_document(tmp_path / "result.json", doc, Redactor(["pass", "none"]))
    [scenario_] = returned.scenarios
    [repeat] = scenario_.repeats
    assert returned.aggregate.pass_rate == 1.0 and returned.status == "complete"
    assert scenario_.verdict == "pass" and scenario_.stats.causes == (("passed", 1),)
    assert scenario_.stats.layers == (("pass", 1),)
    assert returned.aggregate.verdicts[0] == ("pass", 1)
    assert (repeat.outcome, repeat.cause, repeat.network) == ("pass", "passed", "none")
    assert repeat.detail == f"a {MASK} was quoted"
    # The claim is the worker's own JSON, keys and all.
    assert repeat.claimed == {MASK: MASK}


def test_a_write_that_fails_leaves_the_earlier_document_and_no_debris(tmp_path, make_lane,
                                                                       monkeypatch):
    path = tmp_path / "r1" / "result.json"
    first = one_repeat(tmp_path, make_lane, detail="first")
    write_document(path, first, Redactor())

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        write_document(path, one_repeat(tmp_path, make_lane, detail="second"), Redactor())
    assert from_json(json.loads(path.read_text())) == first
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]


def test_reading_a_run_that_is_not_there_or_not_a_result(tmp_path, make_lane):
    path = result_path(tmp_path, "r1")
    with pytest.raises(RunNotFoundError) as missing:
        read_document(tmp_path, "r1")
    assert str(missing.value) == (f"no result for run 'r1': {path} does not exist (run ids "
                                  "are the folder names under reports/)")
    path.parent.mkdir(parents=True)
    for text, message in (
            ("{not json", f"{path}: not a readable result document: "),
            ('["alk.result/2"]',
             f"{path}: schema None is not 'alk.result/2' or 'alk.result/3'; "),
            ('{"schema": "alk.result/1"}', f"{path}: schema 'alk.result/1' is not "
                                           "'alk.result/2' or 'alk.result/3'; this alk "
                                           "cannot read it"),
            ('{"schema": "alk.result/2", "run_id": "r1"}',
             f"{path}: Object missing required field `status`")):
        path.write_text(text)
        with pytest.raises(TranscriptError) as caught:
            read_document(tmp_path, "r1")
        assert str(caught.value).startswith(message)
    value = to_json(one_repeat(tmp_path, make_lane))
    assert from_json(value) == read_document(tmp_path, run_id := value["run_id"])
    # A field of the wrong type is named by its place in the document.
    value["scenarios"][0]["stats"]["counts"]["scored"] = "1"
    path.write_text(json.dumps(value))
    with pytest.raises(ResultFormatError, match=r"Expected `int`, got `str` - at "
                                                r"`\$\.scenarios\[0\]\.stats\.counts\.scored`"):
        read_document(tmp_path, "r1")
    assert run_id


def test_a_hand_edited_record_is_refused_before_a_report_is_written_from_it(tmp_path, make_lane):
    """The reports of a run go where its run id says: a record that names another run (one
    edited to say `../../x`) would have them written outside reports/. NaN, nesting past any
    that alk writes, and a rule out of range are refused too, each naming the file."""
    value = to_json(one_repeat(tmp_path, make_lane))
    run_id = value["run_id"]
    path = result_path(tmp_path, run_id)
    for edit, message in (
            (lambda v: v.update(run_id="../../x"),
             f"{path}: run_id is '../../x', expected '{run_id}' (the folder it is in)"),
            (lambda v: v["settings"]["rule"].update(fail_under=5),
             f"{path}: $.settings.rule: --fail-under 5.0: expected a pass rate from 0 to 1"),
            (lambda v: v["scenarios"][0]["repeats"][0].update(duration_s=math.nan),
             f"{path}: not a readable result document: NaN is not a JSON number")):
        edited = json.loads(json.dumps(value))
        edit(edited)
        path.write_text(json.dumps(edited))
        with pytest.raises(TranscriptError) as caught:
            read_document(tmp_path, run_id)
        assert str(caught.value).startswith(message), str(caught.value)
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(TranscriptError, match="nested too deep"):
        read_document(tmp_path, run_id)
    for bad in ("../x", "/etc", "a/../b", "a/b/c", ".", ""):
        with pytest.raises(RunNotFoundError, match="is not a run id"):
            read_document(tmp_path, bad)


def test_a_record_of_another_schema_says_what_to_do_and_where_it_came_from():
    with pytest.raises(ResultFormatError) as caught:
        from_json({"schema": "alk.result/1"})
    assert str(caught.value) == (
        "result document: schema 'alk.result/1' is not 'alk.result/2' or 'alk.result/3'; this "
        "alk cannot read it (a run written by another alk version: read it with that version, "
        "or run the lane again)")
    with pytest.raises(ResultFormatError, match=r"^saved\.json: Object missing required"):
        from_json({"schema": SCHEMA}, "saved.json")


def test_the_record_goes_to_json_and_back_unchanged(tmp_path, make_lane):
    doc = run(tmp_path, make_lane, ScenarioRunner(PASSING, a=[PASSING, WRONG],
                                                  b=[CRASHED, PASSING])).document
    assert from_json(json.loads(json.dumps(to_json(doc)))) == doc
    assert list(to_json(doc)) == [f.name for f in dataclasses.fields(RunDocument)]
    assert to_json(doc)["schema"] == SCHEMA


def test_a_record_written_with_the_void_rate_as_an_estimate_reads_as_now(tmp_path, make_lane):
    """Before `void_rate` was a float beside `void_ci`, as `pass_rate` is beside `ci`, alk wrote
    it as {value, low, high}, in schema alk.result/2: such a result.json still reads, to the
    same record (today's schema)."""
    doc = run(tmp_path, make_lane, ScenarioRunner(PASSING, a=[PASSING, WRONG],
                                                  b=[CRASHED, PASSING])).document
    value = json.loads(json.dumps(to_json(doc)))
    for stats in [value["aggregate"], *(s["stats"] for s in value["scenarios"])]:
        low, high = stats.pop("void_ci")
        stats["void_rate"] = {"value": stats["void_rate"], "low": low, "high": high}
    value["schema"] = "alk.result/2"
    assert from_json(value) == doc


def test_the_latest_run_is_the_last_by_id_with_a_result(tmp_path, make_lane):
    with pytest.raises(RunNotFoundError, match="no runs in .*reports/; start one"):
        latest_run_id(tmp_path)
    doc = one_repeat(tmp_path / "elsewhere", make_lane)
    for run_id in ("20260101-a", "20260301-c", "20260201-b"):
        write_document(result_path(tmp_path, run_id), doc, Redactor())
    (tmp_path / "reports" / "20260401-started").mkdir()  # no result yet
    assert latest_run_id(tmp_path) == "20260301-c"
    empty = tmp_path / "empty"
    (empty / "reports").mkdir(parents=True)
    with pytest.raises(RunNotFoundError):
        latest_run_id(empty)


def test_alk_measures_its_own_peak_memory_even_without_proc(monkeypatch):
    before = peak_rss_kb()
    assert before <= procfs.own_peak_rss_mb() * 1024 <= peak_rss_kb()

    def no_proc(*args, **kwargs):
        raise OSError("no /proc")

    monkeypatch.setattr(procfs, "open", no_proc, raising=False)
    assert procfs.own_peak_rss_mb() * 1024 == resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss
    # macOS gives ru_maxrss in bytes.
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(resource, "getrusage",
                        lambda who: types.SimpleNamespace(ru_maxrss=1_000_000_000))
    assert procfs.own_peak_rss_mb() * 1024 == 976_562


def test_a_run_on_disk_before_its_probe_says_nothing_was_judged(tmp_path, make_lane):
    lane = make_lane(scenarios=(scenario("a"),))
    plan = build_plan(lane, "r1", repeats=1, seed=1)
    doc = build_document(plan, Execution(), status="running", started_at=NOW,
                         finished_at=None, harness_peak_rss_mb=48.4449)
    assert doc.gate == Gate(None, None, "", None, None)
    assert doc.finished_at is None and doc.identities == ()
    assert doc.harness_peak_rss_mb == 48.4
    assert [s.verdict for s in doc.scenarios] == ["void"] and doc.status == "running"


def test_a_probe_that_named_only_its_framework_is_an_identity(tmp_path, make_lane):
    unversioned = Observation(spawned=True, ready={"framework": "fw"}, exit_code=0)
    doc = run(tmp_path, make_lane, ScenarioRunner(unversioned)).document
    assert doc.gate.cause == "version_invalid"
    assert doc.identities == (Identity("fw", None, 0),)


def test_the_file_is_indented_for_people(tmp_path, make_lane):
    path = tmp_path / "result.json"
    write_document(path, one_repeat(tmp_path, make_lane), Redactor())
    assert path.read_text().startswith('{\n "schema": "alk.result/3",\n "run_id": ')


def test_a_document_is_written_beside_its_place_then_renamed(tmp_path, make_lane,
                                                            monkeypatch):
    """The rename is atomic only within one file system; the temporary name is hidden."""
    path = tmp_path / "r1" / "result.json"
    renamed = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: renamed.append((src, dst)) or real(
        src, dst))
    doc = one_repeat(tmp_path / "run", make_lane)
    renamed.clear()
    write_document(path, doc, Redactor())
    [(src, dst)] = renamed
    assert Path(dst) == path and Path(src).parent == path.parent
    assert Path(src).name.startswith(".result.json.") and Path(src).name.endswith(".tmp")


@pytest.mark.slow
def test_alk_does_not_count_the_memory_of_what_started_it(tmp_path):
    """On Linux a child's ru_maxrss starts from its parent's peak: measured that way, a run
    started by a large process would report that process's memory as alk's."""
    ballast = bytearray(256 * 1024 * 1024)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touched, so that it is resident
    code = "from alk.runner.procfs import own_peak_rss_mb as own; print(own())"
    own = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout)
    assert procfs.own_peak_rss_mb() > 256  # this process does hold it
    del ballast
    assert own < 128


def test_checkpoints_take_a_bounded_share_of_a_long_run(tmp_path, make_lane, monkeypatch):
    # A clock that moves 0.4 s a repeat, and 3 s for each checkpoint written: a large document.
    from alk.api import recorder
    from alk.result import store

    now = [1000.0]
    written = []
    write = store.write_document

    def slow_write(path, doc, redactor):
        written.append((now[0], doc.status))
        now[0] += 3.0
        return write(path, doc, redactor)

    def ticking(result):
        now[0] += 0.4

    monkeypatch.setattr(recorder.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(store, "write_document", slow_write)
    lane = make_lane(scenarios=(scenario("a"),), required_env=("TOKEN",))
    run_lane(lane, RunOptions(repeats=200),
             RunSetup(out_dir=tmp_path, runner=ScenarioRunner(PASSING), environ=ENVIRON,
                      on_repeat=ticking))
    running = [t for t, status in written if status == "running"]
    # The first when the run starts, the next after a second, then 60 s (20 x 3 s) apart.
    assert running[0] == 1000.0 and running[1] == pytest.approx(1004.2)
    assert [round(b - a, 1) for a, b in zip(running[1:], running[2:])] == [63.0] * (
        len(running) - 2)
    assert len(running) == 3 and written[-1][1] == "complete"


def test_a_secret_that_spells_a_stop_rule_or_an_executor_leaves_them_alks(tmp_path, make_lane):
    # MODE=flaky or MODE=local: the codes an adaptive run and its settings write are alk's.
    doc = one_repeat(tmp_path, make_lane, detail="flaky and local, quoted")
    doc = dataclasses.replace(doc, scenarios=(dataclasses.replace(doc.scenarios[0],
                                                                  stopped="flaky"),))
    returned = write_document(tmp_path / "result.json", doc, Redactor(["flaky", "local"]))
    assert returned.scenarios[0].stopped == "flaky" and returned.settings.executor == "local"
    assert returned.scenarios[0].repeats[0].detail == f"{MASK} and {MASK}, quoted"


def test_a_run_of_several_lanes_is_read_lane_by_lane(tmp_path, make_lane):
    folder = tmp_path / "reports" / RUN
    folder.mkdir(parents=True)
    (folder / "group.json").write_text("{}")
    with pytest.raises(RunNotFoundError) as none_yet:
        read_document(tmp_path, RUN)
    assert str(none_yet.value) == (f"run '{RUN}' holds several lanes: name one as {RUN}/LANE (its "
                                   "lanes: none yet)")
    for lane in ("b", "a"):
        # A lane of a run of several is run RUN/LANE, as its record says.
        write_document(result_path(tmp_path, f"{RUN}/{lane}"), dataclasses.replace(
            one_repeat(tmp_path / lane, make_lane), run_id=f"{RUN}/{lane}"), Redactor())
    with pytest.raises(RunNotFoundError, match=r"\(its lanes: a, b\)$"):
        read_document(tmp_path, RUN)
    assert read_document(tmp_path, f"{RUN}/a").scenarios[0].id == "a"
