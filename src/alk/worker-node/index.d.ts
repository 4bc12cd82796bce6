// Types of alk's worker SDK for Node (index.js), protocol v1.

export declare const PROTOCOL_VERSION: 1;
/** Channels a worker may write on; `harness` is alk's alone. */
export type Channel = "agent" | "tool" | "model" | "user" | "framework";
export declare const CHANNELS: readonly Channel[];

export declare class ProtocolError extends Error {}

/** One scripted model turn: a tool call or a text answer (the lane's `script`). */
export interface ScriptTurn {
  tool?: string;
  args?: Record<string, unknown>;
  text?: string;
  [key: string]: unknown;
}

/** A worker-side fault the scenario declares: the `occurrence`-th pass at `point` fails. */
export interface Fault {
  point: string;
  occurrence: number;
  error?: string;
  retryable?: boolean;
  [key: string]: unknown;
}

/** The model alk serves this attempt, when the lane has a [model]. */
export interface ServedModel {
  name?: string;
  api_key?: string;
  mode?: string;
  /** OpenAI's, with /v1. */
  base_url?: string;
  /** Per family: openai, anthropic, gemini (the last two the root, with no /v1). */
  base_urls?: Partial<Record<"openai" | "anthropic" | "gemini", string>>;
  [key: string]: unknown;
}

/** The tools alk serves this attempt over MCP, when the lane has [[tools]]. */
export interface ServedTools {
  url?: string;
  /** What to send with each request: the attempt's key, as Authorization. */
  headers?: Record<string, string>;
  names?: string[];
  [key: string]: unknown;
}

export interface HelloMessage {
  type: "hello";
  protocol: number;
  lane: string;
  [key: string]: unknown;
}

/** The start message: what to run. */
export declare class Start {
  readonly message: Record<string, unknown>;
  readonly runId: string;
  readonly scenarioId: string;
  readonly task: string;
  /** The scenario's free table. */
  readonly input: Record<string, unknown>;
  readonly repeat: number;
  readonly seed: number;
  readonly deadlineS: number | null;
  readonly script: ScriptTurn[];
  readonly faults: Fault[];
  readonly model: ServedModel;
  readonly tools: ServedTools;
  /** After alk killed a previous attempt (a scenario's kill_at): resume, do not redo. */
  readonly attempt: number;
  readonly resume: boolean;
}

export interface ToolResultDetail {
  output?: unknown;
  error?: string;
}

/** One protocol session over a pair of file descriptors (stdin and stdout unless given). */
export declare class Worker {
  constructor(options?: { input?: number; output?: number });
  helloMessage: HelloMessage | null;
  /** Reads alk's hello (blocking); call it first. Sends console.log and stdout to stderr. */
  hello(): HelloMessage;
  /** Reports the framework under test; alk checks it before anything of the scenario runs. */
  ready(framework: string, frameworkVersion: string, packagePaths?: Iterable<string>): void;
  /** Waits for the start message (blocking); exits 0 if alk aborts instead. */
  start(): Start;
  emit(channel: Channel, type: string, payload?: Record<string, unknown>): void;
  toolCall(name: string, args?: Record<string, unknown>): void;
  toolResult(name: string, ok: boolean, detail?: ToolResultDetail): void;
  /** Reports a fault just injected; a declared fault never reported voids the repeat. */
  fault(point: string, occurrence?: number, error?: string, retryable?: boolean): void;
  /** The framework asked the scripted model for turn `turn`, past the script's end. */
  scriptExhausted(turn: number, scriptTurns: number): void;
  /** The run's final answer; `verification` is the worker's claim, never the verdict. */
  result(output: string, stopReason: string, endState?: Record<string, unknown>,
         verification?: unknown): void;
}

/** Install folders of the named npm packages, found from the worker's program. */
export declare function packagePaths(...names: string[]): string[];
/** The version in an npm package's package.json; "" if it is not found. */
export declare function packageVersion(name: string): string;

export declare function hello(): HelloMessage;
export declare function ready(framework: string, frameworkVersion: string,
                              packagePaths?: Iterable<string>): void;
export declare function start(): Start;
export declare function emit(channel: Channel, type: string,
                             payload?: Record<string, unknown>): void;
export declare function toolCall(name: string, args?: Record<string, unknown>): void;
export declare function toolResult(name: string, ok: boolean, detail?: ToolResultDetail): void;
export declare function fault(point: string, occurrence?: number, error?: string,
                              retryable?: boolean): void;
export declare function scriptExhausted(turn: number, scriptTurns: number): void;
export declare function result(output: string, stopReason: string,
                               endState?: Record<string, unknown>, verification?: unknown): void;
