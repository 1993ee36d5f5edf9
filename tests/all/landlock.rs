//! The Landlock suite, with bwrap forced off (`--backend landlock`): real
//! `cordon run`, the real launcher mode of the same binary, the real
//! embedded component. Profiles of SPEC.md §6.

use crate::common;

use common::{confined_facts, landlock_usable, run_json, sandbox, workspace};
use serde_json::json;

macro_rules! require_landlock {
    () => {
        if !landlock_usable(module_path!()) {
            return;
        }
    };
}

const LANDLOCK: [&str; 2] = ["--backend", "landlock"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    LANDLOCK
        .iter()
        .copied()
        .chain(extra.iter().copied())
        .collect()
}

#[test]
fn read_only_denies_with_the_permission_denied_dialect() {
    require_landlock!();
    let ws = workspace();
    let target = ws.path().join("denied.txt");
    let (code, result) = run_json(
        ws.path(),
        &args(&[]),
        &format!("echo hi > {}", target.display()),
    );
    assert_ne!(code, 0);
    assert!(
        result["stderr"]["text"]
            .as_str()
            .unwrap()
            .contains("Permission denied")
    );
    assert_eq!(
        confined_facts(&result),
        json!({"mode": "read-only", "denied": true, "enforcement": "full"})
    );
    assert!(!target.exists());
}

#[test]
fn dev_null_is_writable_and_dev_shm_is_not() {
    require_landlock!();
    let ws = workspace();
    let (code, result) = run_json(ws.path(), &args(&[]), "echo x > /dev/null && echo ok");
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "ok\n");
    let name = format!("/dev/shm/cordon-e2e-{}", std::process::id());
    let (code, result) = run_json(ws.path(), &args(&[]), &format!("touch {name}"));
    assert_ne!(code, 0);
    assert_eq!(sandbox(&result)["denied"], json!(true), "{result}");
    assert!(!std::path::Path::new(&name).exists());
}

#[test]
fn workspace_write_allows_its_root_and_denies_a_sibling() {
    require_landlock!();
    // Full: the launcher's file supervisor keeps the protected paths.
    common::assert_workspace_write_allows_its_root_only(&["--backend", "landlock"], "full");
}

#[test]
fn workspace_write_tmp_is_the_hosts_and_persists() {
    require_landlock!();
    let ws = workspace();
    let name = format!("/tmp/cordon-e2e-landlock-{}", std::process::id());
    let (code, result) = run_json(
        ws.path(),
        &args(&[
            "--mode",
            "workspace-write",
            "--workspace",
            ws.path().to_str().unwrap(),
        ]),
        &format!("echo kept > {name}"),
    );
    assert_eq!(code, 0, "{result}");
    assert_eq!(std::fs::read_to_string(&name).unwrap(), "kept\n");
    std::fs::remove_file(&name).unwrap();
}

#[test]
fn nested_children_stay_confined() {
    require_landlock!();
    let ws = workspace();
    let target = ws.path().join("nested.txt");
    let (code, result) = run_json(
        ws.path(),
        &args(&[]),
        &format!("bash -c \"sh -c 'echo deep > {}'\"", target.display()),
    );
    assert_ne!(code, 0);
    assert_eq!(sandbox(&result)["denied"], json!(true), "{result}");
    assert!(!target.exists());
}

#[test]
fn a_command_printing_the_launcher_prefix_is_an_ordinary_failure() {
    require_landlock!();
    let ws = workspace();
    // The launcher's out-of-band status says it exec'd the command, so the
    // command's own "cordon-landlock: …" line at exit 125 is just output.
    let (code, result) = run_json(
        ws.path(),
        &args(&[]),
        "echo 'cordon-landlock: spoofed failure' >&2; exit 125",
    );
    assert_eq!(code, 125, "{result}");
    assert_eq!(result["exitCode"], json!(125));
    assert_eq!(
        confined_facts(&result),
        json!({"mode": "read-only", "denied": false, "enforcement": "full"})
    );
}

#[test]
fn the_launcher_sets_no_new_privs() {
    require_landlock!();
    let ws = workspace();
    let (code, result) = run_json(ws.path(), &args(&[]), "grep NoNewPrivs /proc/self/status");
    assert_eq!(code, 0, "{result}");
    assert!(
        result["stdout"]["text"]
            .as_str()
            .unwrap()
            .trim()
            .ends_with('1'),
        "{result}"
    );
}

/// A repository in `root` with a `.git/config`, and `cordon run` arguments
/// for `workspace-write` there.
fn repository_in(root: &std::path::Path) -> (Vec<u8>, Vec<String>) {
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    let config = std::fs::read(root.join(".git/config")).unwrap();
    let args = args(&["--mode", "workspace-write", "--workspace"])
        .into_iter()
        .map(String::from)
        .chain([root.to_string_lossy().into_owned()])
        .collect();
    (config, args)
}

#[test]
fn the_file_supervisor_holds_against_a_racer_swapping_links() {
    require_landlock!();
    let ws = workspace();
    let root = ws.path();
    let (config, args) = repository_in(root);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // A file of the run's own user outside every writable place.
    let victim = root.with_extension("victim");
    std::fs::write(&victim, "mine\n").unwrap();
    // One process swaps `x` between a file and links to `.git/config` and
    // to the victim, and `d` between a directory and a link to `.git`;
    // another writes through both names as fast as it can.
    let racer = format!(
        "mkdir -p d; \
         ( for i in $(seq 300); do \
             ln -sfn .git/config x; rm -f x; : > x; ln -sfn {victim} x; rm -f x; \
             rm -rf d; ln -sfn .git d; rm -f d; mkdir d; \
           done ) & \
         for i in $(seq 1500); do \
           echo evil >> x 2>/dev/null; echo evil >> d/config 2>/dev/null; \
           echo evil > d/hooks 2>/dev/null; \
         done; wait; echo done",
        victim = victim.display()
    );
    let (code, result) = run_json(root, &args, &racer);
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "done\n", "{result}");
    assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
    assert!(!root.join(".git/hooks/hooks").exists());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
    std::fs::remove_file(&victim).unwrap();
    // Positive control: the same names take writes when nothing swaps.
    let (code, result) = run_json(
        root,
        &args,
        "rm -rf x d; echo ok > x && mkdir d && echo ok > d/config",
    );
    assert_eq!(code, 0, "{result}");
    assert_eq!(
        std::fs::read_to_string(root.join("d/config")).unwrap(),
        "ok\n"
    );
}

#[test]
fn links_from_outside_reach_no_protected_path() {
    require_landlock!();
    let ws = workspace();
    let root = ws.path();
    let (config, args) = repository_in(root);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let link = format!("/tmp/cordon-e2e-link-{}", std::process::id());
    for attack in [
        // A symlink in /tmp (not supervised) into the workspace's .git.
        format!(
            "ln -sfn {}/.git/config {link} && echo evil >> {link}",
            root.display()
        ),
        // A second name for a protected file, inside or outside.
        "ln .git/config stolen".to_owned(),
        format!("ln .git/config {link}.hard"),
        // Through a descriptor's own link.
        "exec 3<.git/config; echo evil >> /proc/self/fd/3".to_owned(),
        "truncate -s 0 .git/config".to_owned(),
        "mv .git/config .".to_owned(),
    ] {
        let (code, result) = run_json(root, &args, &attack);
        assert_ne!(code, 0, "{attack}: {result}");
    }
    let _ = std::fs::remove_file(&link);
    assert!(!std::path::Path::new(&format!("{link}.hard")).exists());
    assert!(!root.join("stolen").exists());
    assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
}

#[test]
fn ordinary_file_work_goes_through_the_file_supervisor() {
    require_landlock!();
    if !common::python_usable("ordinary_file_work_goes_through_the_file_supervisor") {
        return;
    }
    let ws = workspace();
    let root = ws.path();
    let (_, args) = repository_in(root);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let outside = format!("/tmp/cordon-e2e-moved-{}", std::process::id());
    let script = format!(
        "set -e; \
         mkfifo p; cat p > from-fifo & echo through > p; wait; \
         ln -s p plink; (sleep 0.2; cat p > /dev/null) & echo again > plink; wait; \
         ln -s from-fifo flink; tar cf {outside}.tar from-fifo flink; mkdir unpacked; \
         tar xf {outside}.tar -C unpacked; rm {outside}.tar; touch -h -d 2001-01-01 flink; \
         exec 3<from-fifo; echo reopened > /proc/self/fd/3; exec 3<&-; \
         umask 077; touch private; umask 022; \
         echo moved > {outside}; mv {outside} moved-in; \
         mkdir -p a/b && echo deep > a/b/c && cp -r a copy && mv copy renamed && rm -r a; \
         ln -s renamed/b/c sym && echo more >> sym; ln renamed/b/c hard; \
         truncate -s 2 hard; \
         python3 -c 'import os; fd = os.open(\".\", os.O_TMPFILE | os.O_RDWR, 0o644); \
os.write(fd, b\"anon\"); os.lseek(fd, 0, 0); assert os.read(fd, 4) == b\"anon\"'; \
         cp -p renamed/b/c kept; \
         echo ok",
    );
    let (code, result) = run_json(root, &args, &script);
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "ok\n", "{result}");
    use std::os::unix::fs::PermissionsExt;
    let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap();
    assert_eq!(read("from-fifo"), "reopened\n");
    let mode = std::fs::metadata(root.join("private"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the command's umask");
    assert_eq!(read("moved-in"), "moved\n");
    assert!(!std::path::Path::new(&outside).exists());
    assert_eq!(read("renamed/b/c"), "de");
    assert_eq!(read("kept"), "de");
    assert!(root.join("unpacked/flink").is_symlink());
    let link_time = std::fs::symlink_metadata(root.join("flink"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(
        link_time,
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(978_307_200),
        "touch -h of a symlink"
    );
    assert!(!root.join("a").exists());
}

#[test]
fn a_workspace_inside_tmp_keeps_its_protected_paths() {
    require_landlock!();
    // /tmp, which every writable run may write, holds the workspace: its
    // Landlock rights would reach the workspace's .git, so it is supervised
    // too.
    let ws = tempfile::Builder::new()
        .prefix("cordon-e2e-ws-")
        .tempdir_in("/tmp")
        .unwrap();
    let root = ws.path();
    let (config, args) = repository_in(root);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let beside = format!("/tmp/cordon-e2e-beside-{}", std::process::id());
    let (code, result) = run_json(
        root,
        &args,
        &format!("echo ok > file && echo ok > {beside} && echo evil >> .git/config"),
    );
    assert_ne!(code, 0, "{result}");
    assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
    assert_eq!(std::fs::read_to_string(&beside).unwrap(), "ok\n");
    std::fs::remove_file(&beside).unwrap();
    for attack in [
        format!("mv {} {}.away", root.display(), root.display()),
        format!("rm -rf {}", root.display()),
        format!("ln -s /tmp {}/.git/hooks/pre-commit", root.display()),
    ] {
        let (code, result) = run_json(root, &args, &attack);
        assert_ne!(code, 0, "{attack}: {result}");
    }
    assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
    assert!(!root.join(".git/hooks/pre-commit").is_symlink());
}

#[test]
fn a_fifo_nobody_opens_stalls_no_other_write() {
    require_landlock!();
    let ws = workspace();
    let root = ws.path();
    let (_, args) = repository_in(root);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--timeout-ms", "10000"]);
    // The writer waits for a reader that never comes (on a thread of the
    // supervisor's own); every other write of the run still goes through,
    // and the waiting writer ends with the run.
    let (code, result) = run_json(
        root,
        &args,
        "mkfifo p; (echo never > p &); sleep 0.2; for i in 1 2 3; do echo $i > f$i; done; \
         mkdir d && mv f1 d/ && cat d/f1 f2 f3",
    );
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "1\n2\n3\n", "{result}");
    assert_eq!(result["timedOut"], false, "{result}");
}

#[test]
fn a_unix_socket_binds_in_the_workspace_but_not_on_a_protected_name() {
    require_landlock!();
    if !common::python_usable("a_unix_socket_binds_in_the_workspace") {
        return;
    }
    let ws = workspace();
    let root = ws.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let config = root.with_extension("toml");
    std::fs::write(&config, "max_network = \"full\"\n").unwrap();
    let grant = serde_json::json!({
        "mode": "workspace-write", "workspaceRoot": root, "network": "full"
    })
    .to_string();
    let args = args(&["--config", config.to_str().unwrap(), "--grant", &grant]);
    let script = "umask 077; python3 -c '
import socket
s = socket.socket(socket.AF_UNIX); s.bind(\"sock\"); s.listen()
c = socket.socket(socket.AF_UNIX); c.connect(\"sock\"); a, _ = s.accept(); c.send(b\"hi\")
assert a.recv(2) == b\"hi\"
for name in (\".git/config\", \".bashrc\"):
    try:
        socket.socket(socket.AF_UNIX).bind(name); print(\"bound\", name)
    except OSError as e:
        print(\"refused\", e.errno)
'";
    let (code, result) = run_json(root, &args, script);
    std::fs::remove_file(&config).unwrap();
    assert_eq!(code, 0, "{result}");
    assert_eq!(
        result["stdout"]["text"], "refused 30\nrefused 30\n",
        "{result}"
    );
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let sock = std::fs::symlink_metadata(root.join("sock")).unwrap();
    assert!(sock.file_type().is_socket());
    assert_eq!(
        sock.permissions().mode() & 0o777,
        0o700,
        "the command's umask"
    );
    assert!(!root.join(".git/sock").exists() && !root.join(".bashrc").exists());
}

/// `cordon run --backend landlock` starts the launcher once a run, not
/// three times: its probe's answer is kept for the boot (with these
/// privileges), so the next run starts no probe; `cordon probe` probes
/// afresh. Watched through a launcher that logs its starts, and the
/// second run's command really ran confined (a write outside refused, the
/// host file absent).
#[test]
fn the_landlock_rung_is_probed_once_a_boot_not_on_every_run() {
    let test = "the_landlock_rung_is_probed_once_a_boot_not_on_every_run";
    if !landlock_usable(test) {
        return;
    }
    let ws = workspace();
    let log = ws.path().join("launcher.log");
    let launcher =
        common::wrapped_launcher(ws.path(), &format!("echo \"$*\" >> {}", log.display()));
    let config = ws.path().join("cordon.toml");
    std::fs::write(
        &config,
        format!(
            "backend = \"landlock\"\nlandlock_launcher = \"{}\"\n",
            launcher.display()
        ),
    )
    .unwrap();
    let cache = ws.path().join("cache");
    let run = |command: &str| {
        common::cordon()
            .current_dir(ws.path())
            .env("XDG_CACHE_HOME", &cache)
            .args([
                "run",
                "--json",
                "--config",
                config.to_str().unwrap(),
                "--",
                command,
            ])
            .output()
            .unwrap()
    };
    let starts = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let probes = text
            .lines()
            .filter(|l| l.contains("--probe") || l.ends_with("--version"))
            .count();
        (probes, text.lines().count() - probes)
    };
    let logged = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(run("true").status.success());
    let (probes, runs) = starts();
    assert!(
        probes >= 2 && runs == 1,
        "the first run probes: {}",
        logged()
    );
    let outside = common::scratch().join(format!("{test}-{}", std::process::id()));
    let out = run(&format!("echo x > {}", outside.display()));
    assert_eq!(starts(), (probes, 2), "no probe: {}", logged());
    let result = common::parse(&out);
    assert_ne!(result["exitCode"], 0, "{result}");
    assert_eq!(sandbox(&result)["denied"], true, "{result}");
    assert!(!outside.exists(), "the write outside landed");
    let out = run("echo ran");
    assert_eq!(
        common::parse(&out)["stdout"]["text"],
        "ran\n",
        "the positive control"
    );
    assert_eq!(starts(), (probes, 3), "no probe: {}", logged());
    // `cordon probe` looks afresh.
    let probed = common::cordon()
        .env("XDG_CACHE_HOME", &cache)
        .args(["probe", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        probed.status.success(),
        "{}",
        String::from_utf8_lossy(&probed.stderr)
    );
    assert_eq!(starts(), (probes * 2, 3), "{}", logged());
}
