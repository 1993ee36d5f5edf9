//! Helpers shared by the end-to-end suites: the real `cordon` binary, real
//! workspaces (outside `/tmp`, which bwrap replaces), and loud skips.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use std::sync::Arc;

use serde_json::{Value, json};

/// The `cordon` binary under test.
pub fn cordon() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cordon"))
}

/// Where the suites make their scratch directories: `CORDON_E2E_TMPDIR`
/// when set (`scripts/profiles.sh` gives each profile's user one of its
/// own), else cargo's temp dir under the target dir.
pub fn scratch() -> PathBuf {
    std::env::var_os("CORDON_E2E_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
}

/// The profile the suites run in (`scripts/profiles.sh`): `root`,
/// `unprivileged` or `restricted-pod`; `root` when unset.
pub fn profile() -> String {
    std::env::var("CORDON_E2E_PROFILE").unwrap_or_else(|_| "root".into())
}

/// A fresh directory outside `/tmp` (bwrap's `workspace-write` replaces
/// `/tmp` with an empty tmpfs), removed on drop: under [`scratch`], or
/// under `/var/tmp` when that lives in `/tmp`.
pub fn workspace() -> tempfile::TempDir {
    let target_tmp = scratch();
    let parent = if target_tmp.starts_with("/tmp") {
        let parent = Path::new("/var/tmp/cordon-e2e");
        std::fs::create_dir_all(parent).expect("create /var/tmp/cordon-e2e");
        parent
    } else {
        &target_tmp
    };
    tempfile::Builder::new()
        .prefix("cordon-e2e-")
        .tempdir_in(parent)
        .expect("create workspace")
}

/// rules-policy's example rule file, `components/rules-policy/rules.toml`.
pub fn rule_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../components/rules-policy/rules.toml")
}

/// A cordon.toml whose network ceiling is `full` (a host's default is
/// `none`): for the suites that try what a run with the whole network can
/// and cannot reach.
pub fn full_network_config() -> PathBuf {
    let dir = scratch();
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    let path = dir.join("cordon-full-network.toml");
    let fresh = dir.join(format!("cordon-full-network.{}.toml", std::process::id()));
    std::fs::write(&fresh, "max_network = \"full\"\n").expect("write the config");
    std::fs::rename(&fresh, &path).expect("place the config");
    path
}

/// A built policy component from `OUT_DIR` (see host/build.rs).
pub fn component(name: &str) -> PathBuf {
    Path::new(env!("OUT_DIR")).join(name)
}

/// `cordon run --json ARGS -- COMMAND` in `dir`: exit code and parsed JSON.
pub fn run_json(dir: &Path, args: &[&str], command: &str) -> (i32, Value) {
    let output = cordon()
        .current_dir(dir)
        .arg("run")
        .arg("--json")
        .args(args)
        .arg("--")
        .arg(command)
        .output()
        .expect("spawn cordon");
    (output.status.code().unwrap_or(-1), parse(&output))
}

/// `cordon run --json ARGS -- COMMAND` in `dir` with one more variable in
/// cordon's own environment (`SSL_CERT_FILE`, a credential's source): its
/// output and its parsed JSON, which must say the command succeeded.
pub fn run_ok_with(dir: &Path, var: (&str, &str), args: &[&str], command: &str) -> (Output, Value) {
    let output = cordon()
        .current_dir(dir)
        .env(var.0, var.1)
        .args(["run", "--json"])
        .args(args)
        .args(["--", command])
        .output()
        .expect("spawn cordon");
    let result = parse(&output);
    assert_eq!(output.status.code(), Some(0), "{args:?}: {result}");
    (output, result)
}

/// Parse cordon's JSON stdout, with its stderr in the panic if it is not JSON.
pub fn parse(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "cordon printed no JSON ({err}); stdout: {}; stderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Whether bubblewrap can run here. When it cannot, say so loudly; with
/// `CORDON_E2E_REQUIRE_BWRAP=1` (set by `.ci/run` on Linux) that is a failure,
/// not a skip.
pub fn bwrap_usable(test: &str) -> bool {
    let probe = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--die-with-parent", "--unshare-pid", "--", "true"])
        .output();
    let why = match probe {
        Ok(out) if out.status.success() => return true,
        Ok(out) => format!(
            "bwrap probe failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(err) => format!("bwrap is not runnable: {err}"),
    };
    if std::env::var_os("CORDON_E2E_REQUIRE_BWRAP").is_some_and(|v| v == "1") {
        panic!("{test}: CORDON_E2E_REQUIRE_BWRAP=1 but {why}");
    }
    eprintln!(
        "SKIPPED {test}: {why} (this suite needs bubblewrap installed and able to make namespaces)"
    );
    false
}

/// The rung of `backend` in a `cordon probe --json` verdict.
pub fn rung<'a>(probe: &'a Value, backend: &str) -> &'a Value {
    probe["rungs"]
        .as_array()
        .and_then(|rungs| rungs.iter().find(|r| r["backend"] == backend))
        .unwrap_or_else(|| panic!("no {backend} rung in {probe}"))
}

/// The `sandbox` object of a result.
pub fn sandbox(result: &Value) -> &Value {
    &result["sandbox"]
}

/// A confined result's sandbox facts without their evidence, once that is
/// checked to be whole: `text` with no list, or `kernel` (Landlock, the
/// host reading the audit records) with its list.
pub fn confined_facts(result: &Value) -> Value {
    let mut facts = result["sandbox"].clone();
    let object = facts.as_object_mut().expect("sandbox facts");
    let denials = object.remove("denials");
    match object.remove("evidence").as_ref().and_then(Value::as_str) {
        Some("text") => assert_eq!(denials, None, "{result}"),
        Some("kernel") => assert!(denials.is_none_or(|list| list.is_array()), "{result}"),
        other => panic!("a confined run's evidence is text or kernel, not {other:?}: {result}"),
    }
    facts
}

/// Every live process on the host whose command line contains `needle`.
pub fn host_processes_with(needle: &str) -> Vec<u32> {
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            found.push(pid);
        }
    }
    found
}

/// A library host rooted at `dir`, allowed every mode, with a 500 ms kill
/// grace and a `tail`-byte tail; spills go under `dir` too.
pub fn test_host(dir: &Path, tail: usize) -> cordon::Host {
    let mut deployment = cordon::Deployment::in_dir(dir);
    deployment.max_mode = cordon::SandboxMode::DangerFullAccess;
    cordon::Host::builder()
        .deployment(deployment)
        // The launcher and init are the cordon binary's modes, as an
        // embedder configures them (this test binary has neither).
        .sandbox(cordon::sandbox::SandboxConfig {
            launcher: Some(env!("CARGO_BIN_EXE_cordon").into()),
            ..Default::default()
        })
        .process_limits(cordon::ProcessLimits {
            tail_bytes: tail,
            kill_grace: TEST_GRACE,
            ..cordon::ProcessLimits::default()
        })
        .spill_parent(dir)
        .build()
        .expect("build test host")
}

/// The kill grace of [`test_host`].
pub const TEST_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// A request for `command` under `mode` rooted at `root`.
pub fn request(mode: cordon::SandboxMode, root: &Path, command: &str) -> cordon::ExecRequest {
    cordon::ExecRequest::new(command).with_policy(cordon::SandboxPolicy::new(mode, root))
}

/// A `danger-full-access` request (no runner needed).
pub fn danger(root: &Path, command: &str) -> cordon::ExecRequest {
    request(cordon::SandboxMode::DangerFullAccess, root, command)
}

/// Wait (up to 10 s) until at least `count` host processes carry `needle`.
pub fn wait_for_processes(needle: &str, count: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while host_processes_with(needle).len() < count {
        assert!(
            std::time::Instant::now() < deadline,
            "{needle:?} never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Wait (up to 5 s) until no host process carries `needle`; false if some
/// still do.
pub fn processes_gone(needle: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if host_processes_with(needle).is_empty() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// Whether the Landlock launcher can confine here (`cordon probe --backend
/// landlock`). When it cannot, say so loudly; with
/// `CORDON_E2E_REQUIRE_LANDLOCK=1` (set by `.ci/run` on Linux) that fails.
pub fn landlock_usable(test: &str) -> bool {
    pinned_usable(
        test,
        "landlock",
        "CORDON_E2E_REQUIRE_LANDLOCK",
        "the Landlock launcher",
        "needs a Landlock-enforcing kernel",
    )
}

/// Whether cordon's namespace runner confines runs here (`cordon probe
/// --backend namespaces`). When it cannot, say so loudly; with
/// `CORDON_E2E_REQUIRE_NAMESPACES=1` (set by `.ci/run` on Linux) that
/// fails.
pub fn namespaces_usable(test: &str) -> bool {
    pinned_usable(
        test,
        "namespaces",
        "CORDON_E2E_REQUIRE_NAMESPACES",
        "cordon's namespace runner",
        "needs mount and PID namespaces, and user namespaces when not root",
    )
}

/// Whether `cordon probe --backend BACKEND` finds it usable; else say why,
/// loudly, and fail where `require` is set.
fn pinned_usable(test: &str, backend: &str, require: &str, what: &str, needs: &str) -> bool {
    let output = cordon()
        .args(["probe", "--backend", backend, "--json"])
        .output()
        .expect("run cordon probe");
    let probe: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    if probe["backend"] == backend {
        return true;
    }
    let why = format!(
        "{what} is unusable: {}",
        probe["rungs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["reason"].to_string())
            .collect::<Vec<_>>()
            .join("; ")
    );
    if std::env::var_os(require).is_some_and(|v| v == "1") {
        panic!("{test}: {require}=1 but {why}");
    }
    eprintln!("SKIPPED {test}: {why} ({needs})");
    false
}

/// The workspace-write contract shared by every backend suite: a write in
/// the workspace root lands, a write in a sibling directory is denied and
/// absent. `backend` are the flags that select the backend.
/// `enforcement` is the backend's in `workspace-write` (`full` on every
/// rung where the protected paths hold; `partial` says why in the grant).
pub fn assert_workspace_write_allows_its_root_only(backend: &[&str], enforcement: &str) {
    let parent = workspace();
    let ws = parent.path().join("ws");
    let sibling = parent.path().join("sibling");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&sibling).unwrap();
    let mut args = backend.to_vec();
    args.extend([
        "--mode",
        "workspace-write",
        "--workspace",
        ws.to_str().unwrap(),
    ]);

    let (code, result) = run_json(&ws, &args, "printf 'landed\\n' > inside.txt");
    assert_eq!(code, 0, "{result}");
    assert_eq!(
        confined_facts(&result),
        serde_json::json!({"mode": "workspace-write", "denied": false, "enforcement": enforcement})
    );
    let partial = &result["grant"]["partial"];
    match enforcement {
        "full" => assert!(partial.is_null(), "{result}"),
        _ => assert!(
            partial[0].as_str().unwrap().starts_with("protected: "),
            "{result}"
        ),
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("inside.txt")).unwrap(),
        "landed\n"
    );

    let outside = sibling.join("outside.txt");
    let (code, result) = run_json(&ws, &args, &format!("echo x > {}", outside.display()));
    assert_ne!(code, 0);
    assert_eq!(
        sandbox(&result)["denied"],
        serde_json::json!(true),
        "{result}"
    );
    assert!(!outside.exists(), "the sibling write landed on the host");
}

/// `BACKEND --mode workspace-write --workspace ROOT`.
pub fn workspace_write<'a>(backend: &[&'a str], root: &'a str) -> Vec<&'a str> {
    let mut args = backend.to_vec();
    args.extend(["--mode", "workspace-write", "--workspace", root]);
    args
}

/// `cordon ARGS` in `dir`: its exit code and stdout.
pub fn cordon_out(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = cordon()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("spawn cordon");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code(), stdout)
}

/// `cordon ARGS` in `dir`: its exit code and stderr.
pub fn cordon_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = cordon()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("spawn cordon");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The JavaScript policy component (`components/js-policy/build.sh`, run by
/// scripts/test.sh): `$CORDON_JS_POLICY`, else `target/components/`. None,
/// said loudly, when it was not built; with `CORDON_E2E_REQUIRE_JS=1` (set
/// by scripts/test.sh on CI) that fails instead.
pub fn js_policy(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("CORDON_JS_POLICY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/components/js-policy.wasm")
        });
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CORDON_E2E_REQUIRE_JS").is_none(),
        "{test}: the JavaScript policy component is required here but {} does not exist; \
         run components/js-policy/build.sh",
        path.display()
    );
    eprintln!(
        "SKIPPED {test}: {} not built (components/js-policy/build.sh needs node and npm)",
        path.display()
    );
    None
}

/// A compiled-component cache shared by the e2e suites, so a large
/// component (the JavaScript one) is compiled once per test run.
pub fn shared_component_cache() -> PathBuf {
    scratch().join("component-cache")
}

/// A stand-in bwrap running `script`, in `dir/bin` (0755, so it passes the
/// trust check), and a `cordon.toml` in `dir` that names it as
/// `bwrap_path` (a substitute on `PATH` is never used). The config's
/// launcher has every mode of cordon's but the namespace runner, which
/// fails as on a kernel that makes no namespaces: the ladder's first rung
/// is unusable, so bwrap is the first it takes. Returns the config.
pub fn fake_bwrap(dir: &Path, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let fake = bin_dir(dir).join("bwrap");
    std::fs::write(&fake, script).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let launcher = wrapped_launcher(
        dir,
        "if [ \"$1\" = __ns ]; then\n  echo 'cordon-ns: cannot create the sandbox namespaces: \
         Operation not permitted' >&2\n  exit 125\nfi",
    );
    let config = dir.join("cordon.toml");
    std::fs::write(
        &config,
        format!(
            "bwrap_path = \"{}\"\nlandlock_launcher = \"{}\"\n",
            fake.display(),
            launcher.display()
        ),
    )
    .unwrap();
    config
}

/// `dir/bin`, made 0755 (so what is in it passes the trust check).
fn bin_dir(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Copy the executable `from` to `to` in a `cp` of its own: a copy made
/// here would hold the new file open for writing in this process, where
/// another test's fork could inherit the descriptor and the exec of the
/// copy then fail with "Text file busy".
pub fn copy_executable(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .expect("spawn cp");
    assert!(status.success(), "cp {} {}", from.display(), to.display());
}

/// A launcher in `dir/bin` that runs the shell lines `before`, then a copy
/// of cordon beside it with its arguments. A copy: the launcher may run as
/// bwrap's init, where a checkout under /tmp is hidden by the fresh /tmp;
/// and not a hard link, which changes the binary's ctime, and with it the
/// key of every verdict other tests keep about it.
pub fn wrapped_launcher(dir: &Path, before: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = bin_dir(dir);
    let real = bin.join("cordon-real");
    copy_executable(Path::new(env!("CARGO_BIN_EXE_cordon")), &real);
    let launcher = bin.join("cordon-launcher");
    std::fs::write(
        &launcher,
        format!("#!/bin/sh\n{before}\nexec {} \"$@\"\n", real.display()),
    )
    .unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    launcher
}

/// A stand-in bwrap's script that appends its arguments to `log`, then
/// runs `then` (shell lines): [`REAL_BWRAP`] to pass through, or a failure.
pub fn logged_script(log: &Path, then: &str) -> String {
    format!("#!/bin/sh\necho \"$*\" >> {}\n{then}\n", log.display())
}

/// The lines of a stand-in bwrap that hands over to the real one.
pub const REAL_BWRAP: &str = "exec /usr/bin/bwrap \"$@\"";

/// How many times a stand-in bwrap logging to `log` was started.
pub fn starts(log: &Path) -> usize {
    std::fs::read_to_string(log).map_or(0, |text| text.lines().count())
}

/// The host pids of the bwrap processes running `bash -c COMMAND`: their
/// command lines end `-- bash -c COMMAND` and carry the status-fd flag
/// (cordon's own does neither).
pub fn bwraps_running(command: &str) -> Vec<u32> {
    host_processes_with(&format!("-c {command}"))
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("--json-status-fd"))
        })
        .collect()
}

/// One client connection to a server: newline-delimited JSON-RPC.
pub struct Client {
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    writer: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    next: u64,
}

impl Client {
    /// Connect to `server`: a duplex pipe served by its own task.
    pub fn connect(
        server: &Arc<cordon::serve::Server>,
    ) -> (Client, tokio::task::JoinHandle<std::io::Result<()>>) {
        let (client, end) = tokio::io::duplex(1 << 16);
        let (input, output) = tokio::io::split(end);
        let serving = server.clone();
        let served = tokio::spawn(async move { serving.serve(input, output).await });
        let (reader, writer) = tokio::io::split(client);
        let client = Client {
            lines: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(reader)),
            writer,
            next: 0,
        };
        (client, served)
    }

    /// Call `method` and return its `result` or `error` object.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        tokio::io::AsyncWriteExt::write_all(&mut self.writer, format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let reply =
            tokio::time::timeout(std::time::Duration::from_secs(20), self.lines.next_line())
                .await
                .expect("the server answered in time")
                .unwrap()
                .expect("a reply line");
        let reply: Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["id"], json!(self.next), "{reply}");
        if reply.get("error").is_some() {
            reply["error"].clone()
        } else {
            reply["result"].clone()
        }
    }
}

/// The confined backends this machine has, each as its `cordon run` flags
/// and the denial text it produces; each missing one is reported loudly
/// (a failure where CI requires it).
pub fn confined_backends(test: &str) -> Vec<(&'static [&'static str], &'static str)> {
    let mut found: Vec<(&'static [&'static str], &'static str)> = vec![];
    if namespaces_usable(test) {
        found.push((&["--backend", "namespaces"], "read-only file system"));
    }
    if bwrap_usable(test) {
        found.push((&["--backend", "bwrap"], "read-only file system"));
    }
    if landlock_usable(test) {
        found.push((&["--backend", "landlock"], "permission denied"));
    }
    found
}

/// The live host processes that are `sleep MARK` itself (not the shells,
/// runners and launchers whose command lines mention it).
pub fn sleepers(mark: &str) -> Vec<u32> {
    host_processes_with(&format!("sleep {mark}"))
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\0"))
        })
        .collect()
}

/// Wait (up to 10 s) until `count` sleepers with `mark` run. A task or
/// a run that has started (its id returned, its status `running`) may not
/// have reached `exec sleep` yet: its runner can still be building the
/// sandbox, and under a loaded CI machine that takes longer than the calls
/// a test makes meanwhile.
pub fn wait_for_sleepers(mark: &str, count: usize) {
    eventually(
        std::time::Duration::from_secs(10),
        &format!("fewer than {count} sleepers {mark} started in 10 s"),
        || sleepers(mark).len() >= count,
    );
}

/// `cordon run --json`'s output is `SANDBOX_UNAVAILABLE` (exit 69) with a
/// detail that contains `needle`: the runner failed, not the command.
pub fn assert_runner_failure(output: Output, needle: &str) {
    let result = parse(&output);
    assert_eq!(output.status.code(), Some(69), "{result}");
    assert_eq!(result["error"]["code"], "SANDBOX_UNAVAILABLE", "{result}");
    assert!(
        result["error"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains(needle),
        "{result}"
    );
    // What a model or an operator reads never suggests turning the sandbox
    // off (issue 33): the fix is the operator's, named in the message.
    let message = result["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.contains("danger-full-access"), "{result}");
    assert!(message.contains("cordon doctor"), "{result}");
}

/// A file in `dir` with the execute bit that the kernel cannot run
/// (`ENOEXEC`): a program that exists but never starts.
pub fn garbage_executable(dir: &Path) -> PathBuf {
    let garbage = dir.join("garbage-runner");
    std::fs::write(&garbage, [0u8, 1, 2, 3]).unwrap();
    std::fs::set_permissions(
        &garbage,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    garbage
}

/// Whether `python3` runs here. When it does not, say so loudly; with
/// `CORDON_E2E_REQUIRE_PYTHON=1` (set by `.ci/run`) that fails.
pub fn python_usable(test: &str) -> bool {
    let python = Command::new("python3").arg("--version").output();
    if python.is_ok_and(|out| out.status.success()) {
        return true;
    }
    assert!(
        std::env::var_os("CORDON_E2E_REQUIRE_PYTHON").is_none(),
        "python3 is required here (CORDON_E2E_REQUIRE_PYTHON) but not usable"
    );
    eprintln!("SKIPPED {test}: python3 is not installed");
    false
}

/// Wait until `done` holds, polling; panic with `what` after `bound`.
pub fn eventually(bound: std::time::Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + bound;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Run the Python unittest `module` in `dir` (relative to the repository)
/// against the cordon binary under test, and check that `tests` tests ran
/// and passed. It gets `CORDON_BIN`, a scratch `CORDON_TEST_DIR`,
/// `CORDON_TEST_CONFINED`, and the fixture components `CORDON_STRICT_POLICY`,
/// `CORDON_RULES_POLICY` with `CORDON_RULES_SETTINGS`, `CORDON_RENDER_POLICY`.
pub fn python_suite(test: &str, dir: &str, module: &str, tests: usize) {
    python_suite_with(test, dir, module, tests, &[]);
}

/// [`python_suite`] with `env` added to the suite's environment.
pub fn python_suite_with(test: &str, dir: &str, module: &str, tests: usize, env: &[(&str, &Path)]) {
    let confined = ladder_confines(&format!("{test} (confined checks)"));
    let scratch = workspace();
    let output = Command::new("python3")
        .args(["-m", "unittest", "-v", module])
        .envs(env.iter().copied())
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir))
        .env("CORDON_BIN", env!("CARGO_BIN_EXE_cordon"))
        .env("CORDON_TEST_DIR", scratch.path())
        .env("CORDON_TEST_CONFINED", if confined { "1" } else { "0" })
        .env("CORDON_STRICT_POLICY", component("strict-policy.wasm"))
        .env("CORDON_RULES_POLICY", component("rules-policy.wasm"))
        .env("CORDON_RULES_SETTINGS", rule_file())
        .env("CORDON_RENDER_POLICY", component("render-policy.wasm"))
        .env("CORDON_HOSTILE_POLICY", component("hostile-policy.wasm"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python3");
    let report = String::from_utf8_lossy(&output.stderr);
    eprintln!("{report}");
    assert!(output.status.success(), "{module} failed:\n{report}");
    assert!(report.contains(&format!("Ran {tests} tests")), "{report}");
}

/// Whether cordon's default ladder confines runs here (`cordon probe`
/// names a backend: whichever rung this profile has — Landlock alone in a
/// restricted pod). When not, say so loudly; where CI requires any rung
/// (`CORDON_E2E_REQUIRE_{NAMESPACES,BWRAP,LANDLOCK}=1`) that fails.
pub fn ladder_confines(test: &str) -> bool {
    let output = cordon()
        .args(["probe", "--json"])
        .output()
        .expect("run cordon probe");
    let probe: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    if probe["backend"].is_string() {
        return true;
    }
    let required = ["NAMESPACES", "BWRAP", "LANDLOCK"].iter().any(|rung| {
        std::env::var_os(format!("CORDON_E2E_REQUIRE_{rung}")).is_some_and(|v| v == "1")
    });
    assert!(
        !required,
        "{test}: a rung is required here but none confines: {probe}"
    );
    eprintln!("SKIPPED {test}: no sandbox backend confines runs here: {probe}");
    false
}

/// `child`'s exit status, if it exits within `bound`.
pub fn exit_within(
    child: &mut std::process::Child,
    bound: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + bound;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

/// Whether this machine gives runs cgroups (`cordon probe --json`); the
/// mechanism when it does, else a loud skip (a failure when
/// `CORDON_E2E_REQUIRE_CGROUPS` is set).
pub fn cgroups(test: &str) -> Option<String> {
    let output = cordon().args(["probe", "--json"]).output().unwrap();
    let verdict: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mechanism = verdict["containment"]["mechanism"].as_str().unwrap_or("");
    let usable = mechanism.starts_with("cgroup");
    if usable {
        return Some(mechanism.to_owned());
    }
    {
        let why = &verdict["containment"]["detail"];
        assert!(
            std::env::var_os("CORDON_E2E_REQUIRE_CGROUPS").is_none(),
            "{test}: no cgroups here ({why}) but CORDON_E2E_REQUIRE_CGROUPS is set"
        );
        eprintln!("SKIPPED {test}: runs get no cgroup here: {why}");
    }
    None
}

/// `cordon-launcher` beside the cordon under test when it is of this build
/// (cordon then starts it: `cargo test --workspace` builds it); none when
/// absent or stale (cordon is its own launcher then).
pub fn installed_launcher() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_BIN_EXE_cordon")).with_file_name("cordon-launcher");
    cordon::sandbox::landlock::of_this_build(&path).then_some(path)
}

/// Read one HTTP request head (no body) from `reader`: its request line,
/// `Host` header and any `Authorization` and `x-cordon-*` headers as `LINE
/// Host=HOST x-cordon-name=VALUE`; none at the end of the stream.
pub fn request_head(reader: &mut impl std::io::BufRead) -> Option<String> {
    let (mut line, mut host, mut marked) = (String::new(), String::new(), String::new());
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return None;
        }
        match header.trim_end().split_once(": ") {
            Some((name, value)) if name.eq_ignore_ascii_case("host") => host = value.to_owned(),
            Some((name, value))
                if name.to_ascii_lowercase().starts_with("x-cordon-")
                    || name.eq_ignore_ascii_case("authorization") =>
            {
                marked.push_str(&format!(" {}={value}", name.to_ascii_lowercase()));
            }
            Some(_) => {}
            None => return Some(format!("{} Host={host}{marked}", line.trim_end())),
        }
    }
}

/// A namespace runner or Landlock launcher started ahead of its command
/// (`--await-fd`): the sandbox or ruleset is made first, the command comes
/// later over the fd.
pub struct Waiting {
    /// The launcher, started.
    pub child: std::process::Child,
    /// The write end of its command fd, until the command is handed.
    pub command: Option<std::fs::File>,
}

impl Waiting {
    /// Start `SUBCOMMAND --await-fd 3 PROFILE... --` in `cwd`.
    pub fn start(
        subcommand: &str,
        cwd: &std::path::Path,
        profile: &[impl AsRef<std::ffi::OsStr>],
    ) -> Waiting {
        use std::os::unix::process::CommandExt;
        // Close-on-exec both ends: no other child (tests run side by side)
        // may hold the write end open; dup2 clears it on fd 3.
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        // Above fd 3, so the dup2 below always clears close-on-exec.
        let read = nix::fcntl::fcntl(&read, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10)).unwrap();
        let mut command = cordon();
        command
            .current_dir(cwd)
            .arg(subcommand)
            .args(["--await-fd", "3"])
            .args(profile)
            .arg("--")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // SAFETY: dup2 is async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                if nix::libc::dup2(read, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap();
        nix::unistd::close(read).unwrap();
        Waiting {
            child,
            command: Some(std::fs::File::from(write)),
        }
    }

    /// Hand it `argv` to run in `workdir` with `env`, and wait for its end.
    pub fn run(
        mut self,
        workdir: &std::path::Path,
        argv: &[&str],
        env: &[(&str, &str)],
    ) -> std::process::Output {
        use std::io::Write;
        let os = std::ffi::OsString::from;
        let message = cordon::sandbox::launcher::command::Command {
            workdir: workdir.to_owned(),
            argv: argv.iter().map(os).collect(),
            env: env.iter().map(|(k, v)| (os(k), os(v))).collect(),
        };
        let mut pipe = self.command.take().unwrap();
        pipe.write_all(&message.encode()).unwrap();
        drop(pipe);
        self.child.wait_with_output().unwrap()
    }
}
