"""alk's own memory stays within its bound whatever eight workers at once send it: on the
gateway (heads that never end, bodies of millions of objects, bodies held in flight) and on
the protocol (lines of millions of objects), and while it writes a long run's reports.

Each worker attacks and then answers wrongly (`memory_worker.py`): the repeat must fail as it
would have, never void, so that an attack cannot hide a failure. alk's peak is the one
result.json gives (`harness_peak_rss_mb`), and for the reports, which are written after it,
the process's own peak as it exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).resolve().with_name("memory_worker.py")
BOUND_MB = 150
JOBS = 8
# The script answers every ordinary call: two a repeat, and any the gateway reads past them.
SCRIPT = "script = [" + ", ".join(['{ text = "fine" }'] * 8) + "]"
WRONG = ("agent", "wrong_output")
# The same wrong answer on turns alk's gateway served meaning them right: the framework's.
SCRIPTED_WRONG = ("framework_runtime", "script_not_followed")
# Runs alk's CLI and then writes its peak resident set (VmHWM, in KiB) to the file argv[1].
MEASURED = """
import atexit, runpy, sys
def peak(path=sys.argv.pop(1)):
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            open(path, "w").write(line.split()[1])
atexit.register(peak)
sys.argv[0] = "alk"
runpy.run_module("alk", run_name="__main__", alter_sys=True)
"""


def lane(attack: str, size: int = 0, model: bool = True) -> str:
    argv = ", ".join(f'"{a}"' for a in ("{python}", str(WORKER), attack, str(size)))
    return (f'framework = "memory"\nversion = ">=1"\ncommand = [{argv}]\ntimeout_s = 60\n'
            f"max_parallel = {JOBS}\n" + ('[model]\nmode = "script"\n' if model else "")
            + f'[[scenarios]]\nid = "attack"\ntask = "t"\n{SCRIPT if model else ""}\n'
            '[scenarios.expect]\nstop_reason = "accepted"\noutput_equals = "done"\n')


def run(tmp_path: Path, text: str, repeats: int = JOBS) -> tuple[dict, float]:
    """`alk run` of the lane at -j 8: its result document and alk's peak RSS at exit (MiB)."""
    path = tmp_path / "attack.toml"
    path.write_text(text)
    (tmp_path / "tmp").mkdir()
    peak = tmp_path / "peak"
    done = subprocess.run([sys.executable, "-c", MEASURED, str(peak), "run", "--lane",
                           str(path), "-n", str(repeats), "-j", str(JOBS), "-q"],
                          cwd=tmp_path, capture_output=True, timeout=240,
                          env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    assert done.returncode == 1, done.stderr.decode(errors="replace")[-2000:]
    [result] = list((tmp_path / "reports").glob("*/result.json"))
    document = json.loads(result.read_text())
    assert document["settings"]["jobs"] == JOBS
    peak_mb = int(peak.read_text()) / 1024
    print(f"alk's peak: {document['harness_peak_rss_mb']} MiB in result.json, {peak_mb:.1f} "
          "MiB at its exit")
    return document, peak_mb


def repeats(document: dict) -> list[dict]:
    return document["scenarios"][0]["repeats"]


def outcomes(document: dict) -> set[tuple[str, str]]:
    return {(r["outcome"], r["cause"]) for r in repeats(document)}


def served_both_calls(document: dict) -> None:
    # The ordinary calls before and after the attack: answered, whatever was refused between.
    for repeat in repeats(document):
        assert repeat["model"]["turns"] >= 2, repeat["model"]


def test_heads_that_never_end_on_many_connections_are_refused_not_buffered(tmp_path):
    # Each of 8 workers: 100 connections sending 1 MiB of header fields that never end, and
    # 100 that send nothing. Nothing bounded how many, nor the bytes of their heads.
    document, _ = run(tmp_path, lane("stalled_heads", 100))
    assert document["harness_peak_rss_mb"] < BOUND_MB
    assert outcomes(document) == {SCRIPTED_WRONG}
    served_both_calls(document)
    assert all(r["model"]["over_bounds"] > 0 for r in repeats(document))


def test_a_request_of_a_million_empty_objects_is_refused_before_it_is_parsed(tmp_path):
    document, _ = run(tmp_path, lane("object_body", 2))
    assert document["harness_peak_rss_mb"] < BOUND_MB
    assert outcomes(document) == {SCRIPTED_WRONG}
    served_both_calls(document)


def test_bodies_held_in_flight_are_bounded_across_the_run(tmp_path):
    # 8 workers × 16 requests of 4 MiB at once, each held one byte short of its end.
    document, _ = run(tmp_path, lane("held_bodies"))
    assert document["harness_peak_rss_mb"] < BOUND_MB
    assert outcomes(document) == {SCRIPTED_WRONG}
    served_both_calls(document)
    assert sum(r["model"].get("over_bounds", 0) for r in repeats(document)) > 0


def test_protocol_lines_of_many_empty_objects_are_violations_not_parsed(tmp_path):
    document, _ = run(tmp_path, lane("object_lines", 8, model=False))
    assert document["harness_peak_rss_mb"] < BOUND_MB
    assert outcomes(document) == {("framework_runtime", "protocol_violation")}
    assert all(r["violations"] >= 8 for r in repeats(document))


def test_writing_the_reports_of_a_long_run_of_distinct_tools_stays_bounded(tmp_path):
    # 80 repeats of 2,000 distinct tool names and results each; the reports are written after
    # result.json, so alk's peak is taken as it exits.
    document, peak_mb = run(tmp_path, lane("tool_names", 2000, model=False), repeats=80)
    assert outcomes(document) == {WRONG}
    assert document["harness_peak_rss_mb"] < BOUND_MB
    assert (tmp_path / "reports" / document["run_id"] / "report.html").is_file()
    assert peak_mb < BOUND_MB, f"alk's peak while writing the reports: {peak_mb:.0f} MiB"

