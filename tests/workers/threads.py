"""Test worker: many threads send long lines at once, as a framework running tools in a thread
pool does. Its stream writes each line in pieces of 1 KiB, as a stream that is not one write a
line would: only the SDK's lock keeps one thread's line from landing inside another's."""

import os
import sys
import threading

from alk import worker

THREADS, CALLS, PIECE = 8, 40, 1024


class InPieces:
    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        for at in range(0, len(text), PIECE):
            self.stream.write(text[at:at + PIECE])
            self.stream.flush()

    def flush(self):
        self.stream.flush()


def main():
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # prints go to stderr, as worker.hello() arranges
    session = worker.Worker(sys.stdin.buffer, InPieces(protocol))
    session.hello()
    session.ready("threads", "1.0")
    session.start()

    def calls(thread):
        for call in range(CALLS):
            session.tool_call("echo", {"thread": thread, "text": f"{thread}:{call} " * 2000})

    pool = [threading.Thread(target=calls, args=(n,)) for n in range(THREADS)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    session.result(output="done", stop_reason="accepted", end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
