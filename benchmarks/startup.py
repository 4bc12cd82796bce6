"""How long `alk` takes to start, against an empty run of the same interpreter, side by side.

Every round runs each command once, in the same order, so that drift on a shared machine lands
on all of them; each command's ratio is the median over the rounds of its time over that
round's `python -c pass`, run by alk's own interpreter (the one this script runs under: run it
with the venv's python). The commands:
`alk --help` through the console script and through `python -m alk`, then `alk causes` and
`alk lanes` (which read and render something, so they may import more). Target: `alk --help`,
both ways, within 4× `python -c pass`; the exit status is 1 when it is missed, so that the
figure can be checked.

`--imports` then shows what `alk --help` imports beyond what `python -c pass` does, from
`python -X importtime` (medians of a few runs): alk's own modules, what each import made by
alk's code costs with everything it brings in, and the modules that cost most, each with the
chain of imports that brought it in, so that what --help does not need can be named.

    python benchmarks/startup.py [--rounds 20] [--imports]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 4.0
# Runs of `python -X importtime` whose per-module medians are shown.
IMPORT_RUNS = 5


def commands() -> dict[str, tuple[tuple[str, ...], bool]]:
    """name → (argv, held to the target)."""
    python = sys.executable
    script = str(Path(python).with_name("alk"))
    return {
        "python -c pass": ((python, "-c", "pass"), False),
        "alk --help": ((script, "--help"), True),
        "python -m alk --help": ((python, "-m", "alk", "--help"), True),
        "alk causes": ((script, "causes"), False),
        "alk lanes": ((script, "lanes"), False),
    }


def timed(argv: tuple[str, ...]) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited with {done.returncode}: "
                 f"{done.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def measure(rounds: int) -> int:
    table = commands()
    script = table["alk --help"][0][0]
    if not os.access(script, os.X_OK):
        sys.exit(f"{script}: no alk console script beside this interpreter; run this with the "
                 "python of the venv alk is installed in (make bench-startup)")
    for argv, _ in table.values():  # a first run compiles bytecode and fills the page cache
        timed(argv)
    times: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(rounds):
        for name, (argv, _) in table.items():
            times[name].append(timed(argv))
    base = times["python -c pass"]
    print(f"interpreter: {sys.executable} (Python {sys.version.split()[0]})")
    print(f"{rounds} interleaved rounds; medians; target: alk --help ≤ {TARGET:.0f}× "
          "python -c pass")
    print(f"{'':24}{'median ms':>10}{'ratio':>8}    quartiles (ms)")
    missed = []
    for name, (_, held) in table.items():
        median = statistics.median(times[name])
        low, _, high = statistics.quantiles(times[name], n=4) if rounds > 1 else (median,) * 3
        ratio = statistics.median(t / b for t, b in zip(times[name], base))
        verdict = ""
        if held:
            verdict = "met" if ratio <= TARGET else "NOT met"
            if ratio > TARGET:
                missed.append(name)
        print(f"{name:24}{median * 1000:10.1f}{ratio:7.2f}×    "
              f"{low * 1000:6.1f} – {high * 1000:6.1f}  {verdict}")
    if missed:
        print(f"target missed by: {', '.join(missed)}")
    return 1 if missed else 0


# ---------------------------------------------------------------------------------------------


def import_times(argv: tuple[str, ...]) -> list[tuple[int, str, int, int]]:
    """One run's imports in the order Python reports them (children before their parent):
    (depth, module, self µs, cumulative µs)."""
    done = subprocess.run((argv[0], "-X", "importtime", *argv[1:]), cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:"):].split("|", 2)
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        rows.append((depth, name.strip(), int(self_us), int(cumulative_us)))
    return rows


def importers(rows: list[tuple[int, str, int, int]]) -> dict[str, tuple[str, ...]]:
    """Each module's chain of importers, outermost first. Python reports a module after
    everything it imported, one level less indented than they are."""
    parent: dict[str, str] = {}
    pending: dict[int, list[str]] = {}  # per depth, the modules whose importer is still to come
    for depth, name, _, _ in rows:
        for child in pending.pop(depth + 1, []):
            parent[child] = name
        pending.setdefault(depth, []).append(name)
    found = {}
    for _, module, _, _ in rows:
        chain: list[str] = []
        name = module
        while name in parent:
            name = parent[name]
            chain.insert(0, name)
        found[module] = tuple(chain)
    return found


def explain_imports(top: int = 25) -> None:
    table = commands()
    baseline = {name for _, name, _, _ in import_times(table["python -c pass"][0])}
    runs = [{name: (depth, own, whole) for depth, name, own, whole
             in import_times(table["python -m alk --help"][0])} for _ in range(IMPORT_RUNS)]
    rows = [(depth, name, 0, 0) for name, (depth, _, _) in runs[-1].items()]
    own = {name: statistics.median(run.get(name, (0, 0, 0))[1] for run in runs)
           for _, name, _, _ in rows}
    whole = {name: statistics.median(run.get(name, (0, 0, 0))[2] for run in runs)
             for _, name, _, _ in rows}
    chain_of = importers(rows)
    added = [name for _, name, _, _ in rows if name not in baseline]
    print(f"\n`python -X importtime -m alk --help`, medians of {IMPORT_RUNS} runs: "
          f"{len(added)} modules beyond those `python -c pass` imports, "
          f"{sum(own[name] for name in added) / 1000:.1f} ms")
    print("\nalk's modules imported (cumulative: with all they import first):")
    for name in added:
        if _alk(name):
            print(f"  {whole[name] / 1000:7.1f} ms  {name:24} imported by "
                  f"{' ← '.join(reversed(chain_of[name])) or 'the command'}")
    # Every module charged to the import alk's own code (or the command) made that brought it
    # in: `typer` stands for typer and all the standard library it pulls in first.
    charged: dict[str, list[str]] = {}
    for name in added:
        path = (*chain_of[name], name)
        ours = [i for i, module in enumerate(path) if _alk(module)]
        entry = path[0] if not ours else path[min(ours[-1] + 1, len(path) - 1)]
        charged.setdefault(entry, []).append(name)
    print("\nwhat each import of alk's own code (or the command's) costs, with all it brings in:")
    for entry in sorted(charged, key=lambda e: -sum(own[n] for n in charged[e])):
        cost = sum(own[name] for name in charged[entry])
        if cost >= 300:
            print(f"  {cost / 1000:7.1f} ms  {entry:24} ({len(charged[entry])} modules)")
    print(f"\nthe {top} modules costing most themselves, and the chain that imported each:")
    for name in sorted(added, key=own.__getitem__, reverse=True)[:top]:
        print(f"  {own[name] / 1000:7.2f} ms  {name:28} "
              f"{' → '.join(chain_of[name]) or '(top level)'}")


def _alk(module: str) -> bool:
    return module == "alk" or module.startswith("alk.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--imports", action="store_true",
                        help="also show what `alk --help` imports and why")
    args = parser.parse_args()
    code = measure(args.rounds)
    if args.imports:
        explain_imports()
    sys.exit(code)


if __name__ == "__main__":
    main()
