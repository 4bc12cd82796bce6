"""A warm start's repeats, forked from one prepared process, against the isolation a cold
repeat has: each test runs real workers through alk's command line and reads what each
repeat's process saw of itself (tests/workers/warm_probe.py)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from alk.runner.isolation import Filesystem, detect
from helpers.processes import run_alk, write_lane

WORKERS = Path(__file__).parents[1] / "workers"
SKIP = None if Filesystem.SANDBOX in detect().filesystems else detect().filesystem_reason
pytestmark = [pytest.mark.slow, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]
REPEATS = 4


def lane(tmp_path: Path, *args: str, warm: bool = True) -> Path:
    argv = json.dumps(["{python}", str(WORKERS / "warm_probe.py"), *args])
    return write_lane(tmp_path, "probe", f"""
name = "probe"
framework = "warm-probe"
version = ">=1"
command = {argv}
timeout_s = 30
{"warm = true" if warm else ""}
[[scenarios]]
id = "look"
task = "look around"
[scenarios.expect]
stop_reason = "accepted"
""")


def facts(tmp_path: Path, *args: str, warm: bool = True, jobs: int = 2,
          env: dict[str, str] | None = None) -> tuple[list[dict], dict, str]:
    """Each repeat's facts, the result document and alk's stderr."""
    done = run_alk("run", "--lane", lane(tmp_path, *args, warm=warm), "--repeats", REPEATS,
                   "-j", jobs, "--json", "-q", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    document = json.loads(done.stdout)
    found = []
    for path in sorted((tmp_path / "transcripts").glob("*/look/repeat-*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["type"] == "result" and event["channel"] == "agent":
                found.append(json.loads(event["payload"]["output"]))
    assert len(found) == REPEATS
    return found, document, done.stderr


def containments(document: dict) -> set[str]:
    return {repeat["containment"] for scenario in document["scenarios"]
            for repeat in scenario["repeats"]}


def test_a_warm_repeat_is_as_isolated_as_a_cold_one(tmp_path):
    warm, document, stderr = facts(tmp_path)
    assert containments(document) == {"warm_fork"}, stderr
    (tmp_path / "cold").mkdir()
    cold, cold_document, _ = facts(tmp_path / "cold", warm=False)
    assert containments(cold_document) == {"pid_namespace"}
    for seen in (*warm, *cold):
        # Its own PID namespace, its init as PID 1: nothing else, no other repeat, no parent.
        assert seen["pid"] == 2 and seen["pids"] == [1, 2], seen
        assert seen["status"]["CapEff"] == seen["status"]["CapPrm"] == "0" * 16, seen
        assert seen["status"]["NoNewPrivs"] == "1" and seen["status"]["Seccomp"] == "2", seen
        assert not seen["unshare"], "alk's whole seccomp filter holds in the repeat"
        # A fresh /tmp and workspace: what an earlier repeat left is not there, nor is any
        # other repeat's workspace, nor the prepared process's control socket.
        # (/tmp holds the folders on the way to the workspace, where the run's folder is in it.)
        assert not [name for name in seen["tmp"] if name.startswith("left-by")], seen
        assert seen["workspace"] == [], seen
        assert len([name for name in seen["beside"] if name.startswith("w-")]) == 1, seen
        assert not seen["control"], seen
        assert seen["interfaces"] == ["lo"], seen
        assert "ALK_WARM" not in seen["env"], seen
        assert seen["counter"] == 0, "nothing of one repeat is carried to the next"
    assert [seen["uid"] for seen in warm] == [seen["uid"] for seen in cold]
    assert sorted(warm[0]["env"]) == sorted(cold[0]["env"])
    for name in ("random", "uuid", "tempname"):
        assert len({seen[name] for seen in warm}) == REPEATS, f"{name} repeats across forks"


def test_no_repeat_sees_another_where_the_run_folder_is_outside_tmp(tmp_path):
    # Outside /tmp the workspaces' folder is not under the repeat's fresh /tmp: each repeat
    # hides the others under an empty file system of its own.
    base = Path("/var/tmp")
    if not os.access(base, os.W_OK):
        pytest.skip("no /var/tmp to hold the run's folder")
    with tempfile.TemporaryDirectory(dir=base) as folder:
        found, document, _ = facts(tmp_path, env={"TMPDIR": folder})
    assert containments(document) == {"warm_fork"}
    for seen in found:
        assert len(seen["beside"]) == 1 and seen["workspace"] == [], seen


def test_what_the_sandbox_binds_under_tmp_is_still_there_in_a_repeat(tmp_path):
    # A repeat's fresh /tmp goes over the prepared process's: a program (a lane, a venv) that
    # lies under /tmp, as a fresh clone's does in CI, must still be there for what the
    # framework imports late. The probe here lives in the test's folder, under /tmp.
    program = tmp_path / "program"
    program.mkdir()
    shutil.copy(WORKERS / "warm_probe.py", program / "warm_probe.py")
    (program / "late_module.py").write_text("VALUE = 1\n")
    lane_file = lane(tmp_path, "late").read_text().replace(
        str(WORKERS / "warm_probe.py"), str(program / "warm_probe.py"))
    path = write_lane(tmp_path, "probe", lane_file)
    done = run_alk("run", "--lane", path, "--repeats", 2, "--json", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    assert containments(json.loads(done.stdout)) == {"warm_fork"}


def test_a_prepared_process_with_a_second_thread_is_refused_and_the_run_is_cold(tmp_path):
    found, document, stderr = facts(tmp_path, "threads", jobs=1)
    assert "no warm start" in stderr and "2 threads" in stderr, stderr
    assert containments(document) == {"pid_namespace"}
    assert all(seen["pid"] == 2 for seen in found)


def test_a_worker_whose_sdk_has_no_warm_start_runs_cold(tmp_path):
    # The worker speaks the protocol without alk's SDK: it never connects to the control
    # socket, so alk gives up on it soon after its framework_ready, and runs it cold.
    worker = tmp_path / "plain.py"
    worker.write_text(
        "import json, sys\n"
        "sys.stdin.readline()\n"
        "print(json.dumps({'channel': 'framework', 'type': 'framework_ready', 'payload': "
        "{'framework': 'warm-probe', 'framework_version': '1.0', 'package_paths': []}}),"
        " flush=True)\n"
        "start = json.loads(sys.stdin.readline())\n"
        "if start.get('type') != 'start': sys.exit(0)\n"
        "print(json.dumps({'channel': 'agent', 'type': 'result', 'payload': {'output': 'x',"
        " 'stop_reason': 'accepted', 'end_state': {}}}), flush=True)\n")
    path = write_lane(tmp_path, "plain", f"""
name = "plain"
framework = "warm-probe"
version = ">=1"
command = ["{{python}}", "{worker}"]
timeout_s = 30
warm = true
[[scenarios]]
id = "look"
task = "look around"
[scenarios.expect]
stop_reason = "accepted"
""")
    done = run_alk("run", "--lane", path, "--repeats", 2, "--json", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no warm start" in done.stderr and "did not take the warm start" in done.stderr
    assert containments(json.loads(done.stdout)) == {"pid_namespace"}
