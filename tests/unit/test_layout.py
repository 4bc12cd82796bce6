"""The layout of `src/alk/`, kept as the data flows by an AST walk of its imports.

The house has floors, top to bottom (`FLOORS`): the front doors (the entry point, the CLI, the
API), then what runs a plan, what judges and reports, the stages it drives, the stored run, the
statistics, the gateway and the transcripts, and a shared bottom that imports only itself. A
package imports only what lies on a floor below its own (and itself): an import that climbs is
one a newcomer would not look for. Besides: no import cycle (counting imports inside functions
and under TYPE_CHECKING, which only hide one), reports and the stored run never reach into
execution, only the runner starts processes, no module is over MAX_LINES, every `alk.x.y` a
docstring names exists, and the API is the list below. The checks are tried on small trees of
their own too, so that each is seen to fail when its rule is broken.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

BOTTOM = ("", "records", "served_model", "served_tools", "cost", "errors", "causes", "estimate", "layout",
          "limits", "redaction", "untrusted_json", "files", "cleanup", "worker", "worker_fork",
          "_help")
FLOORS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("launch",),
    ("cli",),
    ("api",),
    ("execute", "conformance"),  # runs a plan; checks a worker's run
    ("attribution", "rerun", "report"),  # judges a repeat; plans a rerun; renders a run
    ("compare", "plan", "lane", "runner"),
    ("result",),  # the run as kept on disk
    ("stats", "gateway", "transcript"),
    BOTTOM,
)
# What neither a report nor the stored run nor its statistics may reach into: they read what a
# run left, never what runs one.
EXECUTION = ("execute", "runner", "gateway")
REPORT_MAY_NOT = (*EXECUTION, "lane", "plan", "rerun")
# Modules that start or drive processes: only the runner imports them.
PROCESS_MODULES = ("subprocess", "selectors", "pty", "multiprocessing")
PROCESS_CALLS = re.compile(r"^(fork|forkpty|exec\w*|spawn\w*|posix_spawn\w*)$")
MAX_LINES = 420
# `alk.x` names in docstrings that are not modules: junit.xml's property names.
NOT_MODULES = {"alk.run_id", "alk.version", "alk.status", "alk.rule", "alk.rerun_of"}
API = ["RunResult", "RunsResult", "RunOptions", "RunSetup", "Adaptive", "PassRule",
       "engine_for", "load_lane", "load_lanes", "list_lanes", "lane_warnings", "run_lane",
       "run_lanes", "resume_run", "resume", "rerun", "RerunResult", "check_worker", "read_run",
       "read_runs", "runs_json", "list_runs", "RunEntry", "write_reports", "compare_runs",
       "regression_gate", "write_compare_page", "repeat_entry", "read_repeat_events",
       "read_repeat_page", "transcript_intact", "doctor", "compare_until_decided", "extend_run",
       "export_otlp", "ExportTally"]


# -- the walk ------------------------------------------------------------------------------------


def modules(src: Path, package: str = "alk") -> dict[str, Path]:
    """Every module of `package` under `src`, by dotted name (a package by its own)."""
    found = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(path: Path, known: Mapping[str, Path]) -> list[tuple[str, int, str]]:
    """What a module imports of `known`: (module, line, where), where is "top", "function" or
    "type_checking". `from a import b` is module a.b when there is one, else a."""
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.Import):
            found.extend((target, node.lineno, where) for alias in node.names
                         if (target := _nearest(alias.name, known)))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.extend((target, node.lineno, where) for alias in node.names
                         if (target := _nearest(f"{node.module}.{alias.name}", known)))
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, "type_checking")
            for child in node.orelse:
                visit(child, where)
            return
        if where == "top" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.Lambda)):
            where = "function"
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(ast.parse(path.read_text(encoding="utf-8")), "top")
    return found


def _nearest(dotted: str, known: Mapping[str, Path]) -> str | None:
    while dotted and dotted not in known:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def graph(src: Path, package: str = "alk") -> dict[str, list[tuple[str, int, str]]]:
    known = modules(src, package)
    return {name: [(target, line, where) for target, line, where in imports(path, known)
                   if target != name]
            for name, path in known.items()}


def room(module: str, package: str = "alk") -> str:
    """The top-level module or package a module belongs to ("" for the package itself)."""
    return module.removeprefix(package).lstrip(".").partition(".")[0]


def cycles(edges: Mapping[str, Iterable[tuple[str, int, str]]]) -> list[list[str]]:
    """The modules that import one another round a circle (Tarjan's strongly connected
    components of more than one module), each circle sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target, _, _ in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def climbs(edges: Mapping[str, Iterable[tuple[str, int, str]]],
           floors: tuple[tuple[str, ...], ...], package: str = "alk") -> list[str]:
    """Each import of a room on its own floor or a floor above (TYPE_CHECKING imports aside:
    they shape no import order); the bottom floor's rooms may import one another."""
    floor_of = {name: number for number, rooms in enumerate(floors) for name in rooms}
    last = len(floors) - 1
    found = []
    for module, targets in edges.items():
        here = room(module, package)
        for target, line, where in targets:
            there = room(target, package)
            if where == "type_checking" or there == here:
                continue
            if here not in floor_of or there not in floor_of:
                found.append(f"{module} or {target}: on no floor of FLOORS: add it to one")
                continue
            if floor_of[there] < floor_of[here] or (
                    floor_of[there] == floor_of[here] and floor_of[here] != last):
                found.append(f"{module}:{line} (floor {floor_of[here]}) imports {target} "
                             f"(floor {floor_of[there]})")
    return found


def reaching(edges: Mapping[str, Iterable[tuple[str, int, str]]], rooms: Iterable[str],
             forbidden: Iterable[str], package: str = "alk") -> list[str]:
    forbidden = set(forbidden)
    return [f"{module}:{line} imports {target}" for module, targets in edges.items()
            if room(module, package) in rooms
            for target, line, _ in targets if room(target, package) in forbidden]


def oversized(src: Path, package: str = "alk", limit: int = MAX_LINES) -> list[str]:
    return [f"{name}: {count} lines" for name, path in modules(src, package).items()
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > limit]


def docstring_names(src: Path, package: str = "alk") -> list[tuple[str, str]]:
    """(module, `alk.x.y`) for every backticked dotted name in a docstring."""
    found = []
    for name, path in modules(src, package).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                text = ast.get_docstring(node) or ""
                found += [(name, dotted) for dotted in
                          re.findall(rf"`({package}(?:\.\w+)+)`", text)]
    return found


def unresolved(src: Path, names: Iterable[tuple[str, str]]) -> list[str]:
    """The dotted names that name no module, and no name or class attribute of one."""
    known = modules(src)
    tops: dict[str, dict[str, ast.AST | None]] = {}

    def names_of(module: str) -> dict[str, ast.AST | None]:
        if module not in tops:
            bound: dict[str, ast.AST | None] = {}
            for node in ast.parse(known[module].read_text(encoding="utf-8")).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bound[node.name] = node
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    for target in (node.targets if isinstance(node, ast.Assign)
                                   else [node.target]):
                        for sub in ast.walk(target):
                            if isinstance(sub, ast.Name):
                                bound[sub.id] = None
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        bound[(alias.asname or alias.name).partition(".")[0]] = None
            tops[module] = bound
        return tops[module]

    bad = []
    for where, dotted in names:
        if dotted in NOT_MODULES:
            continue
        module = _nearest(dotted, known)
        rest = dotted[len(module) + 1:].split(".") if module and module != dotted else []
        if module is None:
            bad.append(f"{where}: `{dotted}`")
            continue
        if not rest:
            continue
        bound = names_of(module)
        if rest[0] not in bound or len(rest) > 2:
            bad.append(f"{where}: `{dotted}`")
            continue
        node = bound[rest[0]]
        if len(rest) == 2 and not (isinstance(node, ast.ClassDef) and any(
                getattr(item, "name", None) == rest[1] or rest[1] in {
                    sub.id for sub in ast.walk(item) if isinstance(sub, ast.Name)}
                for item in node.body)):
            bad.append(f"{where}: `{dotted}`")
    return bad


def process_starters(src: Path, package: str = "alk") -> list[str]:
    found = []
    for name, path in modules(src, package).items():
        # The SDK's warm start forks in the worker's own process, never in alk's.
        if room(name, package) == "runner" or name == f"{package}.worker_fork":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [f"{name}:{node.lineno} imports {alias.name}" for alias in node.names
                          if alias.name.partition(".")[0] in PROCESS_MODULES]
            elif isinstance(node, ast.ImportFrom) and node.module and (
                    node.module.partition(".")[0] in PROCESS_MODULES):
                found.append(f"{name}:{node.lineno} imports from {node.module}")
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id == "os" and PROCESS_CALLS.match(node.attr)):
                found.append(f"{name}:{node.lineno} calls os.{node.attr}")
    return found


# -- alk's own tree ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def edges() -> dict[str, list[tuple[str, int, str]]]:
    return graph(SRC)


def test_no_modules_import_each_other_round_a_circle(edges):
    assert cycles(edges) == []


def test_every_package_imports_only_the_floors_below_its_own(edges):
    assert climbs(edges, FLOORS) == []


def test_every_module_is_on_a_floor():
    rooms = {room(name) for name in modules(SRC)}
    floored = {name for floor in FLOORS for name in floor}
    assert rooms == floored, f"on no floor: {rooms - floored}; gone: {floored - rooms}"


def test_reports_and_the_stored_run_never_reach_into_execution(edges):
    assert reaching(edges, ("result", "stats"), EXECUTION) == []
    assert reaching(edges, ("report",), REPORT_MAY_NOT) == []


def test_only_the_entry_point_imports_the_cli_and_only_the_cli_the_api(edges):
    assert [f"{m} imports {t}" for m, targets in edges.items() for t, _, _ in targets
            if room(t) == "cli" and room(m) not in ("cli", "launch")] == []
    assert [f"{m} imports {t}" for m, targets in edges.items() for t, _, _ in targets
            if room(t) == "api" and room(m) not in ("api", "cli")] == []


def test_only_the_cli_imports_typer():
    assert [name for name, path in modules(SRC).items() if room(name) != "cli"
            and re.search(r"^\s*(import typer|from typer)", path.read_text(encoding="utf-8"),
                          re.MULTILINE)] == []


def test_no_module_is_over_the_size_a_newcomer_reads_at_once():
    assert oversized(SRC) == []


def test_every_alk_name_a_docstring_gives_exists():
    names = docstring_names(SRC)
    assert len(names) > 50  # the walk reads the docstrings at all
    assert unresolved(SRC, names) == []


def test_every_alk_name_the_docs_give_exists():
    """What README.md and docs/ name (`alk.x.y`, and `from alk.x import y` in their examples)."""
    names = []
    for path in [SRC.parent / "README.md", *sorted((SRC.parent / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(SRC.parent))
        names += [(where, dotted) for dotted in re.findall(r"`(alk(?:\.\w+)+)`", text)]
        names += [(where, f"{module}.{name.strip()}")
                  for module, imported in re.findall(r"^from (alk(?:\.\w+)*) import ([\w, ]+)$",
                                                     text, re.MULTILINE)
                  for name in imported.split(",")]
    assert len(names) > 5  # the docs name some at all
    assert unresolved(SRC, names) == []


def test_only_the_runner_starts_processes():
    assert process_starters(SRC) == []


def test_the_api_is_the_list_it_promises():
    from alk import api

    assert api.__all__ == API, "the API changed: say so where it is documented, then here"
    assert all(hasattr(api, name) for name in API)


# -- each check, seen to fail --------------------------------------------------------------------


def tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / "src" / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "src"


def test_a_circle_is_found_however_it_is_hidden(tmp_path):
    src = tree(tmp_path, {"__init__.py": "", "a.py": "from pkg import b\n",
                          "b.py": "def f():\n    from pkg.c import x\n",
                          "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from pkg.a import y\n", "d.py": "import pkg.a\n"})
    assert cycles(graph(src, "pkg")) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_an_import_that_climbs_is_found(tmp_path):
    src = tree(tmp_path, {"__init__.py": "", "top.py": "from pkg import low\n",
                          "low.py": "from pkg.mid.x import y\n", "mid/__init__.py": "",
                          "mid/x.py": "from pkg import top\ny = 1\n"})
    floors = (("top",), ("mid",), ("low", ""))
    found = climbs(graph(src, "pkg"), floors, "pkg")
    assert found == ["pkg.low:1 (floor 2) imports pkg.mid.x (floor 1)",
                     "pkg.mid.x:1 (floor 1) imports pkg.top (floor 0)"]
    assert reaching(graph(src, "pkg"), ("low",), ("mid",), "pkg") == [
        "pkg.low:1 imports pkg.mid.x"]


def test_a_module_over_the_limit_is_found(tmp_path):
    src = tree(tmp_path, {"__init__.py": "", "big.py": "x = 1\n" * 421, "ok.py": "x = 1\n" * 420})
    assert oversized(src, "pkg") == ["pkg.big: 421 lines"]


def test_a_docstring_that_names_what_is_not_there_is_found():
    names = [("here", "alk.records.RepeatResult"), ("here", "alk.records.RepeatResult.void"),
             ("here", "alk.stats"), ("here", "alk.gateway.faults"), ("here", "alk.nowhere"),
             ("here", "alk.records.NoSuchRecord"), ("here", "alk.records.RepeatResult.nothing")]
    assert unresolved(SRC, names) == ["here: `alk.nowhere`", "here: `alk.records.NoSuchRecord`",
                                      "here: `alk.records.RepeatResult.nothing`"]


def test_a_module_that_starts_processes_outside_the_runner_is_found(tmp_path):
    src = tree(tmp_path, {"__init__.py": "", "runner/__init__.py": "import subprocess\n",
                          "lane.py": "import os\nos.execv('x', [])\n",
                          "plan.py": "from subprocess import run\n"})
    assert process_starters(src, "pkg") == ["pkg.lane:2 calls os.execv",
                                            "pkg.plan:1 imports from subprocess"]
