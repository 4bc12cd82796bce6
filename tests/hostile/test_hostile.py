"""The hostile suite: one worker per threat of docs/security.md, each through the real CLI.

For every threat it asserts what alk promises whatever a worker does: the outcome and cause,
that alk returned within the timeout plus 2 s, that no process of the repeat is left (found by
the test from the host, not assumed), that alk's own peak RSS stayed small, that neither the
lane's secret nor alk's own is in any file or in the output, and that every transcript is valid
and within its cap.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alk.runner.isolation import Containment, Network, detect
from alk.runner.pids_cgroup import parent as pids_cgroup_parent

WORKER = Path(__file__).resolve().with_name("worker.py")
CAP_MB = 1
HARNESS_RSS_LIMIT_MB = 150
# The CLI's own start (imports) and the preflight probe come before the repeat's timeout.
START_ALLOWANCE_S = 3.0
NAMESPACE = detect().containment is Containment.PID_NAMESPACE
NO_NETWORK = Network.NONE in detect().networks

PASS = ("pass", "passed")
VIOLATION = ("framework_runtime", "protocol_violation")

# threat: (outcome and cause, timeout_s, extra lane TOML, expected output)
THREATS = {
    "flood_stdout_lines": (PASS, 30, "", "done"),
    "endless_line": (VIOLATION, 30, "", "done"),
    "binary_garbage": (VIOLATION, 20, "", "done"),
    "deep_json": (VIOLATION, 20, "", "done"),
    "lone_surrogates": (PASS, 20, "", "done"),
    "stderr_flood": (PASS, 30, "", "done"),
    "fork_escape": (PASS, 20, "", "done"),
    "hold_pipes": (PASS, 20, "", "done"),
    "hang_ignore_signals": (("framework_runtime", "timeout"), 2, "", "done"),
    "forge_harness": (VIOLATION, 20, "", "done"),
    "self_grade": (("agent", "wrong_files"), 20,
                   'files = [ { path = "lab-output/effects.json", json_length = 1 } ]', "742 done"),
    "steal_secrets": (PASS if NAMESPACE else ("agent", "wrong_output"), 20, "",
                      "nothing to steal"),
    "memory_hog": (("framework_runtime", "memory_limit"), 20, "", "done"),
    "fork_bomb": (("framework_runtime", "process_limit"), 20, "", "done"),
    "call_home": (PASS, 20, "", "blocked"),
    "inherited_fds": (PASS, 20, "", "clean"),
}
LIMITS = {"memory_hog": "[limits]\nmemory_mb = 256\n",
          "fork_bomb": "[limits]\nmax_processes = 64\n"}


def lane_text(threat: str, timeout_s: float, expect: str, output: str, port: int) -> str:
    return (f'framework = "hostile"\nversion = ">=1"\n'
            f'command = ["{{python}}", "{WORKER}", "{threat}"]\n'
            f'required_env = ["HOSTILE_TOKEN"]\ntimeout_s = {timeout_s}\n'
            f"transcript_cap_mb = {CAP_MB}\n{LIMITS.get(threat, '')}\n"
            f'[[scenarios]]\nid = "attack"\ntask = "Do as you please"\n'
            f"input = {{ port = {port} }}\n"
            f'[scenarios.expect]\nstop_reason = "accepted"\noutput_equals = "{output}"\n{expect}\n')


@pytest.mark.parametrize("threat", list(THREATS))
def test_alk_stays_up_bounded_honest_and_leaks_nothing(threat, tmp_path, process_watch):
    if threat == "call_home" and not NO_NETWORK:
        pytest.skip(f"no network isolation here: {detect().network_reason}")
    if threat == "fork_bomb" and pids_cgroup_parent() is None and os.getuid() == 0:
        pytest.skip("as root only a pids cgroup bounds processes, and none is writable here")
    (outcome, cause), timeout_s, expect, output = THREATS[threat]
    token, private = f"tok-{secrets.token_hex(12)}", f"priv-{secrets.token_hex(12)}"
    (tmp_path / "tmp").mkdir()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        lane = tmp_path / "lanes" / f"{threat}.toml"
        lane.parent.mkdir()
        lane.write_text(lane_text(threat, timeout_s, expect, output,
                                  listener.getsockname()[1]))
        env = {**os.environ, "HOSTILE_TOKEN": token, "HARNESS_PRIVATE": private,
               "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "120"}
        began = time.monotonic()
        with process_watch(tmp_path / "tmp") as watch:
            done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(lane),
                                   "-n", "1"], cwd=tmp_path, env=env, capture_output=True,
                                  timeout=timeout_s + 60)
        elapsed = time.monotonic() - began
    try:
        [result] = list((tmp_path / "reports").glob("*/result.json"))
        document = json.loads(result.read_text())
        [repeat] = document["scenarios"][0]["repeats"]
        assert (repeat["outcome"], repeat["cause"]) == (outcome, cause), repeat["detail"]
        assert done.returncode == (0 if outcome == "pass" else 1), done.stderr
        assert elapsed < timeout_s + 2 + START_ALLOWANCE_S, f"alk took {elapsed:.1f} s"
        assert document["harness"]["peak_rss_mb"] < HARNESS_RSS_LIMIT_MB
        _no_secret_anywhere(tmp_path, done, token,
                            private if NAMESPACE or threat != "steal_secrets" else None)
        _transcripts_valid_and_bounded(tmp_path)
        if NAMESPACE or threat not in ("fork_escape", "hold_pipes"):
            assert watch.left() == [], "a process of the repeat outlived it"
    finally:
        for pid in watch.left(within_s=0):
            os.kill(pid, signal.SIGKILL)


def _no_secret_anywhere(tmp_path: Path, done: subprocess.CompletedProcess, *values) -> None:
    for value in filter(None, values):
        for folder in ("transcripts", "reports"):
            for path in (tmp_path / folder).rglob("*"):
                if path.is_file():
                    assert value.encode() not in path.read_bytes(), f"{value} in {path}"
        assert value not in done.stdout.decode(errors="replace")
        assert value not in done.stderr.decode(errors="replace")


def _transcripts_valid_and_bounded(tmp_path: Path) -> None:
    for path in (tmp_path / "transcripts").rglob("*.jsonl"):
        data = path.read_bytes()
        assert len(data) <= CAP_MB * 1024 * 1024 + 64 * 1024, f"{path} is {len(data)} bytes"
        for line in data.splitlines():
            event = json.loads(line.decode("utf-8"))  # valid UTF-8 JSON, every line
            assert {"seq", "t", "source", "channel", "type", "payload"} <= set(event)
