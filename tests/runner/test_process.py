"""The local runner against real, misbehaving worker processes (tests/workers/acts.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import alk
from alk.attribution.outcome import attribute
from alk.causes import Cause
from alk.records import Limits, Preflight
from alk.redaction import Redactor
from alk.runner import driver, protocol
from alk.runner.cgroup import parent as cgroup_parent
from alk.runner.isolation import PROCESS_GROUP_ONLY, Containment, Filesystem, Network, detect
from alk.runner.process import LocalRunner
from alk.runner.protocol import hello_message
from alk.runner.request import RunRequest
from alk.transcript.reader import read_transcript
from alk.transcript.writer import TranscriptWriter
from helpers.timing import assert_ended_in_time, worker_lifetime

SRC = Path(alk.__file__).resolve().parent.parent
ACTS = Path(__file__).resolve().parents[1] / "workers" / "acts.py"
# How long acts.py's grandchildren hold a pipe or keep writing: a worker alk waited for would
# have its exit recorded this long after its spawn (by alk's clock), so half of it tells a
# wait from a loaded machine's slowness.
HELD_S = 60
START = {"type": "start", "run_id": "r", "scenario": {"id": "s", "task": "t", "input": {}},
         "repeat": 1, "seed": 1}


def accept(ready):
    return Preflight(True, ready.get("framework"), ready.get("framework_version"))


def reject(ready):
    return Preflight(False, ready.get("framework"), ready.get("framework_version"),
                     Cause.VERSION_UNSUPPORTED, "acts 1.0 does not satisfy '>=2'")


def run_act(tmp_path, act, arg="", *, timeout=10.0, start=START, gate=accept, env=None,
            cap=64 * 1024 * 1024, secrets=(), name="t.jsonl", runner=None, limits=Limits(),
            network=Network.HOST, filesystem=Filesystem.WORKSPACE, visible=(), argv=None):
    """Runs acts.py ACT ARG (or `argv`) through the local runner: (observation, events); how
    long it took is read from the events, by alk's clock (`helpers.timing`)."""
    workspace = tmp_path / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    request = RunRequest(
        argv=argv or (sys.executable, str(ACTS), act, arg), cwd=str(workspace),
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(SRC), **(env or {})},
        timeout_s=timeout, hello=hello_message("acts"), start=start, redactor=Redactor(secrets),
        limits=limits, network=network, filesystem=filesystem,
        visible=(*visible, sys.prefix, sys.base_prefix))
    path = tmp_path / name
    with TranscriptWriter(path, cap, Redactor(secrets)) as log:
        obs = (runner or LocalRunner()).run(request, gate, log)
    return obs, read_transcript(path)


def types(events, source=None):
    return [e["type"] for e in events if source is None or e["source"] == source]


def test_handshake_order_and_clean_pass(tmp_path):
    obs, events = run_act(tmp_path, "plain")
    assert obs.exit_code == 0 and obs.result["output"] == "done"
    assert types(events, "harness")[:4] == ["spawn", "hello", "preflight", "start"]
    assert types(events)[2] == "framework_ready"
    assert attribute(obs).cause == Cause.PASSED
    assert obs.cpu_s > 0 and obs.peak_rss_mb and 1 < obs.peak_rss_mb < 200


def test_rejected_preflight_sends_abort_and_never_start(tmp_path):
    obs, events = run_act(tmp_path, "env", gate=reject)
    harness = types(events, "harness")
    assert "abort" in harness and "start" not in harness
    assert obs.exit_code == 0 and obs.result is None  # the SDK exits quietly on abort
    assert not obs.started
    assert attribute(obs).cause == Cause.VERSION_UNSUPPORTED
    assert list((tmp_path / "ws").iterdir()) == []


def test_grandchild_holding_stdout_is_ended_and_does_not_hold_the_harness(tmp_path,
                                                                         process_watch):
    with process_watch(tmp_path / "ws") as watch:
        obs, events = run_act(tmp_path, "grandchild_holds_stdout")
    # By alk's clock, the exit was recorded long before the grandchild let go of the pipe.
    assert worker_lifetime(events) < HELD_S / 2
    assert len(watch.workers()) >= 2, "the watch did not see the worker and its child"
    assert watch.left() == [], "a process of the repeat survived it"
    assert attribute(obs).cause == Cause.PASSED


def test_timeout_escalates_to_sigkill_for_a_worker_that_ignores_signals(tmp_path, monkeypatch,
                                                                        process_watch):
    monkeypatch.setattr(driver, "INT_GRACE_S", 0.2)
    monkeypatch.setattr(driver, "TERM_GRACE_S", 0.2)
    with process_watch(tmp_path / "ws") as watch:
        obs, events = run_act(tmp_path, "ignores_signals", timeout=1.0)
    kills = [e["payload"]["signal"] for e in events if e["type"] == "kill"]
    assert kills == ["SIGINT", "SIGTERM", "SIGKILL"]
    assert obs.timed_out and obs.signal == 9
    assert_ended_in_time(events, 1.0, int_grace_s=0.2, term_grace_s=0.2)
    assert watch.workers() and watch.left() == []
    assert attribute(obs).cause == Cause.TIMEOUT


def test_silent_worker_times_out_before_ready(tmp_path):
    obs, events = run_act(tmp_path, "silent_before_ready", timeout=0.5)
    assert_ended_in_time(events, 0.5)
    verdict = attribute(obs)
    assert (verdict.outcome.value, verdict.cause) == ("lane_infra", "timeout_before_ready")


def test_exit_before_ready_is_void_with_the_stderr_line(tmp_path):
    obs, _ = run_act(tmp_path, "exit_before_ready")
    verdict = attribute(obs)
    assert verdict.cause == Cause.EXITED_BEFORE_READY and verdict.outcome.value == "lane_infra"
    assert "No module named 'missing_framework'" in verdict.detail


def test_spawn_failure_is_an_observation_not_an_exception(tmp_path):
    request = RunRequest(argv=("/nonexistent/worker",), cwd=str(tmp_path), env={},
                         timeout_s=1, hello=hello_message("x"), start=START)
    with TranscriptWriter(tmp_path / "t.jsonl", 1 << 20, Redactor()) as log:
        obs = LocalRunner().run(request, accept, log)
    assert not obs.spawned and attribute(obs).cause == Cause.SPAWN_FAILED


@pytest.mark.skipif(detect().containment is not Containment.PID_NAMESPACE,
                    reason=f"no PID namespace here: {detect().reason}")
def test_a_grandchild_that_escaped_the_group_dies_with_the_namespace(tmp_path, process_watch):
    with process_watch(tmp_path / "ws") as watch:
        obs, events = run_act(tmp_path, "escape")
    assert obs.containment == "pid_namespace"
    assert worker_lifetime(events) < HELD_S / 2  # not waiting for the grandchild's minute
    assert len(watch.workers()) >= 2
    assert watch.left() == [], "a setsid() grandchild survived its worker"
    assert attribute(obs).cause == Cause.PASSED


@pytest.mark.skipif(detect().containment is not Containment.PID_NAMESPACE,
                    reason=f"no PID namespace here: {detect().reason}")
def test_the_worker_cannot_read_alks_environment_through_proc(tmp_path):
    marker = "alk-harness-only-7c1e9b"
    # A process of the host whose environment holds the marker, as alk's would.
    holder = subprocess.Popen(["sleep", "30"], env={"HARNESS_ONLY_SECRET": marker})
    try:
        found = {}
        for label, runner in (("namespace", LocalRunner()),
                              ("group", LocalRunner(PROCESS_GROUP_ONLY))):
            _, events = run_act(tmp_path / label, "steal_env", marker, runner=runner)
            found[label] = next(e for e in events if e["type"] == "stolen")["payload"]["found"]
    finally:
        holder.kill()
        holder.wait()
    assert found == {"namespace": 0, "group": 1}  # the host's /proc would give it away


def test_process_group_containment_still_returns_in_time(tmp_path, process_watch):
    """Without a namespace an escaped grandchild outlives the repeat (the documented limit of
    this level), but it can neither hold alk on its pipes nor add evidence after the exit."""
    with process_watch(tmp_path / "ws") as watch:
        obs, events = run_act(tmp_path, "escape", runner=LocalRunner(PROCESS_GROUP_ONLY))
    try:
        assert obs.containment == "process_group" and worker_lifetime(events) < HELD_S / 2
        assert attribute(obs).cause == Cause.PASSED
        stderr_after_exit = [e for e in events if e["channel"] == "stderr"
                             and e["seq"] > next(x["seq"] for x in events if x["type"] == "exit")]
        assert stderr_after_exit == []
    finally:
        for pid in watch.left(within_s=0):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("network", list(Network))
def test_network_none_cannot_reach_even_the_hosts_loopback(tmp_path, network):
    if network not in detect().networks:
        pytest.skip(f"network {network} is not available here: {detect().network_reason}")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        obs, events = run_act(tmp_path, "connect", str(port), network=network)
    reached = next(e for e in events if e["type"] == "connect")["payload"]["reached"]
    spawn = next(e for e in events if e["type"] == "spawn")
    assert spawn["payload"]["network"] == obs.network == network.value
    if network is Network.NONE:
        assert reached.startswith("no:")
    else:
        assert reached == "yes"


SANDBOX = Filesystem.SANDBOX in detect().filesystems


@pytest.mark.skipif(not SANDBOX, reason=f"no sandbox here: {detect().filesystem_reason}")
def test_a_sandboxed_worker_writes_only_its_workspace(tmp_path):
    # Outside /tmp the system is read-only; /tmp is a private, empty one.
    outside = Path(sys.prefix) / f"alk-sandbox-probe-{os.getpid()}"
    try:
        obs, events = run_act(tmp_path, "write_outside", str(outside),
                                 filesystem=Filesystem.SANDBOX,
                                 visible=(str(SRC), str(ACTS.parent)))
        writes = next(e for e in events if e["type"] == "writes")["payload"]
        assert writes["results"]["in-workspace.txt"] == "written"
        assert writes["results"][str(outside)] == "Read-only file system"
        assert not outside.exists()
        assert not Path("/tmp/alk-sandbox-probe").exists()  # went to the private /tmp
        assert obs.filesystem == "sandbox" and attribute(obs).cause == Cause.PASSED
    finally:
        outside.unlink(missing_ok=True)


@pytest.mark.skipif(not SANDBOX, reason=f"no sandbox here: {detect().filesystem_reason}")
def test_a_sandboxed_worker_is_contained_and_its_signals_reported(tmp_path, process_watch):
    visible = (str(SRC), str(ACTS.parent))
    with process_watch(tmp_path / "ws") as watch:
        obs, events = run_act(tmp_path, "escape", filesystem=Filesystem.SANDBOX,
                                 visible=visible)
    assert worker_lifetime(events) < HELD_S / 2 and attribute(obs).cause == Cause.PASSED
    assert watch.workers() and watch.left() == []
    crashed, _ = run_act(tmp_path, "segfault", filesystem=Filesystem.SANDBOX,
                            visible=visible)
    # bwrap alone would say 128 + N, as a worker could; alk's init reports the signal itself.
    assert (crashed.signal, crashed.exit_code) == (signal.SIGSEGV, None)
    verdict = attribute(crashed)
    assert verdict.cause == Cause.KILLED_BY_SIGNAL and "SIGSEGV" in verdict.detail


@pytest.mark.skipif(not SANDBOX, reason=f"no sandbox here: {detect().filesystem_reason}")
def test_in_the_sandbox_an_exit_code_of_128_plus_n_is_not_a_signal(tmp_path):
    obs, _ = run_act(tmp_path, "exit_code", "139", filesystem=Filesystem.SANDBOX,
                        visible=(str(SRC), str(ACTS.parent)))
    assert (obs.exit_code, obs.signal) == (139, None)
    assert attribute(obs).cause == Cause.NONZERO_EXIT


@pytest.mark.skipif(not SANDBOX, reason=f"no sandbox here: {detect().filesystem_reason}")
def test_in_the_sandbox_a_timeout_still_shows_where_the_worker_hung(tmp_path, monkeypatch):
    obs, events = run_act(tmp_path, "hang", timeout=1.0, filesystem=Filesystem.SANDBOX,
                                   visible=(str(SRC), str(ACTS.parent)))
    stderr = "\n".join(e["payload"]["text"] for e in events if e["channel"] == "stderr")
    assert "KeyboardInterrupt" in stderr and "time.sleep" in stderr
    assert attribute(obs).cause == Cause.TIMEOUT
    assert_ended_in_time(events, 1.0)


@pytest.mark.skipif(not SANDBOX, reason=f"no sandbox here: {detect().filesystem_reason}")
def test_a_sandboxed_worker_cannot_change_the_hosts_kernel_settings(tmp_path):
    obs, events = run_act(tmp_path, "write_outside", "/proc/sys/vm/swappiness",
                             filesystem=Filesystem.SANDBOX, visible=(str(SRC), str(ACTS.parent)))
    writes = next(e for e in events if e["type"] == "writes")["payload"]["results"]
    assert writes["/proc/sys/vm/swappiness"] == "Read-only file system"


def test_stdin_reads_eof_after_start(tmp_path):
    obs, events = run_act(tmp_path, "stdin_after_start")
    assert next(e for e in events if e["type"] == "stdin")["payload"]["rest"] == ""
    assert attribute(obs).cause == Cause.PASSED


def test_death_by_signal(tmp_path):
    obs, _ = run_act(tmp_path, "segfault")
    verdict = attribute(obs)
    assert verdict.cause == Cause.KILLED_BY_SIGNAL and "SIGSEGV" in verdict.detail


def test_death_by_sigkill_from_outside(tmp_path, process_watch):
    """As the OOM killer would: behind `unshare`, too, the death is reported as SIGKILL."""
    pid_file = tmp_path / "ws" / "me.pid"

    def kill_when_ready(watch):
        until = time.monotonic() + 8
        while time.monotonic() < until:
            # The worker wrote its pid file, and the watch has seen it (and only it).
            workers = [pid for pid in watch.workers()
                       if "await_kill" in " ".join(watch.seen[pid])]
            if pid_file.exists() and pid_file.read_text() and len(workers) == 1:
                os.kill(workers[0], signal.SIGKILL)
                return
            time.sleep(0.01)

    with process_watch(tmp_path / "ws") as watch:
        killer = threading.Thread(target=kill_when_ready, args=(watch,), daemon=True)
        killer.start()
        obs, _ = run_act(tmp_path, "await_kill")
    verdict = attribute(obs)
    assert (obs.signal, obs.exit_code) == (signal.SIGKILL, None)
    assert verdict.cause == Cause.KILLED_BY_SIGNAL and "SIGKILL" in verdict.detail
    assert "unshare" not in verdict.detail


def test_events_written_with_ready_before_start_are_violations(tmp_path):
    obs, _ = run_act(tmp_path, "no_wait")
    assert [v.kind for v in obs.violations] == ["before_start", "before_start"]
    assert attribute(obs).cause == Cause.PROTOCOL_VIOLATION


def test_clean_exit_without_result(tmp_path):
    obs, _ = run_act(tmp_path, "no_result")
    assert attribute(obs).cause == Cause.NO_RESULT


@pytest.mark.parametrize("act, arg, limits, cause", [
    ("eat_memory", "600", Limits(memory_mb=300), Cause.MEMORY_LIMIT),
    ("spin", "", Limits(cpu_s=1), Cause.CPU_LIMIT),
    ("open_files", "200", Limits(max_open_files=64), Cause.OPEN_FILES_LIMIT),
    ("big_file", "8", Limits(max_file_mb=2), Cause.FILE_SIZE_LIMIT),
])
def test_a_breached_limit_is_attributed_to_it(tmp_path, act, arg, limits, cause):
    obs, events = run_act(tmp_path, act, arg, limits=limits, timeout=8)
    verdict = attribute(obs)
    # Its own cause, not the timeout: the limit ended the worker.
    assert (verdict.outcome.value, verdict.cause) == ("framework_runtime", cause), verdict.detail
    spawn = next(e for e in events if e["type"] == "spawn")
    assert spawn["payload"]["limits"] == limits.applied()


@pytest.mark.skipif(cgroup_parent("pids") is None, reason="no writable pids cgroup here")
def test_max_processes_bounds_the_whole_tree_even_for_root(tmp_path, process_watch):
    with process_watch(tmp_path / "ws") as watch:
        obs, _ = run_act(tmp_path, "fork_bomb", "300", limits=Limits(max_processes=32),
                                  filesystem=Filesystem.WORKSPACE)
    verdict = attribute(obs)
    assert (verdict.outcome.value, verdict.cause) == ("framework_runtime", "process_limit")
    assert "limit max_processes = 32" in verdict.detail
    assert len(watch.seen) <= 32 + 2
    assert watch.left() == []


def test_limits_are_inherited_and_core_dumps_are_off(tmp_path):
    limits = Limits(memory_mb=2048, max_open_files=77)
    obs, events = run_act(tmp_path, "rlimits", limits=limits)
    seen = next(e for e in events if e["type"] == "rlimits")["payload"]
    assert seen["core"] == [0, 0] and seen["nofile"] == [77, 77]
    assert seen["data"] == [2048 * 1024 * 1024] * 2
    assert attribute(obs).cause == Cause.PASSED


def test_peak_rss_is_the_workers_own(tmp_path):
    obs, _ = run_act(tmp_path, "eat_memory", "120")
    assert obs.peak_rss_mb is not None and 120 <= obs.peak_rss_mb < 250


# Holds MIB of memory, and in the sandbox 3 MiB in /tmp and 1 MiB in /dev/shm, until it exits.
HOLDER = """
import sys
from alk import worker
worker.hello()
worker.ready("acts", "1.0")
worker.start()
block = bytearray(int(sys.argv[1]) * 1024 * 1024)
for at in range(0, len(block), 4096):
    block[at] = 1
if sys.argv[2] == "sandbox":
    for path, mib in (("/tmp/held", 3), ("/dev/shm/held", 1)):
        with open(path, "wb") as handle:
            handle.write(b"h" * mib * 1024 * 1024)
worker.result(output="held", stop_reason="accepted", end_state={})
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("filesystem", [
    Filesystem.WORKSPACE,
    pytest.param(Filesystem.SANDBOX, marks=pytest.mark.skipif(
        not SANDBOX, reason=f"no sandbox here: {detect().filesystem_reason}"))])
def test_a_worker_smaller_than_alk_is_measured_where_it_runs(tmp_path, filesystem):
    # Below alk's own peak, the kernel's figure for the worker is alk's (it began as a copy):
    # only what alk reads of the worker itself, behind its wrappers, can tell its 40 MiB.
    ballast = bytearray(400 * 1024 * 1024)
    for at in range(0, len(ballast), 4096):
        ballast[at] = 1
    del ballast
    fds_before = sorted(os.listdir("/proc/self/fd"))
    try:
        obs, _ = run_act(tmp_path, "", argv=(sys.executable, "-c", HOLDER, "40",
                                                filesystem.value),
                            filesystem=filesystem, visible=(str(SRC),))
    finally:
        _reset_peak_rss()
    assert attribute(obs).cause == Cause.PASSED
    assert obs.peak_rss_mb is not None and 40 <= obs.peak_rss_mb < 150
    if filesystem is Filesystem.SANDBOX:
        assert obs.peak_tmpfs_mb == pytest.approx(4, abs=0.1)
    else:
        assert obs.peak_tmpfs_mb is None  # the host's /tmp is not the worker's to count
    # What alk holds open on the worker while it runs is closed with it: a folder of its
    # /tmp would keep that memory alive.
    assert sorted(os.listdir("/proc/self/fd")) == fds_before


def test_environment_is_scrubbed_and_declared_values_redacted(tmp_path):
    secret = "s3cr3t-value-for-the-worker"
    obs, events = run_act(tmp_path, "env", env={"DECLARED": secret}, secrets=[secret])
    seen = next(e for e in events if e["type"] == "env")["payload"]["env"]
    assert set(seen) <= {"PATH", "PYTHONPATH", "DECLARED", "LC_CTYPE"}
    assert seen["DECLARED"] == "[REDACTED]"
    assert secret not in (tmp_path / "t.jsonl").read_text()


@pytest.mark.parametrize("text", ["ascii", "multibyte"])
def test_no_part_of_a_secret_survives_the_cuts_alk_makes(tmp_path, text):
    secret = "q7Z0k3-Xv9pL2m-Tr8Wy4c-Hn6Jd5"
    obs, _ = run_act(tmp_path, "leak_secret", text, env={"LEAKED": secret},
                        secrets=[secret])
    verdict = attribute(obs)
    reported = " ".join([verdict.detail, obs.stderr_tail, *(v.detail for v in obs.violations)])
    if text == "ascii":
        assert "[REDACTED]" in reported
    pieces = {secret[i:i + 6] for i in range(len(secret) - 5)}
    for text in (reported, (tmp_path / "t.jsonl").read_text()):
        assert not [p for p in pieces if p in text]


def test_violations_past_the_recorded_bound_are_counted_not_quoted(tmp_path):
    """Each of the first MAX_VIOLATIONS_RECORDED is an event quoting its line; the rest are
    counted, once said so, and never quoted (the last line holds a secret)."""
    bound, secret = protocol.MAX_VIOLATIONS_RECORDED, "k9-Zq4Lm2-Xw7Rt5-Vb3Nc8"
    obs, events = run_act(tmp_path, "bad_lines", str(bound + 250), env={"LEAKED": secret},
                          secrets=[secret])
    recorded = [e for e in events if e["type"] == "violation"]
    assert len(recorded) == bound
    assert all("'not json'" in e["payload"]["detail"] for e in recorded)
    [unrecorded] = [e for e in events if e["type"] == "violations_unrecorded"]
    assert unrecorded["payload"]["line"] == bound + 2  # the line after the hello's ready
    exit_event = next(e for e in events if e["type"] == "exit")
    assert exit_event["payload"]["violations"] == obs.violation_count == bound + 250
    assert attribute(obs).cause == Cause.PROTOCOL_VIOLATION
    # The last line held the secret: unquoted, not even its mask was written.
    assert "[REDACTED]" not in (tmp_path / "t.jsonl").read_text()


def test_output_after_the_worker_exited_is_not_evidence(tmp_path):
    obs, events = run_act(tmp_path, "write_after_exit")
    assert "late" not in types(events)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_floods_keep_harness_memory_and_transcript_bounded(tmp_path):
    cap = 4 * 1024 * 1024
    rss_before = _reset_peak_rss()
    obs, _ = run_act(tmp_path, "stdout_no_newline", "200", cap=cap, name="stdout.jsonl")
    obs2, _ = run_act(tmp_path, "stderr_lines", "200", cap=cap, name="stderr.jsonl")
    growth_mb = (_peak_rss_kb() - rss_before) / 1024
    assert growth_mb < 64, f"the harness grew by {growth_mb:.0f} MiB reading 400 MiB"
    assert attribute(obs).cause == Cause.PROTOCOL_VIOLATION
    assert obs.violations[0].kind == "line_too_long"
    assert attribute(obs2).cause == Cause.PASSED
    for name in ("stdout.jsonl", "stderr.jsonl"):
        path = tmp_path / name
        assert path.stat().st_size <= cap + 4096, name
        events = [json.loads(line) for line in path.read_bytes().splitlines()]
        assert events[-1]["type"] == "exit", name  # the tail survives the cap


def _reset_peak_rss() -> int:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pytest.skip("cannot reset the peak RSS here")
    return _peak_rss_kb()


def _peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")
