"""How long alk takes to write a run's reports (report.html, report.md, junit.xml), and how big
they are.

The run is real: 10 scenarios × 20 repeats of a worker that passes on even seeds and fails on
odd ones, so that half the repeats carry a failure, a transcript and a rerun command to report.
alk's side is `write_reports`, which reads the saved documents' transcripts (bounded) and
writes the three files; each is also timed alone. Beside it, two baselines: what a user has
without alk's reports, `result.json` written by alk's store (redacted, atomic), and the least
any writer costs, `json.dumps` of the document to a file.

Then the bound on a large transcript: one repeat's transcript grown to 64 MiB (the default
cap), and the page built again: its size and time must stay close to the first.

And the memory report.html takes, in a fresh process over the documents it read: the page
made whole (one string, encoded, written) and in pieces as `alk.report.outputs` writes it,
Plotly's 4.6 MiB bundle read from its file as it is written.

Times are medians over the rounds, on a machine others may share: the load average is printed
before and after. Target: all three reports under 1 s for 20 × 10; exit status 1 when missed.

    python benchmarks/reports.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "workers" / "flaky.py"
SCENARIOS, REPEATS = 10, 20
TARGET_S = 1.0
BIG_MIB = 64


def lane_file(folder: Path) -> Path:
    scenarios = "".join(f"""
[[scenarios]]
id = "scenario-{index:02d}"
task = "Prepare the report for order 742 of tenant shopping-a"
[scenarios.expect]
output_contains = "742"
tool_calls = {{ write_report = 1 }}
""" for index in range(SCENARIOS))
    path = folder / "lanes" / "bench.toml"
    path.parent.mkdir(parents=True)
    path.write_text(f"""name = "bench"
description = "Benchmark lane: passes on even seeds, fails on odd ones."
framework = "flaky"
version = ">=1.0,<2"
command = ["{{python}}", "{WORKER}"]
timeout_s = 10
{scenarios}""")
    return path


def real_run(folder: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(lane_file(folder)),
                           "-n", str(REPEATS), "--seed", "7", "-q", "--json"], cwd=folder,
                          capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 1):
        raise SystemExit(f"the benchmark's run failed ({done.returncode}): {done.stderr}")
    return json.loads(done.stdout)["run_id"]


def timed(work: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def grow(transcript: Path, mib: int) -> None:
    """The transcript, grown to `mib` MiB of stderr lines before its last event, as a worker
    flooding stderr makes one (alk keeps up to the lane's cap)."""
    lines = transcript.read_text().splitlines(keepends=True)
    seq = len(lines)
    line = json.dumps({"seq": 0, "t": 1.0, "source": "worker", "channel": "stderr",
                       "type": "line", "payload": "x" * 900}, separators=(",", ":")) + "\n"
    count = mib * 1024 * 1024 // len(line)
    with transcript.open("w") as out:
        out.writelines(lines[:-1])
        for number in range(count):
            out.write(line.replace('"seq":0', f'"seq":{seq + number}', 1))
        out.write(lines[-1])


# report.html written whole or in pieces; prints the peak RSS it added, in MiB.
MEMORY = """
import sys
from pathlib import Path
from alk import api
from alk.report.html import run_page
def peak():
    return next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith("VmHWM"))
documents = api.read_runs(sys.argv[1], Path("."))
before = peak()
with open("page.html", "wb") as out:
    if sys.argv[2] == "whole":
        out.write(run_page.run_page(documents, Path(".")).encode("utf-8"))
    else:
        for piece in run_page.run_page_pieces(documents, Path(".")):
            out.write(piece)
print((peak() - before) / 1024)
"""


def page_peak_mb(folder: Path, run_id: str, how: str) -> float:
    done = subprocess.run([sys.executable, "-c", MEMORY, run_id, how], cwd=folder,
                          capture_output=True, text=True, timeout=600, check=True)
    return float(done.stdout)


def load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"machine   {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {load()} at the start")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        run_id = real_run(folder)
        # Imported after the run: the measured calls find every module loaded, as after a run.
        from alk import api
        from alk.layout import result_path
        from alk.redaction import Redactor
        from alk.report import junit, markdown
        from alk.report.html import run_page
        from alk.report.outputs import write_reports
        from alk.result.store import write_document

        [document] = api.read_runs(run_id, folder)
        documents = [document]
        write_reports(documents, folder)  # warm up: templates, the chart library, caches
        report_dir = folder / "reports" / run_id
        rows = [
            ("all three reports", lambda: write_reports(documents, folder)),
            ("  report.html", lambda: run_page.run_page(documents, folder)),
            ("  report.md", lambda: markdown.run_markdown(documents, folder)),
            ("  junit.xml", lambda: junit.run_junit(documents)),
            ("result.json (store)", lambda: write_document(
                result_path(folder, run_id), document, Redactor(()))),
            ("json.dumps to a file", lambda: (report_dir / "plain.json").write_text(
                json.dumps(api.runs_json(documents)))),
        ]
        print(f"\nwriting the reports of {SCENARIOS} scenarios × {REPEATS} repeats "
              f"(real run {run_id}, {document.aggregate.counts.passed} of "
              f"{document.aggregate.counts.scored} passed), medians of {args.rounds} rounds\n")
        print(f"{'':24}{'s':>8}{'÷ result.json':>15}{'÷ json.dumps':>14}")
        seconds = {name: timed(work, args.rounds) for name, work in rows}
        store_s, plain_s = seconds["result.json (store)"], seconds["json.dumps to a file"]
        for name, value in seconds.items():
            print(f"{name:24}{value:8.3f}{value / store_s:14.1f}×{value / plain_s:13.1f}×")
        sizes = {name: (report_dir / name).stat().st_size
                 for name in ("report.html", "report.md", "junit.xml", "result.json")}
        print("\nsizes     " + " · ".join(f"{name} {size / 1024:,.0f} KiB"
                                          for name, size in sizes.items()))

        failed = next(r for s in document.scenarios for r in s.repeats if not r.passed)
        grow(folder / failed.transcript, BIG_MIB)
        big_s = timed(lambda: run_page.run_page(documents, folder), args.rounds)
        big_size = len(run_page.run_page(documents, folder).encode())
        print(f"\none transcript grown to {BIG_MIB} MiB ({failed.scenario} repeat "
              f"{failed.repeat}): report.html in {big_s:.3f} s "
              f"({big_s / seconds['  report.html']:.2f}× the first), "
              f"{big_size / 1024:,.0f} KiB ({big_size / sizes['report.html']:.2f}× the first)")
        whole, pieces = (page_peak_mb(folder, run_id, how) for how in ("whole", "pieces"))
        print(f"\nreport.html's peak over the documents read: {whole:.1f} MiB made whole, "
              f"{pieces:.1f} MiB in pieces")
    total = seconds["all three reports"]
    print(f"\nload average {load()} at the end")
    print(f"target: all three reports under {TARGET_S:.0f} s: {total:.3f} s, "
          f"{'met' if total < TARGET_S else 'MISSED'}")
    return 0 if total < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
