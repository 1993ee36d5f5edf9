//! The routes *beside* the file tree, attempted from inside a confined run
//! under every backend and checked on the host afterwards (SPEC §6, §9):
//! kernel settings, the workspace root, SysV IPC. Run as root in CI, where
//! they matter most. Each attack has a positive control next to it in the
//! backend suites (`bwrap`, `landlock`).

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use crate::common::{self, Client, bwrap_usable, landlock_usable, run_json, sandbox, workspace};

/// The backends this machine can run, as `cordon run` flags, each with the
/// denial text its dialect uses. Loud skips (or failures under
/// `CORDON_E2E_REQUIRE_*`) for the missing ones.
fn backends(test: &str) -> Vec<(&'static [&'static str], &'static str)> {
    common::confined_backends(test)
}

const KNOB: &str = "/proc/sys/kernel/printk_ratelimit";

fn knob() -> String {
    std::fs::read_to_string(KNOB).unwrap().trim().to_owned()
}

#[test]
fn a_sysctl_write_is_refused_in_every_mode_and_the_host_value_stays() {
    let ws = workspace();
    let before = knob();
    for (backend, denial) in
        backends("a_sysctl_write_is_refused_in_every_mode_and_the_host_value_stays")
    {
        for mode in ["read-only", "workspace-write"] {
            let mut args = backend.to_vec();
            args.extend(["--mode", mode, "--workspace", ws.path().to_str().unwrap()]);
            let (code, result) = run_json(
                ws.path(),
                &args,
                &format!("v=$(cat {KNOB}); echo $((v + 1)) > {KNOB}"),
            );
            let now = knob();
            if now != before {
                std::fs::write(KNOB, &before).unwrap();
                panic!("{backend:?} {mode}: the host's {KNOB} changed from {before} to {now}");
            }
            assert_ne!(code, 0, "{backend:?} {mode}: {result}");
            let stderr = result["stderr"]["text"].as_str().unwrap().to_lowercase();
            assert!(stderr.contains(denial), "{backend:?} {mode}: {stderr}");
            assert_eq!(sandbox(&result)["denied"], json!(true), "{result}");
            // Positive control: reading the knob still works.
            let (code, result) = run_json(ws.path(), &args, &format!("cat {KNOB}"));
            assert_eq!(code, 0, "{result}");
            assert_eq!(result["stdout"]["text"], format!("{before}\n"));
        }
    }
}

#[test]
fn every_procfs_kernel_interface_is_read_only_under_bwrap() {
    if !bwrap_usable("every_procfs_kernel_interface_is_read_only_under_bwrap") {
        return;
    }
    let ws = workspace();
    // The options of the topmost mount at each covered path, from inside.
    let script = cordon::sandbox::bwrap::PROC_READ_ONLY
        .iter()
        .filter(|path| Path::new(path).exists())
        .map(|path| {
            format!(
                "awk '$5 == \"{path}\" {{o = $6}} END {{print o}}' /proc/self/mountinfo \
                 | grep -q '^ro' || echo WRITABLE {path}"
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let (code, result) = run_json(ws.path(), &["--backend", "bwrap"], &script);
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "", "{result}");
}

/// `cordon run --mode workspace-write --workspace ROOT -- touch …`: refused
/// with the invalid-request exit code, the path named, nothing run.
fn refused_as_a_workspace(root: &Path, named: &str) {
    let ws = workspace();
    let marker = ws.path().join("ran");
    let output = common::cordon()
        .current_dir(ws.path())
        .args(["run", "--mode", "workspace-write", "--workspace"])
        .arg(root)
        .arg("--")
        .arg(format!("touch {}", marker.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(64),
        "{}: {stderr}",
        root.display()
    );
    assert!(
        stderr.contains(&format!("workspace root {named} ")),
        "{}: {stderr}",
        root.display()
    );
    assert!(stderr.starts_with("cordon: INVALID_REQUEST: "), "{stderr}");
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn a_workspace_that_would_expose_the_host_is_refused_naming_the_path() {
    refused_as_a_workspace(Path::new("/"), "/");
    refused_as_a_workspace(Path::new("/proc"), "/proc");
    refused_as_a_workspace(Path::new("/etc"), "/etc");
    let ws = workspace();
    let link = ws.path().join("to-root");
    std::os::unix::fs::symlink("/", &link).unwrap();
    refused_as_a_workspace(&link, "/");
    let etc_link = ws.path().join("to-etc");
    std::os::unix::fs::symlink("/etc", &etc_link).unwrap();
    refused_as_a_workspace(&etc_link, "/etc");
}

#[test]
fn allowed_roots_bound_every_workspace() {
    let parent = workspace();
    let inside = parent.path().join("inside");
    let outside = parent.path().join("outside");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let run = |root: &Path| {
        common::cordon()
            .current_dir(parent.path())
            .args(["run", "--mode", "workspace-write", "--allowed-root"])
            .arg(&inside)
            .arg("--workspace")
            .arg(root)
            .args(["--max-mode", "danger-full-access", "--", "true"])
            .output()
            .unwrap()
    };
    if bwrap_usable("allowed_roots_bound_every_workspace") {
        assert_eq!(run(&inside).status.code(), Some(0));
    }
    let refused = run(&outside);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("outside the allowed roots"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_workspace_over_serve_is_invalid_params_naming_the_path() {
    let ws = workspace();
    let host = Arc::new(common::test_host(ws.path(), 64_000));
    let server = Arc::new(cordon::serve::Server::new(host));
    let (mut client, _served) = Client::connect(&server);
    for root in ["/", "/proc", "/etc"] {
        let err = client
            .call(
                "run",
                json!({
                    "command": "true",
                    "policy": {"mode": "workspace-write", "workspaceRoot": root},
                }),
            )
            .await;
        assert_eq!(err["code"], -32602, "{root}: {err}");
        assert_eq!(err["data"]["code"], "INVALID_REQUEST", "{err}");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains(&format!("workspace root {root} ")),
            "{err}"
        );
    }
}

/// A SysV shared-memory segment of the host, removed when dropped.
struct HostSegment(String);

impl HostSegment {
    fn create() -> Self {
        let out = std::process::Command::new("ipcmk")
            .args(["-M", "4096"])
            .output()
            .expect("ipcmk (util-linux)");
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text
            .split_whitespace()
            .last()
            .expect("ipcmk printed the id")
            .to_owned();
        HostSegment(id)
    }

    fn exists(&self) -> bool {
        let out = std::process::Command::new("ipcs")
            .arg("-m")
            .output()
            .expect("ipcs (util-linux)");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|line| line.split_whitespace().nth(1) == Some(self.0.as_str()))
    }
}

impl Drop for HostSegment {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ipcrm")
            .args(["-m", &self.0])
            .output();
    }
}

#[test]
fn a_host_sysv_segment_survives_ipcrm_from_inside() {
    let ws = workspace();
    for (backend, _) in backends("a_host_sysv_segment_survives_ipcrm_from_inside") {
        let segment = HostSegment::create();
        assert!(segment.exists());
        for mode in ["read-only", "workspace-write"] {
            let mut args = backend.to_vec();
            args.extend(["--mode", mode, "--workspace", ws.path().to_str().unwrap()]);
            let (code, result) = run_json(ws.path(), &args, &format!("ipcrm -m {}", segment.0));
            assert_ne!(code, 0, "{backend:?} {mode}: ipcrm succeeded: {result}");
            assert!(
                segment.exists(),
                "{backend:?} {mode}: the host segment is gone"
            );
        }
    }
}

/// Whether this kernel has the Landlock scopes (ABI 6); a loud skip if not.
fn landlock_scopes(test: &str) -> bool {
    if !landlock_usable(test) {
        return false;
    }
    let abi = cordon::sandbox::landlock::kernel_abi();
    if abi < 6 {
        eprintln!("SKIPPED {test}: Landlock ABI {abi} has no scopes (needs 6)");
        return false;
    }
    true
}

#[test]
fn under_landlock_a_command_cannot_signal_a_host_process() {
    if !landlock_scopes("under_landlock_a_command_cannot_signal_a_host_process") {
        return;
    }
    let ws = workspace();
    let mut victim = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    for mode in ["read-only", "workspace-write"] {
        let args = ["--backend", "landlock", "--mode", mode];
        let (code, result) = run_json(ws.path(), &args, &format!("kill -TERM {}", victim.id()));
        assert_ne!(code, 0, "{mode}: the kill was allowed: {result}");
        assert!(
            victim.try_wait().unwrap().is_none(),
            "{mode}: the host process died"
        );
        // Positive control: a command still signals its own children.
        let (code, result) = run_json(ws.path(), &args, "sleep 30 & kill $! && wait $!; echo $?");
        assert_eq!(code, 0, "{result}");
        assert_eq!(result["stdout"]["text"], "143\n", "{result}");
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[test]
fn under_landlock_a_command_cannot_reach_a_host_abstract_socket() {
    use std::os::linux::net::SocketAddrExt;
    if !landlock_scopes("under_landlock_a_command_cannot_reach_a_host_abstract_socket") {
        return;
    }
    let ws = workspace();
    let name = format!("cordon-e2e-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    listener.set_nonblocking(true).unwrap();
    let connect = |target: &str| {
        format!(
            "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); \
             s.connect('\\0{target}'); print('connected')\""
        )
    };
    for mode in ["read-only", "workspace-write"] {
        // The full network: Landlock's scope alone closes the host's
        // abstract sockets (a closed network refuses unix sockets outright).
        let grant =
            serde_json::json!({"mode": mode, "workspaceRoot": ws.path(), "network": "full"})
                .to_string();
        let config = crate::common::full_network_config();
        let config = config.to_str().unwrap();
        let args = [
            "--backend",
            "landlock",
            "--grant",
            &grant,
            "--config",
            config,
        ];
        let (code, result) = run_json(ws.path(), &args, &connect(&name));
        assert_ne!(code, 0, "{mode}: connected to the host's socket: {result}");
        assert!(
            listener.accept().is_err(),
            "{mode}: the host's listener saw a connection"
        );
        // Positive control: a socket the command made itself is reachable.
        let own = format!(
            "python3 -c \"import socket; l = socket.socket(socket.AF_UNIX); \
             l.bind('\\0{name}-own'); l.listen(1); s = socket.socket(socket.AF_UNIX); \
             s.connect('\\0{name}-own'); print('connected')\""
        );
        let (code, result) = run_json(ws.path(), &args, &own);
        assert_eq!(code, 0, "{mode}: {result}");
        assert_eq!(result["stdout"]["text"], "connected\n");
    }
}

/// A preload library built here: its constructor appends the name of the
/// executable it loaded into (`/proc/self/exe`) to `$RECORD_OUT` (outside
/// the workspace) and `$RECORD_IN` (inside it). None, said loudly, without
/// a C compiler.
pub fn recorder(dir: &Path) -> Option<std::path::PathBuf> {
    let source = dir.join("recorder.c");
    std::fs::write(
        &source,
        r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void record(const char *var) {
    const char *path = getenv(var);
    if (!path) return;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) return;
    exe[n] = 0;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s\n", exe);
    fclose(f);
}
__attribute__((constructor)) static void loaded(void) {
    record("RECORD_OUT");
    record("RECORD_IN");
}
"#,
    )
    .unwrap();
    let library = dir.join("recorder.so");
    match std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
    {
        Ok(status) if status.success() => Some(library),
        other => {
            eprintln!(
                "SKIPPED the LD_PRELOAD case: cannot build a preload library with cc: {other:?}"
            );
            None
        }
    }
}

#[test]
fn a_callers_ld_preload_loads_into_sandboxed_programs_only() {
    let outside = workspace();
    let ws = workspace();
    let Some(library) = recorder(outside.path()) else {
        return;
    };
    let record_out = outside.path().join("record-out");
    let record_in = ws.path().join("record-in");
    for (backend, _) in backends("a_callers_ld_preload_loads_into_sandboxed_programs_only") {
        let _ = std::fs::remove_file(&record_in);
        let mut args = backend.to_vec();
        args.extend([
            "--mode",
            "workspace-write",
            "--workspace",
            ws.path().to_str().unwrap(),
        ]);
        let preload = format!("LD_PRELOAD={}", library.display());
        let out = format!("RECORD_OUT={}", record_out.display());
        let inside = format!("RECORD_IN={}", record_in.display());
        args.extend(["--env", &preload, "--env", &out, "--env", &inside]);
        let (code, result) = run_json(ws.path(), &args, "true");
        assert_eq!(code, 0, "{backend:?}: {result}");
        let host_side = std::fs::read_to_string(&record_out).unwrap_or_default();
        assert!(
            host_side.is_empty(),
            "{backend:?}: the preload ran outside the sandbox, in: {host_side}"
        );
        // Positive control: it did load into the sandboxed command.
        let sandboxed = std::fs::read_to_string(&record_in).unwrap_or_default();
        assert!(
            sandboxed.lines().any(|exe| exe.ends_with("/bash")),
            "{backend:?}: the command never saw its LD_PRELOAD: {sandboxed:?}"
        );
        assert!(
            !sandboxed.contains("bwrap") && !sandboxed.contains("cordon"),
            "{backend:?}: a runner loaded it: {sandboxed}"
        );
    }
}

#[test]
fn the_runner_gets_none_of_the_commands_environment() {
    if !bwrap_usable("the_runner_gets_none_of_the_commands_environment") {
        return;
    }
    let ws = workspace();
    // While bwrap runs, its own environment is on the host: look at it.
    let marker = format!("CORDON_SEEN_{}", std::process::id());
    let sleep = format!("sleep 7.{}", std::process::id());
    let mut child = common::cordon()
        .current_dir(ws.path())
        .args(["run", "--backend", "bwrap", "--env"])
        .arg(format!("{marker}=value-only-for-the-command"))
        .args(["--", &sleep])
        .spawn()
        .unwrap();
    common::wait_for_processes(&format!("-c {sleep}"), 1);
    let runners = common::bwraps_running(&sleep);
    assert!(!runners.is_empty(), "no bwrap found");
    for pid in &runners {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        for (what, bytes) in [("environment", environ), ("command line", cmdline)] {
            assert!(
                !String::from_utf8_lossy(&bytes).contains("value-only-for-the-command"),
                "bwrap's {what} carries the command's variable"
            );
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_substitute_bwrap_earlier_on_path_is_never_used() {
    if !bwrap_usable("a_substitute_bwrap_earlier_on_path_is_never_used") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let fake_dir = workspace();
    let ws = workspace();
    let used = fake_dir.path().join("fake-bwrap-was-used");
    let fake = fake_dir.path().join("bwrap");
    // A "bwrap" that runs the command unconfined and leaves a mark.
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ntouch {}\nwhile [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n",
            used.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        fake_dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let marker = Path::new("/etc").join(format!("cordon-fake-bwrap-{}", std::process::id()));
    let output = common::cordon()
        .current_dir(ws.path())
        .env("PATH", &path)
        .args(["run", "--json", "--backend", "bwrap", "--"])
        .arg(format!("touch {}", marker.display()))
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&marker);
    let result = common::parse(&output);
    assert!(!used.exists(), "the substitute bwrap on PATH ran");
    assert_eq!(sandbox(&result)["denied"], json!(true), "{result}");
    let probe = common::cordon()
        .env("PATH", &path)
        .args(["probe", "--json", "--backend", "bwrap"])
        .output()
        .unwrap();
    let probe = common::parse(&probe);
    let reason = common::rung(&probe, "bwrap")["reason"].as_str().unwrap();
    assert!(
        !reason.contains(fake_dir.path().to_str().unwrap()),
        "{reason}"
    );
    assert!(reason.contains("trusted"), "{reason}");
    assert!(!used.exists());
}

#[test]
fn a_configured_bwrap_that_others_could_replace_is_refused_with_the_reason() {
    if !bwrap_usable("a_configured_bwrap_that_others_could_replace_is_refused_with_the_reason") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let ws = workspace();
    let bin = ws.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let copy = bin.join("bwrap");
    let real = std::fs::canonicalize(cordon_bwrap()).unwrap();
    crate::common::copy_executable(&real, &copy);
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = ws.path().join("cordon.toml");
    std::fs::write(&config, format!("bwrap_path = \"{}\"\n", copy.display())).unwrap();
    let probe = |dir_mode: u32| {
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(dir_mode)).unwrap();
        let output = common::cordon()
            .args(["probe", "--json", "--backend", "bwrap", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        common::rung(&common::parse(&output), "bwrap").clone()
    };
    let trusted = probe(0o755);
    assert_eq!(trusted["usable"], json!(true), "{trusted}");
    assert!(
        trusted["reason"]
            .as_str()
            .unwrap()
            .contains(copy.to_str().unwrap())
    );
    let refused = probe(0o777);
    assert_eq!(refused["usable"], json!(false), "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("is not trusted: writable by others"),
        "{refused}"
    );
    // And a run under it fails closed.
    let output = common::cordon()
        .current_dir(ws.path())
        .args(["run", "--backend", "bwrap", "--config"])
        .arg(&config)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(69));
}

/// The bwrap cordon uses: the first in the fixed system directories.
fn cordon_bwrap() -> std::path::PathBuf {
    ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
        .expect("bwrap in a system directory")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_too_large_for_any_run_is_invalid_params_over_serve() {
    let ws = workspace();
    let host = Arc::new(common::test_host(ws.path(), 64_000));
    let server = Arc::new(cordon::serve::Server::new(host));
    let (mut client, _served) = Client::connect(&server);
    let err = client
        .call("run", json!({"command": "x".repeat(3 << 20)}))
        .await;
    assert_eq!(err["code"], -32602, "{}", err["message"]);
    assert_eq!(err["data"]["code"], "INVALID_REQUEST");
    assert!(err["message"].as_str().unwrap().contains("command is"));
}

#[test]
fn stdin_and_config_files_must_be_bounded_regular_files() {
    let ws = workspace();
    for args in [
        &["run", "--stdin-file", "/dev/zero", "--", "cat"][..],
        &["run", "--config", "/dev/zero", "--", "true"][..],
        &["probe", "--config", "/dev/urandom"][..],
    ] {
        let started = std::time::Instant::now();
        let (code, stderr) = common::cordon_in(ws.path(), args);
        assert_eq!(code, Some(78), "{args:?}: {stderr}");
        assert!(stderr.contains("not a regular file"), "{args:?}: {stderr}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}

/// The credentials SPEC §3's scrub must withhold, with realistic values.
const SECRETS: &[(&str, &str)] = &[
    ("DATABASE_URL", "postgres://app:hunter2@db.internal/app"),
    ("GITHUB_PAT", "github_pat_11AAAA"),
    ("CI_JOB_JWT", "eyJhbGciOi.x.y"),
    ("MYSQL_PWD", "hunter2"),
    ("NPM_CONFIG__AUTH", "dXNlcjpwdw=="),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/etc/gcp/key.json"),
    ("DEPLOY_CREDENTIALS", "deploy-credentials-value"),
    ("KUBECONFIG", "/root/.kube/config"),
    ("AWS_SESSION_TOKEN", "FwoGZXIvYXdzE"),
];

fn visible_env(dir: &Path, config: Option<&Path>) -> String {
    visible_env_under(
        dir,
        config,
        &[
            "--max-mode",
            "danger-full-access",
            "--mode",
            "danger-full-access",
        ],
    )
}

/// The environment `env` sees when cordon runs with `mode` flags and the
/// host environment holds [`SECRETS`] and one harmless setting.
fn visible_env_under(dir: &Path, config: Option<&Path>, mode: &[&str]) -> String {
    let mut command = common::cordon();
    command.current_dir(dir).arg("run").arg("--json");
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    for (name, value) in SECRETS {
        command.env(name, value);
    }
    command.env("HARMLESS_SETTING", "kept");
    let output = command.args(mode).args(["--", "env"]).output().unwrap();
    common::parse(&output)["stdout"]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_credential_scrub_withholds_common_secrets_unless_the_operator_includes_them() {
    let ws = workspace();
    let env = visible_env(ws.path(), None);
    for (name, value) in SECRETS {
        assert!(
            !env.contains(&format!("{name}=")),
            "{name} reached the command"
        );
        assert!(
            !env.contains(value),
            "the value of {name} reached the command"
        );
    }
    assert!(env.contains("HARMLESS_SETTING=kept"), "{env}");

    let config = ws.path().join("cordon.toml");
    std::fs::write(
        &config,
        "[env]\ninclude = [\"DATABASE_URL\", \"KUBECONFIG\"]\nexclude = [\"HARMLESS_*\"]\n",
    )
    .unwrap();
    let env = visible_env(ws.path(), Some(&config));
    assert!(
        env.contains("DATABASE_URL=postgres://app:hunter2@db.internal/app"),
        "{env}"
    );
    assert!(env.contains("KUBECONFIG=/root/.kube/config"), "{env}");
    assert!(!env.contains("GITHUB_PAT="), "{env}");
    assert!(!env.contains("HARMLESS_SETTING"), "{env}");

    std::fs::write(&config, "[env]\ninherit = \"none\"\n").unwrap();
    let env = visible_env(ws.path(), Some(&config));
    assert!(!env.contains("HARMLESS_SETTING"), "{env}");
    assert!(
        env.contains("NO_COLOR=1"),
        "the defaults still apply: {env}"
    );
}

/// A file outside every workspace with known metadata: mode 0644, an mtime
/// in 2001.
struct HostFile {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl HostFile {
    fn create() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = workspace();
        let path = dir.path().join("host-file");
        std::fs::write(&path, "host\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let status = std::process::Command::new("touch")
            .args(["-d", "2001-02-03 04:05:06"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        HostFile { _dir: dir, path }
    }

    /// (mode, uid, gid, mtime) as the host sees them.
    fn metadata(&self) -> (u32, u32, u32, i64) {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&self.path).unwrap();
        (meta.mode(), meta.uid(), meta.gid(), meta.mtime())
    }
}

#[test]
fn chmod_chown_and_touch_outside_the_workspace_fail_and_change_nothing() {
    let ws = workspace();
    let file = HostFile::create();
    let before = file.metadata();
    let path = file.path.display().to_string();
    for (backend, _) in
        backends("chmod_chown_and_touch_outside_the_workspace_fail_and_change_nothing")
    {
        for mode in ["read-only", "workspace-write"] {
            let mut args = backend.to_vec();
            args.extend(["--mode", mode, "--workspace", ws.path().to_str().unwrap()]);
            for attack in [
                format!("chmod 4755 {path}"),
                format!("chown 1234:1234 {path}"),
                format!("touch -d '2020-01-01 00:00:00' {path}"),
                format!("touch {path}"),
            ] {
                let (code, result) = run_json(ws.path(), &args, &attack);
                assert_ne!(code, 0, "{backend:?} {mode} `{attack}` succeeded: {result}");
                assert_eq!(
                    file.metadata(),
                    before,
                    "{backend:?} {mode} `{attack}` changed the host file"
                );
            }
            // Positive control: the file is still readable.
            let (code, result) = run_json(ws.path(), &args, &format!("cat {path}"));
            assert_eq!(code, 0, "{result}");
            assert_eq!(result["stdout"]["text"], "host\n");
        }
    }
}

#[test]
fn probe_shows_the_landlock_scopes_in_force() {
    if !landlock_scopes("probe_shows_the_landlock_scopes_in_force") {
        return;
    }
    let output = common::cordon()
        .args(["probe", "--json", "--backend", "landlock"])
        .output()
        .unwrap();
    let probe = common::parse(&output);
    assert_eq!(
        probe["landlockScopes"],
        json!(["abstract-unix-socket", "signal"]),
        "{probe}"
    );
    let reason = common::rung(&probe, "landlock")["reason"].as_str().unwrap();
    assert!(
        reason.contains("scopes: abstract-unix-socket, signal"),
        "{reason}"
    );
    // Root unshares IPC; anyone else gets no IPC at all.
    let ipc = match nix::unistd::geteuid().is_root() {
        true => "ipc: own namespace per run",
        false => "ipc: none (SysV IPC and message queues refused",
    };
    assert!(reason.contains(ipc), "{reason}");
    let text = common::cordon().args(["probe"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("(scopes: abstract-unix-socket, signal)"),
        "{text}"
    );
}

#[test]
fn under_landlock_a_command_cannot_signal_cordon_itself() {
    if !landlock_scopes("under_landlock_a_command_cannot_signal_cordon_itself") {
        return;
    }
    let ws = workspace();
    // Under Landlock the launcher execs the command, so its parent is the
    // cordon process that runs it: the scope keeps the signal from it.
    let (code, result) = run_json(
        ws.path(),
        &["--backend", "landlock"],
        "kill -KILL $PPID; echo survived:$?",
    );
    assert_eq!(code, 0, "cordon died or the run failed: {result}");
    let text = result["stdout"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("survived:") && text != "survived:0\n",
        "{result}"
    );
}

#[test]
fn confined_runs_see_no_secret_under_every_backend() {
    let ws = workspace();
    for (backend, _) in backends("confined_runs_see_no_secret_under_every_backend") {
        let env = visible_env_under(ws.path(), None, backend);
        for (name, value) in SECRETS {
            assert!(
                !env.contains(&format!("{name}=")),
                "{backend:?}: {name} reached the command"
            );
            assert!(
                !env.contains(value),
                "{backend:?}: the value of {name} reached the command"
            );
        }
        assert!(env.contains("HARMLESS_SETTING=kept"), "{backend:?}: {env}");
    }
}

#[test]
fn a_confined_command_has_no_capability_even_as_root_under_every_backend() {
    for (backend, _) in common::confined_backends("a_confined_command_has_no_capability") {
        let ws = workspace();
        let args = common::workspace_write(backend, ws.path().to_str().unwrap());
        let (code, result) = run_json(
            ws.path(),
            &args,
            "grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status; echo kept > kept.txt",
        );
        assert_eq!(code, 0, "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        // (The bounding set may stay under bwrap: no-new-privs keeps an
        // exec from gaining anything from it.)
        assert_eq!(out.lines().count(), 4, "{out}");
        for line in out.lines() {
            assert!(line.ends_with("0000000000000000"), "{backend:?}: {line}");
        }
        // Positive control: the workspace is still written.
        assert_eq!(
            std::fs::read_to_string(ws.path().join("kept.txt")).unwrap(),
            "kept\n"
        );
    }
}

#[test]
fn a_command_cannot_open_its_supervisors_fds_or_environment_under_every_backend() {
    // cordon's supervisor (pid 1 under the namespace runner, the init under
    // bwrap, the launcher under Landlock) is the command's parent and holds
    // the status pipe; it is not dumpable, from before it forks, so even a
    // command of the same user gets nothing of it through /proc.
    let ws = workspace();
    for (backend, _) in
        backends("a_command_cannot_open_its_supervisors_fds_or_environment_under_every_backend")
    {
        let (code, result) = run_json(
            ws.path(),
            backend,
            "ls /proc/self/fd > /dev/null && echo own:ok; \
             ls -l /proc/$PPID/fd > /dev/null 2>&1 && echo fds:open || echo fds:closed; \
             cat /proc/$PPID/environ > /dev/null 2>&1 && echo env:read || echo env:denied",
        );
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert_eq!(
            result["stdout"]["text"], "own:ok\nfds:closed\nenv:denied\n",
            "{backend:?}: {result}"
        );
    }
}
