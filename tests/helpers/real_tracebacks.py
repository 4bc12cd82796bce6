"""Real Python tracebacks for the tests of alk.attribution.tracebacks and alk.attribution.outcome: a
tiny framework package (`fw`) and a worker script that makes it fail in each shape a traceback
takes, run as child processes of the interpreter running the tests. Nothing here is typed by hand:
the text is what Python printed.

    programs = Programs(folder)
    crash = programs.run("multiline")           # exits with its exception
    hang = programs.interrupted("sleep")        # waits, then gets SIGINT as alk sends it
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

FRAMEWORK = '''\
import asyncio
import time


class AgentGenerationError(Exception):
    pass


def dispatch(tool):
    raise RuntimeError(f"no tool named {tool}")


def call(tool):
    return tool()


def unfinished():
    raise NotImplementedError


def generate(model):
    try:
        return model()
    except Exception as exc:
        raise AgentGenerationError(f"Error while generating output:\\n{exc}") from exc


def handle(model):
    try:
        return model()
    except Exception:
        raise ValueError("the fallback failed too")


def gather(*calls):
    errors = []
    for call in calls:
        try:
            call()
        except Exception as exc:
            errors.append(exc)
    raise ExceptionGroup("unhandled errors", [ExceptionGroup("inner", errors), KeyError("k")])


class TaskGroupError(ExceptionGroup):
    pass


# Named as a framework names a group class deep in its package: fw.agents.errors.TaskGroupError.
TaskGroupError.__module__ = "fw.agents.errors"


def gather_named(call):
    try:
        call()
    except Exception as exc:
        raise TaskGroupError("tasks failed", [exc])


def wait():
    print("waiting", flush=True)
    time.sleep(600)


def wait_in_handler():
    try:
        raise ValueError("lookup failed")
    except ValueError:
        wait()


async def wait_async():
    print("waiting", flush=True)
    await asyncio.sleep(600)


def recurse(depth, model):
    if depth:
        return recurse(depth - 1, model)
    return generate(model)
'''

WORKER = '''\
import asyncio
import sys
import traceback

from fw import agents


def model():
    raise RuntimeError("scripted model exhausted after 1 turns")


def bug():
    return {}["text"]


shape = sys.argv[1]
if shape == "one_line":
    agents.dispatch("lookup")
elif shape == "says":
    agents.dispatch(sys.argv[2])
elif shape == "bare":
    agents.unfinished()
elif shape == "multiline":
    agents.generate(model)
elif shape == "context":
    agents.handle(model)
elif shape == "group":
    agents.gather(lambda: agents.generate(model), model)
elif shape == "named_group":
    agents.gather_named(lambda: agents.generate(model))
elif shape == "twice":
    try:
        agents.handle(model)
    except ValueError:
        agents.dispatch("fallback")
elif shape == "raised_groups":
    # A group that was raised, then gathered with another into a group of its own.
    gathered = []
    try:
        agents.gather(model)
    except ExceptionGroup as exc:
        gathered.append(exc)
    raise ExceptionGroup("outer", gathered)
elif shape == "unraised_cause":
    # A group of exceptions never raised, one with a cause: no traceback header in its block.
    error = KeyError("k")
    error.__cause__ = ValueError("the cause")
    raise ExceptionGroup("gathered", [error])
elif shape == "logged_group":
    try:
        agents.gather(lambda: agents.generate(model), model)
    except Exception:
        traceback.print_exc()
    sys.exit(1)
elif shape == "worker_bug":
    agents.call(bug)
elif shape == "handled":
    try:
        agents.handle(model)
    except ValueError:
        traceback.print_exc()
    print("giving up: no fallback left", file=sys.stderr)
    sys.exit(int(sys.argv[2]))
elif shape == "table":
    raise ValueError("no row matched:\\n+-+----+\\n| 742 |\\n+-+----+")
elif shape == "nested_groups":
    group = ValueError("innermost")
    for level in range(40):
        group = ExceptionGroup(f"level {level}", [group])
    try:
        raise group
    except ExceptionGroup as exc:  # printed 50 deep, past Python's default of 10
        text = traceback.TracebackException.from_exception(exc, max_group_depth=50).format()
        sys.stderr.write("".join(text))
    sys.exit(1)
elif shape == "deep":
    agents.recurse(60, model)
elif shape == "syntax":
    import fw.broken
elif shape == "sleep":
    agents.wait()
elif shape == "sleep_in_handler":
    agents.wait_in_handler()
elif shape == "asyncio":
    asyncio.run(agents.wait_async())
'''


@dataclass(frozen=True)
class Ran:
    """What a program left: its exit status and its stderr."""

    status: int
    stderr: str


class Programs:
    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        package = self.folder / "fw"
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("")
        (package / "agents.py").write_text(FRAMEWORK)
        (package / "broken.py").write_text("def broken(:\n    pass\n")
        (self.folder / "worker.py").write_text(WORKER)
        self._ran: dict[tuple[str, ...], Ran] = {}

    @property
    def framework(self) -> str:
        """The framework's folder, as a worker names it in `package_paths`."""
        return str(self.folder / "fw")

    @property
    def worker(self) -> str:
        return str(self.folder / "worker.py")

    def line(self, text: str, file: str = "fw/agents.py") -> str:
        """`path:line` of the first line of `file` (under the folder) that contains `text`."""
        path = self.folder / file
        number = next(n for n, line in enumerate(path.read_text().splitlines(), 1)
                      if text in line)
        return f"{path}:{number}"

    def run(self, *args: str) -> Ran:
        """The program's run with these arguments (run once, then remembered)."""
        if args not in self._ran:
            done = subprocess.run([sys.executable, self.worker, *args], capture_output=True,
                                  text=True, cwd=self.folder, env=self._env(), timeout=120)
            self._ran[args] = Ran(done.returncode, done.stderr)
        return self._ran[args]

    def interrupted(self, *args: str) -> Ran:
        """The program's run, sent SIGINT once it says it is waiting, as alk's timeout does."""
        if args not in self._ran:
            # SIGINT back to its default in the child, as alk's init leaves it for a worker:
            # a suite started in the background inherits it ignored, and Python would then
            # install no KeyboardInterrupt for it.
            child = subprocess.Popen([sys.executable, self.worker, *args], cwd=self.folder,
                                     env=self._env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     preexec_fn=_default_sigint)
            try:
                assert child.stdout is not None and child.stdout.readline() == "waiting\n"
                _until_asleep(child.pid)
                child.send_signal(signal.SIGINT)
                _, stderr = child.communicate(timeout=120)
            finally:
                child.kill()
                child.wait()
            self._ran[args] = Ran(child.returncode, stderr)
        return self._ran[args]

    def _env(self) -> dict[str, str]:
        # The folder's own package first; nothing of the tests' environment changes the text.
        return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(self.folder),
                "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _until_asleep(pid: int, patience_s: float = 60.0) -> None:
    """Waits until the process sleeps in the kernel (after its "waiting", only the wait it
    means to be interrupted in blocks it), so that SIGINT finds it there, not a line before."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return
    deadline = time.monotonic() + patience_s
    # The state follows the command's closing parenthesis: S is an interruptible sleep.
    while stat.read_text().rpartition(")")[2].split()[0] != "S":
        assert time.monotonic() < deadline, f"process {pid} never went to sleep"
        time.sleep(0.001)
