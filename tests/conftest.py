"""What every process test needs: a way to see, from the host, every process a worker started.

A worker in a PID namespace with its own /proc cannot tell the host its pids; the tests find
them instead, as the processes whose working directory is the repeat's workspace.

And what every test that makes alk write a result document needs: a check of each one against
docs/result.schema.json.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from pathlib import Path

import pytest

import alk

POLL_S = 0.01

# A test's child Python (`python -m alk`, `python -c "import alk..."`) runs the alk these tests
# imported: the checkout's, or the mutated copy `make mutation` tests, never another installed.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, (str(Path(alk.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH"))))


class ProcessWatch:
    """Collects, while it runs, the host pids of every process working inside `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = str(folder.resolve())
        self.seen: dict[int, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> ProcessWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                # A pid seen as a wrapper may since have exec'd the worker: look again.
                if not entry.name.isdigit() or (int(entry.name) in self.seen
                                                and not _wrapper(self.seen[int(entry.name)])):
                    continue
                try:
                    cwd = os.readlink(f"/proc/{entry.name}/cwd")
                    argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if cwd == self.folder or cwd.startswith(self.folder + os.sep):
                    self.seen[int(entry.name)] = [a.decode(errors="replace") for a in argv if a]
            time.sleep(POLL_S)

    def workers(self) -> list[int]:
        """The worker processes themselves: not the wrappers in front of them, nor alk's init
        (a Python started with `-I -S -c`)."""
        return [pid for pid, argv in list(self.seen.items()) if argv and not _wrapper(argv)]

    def left(self, within_s: float = 2.0) -> list[int]:
        """Pids still alive (not zombies) after `within_s`."""
        until = time.monotonic() + within_s
        while True:
            # A copy: the polling thread may still be adding what it finds.
            alive = [pid for pid in list(self.seen) if _alive(pid)]
            if not alive or time.monotonic() > until:
                return alive
            time.sleep(0.02)


def _wrapper(argv: list[str]) -> bool:
    """A wrapper alk puts in front of a worker, or alk's init (a Python run `-I -S -c`, or the
    compiled one, run through its descriptor)."""
    if not argv:
        return False
    return (Path(argv[0]).name in ("unshare", "prlimit", "setpriv", "bwrap")
            or argv[1:4] == ["-I", "-S", "-c"] or argv[0].startswith("/proc/self/fd/"))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


@pytest.fixture
def process_watch():
    if not Path("/proc/self/cwd").exists():
        pytest.skip("needs Linux /proc")
    return ProcessWatch


INITS = ("compiled", "python")


@pytest.fixture(params=INITS)
def init(request, monkeypatch):
    """Each of alk's inits in turn: the compiled one (`runner/init.c`) and the Python fallback
    (`runner/init.py`, forced by `ALK_INIT=python`), for the tests of what the init does. In
    this process it also checks that every spawn in a PID namespace ran the init it names
    (alk's children, `python -m alk`, read the same variable from the environment)."""
    from alk.runner import cinit, spawn

    if request.param == "python":
        monkeypatch.setenv(cinit.FORCE_ENV, "python")
    else:
        monkeypatch.delenv(cinit.FORCE_ENV, raising=False)
        if cinit.binary() is None:
            pytest.skip(f"no compiled init here: {cinit.why()}")
    seen: list[tuple[str, ...]] = []
    command_line = spawn.command_line

    def recorded(*args, **kwargs):
        argv = command_line(*args, **kwargs)
        seen.append(argv)
        return argv

    monkeypatch.setattr(spawn, "command_line", recorded)
    yield request.param
    for argv in seen:
        compiled = any(arg.startswith("/proc/self/fd/") for arg in argv)
        python = spawn.init_program() in argv
        if compiled or python:
            assert (compiled, python) == (request.param == "compiled",
                                          request.param == "python"), argv[:12]


@pytest.fixture(autouse=True)
def readable_tmp_path(tmp_path):
    """pytest makes tmp_path private (0700). A sandboxed worker runs as nobody when alk is root
    and must read the programs and lanes tests put there, as it reads a project's (0755)."""
    tmp_path.chmod(0o755)
    return tmp_path


# -- every result document a test makes alk write follows docs/result.schema.json ----------------

RESULT_SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "result.schema.json"
# Tests whose result documents are not alk's to answer for, and why.
NOT_ALKS_DOCUMENTS = {
    "tests/unit/result/test_document.py::test_reading_a_run_that_is_not_there_or_not_a_result":
        "writes stand-ins by hand, to test how alk reads files that are not its own",
    "tests/unit/result/test_document.py::test_the_latest_run_is_the_last_by_id_with_a_result":
        "writes stand-ins by hand, to test how alk finds the latest run",
    "tests/unit/result/test_document.py::test_the_file_is_redacted_strict_ascii_json":
        "writes a stand-in by hand, to test how alk writes any document",
    "tests/unit/result/test_document.py::test_a_hand_edited_record_is_refused_before_a_report_is_written_from_it":
        "edits a record by hand, to test that alk refuses what it could not have written",
    "tests/unit/api/test_runs.py::test_runs_are_listed_newest_first_with_their_lanes_counts_and_verdicts":
        "writes a stand-in of another schema by hand, to test that `alk runs` lists it",
}


@functools.cache
def result_validator():
    from jsonschema import Draft202012Validator

    schema = json.loads(RESULT_SCHEMA.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def result_schema_problems(document, where: str) -> list[str]:
    """Every way `document` breaks docs/result.schema.json, one line each, naming the field."""
    return [f"{where}: {error.json_path}: {error.message[:300]}"
            for error in sorted(result_validator().iter_errors(document),
                                key=lambda error: list(map(str, error.path)))]


@pytest.fixture(autouse=True)
def result_documents_follow_their_schema(request, tmp_path):
    """Checks every result.json a test made alk write: each one this process writes through
    `alk.result.store.write_document` (a run's checkpoints included) as it is written, and
    those a child `alk` left under the test's folder once the test is over. Set up before the
    test's own fixtures, so that it looks at the folder after their monkeypatches are undone."""
    from alk.result import store
    from alk.result.document import to_json

    problems: list[str] = []
    write = store.write_document

    def checked_write(path, document, redactor):
        returned = write(path, document, redactor)
        # Checked now: the test may change the document it is handed.
        problems.extend(result_schema_problems(
            json.loads(json.dumps(to_json(returned))),
            f"{path} (as written, status {returned.status!r})"))
        return returned

    store.write_document = checked_write
    try:
        yield
    finally:
        store.write_document = write
    if request.node.nodeid in NOT_ALKS_DOCUMENTS:
        return
    # A lane of a run of several lanes writes reports/RUN/LANE/result.json.
    for path in (*tmp_path.glob("reports/*/result.json"),
                 *tmp_path.glob("*/reports/*/result.json"),
                 *tmp_path.glob("reports/*/*/result.json"),
                 *tmp_path.glob("*/reports/*/*/result.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: not a readable JSON document: {exc}")
            continue
        problems += result_schema_problems(document, str(path))
    if problems:
        pytest.fail(f"{len(problems)} problem(s) with result documents against "
                    f"docs/{RESULT_SCHEMA.name} (fix what builds the document, or the schema if "
                    "the new shape is meant):\n" + "\n".join(problems[:20]), pytrace=False)
