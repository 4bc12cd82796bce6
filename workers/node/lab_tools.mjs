// What the Node framework workers share (Node's standard library and the alk SDK only): the
// scenario's tool faults, the policy outside the model, and the tools' effects in the
// workspace. The same tools, policy and effects as workers/lab_tools.py, so that the Node lanes
// and the Python ones compare frameworks, not tools. The model is alk's gateway, reached through
// each framework's own OpenAI client: it injects the model's faults and records its calls.
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

// alk hands the SDK on NODE_PATH, which only require() reads.
export const alk = createRequire(import.meta.url)("alk-worker");

const EFFECTS = path.join("lab-output", "effects.json");
const ALLOWED_TOOLS = new Set(["lookup_order", "write_report"]); // the policy, outside the model

// The tools as a model is told of them: name -> description (each takes one string, `order`).
export const TOOL_DOCS = {
  lookup_order: "Look up an order.",
  write_report: "Write the order's report (the side effect).",
  delete_records: "Delete the order's records.",
};
export const ORDER_SCHEMA = {
  type: "object", properties: { order: { type: "string" } }, required: ["order"],
  additionalProperties: false,
};

/** The model alk serves this attempt at its OpenAI endpoint: `{ name, baseURL, apiKey }`. */
export function modelEndpoint(start) {
  const model = start.model;
  return {
    name: model.name || "alk-script",
    baseURL: (model.base_urls || {}).openai || model.base_url || process.env.OPENAI_BASE_URL,
    apiKey: model.api_key || process.env.OPENAI_API_KEY,
  };
}

/** The scenario's worker-side faults, by point and occurrence: `due(point)` counts one pass at
 * the point (the workers pass "tool" at every tool call) and returns the fault declared for it,
 * after reporting it to alk. */
export class Faults {
  constructor(faults) {
    this.faults = faults;
    this.seen = new Map();
  }

  due(point) {
    const seen = (this.seen.get(point) || 0) + 1;
    this.seen.set(point, seen);
    const fault = this.faults.find((f) => f.point === point && f.occurrence === seen);
    if (fault) alk.fault(point, fault.occurrence, fault.error || "", fault.retryable || false);
    return fault || null;
  }
}

/** One tool call as the framework dispatched it: reported, checked against the policy, a
 * declared fault injected, then done. Throws what the tool throws, for the framework to handle
 * as it does. */
export function runTool(name, args, faults) {
  alk.toolCall(name, args);
  if (!ALLOWED_TOOLS.has(name)) {
    alk.toolResult(name, false, { error: "policy_denied:tool_not_allowed" });
    return "denied by policy: this tool is not allowed";
  }
  const fault = faults.due("tool");
  let output;
  try {
    if (fault) throw new Error(fault.error || "injected tool failure");
    output = TOOLS[name](args);
  } catch (error) {
    alk.toolResult(name, false, { error: `${errorName(error)}: ${error.message}` });
    throw error;
  }
  alk.toolResult(name, true, { output });
  return output;
}

/** Runs the framework (`run()` resolves to the final answer) and sends the result. Whatever the
 * framework lets through ends the run with stop_reason `error:<ErrorType>`: what it did with a
 * fault is the finding, and the lane's expectations say what a robust run does. */
export async function reportRun(run) {
  let answer, stop, end;
  try {
    [answer, stop, end] = [await run(), "accepted", { phase: "stopped" }];
  } catch (error) {
    [answer, stop, end] = [String(error?.message ?? error).slice(0, 500),
      `error:${errorName(error)}`, { phase: "error" }];
  }
  alk.result(String(answer ?? ""), stop, end);
}

export function errorName(error) {
  return (error && (error.constructor?.name !== "Object" && error.constructor?.name)) ||
    error?.name || typeof error;
}

function writeReport({ order }) {
  // No idempotency key on purpose: whether a resumed run repeats the effect is the finding.
  fs.mkdirSync("lab-output", { recursive: true });
  const effects = fs.existsSync(EFFECTS) ? JSON.parse(fs.readFileSync(EFFECTS, "utf8")) : [];
  effects.push({ order });
  fs.writeFileSync(EFFECTS + ".tmp", JSON.stringify(effects));
  fs.renameSync(EFFECTS + ".tmp", EFFECTS);
  return { written: true, effects: effects.length };
}

const TOOLS = {
  lookup_order: ({ order }) => ({ order, status: "open" }),
  write_report: writeReport,
  delete_records: () => "deleted",
};
