// alk worker for Mastra: its real Agent loop (`agent.generate(task, { maxSteps: 12 })`) and tool
// dispatch (tools made with createTool), with the model given the way Mastra documents for an
// OpenAI-compatible server: its model router's `{ id: "openai/<model>", url, apiKey }`, which
// reaches the model alk serves over Chat Completions, unstreamed, through the router's own
// fetch. maxSteps is raised from Mastra's default (5) to the 12 turns the other lanes allow.
//
// alk's gateway plays the scenario's `script` over the OpenAI API, answers a call past the
// script with a final text, injects the scenario's `wire_faults` (429, 500, 503, a reset, a
// stall, a truncated or malformed body, broken tool arguments) and records every call: the
// worker neither scripts nor reports the model. Retries are left at the Agent's defaults (its
// maxRetries is 0 unless the agent or the call sets it) and so are its timeouts, so what Mastra
// does with a fault on the wire is what an application built the ordinary way gets.
// Worker-side faults are the tools' only (`tool`: the n-th tool call throws). Whatever
// generate() throws, or an error it returns in place of an answer, ends the run with stop_reason
// `error:<ErrorType>`: what the framework did with a fault is the finding. The agent has no
// memory or storage configured, so a resumed attempt (after alk killed the worker) starts over.
// Mastra's own telemetry is off (MASTRA_TELEMETRY_DISABLED): nothing may try the network.
//
// With `mcp` as the first argument (lanes/mastra-mcp.toml) the tools are alk's, over MCP:
// Mastra's own MCPClient (@mastra/mcp) at the start message's `tools` URL with its headers
// (requestInit), its toolsets given to generate(), and no tool of the worker's. Its defaults are
// kept (a 60 s request timeout, an isError result thrown to the Agent, one reconnect and retry on
// a transport error): what they do with a tool that fails, never answers, answers late or
// answers malformed is the finding.
import { alk, Faults, modelEndpoint, reportRun, runTool, TOOL_DOCS } from "../lab_tools.mjs";

alk.hello();
process.env.MASTRA_TELEMETRY_DISABLED = "1";
// Imported after hello(): a framework that prints on import cannot break the protocol.
const { Agent } = await import("@mastra/core/agent");
const { createTool } = await import("@mastra/core/tools");
const { z } = await import("zod");
const OVER_MCP = process.argv[2] === "mcp";

function buildTools(faults) {
  const inputSchema = z.object({ order: z.string() });
  return Object.fromEntries(Object.entries(TOOL_DOCS).map(([name, description]) => [
    name,
    createTool({ id: name, description, inputSchema,
                 execute: async (input) => runTool(name, input, faults) }),
  ]));
}

/** The Agent with the tools alk serves, through Mastra's own MCP client. */
async function runOverMcp(start, model) {
  const { MCPClient } = await import("@mastra/mcp");
  const mcp = new MCPClient({
    servers: {
      alk: { url: new URL(start.tools.url), requestInit: { headers: start.tools.headers } },
    },
  });
  try {
    // listToolsets(), Mastra's per-call way, not listTools(): that one names each tool
    // `<server>_<tool>` (alk_write_report), which is not the tool the lane's model calls.
    const agent = new Agent({ id: "alk", name: "alk", instructions: "Follow the task.", model });
    const output = await agent.generate(start.task, { maxSteps: 12,
                                                      toolsets: await mcp.listToolsets() });
    if (output.error) throw output.error;
    return output.text;
  } finally {
    await mcp.disconnect();
  }
}

async function main() {
  // The MCP client's packages too, so that a crash inside them is attributed to the framework.
  alk.ready("@mastra/core", alk.packageVersion("@mastra/core"),
            alk.packagePaths("@mastra/core", "@mastra/schema-compat",
                             ...(OVER_MCP ? ["@mastra/mcp", "@modelcontextprotocol/client",
                                             "@modelcontextprotocol/core"] : [])));
  const start = alk.start();
  if (OVER_MCP) {
    const { name, baseURL, apiKey } = modelEndpoint(start);
    await reportRun(() => runOverMcp(start, { id: `openai/${name}`, url: baseURL, apiKey }));
    return;
  }
  const faults = new Faults(start.faults);
  const { name, baseURL, apiKey } = modelEndpoint(start);
  const agent = new Agent({
    id: "alk", name: "alk", instructions: "Follow the task.",
    model: { id: `openai/${name}`, url: baseURL, apiKey },
    tools: buildTools(faults),
  });
  await reportRun(async () => {
    const output = await agent.generate(start.task, { maxSteps: 12 });
    if (output.error) throw output.error; // an error Mastra returns instead of throwing
    return output.text;
  });
}

await main();
