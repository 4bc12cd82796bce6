"""Test worker: the framework (here the standard library's json, named as package_paths) is
fine; the worker's own adapter code raises. Expected: worker_exception, not the framework's."""

import json
import os

from alk import worker


def adapt(answer):
    return answer["text"]  # the adapter's bug: the framework answered with a list


def main():
    worker.hello()
    worker.ready("adapted", "1.0", [os.path.dirname(json.__file__)])
    start = worker.start()
    if start.input.get("where") == "framework":
        json.loads("{not json")  # raises deep inside the framework
    adapt(json.loads("[1, 2]"))


if __name__ == "__main__":
    main()
