"""A Node worker's crash through `alk run`: a real Node process, the alk-worker SDK, and a fake
npm framework (node_modules/fakefw) it names in package_paths. The error Node prints as it dies
is named, and blamed on the framework when the framework threw, on the worker when its own
code did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="no node on this machine")

FRAMEWORK = '''\
"use strict";
function runAgent(task, tools) {
  return tools.lookup.run(task);  // the framework's bug: a tool is a function, not an object
}
function runWith(callback) {
  return callback();
}
module.exports = { runAgent, runWith };
'''

WORKER = '''\
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const alk = require("alk-worker");
const fw = require("fakefw");

alk.hello();
alk.ready("fakefw", alk.packageVersion("fakefw"), alk.packagePaths("fakefw"));
const start = alk.start();
if (start.input.where === "framework") {
  fw.runAgent(start.task, { lookup: (task) => task });
} else {
  fw.runWith(() => { throw new TypeError("the adapter read " + start.input.where); });
}
'''

LANE = """\
name = "node-crash"
description = "A Node worker that crashes in its framework, and in its own code."
framework = "fakefw"
version = ">=1.0,<2"
command = ["node", "worker.mjs"]
timeout_s = 30
repeats = 1

[[scenarios]]
id = "framework"
task = "Answer"
input = { where = "framework" }

[[scenarios]]
id = "worker"
task = "Answer"
input = { where = "its input" }
"""


def at(path: Path, text: str) -> str:
    number = next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)
    return f"{path}:{number}"


def test_a_node_crash_is_named_and_blamed_on_whose_code_threw(tmp_path: Path, alk) -> None:
    package = tmp_path / "node_modules" / "fakefw"
    package.mkdir(parents=True)
    (package / "package.json").write_text('{"name": "fakefw", "version": "1.2.0", '
                                          '"main": "index.js"}\n')
    (package / "index.js").write_text(FRAMEWORK)
    (tmp_path / "worker.mjs").write_text(WORKER)
    (tmp_path / "lanes").mkdir()
    (tmp_path / "lanes" / "node-crash.toml").write_text(LANE)
    done = alk("run", "--lane", tmp_path / "lanes" / "node-crash.toml", "--json",
               cwd=tmp_path, timeout=300)
    [path] = (tmp_path / "reports").glob("*/result.json")
    document = json.loads(path.read_text())
    found = {s["id"]: s["repeats"][0] for s in document["scenarios"]}
    framework, worker = found["framework"], found["worker"]
    real = package.resolve() / "index.js"
    assert (framework["outcome"], framework["cause"]) == ("framework_runtime",
                                                          "framework_exception"), done.stderr
    assert framework["detail"] == (
        "exit code 1; TypeError: tools.lookup.run is not a function; "
        f"raised at {at(real, 'tools.lookup.run')}")
    assert (worker["outcome"], worker["cause"]) == ("framework_runtime", "worker_exception")
    assert worker["detail"] == (
        "exit code 1; TypeError: the adapter read its input; "
        f"raised at {at((tmp_path / 'worker.mjs').resolve(), 'throw new TypeError')}")
