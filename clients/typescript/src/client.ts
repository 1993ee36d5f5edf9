// A client of `cordon serve`: one Unix-socket connection (`connect`) or one
// `cordon serve` child over its stdio (`spawn`). JSON-RPC 2.0, one request
// per line; calls may be in flight at once, each awaiting its own reply.
// A connection that drops fails the calls in flight with `CLOSED`; make a
// new client to go on (a new session: the old session's tasks are gone).

import { spawn as spawnProcess, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createConnection, type Socket } from "node:net";
import { createInterface } from "node:readline";
import type { Writable, Readable } from "node:stream";

import { CordonError, type ErrorName } from "./errors.js";
import type * as P from "./protocol.js";

/** How long a call waits for its reply unless told otherwise: past the
 * longest run (600 s) and its kill grace. */
export const DEFAULT_TIMEOUT_MS = 660_000;

interface Pending {
  resolve: (reply: Reply) => void;
}

interface Reply {
  id: number | null;
  result?: unknown;
  error?: { code: number; message: string; data: { code: ErrorName; [key: string]: unknown } };
}

/** Options of `CordonClient.spawn`. */
export interface SpawnOptions {
  /** The cordon binary ($CORDON_BIN, else `cordon` on PATH). */
  binary?: string;
  /** Extra flags for `cordon serve` (e.g. `["--max-mode", "workspace-write"]`). */
  args?: string[];
  /** The server's working directory. */
  cwd?: string;
  /** The server's environment. */
  env?: NodeJS.ProcessEnv;
}

export class CordonClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;
  private readonly ended: Promise<void>;

  private constructor(
    private readonly input: Writable,
    output: Readable,
    private readonly child?: ChildProcessWithoutNullStreams,
    private readonly socket?: Socket,
  ) {
    const lines = createInterface({ input: output, crlfDelay: Infinity });
    lines.on("line", (line) => this.dispatch(line));
    this.ended = new Promise((resolve) => lines.once("close", resolve)).then(() => this.fail());
    // A write to a server that is gone fails the calls, not the process.
    input.on("error", () => this.fail());
  }

  /** A client of the server listening on the Unix socket `path`. */
  static connect(path: string, timeoutMs = 30_000): Promise<CordonClient> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(path);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(CordonError.closed(`cannot reach the cordon server at ${path}: timed out`));
      }, timeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.removeAllListeners("error");
        resolve(new CordonClient(socket, socket, undefined, socket));
      });
      socket.once("error", (err) => {
        clearTimeout(timer);
        reject(CordonError.closed(`cannot reach the cordon server at ${path}: ${err.message}`));
      });
    });
  }

  /** Start `cordon serve` and talk to it over its stdio. */
  static spawn(options: SpawnOptions = {}): CordonClient {
    const binary = options.binary ?? process.env.CORDON_BIN ?? "cordon";
    const child = spawnProcess(binary, ["serve", ...(options.args ?? [])], {
      cwd: options.cwd,
      env: options.env,
      stdio: ["pipe", "pipe", "inherit"],
    }) as unknown as ChildProcessWithoutNullStreams;
    return new CordonClient(child.stdin, child.stdout, child);
  }

  /** Send one request and await its reply; rejects with `CordonError`
   * for an error reply, `CLOSED` when the connection is gone. */
  call<M extends P.Method>(
    method: M,
    params: P.Methods[M]["params"],
    timeoutMs: number = DEFAULT_TIMEOUT_MS,
  ): Promise<P.Methods[M]["result"]> {
    if (this.closed) return Promise.reject(CordonError.closed("the client is closed"));
    const id = this.nextId++;
    return new Promise<P.Methods[M]["result"]>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no reply to ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (reply) => {
          clearTimeout(timer);
          if (reply.error) {
            const { code, message, data } = reply.error;
            reject(new CordonError(code, message, data));
          } else if (reply.id === null) {
            reject(CordonError.closed("the cordon server went away before replying"));
          } else {
            resolve(reply.result as P.Methods[M]["result"]);
          }
        },
      });
      this.input.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    });
  }

  /** Run `command` in the foreground. */
  run(command: string, options: Omit<P.RunParams, "command"> = {}): Promise<P.ExecResult> {
    return this.call("run", { ...options, command });
  }

  /** Start `command` as a background task; its id. */
  async start(command: string, options: Omit<P.RunParams, "command"> = {}): Promise<P.TaskId> {
    return (await this.call("start", { ...options, command })).taskId;
  }

  /** The task's output since the last read, and its status. */
  read(taskId: P.TaskId): Promise<P.TaskRead> {
    return this.call("read", { taskId });
  }

  /** Send `data` to a task started with `openStdin` (and end it with `eof`). */
  write(taskId: P.TaskId, data: string, eof = false): Promise<P.WriteResult> {
    return this.call("write", { taskId, data, eof });
  }

  /** Kill a running task: true for the first kill of a running task. */
  async kill(taskId: P.TaskId): Promise<boolean> {
    return (await this.call("kill", { taskId })).killed;
  }

  /** Wait for a task to settle (or `timeoutMs`); its state. */
  wait(taskId: P.TaskId, timeoutMs?: number): Promise<P.TaskSnapshot> {
    return this.call("wait", timeoutMs === undefined ? { taskId } : { taskId, timeoutMs });
  }

  /** Every task of this session, oldest first. */
  async list(): Promise<P.TaskSnapshot[]> {
    return (await this.call("list", {})).tasks;
  }

  /** Forget a settled task (its spill files too). */
  async remove(taskId: P.TaskId): Promise<boolean> {
    return (await this.call("remove", { taskId })).removed;
  }

  /** Which sandbox backend confines runs, and why. */
  probe(): Promise<P.ProbeResult> {
    return this.call("probe", {});
  }

  /** End the connection (a child: close its stdin — it answers what it
   * was asked, kills live tasks and exits — and wait); its exit code (0
   * for a socket). */
  async close(): Promise<number> {
    if (!this.closed) {
      this.closed = true;
      if (this.socket) this.socket.end();
      else this.input.end();
    }
    await this.ended;
    if (!this.child) return 0;
    const child = this.child;
    if (child.exitCode !== null) return child.exitCode;
    return new Promise((resolve) => child.once("exit", (code) => resolve(code ?? 1)));
  }

  private dispatch(line: string): void {
    let reply: Reply;
    try {
      reply = JSON.parse(line) as Reply;
    } catch {
      return;
    }
    if (typeof reply.id !== "number") return;
    const waiting = this.pending.get(reply.id);
    this.pending.delete(reply.id);
    waiting?.resolve(reply);
  }

  private fail(): void {
    this.closed = true;
    for (const waiting of this.pending.values()) waiting.resolve({ id: null });
    this.pending.clear();
  }
}
