//! The log's unit tests: privacy, whole records, the chain across
//! rotations, seals.

use super::*;
use crate::policy::PolicyIdentity;

fn identity() -> PolicyIdentity {
    PolicyIdentity {
        name: "p".into(),
        version: "1".into(),
        world: "w".into(),
        digest: "sha256:00".into(),
        reference: None,
        settings: None,
    }
}

fn refusal(origin: &Origin, command: &str) -> Record {
    let stamp = Stamp {
        origin,
        policy: identity(),
        run_as: None,
        command,
        workdir: Some(Path::new("/ws")),
        approved: true,
        started: SystemTime::now(),
    };
    let error = crate::error::RunError::Denied {
        reason: "no".into(),
    };
    Record::refused(&stamp, &error)
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_log_is_private_chained_and_appended_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "no genesis before a record"
    );
    let origin = Origin::new("library").approved_through("flag");
    log.write(refusal(&origin, "rm -rf /")).unwrap();
    log.write(refusal(&origin, "ls")).unwrap();
    drop(log);
    let records = lines(&path);
    assert_eq!(records.len(), 3);
    assert_eq!(records[0]["event"], "genesis");
    assert_eq!(records[0]["prev"], chain::ORIGIN);
    assert_eq!(
        (records[1]["seq"].as_u64(), records[2]["seq"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(records[1]["decision"], "deny");
    assert_eq!(records[1]["approvedBy"], "flag");
    assert_eq!(records[1]["workdir"], "/ws");
    assert!(records[1]["durationMs"].is_u64() && records[1]["started"].is_string());
    // Reopened: appended, chained on.
    let log = AuditLog::open(&path).unwrap();
    log.write(refusal(&origin, "pwd")).unwrap();
    let checked = verify(std::slice::from_ref(&path), None).unwrap();
    assert_eq!(checked.records, 4);
}

#[test]
fn a_fragment_is_cut_at_open_and_the_chain_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let origin = Origin::new("library");
    AuditLog::open(&path)
        .unwrap()
        .write(refusal(&origin, "a"))
        .unwrap();
    let whole = std::fs::read(&path).unwrap();
    let mut glued = whole.clone();
    glued.extend_from_slice(b"{\"seq\":2,\"prev\":\"half");
    std::fs::write(&path, &glued).unwrap();
    let log = AuditLog::open(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), whole, "the fragment is cut");
    log.write(refusal(&origin, "b")).unwrap();
    assert_eq!(verify(&[path], None).unwrap().records, 3);
}

#[test]
fn rotation_keeps_the_chain_and_seals_each_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let key = PrivateKey::read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/keys/signer.pem"),
    );
    let Ok(key) = key else {
        eprintln!("SKIPPED the seal part: no test key ({})", key.unwrap_err());
        return;
    };
    let public = key.public();
    let options = AuditOptions {
        max_bytes: Some(600),
        signing_key: Some(std::sync::Arc::new(key)),
        ..AuditOptions::at(&path)
    };
    let log = AuditLog::open_with(options.clone()).unwrap();
    let origin = Origin::new("library");
    for n in 0..8 {
        log.write(refusal(&origin, &format!("command {n}")))
            .unwrap();
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(options.rotated_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 2, "{files:?}");
    files.push(path.clone());
    let checked = verify(&files, Some(&public)).unwrap();
    assert_eq!(checked.seals, files.len() as u64 - 1);
    assert_eq!(checked.origin, chain::ORIGIN);
    // A rotated file dropped: the next file's genesis names it.
    let mut missing = files.clone();
    missing.remove(1);
    let err = verify(&missing, Some(&public)).unwrap_err();
    assert!(err.reason.contains("removed or inserted"), "{err}");
}

#[test]
fn a_log_from_before_the_chain_goes_on_chained_after_a_genesis() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let legacy = "{\"time\":\"t\",\"event\":\"run\",\"command\":\"old\"}\n";
    std::fs::write(&path, legacy.repeat(2)).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let origin = Origin::new("library");
    AuditLog::open(&path)
        .unwrap()
        .write(refusal(&origin, "new"))
        .unwrap();
    let records = lines(&path);
    assert_eq!(records[2]["event"], "genesis");
    assert_eq!(
        records[2]["prev"],
        chain::hash(legacy.trim_end().as_bytes())
    );
    let checked = verify(std::slice::from_ref(&path), None).unwrap();
    assert_eq!((checked.unchained, checked.records), (2, 2));
    // The older records are not covered, but the genesis names the last.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("\"old\"}\n{", "\"OLD\"}\n{", 2)).unwrap();
    let err = verify(&[path], None).unwrap_err();
    assert!(
        err.reason.contains("does not name the record before it"),
        "{err}"
    );
}
