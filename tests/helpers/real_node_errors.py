"""Real Node reports of an uncaught exception or unhandled rejection, for the tests of
alk.attribution.node_errors: small programs, and a fake npm framework (node_modules/fakefw) they
call, run by every Node this machine has (the system's, and the project's own in .tools/node).
Nothing here is typed by hand: the text is what Node printed.

    programs = NodePrograms(folder, node)
    ran = programs.run("type_error.mjs")
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def nodes() -> list[str]:
    """Every Node binary found, each once: the one on PATH, and the project's own."""
    found: dict[str, str] = {}
    for node in (shutil.which("node"), str(ROOT / ".tools" / "node" / "bin" / "node")):
        if node and os.access(node, os.X_OK):
            found.setdefault(os.path.realpath(node), node)
    return list(found.values())


FRAMEWORK = '''\
"use strict";
function dispatch(tool) {
  return tool.run();  // the framework's bug: a tool without run
}
function callTool(fn) {
  return fn();
}
async function later(fn) {
  await null;
  return fn();
}
module.exports = { dispatch, callTool, later };
'''

PROGRAMS = {
    "type_error.mjs": '''\
function boom() {
  throw new TypeError("boom\\nsecond line");
}
boom();
''',
    "cause.mjs": '''\
async function f() {
  await null;
  const inner = new RangeError("inner");
  const e = new Error("outer", { cause: inner });
  e.code = "ERR_X";
  throw e;
}
await Promise.all([f()]);
''',
    "shared_cause.mjs": '''\
function inner() { const e = new Error("deep"); e.code = "E_DEEP"; return e; }
function mid() { return new Error("mid", { cause: inner() }); }
function outer() {
  const e = new Error("top", { cause: mid() });
  e.name = "Agent failure";
  throw e;
}
outer();
''',
    "aggregate.mjs": '''\
throw new AggregateError([new TypeError("one"), new Error("two")], "all failed");
''',
    "string.mjs": 'throw "a string";\n',
    "string.cjs": 'throw "cjs string";\n',
    "rejected.mjs": 'Promise.reject("why");\n',
    "syntax.mjs": 'const x = ;\n',
    "fs.mjs": 'import fs from "node:fs";\nfs.readFileSync("/nonexistent/x");\n',
    "sp ace/ü.mjs": 'throw new Error("x");\n',
    "framework.mjs": '''\
import { createRequire } from "node:module";
const fw = createRequire(import.meta.url)("fakefw");
fw.dispatch({});
''',
    "own.mjs": '''\
import { createRequire } from "node:module";
const fw = createRequire(import.meta.url)("fakefw");
await fw.later(() => { throw new TypeError("the worker's own bug"); });
''',
    "library.mjs": '''\
import { createRequire } from "node:module";
const lib = createRequire(import.meta.url)("otherlib");
lib.parse("[");
''',
    "builtin.mjs": '''\
import { createRequire } from "node:module";
import fs from "node:fs";
const fw = createRequire(import.meta.url)("fakefw");
fw.callTool(() => fs.readFileSync("/nonexistent/x"));
''',
}


@dataclass(frozen=True)
class Ran:
    status: int
    stderr: str


class NodePrograms:
    """The programs and the fake framework, written once into `folder`, run by `node`."""

    def __init__(self, folder: Path, node: str) -> None:
        self.folder = folder
        self.node = node
        package = folder / "node_modules" / "fakefw"
        package.mkdir(parents=True, exist_ok=True)
        (package / "package.json").write_text('{"name": "fakefw", "version": "1.0.0", '
                                              '"main": "index.js"}\n')
        (package / "index.js").write_text(FRAMEWORK)
        self.framework = package
        # Another npm package, not the framework's: library code, as the standard library is.
        other = folder / "node_modules" / "otherlib"
        other.mkdir(parents=True, exist_ok=True)
        (other / "package.json").write_text('{"name": "otherlib", "main": "index.js"}\n')
        (other / "index.js").write_text(
            'exports.parse = (s) => { throw new SyntaxError("bad input " + s); };\n')
        for name, source in PROGRAMS.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)

    def run(self, name: str) -> Ran:
        done = subprocess.run([self.node, name], cwd=self.folder, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        return Ran(done.returncode, done.stderr)

    def line(self, text: str, name: str) -> tuple[str, str]:
        """The (file, line) of the first line of program (or framework file) `name` that
        holds `text`."""
        path = self.framework / name if name == "index.js" else self.folder / name
        number = next(i for i, line in enumerate(path.read_text().splitlines(), 1)
                      if text in line)
        return str(path), str(number)
