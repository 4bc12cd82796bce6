// A raw-protocol worker in Node (no SDK): it calls fetch() on a server of its own, in this
// process, as a framework calling a model would. undici reserves about 10 GB of address space.
import http from "node:http";
import readline from "node:readline";

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const next = async () => JSON.parse((await lines.next()).value);
const emit = (channel, type, payload) =>
  process.stdout.write(JSON.stringify({ channel, type, payload }) + "\n");

const hello = await next();
if (hello.type !== "hello") throw new Error(`expected hello, got ${hello.type}`);
emit("framework", "framework_ready", { framework: "node-fetch", framework_version: "1.0" });
const start = await next();
if (start.type !== "start") process.exit(0);  // the probe's abort
const server = http.createServer((_, res) => res.end("fetched")).listen(0, "127.0.0.1");
await new Promise((ready) => server.once("listening", ready));
const answer = await (await fetch(`http://127.0.0.1:${server.address().port}/`)).text();
server.close();
emit("agent", "result", { output: answer, stop_reason: "accepted", end_state: {} });
