"""The mutation score of the verdict path, per module, from the results `mutmut run` left in
`mutants/`: what `make mutation` prints after the run.

A mutant counts as killed when a test failed on it, or when it made the tests hang or crash.
One that no test ran ("no tests") counts as a survivor, as one that every test passed does.
Every survivor is printed with its explanation from `survivors.toml`. The exit status is 1 when
a module scores below the target, when a module of `[tool.mutmut] only_mutate` has no results,
or when a survivor is unexplained. An explanation that names no survivor is reported, not
failed: a test that fails by chance under load can kill an equivalent mutant in one run.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from mutmut.stats import status_by_exit_code  # mutmut's own reading of its exit codes

TARGET = 0.90
DETECTED = frozenset({"killed", "timeout", "segfault", "caught by type check"})
EXPLAINED = Path(__file__).with_name("survivors.toml")


def results(mutants: Path) -> dict[str, dict[str, str]]:
    """Per module (`src/alk/....py`): each mutant's name and status."""
    return {
        str(meta.relative_to(mutants)).removesuffix(".meta"): {
            name: status_by_exit_code[code]
            for name, code in json.loads(meta.read_text())["exit_code_by_key"].items()}
        for meta in sorted(mutants.glob("src/**/*.py.meta"))}


def main(mutants: Path = Path("mutants"), project: Path = Path("pyproject.toml")) -> int:
    if not mutants.is_dir():
        print(f"{mutants}/ does not exist: run `make mutation` (or `mutmut run`) first")
        return 2
    expected = tomllib.loads(project.read_text())["tool"]["mutmut"]["only_mutate"]
    reasons = tomllib.loads(EXPLAINED.read_text())
    by_module = results(mutants)
    problems = [f"no results for {module}" for module in expected if module not in by_module]
    print(f"{'module':<28} {'killed':>7} {'total':>6} {'score':>6}")
    survivors: dict[str, str] = {}
    for module, statuses in by_module.items():
        killed = sum(status in DETECTED for status in statuses.values())
        score = killed / len(statuses) if statuses else 1.0
        if score < TARGET:
            problems.append(f"{module} scores below the target of {TARGET:.0%}")
        print(f"{module.removeprefix('src/alk/'):<28} {killed:>7} {len(statuses):>6} "
              f"{score:>6.1%}")
        survivors.update((name, status) for name, status in statuses.items()
                         if status not in DETECTED)
    print(f"\n{len(survivors)} survivors (see one with `mutmut show NAME`):")
    for name, status in survivors.items():
        print(f"  {name} ({status}): {reasons.get(name, 'UNEXPLAINED')}")
    unexplained = [name for name in survivors if name not in reasons]
    if unexplained:
        problems.append(f"{len(unexplained)} survivors have no explanation in {EXPLAINED.name}: "
                        "kill them with a test, or say there why they live")
    stale = sorted(set(reasons) - set(survivors))
    if stale:
        print(f"\nexplanations in {EXPLAINED.name} that name no survivor in this run (remove "
              f"them if a test now kills them; retry one with `mutmut run NAME`): "
              f"{', '.join(stale)}")
    for problem in problems:
        print(f"\n{problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*map(Path, sys.argv[1:])))
