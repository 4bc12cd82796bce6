"""The hostile suite: one worker per threat of docs/security.md, each through the real CLI.

For every threat it asserts what alk promises whatever a worker does: the outcome and cause,
that alk ended the worker within the timeout plus its signals' graces by its own clock
(the transcript's times), that no process of the repeat is left (found by
the test from the host, not assumed), that alk's own peak RSS stayed small, that neither the
lane's secret nor alk's own is in any file or in the output, and that every transcript is valid
and within its cap.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alk.cleanup import remove_tree
from alk.runner import cinit
from alk.runner.cgroup import memory_parent
from alk.runner.cgroup import parent as cgroup_parent
from alk.runner.isolation import Containment, Filesystem, Network, detect
from helpers.timing import assert_ended_in_time, repeat_events

WORKER = Path(__file__).resolve().with_name("worker.py")
CAP_MB = 1
HARNESS_RSS_LIMIT_MB = 150
NAMESPACE = detect().containment is Containment.PID_NAMESPACE
NO_NETWORK = Network.NONE in detect().networks
SANDBOX = Filesystem.SANDBOX in detect().filesystems
MEMORY_CGROUP = memory_parent() is not None

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
    # Nested 950 deep: past json.loads, a recursive walk would have raised inside alk.
    "deep_event": (VIOLATION, 20, "", "done"),
    # Bounded in bytes where they enter: 250 fault points of 1 MiB, 1,000 long tool names.
    # 250 MB of fault events, past the harness's RSS bound (HARNESS_RSS_LIMIT_MB) had alk kept
    # them whole; the rate is benchmarks/floods.py's to measure, this test's that alk stays up
    # and bounded.
    "fault_flood": (PASS, 60, "", "done"),
    "tool_name_flood": (PASS, 30, "", "done"),
    # 8 MiB of `{}`: millions of objects parsed, unless alk counts them first.
    "json_bomb_file": (("agent", "wrong_files"), 20,
                       'files = [ { path = "lab-output/effects.json", json_length = 1 } ]',
                       "742 done"),
    # 1.5 GiB asked of /tmp and /dev/shm, which are memory: sized from memory_mb, half each.
    # Where the repeat has a memory cgroup, what they hold is charged to it beside the worker's
    # own memory: both full are past the limit.
    "tmpfs_hog": ((("framework_runtime", "memory_limit") if MEMORY_CGROUP else PASS) if SANDBOX
                  else ("agent", "wrong_output"), 20, "", "bounded"),
    # 1e999 and NaN: a violation, and nothing non-finite is ever written back.
    "non_finite": (VIOLATION, 20, "", "done"),
    # Bidi overrides, zero-width characters and terminal controls in every field it has.
    "bidi_text": (("framework_runtime", "nonzero_exit"), 20, "", "done"),
    # Killed by its own SIGKILL after its result: as a namespace's PID 1 it would pass.
    "suicide_after_result": (("framework_runtime", "killed_by_signal"), 20, "", "done"),
    # Catches SIGINT; SIGTERM, which it has no handler for, must end it.
    "shrug_off_sigint": (("framework_runtime", "timeout"), 2, "", "done"),
    # A 3,000-deep chain of folders left in the workspace.
    "deep_folders": (PASS, 30, "", "done"),
}
LIMITS = {"memory_hog": "[limits]\nmemory_mb = 256\n",
          "tmpfs_hog": "[limits]\nmemory_mb = 256\n",
          "fork_bomb": "[limits]\nmax_processes = 64\n"}


def lane_text(threat: str, timeout_s: float, expect: str, output: str, port: int,
              level: str = "") -> str:
    return (f'framework = "hostile"\nversion = ">=1"\n'
            f'command = ["{{python}}", "{WORKER}", "{threat}"]\n'
            f'required_env = ["HOSTILE_TOKEN"]\ntimeout_s = {timeout_s}\n'
            + (f'filesystem = "{level}"\n' if level else "") +
            f"transcript_cap_mb = {CAP_MB}\n{LIMITS.get(threat, '')}\n"
            f'[[scenarios]]\nid = "attack"\ntask = "Do as you please"\n'
            f"input = {{ port = {port} }}\n"
            f'[scenarios.expect]\nstop_reason = "accepted"\noutput_equals = "{output}"\n{expect}\n')


# Also outside the sandbox, where the worker writes where alk's user can: these defences are
# alk's own, not the sandbox's.
UNSANDBOXED = ("deep_event", "non_finite", "suicide_after_result", "deep_folders",
               "fault_flood", "forge_harness", "self_grade")


# What alk's init answers for (signals, orphans, the namespace's end, its descriptors): also
# with the Python init, which runs where no C compiler built the compiled one.
INIT_THREATS = ("fork_escape", "hold_pipes", "hang_ignore_signals", "inherited_fds",
                "suicide_after_result", "shrug_off_sigint", "steal_secrets")


@pytest.mark.parametrize("threat", [*THREATS, *(f"{t}@workspace" for t in UNSANDBOXED),
                                    *(f"{t}+python-init" for t in INIT_THREATS)])
def test_alk_stays_up_bounded_honest_and_leaks_nothing(threat, tmp_path, process_watch):
    threat, python_init, _ = threat.partition("+python-init")
    threat, _, level = threat.partition("@")
    if threat == "call_home" and not NO_NETWORK:
        pytest.skip(f"no network isolation here: {detect().network_reason}")
    if threat == "fork_bomb" and cgroup_parent("pids") is None and os.getuid() == 0:
        pytest.skip("as root only a pids cgroup bounds processes, and none is writable here")
    if threat in ("suicide_after_result", "shrug_off_sigint") and not NAMESPACE:
        pytest.skip("the worker is PID 1 only in a PID namespace, which this machine lacks")
    (outcome, cause), timeout_s, expect, output = THREATS[threat]
    token, private = f"tok-{secrets.token_hex(12)}", f"priv-{secrets.token_hex(12)}"
    (tmp_path / "tmp").mkdir()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        lane = tmp_path / "lanes" / f"{threat}.toml"
        lane.parent.mkdir()
        lane.write_text(lane_text(threat, timeout_s, expect, output,
                                  listener.getsockname()[1], level))
        env = {**os.environ, "HOSTILE_TOKEN": token, "HARNESS_PRIVATE": private,
               "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "120",
               **({cinit.FORCE_ENV: "python"} if python_init else {})}
        with process_watch(tmp_path / "tmp") as watch:
            done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(lane),
                                   "-n", "1"], cwd=tmp_path, env=env, capture_output=True,
                                  timeout=timeout_s + 60)
    try:
        [result] = list((tmp_path / "reports").glob("*/result.json"))
        document = json.loads(result.read_text())
        [repeat] = document["scenarios"][0]["repeats"]
        assert (repeat["outcome"], repeat["cause"]) == (outcome, cause), repeat["detail"]
        assert repeat["filesystem"] == (level or detect().strongest_filesystem.value)
        assert done.returncode == (0 if outcome == "pass" else 1), done.stderr
        # On time by alk's own clock: a loaded machine stretches the interpreter's start-up
        # and the probe, which come before the repeat's deadline and are not alk's promise.
        assert_ended_in_time(repeat_events(tmp_path), timeout_s)
        assert document["harness_peak_rss_mb"] < HARNESS_RSS_LIMIT_MB
        _no_secret_anywhere(tmp_path, done, token,
                            private if NAMESPACE or threat != "steal_secrets" else None)
        _nothing_raw_on_the_terminal(done.stdout + done.stderr)
        _transcripts_valid_and_bounded(tmp_path)
        if NAMESPACE or threat not in ("fork_escape", "hold_pipes"):
            assert watch.left() == [], "a process of the repeat outlived it"
        assert document["status"] == "complete"
        assert list((tmp_path / "tmp").iterdir()) == [], "alk left its folders behind"
        EXTRA.get(threat, lambda *_: None)(repeat, tmp_path)
    finally:
        for pid in watch.left(within_s=0):
            os.kill(pid, signal.SIGKILL)
        # Whatever a failing alk left (a 3,000-deep chain) must not break pytest's own cleanup.
        remove_tree(tmp_path / "tmp")


def _no_secret_anywhere(tmp_path: Path, done: subprocess.CompletedProcess, *values) -> None:
    for value in filter(None, values):
        for folder in ("transcripts", "reports"):
            for path in (tmp_path / folder).rglob("*"):
                if path.is_file():
                    assert value.encode() not in path.read_bytes(), f"{value} in {path}"
        assert value not in done.stdout.decode(errors="replace")
        assert value not in done.stderr.decode(errors="replace")


# What must never reach a terminal raw: C0 and C1 controls (but tab and newline), bidi
# overrides and isolates, zero-width characters, the byte-order mark, line separators.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e"
                 "\u2066-\u2069\ufeff]")


def _nothing_raw_on_the_terminal(output: bytes) -> None:
    found = RAW.findall(output.decode("utf-8", "replace"))
    assert not found, f"raw on the terminal: {[hex(ord(c)) for c in found[:5]]}"


def _strict(text: str | bytes):
    """JSON as strict readers take it (jq, browsers, Go): no NaN, no Infinity."""
    def refuse(name):
        raise AssertionError(f"non-finite number {name} written")
    return json.loads(text, parse_constant=refuse)


def _transcripts_valid_and_bounded(tmp_path: Path, cap_mb: int = CAP_MB) -> None:
    for path in (tmp_path / "transcripts").rglob("*.jsonl"):
        data = path.read_bytes()
        assert len(data) <= cap_mb * 1024 * 1024 + 64 * 1024, f"{path} is {len(data)} bytes"
        for line in data.splitlines():
            event = _strict(line.decode("utf-8"))  # valid UTF-8 strict JSON, every line
            assert {"seq", "t", "source", "channel", "type", "payload"} <= set(event)
    for path in (tmp_path / "reports").rglob("*.json"):
        _strict(path.read_bytes())


def _shrugged_off(repeat, tmp_path):
    # SIGTERM ended it: as PID 1 it would have ignored it, and died of the SIGKILL after.
    assert repeat["signal"] == signal.SIGTERM, repeat


def _tmpfs_counted(repeat, tmp_path):
    if SANDBOX:
        assert 64 < repeat["peak_tmpfs_mb"] <= 260, repeat


def _names_bounded(repeat, tmp_path):
    assert sum(map(len, repeat["trajectory"])) <= 9 * 1024
    assert all(len(step) <= 140 for step in repeat["trajectory"])


EXTRA = {"shrug_off_sigint": _shrugged_off, "tmpfs_hog": _tmpfs_counted,
         "tool_name_flood": _names_bounded}


# --- attacks that need more than one repeat, scenario or secret -----------------------------

ROOT = Path(__file__).resolve().parents[2]


def run_alk(tmp_path: Path, lane: str, *args: str, env: dict | None = None,
            timeout_s: float = 120):
    """Runs `alk run` on a lane text in tmp_path; returns (process, document, elapsed)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    path = tmp_path / "lanes" / "attack.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(lane)
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(path), *args],
                          cwd=tmp_path, capture_output=True, timeout=timeout_s,
                          env={**os.environ, "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "100",
                               **(env or {})})
    elapsed = time.monotonic() - began
    [result] = list((tmp_path / "reports").glob("*/result.json"))
    return done, _strict(result.read_bytes()), elapsed


def header(threat: str, *args: str, extra: str = "") -> str:
    argv = ", ".join(f'"{a}"' for a in ("{python}", str(WORKER), threat, *args))
    return (f'framework = "hostile"\nversion = ">=1,<2"\ncommand = [{argv}]\n'
            f'required_env = ["HOSTILE_TOKEN"]\ntimeout_s = 20\n{extra}\n')


def scenario(id: str, output: str = "done", extra: str = "", expect: str = "") -> str:
    return (f'[[scenarios]]\nid = "{id}"\ntask = "t"\n{extra}\n[scenarios.expect]\n'
            f'stop_reason = "accepted"\noutput_equals = "{output}"\n{expect}\n')


TOKEN_ENV = {"HOSTILE_TOKEN": f"tok-{secrets.token_hex(12)}"}


def test_a_worker_cannot_learn_its_scenario_before_the_gate_to_void_its_failures(tmp_path):
    # It looks at its workspace's name, HOME, TMPDIR and alk's transcripts and reports; had
    # it found "hard", it would report an unsupported version and the failure would be void.
    lane = header("peek_scenario", str(tmp_path)) + scenario("easy") + scenario("hard")
    done, document, _ = run_alk(tmp_path, lane, "-n", "3", env=TOKEN_ENV)
    easy, hard = document["scenarios"]
    assert easy["stats"]["counts"]["passed"] == 3
    assert [r["cause"] for r in hard["repeats"]] == ["wrong_output"] * 3
    assert hard["stats"]["counts"]["void"] == 0 and done.returncode == 1


def test_a_resumed_attempt_that_changes_identity_fails_the_repeat_and_both_are_recorded(
        tmp_path):
    kill = ('kill_at = { channel = "tool", type = "result", name = "write_report" }\n')
    done, document, _ = run_alk(tmp_path, header("identity_shift")
                                + scenario("crash", extra=kill), "-n", "2", env=TOKEN_ENV)
    for repeat in document["scenarios"][0]["repeats"]:
        assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime",
                                                        "identity_changed"), repeat["detail"]
        assert repeat["attempts"] == 2
        assert repeat["identities"] == [["hostile", "1.0"], ["hostile", "2.0"]]
    assert {(i["version"], i["repeats"]) for i in document["identities"]} == {("1.0", 2),
                                                                              ("2.0", 2)}
    assert done.returncode == 1
    assert "2.0" in " ".join(done.stdout.decode().split())  # shown, not only the first


def test_a_million_character_version_is_bounded_in_every_output(tmp_path):
    done, document, _ = run_alk(tmp_path, header("huge_version") + scenario("a"), "-n", "1",
                                env=TOKEN_ENV)
    assert document["gate"]["cause"] == "version_invalid"
    assert done.returncode == 3
    assert len(done.stdout) < 8_000
    assert len(json.dumps(document)) < 40_000


def test_a_long_run_of_distinct_tool_names_keeps_the_result_small(tmp_path):
    done, document, _ = run_alk(tmp_path, header("tool_name_flood") + scenario("a"),
                                "-n", "30", env=TOKEN_ENV)
    [attack] = document["scenarios"]
    assert attack["stats"]["counts"]["passed"] == 30
    # 30 repeats × 1,000 names of 128 characters: 3.9 MB of trajectories, kept to 8 KiB each.
    size = sum(p.stat().st_size for p in (tmp_path / "reports").rglob("result.json"))
    assert size < 600_000, size
    assert document["harness_peak_rss_mb"] < HARNESS_RSS_LIMIT_MB
    assert attack["stats"]["trajectories"]["distinct"] == 30


PEM = ("-----BEGIN PRIVATE KEY-----\n"
       + "\n".join(secrets.token_urlsafe(48) for _ in range(4))
       + "\n-----END PRIVATE KEY-----")


def test_no_piece_of_a_secret_is_stored_however_alk_cuts_or_splits_it(tmp_path):
    """The worker places the declared values across every length limit alk applies, and a
    multi-line one as it is; no 12-character piece of either may be anywhere alk writes."""
    token = "tok-" + secrets.token_hex(20)
    lane = (header("cut_secrets").replace('["HOSTILE_TOKEN"]', '["HOSTILE_TOKEN", "HOSTILE_PEM"]')
            + scenario("a", expect='files = [ { path = "lab-output/effects.json", '
                                   'json_subset = { note = "x" } } ]'))
    env = {"HOSTILE_TOKEN": token, "HOSTILE_PEM": PEM}
    done, document, _ = run_alk(tmp_path, lane, "-n", "1", env=env)
    [repeat] = document["scenarios"][0]["repeats"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "nonzero_exit")
    as_json = subprocess.run([sys.executable, "-m", "alk", "report", "--json"], cwd=tmp_path,
                             capture_output=True, env={**os.environ, **env})
    shown = subprocess.run([sys.executable, "-m", "alk", "show", "latest", "a", "1"],
                           cwd=tmp_path, capture_output=True, env={**os.environ, "COLUMNS": "300"})
    outputs = [done.stdout, done.stderr, as_json.stdout, shown.stdout]
    files = [p.read_bytes() for folder in ("transcripts", "reports")
             for p in (tmp_path / folder).rglob("*") if p.is_file()]
    pieces = {value[i:i + 12] for value in (token, *PEM.splitlines()) if len(value) >= 12
              for i in range(len(value) - 11)} - {"-----BEGIN P", "-----END PRI"}
    pieces = {p for p in pieces if "-----" not in p and " PRIVATE" not in p}
    for blob in outputs + files:
        text = blob.decode("utf-8", "replace")
        # Files are ASCII JSON: read them back so that escaped text is compared as text.
        found = [p for p in pieces if p in text or p in text.replace("\\\\", "\\")]
        assert not found, f"{found[:3]} stored in {text[text.find(found[0]) - 80:][:200]!r}"


@pytest.mark.skipif(not SANDBOX, reason=f"no sandbox here: {detect().filesystem_reason}")
def test_a_key_left_in_a_kernel_keyring_does_not_reach_the_next_repeat(tmp_path):
    lane = (header("keyring")
            + scenario("plant", "nothing planted", extra='input = { phase = "plant" }')
            + scenario("find", "nothing found", extra='input = { phase = "find" }'))
    done, document, _ = run_alk(tmp_path, lane, "-n", "2", env=TOKEN_ENV)
    for entry in document["scenarios"]:
        assert [r["cause"] for r in entry["repeats"]] == ["passed"] * 2, entry["repeats"][0]


@pytest.mark.skipif(not SANDBOX, reason=f"no sandbox here: {detect().filesystem_reason}")
def test_the_worker_reads_nothing_of_the_host_beyond_what_it_needs(tmp_path):
    canary = secrets.token_hex(8)
    home = Path.home() / f".alk-canary-{canary}"
    sibling = ROOT.parent / f"alk-canary-{canary}"
    try:
        home.write_text("home canary")
        sibling.mkdir()
        (sibling / "canary.txt").write_text("sibling canary")
        paths = [str(home), str(sibling / "canary.txt")]
        folders = [str(tmp_path / "transcripts"), str(tmp_path / "reports"), str(Path.home())]
        (tmp_path / "transcripts").mkdir()
        (tmp_path / "transcripts" / "earlier.jsonl").write_text("{}\n")
        (tmp_path / "reports").mkdir()
        (tmp_path / "reports" / "earlier").mkdir()
        inputs = f"input = {{ paths = {json.dumps(paths)}, folders = {json.dumps(folders)} }}"
        done, document, _ = run_alk(tmp_path, header("read_host")
                                    + scenario("a", "nothing read", extra=inputs), "-n", "1",
                                    env=TOKEN_ENV)
        [repeat] = document["scenarios"][0]["repeats"]
        assert repeat["cause"] == "passed", repeat["detail"]
    finally:
        home.unlink(missing_ok=True)
        (sibling / "canary.txt").unlink(missing_ok=True)
        if sibling.exists():
            sibling.rmdir()


@pytest.mark.skipif(not NAMESPACE, reason="no PID namespace here: no init to forge")
def test_a_worker_that_writes_the_inits_status_line_cannot_make_its_death_a_pass(tmp_path,
                                                                                init):
    # Outside the sandbox a root worker can open the init's pipe; the line it forges is not
    # the only one, nor does it agree with how the init ended.
    lane = header("forge_init_status", extra='filesystem = "workspace"') + scenario("a")
    done, document, _ = run_alk(tmp_path, lane, "-n", "2", env=TOKEN_ENV)
    for repeat in document["scenarios"][0]["repeats"]:
        assert repeat["outcome"] == "framework_runtime", repeat["detail"]
        assert repeat["cause"] in ("killed_by_signal", "nonzero_exit")
    if os.getuid() == 0:  # as another user it cannot reach the pipe, and does not try in vain
        for number in (1, 2):
            said = " ".join(e["payload"].get("text", "") for e in repeat_events(
                tmp_path, "a", number) if e["channel"] == "stderr")
            assert "forged the init's status line" in said, "the attack did not happen"


def test_a_worker_that_makes_half_its_repeats_void_cannot_pass_for_green(tmp_path):
    lane = (header("void_half", str(tmp_path / "starts"), extra='filesystem = "workspace"')
            + scenario("a"))
    # One at a time: two workers at once would race on the count in their file.
    done, document, _ = run_alk(tmp_path, lane, "-n", "6", "-j", "1", env=TOKEN_ENV)
    [attack] = document["scenarios"]
    assert attack["stats"]["counts"]["void"] == 3 and attack["stats"]["counts"]["passed"] == 3
    assert done.returncode == 3  # void beside passes is never green
    shown = " ".join(done.stdout.decode().split())
    assert "void 3 of 6: " in shown
    assert "void: 3 of 6 repeats (50%) not scored" in shown


def test_eight_floods_at_once_keep_alk_within_its_memory_bound(tmp_path):
    # Each of 8 workers at once writes 24 MiB of stderr past its head, so that each transcript
    # holds a full tail in alk's memory until its repeat ends: alk's bound holds at -j 8.
    lane = header("stderr_flood", "24", extra="transcript_cap_mb = 16\nmax_parallel = 8")
    done, document, _ = run_alk(tmp_path, lane + scenario("a"), "-n", "8", "-j", "8",
                                env=TOKEN_ENV)
    assert [r["cause"] for r in document["scenarios"][0]["repeats"]] == ["passed"] * 8
    assert document["settings"]["jobs"] == 8
    assert document["harness_peak_rss_mb"] < HARNESS_RSS_LIMIT_MB
    _transcripts_valid_and_bounded(tmp_path, cap_mb=16)


def test_a_gibibyte_of_stderr_before_the_result_passes_within_ten_seconds(tmp_path):
    lane = header("stderr_flood", "1024").replace("timeout_s = 20", "timeout_s = 10")
    lane = lane.replace('required_env = ["HOSTILE_TOKEN"]', 'required_env = ["HOSTILE_TOKEN"]\n'
                        'transcript_cap_mb = 1')
    done, document, _ = run_alk(tmp_path, lane + scenario("a"), "-n", "1", env=TOKEN_ENV)
    [repeat] = document["scenarios"][0]["repeats"]
    assert repeat["cause"] == "passed", repeat["detail"]
    assert document["harness_peak_rss_mb"] < HARNESS_RSS_LIMIT_MB


def test_a_rerun_looks_to_the_worker_as_the_repeat_it_reproduces(tmp_path):
    # The worker fails, unless what it is sent says it is being rerun (the run's start time,
    # seconds ago, or a field of the rerun's own): then it passes, and the rerun reads "fixed".
    done, document, _ = run_alk(tmp_path, header("tell_rerun") + scenario("a"), "-n", "1",
                                env=TOKEN_ENV)
    [repeat] = document["scenarios"][0]["repeats"]
    assert repeat["cause"] == "wrong_output", repeat["detail"]
    time.sleep(6)  # the original is now older than the worker's threshold for "a rerun"
    again = subprocess.run([sys.executable, "-m", "alk", "rerun", document["run_id"], "a", "1"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env={**os.environ, **TOKEN_ENV, "TMPDIR": str(tmp_path / "tmp")})
    assert again.returncode == 1, again.stdout + again.stderr
    [rerun] = [d for path in (tmp_path / "reports").glob("*/result.json")
               if (d := json.loads(path.read_text()))["run_id"] != document["run_id"]]
    [rerun_repeat] = rerun["scenarios"][0]["repeats"]
    assert rerun_repeat["cause"] == "wrong_output", rerun_repeat["detail"]
