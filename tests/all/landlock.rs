//! The Landlock suite, with bwrap forced off (`--backend landlock`): real
//! `cordon run`, the real launcher mode of the same binary, the real
//! embedded component. Profiles of SPEC.md §6.

use crate::common;

use common::{landlock_usable, run_json, sandbox, workspace};
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
        sandbox(&result),
        &json!({"mode": "read-only", "denied": true, "enforcement": "full"})
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
    common::assert_workspace_write_allows_its_root_only(&["--backend", "landlock"], "partial");
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
        sandbox(&result),
        &json!({"mode": "read-only", "denied": false, "enforcement": "full"})
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
