//! `cordon serve` end to end: the real binary over pipes — protocol
//! conformance (every method, every error shape, parse errors, batches,
//! notifications), concurrency, shutdown, load, and reload under load.

use crate::common;
use crate::rpc::Rpc;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{bwrap_usable, component, cordon, processes_gone, wait_for_processes, workspace};
use serde_json::{Value, json};

/// A `cordon serve` child and a line-protocol client for it.
struct Server {
    child: Child,
    rpc: Rpc,
}

impl std::ops::Deref for Server {
    type Target = Rpc;

    fn deref(&self) -> &Rpc {
        &self.rpc
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Rpc {
        &mut self.rpc
    }
}

impl Server {
    /// `cordon serve ARGS` in `dir`, with its temp dir under `tmp`.
    fn start(dir: &Path, tmp: &Path, args: &[&str]) -> Server {
        let mut child = cordon()
            .current_dir(dir)
            .env("TMPDIR", tmp)
            .arg("serve")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn cordon serve");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        Server {
            child,
            rpc: Rpc::new(stdout, stdin),
        }
    }

    /// Wait (up to `bound`) for the server to exit with stdin still open.
    fn wait_open(&mut self, bound: Duration) -> Option<std::process::ExitStatus> {
        common::exit_within(&mut self.child, bound)
    }

    /// Close stdin and wait (up to `bound`) for the server to exit.
    fn close_and_wait(&mut self, bound: Duration) -> std::process::ExitStatus {
        self.rpc.close();
        common::exit_within(&mut self.child, bound).expect("the server did not exit at EOF")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const DANGER: &[&str] = &["--max-mode", "danger-full-access"];

fn policy(mode: &str, root: &Path) -> Value {
    json!({"mode": mode, "workspaceRoot": root})
}

/// The mode the load tests run under: confined where bwrap works.
fn load_mode(test: &str) -> &'static str {
    if bwrap_usable(test) {
        "read-only"
    } else {
        "danger-full-access"
    }
}

#[test]
fn every_method_answers_with_the_library_shapes() {
    let ws = workspace();
    let mut server = Server::start(ws.path(), ws.path(), DANGER);
    let root = ws.path();

    let run = server.call(
        "run",
        json!({"command": "cat; echo err >&2", "stdin": "in", "env": {"A": "1"},
               "timeoutMs": 5000, "policy": policy("danger-full-access", root)}),
    );
    assert_eq!(run["exitCode"], 0);
    assert_eq!(run["stdout"]["text"], "in");
    assert_eq!(run["stderr"]["text"], "err\n");
    assert_eq!(run["timeoutMs"], 5000);
    assert_eq!(run["timedOut"], false);

    let started = server.call(
        "start",
        json!({"command": "echo one; sleep 0.3; echo two",
               "policy": policy("danger-full-access", root)}),
    );
    let id = started["taskId"].clone();
    let hex = id.as_str().unwrap_or_default();
    assert!(
        hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "a task id is 128 random bits in hex: {started}"
    );
    let done = server.call("wait", json!({"taskId": id}));
    assert_eq!(
        (done["status"].as_str(), done["exitCode"].as_i64()),
        (Some("completed"), Some(0))
    );
    let read = server.call("read", json!({"taskId": id}));
    assert_eq!(read["text"], "one\ntwo\n");
    assert_eq!(read["lossy"], false);
    assert_eq!(
        server.call("read", json!({"taskId": id}))["text"],
        "",
        "reads consume"
    );

    let long = server.call(
        "start",
        json!({"command": "sleep 30", "policy": policy("danger-full-access", root)}),
    )["taskId"]
        .clone();
    let still = server.call("wait", json!({"taskId": long, "timeoutMs": 50}));
    assert_eq!(still["status"], "running");
    assert_eq!(server.call("kill", json!({"taskId": long}))["killed"], true);
    assert_eq!(
        server.call("kill", json!({"taskId": long}))["killed"],
        false
    );
    assert_eq!(
        server.call("wait", json!({"taskId": long}))["status"],
        "killed"
    );

    let list = server.call("list", json!({}));
    let ids: Vec<&Value> = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ids, vec![&id, &long]);
    assert_eq!(
        server.call("remove", json!({"taskId": id}))["removed"],
        true
    );
    assert_eq!(
        server.call("list", json!(null))["tasks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let probe = server.call("probe", json!({}));
    assert!(probe["rungs"].is_array(), "{probe}");

    let info = server.call("reload", json!({"path": component("strict-policy.wasm")}));
    assert_eq!(info["name"], "strict-policy");

    assert_eq!(server.call("shutdown", json!({})), json!({}));
    assert!(server.close_and_wait(Duration::from_secs(10)).success());
}

#[test]
fn every_error_has_its_code_and_names_what_to_fix() {
    let ws = workspace();
    let root = ws.path();
    // Pinning Seatbelt on Linux leaves no usable backend: confined runs fail closed.
    let backend: &[&str] = if cfg!(target_os = "linux") {
        &["--max-mode", "danger-full-access", "--backend", "seatbelt"]
    } else {
        DANGER
    };
    let mut server = Server::start(root, root, backend);

    if cfg!(target_os = "linux") {
        let err = server.call_err("run", json!({"command": "true"}));
        assert_eq!(
            (err["code"].as_i64(), err["data"]["code"].as_str()),
            (Some(-32001), Some("SANDBOX_UNAVAILABLE"))
        );
        assert_eq!(err["data"]["mode"], "read-only");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("refusing to run the command unconfined")
        );
    }

    let err = server.call_err("run", json!({"command": 5}));
    assert_eq!(
        (err["code"].as_i64(), err["data"]["field"].as_str()),
        (Some(-32602), Some("command"))
    );
    let err = server.call_err("run", json!({"command": "x", "timeout": 1}));
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `timeout`"),
        "{err}"
    );
    let err = server.call_err(
        "start",
        json!({"command": "x", "policy": {"mode": "wide", "workspaceRoot": "/"}}),
    );
    assert_eq!(err["data"]["field"], "policy.mode");
    let err = server.call_err("read", json!([1]));
    assert_eq!(err["code"], -32602);

    let err = server.call_err(
        "run",
        json!({"command": "true", "workdir": root.join("missing"), "policy": policy("danger-full-access", root)}),
    );
    assert_eq!(
        (err["code"].as_i64(), err["data"]["code"].as_str()),
        (Some(-32003), Some("WORKDIR"))
    );

    let err = server.call_err(
        "run",
        json!({"command": "true", "env": {"PATH": "/nonexistent"}, "policy": policy("danger-full-access", root)}),
    );
    assert_eq!(
        (err["code"].as_i64(), err["data"]["code"].as_str()),
        (Some(-32004), Some("SPAWN_FAILED"))
    );

    let unknown = "0123456789abcdef0123456789abcdef";
    let err = server.call_err("read", json!({"taskId": unknown}));
    assert_eq!(
        (err["code"].as_i64(), err["data"]["taskId"].as_str()),
        (Some(-32005), Some(unknown))
    );
    let err = server.call_err("read", json!({"taskId": 99}));
    assert_eq!(
        (err["code"].as_i64(), err["data"]["field"].as_str()),
        (Some(-32602), Some("taskId")),
        "an id that is not one is named: {err}"
    );

    let broken = root.join("broken.wasm");
    std::fs::write(&broken, b"\0asm not really").unwrap();
    let err = server.call_err("reload", json!({"path": broken}));
    assert_eq!(
        (err["code"].as_i64(), err["data"]["code"].as_str()),
        (Some(-32002), Some("POLICY_FAILED"))
    );
    assert_eq!(err["data"]["phase"], "load");
    let err = server.call_err("reload", json!({"path": root.join("absent.wasm")}));
    assert_eq!(
        (err["code"].as_i64(), err["data"]["field"].as_str()),
        (Some(-32602), Some("path"))
    );

    let err = server.call_err("frobnicate", json!({}));
    assert_eq!(err["code"], -32601);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("run, start, read"),
        "{err}"
    );

    server.send_line("{not json");
    let reply = server.other_reply();
    assert_eq!(
        (reply["id"].clone(), reply["error"]["code"].as_i64()),
        (Value::Null, Some(-32700))
    );
    for invalid in [
        r#"{"id": 1, "method": "list"}"#,
        r#"{"jsonrpc": "1.0", "id": 2, "method": "list"}"#,
        r#"{"jsonrpc": "2.0", "id": 3, "method": 7}"#,
    ] {
        server.send_line(invalid);
    }
    for id in 1..=3 {
        let reply = server.reply(&json!(id));
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
    }
    server.send_line(r#"{"jsonrpc": "2.0", "id": {"no": 1}, "method": "list"}"#);
    server.send_line("42");
    for _ in 0..2 {
        let reply = server.other_reply();
        assert_eq!(
            (reply["id"].clone(), reply["error"]["code"].as_i64()),
            (Value::Null, Some(-32600))
        );
    }
    // Still serving after all of that.
    assert!(server.call("list", json!({}))["tasks"].is_array());
}

#[test]
fn a_mode_above_the_ceiling_is_invalid_params_naming_the_mode() {
    let ws = workspace();
    let mut server = Server::start(ws.path(), ws.path(), &[]);
    let err = server.call_err(
        "run",
        json!({"command": "true", "policy": policy("danger-full-access", ws.path())}),
    );
    assert_eq!(
        (err["code"].as_i64(), err["data"]["code"].as_str()),
        (Some(-32602), Some("INVALID_REQUEST"))
    );
    assert_eq!(err["data"]["field"], "policy.mode");
    assert_eq!(err["data"]["ceiling"], "workspace-write");

    // A policy that never confines is refused at reload under this ceiling.
    let err = server.call_err("reload", json!({"path": component("bash-local.wasm")}));
    assert_eq!(
        (err["code"].as_i64(), err["data"]["mode"].as_str()),
        (Some(-32002), Some("danger-full-access"))
    );
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("raise the ceiling"),
        "{err}"
    );
}

#[test]
fn batches_answer_in_order_and_leave_notifications_out() {
    let ws = workspace();
    let root = ws.path();
    let mut server = Server::start(root, root, DANGER);
    let marker = root.join("notified");
    let batch = json!([
        {"jsonrpc": "2.0", "id": "a", "method": "run",
         "params": {"command": "sleep 0.2; echo slow", "policy": policy("danger-full-access", root)}},
        {"jsonrpc": "2.0", "method": "run",
         "params": {"command": format!("touch {}", marker.display()), "policy": policy("danger-full-access", root)}},
        {"jsonrpc": "2.0", "id": "b", "method": "list"},
        {"jsonrpc": "2.0", "id": "c", "method": "nope"},
        17
    ]);
    server.send_line(&batch.to_string());
    let replies = server.other_reply();
    let replies = replies.as_array().expect("a batch gets an array");
    let ids: Vec<&Value> = replies.iter().map(|r| &r["id"]).collect();
    assert_eq!(
        ids,
        vec![&json!("a"), &json!("b"), &json!("c"), &Value::Null]
    );
    assert_eq!(replies[0]["result"]["stdout"]["text"], "slow\n");
    assert_eq!(replies[2]["error"]["code"], -32601);
    assert_eq!(replies[3]["error"]["code"], -32600);
    assert!(marker.exists(), "the notification ran");

    server.send_line("[]");
    assert_eq!(server.other_reply()["error"]["code"], -32600);

    // A batch of notifications only gets no reply at all: the next reply
    // on the wire is the one to the request after it.
    server.send_line(&json!([{"jsonrpc": "2.0", "method": "list"}]).to_string());
    server.send_line(r#"{"jsonrpc": "2.0", "method": "list"}"#);
    assert!(server.call("list", json!({}))["tasks"].is_array());
    assert!(server.unmatched() == 0, "notifications were answered");
}

#[test]
fn a_slow_run_does_not_hold_up_a_read() {
    let ws = workspace();
    let root = ws.path();
    let mut server = Server::start(root, root, DANGER);
    let task = server.call(
        "start",
        json!({"command": "echo ready", "policy": policy("danger-full-access", root)}),
    )["taskId"]
        .clone();
    server.call("wait", json!({"taskId": task}));
    let slow = server.send(
        "run",
        json!({"command": "sleep 3", "policy": policy("danger-full-access", root)}),
    );
    let started = Instant::now();
    let read = server.call("read", json!({"taskId": task}));
    assert_eq!(read["text"], "ready\n");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the read waited for the run"
    );
    assert_eq!(server.reply(&slow)["result"]["exitCode"], 0);
}

#[test]
fn eof_answers_what_was_asked_then_kills_live_task_groups() {
    let ws = workspace();
    let root = ws.path();
    let mut server = Server::start(root, root, DANGER);
    let marker = format!("cordon-serve-eof-{}", std::process::id());
    server.call(
        "start",
        json!({"command": format!("sleep 30; echo {marker}"), "policy": policy("danger-full-access", root)}),
    );
    wait_for_processes(&marker, 1);
    let run = server.send(
        "run",
        json!({"command": "sleep 0.3; echo answered", "policy": policy("danger-full-access", root)}),
    );
    let status = server.close_and_wait(Duration::from_secs(15));
    assert!(status.success(), "{status:?}");
    assert_eq!(server.reply(&run)["result"]["stdout"]["text"], "answered\n");
    assert!(processes_gone(&marker), "a task outlived the server");
}

#[test]
fn sigterm_aborts_runs_in_flight_and_exits() {
    let ws = workspace();
    let root = ws.path();
    let mut server = Server::start(root, root, DANGER);
    let marker = format!("cordon-serve-term-{}", std::process::id());
    let run = server.send(
        "run",
        json!({"command": format!("sleep 30; echo {marker}"), "policy": policy("danger-full-access", root)}),
    );
    wait_for_processes(&marker, 1);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let reply = server.reply(&run);
    assert_eq!(reply["result"]["aborted"], true, "{reply}");
    assert!(server.close_and_wait(Duration::from_secs(15)).success());
    assert!(processes_gone(&marker));
}

#[test]
fn two_hundred_concurrent_runs_each_get_their_own_answer_and_leave_nothing() {
    let ws = workspace();
    let root = ws.path();
    let tmp = root.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mode = load_mode("two_hundred_concurrent_runs (confined)");
    let mut server = Server::start(root, &tmp, DANGER);
    let marker = format!("cordon-serve-load-{}", std::process::id());
    let ids: Vec<(usize, Value)> = (0..200)
        .map(|i| {
            let id = server.send(
                "run",
                json!({"command": format!("echo {i} # {marker}"), "policy": policy(mode, root)}),
            );
            (i, id)
        })
        .collect();
    for (i, id) in &ids {
        let reply = server.reply(id);
        let result = reply
            .get("result")
            .unwrap_or_else(|| panic!("run {i}: {reply}"));
        assert_eq!(result["stdout"]["text"], format!("{i}\n"), "run {i}");
        assert_eq!(result["exitCode"], 0);
    }
    assert!(processes_gone(&marker), "a run left a process behind");
    assert!(server.close_and_wait(Duration::from_secs(15)).success());
    let left: Vec<_> = walk(&tmp);
    assert!(left.is_empty(), "spill files left behind: {left:?}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = vec![];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        found.push(entry.path());
        if entry.path().is_dir() {
            found.extend(walk(&entry.path()));
        }
    }
    found
}

#[test]
fn reload_under_load_keeps_old_tasks_on_the_old_policy() {
    if !bwrap_usable("reload_under_load_keeps_old_tasks_on_the_old_policy") {
        return;
    }
    let ws = workspace();
    let root = ws.path();
    let mut server = Server::start(root, root, &[]);
    // Under bash-sandbox a confined `exit 3` is no denial; under
    // strict-policy every confined nonzero exit is stamped denied.
    let tasks: Vec<Value> = (0..20)
        .map(|_| {
            server.call(
                "start",
                json!({"command": "sleep 1; exit 3", "policy": policy("read-only", root)}),
            )["taskId"]
                .clone()
        })
        .collect();
    let info = server.call("reload", json!({"path": component("strict-policy.wasm")}));
    assert_eq!(info["name"], "strict-policy");
    let new = server.call(
        "run",
        json!({"command": "exit 3", "policy": policy("read-only", root)}),
    );
    assert_eq!(
        new["sandbox"]["denied"], true,
        "new runs use the new component: {new}"
    );
    for task in &tasks {
        let done = server.call("wait", json!({"taskId": task}));
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["exitCode"], 3);
        assert_eq!(
            done["sandbox"]["denied"], false,
            "old tasks settle with the old component: {done}"
        );
    }

    let broken = root.join("broken.wasm");
    std::fs::write(&broken, b"not a component").unwrap();
    let err = server.call_err("reload", json!({"path": broken}));
    assert_eq!(err["code"], -32002);
    let still = server.call(
        "run",
        json!({"command": "exit 3", "policy": policy("read-only", root)}),
    );
    assert_eq!(
        still["sandbox"]["denied"], true,
        "the previous component stays active"
    );
}

#[test]
fn an_ask_is_a_structured_error_whose_approved_resend_runs_and_a_deny_is_final() {
    let ws = workspace();
    let rules = common::component("rules-policy.wasm");
    let settings = common::rule_file();
    let mut args = DANGER.to_vec();
    args.extend([
        "--policy",
        rules.to_str().unwrap(),
        "--settings",
        settings.to_str().unwrap(),
    ]);
    let mut server = Server::start(ws.path(), ws.path(), &args);
    let asked = policy("danger-full-access", ws.path());
    let error = server.call_err(
        "run",
        json!({"command": "rm -rf nothing && echo removed", "policy": asked}),
    );
    assert_eq!(error["code"], -32008, "{error}");
    assert_eq!(error["data"]["code"], "APPROVAL_REQUIRED");
    assert_eq!(
        error["data"]["reason"],
        "a recursive delete cannot be undone"
    );
    let proposed = error["data"]["policy"].clone();
    assert_eq!(proposed["mode"], "danger-full-access");
    let run = server.call(
        "run",
        json!({"command": "rm -rf nothing && echo removed", "policy": proposed, "approved": true}),
    );
    assert_eq!(run["stdout"]["text"], "removed\n", "{run}");
    let denied = server.call_err(
        "run",
        json!({"command": "curl x", "policy": asked, "approved": true}),
    );
    assert_eq!(denied["code"], -32007, "{denied}");
    assert_eq!(denied["data"]["code"], "POLICY_DENIED");
    assert!(
        denied["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("no downloads")
    );
}

#[test]
fn sigterm_and_shutdown_end_a_server_whose_stdin_stays_open() {
    let ws = workspace();
    let root = ws.path();
    let mut server = Server::start(root, root, DANGER);
    assert_eq!(server.call("list", json!({}))["tasks"], json!([]));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = server.wait_open(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "SIGTERM did not end the server: {status:?}"
    );

    let mut server = Server::start(root, root, DANGER);
    server.call("shutdown", json!({}));
    let status = server.wait_open(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "shutdown did not end the server: {status:?}"
    );
}

/// Read a task until its text holds `answer` (bounded); what was read.
fn read_until(server: &mut Server, id: &Value, answer: &str) -> String {
    let mut seen = String::new();
    for _ in 0..200 {
        let read = server.call("read", json!({"taskId": id}));
        seen.push_str(read["text"].as_str().unwrap());
        if seen.contains(answer) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    seen
}

/// Whether a read of the task says it awaits input within 5 s.
fn seen_awaiting_input(server: &mut Server, id: &Value) -> bool {
    (0..100).any(|_| {
        let read = server.call("read", json!({"taskId": id}));
        let seen = read["awaitingInput"] == true;
        if !seen {
            std::thread::sleep(Duration::from_millis(50));
        }
        seen
    })
}

#[test]
fn a_task_with_a_terminal_is_interactive_and_sized() {
    for (backend, _) in common::confined_backends("a_task_with_a_terminal") {
        let ws = workspace();
        let root = ws.path();
        let mut server = Server::start(root, root, backend);
        let started = server.call(
            "start",
            json!({"command": "python3 -i -q", "tty": true, "rows": 40, "cols": 100,
                   "policy": policy("read-only", root)}),
        );
        let id = started["taskId"].clone();
        // Its stdin, stdout and stderr are a terminal of the size asked;
        // the prompt (python writes it to stderr) arrives in the one stream.
        let lines = [
            (
                "import os, sys; print([f.isatty() for f in (sys.stdin, sys.stdout, sys.stderr)])\n",
                "[True, True, True]",
            ),
            ("print(os.get_terminal_size())\n", "columns=100, lines=40"),
            ("print(6 * 7)\n", "42"),
        ];
        let first = read_until(&mut server, &id, ">>> ");
        assert!(first.contains(">>> "), "{backend:?}: no prompt: {first:?}");
        // At its prompt it is seen waiting for input (readline's select
        // on the terminal), as the task's status says.
        assert!(
            seen_awaiting_input(&mut server, &id),
            "{backend:?}: never seen awaiting input"
        );
        let listed = server.call("list", json!({}));
        assert_eq!(
            listed["tasks"][0]["awaitingInput"], true,
            "{backend:?}: {listed}"
        );
        for (line, answer) in lines {
            server.call("write", json!({"taskId": id, "data": line}));
            let seen = read_until(&mut server, &id, answer);
            assert!(seen.contains(answer), "{backend:?}: {line:?} gave {seen:?}");
        }
        // eof is the terminal's end-of-file character: python ends cleanly.
        server.call("write", json!({"taskId": id, "eof": true}));
        let done = server.call("wait", json!({"taskId": id, "timeoutMs": 10000}));
        assert_eq!(done["status"], "completed", "{backend:?}: {done}");
        assert_eq!(done["exitCode"], 0, "{backend:?}: {done}");
        assert_eq!(done["sandbox"]["mode"], "read-only", "{done}");
        // A foreground run has no terminal; a size needs tty.
        let foreground = server.call_err(
            "run",
            json!({"command": "true", "tty": true, "policy": policy("read-only", root)}),
        );
        assert_eq!(
            foreground["data"]["code"], "INVALID_REQUEST",
            "{foreground}"
        );
        let stray = server.call_err("start", json!({"command": "true", "cols": 10}));
        assert!(
            stray["message"].as_str().unwrap().contains("tty: true"),
            "{stray}"
        );
        let huge = server.call_err("start", json!({"command": "true", "tty": true, "rows": 0}));
        assert!(
            huge["message"].as_str().unwrap().contains("1 to 1000"),
            "{huge}"
        );
    }
}

#[test]
fn a_task_started_with_open_stdin_takes_what_is_written_to_it() {
    for (backend, _) in common::confined_backends("a_task_started_with_open_stdin") {
        let ws = workspace();
        let root = ws.path();
        let mut server = Server::start(root, root, backend);
        let started = server.call(
            "start",
            json!({"command": "python3 -i -q 2>&1", "openStdin": true,
                   "policy": policy("read-only", root)}),
        );
        let id = started["taskId"].clone();
        // Blocked reading the pipe it is written: seen as waiting for input.
        assert!(
            seen_awaiting_input(&mut server, &id),
            "{backend:?}: never seen awaiting input"
        );
        // Two lines, each answered while the task runs, then end of file.
        for (line, answer) in [("print(6 * 7)\n", "42"), ("print('a' + 'b')\n", "ab")] {
            let wrote = server.call("write", json!({"taskId": id, "data": line}));
            assert_eq!(wrote["written"], line.len(), "{backend:?}");
            let mut seen = String::new();
            for _ in 0..100 {
                seen.push_str(
                    server.call("read", json!({"taskId": id}))["text"]
                        .as_str()
                        .unwrap(),
                );
                if seen.contains(answer) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(seen.contains(answer), "{backend:?}: {seen}");
        }
        server.call("write", json!({"taskId": id, "eof": true}));
        let done = server.call("wait", json!({"taskId": id, "timeoutMs": 10000}));
        assert_eq!(done["status"], "completed", "{backend:?}: {done}");
        assert_eq!(done["sandbox"]["mode"], "read-only", "{done}");
        // Closed now; a task without an open stdin says how to get one.
        let closed = server.call_err("write", json!({"taskId": id, "data": "x"}));
        assert_eq!(closed["data"]["code"], "INVALID_PARAMS", "{closed}");
        let plain = server.call(
            "start",
            json!({"command": "sleep 5",
                                                "policy": policy("read-only", root)}),
        );
        let busy = server.call("read", json!({"taskId": plain["taskId"]}));
        assert_eq!(busy.get("awaitingInput"), None, "{backend:?}: {busy}");
        let refused = server.call_err("write", json!({"taskId": plain["taskId"], "data": "x"}));
        assert!(
            refused["message"].as_str().unwrap().contains("openStdin"),
            "{refused}"
        );
        // A foreground run cannot be written to.
        let foreground = server.call_err(
            "run",
            json!({"command": "true", "openStdin": true,
                                                      "policy": policy("read-only", root)}),
        );
        assert!(
            foreground["message"]
                .as_str()
                .unwrap()
                .contains("openStdin"),
            "{foreground}"
        );
    }
}
