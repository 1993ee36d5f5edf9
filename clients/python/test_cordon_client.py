"""Integration test of the Python client against a real `cordon serve`.

Run by tests/all/python.rs (so `cargo test` and CI run it), which sets:
  CORDON_BIN            the cordon binary under test
  CORDON_TEST_DIR       a scratch directory outside /tmp (bwrap replaces /tmp)
  CORDON_TEST_CONFINED  "1" when a sandbox backend confines runs here, else "0"
  CORDON_STRICT_POLICY  a second policy component to reload
  CORDON_RULES_POLICY   rules-policy, with CORDON_RULES_SETTINGS its rule file

By hand: CORDON_BIN=target/debug/cordon CORDON_TEST_DIR=$(mktemp -d -p /var/tmp) \
  CORDON_TEST_CONFINED=1 CORDON_STRICT_POLICY=... python3 -m unittest -v test_cordon_client
"""

import os
import pathlib
import sys
import subprocess
import threading
import time
import unittest

from cordon_client import CordonClient, CordonError

CONFINED = os.environ.get("CORDON_TEST_CONFINED") == "1"
# Sandboxed where a sandbox works; otherwise the client is still exercised.
WRITE_MODE = "workspace-write" if CONFINED else "danger-full-access"


class ServeFromPython(unittest.TestCase):
    def setUp(self):
        base = pathlib.Path(os.environ["CORDON_TEST_DIR"])
        self.ws_a = base / f"{self._testMethodName}-a"
        self.ws_b = base / f"{self._testMethodName}-b"
        self.ws_a.mkdir()
        self.ws_b.mkdir()
        self.cordon = CordonClient(args=["--max-mode", "danger-full-access"], cwd=base)

    def tearDown(self):
        self.assertEqual(self.cordon.close(), 0)

    def test_two_workspaces_run_foreground_and_background_concurrently(self):
        results = {}

        def session(name, root):
            # Each session writes its own workspace and tries the other's.
            other = self.ws_b if root == self.ws_a else self.ws_a
            task = self.cordon.start(
                f"for i in 1 2 3; do echo {name}-$i; sleep 0.2; done",
                mode=WRITE_MODE,
                workspace_root=root,
            )
            fg = self.cordon.run(
                f"echo {name} > own.txt && cat own.txt; echo {name} > {other}/intruder.txt",
                workdir=root,
                mode=WRITE_MODE,
                workspace_root=root,
            )
            # Incremental reads while it runs: each returns only what is new.
            seen, reads = "", 0
            while True:
                chunk = self.cordon.read(task)
                if chunk["text"]:
                    reads += 1
                    seen += chunk["text"]
                if chunk["status"] != "running":
                    break
                time.sleep(0.05)
            seen += self.cordon.read(task)["text"]
            results[name] = (task, fg, seen, reads)

        threads = [
            threading.Thread(target=session, args=("alpha", self.ws_a)),
            threading.Thread(target=session, args=("beta", self.ws_b)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        for name, root in (("alpha", self.ws_a), ("beta", self.ws_b)):
            task, fg, seen, reads = results[name]
            self.assertEqual(fg["stdout"]["text"], f"{name}\n")
            self.assertEqual((root / "own.txt").read_text(), f"{name}\n")
            if CONFINED:
                self.assertNotEqual(fg["exitCode"], 0)
                self.assertTrue(fg["sandbox"]["denied"], fg)
                self.assertEqual(fg["sandbox"]["mode"], "workspace-write")
            self.assertEqual(seen, "".join(f"{name}-{i}\n" for i in (1, 2, 3)))
            self.assertGreaterEqual(reads, 2, "output arrived in more than one read")
            self.assertEqual(self.cordon.wait(task)["status"], "completed")
        if CONFINED:
            self.assertFalse((self.ws_a / "intruder.txt").exists())
            self.assertFalse((self.ws_b / "intruder.txt").exists())

    def test_kill_a_background_task(self):
        task = self.cordon.start("sleep 30", mode="read-only", workspace_root=self.ws_a)
        self.assertEqual(self.cordon.wait(task, timeout_ms=100)["status"], "running")
        self.assertTrue(self.cordon.kill(task))
        self.assertFalse(self.cordon.kill(task))
        self.assertEqual(self.cordon.wait(task)["status"], "killed")
        self.assertTrue(self.cordon.remove(task))
        self.assertEqual(self.cordon.list(), [])

    def test_reload_swaps_the_policy_and_a_broken_one_is_refused(self):
        strict = os.environ["CORDON_STRICT_POLICY"]
        self.assertEqual(self.cordon.reload(strict)["name"], "strict-policy")
        if CONFINED:
            # strict-policy stamps every confined nonzero exit as denied.
            result = self.cordon.run("exit 3", mode="read-only", workspace_root=self.ws_a)
            self.assertTrue(result["sandbox"]["denied"], result)
        broken = self.ws_a / "broken.wasm"
        broken.write_bytes(b"not a component")
        with self.assertRaises(CordonError) as caught:
            self.cordon.reload(broken)
        self.assertEqual(caught.exception.name, "POLICY_FAILED")
        if sys.platform.startswith("linux"):
            self.assertEqual(self.cordon.probe()["rungs"][0]["backend"], "namespaces")

    def test_a_reply_that_does_not_come_in_time_is_a_timeout(self):
        with self.assertRaises(TimeoutError):
            self.cordon.call(
                "run",
                {"command": "sleep 2", "policy": {"mode": "danger-full-access", "workspaceRoot": str(self.ws_a)}},
                timeout=0.2,
            )
        # The client still works (the late reply is dropped).
        self.assertEqual(self.cordon.run("echo on", mode="danger-full-access", workspace_root=self.ws_a)["stdout"]["text"], "on\n")

    def test_errors_carry_their_stable_names(self):
        with self.assertRaises(CordonError) as caught:
            self.cordon.call("run", {"command": "true", "timeout": 5})
        self.assertEqual(caught.exception.code, -32602)
        self.assertIn("unknown field `timeout`", caught.exception.message)
        with self.assertRaises(CordonError) as caught:
            self.cordon.read("0123456789abcdef0123456789abcdef")
        self.assertEqual(caught.exception.name, "UNKNOWN_TASK")



class ApprovalFromPython(unittest.TestCase):
    """An *ask* reaches Python as a CordonError carrying the proposed grant,
    and the approved re-send runs."""

    def test_an_ask_is_approved_by_resending_its_grant(self):
        base = pathlib.Path(os.environ["CORDON_TEST_DIR"])
        args = [
            "--max-mode", "danger-full-access",
            "--policy", os.environ["CORDON_RULES_POLICY"],
            "--settings", os.environ["CORDON_RULES_SETTINGS"],
        ]
        cordon = CordonClient(args=args, cwd=base)
        try:
            command = "rm -rf nothing-here && echo removed"
            with self.assertRaises(CordonError) as caught:
                cordon.run(command, mode="danger-full-access", workspace_root=base)
            ask = caught.exception
            self.assertEqual(ask.name, "APPROVAL_REQUIRED")
            self.assertEqual(ask.data["reason"], "a recursive delete cannot be undone")
            result = cordon.run(command, grant=ask.data["policy"], approved=True)
            self.assertEqual(result["stdout"]["text"], "removed\n")
            with self.assertRaises(CordonError) as caught:
                cordon.run("curl x", grant=ask.data["policy"], approved=True)
            self.assertEqual(caught.exception.name, "POLICY_DENIED")
            with self.assertRaises(ValueError):
                cordon.run("true", grant=ask.data["policy"], mode="read-only")
        finally:
            self.assertEqual(cordon.close(), 0)


if __name__ == "__main__":
    unittest.main()


class SocketFromPython(unittest.TestCase):
    """`CordonClient.connect` to a `cordon serve --listen` server: two
    clients are two sessions, a detached task is re-attached, and a client
    reconnects after a restart."""

    def _listen(self):
        config = self.base / "cordon.toml"
        config.write_text("[serve]\ndetach_ttl_secs = 30\n")
        process = subprocess.Popen(
            [os.environ["CORDON_BIN"], "serve", "--listen", f"unix:{self.socket}",
             "--config", str(config)],
            cwd=self.base,
        )
        deadline = time.monotonic() + 30
        while not self.socket.exists():
            self.assertIsNone(process.poll(), "cordon serve --listen exited")
            self.assertLess(time.monotonic(), deadline, "the listener never came up")
            time.sleep(0.02)
        return process

    def setUp(self):
        # A socket's path is short (at most 107 bytes).
        self.base = pathlib.Path(os.environ["CORDON_TEST_DIR"]) / "sock"
        self.base.mkdir()
        self.socket = self.base / "cordon.sock"
        self.server = self._listen()

    def tearDown(self):
        self.server.terminate()
        self.server.wait(30)

    def test_two_clients_are_two_sessions_and_a_client_reconnects(self):
        alice = CordonClient.connect(self.socket)
        bob = CordonClient.connect(self.socket)
        task = alice.start("sleep 30")
        self.assertEqual([t["id"] for t in alice.list()], [task])
        self.assertEqual(bob.list(), [])
        with self.assertRaises(CordonError) as caught:
            bob.kill(task)
        self.assertEqual(caught.exception.name, "UNKNOWN_TASK")
        spilled = alice.run("head -c 100000 /dev/zero")
        self.assertTrue(alice.release(spilled["stdout"]["spillPath"]))
        # Detached, alice's task waits for her next connection.
        token = alice.detach()
        alice.close()
        alice = CordonClient.connect(self.socket)
        self.assertEqual([t["id"] for t in alice.attach(token)], [task])
        self.assertTrue(alice.kill(task))
        # The server restarts: the next call reconnects, as a new session.
        self.server.terminate()
        self.assertEqual(self.server.wait(30), 0)
        self.server = self._listen()
        deadline = time.monotonic() + 30
        while True:
            try:
                self.assertEqual(alice.list(), [])
                break
            except CordonError as err:
                self.assertEqual(err.name, "CLOSED")
                self.assertLess(time.monotonic(), deadline, "never reconnected")
                time.sleep(0.05)
        self.assertEqual(alice.run("echo back")["stdout"]["text"], "back\n")
        alice.close()
        bob.close()
