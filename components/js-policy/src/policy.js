// js-policy: a cordon policy component written in JavaScript, built with
// componentize-js (StarlingMonkey) against the same world as the Rust
// components: cordon:sandbox/executor-policy@0.2.0.
//
// It keeps cordon's contract (components/cases/*.toml) and adds one rule of
// its own: `git push` needs workspace-write, so a read-only request to push
// is an *ask* proposing workspace-write on the same root; a caller that
// approves re-sends it marked approved with that policy, and it runs.
//
// WIT to JS: records are objects with camelCase fields, enums are strings,
// option<T> is T or undefined, u64 is a BigInt, a variant is {tag, val}, and
// a result's err is returned by throwing the payload (not an Error).

import { confine } from 'cordon:sandbox/sandbox@0.2.0';

const DEFAULT_TIMEOUT_MS = 120000n;
const MAX_TIMEOUT_MS = 600000n;
const DEFAULT_ENV = [
  ['NO_COLOR', '1'],
  ['TERM', 'dumb'],
  ['PAGER', 'cat'],
  ['GIT_PAGER', 'cat'],
];
const GIT_PUSH = /(^|[^\w-])git\s+push\b/;

const invalid = (message) => ({ tag: 'invalid-request', val: message });
const unavailable = (mode, detail) => ({ tag: 'sandbox-unavailable', val: { mode, detail } });

function resolve(request, deployment) {
  const command = request.command;
  if (command.trim() === '') throw invalid('command is empty; pass the shell command line to run');
  if (command.includes('\0')) throw invalid('command contains a NUL byte, which no shell can receive');
  let timeoutMs = DEFAULT_TIMEOUT_MS;
  if (request.timeoutMs !== undefined) {
    if (request.timeoutMs === 0n) throw invalid('timeout-ms must be positive (milliseconds)');
    timeoutMs = request.timeoutMs < MAX_TIMEOUT_MS ? request.timeoutMs : MAX_TIMEOUT_MS;
  }
  let workdir = deployment.workdir;
  if (request.workdir !== undefined) {
    if (request.workdir === '') throw invalid('workdir is empty; omit it to use the default');
    workdir = request.workdir.startsWith('/')
      ? request.workdir
      : `${deployment.workdir.replace(/\/+$/, '')}/${request.workdir}`;
  }
  for (const [name, value] of request.env) {
    if (name === '' || name.includes('=') || name.includes('\0')) {
      throw invalid(`env name ${JSON.stringify(name)} is not a valid variable name (non-empty, no '=' or NUL)`);
    }
    if (value.includes('\0')) throw invalid(`env value of ${name} contains a NUL byte`);
  }
  const policy = request.policy ?? deployment.policy;
  if (policy.mode === 'workspace-write' && policy.workspaceRoot === '') {
    throw invalid('workspace-write needs a workspace root; set policy.workspace-root');
  }
  const spec = { command, workdir, timeoutMs, env: [...DEFAULT_ENV, ...request.env], policy };
  if (policy.mode === 'read-only' && GIT_PUSH.test(command)) {
    return {
      tag: 'ask',
      val: {
        reason: 'git push needs workspace-write (it writes the repository\'s refs)',
        policy: { ...policy, mode: 'workspace-write' },
      },
    };
  }
  return { tag: 'allow', val: spec };
}

// This component takes no settings: anything but {} is a mistake.
function validateSettings(settings) {
  if (settings.replace(/\s/g, '') !== '{}' && settings.trim() !== '') {
    throw `js-policy takes no settings, got ${settings.slice(0, 80)}`;
  }
}

function plan(spec) {
  const argv = ['bash', '-c', spec.command];
  if (spec.policy.mode === 'danger-full-access') return { tag: 'unconfined', val: argv };
  try {
    return { tag: 'confined', val: confine(argv, spec.policy) };
  } catch (e) {
    const payload = e && Object.prototype.hasOwnProperty.call(e, 'payload') ? e.payload : undefined;
    throw unavailable(spec.policy.mode, payload?.detail);
  }
}

const containsAny = (line, needles) => {
  const lower = line.toLowerCase();
  return needles.some((needle) => needle !== '' && lower.includes(needle.toLowerCase()));
};

// The exit code of a run that exited nonzero by itself; undefined for exit
// 0, a signal death, a timeout or an abort.
function failedExit(outcome) {
  if (outcome.signal !== undefined || outcome.timedOut || outcome.aborted) return undefined;
  return outcome.exitCode !== undefined && outcome.exitCode !== 0 ? outcome.exitCode : undefined;
}

// The runner's failure detail: its out-of-band status first, else its text.
function runnerFailure(signatures, outcome) {
  if (outcome.runnerStatus.tag === 'launched') return undefined;
  if (outcome.runnerStatus.tag === 'failed') return outcome.runnerStatus.val;
  const code = failedExit(outcome);
  if (code === undefined) return undefined;
  if (signatures.runnerFailureExit !== undefined && signatures.runnerFailureExit !== code) return undefined;
  const line = outcome.stderrTail
    .split('\n')
    .find((l) => containsAny(l, signatures.runnerFailure) && !isNotice(l, signatures));
  return line?.trim();
}

// Exactly one of the runner's notices (a failure signature then the notice,
// nothing else): a line that merely mentions a notice's words is not one.
function isNotice(line, signatures) {
  const text = line.trim().toLowerCase();
  return signatures.runnerFailure.some((sig) =>
    signatures.runnerNotices.some((notice) => text === `${sig}${notice}`.toLowerCase().trim()));
}

function settle(spec, facts, outcome) {
  const mode = spec.policy.mode;
  const wrap = facts.wrap;
  if (wrap === undefined) {
    return facts.background ? undefined : { mode, denied: false, enforcement: undefined, runnerFailed: false };
  }
  const failure = runnerFailure(wrap.signatures, outcome);
  if (failure !== undefined) {
    if (facts.background) return { mode, denied: false, enforcement: wrap.enforcement, runnerFailed: true };
    throw unavailable(mode, failure);
  }
  const denied =
    failedExit(outcome) !== undefined &&
    outcome.stderrTail.split('\n').some((l) => containsAny(l, wrap.signatures.denial));
  return { mode, denied, enforcement: wrap.enforcement, runnerFailed: false };
}

// One connection of an allow-list run: allowed when the grant names it
// (exact host or *.domain, the port or any).
function connect(spec, host, port) {
  const network = spec.policy.network;
  const covers = (e) => {
    if (e.port !== undefined && e.port !== port) return false;
    const pattern = e.host.toLowerCase();
    const target = host.toLowerCase();
    if (pattern.startsWith('*.')) {
      const domain = pattern.slice(1);
      return target.endsWith(domain) && target.length > domain.length;
    }
    return pattern === target;
  };
  if (network.tag === 'full') return;
  if (network.tag === 'allow' && network.val.some(covers)) return;
  throw `${host}:${port} is not in this run's network grant`;
}

export const executor = {
  describe: () => ({ name: 'js-policy', version: '0.2.0', shell: 'bash', defaultMode: 'read-only' }),
  validateSettings,
  resolve,
  connect,
  plan,
  settle,
};
