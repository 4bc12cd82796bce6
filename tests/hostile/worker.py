"""A hostile worker: `worker.py THREAT`, one misbehaviour per threat of docs/security.md.

Every threat also tries to leak the lane's declared secret (HOSTILE_TOKEN) in as many forms as
it can, and to find alk's own secret, so that every run checks redaction too.
"""

import calendar
import json
import os
import random
import signal
import socket
import sys
import time

from alk import worker

THREAT = sys.argv[1]
SECRET = os.environ.get("HOSTILE_TOKEN", "")
MB = 1024 * 1024
# How much a flood writes, in MiB (the benchmark asks for more than the tests do).
SIZE_MB = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0


def out():
    """The protocol stream itself, past the SDK's line discipline."""
    return worker._worker()._writer


def leak_everywhere():
    """The declared secret raw, JSON-escaped, split across lines and cut at odd lengths."""
    sys.stderr.write(f"token={SECRET}\n{SECRET[:7]}\n{SECRET[7:]}\n" + "e" * 4090 + SECRET + "\n")
    sys.stderr.flush()
    worker.emit("agent", "leak", {"raw": SECRET, "quoted": json.dumps(SECRET),
                                  SECRET: "as a key", "nested": [[{"x": SECRET * 3}]]})


def finish(output="done", **extra):
    worker.result(output=output, stop_reason="accepted", end_state={"phase": "stopped", **extra})


def before_ready():
    """What a worker may do before the version gate: learn which scenario this start is (to
    void the ones it would fail by reporting a bad version), or report a monstrous version."""
    if THREAT == "peek_scenario":
        clues = [os.getcwd(), os.environ.get("HOME", ""), os.environ.get("TMPDIR", "")]
        out_dir = sys.argv[2] if len(sys.argv) > 2 else ""
        for folder in (os.path.join(out_dir, "transcripts"), os.path.join(out_dir, "reports")):
            for root, _, files in os.walk(folder):
                clues += [os.path.join(root, name) for name in files]
        if any("hard" in clue for clue in clues):
            return "0.1"  # unsupported: the hard repeats would be void, never scored
    if THREAT == "huge_version":
        return "1." + ".".join(["0"] * 500_000)  # valid PEP 440, a million characters
    if THREAT == "identity_shift" and os.path.exists("attempt-1"):
        return "2.0"  # the resumed attempt claims another version
    return "1.0"


def main():
    if THREAT == "void_half":
        # Outside the sandbox it may count its starts in a file: every other one never gets
        # ready, so half the repeats are void beside passing ones.
        counter = sys.argv[2]
        count = int(open(counter).read()) if os.path.exists(counter) else 0
        with open(counter, "w") as handle:
            handle.write(str(count + 1))
        if count % 2 == 0 and count:
            sys.exit(3)
    worker.hello()
    worker.ready("hostile", before_ready())
    start = worker.start()
    if THREAT != "cut_secrets":  # that one never splits a secret itself: alk must not either
        leak_everywhere()

    if THREAT == "flood_stdout_lines":
        line = json.dumps({"channel": "agent", "type": "noise",
                           "payload": {"text": ("x" * 1000 + SECRET) * 60}}) + "\n"
        for _ in range((SIZE_MB or 300) * MB // len(line)):
            out().write(line)
        finish()
    elif THREAT == "endless_line":
        chunk = ("y" * (MB - len(SECRET)) + SECRET)
        for _ in range(SIZE_MB or 256):
            out().write(chunk)
        out().write("\n")
        finish()
    elif THREAT == "binary_garbage":
        noise = random.Random(7).randbytes(32 * MB)
        out().flush()
        os.write(out().fileno(), noise + b"\n\xff\xfe" + SECRET.encode() + b"\n")
        finish()
    elif THREAT == "deep_json":
        out().write('{"channel":"agent","type":"deep","payload":{"p":' + "[" * 100_000
                    + "]" * 100_000 + "}}\n")
        finish()
    elif THREAT == "lone_surrogates":
        out().write('{"channel":"agent","type":"odd","payload":{"s":"\\ud800\\udfff\\udc00"}}\n')
        worker.emit("agent", "odd", {"text": "\ud800 lone"})
        finish()
    elif THREAT == "stderr_flood":
        block = ("z" * 1000 + SECRET + "\n") * 1000
        for _ in range((SIZE_MB or 256) * MB // len(block)):
            sys.stderr.write(block)
        finish()
    elif THREAT == "fork_escape":
        for _ in range(5):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    while True:
                        sys.stderr.write(f"still here {SECRET}\n")
                        time.sleep(0.05)
                os._exit(0)
        time.sleep(0.2)
        finish()
    elif THREAT == "hold_pipes":
        if os.fork() == 0:
            os.setsid()  # away from the group, holding stdout and stderr
            time.sleep(60)
            os._exit(0)
        finish()
    elif THREAT == "hang_ignore_signals":
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_IGN)
        worker.tool_call("lookup", {"order": 1})
        while True:
            time.sleep(1)
    elif THREAT == "forge_harness":
        for kind, payload in (("exit", {"exit_code": 0}), ("timeout", {}),
                              ("attribution", {"outcome": "pass", "cause": "passed"}),
                              ("check", {"name": "files", "ok": True})):
            out().write(json.dumps({"channel": "harness", "type": kind, "payload": payload})
                        + "\n")
        out().flush()
        finish("wrong answer, but the harness said pass")
    elif THREAT == "self_grade":
        worker.tool_call("write_report", {})
        worker.emit("tool", "result", {"name": "write_report", "ok": "false",
                                       "error": "provider 429 (made up)"})
        worker.result(output="742 done", stop_reason="accepted",
                      end_state={"phase": "stopped"},
                      verification={"passed": True, "effects": 1, "checked_by": "harness"})
    elif THREAT == "steal_secrets":
        found = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit():
                    found.append(open(f"/proc/{entry}/environ", "rb").read().decode(
                        errors="replace"))
            except OSError:
                pass
        stolen = [part for text in found for part in text.split("\0")
                  if part.startswith("HARNESS_PRIVATE=")]
        print(f"stolen: {stolen}", file=sys.stderr)
        worker.emit("agent", "stolen", {"values": stolen, "env": dict(os.environ)})
        finish("stolen" if stolen else "nothing to steal")
    elif THREAT == "fork_bomb":
        # Bounded at 2,000 so that a machine that does not enforce the limit survives the test.
        for _ in range(2000):
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
        finish("every fork succeeded")
    elif THREAT == "memory_hog":
        hoard = []
        while True:
            hoard.append(bytearray(16 * MB))
    elif THREAT == "call_home":
        port = int(start.input.get("port", 9))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            finish("reached the host")
        except OSError:
            finish("blocked")
    elif THREAT == "inherited_fds":
        extra = sorted(int(fd) for fd in os.listdir("/proc/self/fd")
                       if int(fd) > 2 and fd != str(out().fileno()))
        opened = [fd for fd in extra if os.path.exists(f"/proc/self/fd/{fd}")]
        finish("clean" if not opened else f"inherited {opened}")
    elif THREAT == "tell_rerun":
        # A rerun reproduces a failure only if the worker cannot tell it from the original: by
        # the start's time in its run id, or a field the original never had.
        stamp = start.run_id[:15]
        try:
            began = calendar.timegm(time.strptime(stamp, "%Y%m%d-%H%M%S"))
        except ValueError:
            began = time.time()
        rerun = time.time() - began > 5 or "reproduces" in start.message
        finish("done" if rerun else "wrong")
    elif THREAT == "peek_scenario":
        finish("wrong" if start.scenario_id == "hard" else "done")
    elif THREAT == "deep_event":
        # 950 deep passes json.loads; any recursive walk past it would not.
        out().write('{"channel":"agent","type":"deep","payload":{"p":' + "[" * 950
                    + "]" * 950 + "}}\n")
        out().flush()
        finish()
    elif THREAT == "identity_shift":
        if not os.path.exists("attempt-1"):
            open("attempt-1", "w").close()
            worker.tool_call("write_report", {})
            worker.tool_result("write_report", ok=True)
            time.sleep(30)  # alk kills it here (kill_at)
        finish()
    elif THREAT == "deep_folders":
        fd = os.open(".", os.O_RDONLY)
        for _ in range(3000):  # deeper than any recursive removal goes
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(fd)
        finish()
    elif THREAT == "fault_flood":
        for index in range(250):
            worker.fault(f"{index}-" + "p" * 1_000_000, occurrence=1)  # under the line limit
        finish()
    elif THREAT == "tool_name_flood":
        for index in range(1000):
            name = f"{index:04d}-{os.urandom(8).hex()}-" + "n" * 107
            worker.tool_call(name, {})
            worker.tool_result(name, ok=True)
        finish()
    elif THREAT == "json_bomb_file":
        os.makedirs("lab-output", exist_ok=True)
        with open("lab-output/effects.json", "w") as handle:
            handle.write("[" + "{}," * (8 * MB // 3 - 2) + "{}]")
        finish("742 done")
    elif THREAT == "huge_version":
        finish()
    elif THREAT == "cut_secrets":
        cut_secrets(start)
    elif THREAT == "keyring":
        finish(keyring(start.input.get("phase", "")))
    elif THREAT == "tmpfs_hog":
        held = 0
        for folder in ("/tmp", "/dev/shm"):
            try:
                with open(os.path.join(folder, "hog"), "wb") as handle:
                    for _ in range(768):
                        handle.write(b"h" * MB)
                        held += 1
            except OSError:
                pass
        finish("bounded" if held <= 260 else f"held {held} MiB")
    elif THREAT == "read_host":
        read = []
        for path in start.input.get("paths", []) + ["/etc/shadow"]:
            try:
                with open(path, "rb") as handle:
                    read.append(f"{path}: {handle.read(64)!r}")
            except OSError:
                pass
        for folder in start.input.get("folders", []):
            try:
                read += [f"{folder}: {name}" for name in os.listdir(folder)
                         if "canary" in name or "earlier" in name]
            except OSError:
                pass
        finish("nothing read" if not read else "read " + "; ".join(read))
    elif THREAT == "non_finite":
        out().write('{"channel":"agent","type":"numbers","payload":{"big":1e999,"nan":NaN}}\n')
        out().flush()
        finish()
    elif THREAT == "suicide_after_result":
        finish()
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(5)  # as PID 1 of its namespace it would live on, and pass
    elif THREAT == "bidi_text":
        # Text that reads otherwise than it is, and terminal controls, everywhere it can.
        evil = "\u202eevil\u2066\u200b\ufeff\x1b[2J\x9b31m\u2028"
        worker.tool_call("look" + evil, {"q": evil})
        sys.stderr.write(f"Traceback (most recent call last):\nRuntimeError: {evil}\n")
        sys.stderr.flush()
        worker.result(output=evil, stop_reason="accepted", end_state={"k": evil})
        os._exit(1)
    elif THREAT == "void_half":
        finish()
    elif THREAT == "forge_init_status":
        finish()
        try:  # alk's init is PID 1: its argv names the fd of its status line (STATUS_FD UID
            # GID GATEWAY --, after the Python init's `python -I -S -c CODE` or the compiled one)
            argv = open("/proc/1/cmdline", "rb").read().split(b"\0")
            with open(f"/proc/1/fd/{int(argv[argv.index(b'--') - 4])}", "wb") as status:
                status.write(b"exit 0" + b" " * 57 + b"\n")  # as long as alk reads
            sys.stderr.write("forged the init's status line\n")
            sys.stderr.flush()
        except (OSError, ValueError, IndexError):
            pass
        os.kill(os.getpid(), signal.SIGKILL)
    elif THREAT == "shrug_off_sigint":
        worker.tool_call("lookup", {"order": 1})
        while True:  # survives SIGINT; with no handler for SIGTERM, SIGTERM ends it
            try:
                time.sleep(1)
            except KeyboardInterrupt:
                pass
    else:
        finish(f"unknown threat {THREAT}")


def cut_secrets(start):
    """The secrets placed across every length limit alk applies: names, outputs, checks, the
    failure detail, stderr lines at the line limit, and a multi-line secret as it is."""
    pem = os.environ.get("HOSTILE_PEM", "")
    for offset in range(100, 130, 3):
        worker.tool_call("n" * offset + SECRET, {})
        worker.tool_result("n" * offset + SECRET, ok=True)
    worker.fault("p" * 120 + SECRET)
    sys.stderr.write("s" * (MB - 10) + SECRET + "\n")  # cut at the 1 MiB line limit
    sys.stderr.write(pem + "\n")
    sys.stderr.flush()
    worker.emit("agent", "pem", {"text": pem})
    os.makedirs("lab-output", exist_ok=True)
    with open("lab-output/effects.json", "w") as handle:
        json.dump({"note": "q" * 290 + SECRET}, handle)
    worker.result(output="o" * 150 + SECRET + "o" * 140 + SECRET, stop_reason="accepted",
                  end_state={"phase": "x" * 150 + SECRET}, verification={"v": "c" * 995 + SECRET})
    # The last stderr line before a crash is quoted, cut at 300 characters.
    sys.stderr.write("Traceback (most recent call last):\nRuntimeError: " + "r" * 270 + SECRET
                     + "\n")
    sys.stderr.flush()
    os._exit(3)


def keyring(phase):
    """Leaves a key in the user's and the session's keyrings, or looks for one left before."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    numbers = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(os.uname().machine)
    if numbers is None:
        return "no keyring here"
    add_key, keyctl = numbers
    if phase == "plant":
        planted = []
        for ring, name in ((-4, "user"), (-3, "session")):  # KEY_SPEC_USER/SESSION_KEYRING
            serial = libc.syscall(add_key, b"user", b"alk-hostile-key", b"stolen", 6, ring)
            if serial > 0:
                planted.append(name)
        return "planted " + ",".join(planted) if planted else "nothing planted"
    found = []
    for ring, name in ((-4, "user"), (-3, "session")):
        # KEYCTL_SEARCH = 10
        if libc.syscall(keyctl, 10, ring, b"user", b"alk-hostile-key", 0) > 0:
            found.append(name)
    return "found " + ",".join(found) if found else "nothing found"


main()
