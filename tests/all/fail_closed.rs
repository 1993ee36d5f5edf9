//! Fail closed (SPEC.md §8): every path where cordon cannot confine a run
//! refuses it — foreground as `SANDBOX_UNAVAILABLE`, background as a killed
//! task with `runner-failed` — and in each the command never ran (its
//! marker file is absent). Path 6 (a component returning a launch the host
//! did not issue) is the policy suite's.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use common::{cordon, workspace};
use cordon::config::Config;
use cordon::{ExecRequest, SandboxMode, SandboxPolicy, TaskStatus};

/// A script in `dir` (outside /tmp) with `body`, executable or not.
fn script(dir: &Path, name: &str, body: &str, executable: bool) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    let mode = if executable { 0o755 } else { 0o644 };
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// A config file using `runner` with `signature`.
fn runner_config(dir: &Path, runner: &Path, signature: &str) -> PathBuf {
    let path = dir.join("cordon.toml");
    std::fs::write(
        &path,
        format!(
            "runner_command = [{runner:?}]\nrunner_failure_signatures = [{signature:?}]\n",
            runner = runner.to_str().unwrap()
        ),
    )
    .unwrap();
    path
}

/// A config in `dir` whose `bwrap_path` names no bwrap.
fn no_bwrap(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("no-bwrap.toml");
    std::fs::write(&path, "bwrap_path = \"/nonexistent/cordon-test/bwrap\"\n").unwrap();
    path
}

/// `cordon run` with `args`, touching `marker` if the command ever runs.
fn run_touching(dir: &Path, args: &[&str], marker: &Path) -> Output {
    cordon()
        .current_dir(dir)
        .arg("run")
        .args(args)
        .arg("--")
        .arg(format!("touch {}", marker.display()))
        .output()
        .unwrap()
}

fn assert_refused(output: &Output, detail: Option<&str>, marker: &Path) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("refusing to run the command unconfined"),
        "{stderr}"
    );
    if let Some(detail) = detail {
        assert!(
            stderr.contains(&format!("Runner failure: {detail}")),
            "{stderr}"
        );
    }
    assert!(!marker.exists(), "the command ran");
}

/// The same runner through the library, as a background task.
async fn background_runner_failed(config: &Path, dir: &Path, marker: &Path) {
    let host = Config::load(config)
        .unwrap()
        .host_builder(dir)
        .build()
        .unwrap();
    let task = host
        .start(ExecRequest::new(format!("touch {}", marker.display())))
        .await
        .unwrap();
    let done = task.wait(Some(Duration::from_secs(10))).await;
    assert_eq!(done.status, TaskStatus::Killed);
    let facts = done.sandbox.expect("stamped");
    assert!(facts.runner_failed);
    assert!(!facts.denied);
    assert!(!marker.exists(), "the background command ran");
}

#[test]
fn path_1_no_usable_runner() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    // bwrap pinned and not installed where the config says it is. (A
    // PATH without bash is no missing runner: the sandbox is built and the
    // command is what is not found, exit 127 — executors.rs.)
    let output = cordon()
        .current_dir(ws.path())
        .args(["run", "--config"])
        .arg(no_bwrap(ws.path()))
        .args(["--backend", "bwrap", "--"])
        .arg(format!("/usr/bin/touch {}", marker.display()))
        .output()
        .unwrap();
    assert_refused(&output, None, &marker);
    // Landlock pinned with a launcher that fails its probe.
    let config = ws.path().join("cordon.toml");
    std::fs::write(
        &config,
        "backend = \"landlock\"\nlandlock_launcher = \"/bin/false\"\n",
    )
    .unwrap();
    let output = run_touching(ws.path(), &["--config", config.to_str().unwrap()], &marker);
    assert_refused(&output, None, &marker);
}

#[tokio::test]
async fn path_2_runner_binary_missing() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    let config = runner_config(
        ws.path(),
        Path::new("/nonexistent/cordon-runner"),
        "runner: ",
    );
    let output = run_touching(ws.path(), &["--config", config.to_str().unwrap()], &marker);
    assert_refused(&output, Some("/nonexistent/cordon-runner: "), &marker);
    background_runner_failed(&config, ws.path(), &marker).await;
}

#[tokio::test]
async fn path_2_runner_not_executable() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    let runner = script(ws.path(), "runner.sh", "exec \"$@\"", false);
    let config = runner_config(ws.path(), &runner, "runner: ");
    let output = run_touching(ws.path(), &["--config", config.to_str().unwrap()], &marker);
    assert_refused(&output, Some(runner.to_str().unwrap()), &marker);
    background_runner_failed(&config, ws.path(), &marker).await;
}

#[tokio::test]
async fn path_3_runner_starts_and_refuses() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    let runner = script(
        ws.path(),
        "runner.sh",
        "echo 'myrunner: refusing: Permission denied' >&2; exit 1",
        true,
    );
    let config = runner_config(ws.path(), &runner, "myrunner: ");
    let output = run_touching(ws.path(), &["--config", config.to_str().unwrap()], &marker);
    // A runner line with "Permission denied" is a runner failure, not a denial.
    assert_refused(
        &output,
        Some("myrunner: refusing: Permission denied"),
        &marker,
    );
    background_runner_failed(&config, ws.path(), &marker).await;
}

#[tokio::test]
async fn path_4_kernel_without_landlock() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    // The launcher on a kernel without Landlock: exit 125 with its line.
    let runner = script(
        ws.path(),
        "landlock.sh",
        "echo 'cordon-landlock: this kernel does not enforce Landlock' >&2; exit 125",
        true,
    );
    let config = runner_config(ws.path(), &runner, "cordon-landlock: ");
    let output = run_touching(ws.path(), &["--config", config.to_str().unwrap()], &marker);
    assert_refused(
        &output,
        Some("cordon-landlock: this kernel does not enforce Landlock"),
        &marker,
    );
    background_runner_failed(&config, ws.path(), &marker).await;
}

#[tokio::test]
async fn path_5_an_escalation_to_a_confined_mode_still_fails_closed() {
    let ws = workspace();
    let marker = ws.path().join("ran");
    let output = cordon()
        .current_dir(ws.path())
        .args(["run", "--config"])
        .arg(no_bwrap(ws.path()))
        .args(["--backend", "bwrap", "--mode", "workspace-write", "--"])
        .arg(format!("/usr/bin/touch {}", marker.display()))
        .output()
        .unwrap();
    assert_refused(&output, None, &marker);

    // Through the library: the request's own (escalated) policy.
    let runner = Path::new("/nonexistent/cordon-runner");
    let config = runner_config(ws.path(), runner, "runner: ");
    let host = Config::load(&config)
        .unwrap()
        .host_builder(ws.path())
        .build()
        .unwrap();
    let request = ExecRequest::new(format!("touch {}", marker.display()))
        .with_policy(SandboxPolicy::new(SandboxMode::WorkspaceWrite, ws.path()));
    let err = host.run(request).await.unwrap_err();
    assert_eq!(err.code(), "SANDBOX_UNAVAILABLE");
    assert!(!marker.exists());
}
