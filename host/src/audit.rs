//! The audit log: one JSON line per run and per refusal, for an operator
//! to answer "what ran, for whom, under which policy, and what happened".
//!
//! Turned on with `audit_log = PATH` in `cordon.toml` (or
//! [`crate::HostBuilder::audit_log`]). The file is opened once, append-only,
//! created with mode 0600 and refused when it is a symlink or readable by
//! anyone else (it holds every client's commands). Each record is one
//! `write(2)` of a whole line followed by `fdatasync`, under a lock: a
//! crash of cordon — or of the machine — loses at most the record in
//! flight, and concurrent runs never interleave lines.
//!
//! A record that cannot be written is reported on stderr (through
//! `tracing`) and never fails the run it describes: the run already
//! happened.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::model::{
    Backend, Enforcement, ExecResult, RefusedConnection, SandboxFacts, SandboxPolicy,
};
use crate::policy::PolicyIdentity;

/// An open audit log.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
}

/// Why the audit log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the audit log {}: {reason}", path.display())]
pub struct AuditError {
    /// The file.
    pub path: PathBuf,
    /// Why, and what to do.
    pub reason: String,
}

impl AuditLog {
    /// Open (creating it 0600) the log at `path` for appending.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        let fail = |reason: String| AuditError {
            path: path.to_path_buf(),
            reason,
        };
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(path)
            .map_err(|err| fail(format!("{err} (a symlink is refused)")))?;
        let meta = file.metadata().map_err(|err| fail(err.to_string()))?;
        if !meta.is_file() {
            return Err(fail("it is not a regular file".into()));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(fail(format!(
                "its mode is {:04o}: it holds every client's commands, so it must be \
                 readable by its owner only (chmod 600 it)",
                meta.mode() & 0o7777
            )));
        }
        let me = nix::unistd::geteuid().as_raw();
        if meta.uid() != me {
            return Err(fail(format!(
                "it is owned by uid {}, not this user (uid {me})",
                meta.uid()
            )));
        }
        Ok(Self {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append `record` as one line, durably.
    pub fn write(&self, record: &Record) {
        let mut line = serde_json::to_vec(record).expect("a record serializes");
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let written = file.write_all(&line).and_then(|()| file.sync_data());
        if let Err(err) = written {
            tracing::error!(path = %self.path.display(), %err, "cannot write the audit log");
        }
    }
}

/// One audit record.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// RFC 3339 UTC, to the millisecond.
    pub time: String,
    /// `run` (a foreground run that ran), `task` (a background task that
    /// ended), or `refusal` (nothing ran: denied, asked, invalid, no
    /// sandbox, the policy failed).
    pub event: &'static str,
    /// The session the request came in on (a random id per session).
    pub session: String,
    /// Who sent it, as the transport knows them (`uid 1000 gid 1000 pid
    /// 4242` on a socket, `stdio`, `mcp`, `library`).
    pub peer: String,
    /// The command line as requested.
    pub command: String,
    /// The grant the run ran under, as resolved and checked (or, when the
    /// policy asked for approval, the grant it proposed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<SandboxPolicy>,
    /// `allow`, `deny`, `ask` or `error`.
    pub decision: &'static str,
    /// The policy's reason (deny, ask) or the error's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The error code of a refusal (`POLICY_DENIED`, `SANDBOX_UNAVAILABLE`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// The sandbox backend that confined it (none: unconfined or never run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    /// Its enforcement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<Enforcement>,
    /// The command's exit code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that killed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether it was killed at its timeout.
    pub timed_out: bool,
    /// Whether the sandbox denied it something (the policy's classification).
    pub denied: bool,
    /// Connections the allow-list proxy refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused_connections: Vec<RefusedConnection>,
    /// The policy component in force.
    pub policy: PolicyIdentity,
}

/// How a run or task ended, as its record tells it.
#[derive(Debug, Default)]
pub struct RecordedEnd<'a> {
    /// The exit code.
    pub exit_code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
    /// Killed at its timeout.
    pub timed_out: bool,
    /// The sandbox facts settle stamped.
    pub sandbox: Option<&'a SandboxFacts>,
    /// Connections the proxy refused.
    pub refused: Vec<RefusedConnection>,
}

/// Where a request came from, for its records.
#[derive(Clone, Debug)]
pub struct Origin {
    /// A random id per session.
    pub session: String,
    /// Who, as the transport knows them.
    pub peer: String,
}

impl Origin {
    /// A fresh session id for `peer`.
    pub fn new(peer: impl Into<String>) -> Self {
        Self {
            session: format!("{:016x}", crate::random::u64()),
            peer: peer.into(),
        }
    }
}

impl Record {
    /// The record of a foreground run that ran.
    pub fn ran(
        origin: &Origin,
        policy: PolicyIdentity,
        command: &str,
        grant: Option<SandboxPolicy>,
        backend: Option<Backend>,
        result: &ExecResult,
    ) -> Self {
        Self::ended(
            origin,
            policy,
            "run",
            command,
            grant,
            backend,
            RecordedEnd {
                exit_code: result.exit_code,
                signal: result.signal,
                timed_out: result.timed_out,
                sandbox: result.sandbox.as_ref(),
                refused: result
                    .grant
                    .as_ref()
                    .map(|g| g.refused.clone())
                    .unwrap_or_default(),
            },
        )
    }

    /// The record of a run (`run`) or background task (`task`) that ended.
    pub fn ended(
        origin: &Origin,
        policy: PolicyIdentity,
        event: &'static str,
        command: &str,
        grant: Option<SandboxPolicy>,
        backend: Option<Backend>,
        end: RecordedEnd<'_>,
    ) -> Self {
        Record {
            time: now(),
            event,
            session: origin.session.clone(),
            peer: origin.peer.clone(),
            command: command.to_owned(),
            grant,
            decision: "allow",
            reason: None,
            code: None,
            backend,
            enforcement: end.sandbox.and_then(|s| s.enforcement),
            exit_code: end.exit_code,
            signal: end.signal,
            timed_out: end.timed_out,
            denied: end.sandbox.is_some_and(|s| s.denied),
            refused_connections: end.refused,
            policy,
        }
    }

    /// The record of a request that did not run.
    pub fn refused(
        origin: &Origin,
        policy: PolicyIdentity,
        command: &str,
        error: &crate::error::RunError,
    ) -> Self {
        use crate::error::RunError;
        let (decision, grant, reason) = match error {
            RunError::Denied { reason } => ("deny", None, reason.clone()),
            RunError::ApprovalRequired { reason, policy } => {
                ("ask", Some((**policy).clone()), reason.clone())
            }
            other => ("error", None, other.to_string()),
        };
        Record {
            time: now(),
            event: "refusal",
            session: origin.session.clone(),
            peer: origin.peer.clone(),
            command: command.to_owned(),
            grant,
            decision,
            reason: Some(reason),
            code: Some(error.code().as_str()),
            backend: None,
            enforcement: None,
            exit_code: None,
            signal: None,
            timed_out: false,
            denied: false,
            refused_connections: Vec::new(),
            policy,
        }
    }
}

/// Now as RFC 3339 UTC with milliseconds (`2026-12-02T05:41:31.123Z`).
fn now() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs() as i64, since.subsec_millis())
}

/// `secs` since the epoch as a UTC date and time (the civil-from-days
/// conversion; no time zone database needed).
fn rfc3339(secs: i64, millis: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_796_190_091, 123), "2026-12-02T05:41:31.123Z");
    }

    #[test]
    fn the_log_is_private_and_appended_line_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let error = crate::error::RunError::Denied {
            reason: "no".into(),
        };
        let identity = PolicyIdentity {
            name: "p".into(),
            version: "1".into(),
            world: "w".into(),
            digest: "sha256:00".into(),
            reference: None,
        };
        let origin = Origin::new("library");
        log.write(&Record::refused(
            &origin,
            identity.clone(),
            "rm -rf /",
            &error,
        ));
        log.write(&Record::refused(&origin, identity, "ls", &error));
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["decision"], "deny");
        assert_eq!(lines[0]["code"], "POLICY_DENIED");
        assert_eq!(lines[1]["command"], "ls");
        // Reopened: appended, not truncated.
        AuditLog::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn a_shared_or_linked_log_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open.jsonl");
        std::fs::write(&open, "").unwrap();
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let err = AuditLog::open(&open).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        assert!(AuditLog::open(&link).is_err());
    }
}
