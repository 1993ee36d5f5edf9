//! cordon's namespace runner's own contract (`cordon __ns`): its usage and
//! its failures exit 125 with the `cordon-ns: ` prefix and leave nothing
//! mounted on the host; the command's exit status, and a signal death,
//! pass through; a mountpoint reached through a symlink is refused.

use crate::common;

use common::{Waiting, cordon, namespaces_usable, workspace};

fn runner(args: &[&str]) -> std::process::Output {
    cordon().arg("__ns").args(args).output().unwrap()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The host's mounts at or under `dir` (its mount table's lines; other
/// tests mount and unmount elsewhere meanwhile).
fn host_mounts(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.to_str().unwrap();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|line| {
            line.split(' ')
                .nth(4)
                .is_some_and(|at| at == dir || at.starts_with(&format!("{dir}/")))
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn usage_errors_exit_125_with_the_prefix() {
    for args in [
        &[][..],
        &["--bogus", "--", "true"][..],
        &["--dev", "/dev", "--", "true"][..],
        &["--bind", "/", "/", "--", "true"][..],
        &["--ro-bind", "/", "/", "--tmpfs", "relative", "--", "true"][..],
        &["--ro-bind", "/", "/", "--"][..],
    ] {
        let output = runner(args);
        assert_eq!(output.status.code(), Some(125), "{args:?}");
        assert!(
            stderr(&output).starts_with("cordon-ns: usage: "),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn exit_codes_and_signal_deaths_pass_through() {
    if !namespaces_usable("exit_codes_and_signal_deaths_pass_through") {
        return;
    }
    let profile = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"];
    let run = |command: &str| {
        let mut args = profile.to_vec();
        args.extend(["--", "sh", "-c", command]);
        runner(&args)
    };
    assert_eq!(run("exit 7").status.code(), Some(7));
    assert_eq!(run("exit 125").status.code(), Some(125));
    assert_eq!(run("exit 0").status.code(), Some(0));
    let killed = run("kill -9 $$");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed.status),
        None,
        "pid 1 cannot die of a signal: it reports the command's"
    );
    assert_eq!(killed.status.code(), Some(128 + 9));
}

#[test]
fn a_missing_source_fails_before_the_command_and_mounts_nothing_on_the_host() {
    if !namespaces_usable(
        "a_missing_source_fails_before_the_command_and_mounts_nothing_on_the_host",
    ) {
        return;
    }
    let ws = workspace();
    let marker = ws.path().join("ran");
    let missing = ws.path().join("missing");
    let before = host_mounts(ws.path());
    let output = runner(&[
        "--ro-bind",
        "/",
        "/",
        "--bind",
        missing.to_str().unwrap(),
        missing.to_str().unwrap(),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(125));
    assert!(
        stderr(&output).starts_with("cordon-ns: cannot bind "),
        "{}",
        stderr(&output)
    );
    assert!(!marker.exists(), "the command ran");
    assert_eq!(host_mounts(ws.path()), before, "a mount reached the host");
}

#[test]
fn a_mountpoint_behind_a_symlink_is_refused() {
    if !namespaces_usable("a_mountpoint_behind_a_symlink_is_refused") {
        return;
    }
    // A workspace whose directory an earlier run swapped for a link to
    // elsewhere: a cover meant for it must not land on the link's target.
    let ws = workspace();
    let elsewhere = ws.path().join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("secret")).unwrap();
    std::fs::write(elsewhere.join("secret/key"), "k").unwrap();
    std::os::unix::fs::symlink(&elsewhere, ws.path().join("link")).unwrap();
    let cover = ws.path().join("link/secret");
    let output = runner(&[
        "--ro-bind",
        "/",
        "/",
        "--tmpfs",
        cover.to_str().unwrap(),
        "--remount-ro",
        cover.to_str().unwrap(),
        "--",
        "cat",
        elsewhere.join("secret/key").to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(125), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("without following a symlink"),
        "{}",
        stderr(&output)
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn nothing_the_runner_mounts_reaches_the_host_while_it_runs() {
    if !namespaces_usable("nothing_the_runner_mounts_reaches_the_host_while_it_runs") {
        return;
    }
    let ws = workspace();
    let root = ws.path().to_str().unwrap().to_owned();
    let hidden = ws.path().join("hidden");
    std::fs::create_dir(&hidden).unwrap();
    let hidden = hidden.to_str().unwrap().to_owned();
    // The workspace a shared mount of the host's (as systemd makes `/`):
    // a mount made under it in a namespace that still shares its peer
    // group would appear on the host.
    let shared = nix::unistd::geteuid().is_root()
        && std::process::Command::new("mount")
            .args(["--bind", &root, &root])
            .status()
            .is_ok_and(|s| s.success());
    struct Unmount(String, bool);
    impl Drop for Unmount {
        fn drop(&mut self) {
            if self.1 {
                let _ = std::process::Command::new("umount")
                    .args(["--recursive", "--lazy"])
                    .arg(&self.0)
                    .status();
            }
        }
    }
    let _unmount = Unmount(root.clone(), shared);
    if shared {
        let made = std::process::Command::new("mount")
            .args(["--make-shared", &root])
            .status()
            .unwrap();
        assert!(made.success());
    } else {
        eprintln!("nothing_the_runner_mounts…: not root, the workspace is not made a shared mount");
    }
    let before = host_mounts(ws.path());
    let mut running = cordon()
        // Inside the sandbox: a checkout under /tmp is under its fresh /tmp.
        .current_dir(ws.path())
        .arg("__ns")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--tmpfs",
            "/tmp",
            "--bind",
            &root,
            &root,
        ])
        .args([
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            &hidden,
            "--remount-ro",
            &hidden,
        ])
        .args(["--unshare-net", "--", "sleep", "1"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    let during = host_mounts(ws.path());
    assert!(running.wait().unwrap().success());
    assert_eq!(
        during, before,
        "a mount of the sandbox propagated to the host"
    );
    assert_eq!(host_mounts(ws.path()), before);
}

/// The protected-`.git` profile of a writable workspace.
fn guarded(root: &str, git: &str) -> Vec<String> {
    [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--bind",
        root,
        root,
        "--ro-bind",
        git,
        git,
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn a_runner_started_ahead_runs_the_command_it_is_handed_later() {
    if !namespaces_usable("a_runner_started_ahead_runs_the_command_it_is_handed_later") {
        return;
    }
    let ws = workspace();
    let root = ws.path().to_str().unwrap().to_owned();
    let git = format!("{root}/.git");
    std::fs::create_dir_all(format!("{root}/sub")).unwrap();
    std::fs::create_dir(&git).unwrap();
    let profile = guarded(&root, &git);
    let waiting = Waiting::start("__ns", ws.path(), &profile);
    // The sandbox is built before the command comes.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let output = waiting.run(
        &ws.path().join("sub"),
        &[
            "sh",
            "-c",
            "pwd; echo \"$FOO\"; touch ../made; touch ../.git/planted || echo git-read-only",
        ],
        &[("FOO", "handed later"), ("PATH", "/usr/bin:/bin")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{root}/sub\nhanded later\ngit-read-only\n")
    );
    assert!(
        ws.path().join("made").exists(),
        "the writable root is writable"
    );
    assert!(
        !ws.path().join(".git/planted").exists(),
        "the protected path stayed read-only"
    );
}

/// Start a runner with `profile` in `ws`, `change` the host while it
/// waits, then hand it a command that plants a file in `.git`: it must
/// refuse with nothing run. Returns its output.
fn refused_after(
    ws: &std::path::Path,
    profile: &[impl AsRef<std::ffi::OsStr>],
    change: impl FnOnce(),
) -> std::process::Output {
    let waiting = Waiting::start("__ns", ws, profile);
    std::thread::sleep(std::time::Duration::from_millis(200));
    change();
    let output = waiting.run(
        ws,
        &["sh", "-c", "touch .git/planted; touch ran"],
        &[("PATH", "/usr/bin:/bin")],
    );
    assert_eq!(output.status.code(), Some(125), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("changed while the runner waited"),
        "{}",
        stderr(&output)
    );
    assert!(!ws.join(".git/planted").exists(), "planted in the new .git");
    assert!(!ws.join("ran").exists(), "the command ran");
    output
}

#[test]
fn a_runner_whose_view_changed_while_it_waited_runs_nothing() {
    if !namespaces_usable("a_runner_whose_view_changed_while_it_waited_runs_nothing") {
        return;
    }
    let ws = workspace();
    let root = ws.path().to_str().unwrap().to_owned();
    let git = format!("{root}/.git");
    std::fs::create_dir(&git).unwrap();
    // On the host, while it waits: the covered `.git` moves away (its
    // cover goes with it) and a new, uncovered one takes its place.
    let output = refused_after(ws.path(), &guarded(&root, &git), || {
        std::fs::rename(&git, format!("{root}/.git-old")).unwrap();
        std::fs::create_dir(&git).unwrap();
    });
    assert!(
        stderr(&output).contains("cordon-ns: "),
        "{}",
        stderr(&output)
    );
    assert!(!ws.path().join(".git-old/planted").exists());
}

#[test]
fn a_runner_whose_skipped_cover_appeared_while_it_waited_runs_nothing() {
    if !namespaces_usable("a_runner_whose_skipped_cover_appeared_while_it_waited_runs_nothing") {
        return;
    }
    // `--ro-bind-try` of a `.git` that is not there yet: a fresh runner
    // would cover the one made meanwhile, so a waiting one must not run.
    let ws = workspace();
    let root = ws.path().to_str().unwrap().to_owned();
    let git = format!("{root}/.git");
    let profile = [
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--bind",
        &root,
        &root,
        "--ro-bind-try",
        &git,
        &git,
    ];
    refused_after(ws.path(), &profile, || std::fs::create_dir(&git).unwrap());
}

#[test]
fn a_runner_let_go_without_a_command_runs_nothing() {
    if !namespaces_usable("a_runner_let_go_without_a_command_runs_nothing") {
        return;
    }
    let ws = workspace();
    let mut waiting = Waiting::start(
        "__ns",
        ws.path(),
        &["--ro-bind", "/", "/", "--proc", "/proc"],
    );
    drop(waiting.command.take());
    let output = waiting.child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(125));
    assert!(
        stderr(&output).contains("no command came"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_runner_that_awaits_its_command_takes_none_after_the_separator() {
    for (args, says) in [
        (
            &["--await-fd", "3", "--ro-bind", "/", "/", "--", "true"][..],
            "comes over that fd",
        ),
        (
            &[
                "--await-fd",
                "3",
                "--env-fd",
                "4",
                "--ro-bind",
                "/",
                "/",
                "--",
            ][..],
            "not --env-fd",
        ),
        (
            &["--await-fd", "1", "--ro-bind", "/", "/", "--"][..],
            "above 2",
        ),
    ] {
        let output = runner(args);
        assert_eq!(output.status.code(), Some(125), "{args:?}");
        assert!(
            stderr(&output).contains(says),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

/// `cordon __ns --join-net 3` with fd 3 opened on `namespace` (a
/// `/proc/…/ns/net` path), running `command` in a read-only sandbox with
/// `writable` bound writable.
fn joining(namespace: &str, writable: &std::path::Path, command: &str) -> std::process::Output {
    let cordon = env!("CARGO_BIN_EXE_cordon");
    let writable = writable.to_str().unwrap();
    std::process::Command::new("bash")
        .args([
            "-c",
            r#"exec 3<"$1"; shift; exec "$@""#,
            "joining",
            namespace,
        ])
        .args([cordon, "__ns", "--join-net", "3", "--ro-bind", "/", "/"])
        .args([
            "--bind", writable, writable, "--dev", "/dev", "--proc", "/proc",
        ])
        .args(["--unshare-net", "--", "sh", "-c", command])
        .output()
        .unwrap()
}

/// A process holding a network namespace of its own (`unshare -n`), with
/// `then` run in it first (none: `then` failed); killed when dropped.
struct Holder(std::process::Child);

impl Holder {
    fn start(then: &str) -> Option<Holder> {
        let child = std::process::Command::new("unshare")
            .args(["-n", "sh", "-c", &format!("{then} && exec sleep 60")])
            .spawn()
            .unwrap();
        let mut holder = Holder(child);
        let own = std::fs::read_link("/proc/self/ns/net").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let ready = std::fs::read_link(holder.namespace()).is_ok_and(|ns| ns != own)
                && std::fs::read_to_string(format!("/proc/{}/comm", holder.0.id()))
                    .is_ok_and(|comm| comm.trim() == "sleep");
            if ready {
                return Some(holder);
            }
            if holder.0.try_wait().unwrap().is_some() {
                return None;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the holder never got ready"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn namespace(&self) -> String {
        format!("/proc/{}/ns/net", self.0.id())
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_lent_network_namespace_is_joined_only_when_it_is_not_the_host_s_and_has_only_the_loopback() {
    let test = "a_lent_network_namespace_is_joined_only_when_it_is_not_the_host_s_and_has_only_the_loopback";
    if !namespaces_usable(test) {
        return;
    }
    let ws = workspace();
    let marker = ws.path().join("ran");
    let command = format!("readlink /proc/self/ns/net; touch {}", marker.display());
    // The host's own network namespace: refused before anything runs.
    let own = joining("/proc/self/ns/net", ws.path(), &command);
    assert_eq!(own.status.code(), Some(125), "{}", stderr(&own));
    assert!(
        stderr(&own).contains("is the host's own"),
        "{}",
        stderr(&own)
    );
    assert!(!marker.exists(), "the command ran with the host's network");
    if !nix::unistd::geteuid().is_root() {
        eprintln!(
            "SKIPPED {test} (its joining cases): joining a namespace the host made needs root"
        );
        return;
    }
    // A namespace with interfaces besides the loopback (a veth pair):
    // refused.
    match Holder::start("ip link add cordon-a type veth peer name cordon-b") {
        Some(wired) => {
            let output = joining(&wired.namespace(), ws.path(), &command);
            assert_eq!(output.status.code(), Some(125), "{}", stderr(&output));
            let said = stderr(&output);
            assert!(said.contains("other than the loopback"), "{said}");
            assert!(!marker.exists(), "the command ran beside another interface");
        }
        None => eprintln!("SKIP {test} (its interface case): no veth pair could be made here"),
    }
    // The control: a namespace with only its loopback is joined.
    let quiet = Holder::start("true").expect("a holder of a fresh network namespace");
    let output = joining(&quiet.namespace(), ws.path(), &command);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let joined = std::fs::read_link(quiet.namespace()).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        joined.to_str().unwrap(),
        "the command ran in the lent namespace"
    );
    assert!(marker.exists());
}
