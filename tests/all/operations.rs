//! What an operator gets from the binary itself: `--version` with the
//! policy worlds, completions and manual pages from the CLI definition,
//! and logs that go to stderr only.

use serde_json::Value;

use crate::common::{cordon, workspace};

#[test]
fn version_names_the_policy_worlds() {
    let out = cordon().arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.starts_with(concat!("cordon ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    for world in cordon::policy::supported_worlds() {
        assert!(text.contains(world), "{world} missing: {text}");
    }
}

#[test]
fn completions_and_manual_pages_come_from_the_cli_definition() {
    for shell in ["bash", "zsh", "fish"] {
        let out = cordon().args(["completions", shell]).output().unwrap();
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{shell}");
        // Every subcommand is completed, the new ones too.
        for sub in ["run", "serve", "doctor", "policy"] {
            assert!(script.contains(sub), "{shell} lacks {sub}");
        }
    }
    let bad = cordon().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let page = cordon().arg("man").output().unwrap();
    let page = String::from_utf8_lossy(&page.stdout);
    assert!(page.contains(".TH cordon 1"), "{page}");
    let dir = tempfile::tempdir().unwrap();
    let out = cordon()
        .args(["man", "--out-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    for page in [
        "cordon.1",
        "cordon-run.1",
        "cordon-policy-push.1",
        "cordon-doctor.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
}

#[test]
fn logs_go_to_stderr_and_never_into_the_result() {
    let ws = workspace();
    let out = cordon()
        .current_dir(ws.path())
        .args([
            "--log-level",
            "debug",
            "run",
            "--json",
            "--mode",
            "danger-full-access",
        ])
        .args(["--max-mode", "danger-full-access", "--", "echo out"])
        .output()
        .unwrap();
    let result: Value = serde_json::from_slice(&out.stdout).expect("stdout is the result alone");
    assert_eq!(result["stdout"]["text"], "out\n");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("policy component loaded"), "{log}");
    assert!(log.contains("sha256:"), "the digest is logged: {log}");
    // Off by default.
    let quiet = cordon()
        .current_dir(ws.path())
        .env_remove("RUST_LOG")
        .args([
            "run",
            "--mode",
            "danger-full-access",
            "--max-mode",
            "danger-full-access",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(
        quiet.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    let bad = cordon()
        .args(["--log-level", "loud[", "run", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(78));
}
