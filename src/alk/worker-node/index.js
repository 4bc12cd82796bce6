"use strict";
/**
 * The worker SDK for Node: speak alk's protocol v1 from a framework worker, with Node's standard
 * library only. The same contract as the Python SDK (`alk.worker`); index.d.ts gives its types.
 *
 * alk hands this package to every worker as `alk-worker` on NODE_PATH, so a worker needs nothing
 * installed: CommonJS `require("alk-worker")`, or from an ES module
 * `createRequire(import.meta.url)("alk-worker")` (ES imports do not read NODE_PATH). A package
 * that installs it (`npm install <alk>/src/alk/worker-node`) may `import * as alk from
 * "alk-worker"`.
 *
 *     const alk = require("alk-worker");
 *     alk.hello();
 *     alk.ready("my-framework", "1.4.2", alk.packagePaths("my-framework"));
 *     const start = alk.start();                  // exits quietly if alk aborts instead
 *     alk.toolCall("lookup", { order: 742 });
 *     alk.toolResult("lookup", true, { output: { status: "open" } });
 *     alk.result("done", "accepted", { phase: "stopped" });
 *
 * `hello()` and `start()` block until alk's line arrives: nothing of the run has begun, so there
 * is nothing for the event loop to do meanwhile, and a synchronous handshake reads like the
 * Python one. Every event is one whole line written synchronously: async tools that emit at once
 * (`Promise.all`, timers) can never interleave parts of two lines, and lines keep call order.
 * From `hello()` on, `process.stdout.write` and `console.log` go to stderr, which alk keeps as
 * evidence, instead of breaking the protocol (a child process given `stdio: "inherit"` still
 * writes to the protocol's pipe: give it "pipe" or "ignore").
 */

const fs = require("node:fs");
const path = require("node:path");

const PROTOCOL_VERSION = 1;
// Channels a worker may write on. `harness` belongs to alk alone.
const CHANNELS = Object.freeze(["agent", "tool", "model", "user", "framework"]);
// alk's lines are short (a start message is kilobytes): one this long is not alk's.
const MAX_LINE_BYTES = 64 * 1024 * 1024;
const READ_CHUNK = 64 * 1024;

class ProtocolError extends Error {
  constructor(message) {
    super(message);
    this.name = "ProtocolError";
  }
}

/** The start message: what to run. `input` is the scenario's free table. */
class Start {
  constructor(message) {
    const scenario = message.scenario || {};
    this.message = message;
    this.runId = message.run_id || "";
    this.scenarioId = scenario.id || "";
    this.task = scenario.task || "";
    this.input = { ...(scenario.input || {}) };
    this.repeat = message.repeat || 0;
    this.seed = message.seed || 0;
    this.deadlineS = message.deadline_s ?? null;
    // The scripted model's turns and the faults to inject, when the scenario has them.
    this.script = [...(scenario.script || [])];
    this.faults = [...(scenario.faults || [])];
    // When alk serves the model (the lane's [model]): name, api_key, mode, base_url (OpenAI's)
    // and base_urls per family; the same as OPENAI_BASE_URL and the others in the environment.
    this.model = { ...(message.model || {}) };
    // When alk serves the lane's tools over MCP (its [[tools]]): url, headers (the attempt's
    // key) and names; the url is ALK_MCP_URL in the environment too.
    this.tools = { ...(message.tools || {}) };
    // After alk killed a previous attempt (a scenario's kill_at): resume, do not redo.
    this.attempt = message.attempt || 1;
    this.resume = Boolean(message.resume);
  }
}

/** One protocol session over a pair of file descriptors (stdin and stdout unless given). */
class Worker {
  constructor({ input = null, output = null } = {}) {
    this._input = input;
    this._output = output;
    this._pending = Buffer.alloc(0);
    this.helloMessage = null;
  }

  // -- handshake --------------------------------------------------------------------------------

  /** Reads alk's hello; call it first. */
  hello() {
    if (this._output === null) this._output = protectStdout();
    if (this._input === null) this._input = blockingFd(0, "r");
    const message = this._read();
    if (message === null || message.type !== "hello") {
      throw new ProtocolError(`expected hello from alk, got ${JSON.stringify(message)}`);
    }
    if (message.protocol !== PROTOCOL_VERSION) {
      throw new ProtocolError(`alk speaks protocol ${message.protocol}, this SDK speaks ` +
        `${PROTOCOL_VERSION}`);
    }
    this.helloMessage = message;
    return message;
  }

  /** Reports the framework under test; alk checks it before anything of the scenario runs. */
  ready(framework, frameworkVersion, packagePaths = []) {
    if (this.helloMessage === null) this.hello();
    this.emit("framework", "framework_ready", {
      framework: String(framework),
      framework_version: String(frameworkVersion),
      package_paths: [...packagePaths].map(String),
    });
  }

  /** Waits for the start message. If alk aborts instead (version mismatch, probe), exits 0. */
  start() {
    const message = this._read();
    if (message === null) throw new ProtocolError("alk closed stdin before the start message");
    if (message.type === "abort") {
      fs.writeSync(2, `alk aborted this worker: ${message.reason || ""}\n`);
      process.exit(0);
    }
    if (message.type !== "start") {
      throw new ProtocolError(`expected start from alk, got ${JSON.stringify(message)}`);
    }
    return new Start(message);
  }

  // -- events -----------------------------------------------------------------------------------

  emit(channel, type, payload = {}) {
    if (!CHANNELS.includes(channel)) {
      throw new TypeError(`channel must be one of ${CHANNELS.join(", ")}, got ${channel}`);
    }
    if (this._output === null) throw new ProtocolError("call hello() before emitting events");
    // JSON.stringify writes NaN and Infinity as null and drops undefined: the line stays JSON.
    // A lone surrogate becomes an escape (well-formed JSON.stringify), never invalid UTF-8.
    const line = JSON.stringify({ channel, type, payload: { ...(payload || {}) } }, jsonSafe);
    writeAll(this._output, Buffer.from(line + "\n", "utf8"));
  }

  toolCall(name, args = {}) {
    this.emit("tool", "call", { name, args: { ...(args || {}) } });
  }

  toolResult(name, ok, { output, error } = {}) {
    const payload = { name, ok: Boolean(ok) };
    if (output !== undefined && output !== null) payload.output = output;
    if (error !== undefined && error !== null) payload.error = String(error);
    this.emit("tool", "result", payload);
  }

  /** Reports a fault just injected (the scenario's `faults`): alk voids a repeat where a
   * declared fault was never reported, since it did not test what it claims. */
  fault(point, occurrence = 1, error = "", retryable = false) {
    this.emit("framework", "fault", { point, occurrence, error, retryable: Boolean(retryable) });
  }

  /** The framework asked the scripted model for model turn `turn` (1-based), past the
   * scenario's `scriptTurns` scripted turns: alk names it as the cause of what follows. */
  scriptExhausted(turn, scriptTurns) {
    this.emit("model", "script_exhausted", { turn, script_turns: scriptTurns });
  }

  /** The run's final answer. `verification` is the worker's own claim: alk records it and
   * never lets it decide the outcome. */
  result(output, stopReason, endState = {}, verification = undefined) {
    const payload = { output: String(output), stop_reason: String(stopReason),
      end_state: { ...(endState || {}) } };
    if (verification !== undefined) payload.verification = verification;
    this.emit("agent", "result", payload);
  }

  // -- plumbing ---------------------------------------------------------------------------------

  _read() {
    const chunk = Buffer.alloc(READ_CHUNK);
    for (;;) {
      const end = this._pending.indexOf(0x0a);
      if (end >= 0) {
        const line = this._pending.subarray(0, end).toString("utf8");
        this._pending = this._pending.subarray(end + 1);
        const message = JSON.parse(line);
        if (message === null || typeof message !== "object" || Array.isArray(message)) {
          throw new ProtocolError(`expected a JSON object from alk, got ${line.slice(0, 200)}`);
        }
        return message;
      }
      if (this._pending.length > MAX_LINE_BYTES) {
        throw new ProtocolError(`a line from alk longer than ${MAX_LINE_BYTES} bytes`);
      }
      const count = readSome(this._input, chunk);
      if (count === 0) return null;
      this._pending = Buffer.concat([this._pending, chunk.subarray(0, count)]);
    }
  }
}

function jsonSafe(_key, value) {
  return typeof value === "bigint" ? value.toString() : value;
}

/** A descriptor of its own for fd 0 or 1, opened through /proc so that it blocks: Node makes
 * its own stdio pipes non-blocking, and a synchronous write to a full pipe would fail. */
function blockingFd(fd, flags) {
  try {
    return fs.openSync(`/proc/self/fd/${fd}`, flags);
  } catch {
    return fd; // no /proc (not Linux): the descriptor itself; EAGAIN is waited out below
  }
}

/** Keeps fd 1's pipe for the protocol on a descriptor of its own; Node's stdout goes to
 * stderr from then on. */
function protectStdout() {
  const fd = blockingFd(1, "w");
  const toStderr = process.stderr.write.bind(process.stderr);
  process.stdout.write = (chunk, encoding, callback) => toStderr(chunk, encoding, callback);
  return fd;
}

function pause() {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
}

function writeAll(fd, bytes) {
  let offset = 0;
  while (offset < bytes.length) {
    try {
      offset += fs.writeSync(fd, bytes, offset, bytes.length - offset);
    } catch (error) {
      if (error.code !== "EAGAIN") throw error;
      pause();
    }
  }
}

function readSome(fd, chunk) {
  for (;;) {
    try {
      return fs.readSync(fd, chunk, 0, chunk.length, null);
    } catch (error) {
      if (error.code === "EOF") return 0;
      if (error.code !== "EAGAIN") throw error;
      pause();
    }
  }
}

/** Install folders of the named npm packages (found the way Node finds them from the worker's
 * program), so that alk can tell a crash inside the framework from one in the worker's code. */
function packagePaths(...names) {
  const found = [];
  const program = process.argv[1] ? path.dirname(path.resolve(process.argv[1])) : process.cwd();
  for (const name of names) {
    for (let folder = program; ; folder = path.dirname(folder)) {
      const candidate = path.join(folder, "node_modules", name);
      if (fs.existsSync(path.join(candidate, "package.json"))) {
        // Real paths: stack traces name the files where Node found them.
        const real = fs.realpathSync(candidate);
        if (!found.includes(real)) found.push(real);
        break;
      }
      if (path.dirname(folder) === folder) break;
    }
  }
  return found;
}

/** The version in an npm package's package.json, found as `packagePaths` finds it; "" if none. */
function packageVersion(name) {
  const [folder] = packagePaths(name);
  if (!folder) return "";
  return JSON.parse(fs.readFileSync(path.join(folder, "package.json"), "utf8")).version || "";
}

let defaultWorker = null;
function worker() {
  if (defaultWorker === null) defaultWorker = new Worker();
  return defaultWorker;
}

module.exports = {
  PROTOCOL_VERSION,
  CHANNELS,
  ProtocolError,
  Start,
  Worker,
  packagePaths,
  packageVersion,
  hello: () => worker().hello(),
  ready: (framework, frameworkVersion, paths) => worker().ready(framework, frameworkVersion,
    paths),
  start: () => worker().start(),
  emit: (channel, type, payload) => worker().emit(channel, type, payload),
  toolCall: (name, args) => worker().toolCall(name, args),
  toolResult: (name, ok, detail) => worker().toolResult(name, ok, detail),
  fault: (point, occurrence, error, retryable) => worker().fault(point, occurrence, error,
    retryable),
  scriptExhausted: (turn, scriptTurns) => worker().scriptExhausted(turn, scriptTurns),
  result: (output, stopReason, endState, verification) => worker().result(output, stopReason,
    endState, verification),
};
