"""Test worker: reports, as its result's output (JSON), what its process can see and do, so
that a test can hold a warm start's repeat to a cold one's isolation. With `threads` in its
argv it starts a thread before start(), which a warm start must refuse; with `state` it keeps
a counter at module level, which no repeat may find moved by another."""

import ctypes
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time
import uuid

from alk import worker

COUNTER = [0]
# Used at import, as a framework may: the names must not repeat in every fork.
next(tempfile._get_candidate_names())


def status_fields():
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp"):
                fields[name] = value.strip()
    return fields


def can_unshare_user():
    libc = ctypes.CDLL(None, use_errno=True)
    child = os.fork()
    if child == 0:  # in a child: a namespace made here must not change the worker itself
        os._exit(0 if libc.unshare(0x10000000) == 0 else 1)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0


def reaches(path):
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def main():
    if "threads" in sys.argv:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    worker.hello()
    worker.ready("warm-probe", "1.0")
    start = worker.start()
    cwd = os.getcwd()
    if "late" in sys.argv:  # a module beside the program, first imported in the repeat
        import late_module  # noqa: F401
    facts = {
        "pid": os.getpid(),
        "pids": sorted(int(name) for name in os.listdir("/proc") if name.isdigit()),
        "uid": os.getuid(),
        "status": status_fields(),
        "tmp": sorted(os.listdir("/tmp")),
        "beside": sorted(os.listdir(os.path.dirname(cwd))),
        "control": reaches(os.path.join(os.path.dirname(cwd), "control")),
        "unshare": can_unshare_user(),
        "counter": COUNTER[0],
        "random": random.random(),
        "uuid": str(uuid.uuid4()),
        "tempname": next(tempfile._get_candidate_names()),
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "env": sorted(os.environ),
        "workspace": sorted(os.listdir(cwd)),
    }
    COUNTER[0] += 1
    with open(f"/tmp/left-by-{start.repeat}", "w") as left:
        left.write("x")
    with open("left-here", "w") as left:
        left.write("x")
    worker.result(output=json.dumps(facts), stop_reason="accepted",
                  end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
