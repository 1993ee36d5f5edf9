//! `cordon doctor`: every check an operator needs, a fix for each problem,
//! and a failed check that does not hide the others.

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;

use crate::common::{bwrap_usable, cordon, garbage_executable, workspace};

fn doctor(dir: &std::path::Path, args: &[&str]) -> (i32, Value) {
    let output = cordon()
        .current_dir(dir)
        .arg("doctor")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code().unwrap_or(-1), report)
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {report:#}"))
}

#[test]
fn a_healthy_host_passes_every_check_and_names_its_policy_and_rungs() {
    if !bwrap_usable("doctor::healthy") {
        return;
    }
    let ws = workspace();
    let (code, report) = doctor(ws.path(), &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(check(&report, "sandbox")["status"], "ok");
    let policy = check(&report, "policy");
    assert!(
        policy["detail"].as_str().unwrap().contains("bash-sandbox"),
        "{policy}"
    );
    assert!(
        policy["detail"].as_str().unwrap().contains("sha256:"),
        "{policy}"
    );
    // Every rung is looked at, not only the first usable one.
    assert_eq!(check(&report, "rung bwrap")["status"], "ok", "{report:#}");
    for name in [
        "containment",
        "limits",
        "component cache",
        "user namespaces",
    ] {
        check(&report, name);
    }
}

#[test]
fn each_problem_is_a_finding_with_a_fix_and_none_hides_the_others() {
    let ws = workspace();
    let garbage = garbage_executable(ws.path());
    let log = ws.path().join("audit.jsonl");
    std::fs::write(&log, "").unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = ws.path().join("cordon.toml");
    std::fs::write(
        &config,
        format!(
            "audit_log = {:?}\nbwrap_path = {:?}\n",
            log.to_str().unwrap(),
            ws.path().join("no-such-bwrap").to_str().unwrap()
        ),
    )
    .unwrap();
    let (code, report) = doctor(
        ws.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--policy",
            garbage.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{report:#}");
    let policy = check(&report, "policy");
    assert_eq!(policy["status"], "fail");
    assert!(
        policy["detail"].as_str().unwrap().contains("POLICY_FAILED"),
        "{policy}"
    );
    assert!(
        policy["fix"]
            .as_str()
            .unwrap()
            .contains("cordon policy check")
    );
    let audit = check(&report, "audit log");
    assert_eq!(audit["status"], "fail");
    assert!(
        audit["fix"].as_str().unwrap().contains("chmod 600"),
        "{audit}"
    );
    let bwrap = check(&report, "rung bwrap");
    assert_eq!(bwrap["status"], "warn", "{bwrap}");
    assert!(bwrap["fix"].as_str().unwrap().contains("bubblewrap"));
    // The sandbox is still examined (with the embedded default).
    check(&report, "sandbox");
    check(&report, "containment");
    // The text form says the same, a fix under each problem.
    let text = cordon()
        .current_dir(ws.path())
        .args([
            "doctor",
            "--config",
            config.to_str().unwrap(),
            "--policy",
            garbage.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("FAIL policy") && text.contains("fix: "),
        "{text}"
    );
}

/// In the restricted-pod profile (`scripts/profiles.sh`: non-root, the
/// runtime-default seccomp rules) `doctor` says what a run there does:
/// Landlock confines, user namespaces were tried and refused (with the fix
/// a pod can take), and neither namespace rung is told to install
/// bubblewrap; a real run is confined as it says.
#[test]
fn in_a_restricted_pod_doctor_says_what_a_run_does() {
    if crate::common::profile() != "restricted-pod" {
        eprintln!(
            "SKIPPED in_a_restricted_pod_doctor_says_what_a_run_does: only in the \
             restricted-pod profile (scripts/profiles.sh)"
        );
        return;
    }
    let ws = workspace();
    let (_, report) = doctor(ws.path(), &[]);
    let sandbox = check(&report, "sandbox");
    assert!(
        sandbox["detail"].as_str().unwrap().starts_with("landlock"),
        "{sandbox}"
    );
    let userns = check(&report, "user namespaces");
    assert_eq!(userns["status"], "warn", "{userns}");
    assert!(
        userns["detail"]
            .as_str()
            .unwrap()
            .contains("this user cannot make one"),
        "{userns}"
    );
    for rung in ["rung namespaces", "rung bwrap", "user namespaces"] {
        let fix = check(&report, rung)["fix"].as_str().unwrap().to_owned();
        assert!(
            fix.contains("a seccomp profile that permits unshare"),
            "{rung}: {fix}"
        );
        assert!(!fix.contains("install bubblewrap"), "{rung}: {fix}");
    }
    let landlock = check(&report, "rung landlock");
    assert_eq!(landlock["status"], "ok");
    assert!(
        landlock["detail"]
            .as_str()
            .unwrap()
            .contains("writes: supervised in the roots that hold protected paths"),
        "{landlock}"
    );
    assert!(
        !report.to_string().contains("landlock writes"),
        "no warning where writes are supervised: {report}"
    );
    // What it says is what a run does: confined by Landlock, nothing written.
    let marker = ws.path().join("written");
    let (code, result) =
        crate::common::run_json(ws.path(), &[], &format!("touch {}", marker.display()));
    assert_ne!(code, 0, "{result}");
    assert_eq!(result["sandbox"]["denied"], true, "{result}");
    assert!(!marker.exists(), "a read-only run wrote the workspace");
    // …and in workspace-write the workspace takes the write, .git does not,
    // and the run is full: the protected paths hold.
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    let args = crate::common::workspace_write(&[], ws.path().to_str().unwrap());
    let (code, result) = crate::common::run_json(
        ws.path(),
        &args,
        "touch written && ! touch .git/config 2>/dev/null",
    );
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["sandbox"]["enforcement"], "full", "{result}");
    assert!(marker.exists() && !ws.path().join(".git/config").exists());
}
