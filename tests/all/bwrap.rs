//! The bwrap suite: real `cordon run`, real bubblewrap, the real embedded
//! `bash-sandbox` component. Profiles and hardening of SPEC.md §6.

use crate::common;

use common::{bwrap_usable, host_processes_with, run_json, sandbox, workspace};
use serde_json::json;

macro_rules! require_bwrap {
    () => {
        if !bwrap_usable(module_path!()) {
            return;
        }
    };
}

#[test]
fn read_only_denies_a_workspace_write_and_says_so() {
    require_bwrap!();
    let ws = workspace();
    let target = ws.path().join("denied.txt");
    let (code, result) = run_json(ws.path(), &[], &format!("echo hi > {}", target.display()));
    assert_ne!(code, 0);
    assert_ne!(result["exitCode"], json!(0));
    assert_eq!(
        sandbox(&result),
        &json!({"mode": "read-only", "denied": true, "enforcement": "full"})
    );
    assert!(!target.exists(), "the denied write landed on the host");
}

#[test]
fn read_only_keeps_dev_null_writable() {
    require_bwrap!();
    let ws = workspace();
    let (code, result) = run_json(ws.path(), &[], "ls / > /dev/null && echo ok");
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "ok\n");
    assert_eq!(
        sandbox(&result),
        &json!({"mode": "read-only", "denied": false, "enforcement": "full"})
    );
}

#[test]
fn workspace_write_allows_its_root_only() {
    require_bwrap!();
    common::assert_workspace_write_allows_its_root_only(&["--backend", "bwrap"], "full");
}

#[test]
fn workspace_write_tmp_is_ephemeral() {
    require_bwrap!();
    let ws = workspace();
    let ws_arg = ws.path().to_str().unwrap();
    let name = format!("/tmp/cordon-e2e-{}-{}", std::process::id(), line!());
    let (code, result) = run_json(
        ws.path(),
        &["--mode", "workspace-write", "--workspace", ws_arg],
        &format!("echo scratch > {name} && cat {name}"),
    );
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "scratch\n");
    assert!(
        !std::path::Path::new(&name).exists(),
        "{name} leaked onto the host /tmp"
    );
}

#[test]
fn hardening_holds_even_for_root() {
    require_bwrap!();
    let ws = workspace();
    let target = ws.path().join("after-remount.txt");
    // A remount of the read-only root as writable must fail, and the write
    // after it must still be denied.
    let (code, result) = run_json(
        ws.path(),
        &[],
        &format!(
            "mount -o remount,bind,rw / 2>&1; mount -o remount,rw {ws} 2>&1; echo x > {t}",
            ws = ws.path().display(),
            t = target.display()
        ),
    );
    assert_ne!(code, 0, "{result}");
    assert!(
        !target.exists(),
        "a remount made the read-only bind writable"
    );
    assert_eq!(sandbox(&result)["denied"], json!(true));

    // No capabilities at all.
    let (_, result) = run_json(ws.path(), &[], "grep CapEff /proc/self/status");
    let caps = result["stdout"]["text"].as_str().unwrap();
    assert!(caps.trim().ends_with("0000000000000000"), "{caps}");
}

#[test]
fn the_command_sees_only_its_own_processes() {
    require_bwrap!();
    let ws = workspace();
    let (code, result) = run_json(
        ws.path(),
        &[],
        "cat /proc/1/comm; ls /proc | grep -c '^[0-9][0-9]*$'",
    );
    assert_eq!(code, 0, "{result}");
    let text = result["stdout"]["text"].as_str().unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("bwrap"),
        "pid 1 is the sandbox's own init"
    );
    let visible: u32 = lines.next().unwrap().parse().unwrap();
    assert!(visible <= 6, "the sandbox sees {visible} processes: {text}");
}

#[test]
fn a_daemon_left_behind_dies_with_the_run() {
    require_bwrap!();
    let ws = workspace();
    let marker = format!("31.{}{}", std::process::id(), line!());
    let (code, result) = run_json(
        ws.path(),
        &[],
        &format!("setsid sleep {marker} > /dev/null 2>&1 < /dev/null & echo started"),
    );
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "started\n");
    let survivors = host_processes_with(&format!("sleep {marker}"));
    assert!(
        survivors.is_empty(),
        "daemon outlived the run: pids {survivors:?}"
    );
}

#[test]
fn a_spoofed_bwrap_line_is_an_ordinary_failure() {
    require_bwrap!();
    let ws = workspace();
    // bwrap's status fd says the command ran, so its own "bwrap: …" line
    // is only output, not a sandbox failure.
    let (code, result) = run_json(
        ws.path(),
        &["--backend", "bwrap"],
        "echo 'bwrap: Creating new namespace failed' >&2; exit 1",
    );
    assert_eq!(code, 1, "{result}");
    assert_eq!(
        sandbox(&result),
        &json!({"mode": "read-only", "denied": false, "enforcement": "full"})
    );
}

#[test]
fn a_runner_that_fails_without_its_usual_text_is_still_sandbox_unavailable() {
    // A bwrap stand-in that passes the probe but fails every real run with
    // a message cordon has never seen: only the out-of-band status (no
    // "exit-code" record) can tell, and it must.
    let ws = workspace();
    let config = common::fake_bwrap(
        ws.path(),
        "#!/bin/sh\ncase \"$*\" in *'-- true') exit 0;; esac\necho 'namespace setup went sideways' >&2\nexit 1\n",
    );
    let marker = ws.path().join("ran");
    let output = common::cordon()
        .current_dir(ws.path())
        .arg("run")
        .arg("--config")
        .arg(&config)
        .args(["--backend", "bwrap", "--"])
        .arg(format!("touch {}", marker.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("Runner failure: bwrap exited (code 1) before starting the command"),
        "{stderr}"
    );
    assert!(!marker.exists());
}

#[test]
fn nested_children_stay_confined() {
    require_bwrap!();
    let ws = workspace();
    let target = ws.path().join("nested.txt");
    let (code, result) = run_json(
        ws.path(),
        &["--backend", "bwrap"],
        &format!("bash -c \"sh -c 'echo deep > {}'\"", target.display()),
    );
    assert_ne!(code, 0);
    assert_eq!(sandbox(&result)["denied"], json!(true), "{result}");
    assert!(!target.exists());
}
