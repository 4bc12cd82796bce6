// alk worker for the Vercel AI SDK: its real tool loop (generateText with tools and a step
// limit, `stopWhen: isStepCount(12)`) and tool dispatch, with @ai-sdk/openai's default model
// path, `openai(name)`: the Responses API, unstreamed, over the provider's own fetch, the
// provider made by createOpenAI and pointed at the model alk serves.
//
// alk's gateway plays the scenario's `script` over the Responses API, answers a call past the
// script with a final text, injects the scenario's `wire_faults` (429, 500, 503, a reset, a
// stall, a truncated or malformed body, broken tool arguments) and records every call: the
// worker neither scripts nor reports the model. Retries are left at the SDK's defaults
// (maxRetries 2, exponential backoff from 2 s that honours retry-after-ms and retry-after, on
// the errors the provider marks retryable) and so are its timeouts, so what the SDK does with a
// fault on the wire is what an application built the ordinary way gets. Worker-side faults are
// the tools' only (`tool`: the n-th tool call throws): the SDK hands a tool's error to the model
// as that call's output. Whatever generateText throws ends the run with stop_reason
// `error:<ErrorType>`: what the framework did with a fault is the finding. The SDK keeps no run
// state of its own, so a resumed attempt (after alk killed the worker) starts over. Telemetry
// stays off (the SDK records only through an integration registered for it): nothing may try
// the network.
//
// With `mcp` on the command line (lanes/ai-sdk-mcp.toml) the tools are alk's, over MCP: the
// SDK's own client, createMCPClient from @ai-sdk/mcp with its built-in streamable HTTP transport
// (`{ type: "http", url, headers }`) at the start message's `tools`, its tools() handed to
// generateText, and no tool of the worker's. Its defaults are kept (no request timeout, no tool
// call retries, protocol discovery on): what they do with a tool that fails, never answers,
// answers late or answers malformed is the finding.
import { alk, Faults, modelEndpoint, reportRun, runTool, TOOL_DOCS } from "../lab_tools.mjs";

alk.hello();
// Imported after hello(): a framework that prints on import cannot break the protocol.
const { generateText, isStepCount, tool } = await import("ai");
const { createOpenAI } = await import("@ai-sdk/openai");
const { z } = await import("zod");
const OVER_MCP = process.argv[2] === "mcp";

function buildTools(faults) {
  const order = z.object({ order: z.string() });
  return Object.fromEntries(Object.entries(TOOL_DOCS).map(([name, description]) => [
    name,
    tool({ description, inputSchema: order, execute: async (args) => runTool(name, args, faults) }),
  ]));
}

/** generateText with the tools alk serves, through the SDK's own MCP client. */
async function runOverMcp(start, model) {
  const { createMCPClient } = await import("@ai-sdk/mcp");
  const client = await createMCPClient({
    transport: { type: "http", url: start.tools.url, headers: start.tools.headers },
  });
  try {
    return (await generateText({
      model,
      instructions: "Follow the task.",
      prompt: start.task,
      tools: await client.tools(),
      stopWhen: isStepCount(12),
    })).text;
  } finally {
    await client.close();
  }
}

async function main() {
  // The MCP client's packages too, so that a crash inside them is attributed to the framework.
  alk.ready("ai", alk.packageVersion("ai"),
            alk.packagePaths("ai", "@ai-sdk/openai", "@ai-sdk/provider-utils", "@ai-sdk/provider",
                             ...(OVER_MCP ? ["@ai-sdk/mcp"] : [])));
  const start = alk.start();
  const { name, baseURL, apiKey } = modelEndpoint(start);
  const openai = createOpenAI({ baseURL, apiKey });
  if (OVER_MCP) {
    await reportRun(() => runOverMcp(start, openai(name)));
    return;
  }
  const faults = new Faults(start.faults);
  await reportRun(async () => (await generateText({
    model: openai(name),
    instructions: "Follow the task.",
    prompt: start.task,
    tools: buildTools(faults),
    stopWhen: isStepCount(12),
  })).text);
}

await main();
