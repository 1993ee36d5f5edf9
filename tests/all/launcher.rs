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
