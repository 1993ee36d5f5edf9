//! `cordon serve --listen unix:PATH` end to end: the real binary as a
//! service for many clients — sessions that cannot see or touch each
//! other (under every backend, the host checked after), bounds that answer
//! `BUSY` instead of freezing, back-pressure on a client that stops
//! reading, the spill lifecycle, the policy pool, access by peer
//! credentials and per-uid ceilings, reload guard-rails, exact ids, and
//! SIGTERM with clients connected.

use crate::common;
use crate::rpc::Rpc;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{component, confined_backends, cordon, processes_gone, workspace};
use serde_json::{Value, json};

/// A `cordon serve --listen` child, its socket and its config.
struct Listener {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Listener {
    /// `cordon serve --listen unix:…` in `root` with `config` as its
    /// cordon.toml and `args` after it.
    fn start(root: &Path, config: &str, args: &[&str]) -> Listener {
        let dir = workspace();
        // Traversable by the unprivileged clients of the access test.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = dir.path().join("cordon.sock");
        let config_file = dir.path().join("cordon.toml");
        std::fs::write(&config_file, config).unwrap();
        let child = cordon()
            .current_dir(root)
            .arg("serve")
            .arg("--listen")
            .arg(format!("unix:{}", socket.display()))
            .arg("--config")
            .arg(&config_file)
            .args(args)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn cordon serve --listen");
        common::eventually(
            Duration::from_secs(30),
            "the listener never came up",
            || UnixStream::connect(&socket).is_ok(),
        );
        Listener {
            child,
            socket,
            _dir: dir,
        }
    }

    /// A new client connection.
    fn connect(&self) -> Rpc {
        Rpc::over(UnixStream::connect(&self.socket).expect("connect"))
    }

    /// The server's resident memory, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// SIGTERM, and the exit within `bound` (none if it did not exit).
    fn terminate(&mut self, bound: Duration) -> Option<std::process::ExitStatus> {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        common::exit_within(&mut self.child, bound)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn policy(mode: &str, root: &Path) -> Value {
    json!({"mode": mode, "workspaceRoot": root})
}

const DANGER: &str = "max_mode = \"danger-full-access\"\n";

/// A command whose stdout spills (more than the 64 000-byte tail).
const SPILLING: &str = "head -c 100000 /dev/zero | tr '\\0' a";

#[test]
fn two_clients_cannot_see_or_touch_each_others_tasks_or_spills() {
    for (backend, _) in confined_backends("two_clients_cannot_see_or_touch") {
        let ws = workspace();
        let root = ws.path();
        let server = Listener::start(root, "", backend);
        let (mut alice, mut bob) = (server.connect(), server.connect());
        let mark = format!("71.{}", std::process::id());
        let task = alice.call(
            "start",
            json!({"command": format!("sleep {mark}"), "policy": policy("read-only", root)}),
        )["taskId"]
            .clone();
        let spilled = alice.call(
            "run",
            json!({"command": SPILLING, "policy": policy("read-only", root)}),
        );
        let spill = PathBuf::from(spilled["stdout"]["spillPath"].as_str().expect("spilled"));
        assert_eq!(std::fs::read(&spill).unwrap(), vec![b'a'; 100_000]);

        // Bob sees none of it and can touch none of it.
        assert_eq!(bob.call("list", json!({}))["tasks"], json!([]));
        for method in ["read", "kill", "remove", "wait"] {
            let err = bob.call_err(method, json!({"taskId": task}));
            assert_eq!(
                err["data"]["code"], "UNKNOWN_TASK",
                "{backend:?} {method}: {err}"
            );
        }
        let err = bob.call_err("release", json!({"spillPath": spill}));
        assert_eq!(err["data"]["code"], "UNKNOWN_SPILL", "{err}");
        // Nor can his commands, under either mode.
        let dir = spill.parent().unwrap().display().to_string();
        let spill_text = spill.display().to_string();
        let attack = format!(
            "cat {spill_text}; ls -a {dir}; echo forged > {spill_text}; rm -f {spill_text}; \
             ls -a $(dirname {dir})"
        );
        for mode in ["read-only", "workspace-write"] {
            let seen = bob.call(
                "run",
                json!({"command": attack, "policy": policy(mode, root)}),
            );
            assert!(
                !seen["stdout"]["text"].as_str().unwrap().contains("aaaa"),
                "{backend:?} {mode}: bob read alice's output: {seen}"
            );
        }
        assert_eq!(
            std::fs::read(&spill).unwrap(),
            vec![b'a'; 100_000],
            "{backend:?}: alice's spill file is untouched on the host"
        );
        // Alice's task runs on; she can read it (the positive control).
        assert_eq!(
            alice.call("read", json!({"taskId": task}))["status"],
            "running"
        );
        common::wait_for_sleepers(&mark, 1);
        assert_eq!(common::sleepers(&mark).len(), 1);

        // Released, her spill is gone; her disconnect ends her task.
        assert_eq!(
            alice.call("release", json!({"spillPath": spill}))["released"],
            true
        );
        assert!(!spill.exists(), "released spill files are deleted");
        let again = alice.call("run", json!({"command": SPILLING}));
        let second = PathBuf::from(again["stdout"]["spillPath"].as_str().unwrap());
        drop(alice);
        assert!(processes_gone(&format!("sleep {mark}")), "{backend:?}");
        common::eventually(
            Duration::from_secs(10),
            "the session's spills outlived it",
            || !second.exists(),
        );
        assert!(bob.call("list", json!({}))["tasks"] == json!([]));
    }
}

#[test]
fn past_the_task_bounds_a_start_is_busy_and_the_server_stays_responsive() {
    let ws = workspace();
    let root = ws.path();
    let config = format!("{DANGER}[serve]\nmax_tasks = 500\nmax_session_tasks = 125\n");
    let server = Listener::start(root, &config, &[]);
    let mark = format!("72.{}", std::process::id());
    let command = format!("sleep {mark}");
    let clients: Vec<Rpc> = std::thread::scope(|scope| {
        let starting: Vec<_> = (0..4)
            .map(|_| {
                let (server, command) = (&server, &command);
                scope.spawn(move || {
                    let mut client = server.connect();
                    for _ in 0..125 {
                        client.call(
                            "start",
                            json!({"command": command, "policy": policy("danger-full-access", root)}),
                        );
                    }
                    client
                })
            })
            .collect();
        starting.into_iter().map(|s| s.join().unwrap()).collect()
    });
    let mut clients = clients;
    common::eventually(
        Duration::from_secs(30),
        "not all 500 tasks are running",
        || common::sleepers(&mark).len() >= 500,
    );
    // One more in a full session: its own bound.
    let err = clients[0].call_err("start", json!({"command": command}));
    assert_eq!(
        (err["code"].as_i64(), &err["data"]),
        (
            Some(-32009),
            &json!({"code": "BUSY", "limit": "maxSessionTasks", "max": 125})
        ),
        "{err}"
    );
    // One more from a fresh client: the server's bound.
    let mut fresh = server.connect();
    let err = fresh.call_err("start", json!({"command": command}));
    assert_eq!(
        err["data"],
        json!({"code": "BUSY", "limit": "maxTasks", "max": 500})
    );
    assert!(err["message"].as_str().unwrap().contains("retry"), "{err}");
    // Every client is still served, and sees its own tasks and the load.
    for client in &mut clients {
        let list = client.call("list", json!({}));
        assert_eq!(list["tasks"].as_array().unwrap().len(), 125);
        assert_eq!(list["server"]["load"]["tasks"], 500);
        assert_eq!(list["server"]["sessionLimits"]["maxTasks"], 500);
    }
    assert_eq!(
        fresh.call("run", json!({"command": "echo ok"}))["stdout"]["text"],
        "ok\n"
    );
    drop(clients);
    common::eventually(
        Duration::from_secs(60),
        "disconnects did not end every task",
        || common::sleepers(&mark).is_empty(),
    );
    // And the ended sessions give back what they held.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = fresh.call("list", json!({}));
        if list["server"]["load"] == json!({"runs": 0, "sessions": 2, "tasks": 0}) {
            break;
        }
        assert!(Instant::now() < deadline, "the load never fell: {list}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_client_that_stops_reading_is_held_back_and_others_keep_running() {
    let ws = workspace();
    let root = ws.path();
    let server = Listener::start(root, DANGER, &[]);
    let mut other = server.connect();
    assert_eq!(
        other.call("run", json!({"command": "echo warm"}))["exitCode"],
        0
    );
    let before = server.rss_kib();

    // A client that only writes: requests whose replies are 60 kB each.
    let mut flood = UnixStream::connect(&server.socket).unwrap();
    flood
        .set_write_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {
        "command": "head -c 60000 /dev/zero | tr '\\0' x",
        "policy": policy("danger-full-access", root)}})
    .to_string()
        + "\n";
    let limit = 64 << 20;
    let mut written = 0usize;
    let blocked = loop {
        match flood.write(request.as_bytes()) {
            Ok(n) => written += n,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break true,
            Err(err) => panic!("the flood's write failed: {err}"),
        }
        if written > limit {
            break false;
        }
    };
    assert!(
        blocked,
        "the server kept reading a client that reads nothing ({written} bytes taken)"
    );
    let after = server.rss_kib();
    assert!(
        after < before + 100 * 1024,
        "the server grew from {before} KiB to {after} KiB for one stalled client"
    );
    // Another client's runs keep flowing meanwhile.
    for i in 0..5 {
        let run = other.call("run", json!({"command": format!("echo {i}")}));
        assert_eq!(run["stdout"]["text"], format!("{i}\n"));
    }
    assert!(server.rss_kib() < before + 100 * 1024);
}

#[test]
fn spill_paths_of_a_batch_all_exist_when_it_is_answered_until_released() {
    let ws = workspace();
    let root = ws.path();
    let server = Listener::start(root, "", &[]);
    let mut client = server.connect();
    let batch: Vec<Value> = (0..100)
        .map(|i| {
            json!({"jsonrpc": "2.0", "id": i, "method": "run",
                   "params": {"command": SPILLING, "policy": policy("read-only", root)}})
        })
        .collect();
    client.send_line(&Value::Array(batch).to_string());
    let replies = client.other_reply();
    let replies = replies.as_array().expect("a batch reply");
    assert_eq!(replies.len(), 100);
    let spills: Vec<PathBuf> = replies
        .iter()
        .map(|reply| {
            let path = reply["result"]["stdout"]["spillPath"]
                .as_str()
                .expect("spilled");
            PathBuf::from(path)
        })
        .collect();
    let missing: Vec<&PathBuf> = spills.iter().filter(|p| !p.exists()).collect();
    assert!(
        missing.is_empty(),
        "spill files gone before release: {missing:?}"
    );
    for spill in &spills {
        assert_eq!(
            client.call("release", json!({"spillPath": spill}))["released"],
            true
        );
        assert!(!spill.exists());
    }
    let err = client.call_err("release", json!({"spillPath": spills[0]}));
    assert_eq!(err["data"]["code"], "UNKNOWN_SPILL");
}

#[test]
fn unreleased_spills_expire_after_the_operators_ttl() {
    let ws = workspace();
    let root = ws.path();
    let server = Listener::start(root, "[serve]\nspill_ttl_secs = 1\n", &[]);
    let mut client = server.connect();
    let run = client.call("run", json!({"command": SPILLING}));
    let spill = PathBuf::from(run["stdout"]["spillPath"].as_str().unwrap());
    assert!(spill.exists());
    common::eventually(
        Duration::from_secs(10),
        "the TTL never released the spill",
        || !spill.exists(),
    );
}

#[test]
fn looping_policy_calls_do_not_hold_up_an_unrelated_run() {
    let ws = workspace();
    let root = ws.path();
    let hostile = component("hostile-policy.wasm");
    let server = Listener::start(
        root,
        "[serve]\npolicy_threads = 12\n",
        &["--policy", hostile.to_str().unwrap()],
    );
    let mut client = server.connect();
    // Each of these spins in the component until its call deadline (1 s).
    let loops: Vec<Value> = (0..10)
        .map(|_| client.send("run", json!({"command": "loop-resolve"})))
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let echo = client.send("run", json!({"command": "echo unrelated"}));
    let reply = client.reply(&echo);
    assert_eq!(reply["result"]["stdout"]["text"], "unrelated\n", "{reply}");
    let pending = loops
        .iter()
        .filter(|id| client.reply_within(id, Duration::ZERO).is_none())
        .count();
    assert_eq!(
        pending, 10,
        "the unrelated run was answered only after looping calls ended"
    );
    for id in &loops {
        let reply = client.reply(id);
        assert_eq!(reply["error"]["data"]["code"], "POLICY_FAILED", "{reply}");
    }
}

#[test]
fn sigterm_ends_a_listener_with_clients_and_tasks() {
    let ws = workspace();
    let root = ws.path();
    let mut server = Listener::start(root, DANGER, &[]);
    let mark = format!("73.{}", std::process::id());
    let mut alice = server.connect();
    let _bob = server.connect();
    alice.call(
        "start",
        json!({"command": format!("sleep {mark}"), "policy": policy("danger-full-access", root)}),
    );
    let running = alice.send(
        "run",
        json!({"command": format!("sleep {mark}"), "policy": policy("danger-full-access", root)}),
    );
    common::wait_for_processes(&format!("sleep {mark}"), 2);
    let status = server.terminate(Duration::from_secs(15));
    assert!(status.is_some(), "SIGTERM did not end the listener");
    assert!(status.unwrap().success());
    assert!(
        processes_gone(&format!("sleep {mark}")),
        "tasks outlived the server"
    );
    assert!(
        !server.socket.exists(),
        "the socket file outlived the server"
    );
    // The foreground run was aborted and answered before the end.
    let reply = alice.reply(&running);
    assert_eq!(reply["result"]["aborted"], true, "{reply}");
}

#[test]
fn ids_of_every_legal_form_are_echoed_byte_for_byte() {
    let ws = workspace();
    let server = Listener::start(ws.path(), "", &[]);
    let mut client = server.connect();
    let ids = [
        "123456789012345678901234567890",
        "-1.50",
        "1e400",
        "\"t\\u0041sk\"",
        "null",
    ];
    for id in ids {
        client.send_line(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"list"}}"#));
    }
    common::eventually(
        Duration::from_secs(10),
        "not every request was answered",
        || client.raw_lines().len() >= ids.len(),
    );
    let lines = client.raw_lines();
    for id in ids {
        let echoed = format!(r#""id":{id},"#);
        assert!(
            lines.iter().any(|line| line.contains(&echoed)),
            "{id} was not echoed exactly: {lines:?}"
        );
    }
}

/// One request from a process with these credentials; the reply line (or
/// the connect error).
fn call_as(socket: &Path, uid: u32, gid: u32, groups: &[u32], request: &Value) -> String {
    let script = "import socket,sys\n\
        s=socket.socket(socket.AF_UNIX)\n\
        try:\n s.connect(sys.argv[1])\n\
        except OSError as e:\n print('connect:', e.strerror); sys.exit(0)\n\
        s.sendall(sys.argv[2].encode()+b'\\n')\n\
        print(s.makefile().readline().strip())\n";
    let groups = groups.to_vec();
    let mut command = std::process::Command::new("python3");
    command
        .arg("-c")
        .arg(script)
        .arg(socket)
        .arg(request.to_string());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let list: Vec<nix::libc::gid_t> = groups.clone();
            if nix::libc::setgroups(list.len(), list.as_ptr()) != 0
                || nix::libc::setgid(gid) != 0
                || nix::libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = command.output().expect("run python3 as another user");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn peers_are_admitted_by_their_credentials_and_bounded_by_their_uids_ceiling() {
    if !common::python_usable("peers_are_admitted") {
        return;
    }
    let ws = workspace();
    let root = ws.path();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = "[serve]\nsocket_group = 65534\n[serve.uid.12345]\nmax_mode = \"read-only\"\n";
    let server = Listener::start(root, config, &[]);
    let meta = std::fs::metadata(&server.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(std::os::unix::fs::MetadataExt::gid(&meta), 65534);

    let run = |mode: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "run",
               "params": {"command": "echo in", "policy": policy(mode, root)}})
    };
    // A member of the socket's group by primary gid: admitted, under the
    // operator's ceiling for its uid.
    let reply: Value = serde_json::from_str(&call_as(
        &server.socket,
        12345,
        65534,
        &[],
        &run("read-only"),
    ))
    .unwrap();
    assert_eq!(reply["result"]["stdout"]["text"], "in\n", "{reply}");
    let reply: Value = serde_json::from_str(&call_as(
        &server.socket,
        12345,
        65534,
        &[],
        &run("workspace-write"),
    ))
    .unwrap();
    assert_eq!(reply["error"]["data"]["ceiling"], "read-only", "{reply}");
    // The file's group lets this one connect; its credentials do not admit it.
    let reply: Value = serde_json::from_str(&call_as(
        &server.socket,
        12346,
        12346,
        &[65534],
        &run("read-only"),
    ))
    .unwrap();
    assert_eq!(reply["error"]["data"]["code"], "FORBIDDEN", "{reply}");
    assert_eq!(reply["error"]["data"]["uid"], 12346);
    assert!(!root.join("in").exists());
    // Anyone else cannot even connect.
    let refused = call_as(&server.socket, 12347, 12347, &[], &run("read-only"));
    assert!(refused.starts_with("connect:"), "{refused}");
    // Root is served, with the host's ceiling.
    let mut admin = server.connect();
    let wider = admin.call(
        "run",
        json!({"command": "true", "policy": policy("workspace-write", root)}),
    );
    assert_eq!(wider["exitCode"], 0);
    let probe = admin.call("probe", json!({}));
    assert_eq!(probe["server"]["peer"]["uid"], 0, "{probe}");
    assert_eq!(probe["server"]["access"]["gids"], json!([65534]));
}

#[test]
fn reload_is_off_on_a_socket_unless_the_operator_names_a_directory() {
    let ws = workspace();
    let root = ws.path();
    let strict = component("strict-policy.wasm");
    let server = Listener::start(root, "", &[]);
    let mut client = server.connect();
    let err = client.call_err("reload", json!({"path": strict}));
    assert_eq!(err["data"]["code"], "FORBIDDEN", "{err}");
    assert_eq!(err["code"], -32010);
    drop(client);
    drop(server);

    let allowed = workspace();
    let inside = allowed.path().join("strict.wasm");
    std::fs::copy(&strict, &inside).unwrap();
    let config = format!("[serve]\nreload = \"{}\"\n", allowed.path().display());
    let server = Listener::start(root, &config, &[]);
    let mut client = server.connect();
    let err = client.call_err("reload", json!({"path": strict}));
    assert_eq!(
        err["data"]["code"], "FORBIDDEN",
        "outside the directory: {err}"
    );
    let info = client.call("reload", json!({"path": inside}));
    assert_eq!(info["name"], "strict-policy", "{info}");
}

/// `reload` reads a regular file of bounded size: `/dev/zero` (which a
/// plain read would take until memory ran out) and a FIFO nobody writes
/// (which a plain open would wait on forever) are refused at once, and the
/// server and its other clients go on.
#[test]
fn reload_of_dev_zero_or_a_fifo_is_refused_and_the_server_lives() {
    let ws = workspace();
    let root = ws.path();
    let fifo = root.join("policy.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let server = Listener::start(root, "[serve]\nreload = \"any\"\n", &[]);
    let mut client = server.connect();
    let mut other = server.connect();
    for path in [Path::new("/dev/zero"), fifo.as_path()] {
        let started = Instant::now();
        let err = client.call_err("reload", json!({"path": path}));
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("not a regular file"),
            "{path:?}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{path:?}");
    }
    let ran = other.call(
        "run",
        json!({"command": "echo alive", "policy": policy("read-only", root)}),
    );
    assert_eq!(ran["stdout"]["text"], "alive\n", "{ran}");
    assert!(
        server.rss_kib() < 512 * 1024,
        "the server grew: {} KiB",
        server.rss_kib()
    );
}

#[test]
fn detached_tasks_wait_for_their_token_and_die_at_the_ttl() {
    let ws = workspace();
    let root = ws.path();
    // Off by default: a disconnect kills (tested above), and detach says so.
    let server = Listener::start(root, "", &[]);
    let err = server.connect().call_err("detach", json!({}));
    assert_eq!(err["data"]["code"], "FORBIDDEN", "{err}");
    drop(server);

    let config = format!("{DANGER}[serve]\ndetach_ttl_secs = 2\n");
    let server = Listener::start(root, &config, &[]);
    let mark = format!("74.{}", std::process::id());
    let mut first = server.connect();
    let task = first.call(
        "start",
        json!({"command": format!("sleep {mark}; echo done"), "policy": policy("danger-full-access", root)}),
    )["taskId"]
        .clone();
    let detached = first.call("detach", json!({}));
    let token = detached["attachToken"].clone();
    assert_eq!(detached["ttlSecs"], 2);
    drop(first);
    std::thread::sleep(Duration::from_millis(300));
    common::wait_for_sleepers(&mark, 1);
    assert_eq!(
        common::sleepers(&mark).len(),
        1,
        "the detached task runs on"
    );

    let mut second = server.connect();
    let err = second.call_err("attach", json!({"attachToken": "0".repeat(32)}));
    assert_eq!(err["data"]["code"], "UNKNOWN_ATTACH_TOKEN");
    let attached = second.call("attach", json!({"attachToken": token}));
    assert_eq!(attached["tasks"][0]["id"], task, "{attached}");
    assert_eq!(
        second.call("read", json!({"taskId": task}))["status"],
        "running"
    );
    let err = second.call_err("attach", json!({"attachToken": token}));
    assert_eq!(
        err["data"]["code"], "UNKNOWN_ATTACH_TOKEN",
        "a token is single-use"
    );
    assert_eq!(second.call("kill", json!({"taskId": task}))["killed"], true);
    assert!(processes_gone(&format!("sleep {mark}")));

    // Unclaimed, a detached task dies when the TTL passes.
    let late = format!("75.{}", std::process::id());
    let mut third = server.connect();
    third.call(
        "start",
        json!({"command": format!("sleep {late}"), "policy": policy("danger-full-access", root)}),
    );
    third.call("detach", json!({}));
    drop(third);
    std::thread::sleep(Duration::from_millis(300));
    common::wait_for_sleepers(&late, 1);
    assert_eq!(common::sleepers(&late).len(), 1);
    common::eventually(
        Duration::from_secs(15),
        "the TTL never ended the detached task",
        || common::sleepers(&late).is_empty(),
    );
}

#[test]
fn systemd_socket_activation_serves_the_socket_it_is_given() {
    let Ok(activate) = which::systemd_socket_activate() else {
        eprintln!("SKIPPED systemd_socket_activation: systemd-socket-activate is not installed");
        return;
    };
    let ws = workspace();
    let dir = workspace();
    let socket = dir.path().join("activated.sock");
    let mut child = std::process::Command::new(activate)
        .arg("-l")
        .arg(&socket)
        .arg(env!("CARGO_BIN_EXE_cordon"))
        .args(["serve", "--listen", "systemd"])
        .current_dir(ws.path())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn systemd-socket-activate");
    let deadline = Instant::now() + Duration::from_secs(30);
    let stream = loop {
        if let Ok(stream) = UnixStream::connect(&socket) {
            break stream;
        }
        assert!(
            Instant::now() < deadline,
            "the activated socket never came up"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut client = Rpc::over(stream);
    let run = client.call("run", json!({"command": "echo activated"}));
    assert_eq!(run["stdout"]["text"], "activated\n");
    let probe = client.call("probe", json!({}));
    assert_eq!(probe["server"]["peer"]["uid"], 0, "{probe}");
    let _ = child.kill();
    let _ = child.wait();
}

mod which {
    /// `systemd-socket-activate`, where systemd installs it.
    pub fn systemd_socket_activate() -> Result<&'static str, ()> {
        [
            "/usr/bin/systemd-socket-activate",
            "/bin/systemd-socket-activate",
        ]
        .into_iter()
        .find(|path| std::path::Path::new(path).is_file())
        .ok_or(())
    }
}

#[test]
fn many_long_waits_in_flight_do_not_stop_a_kill_from_being_read() {
    let ws = workspace();
    let root = ws.path();
    let server = Listener::start(root, DANGER, &[]);
    let mut client = server.connect();
    let mark = format!("76.{}", std::process::id());
    let task = client.call(
        "start",
        json!({"command": format!("sleep {mark}"), "policy": policy("danger-full-access", root)}),
    )["taskId"]
        .clone();
    // More waits than replies may queue: they are in flight, not queued.
    let waits: Vec<Value> = (0..100)
        .map(|_| client.send("wait", json!({"taskId": task})))
        .collect();
    assert_eq!(client.call("kill", json!({"taskId": task}))["killed"], true);
    for id in &waits {
        assert_eq!(client.reply(id)["result"]["status"], "killed");
    }
}

/// Connect to the server's socket (argv[1]) and send it the request in
/// the file argv[2]; print its answer, or `unreachable`.
pub(crate) const DRIVE: &str = r#"
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(open(sys.argv[2], "rb").read())
    print("answer", s.recv(65536).decode())
except OSError as e:
    print("unreachable", e)
"#;

#[test]
fn a_run_cannot_drive_the_server_that_confines_it() {
    for (backend, _) in confined_backends("a_run_cannot_drive_the_server_that_confines_it") {
        let ws = workspace();
        let target = workspace();
        let server = Listener::start(ws.path(), "max_network = \"full\"\n", backend);
        let escaped = target.path().join("escaped");
        let wider = json!({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {
            "command": format!("echo x > {}", escaped.display()),
            "policy": policy("workspace-write", target.path())}});
        let request = ws.path().join("request.json");
        std::fs::write(&request, format!("{wider}\n")).unwrap();
        // A read-only run with the whole network connects to the server's
        // socket and asks for a workspace-write run elsewhere.
        let script = ws.path().join("drive.py");
        std::fs::write(&script, DRIVE).unwrap();
        let inner = format!(
            "python3 {} {} {}",
            script.display(),
            server.socket.display(),
            request.display()
        );
        let mut client = server.connect();
        let mut read_only = policy("read-only", ws.path());
        read_only["network"] = json!("full");
        let reply = client.call("run", json!({"command": inner, "policy": read_only}));
        let out = reply["stdout"]["text"].as_str().unwrap_or_default();
        assert!(
            !escaped.exists(),
            "{backend:?}: the run drove the server: {reply}"
        );
        assert!(
            out.contains("unreachable") || out.contains("FORBIDDEN"),
            "{backend:?}: {reply}"
        );
        // The positive control: a client outside every run is served.
        let mut outside = server.connect();
        let served = outside.call("run", wider["params"].clone());
        assert_eq!(served["exitCode"], 0, "{backend:?}: {served}");
        assert!(escaped.exists(), "{backend:?}");
        std::fs::remove_file(&escaped).unwrap();
    }
}

/// Open 20,000 idle connections to the run's proxy and hold them.
pub(crate) const HOG: &str = r#"
import os, resource, socket, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = 30000 if hard == resource.RLIM_INFINITY else min(hard, 30000)
resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
port = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
held = []
for i in range(20000):
    try:
        s = socket.socket()
        s.setblocking(False)
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    except OSError:
        break
    held.append(s)
print("limit", want, flush=True)
print("opened", len(held), flush=True)
time.sleep(120)
"#;

#[test]
fn twenty_thousand_idle_proxy_connections_from_one_run_leave_other_runs_working() {
    for (backend, _) in confined_backends("twenty_thousand_idle_proxy_connections") {
        let ws = workspace();
        let server = Listener::start(ws.path(), "max_network = \"full\"\n", backend);
        let hog = ws.path().join("hog.py");
        std::fs::write(&hog, HOG).unwrap();
        hold_the_proxy_while_others_run(
            server.connect(),
            server.connect(),
            ws.path(),
            &hog,
            &format!("{backend:?}"),
        );
    }
}

/// A task of `hogging`'s session runs `hog` ([`HOG`]: 20,000 idle
/// connections to its proxy, held); meanwhile runs of `other`'s session —
/// plain and proxied — work, and the hog still runs.
pub(crate) fn hold_the_proxy_while_others_run(
    mut hogging: Rpc,
    mut other: Rpc,
    ws: &Path,
    hog: &Path,
    backend: &str,
) {
    let mut proxied = policy("read-only", ws);
    proxied["network"] = json!({"allow": [{"host": "example.com", "port": 443}]});
    let command = format!("python3 {}", hog.display());
    let task =
        hogging.call("start", json!({"command": command, "policy": proxied}))["taskId"].clone();
    let mut text = String::new();
    let until = Instant::now() + Duration::from_secs(60);
    while !text.contains("opened") && Instant::now() < until {
        let read = hogging.call("read", json!({"taskId": task}));
        text.push_str(read["text"].as_str().unwrap_or_default());
        if read["status"] != "running" {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(text.contains("opened"), "{backend}: {text}");
    eprintln!("{backend}: the hog {}", text.trim());
    // Other runs — in another session, and another proxied one — work.
    for _ in 0..3 {
        let ran = other.call(
            "run",
            json!({"command": "echo ok", "policy": policy("read-only", ws)}),
        );
        assert_eq!(ran["exitCode"], 0, "{backend}: {ran} (hog: {text})");
        assert_eq!(ran["stdout"]["text"], "ok\n", "{backend}: {ran}");
    }
    let ran = other.call("run", json!({"command": "echo proxied", "policy": proxied}));
    assert_eq!(ran["exitCode"], 0, "{backend}: {ran}");
    assert_eq!(
        hogging.call("read", json!({"taskId": task}))["status"],
        "running",
        "{backend}"
    );
    hogging.call("kill", json!({"taskId": task}));
}

/// Two unprivileged clients of a root server: each one's runs are its own
/// uid (not root's) on every backend — `id` says so, `/etc/shadow` and the
/// other client's private workspace stay unreadable, a file a run makes is
/// the client's — while root's own client still reads what root may (the
/// positive control). Root's home cannot be granted as a writable root.
#[test]
fn a_root_servers_clients_run_as_themselves() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED a_root_servers_clients_run_as_themselves: needs a root server");
        return;
    }
    if !common::python_usable("a_root_servers_clients_run_as_themselves") {
        return;
    }
    const GROUP: u32 = 65534;
    let tenants = workspace();
    std::fs::set_permissions(tenants.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = |uid: u32, name: &str| {
        let dir = tenants.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("secret"), format!("{name}'s secret\n")).unwrap();
        for path in [dir.join("secret"), dir.clone()] {
            nix::unistd::chown(&path, Some(uid.into()), Some(uid.into())).unwrap();
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    };
    let (alice, bob) = (12401, 12402);
    let (ws_a, ws_b) = (private(alice, "alice"), private(bob, "bob"));
    let log = tenants.path().join("audit.jsonl");
    let (port, _) = crate::network::http_server("through the proxy\n");
    // Readable by all on the host; hidden from alice's runs by her ceiling.
    let shared = tenants.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("notes"), "shared notes\n").unwrap();
    for path in [&shared, &shared.join("notes")] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let config = format!(
        "audit_log = {:?}\nmax_network = [\"127.0.0.1:{port}\"]\n[serve]\nsocket_group = {GROUP}\n\
         allowed_uids = [{alice}, {bob}]\n[serve.uid.{alice}]\ndeny_read = [{:?}]\n",
        log.to_str().unwrap(),
        shared.to_str().unwrap()
    );
    for (backend, _) in confined_backends("a_root_servers_clients_run_as_themselves") {
        let server = Listener::start(tenants.path(), &config, backend);
        let call = |uid: u32, command: &str, mode: &str, root: &Path| -> Value {
            let request = json!({"jsonrpc": "2.0", "id": 1, "method": "run",
                "params": {"command": command, "policy": policy(mode, root)}});
            let line = call_as(&server.socket, uid, uid, &[GROUP], &request);
            serde_json::from_str(&line).unwrap_or_else(|_| panic!("{backend:?}: {line}"))
        };
        let stdout = |reply: &Value| reply["result"]["stdout"]["text"].clone();
        let ws = ws_a.to_str().unwrap();

        let who = call(alice, "id -u; id -g", "read-only", &ws_a);
        assert_eq!(stdout(&who), "12401\n12401\n", "{backend:?}: {who}");
        let shadow = call(alice, "head -c 5 /etc/shadow", "read-only", &ws_a);
        assert_ne!(shadow["result"]["exitCode"], 0, "{backend:?}: {shadow}");
        assert_eq!(stdout(&shadow), "", "{backend:?}: {shadow}");
        let peek = format!("cat {}/secret", ws_b.display());
        let other = call(alice, &peek, "read-only", &ws_a);
        assert_ne!(other["result"]["exitCode"], 0, "{backend:?}: {other}");
        assert_eq!(stdout(&other), "", "{backend:?}: {other}");
        // The operator's deny_read for alice hides what bob still reads.
        let notes = format!("cat {}/notes", shared.display());
        let hidden = call(alice, &notes, "read-only", &ws_a);
        assert_eq!(stdout(&hidden), "", "{backend:?}: {hidden}");
        let read = call(bob, &notes, "read-only", &ws_b);
        assert_eq!(stdout(&read), "shared notes\n", "{backend:?}: {read}");
        // Positive controls: bob reads his own; root's client reads shadow.
        let own = call(bob, &peek, "read-only", &ws_b);
        assert_eq!(stdout(&own), "bob's secret\n", "{backend:?}: {own}");
        let mut admin = server.connect();
        let root_reads = admin.call(
            "run",
            json!({"command": "head -c 5 /etc/shadow | wc -c", "policy": policy("read-only", &ws_a)}),
        );
        assert_eq!(
            root_reads["stdout"]["text"], "5\n",
            "{backend:?}: {root_reads}"
        );

        // A file alice's run makes is alice's, on the host.
        let made = ws_a.join(format!("made-{}", backend[1]));
        let touch = call(
            alice,
            &format!("echo x > {}", made.display()),
            "workspace-write",
            &ws_a,
        );
        assert_eq!(touch["result"]["exitCode"], 0, "{backend:?}: {touch}");
        let meta = std::fs::metadata(&made).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!((meta.uid(), meta.gid()), (alice, alice), "{backend:?}");

        // An allow-list run as alice reaches its proxy (the socket is hers).
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {
            "command": format!("curl -s http://127.0.0.1:{port}/"),
            "policy": {"mode": "read-only", "workspaceRoot": ws,
                       "network": {"allow": [{"host": "127.0.0.1", "port": port}]}}}});
        let fetched: Value =
            serde_json::from_str(&call_as(&server.socket, alice, alice, &[GROUP], &request))
                .unwrap();
        assert_eq!(
            stdout(&fetched),
            "through the proxy\n",
            "{backend:?}: {fetched}"
        );

        // Bob's workspace is one alice may not enter: refused before the
        // host (root) builds anything there.
        let before = std::fs::read_dir(&ws_b).unwrap().count();
        let intrude = call(alice, "true", "workspace-write", &ws_b);
        assert_eq!(
            intrude["error"]["data"]["code"], "INVALID_REQUEST",
            "{backend:?}: {intrude}"
        );
        assert!(
            intrude["error"]["message"]
                .as_str()
                .unwrap()
                .contains("uid 12401 may not enter")
        );
        assert_eq!(
            std::fs::read_dir(&ws_b).unwrap().count(),
            before,
            "{backend:?}"
        );

        // Root's home as an extra writable root is above the default
        // ceiling, and nothing lands there.
        let probe = Path::new("/root").join(format!("cordon-tenant-{}", std::process::id()));
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {
            "command": format!("echo x > {}", probe.display()),
            "policy": {"mode": "workspace-write", "workspaceRoot": ws, "writableRoots": ["/root"]}}});
        let line = call_as(&server.socket, alice, alice, &[GROUP], &request);
        let refused: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            refused["error"]["data"]["field"], "policy.writableRoots",
            "{refused}"
        );
        assert!(!probe.exists(), "{backend:?}: a run wrote into root's home");
    }
    // The audit log says whose each run was.
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let alices = records
        .iter()
        .filter(|r| r["event"] == "run" && r["peer"].as_str().unwrap().starts_with("uid 12401"))
        .collect::<Vec<_>>();
    assert!(!alices.is_empty(), "{records:#?}");
    assert!(alices.iter().all(|r| r["runAs"] == alice), "{alices:#?}");
    assert!(
        records
            .iter()
            .any(|r| r["event"] == "run" && r.get("runAs").is_none())
    );
}

/// A `reload` is audited whether it is carried out or refused by the
/// operator's rule, naming the client and what it asked for.
#[test]
fn reloads_refused_or_carried_out_are_audited() {
    let ws = workspace();
    let root = ws.path();
    let logs = workspace();
    let log = logs.path().join("audit.jsonl");
    let allowed = workspace();
    let inside = allowed.path().join("strict.wasm");
    std::fs::copy(component("strict-policy.wasm"), &inside).unwrap();
    let config = format!(
        "audit_log = {:?}\n[serve]\nreload = \"{}\"\n",
        log.to_str().unwrap(),
        allowed.path().display()
    );
    let server = Listener::start(root, &config, &[]);
    let mut client = server.connect();
    let outside = component("strict-policy.wasm");
    let err = client.call_err("reload", json!({"path": outside}));
    assert_eq!(err["data"]["code"], "FORBIDDEN", "{err}");
    client.call("reload", json!({"path": inside}));
    drop(client);
    drop(server);
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &Value| r["event"] == "reload")
        .collect();
    assert_eq!(records.len(), 2, "{records:#?}");
    assert_eq!(records[0]["decision"], "refused");
    assert!(
        records[0]["command"]
            .as_str()
            .unwrap()
            .contains("strict-policy.wasm")
    );
    assert!(
        records[0]["reason"].as_str().unwrap().contains("outside"),
        "{}",
        records[0]
    );
    assert_eq!(records[1]["decision"], "allow");
    assert_eq!(records[1]["policy"]["name"], "strict-policy");
    assert!(records[0]["peer"].as_str().unwrap().starts_with("uid "));
}

/// `cordon __as` runs as root until it has taken a client's identity on:
/// a client's `LD_PRELOAD` must load into the client's own command only,
/// never into it (nor into a runner) — checked on every rung and for an
/// unconfined command, whose environment reaches it over a memfd.
#[test]
fn a_clients_ld_preload_never_loads_into_what_runs_as_root() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED a_clients_ld_preload_never_loads_into_what_runs_as_root: needs root");
        return;
    }
    if !common::python_usable("a_clients_ld_preload_never_loads") {
        return;
    }
    const GROUP: u32 = 65534;
    let alice = 12411;
    let dir = workspace();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let Some(library) = crate::containment::recorder(dir.path()) else {
        return;
    };
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    nix::unistd::chown(&ws, Some(alice.into()), Some(alice.into())).unwrap();
    let config = format!(
        "max_mode = \"danger-full-access\"\n[serve]\nsocket_group = {GROUP}\nallowed_uids = [{alice}]\n"
    );
    let mut backends: Vec<&[&str]> = confined_backends("a_clients_ld_preload_never_loads")
        .into_iter()
        .map(|(backend, _)| backend)
        .collect();
    backends.push(&[]);
    for backend in backends {
        let server = Listener::start(dir.path(), &config, backend);
        let record = ws.join(format!("loaded-{}", backend.join("-")));
        let mode = if backend.is_empty() {
            "danger-full-access"
        } else {
            "workspace-write"
        };
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {
            "command": "id -u",
            "env": {"LD_PRELOAD": library, "RECORD_OUT": record},
            "policy": policy(mode, &ws)}});
        let line = call_as(&server.socket, alice, alice, &[GROUP], &request);
        let reply: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            reply["result"]["stdout"]["text"], "12411\n",
            "{backend:?}: {reply}"
        );
        let loaded = std::fs::read_to_string(&record).unwrap_or_default();
        assert!(
            loaded.lines().any(|exe| exe.ends_with("/id")),
            "{backend:?}: {loaded:?}"
        );
        assert!(
            !loaded
                .lines()
                .any(|exe| exe.contains("cordon") || exe.contains("bwrap")),
            "{backend:?}: the client's preload loaded into {loaded:?}"
        );
    }
}

#[test]
fn sixteen_clients_running_in_turn_each_take_their_spares_and_every_run_answers() {
    let test = "sixteen_clients_running_in_turn_each_take_their_spares_and_every_run_answers";
    if !common::namespaces_usable(test) || common::cgroups(test).is_none() {
        return;
    }
    let ws = workspace();
    let root = ws.path();
    let server = Listener::start(root, "", &[]);
    // Sixteen connections with a spare each use up the cgroups made
    // ahead: spares are then started from threads of their own, which the
    // runs that take them keep until they end (the runner's parent-death
    // signal is tied to that thread).
    std::thread::scope(|scope| {
        for client in 0..16 {
            let mut rpc = server.connect();
            scope.spawn(move || {
                for run in 0..8 {
                    let params = json!({"command": format!("echo {client}.{run}"),
                                        "policy": policy("read-only", root)});
                    let id = rpc.send("run", params);
                    let reply = rpc.reply(&id);
                    let result = reply
                        .get("result")
                        .unwrap_or_else(|| panic!("client {client}, run {run}: {reply}"));
                    assert_eq!(result["stdout"]["text"], format!("{client}.{run}\n"));
                }
            });
        }
    });
}
