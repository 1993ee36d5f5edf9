//! The confined runs of an unprivileged user: the same attacks as root's
//! suites, tried by `nobody` (the test, run as root, drops to it with
//! `setpriv`), under cordon's namespace runner — which then works in a
//! user namespace mapping the user to itself — and under bwrap. The host is
//! checked after each attack; a positive control shows the allowed write
//! still lands.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common;

/// `nobody`'s ids.
const NOBODY: u32 = 65534;

/// A place `nobody` can reach: a 0755 directory under the temp dir (a
/// checkout may lie under root's 0700 home), holding a copy of the cordon
/// binary, `nobody`'s home (its caches) and its workspace.
struct Unprivileged {
    dir: tempfile::TempDir,
    cordon: PathBuf,
}

impl Unprivileged {
    /// None, said loudly, when this test cannot become `nobody` (not root,
    /// no `setpriv`) or the kernel forbids unprivileged user namespaces; a
    /// failure instead where CI requires the namespace runner and the
    /// kernel's settings allow it.
    fn new(test: &str) -> Option<Unprivileged> {
        let root = nix::unistd::geteuid().is_root();
        let setpriv = Path::new("/usr/bin/setpriv").exists();
        let kernel = cordon::sandbox::namespaces::kernel_allows(NOBODY);
        let why = match (root, setpriv, &kernel) {
            (true, true, Ok(())) => None,
            (false, _, _) => {
                Some("the test does not run as root, so it cannot become nobody".into())
            }
            (_, false, _) => Some("setpriv is not installed".to_owned()),
            (_, _, Err(why)) => Some(why.clone()),
        };
        if let Some(why) = why {
            let required =
                std::env::var_os("CORDON_E2E_REQUIRE_NAMESPACES").is_some_and(|v| v == "1");
            assert!(
                !(required && root && kernel.is_ok()),
                "{test}: CORDON_E2E_REQUIRE_NAMESPACES=1 but {why}"
            );
            eprintln!("SKIPPED {test}: {why}");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("cordon-unprivileged-")
            .tempdir_in("/var/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let cordon = dir.path().join("cordon");
        common::copy_executable(Path::new(env!("CARGO_BIN_EXE_cordon")), &cordon);
        for sub in ["home", "ws", "sibling", "run"] {
            let at = dir.path().join(sub);
            std::fs::create_dir(&at).unwrap();
            nix::unistd::chown(&at, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
        }
        Some(Unprivileged { dir, cordon })
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// The cordon binary, to be run as `nobody` with `nobody`'s own
    /// environment (its home, caches and runtime directory here).
    fn cordon(&self) -> Command {
        let mut command = Command::new("/usr/bin/setpriv");
        let home = self.path("home");
        command
            .args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
            ])
            .arg(&self.cordon)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_RUNTIME_DIR", self.path("run"));
        command
    }

    /// `cordon run --json ARGS -- COMMAND` as `nobody`, in the workspace.
    fn run(&self, args: &[&str], command: &str) -> (Option<i32>, Value) {
        let output = self
            .cordon()
            .current_dir(self.path("ws"))
            .args(["run", "--json"])
            .args(args)
            .arg("--")
            .arg(command)
            .output()
            .unwrap();
        (output.status.code(), common::parse(&output))
    }
}

/// The runners an unprivileged user can have here.
fn backends() -> [&'static str; 3] {
    ["namespaces", "bwrap", "landlock"]
}

impl Unprivileged {
    /// Whether `cordon probe --backend BACKEND`, run as `nobody`, finds the
    /// rung usable; else why, loudly — and a failure where CI requires
    /// that rung (`CORDON_E2E_REQUIRE_*`): every rung must work for a
    /// user without privilege where the kernel lets it.
    fn usable(&self, backend: &str) -> bool {
        let output = self
            .cordon()
            .args(["probe", "--json", "--backend", backend])
            .output()
            .unwrap();
        let probe = common::parse(&output);
        if probe["backend"] == backend {
            return true;
        }
        let why = common::rung(&probe, backend)["reason"].to_string();
        let require = format!("CORDON_E2E_REQUIRE_{}", backend.to_uppercase());
        assert!(
            std::env::var_os(&require).is_none_or(|v| v != "1"),
            "{require}=1 but the {backend} rung is unusable for nobody: {why}"
        );
        eprintln!("SKIPPED the {backend} rung as nobody: {why}");
        false
    }
}

#[test]
fn an_unprivileged_user_is_confined_by_every_namespace_runner() {
    let Some(env) = Unprivileged::new("an_unprivileged_user_is_confined_by_every_namespace_runner")
    else {
        return;
    };
    let ws = env.path("ws");
    let sibling = env.path("sibling");
    for backend in backends() {
        if !env.usable(backend) {
            continue;
        }
        let args = ["--backend", backend, "--mode", "workspace-write"];
        // The positive control: the workspace is writable.
        let inside = ws.join(format!("inside-{backend}"));
        let (code, result) = env.run(&args, &format!("echo landed > {}", inside.display()));
        assert_eq!(code, Some(0), "{backend}: {result}");
        assert_eq!(
            std::fs::read_to_string(&inside).unwrap(),
            "landed\n",
            "{backend}"
        );
        // nobody's own directory beside it is not, nor is /etc.
        let outside = sibling.join(format!("outside-{backend}"));
        let (code, result) = env.run(
            &args,
            &format!(
                "echo x > {}; echo y > /etc/cordon-unprivileged",
                outside.display()
            ),
        );
        assert_ne!(code, Some(0), "{backend}: {result}");
        assert_eq!(result["sandbox"]["denied"], true, "{backend}: {result}");
        assert!(!outside.exists(), "{backend}: the sibling write landed");
        assert!(!Path::new("/etc/cordon-unprivileged").exists());
        // Its own processes only, no capability, no privilege to gain, and
        // a lifted cover or a remount in a nested namespace changes nothing.
        let (code, result) = env.run(
            &args,
            &format!(
                "ls /proc | grep -c '^[0-9][0-9]*$'; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; \
                 unshare -Urm sh -c 'umount /proc/sys; mount -o remount,rw /; echo z > {}' 2>/dev/null; \
                 setsid sleep 3{} > /dev/null 2>&1 < /dev/null & echo end",
                outside.display(),
                std::process::id()
            ),
        );
        assert_eq!(code, Some(0), "{backend}: {result}");
        let text = result["stdout"]["text"].as_str().unwrap();
        let mut lines = text.lines();
        let visible: u32 = lines.next().unwrap().parse().unwrap();
        // Landlock has no PID namespace: the host's processes are visible,
        // and its scopes keep signals and sockets from reaching them.
        assert!(visible <= 6 || backend == "landlock", "{backend}: {text}");
        assert_eq!(lines.next(), Some("CapEff:\t0000000000000000"), "{text}");
        assert_eq!(lines.next(), Some("NoNewPrivs:\t1"), "{text}");
        assert!(!outside.exists(), "{backend}: a nested namespace escaped");
        assert!(
            common::sleepers(&format!("3{}", std::process::id())).is_empty(),
            "{backend}: a daemon outlived the run"
        );
    }
    // `cordon probe` says how the runner works for this user.
    let output = env
        .cordon()
        .env("XDG_CACHE_HOME", env.path("home"))
        .args(["probe", "--json", "--backend", "namespaces"])
        .output()
        .unwrap();
    let probe = common::parse(&output);
    assert_eq!(probe["backend"], "namespaces", "{probe}");
    let reason = common::rung(&probe, "namespaces")["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("in a user namespace"), "{reason}");
}

#[test]
fn an_unprivileged_run_can_neither_trace_nor_stop_its_supervisor_nor_make_setuid_files() {
    let Some(env) = Unprivileged::new("an_unprivileged_run_can_neither_trace_nor_stop") else {
        return;
    };
    let ws = env.path("ws");
    let trace = "python3 -c '\n\
import ctypes, os\n\
libc = ctypes.CDLL(None, use_errno=True)\n\
ppid = os.getppid()\n\
pidfd = libc.syscall(434, ppid, 0)\n\
got = libc.syscall(438, pidfd, 0, 0) if pidfd >= 0 else -1\n\
print(\"trace\", libc.ptrace(0x4206, ppid, 0, 0), libc.ptrace(16, ppid, 0, 0), got)\n\
'";
    let setuid = "cp /bin/true rootsh; chmod 4755 rootsh; install -m 6755 /bin/true installed; \
                  python3 -c 'import os; os.open(\"created\", os.O_CREAT | os.O_WRONLY, 0o4755)'; \
                  mknod char c 1 3; (unshare -Ur mknod nested c 1 3) 2>/dev/null; \
                  echo plain > plain; chmod +x plain";
    for backend in backends() {
        if !env.usable(backend) {
            continue;
        }
        let args = ["--backend", backend, "--mode", "workspace-write"];
        // exec: python's parent is the run's supervisor, not a shell.
        let (code, result) = env.run(&args, &format!("exec {trace}"));
        assert_eq!(code, Some(0), "{backend}: {result}");
        assert_eq!(
            result["stdout"]["text"], "trace -1 -1 -1\n",
            "{backend}: {result}"
        );
        let (code, result) = env.run(
            &args,
            "kill -STOP $PPID; kill -9 $PPID; sleep 0.2; echo alive; exit 3",
        );
        assert_eq!(code, Some(3), "{backend}: {result}");
        assert_eq!(result["stdout"]["text"], "alive\n", "{backend}: {result}");
        let (code, result) = env.run(&args, setuid);
        assert_eq!(code, Some(0), "{backend}: {result}");
        for name in ["rootsh", "installed", "created"] {
            if let Ok(meta) = std::fs::metadata(ws.join(name)) {
                assert_eq!(meta.permissions().mode() & 0o6000, 0, "{backend}: {name}");
            }
        }
        assert!(!ws.join("created").exists(), "{backend}");
        let found = crate::escapes::privileged_entries(&ws);
        assert!(found.is_empty(), "{backend}: {found:?} on the host");
        // The positive control: chmod +x works.
        let plain = std::fs::metadata(ws.join("plain")).unwrap();
        assert_eq!(plain.permissions().mode() & 0o111, 0o111, "{backend}");
        for name in ["rootsh", "installed", "plain"] {
            let _ = std::fs::remove_file(ws.join(name));
        }
    }
}

#[test]
fn an_unprivileged_run_reaches_nothing_past_its_grant_the_ceiling_or_the_proxy() {
    use crate::escapes::{FAST_OPEN, FETCH, counting_listener, script};
    use std::sync::atomic::Ordering;
    let Some(env) = Unprivileged::new("an_unprivileged_run_reaches_nothing_past_its_grant") else {
        return;
    };
    let ws = env.path("ws");
    let tfo = script(&ws, "tfo.py", FAST_OPEN);
    let fetch = script(&ws, "fetch.py", FETCH);
    // The component, where nobody can read it.
    let hostile = env.path("hostile-policy.wasm");
    std::fs::copy(common::component("hostile-policy.wasm"), &hostile).unwrap();
    for backend in backends() {
        if !env.usable(backend) {
            continue;
        }
        let (target, reached) = counting_listener();
        let (allowed, served) = counting_listener();
        let config = env.path("cordon.toml");
        std::fs::write(
            &config,
            format!("max_network = [\"github.com:22\", \"127.0.0.1:{allowed}\"]\n"),
        )
        .unwrap();
        let grant = serde_json::json!({"mode": "read-only", "workspaceRoot": ws,
            "network": {"allow": [{"host": "github.com", "port": 22},
                                  {"host": "127.0.0.1", "port": allowed}]}})
        .to_string();
        let base = [
            "--backend",
            backend,
            "--config",
            config.to_str().unwrap(),
            "--grant",
            &grant,
        ];
        // TCP Fast Open to a host port, then the allowed endpoint.
        let (code, result) = env.run(
            &base,
            &format!("python3 {} {target} {allowed}", tfo.display()),
        );
        assert_eq!(code, Some(0), "{backend}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(out.contains("sendto refused"), "{backend}: {out}");
        assert!(out.ends_with("reached\n"), "{backend}: {out}");
        // A component that allows every connection.
        let mut hostile_args = vec!["--policy", hostile.to_str().unwrap()];
        hostile_args.extend(base);
        let (code, result) = env.run(
            &hostile_args,
            &format!(
                "connect-anything() {{ :; }}; connect-anything; python3 {} \
                 http://127.0.0.1:{target}/ http://169.254.169.254/ http://127.0.0.1:{allowed}/",
                fetch.display()
            ),
        );
        assert_eq!(code, Some(0), "{backend}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert_eq!(out.matches("refused").count(), 2, "{backend}: {out}");
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(reached.load(Ordering::SeqCst), 0, "{backend}: {out}");
        // The positive controls: the allowed endpoint, once per run.
        assert_eq!(served.load(Ordering::SeqCst), 2, "{backend}: {out}");
    }
}

#[test]
fn an_unprivileged_runs_racing_root_swap_never_lands_a_write_outside() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(env) = Unprivileged::new("an_unprivileged_runs_racing_root_swap") else {
        return;
    };
    let base = env.path("ws");
    let allowed = base.join("allowed");
    let (root, decoy, victim) = (
        allowed.join("ws"),
        allowed.join("decoy"),
        base.join("victim"),
    );
    for dir in [&allowed, &root, &victim] {
        std::fs::create_dir_all(dir).unwrap();
        nix::unistd::chown(dir, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
    }
    std::os::unix::fs::symlink(&victim, &decoy).unwrap();
    let config = env.path("race.toml");
    std::fs::write(
        &config,
        format!("allowed_roots = [\"{}\"]\n", allowed.display()),
    )
    .unwrap();
    for backend in backends() {
        if !env.usable(backend) {
            continue;
        }
        let args = [
            "--backend",
            backend,
            "--config",
            config.to_str().unwrap(),
            "--mode",
            "workspace-write",
            "--workspace",
            root.to_str().unwrap(),
        ];
        let (code, result) = env.run(&args, &format!("echo x > {}/landed", root.display()));
        assert_eq!(code, Some(0), "{backend}: {result}");
        let stop = Arc::new(AtomicBool::new(false));
        let racer = {
            let (stop, root, decoy) = (stop.clone(), root.clone(), decoy.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    crate::escapes::exchange(&root, &decoy);
                }
            })
        };
        for round in 0..25 {
            let _ = env.run(
                &args,
                &format!("echo {round} > {}/raced-{round}", root.display()),
            );
            let landed: Vec<_> = std::fs::read_dir(&victim).unwrap().flatten().collect();
            assert!(landed.is_empty(), "{backend} round {round}: {landed:?}");
        }
        stop.store(true, Ordering::Relaxed);
        racer.join().unwrap();
        // Left as it began: the directory at the root's path.
        if root.is_symlink() {
            crate::escapes::exchange(&root, &decoy);
        }
    }
}

/// Empty `nobody`'s workspace between rungs (as root).
fn clear(ws: &Path) {
    for entry in std::fs::read_dir(ws).unwrap().flatten() {
        let path = entry.path();
        match path.symlink_metadata().unwrap().is_dir() {
            true => std::fs::remove_dir_all(&path).unwrap(),
            false => std::fs::remove_file(&path).unwrap(),
        }
    }
}

#[test]
fn an_unprivileged_run_changes_modes_and_times_inside_its_workspace_only() {
    let Some(env) = Unprivileged::new("an_unprivileged_run_changes_modes_and_times") else {
        return;
    };
    let ws = env.path("ws");
    // nobody's own file beside the workspace: unconfined, nobody could
    // change its mode and times.
    let outside = env.path("sibling").join("outside");
    std::fs::write(&outside, "host\n").unwrap();
    nix::unistd::chown(&outside, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::metadata(&outside).unwrap().modified().unwrap();
    let code = crate::escapes::script(env.dir.path(), "modes.py", crate::escapes::MODES);
    for backend in backends() {
        if !env.usable(backend) {
            continue;
        }
        clear(&ws);
        let args = ["--backend", backend, "--mode", "workspace-write"];
        let command = format!("python3 {} {}", code.display(), outside.display());
        let (exit, result) = env.run(&args, &command);
        assert_eq!(exit, Some(0), "{backend}: {result}");
        let text = result["stdout"]["text"].as_str().unwrap().to_owned();
        for inside in ["chmod +x", "fchmod", "chmod dir", "touch"] {
            assert!(
                text.contains(&format!("{inside} changed")),
                "{backend}: {text}"
            );
        }
        for refused in [
            "outside chmod",
            "outside touch",
            "link chmod",
            "outside fchmod",
        ] {
            assert!(
                text.contains(&format!("{refused} refused")),
                "{backend}: {text}"
            );
        }
        let meta = std::fs::metadata(&outside).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o644, "{backend}");
        assert_eq!(meta.modified().unwrap(), before, "{backend}");
        let script = std::fs::metadata(ws.join("script")).unwrap();
        assert_eq!(script.permissions().mode() & 0o777, 0o750, "{backend}");
    }
}

/// Run as `nobody` (argv: the cordon binary, the workspace, the backend,
/// the attack script): put a key in nobody's user keyring, let a confined
/// run try to read, replace and add keys, then report the keyring as the
/// host sees it. One process tree, so the keyring lives throughout.
const KEYRING_HOST: &str = r#"
import ctypes, json, os, subprocess, sys
cordon, ws, backend, attack = sys.argv[1:5]
libc = ctypes.CDLL(None, use_errno=True)
name = b"cordon-e2e-nobody-%d" % os.getpid()
key = libc.syscall(248, b"user", name, b"host secret", 11, -4)
if key <= 0:
    print(json.dumps({"skip": "no usable keyring"}))
    sys.exit(0)
run = subprocess.run([cordon, "run", "--json", "--backend", backend, "--mode", "workspace-write",
                      "--", "python3 %s %s %s-planted; echo done" % (attack, name.decode(), name.decode())],
                     cwd=ws, capture_output=True)
buf = ctypes.create_string_buffer(256)
length = libc.syscall(250, 11, key, buf, 256)
planted = libc.syscall(250, 10, -4, b"user", name + b"-planted", 0)
libc.syscall(250, 9, key, -4)
print(json.dumps({"run": json.loads(run.stdout), "key": buf.value[:max(length, 0)].decode(),
                  "planted": planted}))
"#;

#[test]
fn an_unprivileged_users_keyring_is_out_of_its_runs_reach() {
    let Some(env) = Unprivileged::new("an_unprivileged_users_keyring") else {
        return;
    };
    let host = crate::escapes::script(env.dir.path(), "keyring-host.py", KEYRING_HOST);
    let attack = crate::escapes::script(env.dir.path(), "keyring.py", crate::escapes::KEYRING);
    for backend in backends() {
        if !env.usable(backend) {
            continue;
        }
        let output = Command::new("/usr/bin/setpriv")
            .args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
            ])
            .args([
                "python3",
                host.to_str().unwrap(),
                env.cordon.to_str().unwrap(),
            ])
            .args([
                env.path("ws").to_str().unwrap(),
                backend,
                attack.to_str().unwrap(),
            ])
            .current_dir(env.path("ws"))
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", env.path("home"))
            .env("XDG_RUNTIME_DIR", env.path("run"))
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{backend}: {}", String::from_utf8_lossy(&output.stderr)));
        if report.get("skip").is_some() {
            eprintln!("SKIPPED the keyring as nobody: {report}");
            return;
        }
        let out = report["run"]["stdout"]["text"].as_str().unwrap_or_default();
        // The run ended (the positive control) having read nothing.
        assert!(out.ends_with("done\n"), "{backend}: {report}");
        assert!(out.contains("read -1 b''"), "{backend}: {report}");
        // nobody's key as it was, and nothing planted.
        assert_eq!(report["key"], "host secret", "{backend}: {report}");
        assert!(
            report["planted"].as_i64().unwrap() < 0,
            "{backend}: {report}"
        );
    }
}

#[test]
fn an_unprivileged_run_reaches_no_host_socket_through_its_supervisor() {
    let Some(env) = Unprivileged::new("an_unprivileged_run_reaches_no_host_socket") else {
        return;
    };
    // A socket nobody may connect to, outside the run.
    let socket = env.path("run").join("host.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    nix::unistd::chown(&socket, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
    listener.set_nonblocking(true).unwrap();
    let trace = crate::escapes::script(env.dir.path(), "trace.py", crate::escapes::TRACE);
    for backend in backends() {
        if !env.usable(backend) {
            continue;
        }
        let args = ["--backend", backend, "--mode", "workspace-write"];
        let (code, result) = env.run(
            &args,
            &format!("exec python3 {} {}", trace.display(), socket.display()),
        );
        assert_eq!(code, Some(0), "{backend}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(out.ends_with("host socket refused\n"), "{backend}: {out}");
        for line in out.lines().filter(|l| l.starts_with("trace ")) {
            assert_eq!(line, "trace -1 -1 -1 -1", "{backend}: {out}");
        }
        assert!(
            listener.accept().is_err(),
            "{backend}: the host socket was reached"
        );
    }
}

/// `cordon serve --listen` as `nobody`, ended with the test.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_unprivileged_run_cannot_drive_the_server_that_confines_it() {
    use serde_json::json;
    let Some(env) = Unprivileged::new("an_unprivileged_run_cannot_drive_the_server") else {
        return;
    };
    let (ws, target) = (env.path("ws"), env.path("sibling"));
    let drive = crate::escapes::script(env.dir.path(), "drive.py", crate::service::DRIVE);
    for backend in backends() {
        if !env.usable(backend) {
            continue;
        }
        let socket = env.path("run").join(format!("serve-{backend}.sock"));
        let server = env.serve(&socket, backend);
        let escaped = target.join(format!("escaped-{backend}"));
        let wider = json!({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {
            "command": format!("echo x > {}", escaped.display()),
            "policy": {"mode": "workspace-write", "workspaceRoot": target}}});
        let request = env.path("run").join("request.json");
        std::fs::write(&request, format!("{wider}\n")).unwrap();
        let connect = || client(&socket);
        // A read-only run with the whole network asks its own server for
        // a workspace-write run of nobody's other directory.
        let inner = format!(
            "python3 {} {} {}",
            drive.display(),
            socket.display(),
            request.display()
        );
        let reply = connect().call(
            "run",
            json!({"command": inner,
                   "policy": {"mode": "read-only", "workspaceRoot": ws, "network": "full"}}),
        );
        let out = reply["stdout"]["text"].as_str().unwrap_or_default();
        assert!(
            !escaped.exists(),
            "{backend}: the run drove the server: {reply}"
        );
        assert!(
            out.contains("unreachable") || out.contains("FORBIDDEN"),
            "{backend}: {reply}"
        );
        // The positive control: a client outside every run is served.
        let served = connect().call("run", wider["params"].clone());
        assert_eq!(served["exitCode"], 0, "{backend}: {served}");
        assert!(escaped.exists(), "{backend}");
        drop(server);
    }
}

impl Unprivileged {
    /// `cordon serve --listen unix:SOCKET --backend BACKEND` as `nobody`,
    /// up and answering.
    fn serve(&self, socket: &Path, backend: &str) -> Server {
        let server = Server(
            self.cordon()
                .current_dir(self.path("ws"))
                .args(["serve", "--listen", &format!("unix:{}", socket.display())])
                .args(["--backend", backend])
                .arg("--config")
                .arg(common::full_network_config())
                .stdin(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        common::eventually(
            std::time::Duration::from_secs(30),
            "the listener never came up",
            || std::os::unix::net::UnixStream::connect(socket).is_ok(),
        );
        server
    }
}

/// A client of the server at `socket`.
fn client(socket: &Path) -> crate::rpc::Rpc {
    crate::rpc::Rpc::over(std::os::unix::net::UnixStream::connect(socket).unwrap())
}

#[test]
fn twenty_thousand_idle_proxy_connections_from_an_unprivileged_run_leave_other_runs_working() {
    let Some(env) = Unprivileged::new("twenty_thousand_idle_proxy_connections as nobody") else {
        return;
    };
    let hog = crate::escapes::script(env.dir.path(), "hog.py", crate::service::HOG);
    for backend in backends() {
        if !env.usable(backend) {
            continue;
        }
        let socket = env.path("run").join(format!("hog-{backend}.sock"));
        let _server = env.serve(&socket, backend);
        crate::service::hold_the_proxy_while_others_run(
            client(&socket),
            client(&socket),
            &env.path("ws"),
            &hog,
            &format!("{backend} as nobody"),
        );
    }
}

#[test]
fn an_unprivileged_users_bwrap_path_that_does_not_confine_never_runs_the_command() {
    let Some(env) = Unprivileged::new("an_unprivileged_users_bwrap_path") else {
        return;
    };
    if !env.usable("bwrap") {
        return;
    }
    // A root-owned stand-in that execs what follows its `--`, unconfined.
    let config = common::fake_bwrap(
        env.dir.path(),
        "#!/bin/sh\nwhile [ \"$#\" -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n",
    );
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let escaped = env.path("sibling").join("escaped");
    let config = config.to_str().unwrap();
    let (code, result) = env.run(
        &["--config", config, "--backend", "bwrap"],
        &format!("echo x > {}", escaped.display()),
    );
    assert!(!escaped.exists(), "the command ran unconfined: {result}");
    assert_eq!(code, Some(69), "{result}");
    assert_eq!(result["error"]["code"], "SANDBOX_UNAVAILABLE", "{result}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("namespace of its own"), "{result}");
    assert!(!message.contains("danger-full-access"), "{result}");
    // The positive control: the real bwrap runs it, confined.
    let (code, result) = env.run(&["--backend", "bwrap"], "echo confined");
    assert_eq!(code, Some(0), "{result}");
}
