"""What this machine gives a worker, for `alk doctor`: the containment, the isolation of its
network and file system, its user, the syscall filter, its /tmp, how `memory_mb` and
`max_processes` hold, its environment, and how it reaches alk's model gateway, each with why.
"""

from __future__ import annotations

import os
import platform

from alk import installed_version
from alk.runner import cinit
from alk.runner.cgroup import memory_parent, unified
from alk.runner.cgroup import parent as cgroup_parent
from alk.runner.isolation import Filesystem, Network, detect
from alk.runner.sandbox import worker_uid
from alk.runner.seccomp import BLOCKED as seccomp_blocked
from alk.runner.seccomp import program as seccomp_program
from alk.runner.seccomp import unavailable_reason as seccomp_unavailable


def doctor() -> list[tuple[str, str, str]]:
    """What this machine gives a worker: (name, value, why) rows for `alk doctor`."""
    isolation = detect()
    sandbox = Filesystem.SANDBOX in isolation.filesystems
    uid = os.getuid() if hasattr(os, "getuid") else None
    nobody = worker_uid()
    filters = seccomp_program() is not None
    return [
        ("alk", installed_version(),
         f"Python {platform.python_version()} on {platform.system()} {platform.release()}"),
        ("containment", isolation.containment.value, isolation.reason),
        ("kill on exit", "every process of the namespace" if isolation.unshare
         else "the worker's process group", "what ends when a worker exits or times out"),
        ("PID 1", (f"alk's init, {'Python' if cinit.binary() is None else 'compiled'}"
                   if isolation.unshare else "none"),
         "the worker is its child: signals act as anywhere, its real exit status is reported; "
         f"{cinit.why()}" if isolation.unshare else "no PID namespace: the worker is alk's child"),
        ("network", " or ".join(n.value for n in isolation.networks),
         f"{isolation.network_reason}; the first is the default of a lane that does not say"),
        ("filesystem", " or ".join(f.value for f in isolation.filesystems),
         f"{isolation.filesystem_reason}; the first is the default of a lane that does not say"),
        ("it can read", "what it needs" if sandbox else "all alk's user can",
         "in the sandbox: /usr, a few /etc files, /sys, its interpreter and packages, the "
         "lane's folder and program, the SDK; not /root, /home, /var, /srv, /run, alk's "
         "transcripts and reports" if sandbox else "no sandbox here"),
        ("worker user", "nobody (uid 65534)" if sandbox and nobody is not None
         else ("root" if uid == 0 else f"uid {uid}"),
         "in the sandbox, so that root-only files stay unreadable even where bound"
         if sandbox and nobody is not None else "workers run as alk's own user"),
        ("syscall filter", "seccomp" if sandbox and filters else "none",
         "keyrings, namespaces, mounts, io_uring and the rest of Docker's list fail with "
         f"EPERM ({len(seccomp_blocked)} calls): no key outlives a repeat"
         if sandbox and filters else (seccomp_unavailable() or "no sandbox here")
         + "; a key a worker adds to a kernel keyring outlives its repeat"),
        ("/tmp, /dev/shm", "private, sized" if sandbox else "the host's",
         "each half of memory_mb" + (": what they hold counts in the worker's memory cgroup"
                                     if memory_parent() is not None else "")
         if sandbox else "no sandbox here"),
        _memory_row(),
        ("max_processes", "pids cgroup" if cgroup_parent("pids") else "RLIMIT_NPROC only",
         "bounds the worker's whole tree" if cgroup_parent("pids") else
         "no writable pids cgroup: the limit counts the user's processes, and not root's"),
        ("environment", "scrubbed", "PATH, LANG, LC_ALL, TZ and the lane's required_env only"),
        ("model gateway", "reachable offline" if Network.NONE in isolation.networks and
         isolation.unshare else "host network only",
         "a lane's [model] is served by alk; with network none, alk's init makes its "
         "listener inside the worker's namespace: the worker reaches it and nothing else"
         if Network.NONE in isolation.networks and isolation.unshare else
         "no network namespace here: the gateway listens on alk's own loopback"),
    ]


def _memory_row() -> tuple[str, str, str]:
    if memory_parent() is not None:
        return ("memory_mb", f"memory cgroup v{2 if unified() else 1} + RLIMIT_DATA",
                "the cgroup bounds the worker's whole tree, its /tmp and /dev/shm counted, and "
                "its kills are counted; RLIMIT_DATA bounds each process's own heap and "
                "mappings, not the address space it only reserves")
    return ("memory_mb", "RLIMIT_DATA per process only",
            "no writable memory cgroup: each process's heap and mappings are bounded alone; "
            "a worker's children and its /tmp and /dev/shm are not counted together")
