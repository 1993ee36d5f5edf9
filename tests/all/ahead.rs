//! `cordon run` starts its runner ahead of its plan (`run/ahead.rs`): the
//! namespace runner builds the sandbox for the request's grant while the
//! host loads the policy component, and the run hands it the command when
//! its own checked launch has the same runner. These tests watch the
//! runner's starts through a logging launcher and check the host after.

use crate::common;

use std::path::{Path, PathBuf};

use common::{component, cordon, namespaces_usable, workspace};

/// A launcher that logs its arguments and runs a copy of cordon, named
/// by a config in `dir` (a configured launcher is probed up front: the
/// probe's start is logged too). Returns (config, log).
fn logged_launcher(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("launcher.log");
    let launcher = common::wrapped_launcher(dir, &format!("echo \"$*\" >> {}", log.display()));
    let config = dir.join("cordon.toml");
    std::fs::write(
        &config,
        format!("landlock_launcher = \"{}\"\n", launcher.display()),
    )
    .unwrap();
    (config, log)
}

/// The namespace runner's starts in `log`: (started ahead, started with
/// its command), the probe's aside.
fn runner_starts(log: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let ahead = text
        .lines()
        .filter(|l| l.starts_with("__ns") && l.contains("--await-fd"))
        .count();
    let fresh = text
        .lines()
        .filter(|l| l.starts_with("__ns") && l.contains("--env-fd"))
        .count();
    (ahead, fresh)
}

/// No process is left whose arguments name `dir`.
fn nothing_left_naming(dir: &Path) -> bool {
    let dir = dir.to_str().unwrap();
    std::fs::read_dir("/proc").unwrap().flatten().all(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .map(|cmdline| !String::from_utf8_lossy(&cmdline).contains(dir))
            .unwrap_or(true)
    })
}

#[test]
fn the_cli_hands_its_command_to_the_runner_it_started_ahead_and_it_is_confined() {
    if !namespaces_usable(
        "the_cli_hands_its_command_to_the_runner_it_started_ahead_and_it_is_confined",
    ) {
        return;
    }
    let ws = workspace();
    let (config, log) = logged_launcher(ws.path());
    let outside = ws.path().join("outside-x");
    let output = cordon()
        .current_dir(ws.path())
        .args([
            "run",
            "--config",
            config.to_str().unwrap(),
            "--mode",
            "read-only",
            "--",
        ])
        .arg(format!(
            "echo out; touch {} || echo denied; echo \"$CORDON_AHEAD_TEST\"",
            outside.display()
        ))
        .env("CORDON_AHEAD_TEST", "kept")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "out\ndenied\n\n");
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(!outside.exists(), "the read-only run wrote on the host");
    assert_eq!(
        runner_starts(&log),
        (1, 0),
        "one runner, started ahead, and none started with the command: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(nothing_left_naming(ws.path()));
}

#[test]
fn a_runner_started_for_another_grant_is_ended_and_the_run_starts_its_own() {
    if !namespaces_usable("a_runner_started_for_another_grant_is_ended_and_the_run_starts_its_own")
    {
        return;
    }
    let ws = workspace();
    let (config, log) = logged_launcher(ws.path());
    // Every protected default present: a grant that would need a
    // placeholder gets no runner ahead.
    for name in cordon::model::PROTECTED_DEFAULTS {
        let path = ws.path().join(name);
        let prefix = format!("{name}/");
        match cordon::model::PROTECTED_DEFAULTS
            .iter()
            .any(|other| other.starts_with(&prefix))
        {
            true => std::fs::create_dir_all(&path).unwrap(),
            false => {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                if !path.exists() {
                    std::fs::write(&path, "").unwrap();
                }
            }
        }
    }
    // …and git's `commondir`, which only a linked worktree's gitdir has
    // (a `.` names the gitdir itself).
    std::fs::write(ws.path().join(".git/commondir"), ".\n").unwrap();
    // The request asks for workspace-write; the component narrows it to
    // read-only: the runner started ahead has the wrong sandbox.
    let marker = ws.path().join("written");
    let output = cordon()
        .current_dir(ws.path())
        .args(["run", "--config", config.to_str().unwrap()])
        .args([
            "--policy",
            component("hostile-policy.wasm").to_str().unwrap(),
        ])
        .args(["--mode", "workspace-write", "--"])
        .arg(format!(
            "narrow-mode 2>/dev/null; touch {} || echo read-only",
            marker.display()
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "read-only\n");
    assert!(
        !marker.exists(),
        "the run got the grant it asked for, not the narrowed one"
    );
    assert_eq!(
        runner_starts(&log),
        (1, 1),
        "the runner started ahead, then the run's own: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        nothing_left_naming(ws.path()),
        "the runner started ahead outlived the run"
    );
}
