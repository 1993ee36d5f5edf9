"""Real agent programs mount `cordon mcp` from docs/mcp.md's snippets.

The Codex CLI (`@openai/codex`) and Claude Code (`@anthropic-ai/claude-code`),
installed from npm by scripts/setup.sh, each run one non-interactive task
against a scripted model on loopback (stub_model.py). The model calls
cordon's `shell` tool five times; the stub logs every request the agent
sends it, and the test reads from that log what the agent really forwarded
to its model as each tool result -- not what cordon meant to send:

* a command's output, both ends of a large one (the agent's own cut must not
  lose the end), and its exit line;
* a write to the host's `/etc` the sandbox denied, with the marker and the
  don't-retry guidance (and `/etc` unchanged: checked on the host);
* a command the policy refuses, with the policy's reason (it never ran);
* a command the policy asks about, with the approval's outcome as cordon
  told it (the directory it would delete is still there);
* a call the agent gives up on at its tool timeout: the agent cancels it and
  the command is gone from the host's process table while the session still
  runs (seen running first, as a positive control), and never finished.

Environment: CORDON_BIN, CORDON_AGENTS_BIN (the directory holding `codex` and
`claude`), CORDON_RULES_POLICY, CORDON_RULES_SETTINGS, CORDON_TEST_DIR,
CORDON_TEST_CONFINED.
"""

import json
import os
import pathlib
import re
import shutil
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = pathlib.Path(__file__).resolve().parent
DOCS = HERE.parent.parent / "docs" / "mcp.md"
CORDON = os.environ["CORDON_BIN"]
AGENTS = pathlib.Path(os.environ["CORDON_AGENTS_BIN"])
CONFINED = os.environ.get("CORDON_TEST_CONFINED") == "1"
# How long the agent waits for a tool call before it gives up and cancels it.
TOOL_TIMEOUT_S = 3

# The placeholders of docs/mcp.md's snippets.
PROJECT = "/path/to/project"
DEPLOYMENT = "/etc/cordon/cordon.toml"


def snippet(name):
    """The fenced block after `<!-- snippet: NAME -->` in docs/mcp.md."""
    text = DOCS.read_text()
    found = re.search(
        r"<!-- snippet: " + re.escape(name) + r" -->\s*```[a-z]*\n(.*?)```", text, re.S
    )
    assert found, f"docs/mcp.md has no snippet {name!r}"
    return found.group(1)


def texts(output):
    """The text an agent forwarded as one tool result (a string, or a list
    of text parts in either API's shape)."""
    if isinstance(output, str):
        return output
    parts = []
    for part in output or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "\n".join(parts)


class Scenario:
    """One agent session's files, the stub model, and what it logged."""

    def __init__(self, agent):
        self.tag = f"{agent}{os.getpid()}"
        self.root = pathlib.Path(tempfile.mkdtemp(dir=os.environ["CORDON_TEST_DIR"]))
        self.root.chmod(0o755)
        self.workspace = self.root / "project"
        self.workspace.mkdir()
        (self.workspace / "victim").mkdir()
        (self.workspace / "victim" / "keep").write_text("keep\n")
        self.home = self.root / "home"
        self.home.mkdir()
        self.etc_probe = pathlib.Path(f"/etc/cordon-agent-{self.tag}")
        self.sleeper = f"sleep 31.{os.getpid()}"
        self.deployment = self.root / "cordon.toml"
        self.deployment.write_text(
            "[policy]\n"
            f"file = {json.dumps(os.environ['CORDON_RULES_POLICY'])}\n"
            f"settings = {json.dumps(os.environ['CORDON_RULES_SETTINGS'])}\n"
        )
        self.log = self.root / "requests.jsonl"
        # The policy compiled into this HOME's cache first, as after any
        # earlier run: `codex exec` starts its first turn without a server
        # that is not ready within about a second, and a cold compile of
        # the rules component takes about that in a debug build.
        warm = subprocess.run(
            [CORDON, "run", "--config", str(self.deployment), "--", "true"],
            cwd=self.workspace,
            env={**os.environ, "HOME": str(self.home)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert warm.returncode == 0, warm.stderr
        script = [
            {
                "tool": "shell",
                "arguments": {
                    "command": "echo hello-from-cordon; seq 1 40000 | sed 's/^/line /'; "
                    "echo END-OF-OUTPUT"
                },
            },
            {"tool": "shell", "arguments": {"command": f"touch {self.etc_probe}"}},
            {
                "tool": "shell",
                "arguments": {"command": "touch refused-ran; curl https://example.com"},
            },
            {"tool": "shell", "arguments": {"command": "rm -rf victim"}},
            {
                "tool": "shell",
                "arguments": {"command": f"{self.sleeper}; touch cancelled-ran"},
                "gone": self.sleeper,
            },
        ]
        (self.root / "script.json").write_text(json.dumps(script))
        port_file = self.root / "port"
        self.stub = subprocess.Popen(
            [sys.executable, str(HERE / "stub_model.py"), "script.json", str(self.log), "port"],
            cwd=self.root,
        )
        until = time.monotonic() + 10
        while not port_file.exists():
            assert time.monotonic() < until, "the stub model did not start"
            time.sleep(0.05)
        self.port = int(port_file.read_text())

    def mount(self, text):
        """A snippet with its placeholders filled in for this session."""
        return text.replace(PROJECT, str(self.workspace)).replace(
            DEPLOYMENT, str(self.deployment)
        )

    def run(self, argv, env):
        agent = subprocess.run(
            argv,
            cwd=self.workspace,
            env={**os.environ, "HOME": str(self.home), **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )
        return agent

    def records(self):
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def close(self):
        self.stub.send_signal(signal.SIGTERM)
        self.stub.wait(timeout=10)
        self.etc_probe.unlink(missing_ok=True)
        shutil.rmtree(self.root, ignore_errors=True)


class RealAgents(unittest.TestCase):
    maxDiff = None

    def check(self, scenario, results, agent):
        """What the agent forwarded to its model, call by call, and the host."""
        records = scenario.records()
        self.assertGreaterEqual(
            len(results), 5, f"{agent} forwarded {len(results)} results: {records}"[:6000]
        )
        output, denied, refused, asked, cancelled = (texts(r) for r in results[:5])

        self.assertIn("hello-from-cordon", output, "the head of a large output was lost")
        self.assertIn("END-OF-OUTPUT", output, "the end of a large output was lost")
        self.assertIn("exit code 0", output)
        self.assertLess(len(output), 16 << 10, "a large output reached the model whole")

        if CONFINED:
            self.assertIn("[sandbox: denied]", denied)
            self.assertIn("do not retry", denied)
            self.assertFalse(scenario.etc_probe.exists(), "the host's /etc was written")

        self.assertIn("[refused by policy]", refused)
        self.assertIn("vendor the file into the workspace", refused)
        self.assertFalse((scenario.workspace / "refused-ran").exists(), "a refused command ran")

        self.assertIn("[needs approval] a recursive delete cannot be undone", asked)
        self.assertIn("The command did not run", asked)
        outcomes = ["was declined", "dismissed or cancelled", "No person could be asked"]
        self.assertTrue(any(o in asked for o in outcomes), asked)
        self.assertTrue((scenario.workspace / "victim" / "keep").exists(), "it was deleted")

        seen = [r["body"] for r in records if "seen" in r["body"]]
        gone = [r["body"] for r in records if "gone" in r["body"]]
        self.assertTrue(seen and seen[0]["found"], f"the long call never ran: {seen}")
        self.assertTrue(gone, f"{agent} never came back after its tool timeout: {cancelled}")
        self.assertEqual(gone[0]["found"], [], "a cancelled call's command still runs")
        time.sleep(0.5)
        self.assertFalse((scenario.workspace / "cancelled-ran").exists())
        return asked

    def test_codex_cli_forwards_cordons_words(self):
        scenario = Scenario("codex")
        try:
            mounted = scenario.mount(snippet("codex"))
            mounted = re.sub(r'(?m)^command = "cordon"$', f"command = {json.dumps(CORDON)}", mounted)
            mounted = re.sub(r"(?m)^tool_timeout_sec = \d+$", f"tool_timeout_sec = {TOOL_TIMEOUT_S}", mounted)
            self.assertIn(f"tool_timeout_sec = {TOOL_TIMEOUT_S}", mounted)
            codex_home = scenario.root / "codex"
            codex_home.mkdir()
            (codex_home / "config.toml").write_text(
                'model = "stub"\nmodel_provider = "stub"\n\n'
                "[model_providers.stub]\n"
                'name = "stub"\n'
                f'base_url = "http://127.0.0.1:{scenario.port}/v1"\n'
                'wire_api = "responses"\n'
                'env_key = "STUB_API_KEY"\n\n' + mounted
            )
            agent = scenario.run(
                [str(AGENTS / "codex"), "exec", "--skip-git-repo-check", "Do the task."],
                {"CODEX_HOME": str(codex_home), "STUB_API_KEY": "stub"},
            )
            self.assertEqual(agent.returncode, 0, agent.stderr[-4000:])
            requests = [r["body"] for r in scenario.records() if r["path"].endswith("/responses")]
            results = max(
                (
                    [
                        item["output"]
                        for item in body.get("input") or []
                        if isinstance(item, dict) and item.get("type") == "function_call_output"
                    ]
                    for body in requests
                ),
                key=len,
                default=[],
            )
            asked = self.check(scenario, results, "codex")
            # `codex exec` has no person: it declines every elicitation.
            self.assertIn("was declined", asked)
        finally:
            scenario.close()

    def test_claude_code_forwards_cordons_words(self):
        scenario = Scenario("claude")
        try:
            config = json.loads(scenario.mount(snippet("claude-code-mcp-json")))
            config["mcpServers"]["cordon"]["command"] = CORDON
            mcp_json = scenario.root / "mcp.json"
            mcp_json.write_text(json.dumps(config))
            allowed = snippet("claude-code-allow").strip()
            agent = scenario.run(
                [
                    str(AGENTS / "claude"),
                    "-p",
                    "Do the task.",
                    "--mcp-config",
                    str(mcp_json),
                    "--strict-mcp-config",
                    "--allowedTools",
                    allowed,
                ],
                {
                    "CLAUDE_CONFIG_DIR": str(scenario.home / ".claude"),
                    "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{scenario.port}",
                    "ANTHROPIC_API_KEY": "stub",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    "MCP_TOOL_TIMEOUT": str(TOOL_TIMEOUT_S * 1000),
                },
            )
            self.assertEqual(agent.returncode, 0, agent.stdout[-2000:] + agent.stderr[-4000:])
            messages = [r["body"] for r in scenario.records() if "/messages" in r["path"]]
            last = max(messages, key=lambda body: len(body.get("messages") or []))
            results = [
                block.get("content")
                for message in last["messages"]
                if message.get("role") == "user" and isinstance(message.get("content"), list)
                for block in message["content"]
                if isinstance(block, dict) and block.get("type") == "tool_result"
            ]
            asked = self.check(scenario, results, "claude")
            # `claude -p` has no person: it cancels every elicitation.
            self.assertIn("dismissed or cancelled", asked)
        finally:
            scenario.close()

    def test_the_documented_claude_mcp_add_line_writes_the_documented_mcp_json(self):
        argv = shlex.split(snippet("claude-code-add").strip())
        self.assertEqual(argv[0], "claude")
        with tempfile.TemporaryDirectory(dir=os.environ["CORDON_TEST_DIR"]) as project:
            home = pathlib.Path(project) / "home"
            home.mkdir()
            added = subprocess.run(
                [str(AGENTS / "claude"), *argv[1:]],
                cwd=project,
                env={**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
            self.assertEqual(added.returncode, 0, added.stdout + added.stderr)
            written = json.loads((pathlib.Path(project) / ".mcp.json").read_text())
            self.assertEqual(written, json.loads(snippet("claude-code-mcp-json")))


if __name__ == "__main__":
    unittest.main()
