"""alk's speed and memory while a worker floods it, against a bare loop reading the same pipes.

Each flood runs twice with the hostile test worker (`tests/hostile/worker.py`), alternating,
in one process: once through the real CLI (one repeat, the default sandbox), once under a bare
Python loop that does what a user without alk would: start the worker with pipes, answer its
handshake, and read stdout and stderr in 64 KiB chunks until they close, keeping nothing. For
each it prints the worker's MiB/s on both sides and their ratio (alk over bare; the target for
stderr is at least 0.5), alk's own peak RSS (VmHWM, from the result document) against the
150 MiB bound, and the transcript's size against its cap.

First, in this process, the cost of redaction, in MiB/s on 16 MiB of stderr-like text
(tracebacks, log lines, digests, progress bars, JSON, base64), whole and a line at a time as
stderr is redacted: `Redactor.redact` with no secret; four secrets looked for as redaction did
before it knew their other forms (raw, JSON-escaped and as repr, in one alternation); and
`Redactor.redact` with one and with four, each in every form (reversed, hex, base64 at each
alignment, escapes). The ratio is to the row marked (before).

With `--against SRC` (the `src` folder of another checkout of alk, such as an older commit's
`git archive`), each round also runs the flood through that alk, side by side with this one.

    python benchmarks/floods.py [--scale 1.0] [--rounds 3] [--redaction-mb 16] [--redaction-only]
                                [--against SRC]
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import random
import re
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from alk.redaction import Redactor
from alk.runner.spawn import PIPE_BYTES

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "hostile" / "worker.py"
SDK = ROOT / "src"
BOUND_MB = 150
CAP_MB = 64
TOKEN = "benchmark-token-0000"
FLOODS = (("stderr_flood", 1024, "lines on stderr"),
          ("flood_stdout_lines", 2048, "JSON lines on stdout"),
          ("endless_line", 512, "one line, no newline"))


# Four secrets of the shapes lanes declare: a token, a provider key, a password, a PEM line.
SECRETS = ("tok-" + "3f9a0c1d" * 5, "sk-proj-Zx81_kq0LmN3-vT6pQwE2rYuI9oA5sDfGhJ",
           "hunter2-Correct-Horse",
           "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj")
WORDS = ("the of and to in is for on that with as at by error warning info debug request response "
         "user session value None True False self return import from module retry timeout "
         "connection worker tool call result step agent model").split()


def stderr_like(size_mb: int) -> list[str]:
    """Lines of what frameworks write on stderr, the same every run."""
    rng = random.Random(7)

    def words(count: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(count))

    makers = [
        lambda: f'  File "/usr/lib/python3.11/site-packages/{rng.choice(WORDS)}/core.py", '
                f"line {rng.randint(1, 2000)}, in {rng.choice(WORDS)}",
        lambda: f"2025-01-{rng.randint(1, 28):02d}T12:{rng.randint(0, 59):02d}:00Z INFO "
                f"sha={rng.getrandbits(160):040x} {words(6)}",
        lambda: f"{rng.randint(0, 100)}%|{'#' * rng.randint(0, 30)}| {rng.randint(0, 999)}/999 "
                f"[00:{rng.randint(10, 59)}<00:{rng.randint(10, 59)}, {rng.random() * 99:.2f}it/s]",
        lambda: json.dumps({"event": words(5), "detail": f'said "{rng.choice(WORDS)}"'}),
        lambda: "payload=" + base64.b64encode(rng.randbytes(48)).decode(),
        *[lambda: words(rng.randint(4, 16))] * 5,
    ]
    lines, size = [], 0
    while size < size_mb * 2**20:
        lines.append(rng.choice(makers)())
        size += len(lines[-1]) + 1
    return lines


def redaction(size_mb: int, rounds: int) -> None:
    """MiB/s of each way to redact, on the whole text and a line at a time."""
    lines = stderr_like(size_mb)
    text = "\n".join(lines)
    # What redaction cost before its forms were more than the text as alk writes it: one
    # alternation of the four values raw, JSON-escaped and as repr.
    written = re.compile("|".join(re.escape(form) for value in SECRETS for form in {
        value, json.dumps(value)[1:-1], repr(value)[1:-1]}))
    ways = {"no secret": Redactor().redact,
            "4 secrets as written (before)": lambda text: written.sub("[REDACTED]", text),
            "1 secret, every form": Redactor(SECRETS[:1]).redact,
            "4 secrets, every form": Redactor(SECRETS).redact}
    print(f"{f'redaction of {size_mb} MiB of stderr':32}{'whole MiB/s':>12}{'ratio':>7}"
          f"{'by line MiB/s':>15}{'ratio':>7}")
    before: list[float] = []
    for label, redact in ways.items():
        speeds = []
        for run in (lambda: redact(text), lambda: [redact(line) for line in lines]):
            seconds = []
            for _ in range(rounds):
                began = time.perf_counter()
                run()
                seconds.append(time.perf_counter() - began)
            speeds.append(len(text) / 2**20 / statistics.median(seconds))
        before = speeds if label.endswith("(before)") else before
        ratios = [f"{now / then:7.2f}" for now, then in zip(speeds, before)] or [""] * 2
        print(f"{label:32}{speeds[0]:12.0f}{ratios[0]:>7}{speeds[1]:15.1f}{ratios[1]:>7}")
    print(f"ratio: MiB/s over that before (medians of {rounds}; the text holds no secret)\n")


def through_alk(threat: str, size_mb: int, scratch: Path, src: str | None = None) -> dict:
    folder = Path(tempfile.mkdtemp(dir=scratch))
    (folder / "lanes").mkdir()
    lane = folder / "lanes" / "flood.toml"
    lane.write_text(f'framework = "hostile"\nversion = ">=1"\n'
                    f'command = ["{{python}}", "{WORKER}", "{threat}", "{size_mb}"]\n'
                    f'required_env = ["HOSTILE_TOKEN"]\ntimeout_s = 600\n'
                    f'transcript_cap_mb = {CAP_MB}\n[[scenarios]]\nid = "flood"\ntask = "t"\n')
    env = {**os.environ, "HOSTILE_TOKEN": TOKEN, **({"PYTHONPATH": src} if src else {})}
    subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(lane), "-n", "1",
                    "--json"], cwd=folder, env=env, capture_output=True, check=False)
    [result] = (folder / "reports").glob("*/result.json")
    document = json.loads(result.read_text())
    [repeat] = document["scenarios"][0]["repeats"]
    # The repeat's own wall clock, from its spawn to its exit and the last read.
    return {"seconds": repeat["duration_s"], "rss": document["harness_peak_rss_mb"],
            "transcript": (folder / repeat["transcript"]).stat().st_size / 2**20,
            "outcome": f"{repeat['outcome']}/{repeat['cause']}"}


def bare(threat: str, size_mb: int, pipe_bytes: int | None = None) -> dict:
    """The worker under the least a reader can do: handshake, then drain both pipes (with
    `pipe_bytes`, each pipe first enlarged to it, as alk enlarges a worker's)."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(SDK), "HOSTILE_TOKEN": TOKEN}
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(WORKER), threat, str(size_mb)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    if pipe_bytes:
        for pipe in (proc.stdout, proc.stderr):
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, pipe_bytes)
    proc.stdin.write(b'{"type":"hello","protocol":1,"lane":"flood"}\n')
    proc.stdin.flush()
    proc.stdout.readline()  # framework_ready
    proc.stdin.write(b'{"type":"start","run_id":"bare","scenario":{"id":"flood","task":"t",'
                     b'"input":{}},"repeat":1,"seed":1}\n')
    proc.stdin.close()
    selector = selectors.DefaultSelector()
    for pipe in (proc.stdout, proc.stderr):
        os.set_blocking(pipe.fileno(), False)
        selector.register(pipe.fileno(), selectors.EVENT_READ)
    total, open_fds = 0, 2
    while open_fds:
        for key, _ in selector.select():
            try:
                chunk = os.read(key.fd, 64 * 1024)
            except BlockingIOError:
                continue
            if not chunk:
                selector.unregister(key.fd)
                open_fds -= 1
            total += len(chunk)
    proc.wait()
    return {"seconds": time.perf_counter() - began, "bytes": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full sizes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per flood")
    parser.add_argument("--redaction-mb", type=int, default=16,
                        help="MiB of text the redaction line redacts (0: no redaction line)")
    parser.add_argument("--redaction-only", action="store_true", help="only the redaction line")
    parser.add_argument("--against", metavar="SRC", help="also run each flood through this alk")
    args = parser.parse_args()
    if args.redaction_mb:
        redaction(args.redaction_mb, args.rounds)
    if args.redaction_only:
        return
    # Two baselines: the loop a user would write (Popen's default 64 KiB pipes), and the same
    # loop with alk's 1 MiB pipes, which alone changes how often a flooding worker blocks.
    print(f"{'flood':21}{'MiB':>5}{'bare':>6}{'same':>6}{'alk':>6}{'ratio':>6}{'same':>6}"
          f"{'RSS':>6}{'trans':>6}  cause")
    with tempfile.TemporaryDirectory(prefix="alk-floods-") as scratch:
        for threat, full_mb, label in FLOODS:
            size = max(1, int(full_mb * args.scale))
            sides: dict[str, list[dict]] = {label: []}
            if args.against:
                sides[args.against] = []
            bare_rows, same_rows = [], []
            for _ in range(args.rounds):
                bare_rows.append(bare(threat, size))
                same_rows.append(bare(threat, size, PIPE_BYTES))
                for side, rows in sides.items():
                    rows.append(through_alk(threat, size, Path(scratch), args.against
                                            if side == args.against else None))
            bare_s = statistics.median(r["seconds"] for r in bare_rows)
            same_s = statistics.median(r["seconds"] for r in same_rows)
            for side, alk_rows in sides.items():
                alk_s = statistics.median(r["seconds"] for r in alk_rows)
                last = alk_rows[-1]
                print(f"{side[-21:]:21}{size:5d}{size / bare_s:6.0f}{size / same_s:6.0f}"
                      f"{size / alk_s:6.0f}{bare_s / alk_s:6.2f}{same_s / alk_s:6.2f}"
                      f"{max(r['rss'] for r in alk_rows):5.0f}M{last['transcript']:5.0f}M"
                      f"  {last['outcome'].split('/')[1]}")
    print(f"MiB/s of the bare loop, the same loop with alk's {PIPE_BYTES >> 20} MiB pipes, and alk;"
          f"\nratio: alk's over the bare loop's, then over the same pipes' (medians of "
          f"{args.rounds});\nalk's peak RSS (bound {BOUND_MB} MiB); the transcript (cap "
          f"{CAP_MB} MiB)")


if __name__ == "__main__":
    main()
