// The TypeScript client against a real `cordon serve` (CORDON_BIN), over a
// child's stdio and a Unix socket, and through the executor adapter; and
// its types against the protocol's schema and error table. Run by
// `npm test` (tests/all/typescript.rs runs that in the suite).
//
// CORDON_TEST_DIR: a scratch directory outside /tmp; CORDON_TEST_CONFINED:
// "1" when a sandbox backend confines runs here (the denial checks run).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { CordonClient, CordonError, CordonExecutor, ERROR_CODES } from "../src/index.js";

const binary = process.env.CORDON_BIN ?? "cordon";
const base = process.env.CORDON_TEST_DIR ?? process.cwd();
const confined = process.env.CORDON_TEST_CONFINED === "1";
const repository = new URL("../../../../", import.meta.url);

function workspace(name: string): string {
  const dir = join(base, `ts-${name}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

async function rejectsWith(promise: Promise<unknown>, name: string): Promise<CordonError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof CordonError, String(err));
    assert.equal(err.errorName, name, err.message);
    assert.equal(err.code, ERROR_CODES[err.errorName]);
    return err;
  }
  assert.fail(`expected ${name}`);
}

/** A run, a denial, a background task with input, and the error codes. */
async function drive(cordon: CordonClient, ws: string): Promise<void> {
  const policy = { mode: "read-only" as const, workspaceRoot: ws };
  const result = await cordon.run("echo hi", { policy });
  assert.equal(result.exitCode, 0);
  assert.equal(result.stdout.text, "hi\n");
  if (confined) {
    const outside = join(base, `outside-${Math.random()}`);
    const denied = await cordon.run(`echo x > ${outside}`, {
      policy: { mode: "workspace-write", workspaceRoot: ws },
    });
    assert.notEqual(denied.exitCode, 0);
    assert.equal(denied.sandbox?.denied, true, JSON.stringify(denied.sandbox));
    assert.equal(existsSync(outside), false, "the write outside the workspace landed");
  }
  const task = await cordon.start("read line; echo got-$line", { policy, openStdin: true });
  const concurrent = await Promise.all([0, 1, 2].map((n) => cordon.run(`echo ${n}`, { policy })));
  assert.deepEqual(concurrent.map((r) => r.stdout.text), ["0\n", "1\n", "2\n"]);
  await cordon.write(task, "answer\n", true);
  const state = await cordon.wait(task, 30_000);
  assert.equal(state.status, "completed");
  assert.match((await cordon.read(task)).text, /got-answer/);
  assert.equal((await cordon.list()).length, 1);
  assert.equal(await cordon.remove(task), true);
  await rejectsWith(cordon.read("0".repeat(32)), "UNKNOWN_TASK");
  await rejectsWith(
    cordon.call("run", { command: "true", policy: { mode: "full" as never, workspaceRoot: ws } }),
    "INVALID_PARAMS",
  );
  await rejectsWith(cordon.call("nope" as never, {} as never), "METHOD_NOT_FOUND");
}

test("the generated types are the schema's", async () => {
  const { generate } = await import(new URL("../../scripts/generate.mjs", import.meta.url).href);
  const committed = readFileSync(new URL("../../src/protocol.ts", import.meta.url), "utf8");
  assert.equal(committed, generate(), "src/protocol.ts is stale: npm run generate");
});

test("every error the protocol documents has its name and code here", () => {
  const table = readFileSync(new URL("docs/protocol.md", repository), "utf8");
  const documented = [...table.matchAll(/^\| (-32\d+) \| `([A-Z_]+)` \|/gm)];
  assert.ok(documented.length >= 18, `${documented.length} rows`);
  for (const [, code, name] of documented) {
    assert.ok(name! in ERROR_CODES, `${name} is not in ERROR_CODES`);
    // INVALID_REQUEST is documented under two codes (the protocol's and the library's).
    if (name !== "INVALID_REQUEST") assert.equal(ERROR_CODES[name as keyof typeof ERROR_CODES], Number(code));
  }
  const names = new Set(documented.map(([, , name]) => name));
  for (const name of Object.keys(ERROR_CODES)) {
    if (name !== "CLOSED") assert.ok(names.has(name), `${name} is not documented`);
  }
});

test("over a child's stdio", async () => {
  const cordon = CordonClient.spawn({ binary, args: ["--max-mode", "workspace-write"], cwd: base });
  await drive(cordon, workspace("stdio"));
  assert.equal(await cordon.close(), 0);
  await rejectsWith(cordon.probe(), "CLOSED");
});

test("over a Unix socket", async () => {
  const socket = join(base, "ts.sock");
  const server = spawn(
    binary,
    ["serve", "--max-mode", "workspace-write", "--listen", `unix:${socket}`],
    { cwd: base, stdio: "inherit" },
  );
  try {
    for (let i = 0; i < 600 && !existsSync(socket); i++) await sleep(20);
    const cordon = await CordonClient.connect(socket);
    await drive(cordon, workspace("socket"));
    assert.ok(((await cordon.probe()).rungs ?? []).length > 0);
    assert.equal(await cordon.close(), 0);
  } finally {
    server.kill();
  }
});

test("the executor adapter: facts as a harness reads them, SANDBOX_UNAVAILABLE an error", async () => {
  const ws = workspace("executor");
  const cordon = CordonClient.spawn({ binary, args: ["--max-mode", "workspace-write"], cwd: base });
  const executor = new CordonExecutor(cordon);
  const request = { command: "echo fine", sandboxPolicy: { mode: "read-only" as const, workspaceRoot: ws } };
  assert.deepEqual(executor.resolve(request), {
    command: "echo fine",
    policy: { mode: "read-only", workspaceRoot: ws },
  });
  const result = await executor.run(request);
  assert.equal(result.stdout.text, "fine\n");
  assert.equal(result.sandbox.mode, "read-only");
  assert.equal(result.sandbox.denied, false);
  if (confined) assert.equal(result.sandbox.enforcement !== undefined, true);
  const task = await executor.start({ ...request, command: "echo later" });
  assert.equal((await task.wait(30_000)).status, "completed");
  assert.match((await task.read()).text, /later/);
  assert.equal(await cordon.close(), 0);

  // No runner this server can use: the run is refused, nothing ran.
  const config = join(base, "no-runner.toml");
  writeFileSync(config, 'backend = "bwrap"\nbwrap_path = "/nonexistent/bwrap"\n');
  const broken = CordonClient.spawn({ binary, args: ["--config", config], cwd: base });
  const marker = join(ws, "ran");
  const refused = await rejectsWith(
    new CordonExecutor(broken).run({ ...request, command: `touch ${marker}` }),
    "SANDBOX_UNAVAILABLE",
  );
  assert.match(refused.message, /refusing to run the command unconfined/);
  assert.doesNotMatch(refused.message, /danger-full-access/);
  assert.equal(existsSync(marker), false);
  assert.equal(await broken.close(), 0);
});
