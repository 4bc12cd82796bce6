// The Node worker SDK (src/alk/worker-node) through real processes: a worker is started as alk
// starts one, with the protocol on its stdin and stdout. Run by `node --test tests/node/`.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const sdk = path.resolve(here, "../../src/alk/worker-node");
const fixtures = path.join(here, "fixtures");

// A folder laid out as alk hands the SDK to a worker: NODE_PATH/alk-worker; and a fake
// framework installed beside the fixtures, for packagePaths.
function sandbox() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "alk-node-sdk-"));
  fs.mkdirSync(path.join(root, "sdk"));
  fs.symlinkSync(sdk, path.join(root, "sdk", "alk-worker"));
  fs.mkdirSync(path.join(root, "node_modules", "fake-framework"), { recursive: true });
  fs.writeFileSync(path.join(root, "node_modules", "fake-framework", "package.json"),
    JSON.stringify({ name: "fake-framework", version: "3.1.4" }));
  fs.symlinkSync(sdk, path.join(root, "node_modules", "alk-worker"));
  for (const name of fs.readdirSync(fixtures)) {
    fs.copyFileSync(path.join(fixtures, name), path.join(root, name));
  }
  return root;
}

const hello = { type: "hello", protocol: 1, lane: "sdk-test" };
const startMessage = (input = {}) => ({ type: "start", run_id: "r1", repeat: 3, seed: 7,
  scenario: { id: "s1", task: "do it", input, script: [{ text: "hi" }], faults: [] },
  model: { name: "alk-script", base_url: "http://127.0.0.1:1/v1" } });

// Runs a worker: hello, then `answer` once it reports framework_ready. `pauseMs` holds off
// reading its stdout a while, so that the pipe fills and the worker's writes must wait.
function run(program, { answer = startMessage(), first = hello, pauseMs = 0 } = {}) {
  const root = sandbox();
  const child = spawn(process.execPath, [path.join(root, program)], {
    cwd: root, env: { PATH: process.env.PATH, NODE_PATH: path.join(root, "sdk") },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let answered = false;
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  const onData = (chunk) => {
    stdout += chunk;
    if (!answered && stdout.includes('"framework_ready"')) {
      answered = true;
      child.stdin.end(JSON.stringify(answer) + "\n");
    }
  };
  if (pauseMs) {
    child.stdout.pause();
    setTimeout(() => { child.stdout.on("data", onData); child.stdout.resume(); }, pauseMs);
  } else {
    child.stdout.on("data", onData);
  }
  child.stdin.write(JSON.stringify(first) + "\n");
  return new Promise((resolve) => {
    child.on("close", (code) => {
      const lines = stdout.split("\n").filter(Boolean);
      resolve({ code, stderr, lines, events: lines.map((line) => JSON.parse(line)) });
    });
  });
}

test("a worker's handshake, events and result are protocol lines, and prints go to stderr",
  async () => {
    const { code, stderr, events } = await run("echo_worker.js");
    assert.equal(code, 0, stderr);
    const [ready, ...rest] = events;
    assert.equal(ready.channel, "framework");
    assert.equal(ready.type, "framework_ready");
    assert.equal(ready.payload.framework, "echo");
    assert.equal(ready.payload.framework_version, "1.0.0");
    assert.equal(ready.payload.package_paths.length, 1);
    assert.match(ready.payload.package_paths[0], /node_modules\/fake-framework$/);
    assert.deepEqual(rest.map((e) => `${e.channel}/${e.type}`),
      ["framework/fault", "model/script_exhausted", "agent/result"]);
    assert.deepEqual(rest[0].payload, { point: "tool", occurrence: 2, error: "disk full",
      retryable: true });
    assert.deepEqual(rest[1].payload, { turn: 4, script_turns: 3 });
    assert.deepEqual(rest[2].payload, { output: "task: do it", stop_reason: "accepted",
      end_state: { phase: "stopped" }, verification: { claims: "passed" } });
    assert.match(stderr, /printed after hello: this goes to stderr/);
    assert.match(stderr, /written to stdout after hello: stderr too/);
  });

test("async tools emitting at once never interleave lines, even when the pipe is full",
  async () => {
    const count = 200;
    const { code, stderr, lines, events } = await run("echo_worker.js", {
      answer: startMessage({ ask: "concurrent", count, bytes: 20_000 }), pauseMs: 300,
    });
    assert.equal(code, 0, stderr);
    // 200 calls of 20 kB each (4 MB) against a 64 kB pipe: every line parsed whole.
    const calls = events.filter((e) => e.type === "call");
    assert.equal(calls.length, count);
    assert.ok(calls.every((e) => e.payload.args.big.length === 20_000));
    assert.deepEqual(new Set(calls.map((e) => e.payload.args.i)).size, count);
    assert.equal(lines.length, 1 + 2 * count + 3);
  });

test("NaN, Infinity, BigInt and lone surrogates are written as valid JSON", async () => {
  const { code, stderr, events } = await run("echo_worker.js",
    { answer: startMessage({ ask: "odd-values" }) });
  assert.equal(code, 0, stderr);
  const odd = events.find((e) => e.type === "odd").payload;
  assert.deepEqual(odd, { nan: null, inf: null, big: "10", lone: "a\ud800b" });
});

for (const channel of ["harness", "nonsense"]) {
  test(`the ${channel} channel is refused before anything is written`, async () => {
    const { code, stderr, events } = await run("echo_worker.js",
      { answer: startMessage({ ask: "bad-channel", channel }) });
    assert.equal(code, 0, stderr);
    assert.ok(!events.some((e) => e.channel === channel));
    const refused = events.find((e) => e.type === "refused").payload.error;
    assert.match(refused, /TypeError: channel must be one of agent, tool, model, user, framework/);
  });
}

test("an abort instead of start ends the worker quietly, with the reason on stderr",
  async () => {
    const { code, stderr, events } = await run("echo_worker.js",
      { answer: { type: "abort", reason: "version 1.0.0 is outside >=2" } });
    assert.equal(code, 0);
    assert.match(stderr, /alk aborted this worker: version 1.0.0 is outside >=2/);
    assert.deepEqual(events.map((e) => e.type), ["framework_ready"]);
  });

test("another protocol version is refused, naming both", async () => {
  const { code, stderr, events } = await run("echo_worker.js",
    { first: { type: "hello", protocol: 2, lane: "x" } });
  assert.notEqual(code, 0);
  assert.match(stderr, /ProtocolError: alk speaks protocol 2, this SDK speaks 1/);
  assert.deepEqual(events, []);
});

test("an ES module imports the installed package, sharing one session with require",
  async () => {
    const { code, stderr, events } = await run("esm_worker.mjs");
    assert.equal(code, 0, stderr);
    assert.equal(events[0].payload.framework, "esm");
    assert.equal(events[1].payload.output, "same session: true");
  });

test("packageVersion reads the installed package's version", async () => {
  const root = sandbox();
  const script = path.join(root, "version.js");
  fs.writeFileSync(script, 'process.stderr.write(require("alk-worker")' +
    '.packageVersion("fake-framework") + "|" + require("alk-worker").packageVersion("none"))');
  const child = spawn(process.execPath, [script], { env: { NODE_PATH: path.join(root, "sdk") } });
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  const code = await new Promise((resolve) => child.on("close", resolve));
  assert.equal(code, 0, stderr);
  assert.equal(stderr, "3.1.4|");
});
