"""Resource limits for a worker: names, safe defaults, and how each is enforced by the OS.

A lane's `[limits]` table and `alk run --limit NAME=VALUE` set them; 0 lifts one. They are
rlimits, set before the worker's program starts (by util-linux `prlimit` in front of it on
Linux, in the child before exec elsewhere) and inherited by everything it starts. Core dumps
are always off: a crashing worker would otherwise leave a `core` file as large as its memory.

Limits and where they fall short:
- `memory_mb` is RLIMIT_DATA: since Linux 4.7 it counts a process's private writable memory
  (heap, anonymous mmap) but not reserved, inaccessible ranges, so runtimes that reserve far
  more address space than they use (Node's WebAssembly, Go, the JVM) run under it, as they do
  not under RLIMIT_AS. It bounds each process alone, and neither the tmpfs it writes nor shared
  mappings (MAP_SHARED, anonymous too); where alk may make a memory cgroup (`runner.cgroup`),
  that bounds all of the worker's tree, its /tmp and /dev/shm included, and a kill on it is
  counted and attributed.
- `max_processes` (RLIMIT_NPROC) counts every process of alk's user, and does nothing for root;
  it is off unless set, and then also bounds the worker's whole tree through a pids cgroup
  where alk may make one (`runner.cgroup`).
- `disk_mb` is no rlimit (RLIMIT_FSIZE bounds one file, not the total) but alk's own measure
  of the workspace, taken as the worker runs (`runner.disk`); the disk's free space bounds a
  repeat too, with room kept for what alk still has to write.
"""

from __future__ import annotations

import functools
import resource
import shutil
import sys
from dataclasses import fields
from typing import Callable, Mapping

from alk.causes import Cause
from alk.records import Limits


NAMES = tuple(f.name for f in fields(Limits))

# name → (rlimit, prlimit option, bytes per unit)
_RLIMITS = {
    "memory_mb": (resource.RLIMIT_DATA, "--data", 1024 * 1024),
    "cpu_s": (resource.RLIMIT_CPU, "--cpu", 1),
    "max_processes": (resource.RLIMIT_NPROC, "--nproc", 1),
    "max_open_files": (resource.RLIMIT_NOFILE, "--nofile", 1),
    "max_file_mb": (resource.RLIMIT_FSIZE, "--fsize", 1024 * 1024),
}
# Limits alk enforces itself, as the worker runs: no rlimit.
MEASURED = ("disk_mb",)

# The cause a limit's breach is attributed to, and what a worker prints when it hits one.
CAUSES = {
    "memory_mb": Cause.MEMORY_LIMIT,
    "cpu_s": Cause.CPU_LIMIT,
    "max_processes": Cause.PROCESS_LIMIT,
    "max_open_files": Cause.OPEN_FILES_LIMIT,
    "max_file_mb": Cause.FILE_SIZE_LIMIT,
    "disk_mb": Cause.DISK_LIMIT,
}
SIGNS = {
    # Only the errors a failed allocation gives; "out of memory" alone is also a GPU's.
    # The dynamic loader's when a shared library (libpython, an extension) cannot be mapped;
    # Node's (V8's heap, a Buffer), Go's runtime and the JVM's when an allocation fails.
    "memory_mb": ("MemoryError", "Cannot allocate memory", "std::bad_alloc",
                  "failed to map segment from shared object", "JavaScript heap out of memory",
                  "Array buffer allocation failed", "runtime: out of memory",
                  "java.lang.OutOfMemoryError", "insufficient memory for the Java Runtime"),
    "max_processes": ("Resource temporarily unavailable",),
    "max_open_files": ("Too many open files",),
    "max_file_mb": ("File too large",),
    "disk_mb": ("No space left on device", "Disk quota exceeded"),
}


def with_overrides(base: Limits, overrides: Mapping[str, int]) -> Limits:
    """`overrides` holds validated values; 0 lifts a limit."""
    values = {name: getattr(base, name) for name in NAMES}
    for name, value in overrides.items():
        values[name] = value or None
    return Limits(**values)


def _pairs(limits: Limits) -> list[tuple[int, str, int, int]]:
    """(rlimit, prlimit option, soft, hard) for each limit in force, and no core dumps."""
    pairs = [(resource.RLIMIT_CORE, "--core", 0, 0)]
    for name, value in limits.applied().items():
        if name in MEASURED:
            continue
        rlimit, option, unit = _RLIMITS[name]
        # CPU: soft then hard one second later, so the worker gets SIGXCPU (a cause alk can
        # name) before the SIGKILL the kernel sends at the hard limit.
        soft, hard = value * unit, (value + 1 if name == "cpu_s" else value) * unit
        # Only root may raise a hard limit: never ask for more than alk's own.
        ceiling = resource.getrlimit(rlimit)[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        pairs.append((rlimit, option, soft, hard))
    return pairs


@functools.lru_cache(maxsize=16)
def prlimit_prefix(limits: Limits) -> tuple[str, ...] | None:
    """argv that starts a program under these limits, or None where `prlimit` is missing."""
    prlimit = shutil.which("prlimit") if sys.platform.startswith("linux") else None
    if prlimit is None:
        return None
    return (prlimit, *(f"{option}={soft}:{hard}" for _, option, soft, hard in _pairs(limits)),
            "--")


def rlimit_pairs(limits: Limits) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) for each limit set through rlimits: what a warm start's repeat
    sets in itself before its scenario runs (alk.worker_fork)."""
    return [(rlimit, soft, hard) for rlimit, _, soft, hard in _pairs(limits)]


def setter(limits: Limits) -> Callable[[], None]:
    """A function for `preexec_fn` that sets these limits in the child before exec."""
    pairs = rlimit_pairs(limits)

    def set_limits() -> None:
        for rlimit, soft, hard in pairs:
            resource.setrlimit(rlimit, (soft, hard))

    return set_limits
