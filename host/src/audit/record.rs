//! What one audit record says ([`Record`]), and where a request came
//! from ([`Origin`]). The log ([`super::AuditLog`]) numbers and chains the
//! records as it writes them: [`Record::seq`] and [`Record::prev`] are its.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::model::{
    Backend, DecidedRequest, Enforcement, ExecResult, RefusedConnection, SandboxFacts,
    SandboxPolicy,
};
use crate::policy::PolicyIdentity;

/// One audit record: a run or task that ended, a task or run that starts,
/// a refusal, a reload, or the log's own genesis and seal records.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Its number in the log's chain (the genesis is the first of a file).
    pub seq: u64,
    /// The SHA-256 (hex) of the previous record's line: changing, removing
    /// or inserting a record breaks the chain at the next one.
    pub prev: String,
    /// When it was written: RFC 3339 UTC, to the millisecond (a run's or
    /// task's end).
    pub time: String,
    /// `run` (a foreground run that ran), `task` (a background task that
    /// ended), `run-start` / `task-start` (one starts), `refusal` (nothing
    /// ran: denied, asked, invalid, no sandbox, the policy failed),
    /// `reload`, or the log's `genesis` and `seal`.
    pub event: &'static str,
    /// The session the request came in on (a random id per session).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub session: String,
    /// Who sent it, as the transport knows them (`uid 1000 gid 1000 pid
    /// 4242` on a socket, `stdio`, `cli`, `library`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub peer: String,
    /// The MCP client, as it named itself (`name version`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The uid the run's processes were, when not the host's own (a root
    /// server's socket client).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as: Option<u32>,
    /// The command line as requested.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// Its working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir: Option<PathBuf>,
    /// Whether a person's approval came with it, and through what (`flag`
    /// for the CLI's `--approved`, `elicitation` for MCP, `client` for a
    /// server's request, `caller` for the library).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<&'static str>,
    /// When the request was taken (RFC 3339 UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// When it ended (a run's or task's; RFC 3339 UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// From `started` to `ended`, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The grant the run ran under, as resolved and checked (or, when the
    /// policy asked for approval, the grant it proposed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<SandboxPolicy>,
    /// `allow`, `deny`, `ask` or `error` (a reload: `allow` or `refused`).
    #[serde(skip_serializing_if = "str::is_empty")]
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
    /// HTTP requests the component decided (world `0.3.0`), the first
    /// [`crate::model::MAX_DECIDED_REQUESTS`]: no query, no header values.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<DecidedRequest>,
    /// How many more requests were decided than `requests` lists.
    #[serde(skip_serializing_if = "is_zero")]
    pub requests_unlisted: u64,
    /// The policy component in force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyIdentity>,
    /// A seal's signature (base64 ECDSA P-256 over [`seal_payload`] of
    /// its `prev`) and the signing key's fingerprint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The fingerprint of the key that signed a seal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// What a seal's signature covers: the chain's head at the end of a file.
pub fn seal_payload(head: &str) -> Vec<u8> {
    format!("cordon-audit-seal:{head}").into_bytes()
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
    /// Requests the component decided, and how many more were.
    pub requests: (Vec<DecidedRequest>, u64),
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where a request came from, for its records.
#[derive(Clone, Debug)]
pub struct Origin {
    /// A random id per session.
    pub session: String,
    /// Who, as the transport knows them.
    pub peer: String,
    /// Through what an approval comes on this transport (`flag`,
    /// `elicitation`, `client`, `caller`).
    pub approver: &'static str,
    /// The MCP client's name and version, once it said them.
    pub client: OnceLock<String>,
}

impl Origin {
    /// A fresh session id for `peer`; approvals come from the caller.
    pub fn new(peer: impl Into<String>) -> Self {
        Self {
            session: format!("{:016x}", crate::random::u64()),
            peer: peer.into(),
            approver: "caller",
            client: OnceLock::new(),
        }
    }

    /// This origin with approvals coming through `approver`.
    pub fn approved_through(mut self, approver: &'static str) -> Self {
        self.approver = approver;
        self
    }
}

/// What every record of one request names: who, what, where, and since
/// when.
#[derive(Debug)]
pub struct Stamp<'a> {
    /// Where the request came from.
    pub origin: &'a Origin,
    /// The policy component in force.
    pub policy: PolicyIdentity,
    /// The uid the run's processes are, when not the host's.
    pub run_as: Option<u32>,
    /// The command line.
    pub command: &'a str,
    /// Its working directory, when known.
    pub workdir: Option<&'a Path>,
    /// Whether it came approved.
    pub approved: bool,
    /// When the request was taken.
    pub started: SystemTime,
}

impl Stamp<'_> {
    /// A record of `event` with this stamp's fields filled in.
    fn record(&self, event: &'static str, decision: &'static str) -> Record {
        Record {
            time: now(),
            event,
            decision,
            session: self.origin.session.clone(),
            peer: self.origin.peer.clone(),
            client: self.origin.client.get().cloned(),
            run_as: self.run_as,
            command: self.command.to_owned(),
            workdir: self.workdir.map(Path::to_path_buf),
            approved_by: self.approved.then_some(self.origin.approver),
            started: Some(stamp(self.started)),
            policy: Some(self.policy.clone()),
            ..Record::default()
        }
    }

    /// The record's end fields: now, and the time since the start.
    fn ending(&self, record: &mut Record) {
        let now = SystemTime::now();
        record.ended = Some(stamp(now));
        let took = now.duration_since(self.started).unwrap_or_default();
        record.duration_ms = Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
    }
}

impl Record {
    /// The record of a foreground run that ran.
    pub fn ran(
        stamp: &Stamp<'_>,
        grant: Option<SandboxPolicy>,
        backend: Option<Backend>,
        result: &ExecResult,
    ) -> Self {
        let end = RecordedEnd {
            exit_code: result.exit_code,
            signal: result.signal,
            timed_out: result.timed_out,
            sandbox: result.sandbox.as_ref(),
            refused: (result.grant.as_ref())
                .map(|g| g.refused.clone())
                .unwrap_or_default(),
            requests: (result.grant.as_ref())
                .map(|g| (g.requests.clone(), g.requests_unlisted))
                .unwrap_or_default(),
        };
        Self::ended(stamp, "run", grant, backend, end)
    }

    /// The record of a run (`run`) or background task (`task`) that ended.
    pub fn ended(
        stamp: &Stamp<'_>,
        event: &'static str,
        grant: Option<SandboxPolicy>,
        backend: Option<Backend>,
        end: RecordedEnd<'_>,
    ) -> Self {
        let mut record = stamp.record(event, "allow");
        stamp.ending(&mut record);
        record.grant = grant;
        record.backend = backend;
        record.enforcement = end.sandbox.and_then(|s| s.enforcement);
        record.exit_code = end.exit_code;
        record.signal = end.signal;
        record.timed_out = end.timed_out;
        record.denied = end.sandbox.is_some_and(|s| s.denied);
        record.refused_connections = end.refused;
        (record.requests, record.requests_unlisted) = end.requests;
        record
    }

    /// The record of a run (`run-start`) or task (`task-start`) about to
    /// start, under `grant`.
    pub fn starting(
        stamp: &Stamp<'_>,
        event: &'static str,
        grant: SandboxPolicy,
        backend: Option<Backend>,
    ) -> Self {
        let mut record = stamp.record(event, "allow");
        record.grant = Some(grant);
        record.backend = backend;
        record
    }

    /// The record of a request that did not run.
    pub fn refused(stamp: &Stamp<'_>, error: &crate::error::RunError) -> Self {
        use crate::error::RunError;
        let (decision, grant, reason) = match error {
            RunError::Denied { reason } => ("deny", None, reason.clone()),
            RunError::ApprovalRequired { reason, policy } => {
                ("ask", Some((**policy).clone()), reason.clone())
            }
            other => ("error", None, other.to_string()),
        };
        let mut record = stamp.record("refusal", decision);
        stamp.ending(&mut record);
        record.grant = grant;
        record.reason = Some(reason);
        record.code = Some(error.code().as_str());
        record
    }

    /// The record of a `reload` of `source` from `origin`: `refused` with
    /// its reason, or `allow` and the policy now in force.
    pub fn reload(origin: &Origin, source: &str, outcome: Result<PolicyIdentity, String>) -> Self {
        let (decision, policy, reason) = match outcome {
            Ok(policy) => ("allow", Some(policy), None),
            Err(reason) => ("refused", None, Some(reason)),
        };
        Record {
            time: now(),
            event: "reload",
            session: origin.session.clone(),
            peer: origin.peer.clone(),
            client: origin.client.get().cloned(),
            command: source.to_owned(),
            decision,
            reason,
            policy,
            ..Record::default()
        }
    }
}

/// Now as RFC 3339 UTC with milliseconds (`2026-12-02T05:41:31.123Z`).
pub(super) fn now() -> String {
    stamp(SystemTime::now())
}

/// `at` as RFC 3339 UTC with milliseconds.
fn stamp(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
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
}
