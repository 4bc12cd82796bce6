"""alk's own memory and speed while a worker floods it, at the sizes docs/security.md names.

Each flood runs through the real CLI (one repeat) with the hostile test worker: 2 GiB of JSON
lines on stdout, one 512 MiB line without a newline, 1 GiB of stderr. Printed side by side:
what the worker wrote, how long alk took, its throughput, alk's own peak RSS (from the result
document, measured as VmHWM) against the 150 MiB bound, and the transcript's size against its
cap. The tests run the same floods at a fraction of these sizes.

    python benchmarks/floods.py [--scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "hostile" / "worker.py"
BOUND_MB = 150
CAP_MB = 64
FLOODS = (("flood_stdout_lines", 2048, "JSON lines on stdout"),
          ("endless_line", 512, "one line, no newline"),
          ("stderr_flood", 1024, "lines on stderr"))


def run(threat: str, size_mb: int, scratch: Path) -> dict:
    folder = scratch / threat
    (folder / "lanes").mkdir(parents=True)
    lane = folder / "lanes" / "flood.toml"
    lane.write_text(f'framework = "hostile"\nversion = ">=1"\n'
                    f'command = ["{{python}}", "{WORKER}", "{threat}", "{size_mb}"]\n'
                    f'required_env = ["HOSTILE_TOKEN"]\ntimeout_s = 600\n'
                    f'transcript_cap_mb = {CAP_MB}\n[[scenarios]]\nid = "flood"\ntask = "t"\n')
    env = {**os.environ, "HOSTILE_TOKEN": "benchmark-token-0000"}
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(lane), "-n", "1",
                    "--json"], cwd=folder, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - began
    [result] = (folder / "reports").glob("*/result.json")
    document = json.loads(result.read_text())
    [repeat] = document["scenarios"][0]["repeats"]
    return {"seconds": elapsed, "rss": document["harness"]["peak_rss_mb"],
            "transcript": (folder / repeat["transcript"]).stat().st_size / 2**20,
            "outcome": f"{repeat['outcome']}/{repeat['cause']}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full sizes")
    args = parser.parse_args()
    print(f"{'flood':34}{'MiB':>7}{'s':>8}{'MiB/s':>8}{'alk RSS':>10}{'bound':>7}"
          f"{'transcript':>12}{'cap':>6}  outcome")
    with tempfile.TemporaryDirectory(prefix="alk-floods-") as scratch:
        for threat, full_mb, label in FLOODS:
            size = max(1, int(full_mb * args.scale))
            row = run(threat, size, Path(scratch))
            print(f"{label:34}{size:7d}{row['seconds']:8.1f}{size / row['seconds']:8.0f}"
                  f"{row['rss']:9.1f}M{BOUND_MB:6d}M{row['transcript']:11.1f}M{CAP_MB:5d}M"
                  f"  {row['outcome']}")


if __name__ == "__main__":
    main()
