// An adapter with the shape of a TypeScript harness's local shell
// executor — `resolve`, `run`, `start`; results with `sandbox: {mode,
// denied, enforcement}`; `SANDBOX_UNAVAILABLE` an error, never a result —
// so a harness swaps its executor for cordon without changing its callers.
// It adds no decisions of its own: `resolve` says what will be sent, and
// cordon (the host and its policy component) decides everything else.

import type { CordonClient } from "./client.js";
import type * as P from "./protocol.js";

/** A harness's request to run a command. */
export interface ExecutorRequest {
  command: string;
  workdir?: string;
  timeoutMs?: number;
  env?: Record<string, string>;
  stdin?: string;
  /** The request's own policy (an approved escalation, a session's mode);
   * without one the deployment's default applies. */
  sandboxPolicy?: { mode: P.SandboxMode; workspaceRoot: string };
  /** The grant a person approved (an `APPROVAL_REQUIRED` error's `data.policy`). */
  approvedPolicy?: P.SandboxPolicy;
}

/** What a harness reads back: the result, with the sandbox facts. */
export interface ExecutorResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  aborted: boolean;
  timeoutMs: number;
  stdout: P.StreamOutput;
  stderr: P.StreamOutput;
  /** `{mode, denied, enforcement?}`; `enforcement` absent when unconfined. */
  sandbox: { mode: P.SandboxMode; denied: boolean; enforcement?: P.Enforcement };
}

/** A background task. */
export interface ExecutorTask {
  id: P.TaskId;
  read(): Promise<P.TaskRead>;
  write(data: string, eof?: boolean): Promise<P.WriteResult>;
  wait(timeoutMs?: number): Promise<P.TaskSnapshot>;
  kill(): Promise<boolean>;
}

export class CordonExecutor {
  constructor(private readonly client: CordonClient) {}

  /** The `run`/`start` params `request` is sent as. */
  resolve(request: ExecutorRequest): P.RunParams {
    const params: P.RunParams = { command: request.command };
    if (request.workdir !== undefined) params.workdir = request.workdir;
    if (request.timeoutMs !== undefined) params.timeoutMs = request.timeoutMs;
    if (request.env !== undefined) params.env = request.env;
    if (request.stdin !== undefined) params.stdin = request.stdin;
    if (request.approvedPolicy !== undefined) {
      params.policy = request.approvedPolicy;
      params.approved = true;
    } else if (request.sandboxPolicy !== undefined) {
      params.policy = { ...request.sandboxPolicy };
    }
    return params;
  }

  /** Run in the foreground; rejects with `CordonError` (e.g.
   * `SANDBOX_UNAVAILABLE`: nothing ran). */
  async run(request: ExecutorRequest): Promise<ExecutorResult> {
    const { command, ...options } = this.resolve(request);
    const result = await this.client.run(command, options);
    return {
      exitCode: result.exitCode ?? null,
      signal: result.signal ?? null,
      timedOut: result.timedOut,
      aborted: result.aborted,
      timeoutMs: result.timeoutMs,
      stdout: result.stdout,
      stderr: result.stderr,
      sandbox: facts(result.sandbox, request),
    };
  }

  /** Start in the background. */
  async start(request: ExecutorRequest & { openStdin?: boolean }): Promise<ExecutorTask> {
    const { command, ...options } = this.resolve(request);
    const id = await this.client.start(command, { ...options, openStdin: request.openStdin });
    const client = this.client;
    return {
      id,
      read: () => client.read(id),
      write: (data, eof = false) => client.write(id, data, eof),
      wait: (timeoutMs) => client.wait(id, timeoutMs),
      kill: () => client.kill(id),
    };
  }
}

/** The facts a result carries: cordon stamps them on every run it
 * confined and on `danger-full-access` (`{mode, denied: false}`). */
function facts(
  sandbox: P.SandboxFacts | null | undefined,
  request: ExecutorRequest,
): ExecutorResult["sandbox"] {
  if (!sandbox) {
    return { mode: request.sandboxPolicy?.mode ?? "danger-full-access", denied: false };
  }
  const out: ExecutorResult["sandbox"] = { mode: sandbox.mode, denied: sandbox.denied };
  if (sandbox.enforcement) out.enforcement = sandbox.enforcement;
  return out;
}
