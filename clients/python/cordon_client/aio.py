"""The client for asyncio: the same methods as `CordonClient`, awaited.

    from cordon_client.aio import AsyncCordonClient

    async with await AsyncCordonClient.spawn() as cordon:            # starts `cordon serve`
        result = await cordon.run("ls -la", mode="read-only", workspace_root="/srv/project")

    async with await AsyncCordonClient.connect("/run/cordon/cordon.sock") as cordon:
        task = await cordon.start("make test")
        print((await cordon.wait(task))["status"])

Calls may be in flight at once from many tasks: each gets its own id and
awaits only its own reply. A connection that drops fails the calls in
flight with a `CLOSED` error; this client does not reconnect (make a new
one: it is a new session, the old session's tasks are gone).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import DEFAULT_TIMEOUT, CordonError, Result, _run_params

__all__ = ["AsyncCordonClient"]

# A reply line may carry a whole result (output heads and tails): well
# past asyncio's 64 KiB default line bound.
_LINE_LIMIT = 64 * 1024 * 1024


def _closed(message: str) -> CordonError:
    return CordonError(-32603, message, {"code": "CLOSED"})


class AsyncCordonClient:
    """One `cordon serve` child over its stdio (`spawn`), or one connection
    to a server's Unix socket (`connect`)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        process: Optional[asyncio.subprocess.Process] = None,
    ):
        self._reader = reader
        self._writer = writer
        self._process = process
        self._ids = itertools.count(1)
        self._pending: Dict[int, asyncio.Future] = {}
        self._closed = False
        self._replies = asyncio.get_running_loop().create_task(self._read_replies())

    @classmethod
    async def spawn(
        cls,
        binary: Optional[str] = None,
        args: Sequence[str] = (),
        cwd: Optional[Union[str, os.PathLike]] = None,
        env: Optional[Mapping[str, str]] = None,
    ) -> "AsyncCordonClient":
        """Start `cordon serve` (`binary` defaults to $CORDON_BIN, else
        `cordon` on PATH; `args` are extra flags) and talk over its stdio."""
        binary = binary or os.environ.get("CORDON_BIN", "cordon")
        process = await asyncio.create_subprocess_exec(
            binary,
            "serve",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=None if env is None else dict(env),
            limit=_LINE_LIMIT,
        )
        assert process.stdout is not None and process.stdin is not None
        return cls(process.stdout, process.stdin, process)

    @classmethod
    async def connect(
        cls, path: Union[str, os.PathLike], timeout: float = 30.0
    ) -> "AsyncCordonClient":
        """A client of the server listening on the Unix socket `path`."""
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(os.fspath(path), limit=_LINE_LIMIT), timeout
        )
        return cls(reader, writer)

    # -- the methods ------------------------------------------------------

    async def run(self, command: str, **options: Any) -> Result:
        """Run `command` in the foreground; returns the result object."""
        return await self.call("run", _run_params(command, options))

    async def start(self, command: str, **options: Any) -> str:
        """Start `command` as a background task; returns its task id."""
        return (await self.call("start", _run_params(command, options)))["taskId"]

    async def read(self, task_id: str) -> Result:
        """The task's output since the last read, and its status."""
        return await self.call("read", {"taskId": task_id})

    async def write(self, task_id: str, data: str, eof: bool = False) -> Result:
        """Send `data` to the input of a task started with `open_stdin=True`
        (and end it with `eof`)."""
        return await self.call("write", {"taskId": task_id, "data": data, "eof": eof})

    async def kill(self, task_id: str) -> bool:
        """Kill a running task; True for the first kill of a running task."""
        return (await self.call("kill", {"taskId": task_id}))["killed"]

    async def wait(self, task_id: str, timeout_ms: Optional[int] = None) -> Result:
        """Wait for a task to settle (or `timeout_ms`); returns its state."""
        params: Dict[str, Any] = {"taskId": task_id}
        if timeout_ms is not None:
            params["timeoutMs"] = timeout_ms
        return await self.call("wait", params)

    async def list(self) -> List[Result]:
        """Every task of this session, oldest first."""
        return (await self.call("list"))["tasks"]

    async def remove(self, task_id: str) -> bool:
        """Forget a settled task (freeing its spill files)."""
        return (await self.call("remove", {"taskId": task_id}))["removed"]

    async def probe(self) -> Result:
        """Which sandbox backend confines runs, and why."""
        return await self.call("probe")

    async def call(
        self,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
    ) -> Any:
        """Send one request and await its reply (at most `timeout` seconds,
        then TimeoutError); raises CordonError for an error reply."""
        if self._closed:
            raise _closed("the client is closed")
        request_id = next(self._ids)
        reply: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = reply
        line = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params or {})}
        )
        try:
            self._writer.write(line.encode() + b"\n")
            await self._writer.drain()
            answer = await asyncio.wait_for(reply, timeout)
        except (ConnectionError, BrokenPipeError) as err:
            raise _closed(f"the cordon server is gone: {err}") from err
        except asyncio.TimeoutError:
            raise TimeoutError(f"no reply to {method} within {timeout} s") from None
        finally:
            self._pending.pop(request_id, None)
        if answer is None:
            raise _closed("the cordon server went away before replying")
        if "error" in answer:
            error = answer["error"]
            raise CordonError(error["code"], error["message"], error.get("data"))
        return answer["result"]

    async def close(self, timeout: float = 30) -> int:
        """End the connection (over stdio: close stdin — the server answers
        what it was asked, kills live tasks and exits — and wait for it);
        returns the server's exit code (0 for a socket)."""
        if not self._closed:
            self._closed = True
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, BrokenPipeError):
                pass
        code = 0
        if self._process is not None:
            try:
                code = await asyncio.wait_for(self._process.wait(), timeout)
            except asyncio.TimeoutError:
                self._process.kill()
                code = await self._process.wait()
        await self._replies
        return code

    async def __aenter__(self) -> "AsyncCordonClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _read_replies(self) -> None:
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                reply = json.loads(line)
                waiting = self._pending.get(reply.get("id"))
                if waiting is not None and not waiting.done():
                    waiting.set_result(reply)
        except (OSError, ValueError, asyncio.LimitOverrunError):
            pass
        self._closed = True
        for waiting in self._pending.values():
            if not waiting.done():
                waiting.set_result(None)
