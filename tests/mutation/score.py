"""The mutation score of the verdict path, per module, from the results `mutmut run` left in
`mutants/`: what `make mutation` prints after the run.

A mutant counts as killed when a test failed on it, or when it made the tests hang or crash.
One that no test ran ("no tests") counts as a survivor, as one that every test passed does.
Every survivor is printed with its explanation from `survivors.toml`, or as unexplained; the
exit status is 1 when a module scores below the target.
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code  # mutmut's own reading of its exit codes

TARGET = 0.90
DETECTED = frozenset({"killed", "timeout", "segfault", "caught by type check"})
EXPLAINED = Path(__file__).with_name("survivors.toml")


def scores(mutants: Path) -> dict[str, Counter[str]]:
    """Per module (`src/alk/....py`): how many of its mutants ended in each status."""
    by_module: dict[str, Counter[str]] = {}
    for meta in sorted(mutants.glob("src/**/*.py.meta")):
        results = json.loads(meta.read_text())["exit_code_by_key"]
        module = str(meta.relative_to(mutants)).removesuffix(".meta")
        by_module[module] = Counter(status_by_exit_code[code] for code in results.values())
    return by_module


def survivors(mutants: Path) -> list[tuple[str, str]]:
    """(mutant name, status) of every mutant no test detected."""
    found = []
    for meta in sorted(mutants.glob("src/**/*.py.meta")):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            status = status_by_exit_code[code]
            if status not in DETECTED:
                found.append((name, status))
    return found


def main(mutants: Path = Path("mutants")) -> int:
    if not mutants.is_dir():
        print(f"{mutants}/ does not exist: run `make mutation` (or `mutmut run`) first")
        return 2
    reasons = tomllib.loads(EXPLAINED.read_text()) if EXPLAINED.exists() else {}
    low = []
    print(f"{'module':<28} {'killed':>7} {'total':>6} {'score':>6}")
    for module, counts in scores(mutants).items():
        killed = sum(counts[status] for status in DETECTED)
        total = sum(counts.values())
        score = killed / total if total else 1.0
        low += [module] if score < TARGET else []
        print(f"{module.removeprefix('src/alk/'):<28} {killed:>7} {total:>6} {score:>6.1%}")
    left = survivors(mutants)
    unexplained = [name for name, _ in left if name not in reasons]
    print(f"\n{len(left)} survivors, {len(unexplained)} unexplained "
          f"(see one with `mutmut show NAME`):")
    for name, status in left:
        print(f"  {name} ({status}): {reasons.get(name, 'UNEXPLAINED')}")
    stale = sorted(set(reasons) - {name for name, _ in left})
    if stale:
        print(f"\n{len(stale)} explanations in {EXPLAINED.name} name no survivor any more: "
              + ", ".join(stale))
    if low:
        print(f"\nbelow the target of {TARGET:.0%}: {', '.join(low)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*map(Path, sys.argv[1:])))
