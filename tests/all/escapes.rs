//! The routes out found by attacking cordon from outside (issue 31), each
//! attempted from inside a confined run under every rung this machine has
//! and checked on the *host* afterwards, with the allowed action beside it:
//! tracing or stopping the run's pid 1 and supervisor, setuid files and
//! device nodes, TCP Fast Open past the proxy, a component that lets every
//! connection through, a racing swap of the workspace root, the kernel
//! keyring, and a runner that does not confine. The unprivileged user's
//! side of them is in `unprivileged.rs`; a run driving `cordon serve` is in
//! `service.rs`.

use std::net::TcpListener;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, confined_backends, run_json, workspace};

/// `--backend X --mode MODE --workspace WS`.
fn args<'a>(backend: &[&'a str], mode: &'a str, ws: &'a Path) -> Vec<&'a str> {
    let mut args = backend.to_vec();
    args.extend(["--mode", mode, "--workspace", ws.to_str().unwrap()]);
    args
}

/// A loopback TCP listener on a thread, counting the connections it
/// accepts (each answered with a one-line HTTP reply).
pub(crate) fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            let mut stream = stream;
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let mut head = [0u8; 1024];
            let _ = stream.read(&mut head);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nreached\n",
            );
        }
    });
    (port, count)
}

/// `text` written to `dir/name`: a Python script a run can read.
pub(crate) fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Try, from the run, to trace its parent (the run's supervisor), take
/// its fd 0, read its memory, then reach a host socket (argv[1]).
pub(crate) const TRACE: &str = r#"
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
for pid in sorted({os.getppid(), 1}):
    seize = libc.ptrace(0x4206, pid, 0, 0)
    attach = libc.ptrace(16, pid, 0, 0)
    pidfd = libc.syscall(434, pid, 0)
    got = libc.syscall(438, pidfd, 0, 0) if pidfd >= 0 else -1
    local = (ctypes.c_char * 8)()
    iov = (ctypes.c_void_p * 2)(ctypes.addressof(local), 8)
    vm = libc.process_vm_readv(pid, iov, 1, iov, 1, 0)
    print("trace", seize, attach, got, vm)
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    print("host socket reached")
except OSError:
    print("host socket refused")
"#;

#[test]
fn a_command_can_neither_trace_nor_take_fds_from_nor_stop_its_supervisor() {
    for (backend, _) in confined_backends("a_command_can_neither_trace_nor_stop_its_supervisor") {
        let ws = workspace();
        let host = workspace();
        let socket = host.path().join("host.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let trace = script(host.path(), "trace.py", TRACE);
        std::fs::set_permissions(host.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for mode in ["read-only", "workspace-write"] {
            // exec: python's parent is the run's supervisor, not a shell.
            let line = format!("exec python3 {} {}", trace.display(), socket.display());
            let (code, result) = run_json(ws.path(), &args(backend, mode, ws.path()), &line);
            assert_eq!(code, 0, "{backend:?} {mode}: {result}");
            let out = result["stdout"]["text"].as_str().unwrap();
            // Its parent (the supervisor) and the sandbox's pid 1 alike.
            assert!(
                out.contains("trace -1 -1 -1 -1"),
                "{backend:?} {mode}: {out}"
            );
            assert!(
                out.lines()
                    .filter(|l| l.starts_with("trace"))
                    .all(|l| l == "trace -1 -1 -1 -1"),
                "{backend:?} {mode}: {out}"
            );
            assert!(out.contains("host socket refused"), "{backend:?}: {out}");
            assert!(
                listener.accept().is_err(),
                "{backend:?} {mode}: the host socket was reached"
            );
            // A stop or a kill of its parent changes nothing: the run ends
            // promptly with the command's own status (the positive control:
            // the command itself runs on).
            let started = Instant::now();
            let (code, result) = run_json(
                ws.path(),
                &args(backend, mode, ws.path()),
                "kill -STOP $PPID; kill -9 $PPID; kill -9 1; sleep 0.2; echo alive; exit 3",
            );
            assert_eq!(code, 3, "{backend:?} {mode}: {result}");
            assert_eq!(result["stdout"]["text"], "alive\n", "{result}");
            assert_eq!(result["exitCode"], 3, "{result}");
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{backend:?}: the run hung"
            );
        }
    }
}

/// Every entry under `dir` with a setuid or setgid bit, or that is a
/// device node.
pub(crate) fn privileged_entries(dir: &Path) -> Vec<String> {
    let mut found = vec![];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.path().symlink_metadata().unwrap();
        let kind = meta.file_type();
        if meta.permissions().mode() & 0o6000 != 0
            || kind.is_char_device()
            || kind.is_block_device()
        {
            found.push(format!(
                "{} {:o}",
                entry.path().display(),
                meta.permissions().mode()
            ));
        }
        if kind.is_dir() {
            found.extend(privileged_entries(&entry.path()));
        }
    }
    found
}

#[test]
fn no_setuid_file_and_no_device_node_is_made_while_chmod_plus_x_works() {
    let attack = "cp /bin/true rootsh; chmod 4755 rootsh; chmod g+s rootsh; \
                  install -m 6755 /bin/true installed; \
                  python3 -c 'import os; os.open(\"created\", os.O_CREAT | os.O_WRONLY, 0o4755)'; \
                  python3 -c 'import os; os.mkdir(\"sgid\", 0o2755)'; \
                  mknod char c 1 3; mknod block b 7 0; \
                  (unshare -Ur sh -c 'cp /bin/true nested; chmod 4755 nested') 2>/dev/null; \
                  echo plain > plain; chmod +x plain; mkfifo fifo; echo done";
    for (backend, _) in confined_backends("no_setuid_file_and_no_device_node_is_made") {
        let ws = workspace();
        let (code, result) = run_json(
            ws.path(),
            &args(backend, "workspace-write", ws.path()),
            attack,
        );
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert_eq!(result["stdout"]["text"], "done\n", "{result}");
        let found = privileged_entries(ws.path());
        assert!(found.is_empty(), "{backend:?}: {found:?} on the host");
        assert!(!ws.path().join("created").exists(), "{backend:?}");
        // Positive controls: copies, files and FIFOs are made as usual, and
        // chmod +x works on every rung (under Landlock through the launcher's
        // metadata supervisor).
        assert!(ws.path().join("rootsh").is_file(), "{backend:?}");
        assert!(
            ws.path()
                .join("fifo")
                .symlink_metadata()
                .unwrap()
                .file_type()
                .is_fifo()
        );
        let plain = std::fs::metadata(ws.path().join("plain")).unwrap();
        assert_eq!(plain.permissions().mode() & 0o111, 0o111, "{backend:?}");
    }
}

/// Change modes and times inside the workspace and outside it (argv[1], a
/// host file), by path, by fd, through a symlink, and while another thread
/// swaps a name between a workspace file and a symlink to the host file.
pub(crate) const MODES: &str = r##"
import os, sys, threading
outside = sys.argv[1]
def attempt(what, call):
    try:
        call()
        print(what, "changed")
    except OSError as err:
        print(what, "refused", err.errno)
open("script", "w").write("#!/bin/sh\necho ran\n")
attempt("chmod +x", lambda: os.chmod("script", 0o755))
fd = os.open("script", os.O_RDONLY)
attempt("fchmod", lambda: os.fchmod(fd, 0o750))
os.mkdir("dir")
attempt("chmod dir", lambda: os.chmod("dir", 0o700))
attempt("touch", lambda: os.utime("script", (1000000000, 1000000000)))
attempt("outside chmod", lambda: os.chmod(outside, 0o777))
attempt("outside touch", lambda: os.utime(outside, (1, 1)))
os.symlink(outside, "link")
attempt("link chmod", lambda: os.chmod("link", 0o777))
out = os.open(outside, os.O_RDONLY)
attempt("outside fchmod", lambda: os.fchmod(out, 0o777))
attempt("outside futimes", lambda: os.utime(out, (1, 1)))
stop = False
def flip():
    while not stop:
        for make in (lambda: os.symlink(outside, "flip.new"), lambda: open("flip.new", "w").close()):
            try:
                make()
                os.rename("flip.new", "flip")
            except OSError:
                pass
t = threading.Thread(target=flip)
t.start()
for _ in range(3000):
    try:
        os.chmod("flip", 0o777)
    except OSError:
        pass
stop = True
t.join()
print("done")
"##;

#[test]
fn modes_and_times_change_inside_the_workspace_and_nowhere_else() {
    for (backend, _) in confined_backends("modes_and_times_change_inside_the_workspace") {
        let ws = workspace();
        // Beside the workspace, not in /tmp (a Landlock run may write the
        // host's /tmp).
        let host = workspace();
        let outside = host.path().join("outside");
        std::fs::write(&outside, "host\n").unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
        let before = std::fs::metadata(&outside).unwrap().modified().unwrap();
        let code = script(host.path(), "modes.py", MODES);
        let command = format!("python3 {} {}", code.display(), outside.display());
        let (exit, result) = run_json(
            ws.path(),
            &args(backend, "workspace-write", ws.path()),
            &command,
        );
        assert_eq!(exit, 0, "{backend:?}: {result}");
        let text = result["stdout"]["text"].as_str().unwrap().to_owned();
        for inside in ["chmod +x", "fchmod", "chmod dir", "touch"] {
            assert!(
                text.contains(&format!("{inside} changed")),
                "{backend:?}: {text}"
            );
        }
        for refused in [
            "outside chmod",
            "outside touch",
            "link chmod",
            "outside fchmod",
            "outside futimes",
        ] {
            assert!(
                text.contains(&format!("{refused} refused")),
                "{backend:?}: {text}"
            );
        }
        assert!(text.ends_with("done\n"), "{backend:?}: {text}");
        // The host file: mode and time as they were.
        let meta = std::fs::metadata(&outside).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o644, "{backend:?}");
        assert_eq!(meta.modified().unwrap(), before, "{backend:?}");
        // The workspace's: changed as asked.
        let mode = |name: &str| {
            std::fs::metadata(ws.path().join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("script"), 0o750, "{backend:?}");
        assert_eq!(mode("dir"), 0o700, "{backend:?}");
        let touched = std::fs::metadata(ws.path().join("script"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(
            touched,
            std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000),
            "{backend:?}"
        );
    }
}

/// A config file in `dir` with `text`.
fn config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("cordon.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// TCP Fast Open to a host port (argv[1]) — data sent with the SYN, and
/// the connect option — then the allowed endpoint (argv[2]) through the
/// proxy.
pub(crate) const FAST_OPEN: &str = r#"
import socket, sys, urllib.request
target, allowed = int(sys.argv[1]), int(sys.argv[2])
for how in ("sendto", "connect-option"):
    s = socket.socket()
    try:
        if how == "sendto":
            s.sendto(b"GET / HTTP/1.0\r\n\r\n", socket.MSG_FASTOPEN, ("127.0.0.1", target))
        else:
            s.setsockopt(socket.IPPROTO_TCP, 30, 1)
            s.connect(("127.0.0.1", target))
        print(how, "sent")
    except OSError:
        print(how, "refused")
print(urllib.request.urlopen("http://127.0.0.1:%d/" % allowed, timeout=5).read().decode().strip())
"#;

#[test]
fn tcp_fast_open_reaches_no_host_listener_past_the_proxy() {
    for (backend, _) in confined_backends("tcp_fast_open_reaches_no_host_listener") {
        let ws = workspace();
        let (target, reached) = counting_listener();
        let (allowed, served) = counting_listener();
        let conf = config(
            ws.path(),
            &format!("max_network = [\"127.0.0.1:{allowed}\"]\n"),
        );
        let grant = json!({"mode": "read-only", "workspaceRoot": ws.path(),
            "network": {"allow": [{"host": "127.0.0.1", "port": allowed}]}})
        .to_string();
        let tfo = script(ws.path(), "tfo.py", FAST_OPEN);
        let line = format!("python3 {} {target} {allowed}", tfo.display());
        let mut run = backend.to_vec();
        run.extend(["--config", conf.to_str().unwrap(), "--grant", &grant]);
        let (code, result) = run_json(ws.path(), &run, &line);
        assert_eq!(code, 0, "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(out.contains("sendto refused"), "{backend:?}: {out}");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            reached.load(Ordering::SeqCst),
            0,
            "{backend:?}: Fast Open reached the host listener: {out}"
        );
        // The positive control: through the proxy, the allowed endpoint.
        assert!(out.ends_with("reached\n"), "{backend:?}: {out}");
        assert_eq!(served.load(Ordering::SeqCst), 1, "{backend:?}");
    }
}

/// Fetch each URL of argv through the proxy, printing the body or
/// `refused URL`.
pub(crate) const FETCH: &str = r#"
import sys, urllib.request
for url in sys.argv[1:]:
    try:
        print(urllib.request.urlopen(url, timeout=5).read().decode().strip())
    except Exception:
        print("refused", url)
"#;

#[test]
fn a_component_that_allows_every_connection_reaches_nothing_beyond_the_grant_and_ceiling() {
    for (backend, _) in confined_backends("a_component_that_allows_every_connection") {
        let ws = workspace();
        let (service, reached) = counting_listener();
        let (allowed, served) = counting_listener();
        let conf = config(
            ws.path(),
            // The operator names the loopback address (any port): only the
            // run's grant stands between the command and the host's service.
            "max_network = [\"github.com:22\", \"127.0.0.1\"]\n",
        );
        let grant = json!({"mode": "read-only", "workspaceRoot": ws.path(),
            "network": {"allow": [{"host": "github.com", "port": 22},
                                  {"host": "127.0.0.1", "port": allowed}]}})
        .to_string();
        // hostile-policy's connect answers yes to everything for a command
        // that starts `connect-anything`.
        let fetch = script(ws.path(), "fetch.py", FETCH);
        let line = format!(
            "connect-anything() {{ :; }}; connect-anything; python3 {} \
             http://127.0.0.1:{service}/ http://169.254.169.254/latest/meta-data/ \
             http://localhost:{service}/ http://127.0.0.1:{allowed}/",
            fetch.display()
        );
        let hostile = common::component("hostile-policy.wasm");
        let mut run = vec!["--policy", hostile.to_str().unwrap()];
        run.extend(backend);
        run.extend(["--config", conf.to_str().unwrap(), "--grant", &grant]);
        let (code, result) = run_json(ws.path(), &run, &line);
        assert_eq!(code, 0, "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert_eq!(out.matches("refused").count(), 3, "{backend:?}: {out}");
        assert_eq!(
            reached.load(Ordering::SeqCst),
            0,
            "{backend:?}: a host loopback service was reached: {out}"
        );
        let refused: Vec<String> = result["grant"]["refused"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["host"].as_str().unwrap().to_owned())
            .collect();
        assert!(refused.contains(&"169.254.169.254".to_owned()), "{result}");
        // The positive control: the endpoint the operator named is reached.
        assert_eq!(served.load(Ordering::SeqCst), 1, "{backend:?}: {out}");
    }
}

/// Swap `a` and `b` (a directory and a symlink) atomically.
pub(crate) fn exchange(a: &Path, b: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let a = std::ffi::CString::new(a.as_os_str().as_bytes()).unwrap();
    let b = std::ffi::CString::new(b.as_os_str().as_bytes()).unwrap();
    // SAFETY: renameat2 reads two NUL-terminated paths we own.
    unsafe {
        nix::libc::renameat2(
            nix::libc::AT_FDCWD,
            a.as_ptr(),
            nix::libc::AT_FDCWD,
            b.as_ptr(),
            nix::libc::RENAME_EXCHANGE,
        );
    }
}

#[test]
fn a_racing_symlink_swap_of_the_root_never_lands_a_write_outside() {
    for (backend, _) in confined_backends("a_racing_symlink_swap_of_the_root") {
        let base = workspace();
        let base = std::fs::canonicalize(base.path())
            .map(|p| (base, p))
            .unwrap();
        let (_guard, base) = base;
        let allowed = base.join("allowed");
        let ws = allowed.join("ws");
        let decoy = allowed.join("decoy");
        let victim = base.join("victim");
        for dir in [&ws, &victim] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::os::unix::fs::symlink(&victim, &decoy).unwrap();
        let conf = config(
            &base,
            &format!("allowed_roots = [\"{}\"]\n", allowed.display()),
        );
        let mut run = backend.to_vec();
        run.extend([
            "--config",
            conf.to_str().unwrap(),
            "--mode",
            "workspace-write",
            "--workspace",
            ws.to_str().unwrap(),
        ]);
        // The positive control: unraced, the write lands in the root.
        let line = format!("echo x > {}/landed", ws.display());
        let (code, result) = run_json(&base, &run, &line);
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert!(ws.join("landed").exists(), "{backend:?}");
        // Raced: a thread swaps the root and the symlink as fast as it can.
        let stop = Arc::new(AtomicBool::new(false));
        let racer = {
            let (stop, ws, decoy) = (stop.clone(), ws.clone(), decoy.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    exchange(&ws, &decoy);
                }
            })
        };
        for round in 0..40 {
            let line = format!("echo {round} > {}/raced-{round}", ws.display());
            let _ = common::cordon()
                .current_dir(&base)
                .args(["run", "--json"])
                .args(&run)
                .arg("--")
                .arg(&line)
                .output()
                .unwrap();
            let landed: Vec<_> = std::fs::read_dir(&victim).unwrap().flatten().collect();
            assert!(
                landed.is_empty(),
                "{backend:?} round {round}: a write landed in the symlink's target: {landed:?}"
            );
        }
        stop.store(true, Ordering::Relaxed);
        racer.join().unwrap();
    }
}

/// The kernel's key calls, for the host side of the keyring test.
mod keys {
    use nix::libc;

    const KEY_SPEC_USER_KEYRING: i64 = -4;
    const KEYCTL_READ: i64 = 11;
    const KEYCTL_SEARCH: i64 = 10;
    const KEYCTL_UNLINK: i64 = 9;

    fn cstr(text: &str) -> std::ffi::CString {
        std::ffi::CString::new(text).unwrap()
    }

    /// Add a `user` key `name` holding `payload` to this uid's user keyring.
    pub fn add(name: &str, payload: &[u8]) -> i64 {
        let (kind, name) = (cstr("user"), cstr(name));
        // SAFETY: add_key reads two strings and a buffer we own.
        unsafe {
            libc::syscall(
                libc::SYS_add_key,
                kind.as_ptr(),
                name.as_ptr(),
                payload.as_ptr(),
                payload.len(),
                KEY_SPEC_USER_KEYRING,
            )
        }
    }

    /// The payload of key `id`.
    pub fn read(id: i64) -> Vec<u8> {
        let mut buffer = vec![0u8; 256];
        // SAFETY: keyctl writes at most the buffer's length into it.
        let len = unsafe {
            libc::syscall(
                libc::SYS_keyctl,
                KEYCTL_READ,
                id,
                buffer.as_mut_ptr(),
                buffer.len(),
            )
        };
        buffer.truncate(len.max(0) as usize);
        buffer
    }

    /// The id of the `user` key `name` in this uid's user keyring, if any.
    pub fn find(name: &str) -> Option<i64> {
        let (kind, name) = (cstr("user"), cstr(name));
        // SAFETY: keyctl reads two strings we own.
        let id = unsafe {
            libc::syscall(
                libc::SYS_keyctl,
                KEYCTL_SEARCH,
                KEY_SPEC_USER_KEYRING,
                kind.as_ptr(),
                name.as_ptr(),
                0,
            )
        };
        (id > 0).then_some(id)
    }

    /// Remove key `id` from this uid's user keyring.
    pub fn unlink(id: i64) {
        // SAFETY: keyctl with integer arguments.
        unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_UNLINK, id, KEY_SPEC_USER_KEYRING) };
    }
}

/// Find and read the host's key (argv[1]) in the user keyring, replace
/// it, and plant another (argv[2]).
pub(crate) const KEYRING: &str = r#"
import ctypes, sys
name, planted = sys.argv[1].encode(), sys.argv[2].encode()
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(256)
found = libc.syscall(250, 10, -4, b"user", name, 0)
read = libc.syscall(250, 11, found, buf, 256) if found > 0 else -1
print("read", read, buf.value)
print("add", libc.syscall(248, b"user", name, b"forged", 6, -4))
print("plant", libc.syscall(248, b"user", planted, b"x", 1, -4))
"#;

#[test]
fn a_host_key_in_the_user_keyring_is_neither_read_nor_replaced_nor_joined() {
    let name = format!("cordon-e2e-{}", std::process::id());
    let planted = format!("{name}-planted");
    let id = keys::add(&name, b"host secret");
    if id <= 0 {
        eprintln!("SKIPPED a_host_key_in_the_user_keyring: this host has no usable keyring");
        return;
    }
    let dir = workspace();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let keyring = script(dir.path(), "keyring.py", KEYRING);
    let attack = format!(
        "python3 {} {name} {planted}; keyctl show @u 2>&1 | grep -c {name} || true; echo done",
        keyring.display()
    );
    let mut failures = vec![];
    for (backend, _) in confined_backends("a_host_key_in_the_user_keyring") {
        let ws = workspace();
        let (code, result) = run_json(
            ws.path(),
            &args(backend, "workspace-write", ws.path()),
            &attack,
        );
        let out = result["stdout"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if code != 0 || !out.contains("read -1 b''") || out.contains("host secret") {
            failures.push(format!("{backend:?}: {result}"));
        }
        // The host's key is unchanged; no key was planted.
        if keys::read(id) != b"host secret" || keys::find(&planted).is_some() {
            failures.push(format!("{backend:?}: the host keyring changed: {out}"));
        }
        // The positive control: the run ran to its end.
        if !out.ends_with("done\n") {
            failures.push(format!("{backend:?}: {out}"));
        }
    }
    if let Some(planted) = keys::find(&planted) {
        keys::unlink(planted);
    }
    keys::unlink(id);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_bwrap_path_that_does_not_confine_never_runs_the_command() {
    if !common::bwrap_usable("a_bwrap_path_that_does_not_confine") {
        return;
    }
    let ws = workspace();
    // A root-owned stand-in that execs what follows its `--`, unconfined.
    let config = common::fake_bwrap(
        ws.path(),
        "#!/bin/sh\nwhile [ \"$#\" -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n",
    );
    let escaped = ws.path().join("escaped");
    let output = common::cordon()
        .current_dir(ws.path())
        .args(["run", "--json", "--config", config.to_str().unwrap()])
        .args(["--backend", "bwrap", "--"])
        .arg(format!("touch {}", escaped.display()))
        .output()
        .unwrap();
    assert!(!escaped.exists(), "the command ran unconfined");
    common::assert_runner_failure(output, "namespace of its own");
    // The positive control: the real bwrap runs it (and confines it).
    let (code, result) = run_json(ws.path(), &["--backend", "bwrap"], "echo confined");
    assert_eq!(code, 0, "{result}");
    let _: &Value = &result;
}
