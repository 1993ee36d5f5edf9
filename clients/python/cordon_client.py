"""A small client for `cordon serve` (JSON-RPC 2.0 over stdio), stdlib only.

    from cordon_client import CordonClient

    with CordonClient() as cordon:
        result = cordon.run("ls -la", mode="read-only", workspace_root="/srv/project")
        print(result["exitCode"], result["stdout"]["text"])

One client owns one `cordon serve` process and may be used from many
threads at once: every call gets its own id and waits only for its own
reply, so a slow `run` never holds up a `read`. Errors come back as
`CordonError` with the server's stable name (`error.name`, e.g.
"SANDBOX_UNAVAILABLE") and structured `data`. The protocol is documented in
docs/protocol.md.
"""

import itertools
import json
import os
import subprocess
import threading

__all__ = ["CordonClient", "CordonError", "DEFAULT_TIMEOUT"]

# How long `call` waits for a reply unless told otherwise: longer than the
# longest run (600 s) and its kill grace, so only a server that stopped
# answering trips it. `timeout=None` waits without bound.
DEFAULT_TIMEOUT = 660.0


class CordonError(Exception):
    """A JSON-RPC error reply: `code` (number), `name` (stable string),
    `message` (what went wrong and what to do) and `data` (details)."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data or {}
        self.name = self.data.get("code")

    def __repr__(self):
        return f"CordonError({self.code}, {self.name!r}, {self.message!r})"


class CordonClient:
    """Starts `cordon serve` and talks to it.

    `binary` defaults to $CORDON_BIN, else `cordon` on PATH; `args` are
    extra flags for `cordon serve` (e.g. ["--max-mode", "workspace-write"]).
    """

    def __init__(self, binary=None, args=(), cwd=None, env=None):
        binary = binary or os.environ.get("CORDON_BIN", "cordon")
        self._process = subprocess.Popen(
            [binary, "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending = {}
        self._closed = False
        self._reader = threading.Thread(target=self._read_replies, daemon=True)
        self._reader.start()

    # -- the methods ------------------------------------------------------

    def run(self, command, **options):
        """Run `command` in the foreground; returns the result object."""
        return self.call("run", _run_params(command, options))

    def start(self, command, **options):
        """Start `command` as a background task; returns its task id."""
        return self.call("start", _run_params(command, options))["taskId"]

    def read(self, task_id):
        """The task's output since the last read, and its status."""
        return self.call("read", {"taskId": task_id})

    def kill(self, task_id):
        """Kill a running task; True for the first kill of a running task."""
        return self.call("kill", {"taskId": task_id})["killed"]

    def wait(self, task_id, timeout_ms=None):
        """Wait for a task to settle (or `timeout_ms`); returns its state."""
        params = {"taskId": task_id}
        if timeout_ms is not None:
            params["timeoutMs"] = timeout_ms
        return self.call("wait", params)

    def list(self):
        """Every task the server holds, oldest first."""
        return self.call("list")["tasks"]

    def remove(self, task_id):
        """Forget a settled task (freeing its spill files)."""
        return self.call("remove", {"taskId": task_id})["removed"]

    def probe(self):
        """Which sandbox backend confines runs, and why."""
        return self.call("probe")

    def reload(self, path):
        """Swap the policy component; returns what the new one says of itself."""
        return self.call("reload", {"path": str(path)})

    def shutdown(self):
        """Ask the server to stop; it answers, kills live tasks and exits."""
        return self.call("shutdown")

    # -- plumbing ---------------------------------------------------------

    def call(self, method, params=None, timeout=DEFAULT_TIMEOUT):
        """Send one request and wait for its reply (at most `timeout`
        seconds, then TimeoutError); raises CordonError for an error reply."""
        request_id = next(self._ids)
        slot = {"event": threading.Event()}
        with self._lock:
            if self._closed:
                raise CordonError(-32603, "the cordon server is gone", {"code": "CLOSED"})
            self._pending[request_id] = slot
            line = json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
            )
            self._process.stdin.write(line.encode() + b"\n")
            self._process.stdin.flush()
        if not slot["event"].wait(timeout):
            with self._lock:
                self._pending.pop(request_id, None)
            raise TimeoutError(f"no reply to {method} within {timeout} s")
        reply = slot.get("reply")
        if reply is None:
            raise CordonError(-32603, "the cordon server exited before replying", {"code": "CLOSED"})
        if "error" in reply:
            error = reply["error"]
            raise CordonError(error["code"], error["message"], error.get("data"))
        return reply["result"]

    def close(self, timeout=30):
        """Close stdin (the server answers what it was asked, kills live
        tasks and exits) and wait for it; returns its exit code."""
        with self._lock:
            if not self._process.stdin.closed:
                self._process.stdin.close()
        try:
            code = self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            code = self._process.wait()
        self._reader.join(timeout)
        return code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _read_replies(self):
        for line in self._process.stdout:
            reply = json.loads(line)
            with self._lock:
                slot = self._pending.pop(reply.get("id"), None)
            if slot is not None:
                slot["reply"] = reply
                slot["event"].set()
        self._process.stdout.close()
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot["event"].set()


def _run_params(command, options):
    """`run`/`start` params from keyword options: workdir, timeout_ms, env,
    stdin; mode + workspace_root for the request's own policy, or `grant`
    (the whole policy as a dict, e.g. an APPROVAL_REQUIRED error's
    `data["policy"]`) with `approved=True` when a person approved it."""
    params = {"command": command}
    names = {"workdir": "workdir", "timeout_ms": "timeoutMs", "env": "env", "stdin": "stdin"}
    for option, field in names.items():
        if options.get(option) is not None:
            value = options[option]
            params[field] = str(value) if option == "workdir" else value
    mode, root = options.get("mode"), options.get("workspace_root")
    grant = options.get("grant")
    if grant is not None:
        if mode is not None or root is not None:
            raise ValueError("grant replaces mode and workspace_root")
        params["policy"] = grant
    elif mode is not None or root is not None:
        if mode is None or root is None:
            raise ValueError("mode and workspace_root go together")
        params["policy"] = {"mode": mode, "workspaceRoot": str(root)}
    if options.get("approved"):
        if grant is None:
            raise ValueError("approved needs the grant that was approved")
        params["approved"] = True
    unknown = set(options) - set(names) - {"mode", "workspace_root", "grant", "approved"}
    if unknown:
        raise TypeError(f"unknown options: {', '.join(sorted(unknown))}")
    return params
