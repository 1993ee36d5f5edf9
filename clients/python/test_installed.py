"""The client as a user installs it: the wheel `pip wheel clients/python`
builds, installed into a fresh virtual environment, driving a real
`cordon serve` — over a Unix socket and a child's stdio, sync and asyncio:
a run, a denial, a background task, and the error codes.

Run by tests/all/python.rs from a directory outside the source tree (so
`cordon_client` is the installed one), with CORDON_BIN, CORDON_TEST_DIR and
CORDON_TEST_CONFINED as test_cordon_client.py describes, and CORDON_VENV,
the virtual environment the wheel went into.
"""

import asyncio
import os
import pathlib
import subprocess
import time
import unittest

import cordon_client
from cordon_client import ERROR_CODES, CordonClient, CordonError
from cordon_client.aio import AsyncCordonClient

CONFINED = os.environ.get("CORDON_TEST_CONFINED") == "1"
BASE = pathlib.Path(os.environ["CORDON_TEST_DIR"])


class Installed(unittest.TestCase):
    def test_the_package_is_the_installed_wheel_and_typed(self):
        where = pathlib.Path(cordon_client.__file__).resolve()
        venv = pathlib.Path(os.environ["CORDON_VENV"]).resolve()
        self.assertIn(venv, where.parents, where)
        self.assertTrue((where.parent / "py.typed").is_file())


class Sync(unittest.TestCase):
    def setUp(self):
        self.ws = BASE / f"sync-{self._testMethodName}"
        self.ws.mkdir()

    def check(self, cordon):
        result = cordon.run("echo hi", mode="read-only", workspace_root=self.ws)
        self.assertEqual((result["exitCode"], result["stdout"]["text"]), (0, "hi\n"))
        if CONFINED:
            # A denial: the write outside the workspace fails, and the
            # facts say so; nothing lands on the host.
            outside = BASE / f"outside-{self._testMethodName}"
            denied = cordon.run(
                f"echo x > {outside}", mode="workspace-write", workspace_root=self.ws
            )
            self.assertNotEqual(denied["exitCode"], 0)
            self.assertTrue(denied["sandbox"]["denied"], denied["sandbox"])
            self.assertFalse(outside.exists())
        task = cordon.start("echo bg; sleep 0.1", mode="read-only", workspace_root=self.ws)
        state = cordon.wait(task, timeout_ms=30000)
        self.assertEqual(state["status"], "completed", state)
        self.assertIn("bg", cordon.read(task)["text"])
        with self.assertRaises(CordonError) as caught:
            cordon.call("run", {"command": "true", "policy": {"mode": "full"}})
        self.assertEqual(caught.exception.name, "INVALID_PARAMS")
        self.assertEqual(caught.exception.code, ERROR_CODES["INVALID_PARAMS"])
        with self.assertRaises(CordonError) as caught:
            cordon.read("0" * 32)
        self.assertEqual(caught.exception.name, "UNKNOWN_TASK")
        self.assertEqual(caught.exception.code, ERROR_CODES["UNKNOWN_TASK"])

    def test_over_a_childs_stdio(self):
        with CordonClient(args=["--max-mode", "workspace-write"], cwd=BASE) as cordon:
            self.check(cordon)

    def test_over_a_socket(self):
        socket = BASE / "sync.sock"
        server = subprocess.Popen(
            [os.environ["CORDON_BIN"], "serve", "--max-mode", "workspace-write",
             "--listen", f"unix:{socket}"],
            cwd=BASE,
        )
        try:
            deadline = time.monotonic() + 30
            while not socket.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            with CordonClient.connect(socket) as cordon:
                self.check(cordon)
        finally:
            server.terminate()
            server.wait(30)


class Async(unittest.TestCase):
    def test_asyncio_over_stdio_calls_in_flight_at_once(self):
        ws = BASE / "async"
        ws.mkdir()

        async def drive():
            async with await AsyncCordonClient.spawn(
                args=["--max-mode", "workspace-write"], cwd=BASE
            ) as cordon:
                task = await cordon.start(
                    "read line; echo got-$line", open_stdin=True,
                    mode="read-only", workspace_root=ws,
                )
                runs = [
                    cordon.run(f"echo {n}", mode="read-only", workspace_root=ws)
                    for n in range(4)
                ]
                results = await asyncio.gather(*runs)
                self.assertEqual(
                    [r["stdout"]["text"] for r in results], [f"{n}\n" for n in range(4)]
                )
                await cordon.write(task, "answer\n", eof=True)
                state = await cordon.wait(task, timeout_ms=30000)
                self.assertEqual(state["status"], "completed", state)
                self.assertIn("got-answer", (await cordon.read(task))["text"])
                with self.assertRaises(CordonError) as caught:
                    await cordon.kill("0" * 32)
                self.assertEqual(caught.exception.name, "UNKNOWN_TASK")
                probe = await cordon.probe()
                self.assertIn("rungs", probe)
            return True

        self.assertTrue(asyncio.run(drive()))


if __name__ == "__main__":
    unittest.main()
