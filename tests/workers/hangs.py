"""Test worker: starts a tool call and never returns, so only the lane's timeout can end it."""

import time

from alk import worker


def main():
    worker.hello()
    worker.ready("hanger", "1.0")
    worker.start()
    worker.tool_call("lookup_order", {"order": "742"})
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
