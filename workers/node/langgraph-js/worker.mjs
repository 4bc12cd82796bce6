// alk worker for LangGraph.js: a StateGraph with a model node and the prebuilt ToolNode,
// checkpointed in SQLite in the workspace (@langchain/langgraph-checkpoint-sqlite), so that a
// resumed run continues from its last checkpoint, as the Python LangGraph lane does. The model
// node is @langchain/openai's ordinary ChatOpenAI (Chat Completions, unstreamed, through the
// openai package's client), bound to the tools and pointed at the model alk serves.
//
// alk's gateway plays the scenario's `script` over the OpenAI API, answers a call past the
// script with a final text, injects the scenario's `wire_faults` (429, 500, 503, a reset, a
// stall, a truncated or malformed body, broken tool arguments) and records every call: the
// worker neither scripts nor reports the model. The chat model keeps its defaults (LangChain's
// async caller retries a failed call up to 6 times with exponential backoff; the openai client
// underneath is given no retries of its own; the graph has no retry policy), so what it does
// with a fault on the wire is what an application built the ordinary way gets. Worker-side
// faults are the tools' only (`tool`: the n-th tool call throws); ToolNode answers a tool's
// error to the model as the call's output. Whatever the graph throws ends the run with
// stop_reason `error:<ErrorType>`: what the framework did with a fault is the finding.
// LangSmith tracing stays off (it runs only when LANGSMITH_TRACING is set): nothing may try the
// network.
//
// With `mcp` as the first argument (lanes/langgraph-js-mcp.toml) the tools are alk's, over MCP:
// @langchain/mcp-adapters' own MultiServerMCPClient (transport "http", at the start message's
// `tools` URL with its headers), whose getTools() go to the same graph's ToolNode and model,
// with no tool of the worker's. Its defaults are kept: one MCP session for the run, no timeout
// of its own (the MCP SDK's 60 s per request), no retries, ToolNode's error handling.
import { alk, Faults, modelEndpoint, reportRun, runTool, TOOL_DOCS } from "../lab_tools.mjs";

alk.hello();
// Imported after hello(): a framework that prints on import cannot break the protocol.
const { MessagesAnnotation, START, StateGraph } = await import("@langchain/langgraph");
const { ToolNode, toolsCondition } = await import("@langchain/langgraph/prebuilt");
const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
const { HumanMessage } = await import("@langchain/core/messages");
const { tool } = await import("@langchain/core/tools");
const { ChatOpenAI } = await import("@langchain/openai");
const { z } = await import("zod");

function workerTools(faults) {
  const schema = z.object({ order: z.string() });
  return Object.entries(TOOL_DOCS).map(([name, description]) => tool(
    async (args) => JSON.stringify(runTool(name, args, faults)), { name, description, schema }));
}

function buildGraph(start, tools, checkpointer) {
  const { name, baseURL, apiKey } = modelEndpoint(start);
  const llm = new ChatOpenAI({ model: name, apiKey, configuration: { baseURL } }).bindTools(tools);
  const graph = new StateGraph(MessagesAnnotation)
    .addNode("model", async (state) => ({ messages: [await llm.invoke(state.messages)] }))
    .addNode("tools", new ToolNode(tools))
    .addEdge(START, "model")
    .addConditionalEdges("model", toolsCondition)
    .addEdge("tools", "model");
  return graph.compile({ checkpointer });
}

async function runGraph(start, tools) {
  const graph = buildGraph(start, tools, SqliteSaver.fromConnString("checkpoints.sqlite"));
  const config = { configurable: { thread_id: "repeat" }, recursionLimit: 25 };
  // On resume, continue from the last checkpoint; otherwise start the task.
  const pending = start.resume && (await graph.getState(config)).next.length > 0;
  const state = await graph.invoke(pending ? null : { messages: [new HumanMessage(start.task)] },
                                   config);
  return state.messages.at(-1).content;
}

/** The same graph with the tools alk serves over MCP, through the adapters' own client. */
async function runOverMcp(start) {
  const { MultiServerMCPClient } = await import("@langchain/mcp-adapters");
  const client = new MultiServerMCPClient({
    mcpServers: { alk: { transport: "http", url: start.tools.url, headers: start.tools.headers } },
  });
  try {
    return await runGraph(start, await client.getTools());
  } finally {
    await client.close();
  }
}

async function main() {
  // The MCP client's packages too: a crash inside them is the framework's, not the worker's.
  alk.ready("@langchain/langgraph", alk.packageVersion("@langchain/langgraph"),
            alk.packagePaths("@langchain/langgraph", "@langchain/langgraph-checkpoint",
                             "@langchain/langgraph-checkpoint-sqlite", "@langchain/core",
                             "@langchain/openai", "openai", "@langchain/mcp-adapters",
                             "@modelcontextprotocol/sdk"));
  const start = alk.start();
  if (process.argv[2] === "mcp") {
    await reportRun(() => runOverMcp(start));
    return;
  }
  await reportRun(() => runGraph(start, workerTools(new Faults(start.faults))));
}

await main();
