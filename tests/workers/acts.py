"""Test worker with one misbehaviour per act, chosen by argv: `acts.py ACT [ARG]`.

Acts that happen before the handshake cannot read the start message, so the act is in argv,
not in the scenario input.
"""

import json
import os
import signal
import subprocess
import sys
import time

from alk import worker

ACT = sys.argv[1]
ARG = sys.argv[2] if len(sys.argv) > 2 else ""


def wait_for(path):
    while not os.path.exists(path) or not open(path).read():
        time.sleep(0.01)
    return int(open(path).read())


def finish(output="done"):
    worker.result(output=output, stop_reason="accepted", end_state={"phase": "stopped"})


def main():
    if ACT == "exit_before_ready":
        sys.stderr.write("ImportError: No module named 'missing_framework'\n")
        sys.exit(3)
    if ACT == "void_every_other":
        # Counts its own starts in a file named by ARG: every other start never gets ready.
        count = int(open(ARG).read()) if os.path.exists(ARG) else 0
        with open(ARG, "w") as counter:
            counter.write(str(count + 1))
        if count % 2:
            sys.exit(3)
    if ACT == "no_wait":
        # Ready, a tool call and a result in one write, without waiting for start.
        worker.hello()
        lines = [{"channel": "framework", "type": "framework_ready",
                  "payload": {"framework": "acts", "framework_version": "1.0"}},
                 {"channel": "tool", "type": "call", "payload": {"name": "x", "args": {}}},
                 {"channel": "agent", "type": "result",
                  "payload": {"output": "done", "stop_reason": "accepted", "end_state": {}}}]
        out = worker._worker()._writer
        out.write("".join(json.dumps(line) + "\n" for line in lines))
        out.flush()
        sys.exit(0)
    if ACT == "silent_before_ready":
        time.sleep(60)
    worker.hello()
    worker.ready("acts", "1.0")
    start = worker.start()

    if ACT == "grandchild_holds_stdout":
        # A grandchild in the worker's process group inherits stdout and outlives the worker.
        protocol_fd = worker._worker()._writer.fileno()
        subprocess.Popen([sys.executable, "-c", "import os, time; open('child.pid', 'w')"
                          ".write(str(os.getpid())); time.sleep(60)"],
                         pass_fds=(protocol_fd,))
        worker.emit("agent", "child", {"pid": wait_for("child.pid")})
        time.sleep(0.3)  # long enough for a test polling /proc to see both processes
        finish()
        os._exit(0)
    elif ACT == "ignores_signals":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        worker.emit("agent", "pid", {"pid": os.getpid()})
        time.sleep(60)
    elif ACT == "stdout_no_newline":
        # One endless line straight to the protocol descriptor, in chunks.
        out = worker._worker()._writer
        chunk = "x" * (1024 * 1024)
        for _ in range(int(ARG)):
            out.write(chunk)
        out.flush()
        out.write("\n")
        finish()
    elif ACT == "bad_lines":
        # ARG lines that are not JSON, the secret on the last, then a result.
        out = worker._worker()._writer
        count = int(ARG)
        out.write("not json\n" * (count - 1) + "not json " + os.environ["LEAKED"] + "\n")
        out.flush()
        finish()
    elif ACT == "stderr_lines":
        line = ("e" * 1023 + "\n") * 1024
        for _ in range(int(ARG)):
            sys.stderr.write(line)
        finish()
    elif ACT == "env":
        worker.emit("agent", "env", {"env": dict(os.environ), "cwd": os.getcwd()})
        finish()
    elif ACT == "stdin_after_start":
        worker.emit("agent", "stdin", {"rest": sys.stdin.read()})
        finish()
    elif ACT == "leak_secret":
        # The secret straddles every cut alk makes: the 200-character excerpt of a bad line,
        # the start of the stderr tail, and the last stderr line quoted in a detail.
        secret = os.environ["LEAKED"]
        if ARG == "multibyte":
            # Few characters, many bytes: the tail is cut in bytes before it is in characters.
            sys.stderr.write(secret + "é" * 2100 + "\n")
            sys.exit(1)
        out = worker._worker()._writer
        out.write("y" * 190 + secret + "\n")
        out.flush()
        sys.stderr.write(secret + "z" * (4096 - len(secret) // 2) + "\n")
        sys.stderr.write("w" * 290 + secret + "\n")
        sys.exit(1)
    elif ACT == "escape":
        # Double fork and setsid(): the grandchild leaves the worker's process group and
        # session, and keeps writing to stderr long after the worker is gone.
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open("escaped.pid", "w").write(str(os.getpid()))
                for _ in range(600):
                    sys.stderr.write("still here\n")
                    sys.stderr.flush()
                    time.sleep(0.1)
                os._exit(0)
            os._exit(0)
        worker.emit("agent", "escaped", {"pid": wait_for("escaped.pid")})
        time.sleep(0.3)  # long enough for a test polling /proc to see both processes
        finish()
    elif ACT == "segfault":
        # A real fault, as native framework code would crash: the kernel's SIGSEGV ends even a
        # PID-namespace init (a signal the worker sends itself would not).
        import ctypes

        ctypes.string_at(0)
    elif ACT == "exit_code":
        finish()
        sys.stdout.flush()
        os._exit(int(ARG))  # 139 is what a death by SIGSEGV looks like behind bwrap alone
    elif ACT == "eat_memory":
        block = bytearray(int(ARG) * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        finish(str(len(block)))
    elif ACT == "eat_in_chunks":
        # ARG MiB in 16 MiB pieces, each page touched: resident, not only reserved.
        held = []
        for _ in range(int(ARG) // 16):
            piece = bytearray(16 * 1024 * 1024)
            for i in range(0, len(piece), 4096):
                piece[i] = 1
            held.append(piece)
        finish(str(len(held)))
    elif ACT == "children_eat":
        # Four children hold ARG MiB each at once: each under its own limit, not all together.
        code = (f"import sys, time; b = bytearray({int(ARG)} << 20); "
                "[b.__setitem__(i, 1) for i in range(0, len(b), 4096)]; "
                "sys.stdout.write('x'); sys.stdout.flush(); time.sleep(1)")
        kids = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
                for _ in range(4)]
        codes = [kid.wait() for kid in kids]
        if any(codes):
            raise RuntimeError(f"a child failed: {codes}")
        finish()
    elif ACT == "eat_shared":
        # ARG MiB mapped shared and anonymous: shmem, which RLIMIT_DATA does not count.
        import mmap

        block = mmap.mmap(-1, int(ARG) * 1024 * 1024, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        for i in range(0, len(block), 4096):
            block[i] = 1
        finish()
    elif ACT == "fill_tmpfs":
        # ARG MiB into each of /tmp and /dev/shm (memory, not disk), then ARG MiB of heap.
        for folder in ("/tmp", "/dev/shm"):
            with open(f"{folder}/fill", "wb") as out:
                for _ in range(int(ARG)):
                    out.write(b"x" * (1024 * 1024))
        block = bytearray(int(ARG) * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        finish()
    elif ACT == "rlimits":
        import resource

        names = {"core": resource.RLIMIT_CORE, "nofile": resource.RLIMIT_NOFILE,
                 "data": resource.RLIMIT_DATA}
        worker.emit("agent", "rlimits", {k: list(resource.getrlimit(v)) for k, v in names.items()})
        finish()
    elif ACT == "await_kill":
        open("me.pid", "w").write(str(os.getpid()))
        time.sleep(30)
    elif ACT == "connect":
        import socket

        try:
            socket.create_connection(("127.0.0.1", int(ARG)), timeout=2).close()
            reached = "yes"
        except OSError as exc:
            reached = f"no: {exc}"
        worker.emit("agent", "connect", {"reached": reached})
        finish()
    elif ACT == "steal_env":
        # Look for a value in every process's environment this worker can read in /proc.
        found = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and ARG.encode() in open(f"/proc/{entry}/environ", "rb").read():
                    found.append(entry)
            except OSError:
                pass
        worker.emit("agent", "stolen", {"found": len(found)})
        finish()
    elif ACT == "write_outside":
        # Try to write where a sandboxed worker must not, and where it must.
        results = {}
        for target in (ARG, "/tmp/alk-sandbox-probe", "in-workspace.txt"):
            try:
                with open(target, "w") as handle:
                    handle.write("written")
                results[target] = "written"
            except OSError as exc:
                results[target] = exc.strerror
        worker.emit("agent", "writes", {"results": results, "tmp": sorted(os.listdir("/tmp"))})
        finish()
    elif ACT == "fork_bomb":
        # Bounded, so that a machine that does not enforce the limit is not harmed by the test.
        for _ in range(int(ARG)):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
        finish("all forks succeeded")
    elif ACT == "hang":
        worker.tool_call("lookup", {})
        time.sleep(60)
    elif ACT == "spin":
        while True:
            pass
    elif ACT == "open_files":
        handles = [open(f"f{i}", "w") for i in range(int(ARG))]
        finish(str(len(handles)))
    elif ACT == "big_file":
        with open("big.bin", "wb") as big:
            for _ in range(int(ARG)):
                big.write(b"x" * 1024 * 1024)
        finish()
    elif ACT == "no_result":
        worker.tool_call("noop", {})
    elif ACT == "write_after_exit":
        # A forked child (same group) keeps writing after the worker exits.
        if os.fork() == 0:
            time.sleep(0.3)
            worker.emit("agent", "late", {})
            os._exit(0)
        finish()
    else:
        worker.emit("agent", "unknown_act", {"act": ACT, "input": json.dumps(start.input)})
        finish()


main()
