//! The audit log, read back after a mixed session: one record per run and
//! per refusal, with the fields an operator needs, in a private file.

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;

use crate::common::{bwrap_usable, component, cordon, rule_file, workspace};

#[test]
fn a_mixed_session_leaves_one_record_per_run_and_refusal() {
    if !bwrap_usable("audit::mixed") {
        return;
    }
    let ws = workspace();
    let logs = workspace();
    let log = logs.path().join("audit.jsonl");
    let config = logs.path().join("cordon.toml");
    std::fs::write(
        &config,
        format!(
            "audit_log = {:?}\nmax_network = \"full\"\n",
            log.to_str().unwrap()
        ),
    )
    .unwrap();
    let rules = component("rules-policy.wasm");
    let run = |extra: &[&str], command: &str| -> i32 {
        cordon()
            .current_dir(ws.path())
            .args(["run", "--config", config.to_str().unwrap()])
            .args(["--policy", rules.to_str().unwrap()])
            .args(["--settings", rule_file().to_str().unwrap()])
            .args(extra)
            .arg("--")
            .arg(command)
            .output()
            .unwrap()
            .status
            .code()
            .unwrap_or(-1)
    };
    assert_eq!(run(&[], "echo allowed"), 0);
    assert_eq!(run(&[], "touch /etc/cordon-audit-probe"), 1);
    assert_eq!(run(&[], "curl https://example.com"), 77);
    assert_eq!(run(&[], "git push origin main"), 75);
    assert_eq!(run(&["--timeout-ms", "300"], "sleep 5"), 124);
    assert!(!std::path::Path::new("/etc/cordon-audit-probe").exists());

    let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the audit log must be private");
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert_eq!(records.len(), 5, "{records:#?}");
    for record in &records {
        for field in [
            "time", "event", "session", "peer", "command", "decision", "policy", "timedOut",
            "denied",
        ] {
            assert!(record.get(field).is_some(), "{field} missing: {record}");
        }
        assert_eq!(record["peer"], "cli");
        assert_eq!(record["policy"]["name"], "rules-policy");
        assert!(
            record["policy"]["digest"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
        assert!(record["policy"]["version"].is_string());
    }
    let [allowed, denied, refused, asked, timed_out] = records.as_slice() else {
        unreachable!()
    };
    assert_eq!(
        (
            &allowed["event"],
            &allowed["decision"],
            &allowed["exitCode"],
            &allowed["denied"]
        ),
        (&"run".into(), &"allow".into(), &0.into(), &false.into()),
        "{allowed}"
    );
    assert_eq!(allowed["grant"]["mode"], "read-only");
    assert!(allowed["backend"].is_string(), "{allowed}");
    assert_eq!(allowed["enforcement"], "full");
    assert_eq!(
        (&denied["exitCode"], &denied["denied"]),
        (&1.into(), &true.into()),
        "{denied}"
    );
    assert_eq!(
        (&refused["event"], &refused["decision"], &refused["code"]),
        (&"refusal".into(), &"deny".into(), &"POLICY_DENIED".into()),
        "{refused}"
    );
    assert!(
        refused["reason"].as_str().unwrap().contains("no downloads"),
        "{refused}"
    );
    assert!(refused.get("exitCode").is_none());
    assert_eq!(
        (&asked["decision"], &asked["code"]),
        (&"ask".into(), &"APPROVAL_REQUIRED".into())
    );
    assert!(
        asked["grant"]["network"]["allow"].is_array(),
        "the proposed grant: {asked}"
    );
    assert_eq!(
        (&timed_out["timedOut"], &timed_out["command"]),
        (&true.into(), &"sleep 5".into())
    );
    assert!(timed_out["signal"].is_number(), "{timed_out}");
}

#[test]
fn a_background_task_is_recorded_when_it_ends_and_a_shared_log_is_refused() {
    let logs = workspace();
    let log = logs.path().join("audit.jsonl");
    // Readable by others: refused at start, naming the fix.
    std::fs::write(&log, "").unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = logs.path().join("cordon.toml");
    std::fs::write(
        &config,
        format!("audit_log = {:?}\n", log.to_str().unwrap()),
    )
    .unwrap();
    let output = cordon()
        .current_dir(logs.path())
        .args([
            "run",
            "--mode",
            "danger-full-access",
            "--max-mode",
            "danger-full-access",
        ])
        .args(["--config", config.to_str().unwrap(), "--", "true"])
        .output()
        .unwrap();
    assert_ne!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stderr).contains("chmod 600"));

    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o600)).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut deployment = cordon::Deployment::in_dir(logs.path());
        deployment.max_mode = cordon::SandboxMode::DangerFullAccess;
        let host = cordon::Host::builder()
            .deployment(deployment)
            .audit_log(log.clone())
            .build()
            .unwrap();
        let session = host.session().with_peer("test-client");
        let mut request = cordon::ExecRequest::new("exit 3");
        request.policy = Some(cordon::SandboxPolicy::new(
            cordon::SandboxMode::DangerFullAccess,
            logs.path().to_path_buf(),
        ));
        let task = session.start(request).await.unwrap();
        task.wait(None).await;
    });
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["event"], "task");
    assert_eq!(records[0]["peer"], "test-client");
    assert_eq!(records[0]["exitCode"], 3);
    assert!(
        records[0].get("backend").is_none(),
        "unconfined: no backend"
    );
}
