//! The Landlock launcher's command-line contract (`cordon __landlock`):
//! every failure of its own exits 125 with the `cordon-landlock: ` prefix;
//! the child's exit status passes through untouched.

use crate::common;

use common::{Waiting, cordon, landlock_usable, workspace};

fn launcher(args: &[&str]) -> std::process::Output {
    cordon().arg("__landlock").args(args).output().unwrap()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn usage_errors_exit_125_with_the_prefix() {
    for args in [
        &[][..],
        &["--bogus"][..],
        &["--ro"][..],
        &["--ro", "/"][..],
        &["--ro", "/", "--"][..],
        &["--status-fd", "nope", "--", "true"][..],
    ] {
        let output = launcher(args);
        assert_eq!(output.status.code(), Some(125), "{args:?}");
        assert!(
            stderr(&output).starts_with("cordon-landlock: usage: "),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn probe_reports_enforcement() {
    if !landlock_usable("probe_reports_enforcement") {
        return;
    }
    let output = launcher(&["--probe"]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let first = stdout.lines().next().unwrap();
    assert!(
        first == "landlock: fully enforced" || first == "landlock: partially enforced (older ABI)",
        "{stdout}"
    );
}

#[test]
fn child_exit_codes_pass_through() {
    if !landlock_usable("child_exit_codes_pass_through") {
        return;
    }
    let output = launcher(&["--ro", "/", "--", "sh", "-c", "exit 7"]);
    assert_eq!(output.status.code(), Some(7));
    let output = launcher(&["--ro", "/", "--", "sh", "-c", "exit 125"]);
    assert_eq!(output.status.code(), Some(125));
    assert!(
        !stderr(&output).contains("cordon-landlock: "),
        "the child's own 125 got a launcher line: {}",
        stderr(&output)
    );
}

#[test]
fn an_unopenable_grant_path_fails_before_the_command_runs() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    let output = launcher(&[
        "--ro",
        "/",
        "--rw",
        "/nonexistent/cordon-grant",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(125));
    assert!(
        stderr(&output).starts_with("cordon-landlock: cannot open /nonexistent/cordon-grant"),
        "{}",
        stderr(&output)
    );
    assert!(!marker.exists(), "the command ran despite the failed grant");
}

#[test]
fn a_missing_program_is_the_commands_127_and_an_unrunnable_one_126() {
    if !landlock_usable("a_missing_program_is_the_commands_127_and_an_unrunnable_one_126") {
        return;
    }
    // The sandbox was built; the command is what could not run (as `env`).
    let output = launcher(&["--ro", "/", "--", "/nonexistent/program"]);
    assert_eq!(output.status.code(), Some(127));
    assert!(stderr(&output).starts_with("cordon-landlock: cannot execute /nonexistent/program"));
    let output = launcher(&["--ro", "/", "--", "/etc"]);
    assert_eq!(output.status.code(), Some(126), "{}", stderr(&output));
    assert!(stderr(&output).starts_with("cordon-landlock: cannot execute /etc:"));
}

/// A program that embeds the library, names no launcher and does not
/// dispatch cordon's launcher modes (the `embed` example) is never started
/// as the launcher: a probe that ran it with `__ns --probe` or `__init
/// --probe` would run its own `main` again (the benchmark started copies
/// of itself so). Its rungs that need a launcher are unusable, said so;
/// bwrap confines its run. Checked by tracing every exec of the program's
/// process tree (strace).
#[test]
fn an_embedder_that_does_not_dispatch_is_never_started_as_the_launcher() {
    let test = "an_embedder_that_does_not_dispatch_is_never_started_as_the_launcher";
    if !common::bwrap_usable(test) {
        return;
    }
    if !strace_traces(test) {
        return;
    }
    // `cargo test` builds the examples beside the binaries.
    let example = std::path::Path::new(env!("CARGO_BIN_EXE_cordon"))
        .parent()
        .unwrap()
        .join("examples/embed");
    if !example.exists() {
        // `cargo test --workspace` builds it; `cargo test --test all` does not.
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: {} is not built",
            example.display()
        );
        eprintln!(
            "SKIPPED {test}: {} is not built (`cargo build --example embed`)",
            example.display()
        );
        return;
    }
    let ws = workspace();
    let cache = workspace();
    let log = cache.path().join("execs.log");
    let output = std::process::Command::new("strace")
        .args(["-f", "-qq", "-s", "256", "-e", "trace=execve", "-o"])
        .arg(&log)
        .arg(&example)
        .arg(ws.path())
        // Nothing remembered from another run: every rung is looked at.
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", stderr(&output));
    assert!(
        stdout.contains("write outside the workspace denied: true"),
        "the run was confined: {stdout}"
    );
    let execs = std::fs::read_to_string(&log).unwrap();
    let program = format!("execve(\"{}\"", example.display());
    let starts: Vec<&str> = execs.lines().filter(|l| l.contains(&program)).collect();
    assert_eq!(starts.len(), 1, "started once, by the test: {starts:#?}");
    for mode in ["\"__ns\"", "\"__init\"", "\"__landlock\"", "\"__as\""] {
        assert!(
            !execs.contains(mode),
            "a launcher mode was started: {execs}"
        );
    }
    // The trace follows the run itself: bwrap and the command's shell.
    assert!(
        execs.lines().any(|l| l.contains("bwrap\"")) && execs.lines().any(|l| l.contains("bash\"")),
        "the run's execs are traced: {execs}"
    );
}

/// `cordon-launcher` as cargo built it beside the cordon under test, of
/// this build (`cargo test --workspace` builds it; `cargo test -p cordon`
/// does not): none, loudly (a failure under CI), when it is absent or stale.
fn built_launcher(test: &str) -> Option<std::path::PathBuf> {
    if let Some(built) = common::installed_launcher() {
        return Some(built);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: cordon-launcher beside the cordon under test is absent or of another build \
         (`cargo test --workspace` builds it)"
    );
    eprintln!("SKIPPED {test}: cordon-launcher is not built, or is stale");
    None
}

/// Whether strace can trace a child here (a container's seccomp filter may
/// refuse ptrace); a loud skip when not, a failure under CI outside the
/// restricted pod.
pub(crate) fn strace_traces(test: &str) -> bool {
    let traced = std::process::Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=none", "true"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !traced {
        let pod = std::env::var("CORDON_E2E_PROFILE").as_deref() == Ok("restricted-pod");
        assert!(
            pod || std::env::var_os("CI").is_none(),
            "{test}: strace cannot trace here (scripts/setup.sh installs it)"
        );
        eprintln!("SKIPPED {test}: strace cannot trace a child here");
    }
    traced
}

/// `dir/bin/cordon`, a copy of the cordon under test, with `launcher`
/// written beside it as `cordon-launcher` by `place`.
fn cordon_copy(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = bin.join("cordon");
    common::copy_executable(std::path::Path::new(env!("CARGO_BIN_EXE_cordon")), &copy);
    copy
}

/// `copy run --mode MODE -- COMMAND` in `ws` under `strace -f` when
/// `traced`: (output, the execs traced).
fn run_copy(
    copy: &std::path::Path,
    ws: &std::path::Path,
    mode: &str,
    command: &str,
    traced: bool,
) -> (std::process::Output, String) {
    let log = ws.join("execs.log");
    let mut run = match traced {
        true => {
            let mut strace = std::process::Command::new("strace");
            strace
                .args(["-f", "-qq", "-s", "256", "-e", "trace=execve", "-o"])
                .arg(&log)
                .arg(copy);
            strace
        }
        false => std::process::Command::new(copy),
    };
    let output = run
        .current_dir(ws)
        .args(["run", "--mode", mode, "--", command])
        .output()
        .unwrap();
    let execs = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (output, execs)
}

/// The launcher modes `execs` shows started, each with the program that
/// was: (program, mode).
fn modes_started(execs: &str) -> Vec<(String, String)> {
    let modes = ["__ns", "__init", "__landlock", "__as"];
    execs
        .lines()
        .filter_map(|line| {
            let args = line.split_once("execve(\"")?.1;
            let (program, rest) = args.split_once('"')?;
            let mode = modes
                .iter()
                .find(|mode| rest.starts_with(&format!(", [\"{program}\", \"{mode}\"")))?;
            Some((program.to_owned(), (*mode).to_owned()))
        })
        .collect()
}

/// A copy of cordon in a directory of its own, where a launcher may be
/// installed beside it, and a workspace.
struct Beside {
    dir: tempfile::TempDir,
    /// The launcher cargo built.
    built: std::path::PathBuf,
    /// `dir/bin/cordon`.
    copy: std::path::PathBuf,
    /// `dir/bin/cordon-launcher` (not made here).
    installed: std::path::PathBuf,
    ws: std::path::PathBuf,
    /// Outside the workspace.
    outside: std::path::PathBuf,
    /// Whether strace can trace here.
    traced: bool,
}

impl Beside {
    /// None (each skip loud) without a confined rung or a built launcher.
    fn set_up(test: &str) -> Option<Beside> {
        if common::confined_backends(test).is_empty() {
            return None;
        }
        let built = built_launcher(test)?;
        let traced = strace_traces(test);
        let dir = workspace();
        let copy = cordon_copy(dir.path());
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        Some(Beside {
            built,
            installed: copy.with_file_name("cordon-launcher"),
            copy,
            ws,
            outside: dir.path().join("outside"),
            traced,
            dir,
        })
    }
}

#[test]
fn cordon_starts_the_launcher_installed_beside_it_and_its_runs_stay_confined() {
    let test = "cordon_starts_the_launcher_installed_beside_it_and_its_runs_stay_confined";
    let Some(Beside {
        dir: _dir,
        built,
        copy,
        installed,
        ws,
        outside,
        traced,
    }) = Beside::set_up(test)
    else {
        return;
    };
    common::copy_executable(&built, &installed);
    let command = format!("touch {} || echo denied; touch inside", outside.display());
    let (output, execs) = run_copy(&copy, &ws, "workspace-write", &command, traced);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "denied\n");
    assert!(!outside.exists(), "the run wrote outside its workspace");
    assert!(ws.join("inside").exists(), "the workspace write landed");
    if traced {
        let started = modes_started(&execs);
        assert!(!started.is_empty(), "a launcher mode ran: {execs}");
        assert!(
            started
                .iter()
                .all(|(program, _)| *program == installed.to_string_lossy()),
            "every launcher mode from the installed launcher, none from cordon: {started:?}"
        );
    }
    // The probe names it, as the runs use it.
    let probe = std::process::Command::new(&copy)
        .args(["probe", "--json"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&probe.stdout).contains(&*installed.to_string_lossy()),
        "{}",
        String::from_utf8_lossy(&probe.stdout)
    );
}

#[test]
fn a_launcher_beside_cordon_of_another_build_or_writable_by_others_is_never_started() {
    let test = "a_launcher_beside_cordon_of_another_build_or_writable_by_others_is_never_started";
    let Some(Beside {
        dir,
        built,
        copy,
        installed,
        ws,
        outside,
        traced,
    }) = Beside::set_up(test)
    else {
        return;
    };
    let command = format!("touch {} || echo denied", outside.display());
    // Another build: a launcher that would work (it hands over to cordon)
    // but does not carry this build's identity.
    let log = dir.path().join("stale.log");
    std::fs::write(
        &installed,
        format!(
            "#!/bin/sh\necho \"$*\" >> {}\nexec {} \"$@\"\n",
            log.display(),
            copy.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&installed, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (output, _) = run_copy(&copy, &ws, "read-only", &command, false);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "denied\n",
        "{}",
        stderr(&output)
    );
    assert!(!outside.exists());
    assert!(!log.exists(), "the launcher of another build was started");
    // This build's launcher, but writable by its group: not trusted.
    std::fs::remove_file(&installed).unwrap();
    common::copy_executable(&built, &installed);
    std::fs::set_permissions(&installed, std::fs::Permissions::from_mode(0o775)).unwrap();
    let (output, execs) = run_copy(&copy, &ws, "read-only", &command, traced);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "denied\n",
        "{}",
        stderr(&output)
    );
    assert!(!outside.exists());
    if traced {
        let started = modes_started(&execs);
        assert!(
            !started.is_empty()
                && started
                    .iter()
                    .all(|(program, _)| *program == copy.to_string_lossy()),
            "cordon started its own modes, never the untrusted launcher: {started:?}"
        );
    }
}

/// Wait until the launcher `pid` holds its Landlock ruleset (an fd on
/// `anon_inode:landlock-ruleset`): its rules are made.
fn wait_for_ruleset(pid: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let held = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|to| to.to_string_lossy().contains("landlock-ruleset"))
            });
        if held {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the launcher made no ruleset in 20 s");
}

#[test]
fn a_launcher_started_ahead_runs_the_command_it_is_handed_later_confined() {
    if !landlock_usable("a_launcher_started_ahead_runs_the_command_it_is_handed_later_confined") {
        return;
    }
    let ws = workspace();
    let outside = workspace();
    let root = ws.path().to_str().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let waiting = Waiting::start("__landlock", ws.path(), &["--ro", "/", "--rw", root]);
    wait_for_ruleset(waiting.child.id());
    let planted = outside.path().join("planted");
    let script = format!(
        "pwd; echo \"$FOO\"; touch ../made; touch {} || echo denied",
        planted.display()
    );
    let output = waiting.run(
        &ws.path().join("sub"),
        &["sh", "-c", &script],
        &[("FOO", "handed later"), ("PATH", "/usr/bin:/bin")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{root}/sub\nhanded later\ndenied\n")
    );
    assert!(
        ws.path().join("made").exists(),
        "the granted root was not writable"
    );
    assert!(!planted.exists(), "the command wrote outside its grant");
}

#[test]
fn a_rule_path_replaced_while_the_launcher_waits_refuses_the_command() {
    if !landlock_usable("a_rule_path_replaced_while_the_launcher_waits_refuses_the_command") {
        return;
    }
    let ws = workspace();
    let root = ws.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let waiting = Waiting::start(
        "__landlock",
        ws.path(),
        &["--ro", "/", "--rw", root.to_str().unwrap()],
    );
    wait_for_ruleset(waiting.child.id());
    // The rule was made for the old directory; the path now names another.
    std::fs::rename(&root, ws.path().join("old")).unwrap();
    std::fs::create_dir(&root).unwrap();
    let marker = root.join("ran");
    let output = waiting.run(
        ws.path(),
        &["touch", marker.to_str().unwrap()],
        &[("PATH", "/usr/bin:/bin")],
    );
    assert_eq!(output.status.code(), Some(125), "{}", stderr(&output));
    assert!(
        stderr(&output).starts_with("cordon-landlock: ")
            && stderr(&output).contains("changed on the host"),
        "{}",
        stderr(&output)
    );
    assert!(
        !marker.exists(),
        "the command ran after its rule's path moved"
    );
    assert!(!ws.path().join("old/ran").exists());
    // The positive control: the same, nothing moved, runs.
    let waiting = Waiting::start(
        "__landlock",
        ws.path(),
        &["--ro", "/", "--rw", root.to_str().unwrap()],
    );
    let output = waiting.run(
        ws.path(),
        &["touch", marker.to_str().unwrap()],
        &[("PATH", "/usr/bin:/bin")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(marker.exists());
}
