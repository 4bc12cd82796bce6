// alk worker for the OpenAI Agents SDK for JavaScript: its real Runner loop (`run(agent, task,
// { maxTurns: 12 })`) and tool dispatch, with the SDK's default model path (the Responses API,
// unstreamed, over HTTP, through its default OpenAI client), that client pointed at the model
// alk serves with setDefaultOpenAIClient.
//
// alk's gateway plays the scenario's `script` over the Responses API, answers a call past the
// script with a final text, injects the scenario's `wire_faults` (429, 500, 503, a reset, a
// stall, a truncated or malformed body, broken tool arguments) and records every call: the
// worker neither scripts nor reports the model. The client keeps the openai package's defaults
// (maxRetries 2, its backoff that honours retry-after-ms and retry-after, its timeout), and the
// Runner's own model retries (modelSettings.retry) stay off, as they are by default: what the
// SDK does with a fault on the wire is what an application built the ordinary way gets.
// Worker-side faults are the tools' only (`tool`: the n-th tool call throws); the tools keep
// the SDK's default error function, which answers the call with a generic error text (the
// error's own message is not shown to the model). Whatever run() throws ends the run with
// stop_reason `error:<ErrorType>`: what the framework did with a fault is the finding. No
// durable run state (the SDK's sessions keep history in memory or on OpenAI's servers), so a
// resumed attempt starts over. Tracing is off: nothing may try the network.
//
// With `mcp` as the first argument (lanes/openai-agents-js-mcp.toml) the tools are alk's, over
// MCP: the SDK's own MCPServerStreamableHttp (over @modelcontextprotocol/client), at the start
// message's `tools` URL with its headers (requestInit), given to the Agent as `mcpServers`,
// with no tool of the worker's. Its defaults are kept: a 5 s session timeout for connecting and
// listing, the MCP client's 60 s for a tool call, no retries, and the SDK's generic error text
// for a call that fails.
import { alk, Faults, modelEndpoint, reportRun, runTool, TOOL_DOCS } from "../lab_tools.mjs";

alk.hello();
// Imported after hello(): a framework that prints on import cannot break the protocol.
const { Agent, MCPServerStreamableHttp, run, setDefaultOpenAIClient, setTracingDisabled, tool } =
  await import("@openai/agents");
const { default: OpenAI } = await import("openai");
const { z } = await import("zod");

setTracingDisabled(true);

function buildAgent(start, faults) {
  const parameters = z.object({ order: z.string() });
  const tools = Object.entries(TOOL_DOCS).map(([name, description]) => tool({
    name, description, parameters, execute: async (args) => runTool(name, args, faults),
  }));
  const { name, baseURL, apiKey } = modelEndpoint(start);
  setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey }));
  return new Agent({ name: "alk", instructions: "Follow the task.", model: name, tools });
}

/** The Runner with the tools alk serves over MCP, through the SDK's own MCP client. */
async function runOverMcp(start) {
  const { name, baseURL, apiKey } = modelEndpoint(start);
  setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey }));
  const server = new MCPServerStreamableHttp({
    url: start.tools.url, name: "alk-tools", requestInit: { headers: start.tools.headers },
  });
  await server.connect();
  try {
    const agent = new Agent({ name: "alk", instructions: "Follow the task.", model: name,
                              mcpServers: [server] });
    return (await run(agent, start.task, { maxTurns: 12 })).finalOutput;
  } finally {
    await server.close();
  }
}

async function main() {
  // The MCP client's packages too: a crash inside them is the framework's, not the worker's.
  alk.ready("@openai/agents", alk.packageVersion("@openai/agents"),
            alk.packagePaths("@openai/agents", "@openai/agents-core", "@openai/agents-openai",
                             "openai", "@modelcontextprotocol/client",
                             "@modelcontextprotocol/core"));
  const start = alk.start();
  if (process.argv[2] === "mcp") {
    await reportRun(() => runOverMcp(start));
    return;
  }
  const faults = new Faults(start.faults);
  await reportRun(async () => (await run(buildAgent(start, faults), start.task,
                                         { maxTurns: 12 })).finalOutput);
}

await main();
