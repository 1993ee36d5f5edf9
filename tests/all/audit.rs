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
    let mut records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert_eq!(records.len(), 6, "{records:#?}");
    let genesis = records.remove(0);
    assert_eq!(genesis["event"], "genesis", "{genesis}");
    for record in &records {
        for field in [
            "seq",
            "prev",
            "time",
            "event",
            "session",
            "peer",
            "command",
            "decision",
            "policy",
            "timedOut",
            "denied",
            "workdir",
            "started",
            "ended",
            "durationMs",
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
    // The genesis, the task's start, its end.
    assert_eq!(records.len(), 3, "{records:#?}");
    assert_eq!(records[1]["event"], "task-start");
    assert_eq!(records[1]["grant"]["mode"], "danger-full-access");
    assert_eq!(records[2]["event"], "task");
    assert_eq!(records[2]["peer"], "test-client");
    assert_eq!(records[2]["exitCode"], 3);
    assert_eq!(records[1]["started"], records[2]["started"]);
    assert!(records[2]["durationMs"].is_u64(), "{}", records[2]);
    assert!(
        records[2].get("backend").is_none(),
        "unconfined: no backend"
    );
}

/// `cordon audit verify FILE`: the outcome line and the exit code.
fn verify(log: &std::path::Path) -> (i32, String) {
    let output = cordon()
        .args(["audit", "verify"])
        .arg(log)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code().unwrap_or(-1), out)
}

/// The log holds every client's commands: no run reads it, on any rung
/// (the host checked: the run's output holds none of it), while a file
/// beside it stays readable. Its chain verifies, and a changed byte of an
/// old record or a removed record is named.
#[test]
fn the_log_is_hidden_from_runs_and_tampering_is_found() {
    let ws = workspace();
    let logs = workspace();
    let log = logs.path().join("audit.jsonl");
    let beside = logs.path().join("beside.txt");
    std::fs::write(&beside, "readable\n").unwrap();
    let config = logs.path().join("cordon.toml");
    std::fs::write(
        &config,
        format!("audit_log = {:?}\n", log.to_str().unwrap()),
    )
    .unwrap();
    for (backend, _) in crate::common::confined_backends("the_log_is_hidden_from_runs") {
        let line = format!("cat {} {}", log.display(), beside.display());
        let output = cordon()
            .current_dir(ws.path())
            .args(["run", "--json", "--config", config.to_str().unwrap()])
            .args(backend)
            .args(["--", &line])
            .output()
            .unwrap();
        let result = crate::common::parse(&output);
        let seen = result["stdout"]["text"].as_str().unwrap_or_default();
        assert!(seen.contains("readable"), "{backend:?}: {result}");
        assert!(
            !seen.contains("genesis") && !seen.contains("\"seq\""),
            "{backend:?}: {seen}"
        );
    }
    // Two more records, whatever rungs ran above.
    for _ in 0..2 {
        cordon()
            .current_dir(ws.path())
            .args(["run", "--config", config.to_str().unwrap(), "--", "true"])
            .output()
            .unwrap();
    }
    let (code, out) = verify(&log);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("intact: "), "{out}");

    let text = std::fs::read(&log).unwrap();
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert!(lines.len() >= 3, "{}", String::from_utf8_lossy(&text));
    // One byte of record 1 changed: record 2 is where the chain breaks.
    let mut changed = text.clone();
    let time = lines[1]
        .windows(8)
        .position(|w| w == b"\"time\":\"")
        .unwrap();
    let at = lines[0].len() + 1 + time + 8;
    changed[at] = if changed[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&log, &changed).unwrap();
    let (code, out) = verify(&log);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("line 3 (record 2)"), "{out}");
    // Record 1 removed: record 2 says records are missing.
    let mut removed = [lines[0], lines[2]].join(&b'\n');
    for line in &lines[3..] {
        removed.push(b'\n');
        removed.extend_from_slice(line);
    }
    removed.push(b'\n');
    std::fs::write(&log, &removed).unwrap();
    let (code, out) = verify(&log);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("line 2 (record 1)") && out.contains("removed"),
        "{out}"
    );
}

/// A tmpfs of 64 KiB, mounted for one test (root only) and unmounted after.
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    fn mount(at: std::path::PathBuf) -> Option<SmallFs> {
        std::fs::create_dir(&at).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs"])
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(SmallFs(at))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// On a full filesystem no half record remains and every lost record is
/// said on stderr; with `audit_required` a run that cannot be recorded
/// does not run; once space is back, runs are recorded and the chain holds.
#[test]
fn on_a_full_disk_records_are_whole_or_absent_and_a_required_log_stops_runs() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED on_a_full_disk_records_are_whole: mounting a tmpfs needs root");
        return;
    }
    let dir = workspace();
    let Some(fs) = SmallFs::mount(dir.path().join("fs")) else {
        eprintln!("SKIPPED on_a_full_disk_records_are_whole: no tmpfs mount here");
        return;
    };
    let log = fs.0.join("audit.jsonl");
    // All but one page is taken: a few records fit, then the disk is full.
    let filler = fs.0.join("filler");
    std::fs::write(&filler, vec![0u8; 60 << 10]).unwrap();
    let config = dir.path().join("cordon.toml");
    let write_config = |required: bool| {
        std::fs::write(
            &config,
            format!(
                "audit_log = {:?}\naudit_required = {required}\n",
                log.to_str().unwrap()
            ),
        )
        .unwrap();
    };
    let run = |command: &str| {
        cordon()
            .current_dir(dir.path())
            .args(["run", "--config", config.to_str().unwrap(), "--", command])
            .output()
            .unwrap()
    };
    write_config(false);
    let mut warned = 0;
    for n in 0..12 {
        let output = run(&format!("echo run {n} {}", "x".repeat(200)));
        assert_eq!(
            output.status.code(),
            Some(0),
            "an unrequired log never fails a run"
        );
        warned +=
            usize::from(String::from_utf8_lossy(&output.stderr).contains("WARNING: the audit log"));
    }
    assert!(warned > 0, "the full disk was never said");
    let text = std::fs::read(&log).unwrap();
    assert!(text.ends_with(b"\n"), "a half record remains");
    assert!(
        text.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .all(|l| serde_json::from_slice::<Value>(l).is_ok())
    );
    assert_eq!(verify(&log).0, 0, "{}", verify(&log).1);

    write_config(true);
    let marker = dir.path().join("ran");
    let output = run(&format!("touch {}", marker.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(74), "{stderr}");
    assert!(stderr.contains("AUDIT_UNAVAILABLE"), "{stderr}");
    assert!(!marker.exists(), "a run went ahead unrecorded");

    std::fs::remove_file(&filler).unwrap();
    let output = run("echo back");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (code, out) = verify(&log);
    assert_eq!(code, 0, "{out}");
    let last: Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (last["event"].as_str(), last["command"].as_str()),
        (Some("run"), Some("echo back"))
    );
}
