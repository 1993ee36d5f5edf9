//! Denials named exactly (issue 37): where the host reads the kernel's
//! audit records (root, audit on, Landlock ABI 7), a Landlock run's facts
//! carry what the kernel refused — the rights and the path — and
//! `denied` is true whatever the exit code; elsewhere the facts say the
//! evidence is the text. Every rung is tried; the host is checked after.

use crate::common;

use std::path::Path;

use common::{run_json, workspace};
use serde_json::Value;

/// Whether this run must have the kernel's evidence on the Landlock rung:
/// CI as root, where `scripts/test.sh` turns the kernel's audit on.
fn kernel_evidence_required() -> bool {
    std::env::var("CORDON_E2E_REQUIRE_KERNEL_DENIALS").is_ok_and(|v| v == "1")
        && common::profile() == "root"
}

/// `touch` of a new file in `/etc`, then carrying on: exit 0.
fn carries_on(root: &Path, backend: &[&str], marker: &Path) -> (i32, Value) {
    let mut args = backend.to_vec();
    args.extend(["--mode", "workspace-write", "--workspace"]);
    args.push(root.to_str().unwrap());
    let command = format!("touch {}; echo done", marker.display());
    run_json(root, &args, &command)
}

#[test]
fn a_denial_the_kernel_saw_is_named_and_kept_whatever_the_exit() {
    let marker = Path::new("/etc").join(format!("cordon-denial-{}", std::process::id()));
    for (backend, _) in common::confined_backends("a_denial_the_kernel_saw_is_named") {
        let ws = workspace();
        let root = ws.path();
        let (code, result) = carries_on(root, backend, &marker);
        assert!(!marker.exists(), "{backend:?}: the host's /etc was written");
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert_eq!(result["exitCode"], 0, "{backend:?}: {result}");
        assert_eq!(result["stdout"]["text"], "done\n", "{backend:?}: {result}");
        let sandbox = &result["sandbox"];
        let landlock = backend.contains(&"landlock");
        match sandbox["evidence"].as_str() {
            Some("kernel") => {
                assert!(
                    landlock,
                    "{backend:?}: only Landlock's domain is read: {sandbox}"
                );
                assert_eq!(sandbox["denied"], true, "{backend:?}: {sandbox}");
                let denials = sandbox["denials"].as_array().expect("a list");
                assert!(
                    denials.iter().any(|d| d["path"] == "/etc"
                        && d["blockers"]
                            .as_array()
                            .unwrap()
                            .contains(&"fs.make_reg".into())
                        && d["by"] == "landlock"),
                    "{backend:?}: {sandbox}"
                );
                // The positive control: a run that is refused nothing has
                // the kernel's word for it too.
                let (_, clean) = run_json(
                    root,
                    &[backend, &["--mode", "workspace-write"]].concat(),
                    "echo fine > ok.txt",
                );
                assert!(root.join("ok.txt").exists(), "{backend:?}: {clean}");
                assert_eq!(clean["sandbox"]["evidence"], "kernel", "{clean}");
                assert_eq!(clean["sandbox"]["denied"], false, "{clean}");
                assert_eq!(clean["sandbox"].get("denials"), None, "{clean}");
            }
            Some("text") => {
                assert!(
                    !(landlock && kernel_evidence_required()),
                    "{backend:?}: the kernel's audit is on here (CI, root) but the run's \
                     evidence is the text: {sandbox}"
                );
                assert_eq!(sandbox.get("denials"), None, "{backend:?}: {sandbox}");
                if landlock {
                    eprintln!(
                        "SKIPPED the kernel's denial records ({}): this host cannot read \
                         them (root with the kernel's audit on: scripts/test.sh turns it on \
                         under CI)",
                        common::profile()
                    );
                }
            }
            other => panic!("{backend:?}: evidence {other:?}: {sandbox}"),
        }
    }
}

#[test]
fn the_probe_says_how_denials_are_known() {
    if !common::landlock_usable("the_probe_says_how_denials_are_known") {
        return;
    }
    let output = common::cordon()
        .args(["probe", "--json", "--backend", "landlock"])
        .output()
        .expect("spawn cordon probe");
    let text = String::from_utf8_lossy(&output.stdout);
    let named = text.contains("denials: named by the kernel");
    let inferred = text.contains("denials: inferred from text (");
    assert!(named || inferred, "{text}");
    if kernel_evidence_required() {
        assert!(named, "{text}");
    }
    if common::profile() != "root" {
        assert!(inferred, "{text}");
    }
    // The operator may keep the kernel out of it: the runs then say so.
    let ws = workspace();
    let config = ws.path().join("cordon.toml");
    std::fs::write(&config, "kernel_denials = false\n").unwrap();
    let output = common::cordon()
        .args(["probe", "--json", "--backend", "landlock", "--config"])
        .arg(&config)
        .output()
        .expect("spawn cordon probe");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("denials: inferred from text (kernel_denials = false)"),
        "{text}"
    );
    let marker = Path::new("/etc").join(format!("cordon-denial-off-{}", std::process::id()));
    let config = config.to_str().unwrap();
    let (code, result) = carries_on(
        ws.path(),
        &["--backend", "landlock", "--config", config],
        &marker,
    );
    assert_eq!(code, 0, "{result}");
    assert!(!marker.exists(), "the host's /etc was written");
    assert_eq!(result["sandbox"]["evidence"], "text", "{result}");
}
