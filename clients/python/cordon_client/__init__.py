"""A small client for `cordon serve` (JSON-RPC 2.0), stdlib only, typed.

    from cordon_client import CordonClient

    with CordonClient() as cordon:                      # starts `cordon serve`
        result = cordon.run("ls -la", mode="read-only", workspace_root="/srv/project")
        print(result["exitCode"], result["stdout"]["text"])

    with CordonClient.connect("/run/cordon/cordon.sock") as cordon:  # a running server
        print(cordon.list())

`cordon_client.aio.AsyncCordonClient` is the same client for asyncio.

A client owns one `cordon serve` process (over its stdio) or one connection
to a server's Unix socket, and may be used from many threads at once: every
call gets its own id and waits only for its own reply, so a slow `run` never
holds up a `read`. A socket client whose connection drops (the server
restarted) fails the calls in flight with a `CLOSED` error and reconnects on
the next call — as a new session: the old session's tasks are gone. Errors
come back as `CordonError` with the server's stable name (`error.name`, e.g.
"SANDBOX_UNAVAILABLE", "BUSY") and structured `data`. The protocol is
documented in docs/protocol.md.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

__all__ = ["CordonClient", "CordonError", "DEFAULT_TIMEOUT", "ERROR_CODES", "Result"]

#: A reply's result object (docs/protocol.md; docs/protocol.schema.json).
Result = Dict[str, Any]

#: Every stable error name the server answers with (`CordonError.name`;
#: docs/protocol.md, "Errors"), by JSON-RPC code, and `CLOSED`, the
#: client's own for a connection that is gone.
ERROR_CODES = {
    "PARSE_ERROR": -32700,
    "INVALID_REQUEST": -32600,
    "METHOD_NOT_FOUND": -32601,
    "INVALID_PARAMS": -32602,
    "SANDBOX_UNAVAILABLE": -32001,
    "POLICY_FAILED": -32002,
    "WORKDIR": -32003,
    "SPAWN_FAILED": -32004,
    "UNKNOWN_TASK": -32005,
    "ABORTED": -32006,
    "POLICY_DENIED": -32007,
    "APPROVAL_REQUIRED": -32008,
    "BUSY": -32009,
    "FORBIDDEN": -32010,
    "UNKNOWN_SPILL": -32011,
    "UNKNOWN_ATTACH_TOKEN": -32012,
    "AUDIT_UNAVAILABLE": -32013,
    "INTERNAL_ERROR": -32603,
    "CLOSED": -32603,
}

# How long `call` waits for a reply unless told otherwise: longer than the
# longest run (600 s) and its kill grace, so only a server that stopped
# answering trips it. `timeout=None` waits without bound.
DEFAULT_TIMEOUT = 660.0


class CordonError(Exception):
    """A JSON-RPC error reply: `code` (number), `name` (stable string),
    `message` (what went wrong and what to do) and `data` (details)."""

    def __init__(self, code: int, message: str, data: Optional[Mapping[str, Any]] = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data: Dict[str, Any] = dict(data or {})
        self.name: Optional[str] = self.data.get("code")

    def __repr__(self):
        return f"CordonError({self.code}, {self.name!r}, {self.message!r})"


class _Process:
    """`cordon serve` as a child process: requests to its stdin."""

    reconnects = False

    def __init__(self, argv, cwd, env):
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd, env=env
        )
        self.replies = self.process.stdout

    def send(self, data):
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def close(self, timeout):
        if not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


class _Socket:
    """One connection to a server's Unix socket."""

    reconnects = True

    def __init__(self, path, timeout):
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.settimeout(timeout)
        self.socket.connect(str(path))
        self.socket.settimeout(None)
        self.replies = self.socket.makefile("rb")

    def send(self, data):
        self.socket.sendall(data)

    def close(self, timeout):
        try:
            self.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.socket.close()
        return 0


class CordonClient:
    """Starts `cordon serve` and talks to it over its stdio, or (with
    `CordonClient.connect`) talks to a server's Unix socket.

    `binary` defaults to $CORDON_BIN, else `cordon` on PATH; `args` are
    extra flags for `cordon serve` (e.g. ["--max-mode", "workspace-write"]).
    """

    def __init__(
        self,
        binary: Optional[str] = None,
        args: Sequence[str] = (),
        cwd: Optional[Union[str, os.PathLike]] = None,
        env: Optional[Mapping[str, str]] = None,
        _opener: Optional[Callable[[], Any]] = None,
    ):
        if _opener is None:
            binary = binary or os.environ.get("CORDON_BIN", "cordon")
            argv = [binary, "serve", *args]
            _opener = lambda: _Process(argv, cwd, env)  # noqa: E731
        self._open = _opener
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending = {}
        self._closed = False
        self._connection = None
        self._reader = None
        self._connect()

    @classmethod
    def connect(cls, path: Union[str, os.PathLike], timeout: float = 30.0) -> "CordonClient":
        """A client of the server listening on the Unix socket `path`
        (`cordon serve --listen unix:PATH`); it reconnects when the
        connection drops."""
        return cls(_opener=lambda: _Socket(path, timeout))

    def _connect(self):
        connection = self._open()
        self._connection = connection
        self._reader = threading.Thread(
            target=self._read_replies, args=(connection,), daemon=True
        )
        self._reader.start()

    # -- the methods ------------------------------------------------------

    def run(self, command: str, **options: Any) -> Result:
        """Run `command` in the foreground; returns the result object."""
        return self.call("run", _run_params(command, options))

    def start(self, command: str, **options: Any) -> str:
        """Start `command` as a background task; returns its task id."""
        return self.call("start", _run_params(command, options))["taskId"]

    def read(self, task_id: str) -> Result:
        """The task's output since the last read, and its status."""
        return self.call("read", {"taskId": task_id})

    def write(self, task_id: str, data: str, eof: bool = False) -> Result:
        """Send `data` to the input of a task started with `open_stdin=True`
        (and end it with `eof`)."""
        return self.call("write", {"taskId": task_id, "data": data, "eof": eof})

    def kill(self, task_id: str) -> bool:
        """Kill a running task; True for the first kill of a running task."""
        return self.call("kill", {"taskId": task_id})["killed"]

    def wait(self, task_id: str, timeout_ms: Optional[int] = None) -> Result:
        """Wait for a task to settle (or `timeout_ms`); returns its state."""
        params = {"taskId": task_id}
        if timeout_ms is not None:
            params["timeoutMs"] = timeout_ms
        return self.call("wait", params)

    def list(self) -> List[Result]:
        """Every task of this session, oldest first."""
        return self.call("list")["tasks"]

    def remove(self, task_id: str) -> bool:
        """Forget a settled task (freeing its spill files)."""
        return self.call("remove", {"taskId": task_id})["removed"]

    def probe(self) -> Result:
        """Which sandbox backend confines runs, and why."""
        return self.call("probe")

    def reload(
        self, path: Optional[Union[str, os.PathLike]] = None, reference: Optional[str] = None
    ) -> Result:
        """Swap the policy component for a file (`path`) or a registry
        `reference` (oci://REGISTRY/REPO[:TAG][@sha256:...]); returns what the
        new one says of itself, its world and digest (and the pinned
        reference when pulled)."""
        if (path is None) == (reference is None):
            raise ValueError("give exactly one of path or reference")
        if reference is not None:
            return self.call("reload", {"reference": reference})
        return self.call("reload", {"path": str(path)})

    def shutdown(self) -> Result:
        """Ask the server to stop; it answers, kills live tasks and exits."""
        return self.call("shutdown")

    # -- plumbing ---------------------------------------------------------

    def detach(self) -> str:
        """Keep this session's tasks for a later connection when this one
        ends (where the operator allows it); returns the attach token."""
        return self.call("detach")["attachToken"]

    def attach(self, token: str) -> List[Result]:
        """Make the tasks detached under `token` this session's; returns
        every task of the session."""
        return self.call("attach", {"attachToken": token})["tasks"]

    def release(self, spill_path: Union[str, os.PathLike]) -> bool:
        """Let a foreground result's spill files go (both of its streams')."""
        return self.call("release", {"spillPath": str(spill_path)})["released"]

    def call(
        self,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
    ) -> Any:
        """Send one request and wait for its reply (at most `timeout`
        seconds, then TimeoutError); raises CordonError for an error reply."""
        request_id = next(self._ids)
        slot = {"event": threading.Event()}
        line = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        )
        with self._lock:
            if self._connection is None:
                if self._closed:
                    raise CordonError(-32603, "the client is closed", {"code": "CLOSED"})
                try:
                    self._connect()
                except OSError as err:
                    raise CordonError(
                        -32603, f"cannot reach the cordon server: {err}", {"code": "CLOSED"}
                    ) from err
            self._pending[request_id] = slot
            try:
                self._connection.send(line.encode() + b"\n")
            except OSError as err:
                self._pending.pop(request_id, None)
                raise CordonError(
                    -32603, f"the cordon server is gone: {err}", {"code": "CLOSED"}
                ) from err
        if not slot["event"].wait(timeout):
            with self._lock:
                self._pending.pop(request_id, None)
            raise TimeoutError(f"no reply to {method} within {timeout} s")
        reply = slot.get("reply")
        if reply is None:
            raise CordonError(-32603, "the cordon server went away before replying", {"code": "CLOSED"})
        if "error" in reply:
            error = reply["error"]
            raise CordonError(error["code"], error["message"], error.get("data"))
        return reply["result"]

    def close(self, timeout: float = 30) -> int:
        """End the connection (over stdio: close stdin — the server answers
        what it was asked, kills live tasks and exits — and wait for it);
        returns the server's exit code (0 for a socket)."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        code = connection.close(timeout) if connection is not None else 0
        if self._reader is not None:
            self._reader.join(timeout)
        return code

    def __enter__(self) -> "CordonClient":
        return self

    def __exit__(self, *exc):
        self.close()

    def _read_replies(self, connection):
        try:
            for line in connection.replies:
                reply = json.loads(line)
                with self._lock:
                    slot = self._pending.pop(reply.get("id"), None)
                if slot is not None:
                    slot["reply"] = reply
                    slot["event"].set()
        except (OSError, ValueError):
            pass
        connection.replies.close()
        with self._lock:
            # A socket client reconnects on its next call; a process is gone.
            if self._connection is connection:
                self._connection = None
                if not connection.reconnects:
                    self._closed = True
            pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot["event"].set()


def _run_params(command: str, options: Mapping[str, Any]) -> Dict[str, Any]:
    """`run`/`start` params from keyword options: workdir, timeout_ms, env,
    stdin; for `start`, open_stdin (then `write`) and tty, rows, cols; mode + workspace_root for the request's own policy, or `grant`
    (the whole policy as a dict, e.g. an APPROVAL_REQUIRED error's
    `data["policy"]`) with `approved=True` when a person approved it."""
    params = {"command": command}
    names = {
        "workdir": "workdir",
        "timeout_ms": "timeoutMs",
        "env": "env",
        "stdin": "stdin",
        "open_stdin": "openStdin",
        "tty": "tty",
        "rows": "rows",
        "cols": "cols",
    }
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
