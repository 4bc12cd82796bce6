"""Which init a PID namespace gets: the compiled one (`runner/init.c`) where a C compiler built
it, else the Python one (`runner/init.py`); both do the same, the compiled one without an
interpreter's start (10–13 ms a repeat).

The binary is built the first time a worker needs it (or by `python -m alk.runner.cinit`, which
`make` runs at install), and kept under a name keyed by the hash of its source and the machine:
first next to its source (`__pycache__`, as Python keeps bytecode), else in the user's cache
folder (`$XDG_CACHE_HOME/alk`, `~/.cache/alk`), else in a private temporary folder for this
process. A wheel, an editable install and a fresh clone alike need only the C file; a change to
it builds again. Each spawn runs it through a descriptor alk opens and passes (argv[0] is
`/proc/self/fd/N`), so the sandbox need show no file of alk's, wherever it is installed.

`ALK_INIT=python` runs the Python init even where the compiled one builds (the tests run both).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

SOURCE = Path(__file__).with_name("init.c")
FORCE_ENV = "ALK_INIT"
# Static first: no dynamic loader at each start (libc.a may be missing: then dynamic).
FLAGS = (("-O2", "-static"), ("-O2",))
COMPILERS = ("cc", "gcc", "clang")
BUILD_TIMEOUT_S = 60
_lock = threading.Lock()
_built: tuple[str | None, str] | None = None


def forced_python() -> bool:
    return os.environ.get(FORCE_ENV, "").strip().lower() == "python"


def binary() -> str | None:
    """The compiled init's path, built if it must be; None where it cannot be (see `why`)."""
    return None if forced_python() else _build()[0]


def why() -> str:
    """Which init runs here and why, for `alk doctor`."""
    if forced_python():
        return f"runner/init.py, as {FORCE_ENV}=python asks"
    path, reason = _build()
    return (f"runner/init.c, compiled: {path}" if path else
            f"runner/init.py ({reason}): an interpreter's start, 10-13 ms, more a repeat")


def open_binary() -> int | None:
    """A descriptor of the compiled init for one spawn (close-on-exec: the spawn passes it),
    or None: the Python init runs."""
    path = binary()
    if path is None:
        return None
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _build() -> tuple[str | None, str]:
    global _built
    with _lock:
        if _built is None:
            _built = _find_or_build()
        return _built


def _find_or_build() -> tuple[str | None, str]:
    try:
        source = SOURCE.read_bytes()
    except OSError as exc:
        return None, f"no {SOURCE.name} ({exc.strerror})"
    key = hashlib.sha256(source + platform.machine().encode()).hexdigest()[:16]
    name = f"alk-init-{key}"
    folders = [SOURCE.parent / "__pycache__", _user_cache()]
    for folder in filter(None, folders):
        path = folder / name
        if path.is_file() and _works(path):
            return str(path), ""
    cc = _compiler()
    if cc is None:
        return None, f"no C compiler found ($CC, {', '.join(COMPILERS)})"
    problem = "no folder to build it in"
    for folder in [*filter(None, folders), None]:
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="alk-init-"))
            atexit.register(shutil.rmtree, folder, True)
        path, problem = _compile(cc, folder, name)
        if path is not None:
            return str(path), f"built with {cc}"
    return None, problem


def _compile(cc: str, folder: Path, name: str) -> tuple[Path | None, str]:
    """Builds into `folder` (a file of its own, then renamed: builds at once do not clash)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, part = tempfile.mkstemp(prefix=f".{name}-", dir=folder)
        os.close(fd)
    except OSError as exc:
        return None, f"cannot write {folder} ({exc.strerror})"
    problem = ""
    try:
        for flags in FLAGS:
            try:
                done = subprocess.run([cc, *flags, "-o", part, str(SOURCE)], capture_output=True,
                                      text=True, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return None, f"{cc} failed: {exc}"
            if done.returncode == 0 and _works(Path(part)):
                os.chmod(part, 0o755)
                os.replace(part, folder / name)
                return folder / name, ""
            problem = f"{cc} {' '.join(flags)} failed: {(done.stderr or '').strip()[-300:]}"
        return None, problem
    finally:
        if os.path.exists(part):
            os.unlink(part)


def _works(path: Path) -> bool:
    """Runs it as a spawn will, through a descriptor, with no arguments: it must say how it is
    used and exit 2 (a folder mounted noexec, another machine's binary: no)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        done = subprocess.run([f"/proc/self/fd/{fd}"], pass_fds=(fd,), capture_output=True,
                              timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
        return done.returncode == 2 and done.stderr.startswith(b"alk init: usage")
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        os.close(fd)


def _compiler() -> str | None:
    named = os.environ.get("CC", "").split()
    for candidate in (named[:1] or COMPILERS):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def _user_cache() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.path.join(os.path.expanduser("~"), ".cache") if os.path.expanduser("~") != "~"
        else None)
    return Path(base) / "alk" if base else None


if __name__ == "__main__":
    print(f"alk's init: {why()}")
