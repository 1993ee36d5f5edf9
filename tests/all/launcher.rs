//! The Landlock launcher's command-line contract (`cordon __landlock`):
//! every failure of its own exits 125 with the `cordon-landlock: ` prefix;
//! the child's exit status passes through untouched.

use crate::common;

use common::{cordon, landlock_usable, workspace};

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
    let strace_found = std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success());
    if !strace_found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: strace is not installed (scripts/setup.sh installs it)"
        );
        eprintln!("SKIPPED {test}: strace is not installed");
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
