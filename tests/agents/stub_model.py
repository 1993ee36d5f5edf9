"""A scripted model on loopback, for driving real agent programs.

It speaks the two wire formats the agents use -- OpenAI's Responses API
(`POST /v1/responses`, the Codex CLI) and Anthropic's Messages API
(`POST /v1/messages`, Claude Code) -- both streamed as server-sent events.
It plays a script: a list of tool calls, one per turn. Each turn it counts
the tool results the agent has sent back so far and answers with the next
call; when the script is done it answers with plain text. Every request body
is appended to a log (one JSON object per line), which is what a test reads:
the tool results the agent really forwarded to its model.

A step may name a `gone` string: once the agent has sent that call's result
back (for a cancelled call: after the agent gave up on it, while it and the
MCP server still run), the stub looks through the host's process table until
no process's command line contains the string (at most 10 s) and logs what
it found as `{"gone": STRING, "found": [...]}`; as the positive control, it
also logs `{"seen": STRING, "found": [...]}` once the call it answered with
is running.

The tool is found by name in the request's tool list (an agent names an MCP
server's tool in its own way: `mcp__cordon__shell`, `cordon__shell`, ...),
so the script names only the MCP tool (`shell`).

Run: python3 stub_model.py SCRIPT.json LOG.jsonl PORTFILE
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def tool_named(tools, short):
    """The agent's name for the MCP tool `short` of the `cordon` server, and
    the namespace it is listed in (Codex lists an MCP server's tools in a
    namespace tool named after the server; Claude Code names each tool
    `mcp__SERVER__TOOL`)."""
    for tool in tools or []:
        name = tool.get("name") or ""
        if tool.get("type") == "namespace" and "cordon" in name:
            for inner in tool.get("tools") or []:
                if inner.get("name") == short:
                    return short, name
        if "cordon" in name and name.endswith("__" + short):
            return name, None
    return None


def responses_results(body):
    """Codex: the tool outputs in a Responses request's input, in order."""
    out = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            out.append(item.get("output"))
    return out


def messages_results(body):
    """Claude Code: the tool results in a Messages request, in order."""
    out = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append(block.get("content"))
    return out


def processes_with(text):
    """The command lines in the host's process table that contain `text`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(f"{pid}: {line.strip()}")
    return found


def wait_gone(text, within=10.0):
    """Poll until no process has `text` in its command line."""
    until = time.monotonic() + within
    while True:
        found = processes_with(text)
        if not found or time.monotonic() >= until:
            return found
        time.sleep(0.1)


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script = []
    log_path = None
    lock = threading.Lock()
    checked = set()

    def log_message(self, *_):
        pass

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def _log(self, body, path=None):
        with Stub.lock, open(Stub.log_path, "a") as log:
            log.write(json.dumps({"path": path or self.path, "body": body}) + "\n")

    def _json(self, value, status=200):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events):
        data = b"".join(
            f"event: {name}\ndata: {json.dumps(value)}\n\n".encode() for name, value in events
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._log({"method": "GET"})
        if self.path.rstrip("/").endswith("/models"):
            self._json({"data": [{"id": "stub", "object": "model"}], "models": []})
        else:
            self._json({})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self._body()
        self._log(body)
        path = self.path.split("?")[0]
        if path.endswith("/responses"):
            self._responses(body)
        elif path.endswith("/messages/count_tokens"):
            self._json({"input_tokens": 10})
        elif path.endswith("/messages"):
            self._messages(body)
        else:
            self._json({})

    def _check_gone(self, done):
        """For each step answered so far that names a `gone` string, once."""
        for index, step in enumerate(Stub.script[:done]):
            if "gone" in step and index not in Stub.checked:
                Stub.checked.add(index)
                found = wait_gone(step["gone"])
                self._log({"gone": step["gone"], "found": found}, "stub")

    def _next_call(self, tools, done):
        """The script's next call as (tool name, arguments), or None."""
        self._check_gone(done)
        if done >= len(Stub.script):
            return None
        step = Stub.script[done]
        name = tool_named(tools, step["tool"])
        if name is None:
            return None
        if "gone" in step:
            threading.Thread(target=self._watch_start, args=(step["gone"],)).start()
        return name, step["arguments"]

    def _watch_start(self, text):
        """The positive control of a `gone` check: the command did run."""
        until = time.monotonic() + 10
        found = processes_with(text)
        while not found and time.monotonic() < until:
            time.sleep(0.05)
            found = processes_with(text)
        self._log({"seen": text, "found": found}, "stub")

    def _responses(self, body):
        done = len(responses_results(body))
        call = self._next_call(body.get("tools"), done)
        rid = f"resp_{done}"
        if call is None:
            item = {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{done}",
                "content": [{"type": "output_text", "text": "done", "annotations": []}],
            }
        else:
            (name, namespace), arguments = call
            item = {
                "type": "function_call",
                "id": f"fc_{done}",
                "call_id": f"call_{done}",
                "name": name,
                "arguments": json.dumps(arguments),
            }
            if namespace:
                item["namespace"] = namespace
        usage = {
            "input_tokens": 1,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 1,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 2,
        }
        response = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        completed = dict(response, status="completed", output=[item], usage=usage)
        self._sse(
            [
                ("response.created", {"type": "response.created", "response": response}),
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": 0, "item": item},
                ),
                ("response.completed", {"type": "response.completed", "response": completed}),
            ]
        )

    def _messages(self, body):
        done = len(messages_results(body))
        call = self._next_call(body.get("tools"), done)
        mid = f"msg_{done}"
        usage = {"input_tokens": 1, "output_tokens": 1}
        start = {
            "type": "message_start",
            "message": {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "stub"),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        }
        if call is None:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": "done"}
            stop = "end_turn"
        else:
            block = {"type": "tool_use", "id": f"toolu_{done}", "name": call[0][0], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(call[1])}
            stop = "tool_use"
        if body.get("stream") is False or "stream" not in body:
            content = (
                [{"type": "text", "text": "done"}]
                if call is None
                else [dict(block, input=call[1])]
            )
            message = dict(start["message"], content=content, stop_reason=stop)
            self._json(message)
            return
        self._sse(
            [
                ("message_start", start),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": block},
                ),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 1},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )


def main():
    script_path, log_path, port_file = sys.argv[1:4]
    with open(script_path) as f:
        Stub.script = json.load(f)
    Stub.log_path = log_path
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
