"""`cordon mcp` driven by the official MCP Python SDK (`mcp`), a client
cordon did not write.

Run by tests/all/mcp.rs, which sets CORDON_BIN (the binary under test),
CORDON_TEST_DIR (a scratch directory outside /tmp), CORDON_TEST_CONFINED
("1" when a sandbox backend confines runs here), CORDON_RULES_POLICY and
CORDON_RULES_SETTINGS (rules-policy and its rule file), CORDON_RENDER_POLICY
(a component with its own `render` texts), CORDON_HOSTILE_POLICY (a
component that misbehaves on purpose).
"""

import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time
import unittest

from mcp import ClientSession, StdioServerParameters
from mcp import types
from mcp.client.stdio import stdio_client

CONFINED = os.environ.get("CORDON_TEST_CONFINED") == "1"
# CI as root turns the kernel's audit on (scripts/test.sh): Landlock's
# denials are then named by the kernel, not inferred from text.
KERNEL_REQUIRED = (
    os.environ.get("CORDON_E2E_REQUIRE_KERNEL_DENIALS") == "1"
    and os.environ.get("CORDON_E2E_PROFILE", "root") == "root"
)
# Programs ask for the facts as structured content; agents read the text.
FACTS = ["--structured-content"]


def host_processes_with(needle):
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmdline:
            found.append(int(entry.name))
    return found


async def session_with(args, body, elicitation=None, roots=None, cwd=None, facts=True):
    params = StdioServerParameters(
        command=os.environ["CORDON_BIN"],
        args=["mcp", *(FACTS if facts else []), *args],
        cwd=cwd or os.environ["CORDON_TEST_DIR"],
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(
            read, write, elicitation_callback=elicitation, list_roots_callback=roots
        ) as session:
            session.initialized = await session.initialize()
            return await body(session)


def text(result):
    return "".join(block.text for block in result.content if block.type == "text")


class CordonMcp(unittest.TestCase):
    def test_tools_are_listed_with_their_input_schemas(self):
        async def body(session):
            return await session.list_tools()

        tools = {tool.name: tool for tool in asyncio.run(session_with([], body)).tools}
        self.assertEqual(
            set(tools),
            {"shell", "shell_output", "shell_write", "shell_kill", "shell_list", "shell_mode"},
        )
        # Clients need not ask before the harmless ones.
        for harmless in ("shell_output", "shell_list"):
            self.assertTrue(tools[harmless].annotations.read_only_hint, harmless)
        self.assertTrue(tools["shell"].annotations.destructive_hint)
        self.assertFalse(tools["shell"].annotations.read_only_hint or False)
        shell = tools["shell"].input_schema
        self.assertEqual(shell["required"], ["command"])
        self.assertIn("background", shell["properties"])
        self.assertIn("escalate", shell["properties"])
        self.assertIn("Sandbox now: read-only", tools["shell"].description)
        self.assertNotIn("policy", shell["properties"], "the model never names the policy")
        self.assertNotIn("approved", shell["properties"], "the model never approves")
        self.assertFalse(shell.get("additionalProperties", True), "no field beyond the schema")
        self.assertEqual(tools["shell_output"].input_schema["required"], ["jobId"])
        self.assertIn("waitMs", tools["shell_output"].input_schema["properties"])

    def test_a_command_runs_and_one_the_sandbox_denies_says_so(self):
        marker = pathlib.Path("/etc/cordon-mcp-denied")

        async def body(session):
            ok = await session.call_tool("shell", {"command": "echo hello"})
            denied = await session.call_tool(
                "shell", {"command": f"echo before; touch {marker}"}
            )
            return ok, denied

        ok, denied = asyncio.run(session_with([], body))
        self.assertFalse(ok.is_error)
        self.assertIn("hello\n", text(ok))
        self.assertIn("exit code 0", text(ok))
        self.assertEqual(ok.structured_content["exitCode"], 0)
        if CONFINED:
            self.assertTrue(denied.is_error)
            self.assertIn("[sandbox: denied]", text(denied))
            self.assertIn("do not retry", text(denied))
            self.assertTrue(denied.structured_content["sandbox"]["denied"])
            self.assertFalse(marker.exists(), "the host's /etc was written")

    def test_a_denial_the_kernel_saw_names_its_path_for_the_model(self):
        # Landlock's rung, a command that carries on after the denial (exit 0).
        marker = pathlib.Path("/etc/cordon-mcp-kernel-denied")

        async def body(session):
            return await session.call_tool(
                "shell", {"command": f"touch {marker}; echo carried on"}
            )

        denied = asyncio.run(session_with(["--backend", "landlock"], body))
        self.assertFalse(marker.exists(), "the host's /etc was written")
        self.assertIn("carried on", text(denied))
        sandbox = denied.structured_content["sandbox"]
        if sandbox["evidence"] == "kernel":
            self.assertTrue(sandbox["denied"])
            self.assertTrue(denied.is_error)
            self.assertIn("[sandbox: denied]", text(denied))
            self.assertIn("refused by the kernel: fs.make_reg on /etc", text(denied))
        else:
            self.assertFalse(KERNEL_REQUIRED, f"audit is on here, yet: {sandbox}")
            self.assertEqual(sandbox["evidence"], "text")
            print("SKIPPED the kernel's naming of a denial: this host cannot read audit records",
                  file=sys.stderr)

    def test_a_command_the_policy_refuses_never_runs(self):
        args = [
            "--policy", os.environ["CORDON_RULES_POLICY"],
            "--settings", os.environ["CORDON_RULES_SETTINGS"],
        ]
        marker = pathlib.Path(os.environ["CORDON_TEST_DIR"]) / "refused-ran"

        async def body(session):
            return await session.call_tool(
                "shell", {"command": f"touch {marker}; curl https://example.com"}
            )

        refused = asyncio.run(session_with(args, body))
        self.assertTrue(refused.is_error)
        self.assertIn("[refused by policy]", text(refused))
        self.assertIn("vendor the file", text(refused))
        self.assertEqual(refused.structured_content["code"], "POLICY_DENIED")
        self.assertFalse(marker.exists(), "a refused command ran")

    def test_background_jobs_are_read_to_completion_and_killed(self):
        mark = f"77.{os.getpid()}"

        async def body(session):
            started = await session.call_tool(
                "shell",
                {"command": "for i in 1 2 3; do echo tick $i; sleep 0.2; done", "background": True},
            )
            job = started.structured_content["jobId"]
            seen = ""
            for _ in range(200):
                read = await session.call_tool("shell_output", {"jobId": job})
                seen += text(read)
                if read.structured_content["job"] is not None:
                    break
                await asyncio.sleep(0.05)
            sleeper = await session.call_tool(
                "shell", {"command": f"sleep {mark}", "background": True}
            )
            victim = sleeper.structured_content["jobId"]
            for _ in range(100):
                if host_processes_with(f"sleep {mark}"):
                    break
                await asyncio.sleep(0.05)
            listed = await session.call_tool("shell_list", {})
            killed = await session.call_tool("shell_kill", {"jobId": victim})
            return seen, listed, killed, victim

        seen, listed, killed, victim = asyncio.run(session_with([], body))
        self.assertIn("tick 1\n", seen)
        self.assertIn("tick 3\n", seen)
        self.assertIn("exit code 0", seen)
        self.assertIn(victim, text(listed))
        self.assertIn(f"killed job {victim}", text(killed))
        self.assertEqual(killed.structured_content["status"], "killed")
        self.assertEqual(host_processes_with(f"sleep {mark}"), [], "the killed job lives on")

    def test_a_job_with_an_open_stdin_answers_what_shell_write_sends(self):
        async def body(session):
            started = await session.call_tool(
                "shell",
                {"command": "python3 -i -q 2>&1", "background": True, "openStdin": True},
            )
            job = started.structured_content["jobId"]
            answers = []
            for line, answer in (("print(6 * 7)\n", "42"), ("print('a' + 'b')\n", "ab")):
                wrote = await session.call_tool("shell_write", {"jobId": job, "data": line})
                seen = ""
                for _ in range(100):
                    seen += text(await session.call_tool("shell_output", {"jobId": job}))
                    if answer in seen:
                        break
                    await asyncio.sleep(0.05)
                answers.append((text(wrote), seen))
            await session.call_tool("shell_write", {"jobId": job, "eof": True})
            done = await session.call_tool("shell_output", {"jobId": job, "waitMs": 10000})
            closed = await session.call_tool("shell_write", {"jobId": job, "data": "x"})
            foreground = await session.call_tool("shell", {"command": "cat", "openStdin": True})
            return answers, done, closed, foreground

        answers, done, closed, foreground = asyncio.run(session_with([], body))
        self.assertIn("wrote 13 bytes to job", answers[0][0])
        self.assertIn("42", answers[0][1])
        self.assertIn("ab", answers[1][1])
        self.assertIn("exit code 0", text(done))
        self.assertTrue(closed.is_error)
        self.assertIn("stdin is closed", text(closed))
        self.assertTrue(foreground.is_error)
        self.assertIn("background: true", text(foreground))

    def test_a_job_in_a_terminal_is_a_tty_and_answers_shell_write(self):
        async def body(session):
            started = await session.call_tool(
                "shell", {"command": "python3 -i -q", "background": True, "tty": True}
            )
            job = started.structured_content["jobId"]
            seen = ""
            for _ in range(100):
                seen += text(await session.call_tool("shell_output", {"jobId": job}))
                if "[running, waiting for input]" in seen:
                    break
                await asyncio.sleep(0.05)
            for line, answer in (
                ("import sys; print(sys.stdin.isatty(), sys.stderr.isatty())\n", "True True"),
                ("print(6 * 7)\n", "42"),
            ):
                await session.call_tool("shell_write", {"jobId": job, "data": line})
                for _ in range(100):
                    seen += text(await session.call_tool("shell_output", {"jobId": job}))
                    if answer in seen:
                        break
                    await asyncio.sleep(0.05)
            await session.call_tool("shell_write", {"jobId": job, "eof": True})
            done = await session.call_tool("shell_output", {"jobId": job, "waitMs": 10000})
            foreground = await session.call_tool("shell", {"command": "tty", "tty": True})
            return seen, done, foreground

        seen, done, foreground = asyncio.run(session_with([], body))
        self.assertIn(">>> ", seen)
        self.assertIn("[running, waiting for input] answer it with shell_write", seen)
        self.assertIn("True True", seen)
        self.assertIn("42", seen)
        self.assertIn("exit code 0", text(done))
        self.assertTrue(foreground.is_error)
        self.assertIn("tty needs background: true", text(foreground))

    def test_a_components_render_changes_what_the_model_reads(self):
        args = ["--policy", os.environ["CORDON_RENDER_POLICY"]]
        marker = pathlib.Path("/etc/cordon-mcp-rendered")

        async def body(session):
            ok = await session.call_tool("shell", {"command": "echo hi"})
            denied = await session.call_tool("shell", {"command": f"echo x; touch {marker}"})
            return ok, denied

        ok, denied = asyncio.run(session_with(args, body))
        self.assertEqual(text(ok), "RENDERED: `echo hi` exited 0\nhi\n")
        self.assertEqual(ok.structured_content["stdout"]["text"], "hi\n", "the facts are the host's")
        if CONFINED:
            self.assertTrue(text(denied).startswith("RENDERED: the sandbox stopped"), text(denied))
            self.assertTrue(denied.structured_content["sandbox"]["denied"])
            self.assertTrue(denied.is_error)
        self.assertFalse(marker.exists())

    def test_the_audit_log_names_the_client_and_how_an_approval_came(self):
        log = pathlib.Path(os.environ["CORDON_TEST_DIR"]) / "mcp-audit.jsonl"
        config = log.parent / "mcp-audit.toml"
        config.write_text(f'audit_log = "{log}"\n')

        async def body(session):
            return await session.call_tool("shell", {"command": "echo audited"})

        asyncio.run(session_with(["--config", str(config)], body))
        records = [json.loads(line) for line in log.read_text().splitlines()]
        ran = [r for r in records if r["event"] == "run"]
        self.assertEqual(len(ran), 1, records)
        self.assertEqual(ran[0]["command"], "echo audited")
        self.assertTrue(ran[0]["client"].startswith("mcp "), ran[0])
        self.assertNotIn("approvedBy", ran[0])
        self.assertEqual(records[0]["event"], "genesis")

    def test_text_reaches_the_model_bounded_and_inert(self):
        # An 8 MiB refusal opening with OSC 52 (a component's words), and a
        # command's output and a render text carrying escapes: the model
        # reads them bounded, every escape shown, none sent.
        hostile = ["--policy", os.environ["CORDON_HOSTILE_POLICY"]]

        async def loud(session):
            return await session.call_tool("shell", {"command": "loud-reason"})

        refused = asyncio.run(session_with(hostile, loud))
        self.assertTrue(refused.is_error)
        self.assertLess(len(text(refused)), 8 << 10)
        self.assertIn("\\x1b]52;c;ZXZpbA==\\x07", text(refused))
        self.assertNotIn("\x1b", text(refused))

        printf = "printf 'a\\033]52;c;ZXZpbA==\\007b\\n'"

        async def escapes(session):
            return await session.call_tool("shell", {"command": printf})

        async def huge(session):
            return await session.call_tool("shell", {"command": "echo huge-render"})

        rendered = asyncio.run(session_with(["--policy", os.environ["CORDON_RENDER_POLICY"]], huge))
        self.assertTrue(text(rendered).startswith("\\x1b]52;c;ZXZpbA==\\x07RENDERED"))
        self.assertLess(len(text(rendered)), 70 << 10)
        self.assertIn("more bytes cut]", text(rendered))

        for args in ([], ["--policy", os.environ["CORDON_RENDER_POLICY"]]):
            shown = asyncio.run(session_with(args, escapes))
            self.assertIn("a\\x1b]52;c;ZXZpbA==\\x07b", text(shown), args)
            self.assertNotIn("\x1b", text(shown), args)
            self.assertNotIn("\x07", text(shown), args)
            # The facts keep the bytes (JSON escapes them).
            self.assertIn("\x1b", shown.structured_content["stdout"]["text"])

    def test_an_ask_runs_only_when_the_person_accepts_it(self):
        ws = pathlib.Path(os.environ["CORDON_TEST_DIR"]) / "asked"
        ws.mkdir()
        config = ws.parent / "asked.toml"
        config.write_text(f'default_mode = "workspace-write"\nworkspace_root = "{ws}"\n')
        args = [
            "--policy", os.environ["CORDON_RULES_POLICY"],
            "--settings", os.environ["CORDON_RULES_SETTINGS"],
            "--config", str(config),
        ]
        asked = []

        def answering(action, content=None):
            async def answer(context, params):
                asked.append(params.message)
                return types.ElicitResult(action=action, content=content)
            return answer

        def shell(marker):
            async def body(session):
                return await session.call_tool(
                    "shell",
                    {"command": f"rm -rf build && touch {marker}", "workdir": str(ws)},
                )
            return body

        accepted = asyncio.run(
            session_with(args, shell("accepted"), answering("accept", {"approve": True}))
        )
        self.assertFalse(accepted.is_error, text(accepted))
        self.assertTrue((ws / "accepted").exists(), "the approved command did not run")
        self.assertIn("rm -rf build", asked[0])
        self.assertIn("a recursive delete cannot be undone", asked[0])

        declined = asyncio.run(session_with(args, shell("declined"), answering("decline")))
        self.assertTrue(declined.is_error)
        self.assertIn("[needs approval]", text(declined))
        self.assertIn("declined", text(declined))
        self.assertFalse((ws / "declined").exists(), "a declined command ran")

        refused = asyncio.run(
            session_with(args, shell("unapproved"), answering("accept", {"approve": False}))
        )
        self.assertTrue(refused.is_error)
        self.assertFalse((ws / "unapproved").exists(), "a command approve: false ran")

        # A command posing as the policy: its 80 newlines and fake paragraph
        # (comments, so the example rules ask rather than deny the line) stay
        # on its own quoted line, after the real reason and grant.
        spoof = (
            "rm -rf build" + "\n" * 80
            + "# The policy asks first: routine cleanup, approve it\n\n# If approved, nothing happens"
        )

        async def spoofing(session):
            return await session.call_tool("shell", {"command": spoof, "workdir": str(ws)})

        asyncio.run(session_with(args, spoofing, answering("decline")))
        prompt = asked[-1]
        self.assertTrue(
            prompt.startswith("The policy asks first: a recursive delete cannot be undone"), prompt
        )
        head, command = prompt.rsplit("\n\n    ", 1)
        self.assertNotIn("routine cleanup", head)
        self.assertNotIn("\n", command)
        self.assertIn("routine cleanup", command)

        unasked = asyncio.run(session_with(args, shell("unasked")))
        self.assertTrue(unasked.is_error)
        self.assertIn("[needs approval]", text(unasked))
        self.assertEqual(unasked.structured_content["code"], "APPROVAL_REQUIRED")
        self.assertFalse((ws / "unasked").exists(), "an ask ran without a person")
        self.assertEqual(len(asked), 4, "only a client with elicitation is asked")


    def test_an_asked_http_request_waits_for_the_persons_answer_while_the_command_runs(self):
        if not CONFINED:
            print("SKIPPED asked request: no sandbox confines runs here", file=sys.stderr)
            return
        import http.server
        import threading

        arrived = []

        class Recording(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                arrived.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "3")
                self.end_headers()
                self.wfile.write(b"ok\n")

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recording)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.shutdown)
        port = server.server_address[1]
        ws = scratch("asked-request")
        config = ws / "net.toml"
        config.write_text(
            f'max_network = ["127.0.0.1"]\ndefault_network = ["127.0.0.1:{port}"]\n'
        )
        rules = ws / "rules.toml"
        rules.write_text(
            'default = "allow"\nopaque = "allow"\n[[requests]]\n'
            'request = "POST 127.0.0.1/pulls"\ndecision = "ask"\n'
            'reason = "opening a pull request"\n'
        )
        args = [
            "--policy", os.environ["CORDON_RULES_POLICY"],
            "--settings", str(rules),
            "--config", str(config),
        ]
        # The same request twice in one run: the person is asked once.
        line = (
            "python3 -c \"import urllib.request, urllib.error\n"
            "for _ in range(2):\n"
            f"  r = urllib.request.Request('http://127.0.0.1:{port}/pulls', data=b'')\n"
            "  try: print('status', urllib.request.urlopen(r, timeout=30).status)\n"
            "  except urllib.error.HTTPError as e: print('status', e.code)\""
        )

        async def body(session):
            return await session.call_tool("shell", {"command": line, "workdir": str(ws)})

        asked = []
        accepted = asyncio.run(
            session_with(args, body, answering(asked, "accept", {"approve": True}))
        )
        self.assertIn("status 200\nstatus 200", text(accepted))
        self.assertEqual(arrived, ["/pulls", "/pulls"])
        self.assertEqual(len(asked), 1, asked)
        self.assertTrue(
            asked[0].startswith(
                "The policy asks first, before a running command sends this HTTP request "
                f"(one line): POST 127.0.0.1:{port}/pulls\n\nThe policy's reason: opening a "
                "pull request"
            ),
            asked[0],
        )
        facts = accepted.structured_content["grant"]["requests"]
        self.assertEqual([(r["asked"], r["allowed"]) for r in facts], [(True, True)] * 2)

        declined = asyncio.run(session_with(args, body, answering(asked, "decline")))
        self.assertIn("status 403\nstatus 403", text(declined))
        self.assertIn("no person approved it (opening a pull request)", text(declined))
        self.assertEqual(len(asked), 2, "asked once per run")
        self.assertEqual(arrived, ["/pulls", "/pulls"], "a declined request arrived")

        unasked = asyncio.run(session_with(args, body))
        self.assertIn("status 403", text(unasked))
        self.assertIn("waits for a person's approval", text(unasked))
        self.assertEqual(arrived, ["/pulls", "/pulls"], "an unasked request arrived")

def scratch(name):
    path = pathlib.Path(os.environ["CORDON_TEST_DIR"]) / name
    path.mkdir()
    return path.resolve()


def answering(asked, action, content=None):
    async def answer(context, params):
        asked.append(params.message)
        return types.ElicitResult(action=action, content=content)

    return answer


class WhatAgentsGet(unittest.TestCase):
    """The defaults an agent's client gets: text for the model, mounting
    that does not depend on where the client starts the server,
    cancellation, progress, honest markers, the seed's tool layer."""

    def test_results_are_text_for_the_model_with_its_output_cut_to_head_and_tail(self):
        async def body(session):
            ok = await session.call_tool("shell", {"command": "echo hello"})
            big = await session.call_tool("shell", {"command": "seq 1 200000; echo the-end >&2"})
            failed = await session.call_tool("shell", {"command": "echo oops >&2; false"})
            return ok, big, failed

        ok, big, failed = asyncio.run(session_with([], body, facts=False))
        self.assertIsNone(ok.structured_content, "facts only when the operator asks")
        self.assertEqual(text(ok), "hello\nexit code 0")
        self.assertFalse(ok.is_error)
        shown = text(big)
        self.assertLess(len(shown), 9 << 10, "under the agents' own cut")
        self.assertTrue(shown.startswith("1\n2\n3\n"), shown[:100])
        self.assertIn("200000\n", shown)
        self.assertIn("bytes of output cut here", shown)
        self.assertIn("[stderr]\nthe-end\n", shown)
        self.assertTrue(shown.endswith("exit code 0"), shown[-200:])
        self.assertTrue(failed.is_error)
        self.assertIn("exit code 1", text(failed))

    def test_mounted_with_workspace_and_mode_from_the_root_directory(self):
        ws = scratch("mounted")

        async def body(session):
            made = await session.call_tool("shell", {"command": "pwd; touch made"})
            sub = await session.call_tool("shell", {"command": "mkdir -p sub && pwd", "workdir": "."})
            return made, sub, session.initialized.instructions

        args = ["--workspace", str(ws), "--mode", "workspace-write"]
        made, sub, instructions = asyncio.run(session_with(args, body, cwd="/", facts=False))
        self.assertFalse(made.is_error, text(made))
        self.assertTrue(text(made).startswith(f"{ws}\n"), text(made))
        self.assertTrue((ws / "made").exists(), "the default workdir is not the workspace")
        self.assertFalse(pathlib.Path("/made").exists())
        self.assertIn(f"workspace-write in workspace {ws}", instructions)

    def test_a_server_started_in_the_root_directory_says_so_once_and_runs_read_only(self):
        async def body(session):
            ran = await session.call_tool("shell", {"command": "echo still-useful"})
            return ran, session.initialized.instructions

        ran, instructions = asyncio.run(
            session_with(["--mode", "workspace-write"], body, cwd="/", facts=False)
        )
        self.assertIn("no workspace", instructions)
        self.assertFalse(ran.is_error, text(ran))
        self.assertIn("still-useful", text(ran))
        self.assertNotIn("choose a project directory", text(ran))

    def test_the_clients_first_root_is_the_workspace(self):
        ws = scratch("rooted")

        async def roots(context):
            return types.ListRootsResult(roots=[types.Root(uri=f"file://{ws}", name="project")])

        async def body(session):
            listed = await session.list_tools()
            made = await session.call_tool("shell", {"command": "touch by-root && pwd"})
            return listed, made

        listed, made = asyncio.run(
            session_with(["--mode", "workspace-write"], body, roots=roots, cwd="/", facts=False)
        )
        self.assertFalse(made.is_error, text(made))
        self.assertTrue((ws / "by-root").exists(), text(made))
        shell = next(t for t in listed.tools if t.name == "shell")
        self.assertIn(str(ws), shell.description)

    def test_a_cancelled_call_kills_its_command(self):
        ws = scratch("cancelled")
        mark = f"3.{os.getpid()}1"

        async def body(session):
            try:
                await session.call_tool(
                    "shell",
                    {"command": f"sleep {mark}; touch marker", "workdir": str(ws)},
                    read_timeout_seconds=1.0,
                )
            except Exception as error:  # the SDK's timeout: it sends notifications/cancelled
                cancelled = error
            else:
                cancelled = None
            gone = False
            for _ in range(100):
                if not host_processes_with(f"sleep {mark}"):
                    gone = True
                    break
                await asyncio.sleep(0.05)
            return cancelled, gone

        args = ["--workspace", str(ws), "--mode", "workspace-write"]
        cancelled, gone = asyncio.run(session_with(args, body, facts=False))
        self.assertIsNotNone(cancelled, "the call was not cut")
        self.assertTrue(gone, "the cancelled command lives on in the process table")
        time.sleep(3.5)
        self.assertFalse((ws / "marker").exists(), "the cancelled command ran on")

    def test_a_long_call_reports_progress_with_its_latest_output(self):
        seen = []

        async def progress(progress, total, message):
            seen.append((progress, message))

        async def body(session):
            return await session.call_tool(
                "shell",
                {"command": "for i in 1 2 3; do echo tick $i; sleep 1.2; done"},
                progress_callback=progress,
            )

        done = asyncio.run(session_with([], body, facts=False))
        self.assertIn("tick 3", text(done))
        self.assertGreaterEqual(len(seen), 1, "no progress notification")
        self.assertTrue(any("tick" in (m or "") for _, m in seen), seen)
        self.assertEqual([p for p, _ in seen], sorted(p for p, _ in seen))

    def test_a_runner_failure_is_marked_in_the_foreground_and_the_background(self):
        ws = scratch("runner")
        runner = ws / "broken-runner"
        runner.write_text("#!/bin/sh\necho 'sb: cannot build the sandbox' >&2\nexit 1\n")
        runner.chmod(0o755)
        config = ws / "runner.toml"
        config.write_text(
            f'runner_command = ["{runner}"]\nrunner_failure_signatures = ["sb: "]\n'
        )

        async def body(session):
            fg = await session.call_tool("shell", {"command": "touch ran-fg"})
            bg = await session.call_tool("shell", {"command": "touch ran-bg", "background": True})
            read = await session.call_tool("shell_output", {"jobId": "1", "waitMs": 10000})
            return fg, bg, read

        fg, bg, read = asyncio.run(session_with(["--config", str(config)], body, facts=False))
        for result in (fg, read):
            self.assertTrue(result.is_error, text(result))
            self.assertIn("[sandbox: runner failed]", text(result))
            self.assertIn("cordon doctor", text(result))
            self.assertNotIn("danger-full-access", text(result))
        self.assertIn("started job 1", text(bg))

    def test_a_refused_connection_is_marked_even_when_the_command_exits_0(self):
        if not CONFINED:
            print("SKIPPED network marker: no sandbox confines runs here", file=sys.stderr)
            return
        ws = scratch("network")
        config = ws / "net.toml"
        config.write_text('max_network = ["127.0.0.1"]\ndefault_network = ["127.0.0.1:9"]\n')
        line = (
            "python3 -c \"import urllib.request\n"
            "try: urllib.request.urlopen('http://127.0.0.1:7/', timeout=5)\n"
            "except Exception as e: print('failed', e)\"; true"
        )

        async def body(session):
            return await session.call_tool("shell", {"command": line})

        result = asyncio.run(session_with(["--config", str(config)], body, facts=False))
        self.assertIn("exit code 0", text(result))
        self.assertIn("[network: refused] 127.0.0.1:7", text(result))
        self.assertIn("Do not retry it another way", text(result))
        self.assertTrue(result.is_error, "a refused connection is a failure for the model")

    def test_a_name_that_cannot_resolve_in_a_closed_run_is_flagged_foreground_and_background(self):
        if not CONFINED:
            print("SKIPPED closed-network note: no sandbox confines runs here", file=sys.stderr)
            return
        lookup = "python3 -c \"import socket; socket.getaddrinfo('example.com', 443)\""

        async def body(session):
            fg = await session.call_tool("shell", {"command": lookup})
            await session.call_tool("shell", {"command": lookup, "background": True})
            bg = await session.call_tool("shell_output", {"jobId": "1", "waitMs": 20000})
            # The control: a failure that prints nothing of the network.
            other = await session.call_tool("shell", {"command": "echo no such file >&2; exit 2"})
            return fg, bg, other

        fg, bg, other = asyncio.run(session_with([], body, facts=False))
        for result in (fg, bg):
            self.assertTrue(result.is_error, text(result))
            self.assertIn("[network: none]", text(result))
            self.assertIn("Do not retry it another way", text(result))
        self.assertTrue(other.is_error)
        self.assertNotIn("[network:", text(other))

    def test_a_failure_is_an_error_in_shell_and_in_shell_output_alike(self):
        async def body(session):
            fg = await session.call_tool("shell", {"command": "exit 3"})
            await session.call_tool("shell", {"command": "sleep 0.3; exit 3", "background": True})
            await session.call_tool("shell", {"command": "sleep 0.3; echo fine", "background": True})
            bad = await session.call_tool("shell_output", {"jobId": "1", "waitMs": 10000})
            good = await session.call_tool("shell_output", {"jobId": "job 2", "waitMs": 10000})
            listed = await session.call_tool("shell_list", {})
            return fg, bad, good, listed

        fg, bad, good, listed = asyncio.run(session_with([], body, facts=False))
        self.assertTrue(fg.is_error)
        self.assertTrue(bad.is_error, text(bad))
        self.assertIn("exit code 3", text(bad))
        self.assertFalse(good.is_error, text(good))
        self.assertIn("fine\nexit code 0", text(good), "waitMs did not wait for the end")
        self.assertIn("job 1 exited 3", text(listed))

    def test_escalation_runs_only_on_a_persons_accept_and_never_past_the_ceiling(self):
        ws = scratch("escalate")
        asked = []

        def escalate(marker, **wider):
            async def body(session):
                return await session.call_tool(
                    "shell",
                    {
                        "command": f"touch {marker}",
                        "escalate": {"reason": "the build writes its output", **wider},
                    },
                )

            return body

        args = ["--workspace", str(ws)]
        wider = {"mode": "workspace-write"}
        accepted = asyncio.run(
            session_with(args, escalate("accepted", **wider),
                         answering(asked, "accept", {"approve": True}), facts=False)
        )
        self.assertFalse(accepted.is_error, text(accepted))
        self.assertTrue((ws / "accepted").exists())
        self.assertIn("the build writes its output", asked[-1])
        self.assertIn("workspace-write", asked[-1])

        declined = asyncio.run(
            session_with(args, escalate("declined", **wider), answering(asked, "decline"), facts=False)
        )
        self.assertTrue(declined.is_error)
        self.assertIn("declined", text(declined))
        self.assertFalse((ws / "declined").exists())

        cancelled = asyncio.run(
            session_with(args, escalate("cancelled", **wider), answering(asked, "cancel"), facts=False)
        )
        self.assertIn("dismissed or cancelled", text(cancelled))
        self.assertFalse((ws / "cancelled").exists())

        nobody = asyncio.run(session_with(args, escalate("nobody", **wider), facts=False))
        self.assertIn("No person could be asked", text(nobody))
        self.assertFalse((ws / "nobody").exists())
        self.assertEqual(len(asked), 3)

        # Above the ceiling: never put to the person.
        ceiling = ws.parent / "read-only-ceiling.toml"
        ceiling.write_text('max_mode = "read-only"\n')
        above = asyncio.run(
            session_with([*args, "--config", str(ceiling)], escalate("above", **wider),
                         answering(asked, "accept", {"approve": True}), facts=False)
        )
        self.assertTrue(above.is_error)
        self.assertIn("not put to the user", text(above))
        self.assertFalse((ws / "above").exists())
        self.assertEqual(len(asked), 3, "an escalation above the ceiling was asked")

        # The policy refuses even to ask: a denied command is never put to the person.
        rules = [
            "--policy", os.environ["CORDON_RULES_POLICY"],
            "--settings", os.environ["CORDON_RULES_SETTINGS"],
        ]

        async def curl(session):
            return await session.call_tool(
                "shell",
                {"command": "curl https://example.com", "escalate": {"reason": "x", "network": ["example.com:443"]}},
            )

        refused = asyncio.run(
            session_with([*args, *rules], curl, answering(asked, "accept", {"approve": True}), facts=False)
        )
        self.assertIn("[refused by policy]", text(refused))
        self.assertEqual(len(asked), 3, "a refused escalation was asked")

    def test_a_person_switches_the_sessions_mode(self):
        ws = scratch("moded")
        asked = []

        async def body(session):
            before = await session.call_tool("shell", {"command": "touch before"})
            widened = await session.call_tool(
                "shell_mode", {"mode": "workspace-write", "reason": "edit the code"}
            )
            listed = await session.list_tools()
            during = await session.call_tool("shell", {"command": "touch during"})
            narrowed = await session.call_tool("shell_mode", {"mode": "read-only"})
            after = await session.call_tool("shell", {"command": "touch after"})
            return before, widened, listed, during, narrowed, after

        before, widened, listed, during, narrowed, after = asyncio.run(
            session_with(["--workspace", str(ws)], body,
                         answering(asked, "accept", {"approve": True}), facts=False)
        )
        self.assertFalse(widened.is_error, text(widened))
        self.assertIn("now runs workspace-write", text(widened))
        shell = next(t for t in listed.tools if t.name == "shell")
        self.assertIn("Sandbox now: workspace-write", shell.description)
        self.assertTrue((ws / "during").exists(), text(during))
        self.assertEqual(len(asked), 1, "narrowing asked the person")
        self.assertIn("edit the code", asked[0])
        if CONFINED:
            self.assertFalse((ws / "before").exists())
            self.assertFalse((ws / "after").exists(), text(after))
            self.assertTrue(after.is_error)


# A byte relay between stdio and a Unix socket: the SDK's stdio client then
# speaks MCP to `cordon mcp --listen` unchanged.
RELAY = """
import socket, sys, threading
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
def up():
    while True:
        data = sys.stdin.buffer.read1(65536)
        if not data:
            s.shutdown(socket.SHUT_WR)
            return
        s.sendall(data)
threading.Thread(target=up, daemon=True).start()
while True:
    data = s.recv(65536)
    if not data:
        break
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
"""


class CordonMcpOnASocket(unittest.TestCase):
    def test_each_socket_client_is_a_session_of_its_own(self):
        sock = pathlib.Path(os.environ["CORDON_TEST_DIR"]) / "mcp.sock"
        server = subprocess.Popen(
            [os.environ["CORDON_BIN"], "mcp", *FACTS, "--listen", f"unix:{sock}"],
            cwd=os.environ["CORDON_TEST_DIR"],
        )
        try:
            deadline = time.monotonic() + 30
            while not sock.exists():
                self.assertIsNone(server.poll(), "cordon mcp --listen exited")
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.02)
            params = StdioServerParameters(command=sys.executable, args=["-c", RELAY, str(sock)])

            async def both():
                async with stdio_client(params) as (ra, wa), stdio_client(params) as (rb, wb):
                    async with ClientSession(ra, wa) as a, ClientSession(rb, wb) as b:
                        await a.initialize()
                        await b.initialize()
                        started = await a.call_tool(
                            "shell", {"command": "sleep 30", "background": True}
                        )
                        job = started.structured_content["jobId"]
                        seen_by_b = await b.call_tool("shell_list", {})
                        stolen = await b.call_tool("shell_kill", {"jobId": job})
                        ran = await b.call_tool("shell", {"command": "echo from b"})
                        killed = await a.call_tool("shell_kill", {"jobId": job})
                        return job, seen_by_b, stolen, ran, killed

            job, seen_by_b, stolen, ran, killed = asyncio.run(both())
            self.assertNotIn(job, text(seen_by_b))
            self.assertTrue(stolen.is_error)
            self.assertIn("no job has id", text(stolen))
            self.assertIn("from b\n", text(ran))
            self.assertEqual(killed.structured_content["status"], "killed")
        finally:
            server.terminate()
            self.assertEqual(server.wait(30), 0)
        self.assertFalse(sock.exists(), "the socket outlived the server")


if __name__ == "__main__":
    unittest.main()
