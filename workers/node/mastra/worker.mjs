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
import { alk, Faults, modelEndpoint, reportRun, runTool, TOOL_DOCS } from "../lab_tools.mjs";

alk.hello();
process.env.MASTRA_TELEMETRY_DISABLED = "1";
// Imported after hello(): a framework that prints on import cannot break the protocol.
const { Agent } = await import("@mastra/core/agent");
const { createTool } = await import("@mastra/core/tools");
const { z } = await import("zod");

function buildTools(faults) {
  const inputSchema = z.object({ order: z.string() });
  return Object.fromEntries(Object.entries(TOOL_DOCS).map(([name, description]) => [
    name,
    createTool({ id: name, description, inputSchema,
                 execute: async (input) => runTool(name, input, faults) }),
  ]));
}

async function main() {
  alk.ready("@mastra/core", alk.packageVersion("@mastra/core"),
            alk.packagePaths("@mastra/core", "@mastra/schema-compat"));
  const start = alk.start();
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
