// A complete worker in TypeScript, run by Node 24 as it is (Node strips the types), whose
// "framework" is Node's own fetch: a tool loop over Chat Completions against the model alk
// serves. A real framework replaces the loop; the rest stays the same. The authors' guide
// (docs/framework-authors.md) walks through it; tests/e2e/test_node_worker.py runs it.
import { createRequire } from "node:module";

// alk hands every worker its SDK as `alk-worker` on NODE_PATH, which require() reads.
const alk: typeof import("alk-worker") = createRequire(import.meta.url)("alk-worker");

alk.hello(); // from here on, console.log and process.stdout go to stderr, not the protocol
alk.ready("node-fetch", process.versions.node);
const start = alk.start(); // exits quietly when alk sends abort (every run's preflight probe)

type Call = { id: string; function: { name: string; arguments: string } };
type Message = { role: string; content: string | null; tool_calls?: Call[];
                 tool_call_id?: string };

const TOOLS: Record<string, (args: { order: string }) => unknown> = {
  lookup_order: ({ order }) => ({ order, status: "open" }),
};
const SCHEMAS = [{ type: "function", function: {
  name: "lookup_order",
  parameters: { type: "object", properties: { order: { type: "string" } } } } }];

// The gateway's OpenAI endpoint, as OPENAI_BASE_URL and OPENAI_API_KEY also give it.
const { base_url: baseURL, api_key: apiKey, name: model } = start.model;
const messages: Message[] = [{ role: "user", content: start.task }];
let reply: Message;
for (;;) {
  const response = await fetch(`${baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model, messages, tools: SCHEMAS }),
  });
  if (!response.ok) throw new Error(`the model answered ${response.status}`);
  reply = (await response.json()).choices[0].message;
  if (!reply.tool_calls?.length) break;
  messages.push(reply);
  for (const call of reply.tool_calls) {
    const name = call.function.name;
    const args = JSON.parse(call.function.arguments);
    alk.toolCall(name, args); // report each call and its result: alk counts them
    const output = TOOLS[name](args);
    alk.toolResult(name, true, { output });
    messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(output) });
  }
}
alk.result(reply.content ?? "", "accepted", { phase: "stopped" });
