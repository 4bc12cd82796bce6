"""`alk` through its real command line, on real workers; checks exit codes, the terminal
report, result.json and the transcripts."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from alk.plan import repeat_seed
from alk.runner.isolation import detect

from helpers.cli import alk_here
from helpers.processes import gone, write_lane
from helpers.timing import assert_ended_in_time, repeat_events

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
LANES = TESTS / "lanes"
ACTS = TESTS / "workers" / "acts.py"


def result_of(cwd):
    [path] = (cwd / "reports").glob("*/result.json")
    return json.loads(path.read_text())


def repeats_of(document):
    return [r for s in document["scenarios"] for r in s["repeats"]]


def events(cwd, relative):
    return [json.loads(line) for line in (cwd / relative).read_text().splitlines()]


def test_reference_lane_passes_with_evidence(tmp_path, alk):
    done = alk("run", "--lane", ROOT / "lanes" / "reference.toml", "-n", 3, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    document = result_of(tmp_path)
    assert document["schema"] == "alk.result/3" and document["status"] == "complete"
    assert document["gate"]["version"] == "1.0.0"
    assert [s["stats"]["verdict"] for s in document["scenarios"]] == ["pass"] * 5
    for scenario in document["scenarios"]:
        assert scenario["id"] in done.stdout
        assert scenario["stats"]["counts"] == {"requested": 3, "completed": 3, "void": 0,
                                               "scored": 3, "passed": 3}
    level = (f"{detect().containment.value}, network {detect().strongest_network.value}, "
             f"filesystem {detect().strongest_filesystem.value}")
    assert f"isolation   {level} (15 repeats)" in done.stdout
    for repeat in repeats_of(document):
        assert repeat["containment"] == detect().containment.value
        assert repeat["network"] == detect().strongest_network.value
        assert repeat["filesystem"] == detect().strongest_filesystem.value
        data = (tmp_path / repeat["transcript"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == repeat["sha256"]
        last = json.loads(data.splitlines()[-1])
        assert (last["source"], last["type"]) == ("harness", "attribution")
        assert last["payload"]["outcome"] == "pass"


def test_unsupported_version_is_void_before_any_repeat(tmp_path, alk):
    done = alk("run", "--lane", LANES / "old_version.toml", "--link-base",
               "https://ci.example.com/jobs/9/", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    # Its report files: a small page (no chart, no bundle), readable as the umask allows, and
    # report.md's links under the base.
    [folder] = (tmp_path / "reports").iterdir()
    umask = os.umask(0)
    os.umask(umask)
    for name in ("report.html", "report.md", "junit.xml"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o666 & ~umask, name
    assert (folder / "report.html").stat().st_size < 32_000
    assert "Nothing ran" in (folder / "report.html").read_text()
    assert (f"(https://ci.example.com/jobs/9/reports/{folder.name}/result.json)"
            in (folder / "report.md").read_text())
    assert "version_unsupported" in done.stdout and "0.9.1" in done.stdout
    document = result_of(tmp_path)
    assert document["gate"]["cause"] == "version_unsupported"
    assert document["gate"]["version"] == "0.9.1"
    assert repeats_of(document) == []
    run = tmp_path / "transcripts" / document["run_id"]
    assert [p.name for p in run.iterdir()] == ["preflight.jsonl"]
    probe = events(tmp_path, run.relative_to(tmp_path) / "preflight.jsonl")
    kinds = [e["type"] for e in probe]
    assert "abort" in kinds and "start" not in kinds
    assert next(e for e in probe if e["type"] == "preflight")["payload"]["ok"] is False


@pytest.mark.parametrize("lane, outcome, cause, evidence", [
    ("crashes", "framework_runtime", "framework_exception", "framework exploded in dispatch"),
    ("wrong_answer", "agent", "wrong_output", "Report for order 999"),
    ("false_claim", "agent", "wrong_files", "json_length"),
    ("bad_protocol", "framework_runtime", "protocol_violation", "not_json"),
])
def test_failures_are_attributed_in_table_result_and_transcript(tmp_path, lane, outcome, cause,
                                                                evidence, alk):
    done = alk("run", "--lane", LANES / f"{lane}.toml", "-n", 2, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{outcome}/{cause}" in done.stdout and evidence in done.stdout
    document = result_of(tmp_path)
    for repeat in repeats_of(document):
        assert (repeat["outcome"], repeat["cause"]) == (outcome, cause)
        assert evidence in repeat["detail"]
        attribution = events(tmp_path, repeat["transcript"])[-1]["payload"]
        assert (attribution["outcome"], attribution["cause"]) == (outcome, cause)


def test_crash_after_the_effect_then_resume(tmp_path, alk):
    # The reference worker's idempotency key keeps the effect single across the restart ...
    done = alk("run", "--lane", ROOT / "lanes" / "reference.toml", "-n", 2,
               "-s", "crash-after-effect", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for repeat in repeats_of(result_of(tmp_path)):
        assert repeat["attempts"] == 2 and repeat["outcome"] == "pass"
        log = events(tmp_path, repeat["transcript"])
        kinds = [e["type"] for e in log]
        assert kinds.count("spawn") == 2 and "kill_at" in kinds and "restart" in kinds
        # Nothing the killed attempt wrote after the kill event counts as what it did.
        killed = log[kinds.index("kill_at"):kinds.index("restart")]
        assert not [e for e in killed if e["source"] == "worker" and e["channel"] != "stdout"
                    and e["channel"] != "stderr"]
    # ... a worker without one writes it twice, and the harness's own check shows it.
    naive = tmp_path / "naive"
    naive.mkdir()
    done = alk("run", "--lane", LANES / "no_idempotency.toml", "-n", 1, cwd=naive)
    assert done.returncode == 1
    [repeat] = repeats_of(result_of(naive))
    # The kill was alk's: not recovering from it is the framework's (docs/causes.md).
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "effect_repeated")
    assert "json_length: expected 1, got 2" in repeat["detail"]


def test_a_declared_fault_that_never_fired_voids_the_repeat(tmp_path, alk):
    done = alk("run", "--lane", LANES / "faults.toml", "-n", 2, cwd=tmp_path)
    injected, forgotten, unused = result_of(tmp_path)["scenarios"]
    assert injected["stats"]["verdict"] == "pass"
    assert {r["cause"] for r in unused["repeats"]} == {"script_not_consumed"}
    assert "expected \"all 2 turns used\", got \"1 turns used\"" in unused["repeats"][0]["detail"]
    assert forgotten["stats"]["verdict"] == "void"
    assert {r["cause"] for r in forgotten["repeats"]} == {"fault_not_fired"}
    assert "before_model#1" in forgotten["repeats"][0]["detail"]
    assert done.returncode == 1  # the unused turns are a failure; void alone would be 3


def test_a_missing_framework_voids_the_run_with_the_install_command(tmp_path, alk):
    worker = tmp_path / "w.py"
    worker.write_text("from alk import worker\nworker.hello()\nimport not_installed_fw\n")
    lane = write_lane(tmp_path, "fm", f'framework = "fw"\nversion = ">=1"\n'
                      f'install = "pip install not-installed-fw"\n'
                      f'command = ["{{python}}", "{worker}"]\n'
                      '[[scenarios]]\nid = "a"\ntask = "t"\n')
    done = alk("run", "--lane", lane, "-n", 2, cwd=tmp_path)
    assert done.returncode == 3
    gate = result_of(tmp_path)["gate"]
    assert gate["cause"] == "framework_missing"
    assert "install it: pip install not-installed-fw" in gate["detail"]


def test_a_crash_is_told_apart_by_its_deepest_frame(tmp_path, alk):
    alk("run", "--lane", LANES / "adapter_bug.toml", cwd=tmp_path)
    adapter, framework = result_of(tmp_path)["scenarios"]
    [bug] = adapter["repeats"]
    [raised] = framework["repeats"]
    assert bug["cause"] == "worker_exception" and "adapter_bug.py:11" in bug["detail"]
    assert raised["cause"] == "framework_exception" and "json/decoder.py" in raised["detail"]


def test_a_scripted_scenario_with_two_paths_is_the_frameworks_nondeterminism(tmp_path, alk):
    done = alk("run", "--lane", LANES / "wobbly.toml", "-n", 4, "--stats", cwd=tmp_path)
    [scenario] = result_of(tmp_path)["scenarios"]
    assert scenario["stats"]["verdict"] == "pass" and scenario["scripted"] is True
    assert scenario["stats"]["paths"] == {
        "distinct": 2, "first_difference": 1,
        "events_there": ["tool/call lookup_customer", "tool/call lookup_order"]}
    flat = " ".join(done.stdout.split())
    assert "event paths two-tools: 2 distinct" in flat and "framework's" in flat


def test_a_claim_of_success_is_recorded_but_not_believed(tmp_path, alk):
    alk("run", "--lane", LANES / "false_claim.toml", "-n", 1, cwd=tmp_path)
    [repeat] = repeats_of(result_of(tmp_path))
    assert repeat["claimed"]["passed"] is True and repeat["outcome"] == "agent"


def test_mixed_outcomes_make_a_flaky_verdict(tmp_path, alk):
    # The flaky worker fails on odd seeds: pick a run seed whose first 4 repeats mix parities.
    seed = next(s for s in range(100)
                if len({repeat_seed(s, "nominal", r) % 2 for r in range(1, 5)}) == 2)
    done = alk("run", "--lane", LANES / "flaky.toml", "-n", 4, "--seed", seed, cwd=tmp_path)
    assert done.returncode == 1
    [scenario] = result_of(tmp_path)["scenarios"]
    assert scenario["stats"]["verdict"] == "flaky" and 0 < scenario["stats"]["pass_rate"] < 1


def test_hang_is_a_timeout_and_alk_returns_in_time(tmp_path, alk):
    done = alk("run", "--lane", LANES / "hangs.toml", "-n", 1, "--timeout", 1, cwd=tmp_path)
    assert_ended_in_time(repeat_events(tmp_path, "nominal"), 1)  # by alk's own clock
    assert done.returncode == 1
    [repeat] = repeats_of(result_of(tmp_path))
    assert (repeat["outcome"], repeat["cause"], repeat["timed_out"]) == (
        "framework_runtime", "timeout", True)


def test_malformed_lane_is_rejected_before_anything_runs(tmp_path):
    lane = write_lane(tmp_path, "broken", 'framework = "x"\nversion = ">=1"\n'
                      'command = ["true"]\ntimout_s = 3\n[[scenarios]]\nid = "a"\ntask = "t"\n')
    done = alk_here("run", "--lane", lane, cwd=tmp_path)
    assert done.returncode == 2
    assert "lanes/broken.toml" in done.stderr and "unknown field 'timout_s'" in done.stderr
    assert not (tmp_path / "reports").exists()


def test_a_link_base_that_is_no_url_is_refused_before_anything_runs(tmp_path, alk):
    done = alk("run", "--lane", LANES / "old_version.toml", "--link-base", "ci/jobs/9",
               cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--link-base: expected the http(s) URL" in done.stderr
    assert not (tmp_path / "reports").exists()


def test_unknown_scenario_and_lane_are_usage_errors(tmp_path):
    done = alk_here("run", "--lane", ROOT / "lanes" / "reference.toml", "-s", "nope",
                    cwd=tmp_path)
    assert done.returncode == 2 and "no scenario 'nope'" in done.stderr
    done = alk_here("run", "--lane", "no-such-lane", cwd=tmp_path)
    assert done.returncode == 2 and "not found" in done.stderr


def test_missing_declared_environment_voids_the_run(tmp_path, alk):
    lane = write_lane(tmp_path, "needs", f'framework = "acts"\nversion = ">=1"\n'
                      f'command = ["{{python}}", "{ACTS}", "env"]\n'
                      'required_env = ["E2E_NEVER_SET"]\n[[scenarios]]\nid = "a"\ntask = "t"\n')
    done = alk("run", "--lane", lane, "-n", 2, cwd=tmp_path)
    assert done.returncode == 3
    assert "env_missing" in done.stdout and "E2E_NEVER_SET" in done.stdout


def test_secrets_never_reach_files_or_output_and_harness_env_stays_home(tmp_path, alk):
    secret, own = "declared-secret-7f3a9c", "harness-own-secret-51be2d"
    lane = write_lane(tmp_path, "env", f'framework = "acts"\nversion = ">=1"\n'
                      f'command = ["{{python}}", "{ACTS}", "env"]\n'
                      'required_env = ["E2E_DECLARED"]\n[[scenarios]]\nid = "a"\ntask = "t"\n')
    done = alk("run", "--lane", lane, "-n", 2, "--json", cwd=tmp_path,
               env={"E2E_DECLARED": secret, "HARNESS_TOKEN": own})
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    first = events(tmp_path, repeats_of(document)[0]["transcript"])
    seen = next(e for e in first if e["type"] == "env")["payload"]
    assert seen["env"]["E2E_DECLARED"] == "[REDACTED]" and "HARNESS_TOKEN" not in seen["env"]
    assert seen["env"]["HOME"].startswith(seen["cwd"]) and seen["env"]["TMPDIR"].startswith(
        seen["cwd"])
    for path in [*tmp_path.rglob("*.json"), *tmp_path.rglob("*.jsonl")]:
        data = path.read_bytes()
        assert secret.encode() not in data and own.encode() not in data, path
    assert secret not in done.stdout + done.stderr


def test_report_show_lanes_and_causes(tmp_path, alk):
    alk("run", "--lane", ROOT / "lanes" / "reference.toml", "-n", 2, "-s", "nominal",
        cwd=tmp_path)
    document = result_of(tmp_path)
    run_id = document["run_id"]
    # What reads a saved run starts no worker: in this process.
    again = alk_here("report", run_id, "--json", cwd=tmp_path)
    assert json.loads(again.stdout) == document
    rendered = alk_here("report", cwd=tmp_path)
    assert rendered.returncode == 0 and run_id in rendered.stdout and "nominal" in rendered.stdout
    # The answer first; the statistics block only with --stats.
    assert rendered.stdout.startswith("PASS  the scenario met the rule")
    assert "workers     peak RSS" not in rendered.stdout
    assert f"alk report {run_id} --stats adds" in rendered.stdout
    rendered = alk_here("report", run_id, "--stats", cwd=tmp_path)
    shown = alk_here("show", run_id, "nominal", 1, "--channel", "tool", cwd=tmp_path)
    assert shown.returncode == 0 and "write_report" in shown.stdout
    assert "exit 0" in shown.stdout and "peak RSS" in shown.stdout
    assert "workers     peak RSS up to" in rendered.stdout
    assert "framework_ready" not in shown.stdout and "attribution" not in shown.stdout
    missing = alk_here("show", run_id, "nominal", 9, cwd=tmp_path)
    assert missing.returncode == 2 and "no repeat 9" in missing.stderr
    listed = alk_here("lanes", "--lanes-dir", LANES, cwd=tmp_path)
    assert listed.returncode == 0 and "old_version" in listed.stdout and "oldie" in listed.stdout
    doctor = alk_here("doctor", cwd=tmp_path)
    assert doctor.returncode == 0 and detect().containment.value in doctor.stdout
    causes = alk_here("causes", cwd=tmp_path)
    assert "version_unsupported" in causes.stdout and "wrong_files" in causes.stdout
    one = alk_here("causes", "timeout", cwd=tmp_path)
    assert one.returncode == 0 and one.stdout.startswith("timeout  framework_runtime")
    assert "wrong_files" not in one.stdout
    typo = alk_here("causes", "timout", cwd=tmp_path)
    assert typo.returncode == 2 and "no cause 'timout' (did you mean timeout?)" in typo.stderr


def test_in_a_pipe_progress_is_plain_lines_on_stderr_and_json_stays_clean(tmp_path, alk):
    done = alk("run", "--lane", ROOT / "lanes" / "reference.toml", "-n", 2, "--json",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "complete"
    lines = done.stderr.splitlines()
    # A line after the first repeat, then every 10 s, and the last with every repeat done.
    assert all(line.startswith("alk reference: ") for line in lines)
    # With -j N others may be running beside the first to finish; none beside the last.
    # The estimate of what is left is shown once it is a second or more.
    assert re.match(r"alk reference: 1/10 · pass 1 fail 0 void 0 · (\d running · )?\d+ s"
                    r"(, ~\d+ s left)?$", lines[0])
    assert re.match(r"alk reference: 10/10 · pass 10 fail 0 void 0 · \d+ s$", lines[-1])
    quiet = alk("run", "--lane", ROOT / "lanes" / "reference.toml", "-n", 1, "-q",
                cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""
    # Where the files went is said, since it is the folder alk ran in.
    assert f"files in    {tmp_path.resolve()}" in quiet.stdout


def test_a_lane_named_otherwise_than_its_file_is_warned_about(tmp_path, alk):
    lane = write_lane(tmp_path, "mine", (LANES / "trivial.toml").read_text().replace(
        'name = "trivial"', 'name = "theirs"').replace('"workers/', f'"{TESTS}/workers/'))
    assert 'name = "theirs"' in lane.read_text()
    done = alk("run", "--lane", lane, "-n", 1, "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("warning: lanes/mine.toml: name 'theirs' differs from the file's name 'mine'"
            in " ".join(done.stderr.split()))


def test_check_worker_names_what_breaks_the_protocol(tmp_path, alk):
    bad = alk("check-worker", "--lane", LANES / "bad_protocol.toml", cwd=tmp_path)
    assert bad.returncode == 1
    assert "not_json" in bad.stdout and "harness_channel" in bad.stdout
    good = alk("check-worker", "--lane", ROOT / "lanes" / "reference.toml", "-s", "nominal",
               "-s", "deny-egress", cwd=tmp_path)
    assert good.returncode == 0 and "speaks protocol v1" in good.stdout
    checked = re.findall(r"scenario (\S+): protocol ok", good.stdout)
    assert sorted(checked) == ["deny-egress", "nominal"]


def test_check_worker_tells_the_workers_problems_from_the_frameworks_findings(tmp_path, alk):
    lane = LANES / "fragile.toml"
    # The careless scenario breaks the protocol and sends no result: both are said at once,
    # beside the framework's own failure on a raising tool, which is a finding.
    both = alk("check-worker", "--lane", lane, cwd=tmp_path)
    assert both.returncode == 1, both.stdout + both.stderr
    assert "✗ stdout line 2: not_json (scenario careless)" in both.stdout
    assert "✗ scenario careless: framework_runtime/no_result" in both.stdout
    assert "◆ scenario tool-raises: framework finding, fault_unrecovered" in both.stdout
    assert "2 problems to fix in the worker" in both.stdout
    # Without it, the worker speaks the protocol: the finding is listed and fails nothing.
    fine = alk("check-worker", "--lane", lane, "-s", "nominal", "-s", "tool-raises",
               cwd=tmp_path)
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert "the worker speaks protocol v1" in fine.stdout
    assert "1 finding about the framework" in fine.stdout
    assert "tool's error back to the model" in fine.stdout and "Retry-After" not in fine.stdout


def test_check_worker_takes_a_timeout_and_says_the_hang(tmp_path, alk):
    # The worker sleeps for ever: that check-worker returned at all is the timeout kept.
    hung = alk("check-worker", "--lane", LANES / "hangs.toml", "--timeout", "1", cwd=tmp_path)
    assert hung.returncode == 1
    assert "scenario nominal: framework_runtime/timeout" in hung.stdout
    assert "no exit within the timeout (1." in hung.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_keeps_a_consistent_partial_result(tmp_path, sig, alk):
    proc = subprocess.Popen([sys.executable, "-m", "alk", "run", "--lane",
                             str(LANES / "hangs.toml"), "-n", "3", "--timeout", "30"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not list(tmp_path.glob("transcripts/*/nominal/repeat-01.jsonl")):
        assert time.monotonic() < deadline, "the run never started a repeat"
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(sig)
    proc.communicate(timeout=10)
    assert proc.returncode == 130
    document = result_of(tmp_path)
    assert document["status"] == "interrupted" and repeats_of(document) == []
    # The interrupted repeat's transcript says so; no worker process is left.
    [log] = tmp_path.glob("transcripts/*/nominal/repeat-01.jsonl")
    lines = log.read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "interrupted"
    spawn = json.loads(lines[0])["payload"]["pid"]
    assert gone(spawn)
    # The repeat cut short has no entry in the result, but its transcript can be read.
    shown = alk("show", "latest", "nominal", 1, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "interrupted" in shown.stdout and "never scored" in shown.stdout
    assert "harness/spawn" in shown.stdout
    assert not list(Path(tempfile.gettempdir()).glob(f"alk-{document['run_id']}-*"))


def test_void_repeats_beside_passes_are_never_green(tmp_path, alk):
    # Every other start of the worker (the probe is the first) exits before framework_ready.
    # It keeps count in a file outside its workspace, which only `workspace` lets it write.
    lane = write_lane(tmp_path, "half", f'framework = "acts"\nversion = ">=1"\n'
                      'filesystem = "workspace"\n'
                      f'command = ["{{python}}", "{ACTS}", "void_every_other", '
                      f'"{tmp_path / "starts"}"]\n[[scenarios]]\nid = "a"\ntask = "t"\n')
    # One at a time: two workers at once would race on the count in their file.
    done = alk("run", "--lane", lane, "-n", 4, "-j", 1, cwd=tmp_path)
    [scenario] = result_of(tmp_path)["scenarios"]
    assert scenario["stats"]["verdict"] == "pass"
    assert scenario["stats"]["counts"] == {"requested": 4, "completed": 4, "void": 2,
                                           "scored": 2, "passed": 2}
    assert done.returncode == 3
    # The report says so under the row and under the table; half scored is not yet too few.
    flat = " ".join(done.stdout.split())
    assert "void 2 of 4: exited_before_ready×2" in flat and "pass?" not in flat
    assert ("void: 2 of 4 repeats (50%) not scored — the rates above cover the other 2 "
            "commonest cause: exited_before_ready (2 of 2)") in flat


# --- alk show on a transcript as large as the default cap ------------------------------------

BIG_EVENTS = 680_000
TOOL_EVERY = 17  # every 17th event is a tool call: 40,000 of them
# Starts `python -m alk` from a small interpreter of its own and prints the child's peak RSS: a
# child's ru_maxrss counts from the address space it was started from, which for a child of
# this test process would be the test runner's.
MEASURE = """
import json, os, sys, time
started = time.monotonic()
out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
pid = os.posix_spawn(sys.executable, [sys.executable, "-m", "alk", *sys.argv[2:]], os.environ,
                     file_actions=[(os.POSIX_SPAWN_DUP2, out, 1)])
_, status, usage = os.wait4(pid, 0)
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "peak_rss_kb": usage.ru_maxrss,
                  "seconds": time.monotonic() - started}))
"""


def write_big_transcript(path):
    """~64 MiB of compact JSON events, written a chunk at a time."""
    with path.open("wb") as out:
        out.write(b'{"seq":1,"t":0.0,"source":"harness","channel":"harness","type":"spawn",'
                  b'"payload":{"pid":7}}\n')
        for first in range(2, BIG_EVENTS + 1, 10_000):
            out.write("".join(
                f'{{"seq":{seq},"t":{seq / 1e4:.4f},"source":"worker","channel":"tool",'
                f'"type":"call","payload":{{"name":"echo","args":{{"n":{seq}}}}}}}\n'
                if seq % TOOL_EVERY == 0 else
                f'{{"seq":{seq},"t":{seq / 1e4:.4f},"source":"worker","channel":"stderr",'
                f'"type":"line","payload":{{"text":"{seq % 10}"}}}}\n'
                for seq in range(first, min(first + 10_000, BIG_EVENTS + 1))).encode())


def measured_show(cwd, *args):
    report = subprocess.run([sys.executable, "-c", MEASURE, str(cwd / "show.out"), "show",
                             *map(str, args)], cwd=cwd, env={**os.environ, "COLUMNS": "160"},
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    figures = json.loads(report.stdout)
    assert figures["code"] == 0, report.stderr
    print(f"alk show {' '.join(map(str, args))}: peak RSS "
          f"{figures['peak_rss_kb'] / 1024:.1f} MiB, {figures['seconds']:.2f} s")
    return figures, (cwd / "show.out").read_text()


def shown_seqs(stdout):
    # An event's heading starts with its seq, right-aligned in 5 columns, or with the first and
    # last seq of a run of stderr lines ("2–16"); payloads sit under it, indented further.
    return [seq for match in re.finditer(r"^ {0,4}(\d+)(?:–(\d+))?  ", stdout, re.MULTILINE)
            for seq in range(int(match[1]), int(match[2] or match[1]) + 1)]


def test_show_pages_a_64_mib_transcript_in_bounded_memory(tmp_path, alk):
    done = alk("run", "--lane", LANES / "trivial.toml", "-n", 1, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = result_of(tmp_path)["run_id"]
    # Only the transcript is replaced; result.json still holds the old file's sha256.
    [path] = tmp_path.glob("transcripts/*/echo/repeat-01.jsonl")
    write_big_transcript(path)
    assert path.stat().st_size > 60 * 1024 * 1024

    figures, out = measured_show(tmp_path, run_id, "echo", 1)
    assert figures["peak_rss_kb"] <= 150 * 1024
    assert shown_seqs(out) == list(range(1, 201))
    assert "events 1–200 of 680,000\n" in out
    assert f"next page: alk show {run_id} echo 1 --from 201\n" in out
    assert "does NOT match the file" in out

    figures, out = measured_show(tmp_path, run_id, "echo", 1, "--from", 679_901, "--limit", 100)
    assert figures["peak_rss_kb"] <= 150 * 1024
    assert shown_seqs(out) == list(range(679_901, 680_001))
    assert "events 679,901–680,000 of 680,000\n" in out and "next page" not in out

    figures, out = measured_show(tmp_path, run_id, "echo", 1, "--channel", "tool", "--from",
                                 39_990)
    assert figures["peak_rss_kb"] <= 150 * 1024
    assert shown_seqs(out) == list(range(39_990 * TOOL_EVERY, 680_001, TOOL_EVERY))
    assert "events 39,990–40,000 of 40,000 on tool (680,000 in all)\n" in out


# --- hostile text through the real command line ----------------------------------------------

HOSTILE_WORKER = '''
import sys
from alk import worker

TEXT = "ok\\x1b[2J\\x9b31m\\u202eevil\\u2066x\\u200by\\ufeffz"
worker.hello()
worker.ready("hostile", "1.0")
worker.start()
sys.stderr.write(TEXT + "\\n")
worker.tool_call("echo", {"text": TEXT})
worker.result(output=TEXT, stop_reason="accepted", end_state={})
'''
RAW = ("\x1b", "\x9b", "\u202e", "\u2066", "\u200b", "\ufeff")


def assert_no_raw(output, what):
    for char in RAW:
        assert char not in output, (what, hex(ord(char)))


def test_hostile_text_reaches_no_view_raw_and_json_stays_ascii(tmp_path, alk):
    program = tmp_path / "hostile_text.py"
    program.write_text(HOSTILE_WORKER)
    lane = write_lane(tmp_path, "hostile", f'framework = "hostile"\nversion = ">=1"\n'
                      f'command = ["{{python}}", "{program}"]\n[[scenarios]]\nid = "s"\n'
                      'task = "t"\n[scenarios.expect]\noutput_equals = "clean"\n')
    done = alk("run", "--lane", lane, "-n", 1, "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert_no_raw(done.stdout, "run --json")
    document = json.loads(done.stdout)
    # The worker's text is in the document, only escaped.
    assert "\u202eevil" in json.dumps(document, ensure_ascii=False)
    again = alk("report", "--json", cwd=tmp_path)
    assert_no_raw(again.stdout, "report --json")
    assert json.loads(again.stdout) == document
    for args in (("report",), ("show", "latest", "s", 1), ("check-worker", "--lane", lane)):
        shown = alk(*args, cwd=tmp_path)
        assert shown.returncode in (0, 1), shown.stdout + shown.stderr
        assert_no_raw(shown.stdout + shown.stderr, args[0])
        assert "\\u202eevil" in shown.stdout, args[0]


@pytest.mark.skipif(os.geteuid() != 0 or detect().strongest_filesystem.value != "sandbox",
                    reason="the worker runs as another user only when alk is root, in the sandbox")
def test_a_program_the_sandboxed_worker_could_not_read_is_said_before_anything_runs(tmp_path, alk):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    worker = private / "w.py"
    worker.write_text("from alk import worker\nworker.hello()\n")
    lane = write_lane(tmp_path, "private", f'framework = "fw"\nversion = ">=1"\n'
                      f'command = ["{{python}}", "{worker}"]\n'
                      '[[scenarios]]\nid = "a"\ntask = "t"\n')
    done = alk("run", "--lane", lane, "-n", 1, cwd=tmp_path)
    assert done.returncode == 3
    gate = result_of(tmp_path)["gate"]
    assert gate["cause"] == "spawn_failed"
    assert str(private) in gate["detail"] and "chmod o+rX" in gate["detail"]
    assert not (tmp_path / "transcripts").exists() or not list(
        (tmp_path / "transcripts").rglob("*.jsonl"))
