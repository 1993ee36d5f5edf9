//! The errors of one run, and the one mapping from an error to its stable
//! code and structured details that every surface (the CLI, `serve`, the
//! library) renders. A nonzero exit, a timeout or a denial is a result;
//! these are the cases where there is no result to give.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::model::{Phase, SandboxMode, SandboxPolicy};

/// The stable name of an error, the same on every surface: the CLI's
/// `--json` and `cordon: CODE: …` lines, `serve`'s `data.code`, and
/// [`RunError::code`]. Each surface maps it to its own number (an exit code,
/// a JSON-RPC code) in one exhaustive match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// A malformed request, or a mode above the deployment's ceiling.
    InvalidRequest,
    /// No usable sandbox; the command did not run.
    SandboxUnavailable,
    /// The policy component failed (load, trap, deadline, bad return).
    PolicyFailed,
    /// The working directory is unusable.
    Workdir,
    /// The command could not be started.
    SpawnFailed,
    /// The run was aborted before its command started; nothing ran.
    Aborted,
    /// The policy component denied the command; nothing ran.
    PolicyDenied,
    /// The policy component asks for a person's approval first; nothing
    /// ran. The error carries the reason and the proposed grant.
    ApprovalRequired,
    /// A bound of the host (runs or tasks, per session or in all) is
    /// reached; nothing ran. Temporary: retry when a run ends or a task is
    /// removed. The error names the bound and its value.
    Busy,
    /// The operator requires the audit log and it cannot be written (a
    /// full disk, say); nothing ran.
    AuditUnavailable,
}

impl ErrorCode {
    /// The code's name, e.g. `SANDBOX_UNAVAILABLE`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::SandboxUnavailable => "SANDBOX_UNAVAILABLE",
            ErrorCode::PolicyFailed => "POLICY_FAILED",
            ErrorCode::Workdir => "WORKDIR",
            ErrorCode::SpawnFailed => "SPAWN_FAILED",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::PolicyDenied => "POLICY_DENIED",
            ErrorCode::ApprovalRequired => "APPROVAL_REQUIRED",
            ErrorCode::Busy => "BUSY",
            ErrorCode::AuditUnavailable => "AUDIT_UNAVAILABLE",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// An error's structured details: `{"code": NAME, …}` plus the stable
/// fields of its kind (`mode`, `detail`, `field`, `ceiling`, `phase`,
/// `path`). Every surface renders exactly these.
pub type Details = Map<String, Value>;

pub(crate) fn details(code: ErrorCode, fields: Value) -> Details {
    let mut details = Map::new();
    details.insert("code".into(), json!(code));
    if let Value::Object(fields) = fields {
        details.extend(fields);
    }
    details
}

/// Why a run produced no result. Each variant has a stable [`code`](RunError::code).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The request is malformed; the message names the field and the fix.
    #[error("invalid request: {0}")]
    InvalidRequest(String),

    /// The request asks for a mode wider than the deployment allows.
    #[error(
        "sandbox mode \"{mode}\" exceeds this deployment's ceiling \"{ceiling}\"; \
         ask for a narrower mode or have the operator raise the ceiling (--max-mode)"
    )]
    AboveCeiling {
        /// The requested mode.
        mode: SandboxMode,
        /// The deployment's widest mode.
        ceiling: SandboxMode,
    },

    /// A field of the grant is wider than the operator's ceiling.
    #[error(
        "{field} grants {granted}, beyond this deployment's ceiling ({ceiling}); \
         ask for less or have the operator raise the ceiling"
    )]
    GrantAboveCeiling {
        /// The field, e.g. `policy.network`.
        field: &'static str,
        /// What was granted.
        granted: String,
        /// The ceiling it exceeds.
        ceiling: String,
    },

    /// The policy component denied the command: nothing ran.
    #[error("the policy denied the command: {reason}")]
    Denied {
        /// The component's reason.
        reason: String,
    },

    /// The policy component asks for a person's approval: nothing ran. A
    /// caller that approves re-sends the request with `policy` as its own.
    #[error(
        "the policy asks for approval before running the command: {reason}; \
         to approve, re-send the request with the proposed policy"
    )]
    ApprovalRequired {
        /// The component's reason.
        reason: String,
        /// The grant an approved re-send carries.
        policy: Box<SandboxPolicy>,
    },

    /// No usable sandbox backend: the command was not run unconfined.
    #[error("{}", sandbox_unavailable_message(*.mode, .detail.as_deref()))]
    SandboxUnavailable {
        /// The confined mode that was requested.
        mode: SandboxMode,
        /// The runner's own words, when a runner failed.
        detail: Option<String>,
    },

    /// The policy component failed (trap, deadline, memory, malformed or
    /// forbidden return). The command did not run, or its result is void.
    #[error("policy component failed in {phase}: {reason}")]
    PolicyFailed {
        /// The call that failed.
        phase: Phase,
        /// What went wrong.
        reason: String,
    },

    /// The working directory cannot be used.
    #[error("working directory {}: {reason}", path.display())]
    Workdir {
        /// The directory.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },

    /// The caller aborted the run before its command started: nothing was
    /// spawned. (An abort after the start is a result with `aborted`.)
    #[error("the run was aborted before its command started; nothing ran")]
    Aborted,

    /// A bound of the host is reached (see
    /// [`SessionLimits`](crate::admission::SessionLimits)): nothing ran.
    #[error(
        "busy: {limit} ({max}) is reached; nothing ran — retry when a run ends or a task \
         is removed, or have the operator raise {limit}"
    )]
    Busy {
        /// The bound, by its configuration name (`maxSessionRuns`, …).
        limit: &'static str,
        /// Its value.
        max: usize,
    },

    /// The operator requires the audit log (`audit_required`) and the
    /// run's start could not be recorded: nothing ran.
    #[error(
        "the audit log {} cannot be written ({reason}), and the operator requires it: nothing \
         ran — free space where it lives or fix the file, then retry",
        path.display()
    )]
    AuditUnavailable {
        /// The log.
        path: PathBuf,
        /// Why it cannot be written.
        reason: String,
    },

    /// The command could not be started (not a sandbox failure).
    #[error("could not start {program:?}: {source}")]
    Spawn {
        /// The program that failed to start.
        program: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl RunError {
    /// The stable error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            RunError::InvalidRequest(_)
            | RunError::AboveCeiling { .. }
            | RunError::GrantAboveCeiling { .. } => ErrorCode::InvalidRequest,
            RunError::Denied { .. } => ErrorCode::PolicyDenied,
            RunError::ApprovalRequired { .. } => ErrorCode::ApprovalRequired,
            RunError::SandboxUnavailable { .. } => ErrorCode::SandboxUnavailable,
            RunError::PolicyFailed { .. } => ErrorCode::PolicyFailed,
            RunError::Workdir { .. } => ErrorCode::Workdir,
            RunError::Spawn { .. } => ErrorCode::SpawnFailed,
            RunError::Aborted => ErrorCode::Aborted,
            RunError::Busy { .. } => ErrorCode::Busy,
            RunError::AuditUnavailable { .. } => ErrorCode::AuditUnavailable,
        }
    }

    /// The code and the stable fields of this error (see [`Details`]).
    pub fn details(&self) -> Details {
        let fields = match self {
            RunError::SandboxUnavailable { mode, detail } => {
                json!({ "mode": mode, "detail": detail })
            }
            RunError::AboveCeiling { mode, ceiling } => {
                json!({ "field": "policy.mode", "mode": mode, "ceiling": ceiling })
            }
            RunError::GrantAboveCeiling {
                field,
                granted,
                ceiling,
            } => json!({ "field": field, "granted": granted, "ceiling": ceiling }),
            RunError::Denied { reason } => json!({ "reason": reason }),
            RunError::ApprovalRequired { reason, policy } => {
                json!({ "reason": reason, "policy": policy })
            }
            RunError::PolicyFailed { phase, .. } => json!({ "phase": phase }),
            RunError::Workdir { path, .. } => json!({ "path": path }),
            RunError::Busy { limit, max } => json!({ "limit": limit, "max": max }),
            RunError::AuditUnavailable { path, .. } => json!({ "path": path }),
            RunError::InvalidRequest(_) | RunError::Spawn { .. } | RunError::Aborted => json!({}),
        };
        details(self.code(), fields)
    }
}

/// The `SANDBOX_UNAVAILABLE` message (SPEC.md §2, as issue 33 amends it:
/// it names the operator's fixes and never suggests running unconfined —
/// through `cordon mcp` this sentence reaches a model).
pub fn sandbox_unavailable_message(mode: SandboxMode, detail: Option<&str>) -> String {
    // The cause first (a missing runner, or the host's own state in reach of
    // this run), then the operator's fixes: "no backend is usable" would be
    // false where a rung is usable but cannot confine this one run.
    let mut message = format!(
        "sandbox mode \"{mode}\" is requested but no sandbox backend could confine this run \
         here; refusing to run the command unconfined."
    );
    if let Some(detail) = detail {
        message.push_str(" Runner failure: ");
        message.push_str(detail);
        if !detail.ends_with('.') {
            message.push('.');
        }
    }
    message.push_str(
        " The operator can make one usable: install bubblewrap, allow unprivileged user \
         namespaces, or run a Landlock-enforcing kernel (Linux); ensure sandbox-exec is usable \
         (macOS). `cordon doctor` says what this host lacks.",
    );
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::LoadError;

    #[test]
    fn every_error_names_its_code_and_stable_fields() {
        let unavailable = RunError::SandboxUnavailable {
            mode: SandboxMode::ReadOnly,
            detail: Some("bwrap: no".into()),
        };
        assert_eq!(unavailable.code(), "SANDBOX_UNAVAILABLE");
        assert_eq!(
            Value::Object(unavailable.details()),
            json!({"code": "SANDBOX_UNAVAILABLE", "mode": "read-only", "detail": "bwrap: no"})
        );
        let above = RunError::AboveCeiling {
            mode: SandboxMode::DangerFullAccess,
            ceiling: SandboxMode::WorkspaceWrite,
        };
        assert_eq!(
            Value::Object(above.details()),
            json!({"code": "INVALID_REQUEST", "field": "policy.mode",
                   "mode": "danger-full-access", "ceiling": "workspace-write"})
        );
        let failed = RunError::PolicyFailed {
            phase: Phase::Settle,
            reason: "trapped".into(),
        };
        assert_eq!(
            Value::Object(failed.details()),
            json!({"code": "POLICY_FAILED", "phase": "settle"})
        );
        let workdir = RunError::Workdir {
            path: "/nope".into(),
            reason: "gone".into(),
        };
        assert_eq!(workdir.details()["path"], "/nope");
        let spawn = RunError::Spawn {
            program: "x".into(),
            source: std::io::Error::other("e"),
        };
        assert_eq!(
            Value::Object(spawn.details()),
            json!({"code": "SPAWN_FAILED"})
        );
        let denied = RunError::Denied {
            reason: "no curl".into(),
        };
        assert_eq!(
            Value::Object(denied.details()),
            json!({"code": "POLICY_DENIED", "reason": "no curl"})
        );
        let ask = RunError::ApprovalRequired {
            reason: "rm -rf".into(),
            policy: Box::new(SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/w")),
        };
        assert_eq!(
            Value::Object(ask.details()),
            json!({"code": "APPROVAL_REQUIRED", "reason": "rm -rf",
                   "policy": {"mode": "workspace-write", "workspaceRoot": "/w"}})
        );
        let load = LoadError::World("no".into());
        assert_eq!(
            Value::Object(load.details()),
            json!({"code": "POLICY_FAILED", "phase": "load"})
        );
        assert_eq!(load.to_string(), "policy component failed in load: no");
    }

    #[test]
    fn sandbox_unavailable_message_is_the_contract_text() {
        let lead = "sandbox mode \"read-only\" is requested but no sandbox backend could confine \
            this run here; refusing to run the command unconfined.";
        let fixes = " The operator can make one usable: install bubblewrap, allow unprivileged \
            user namespaces, or run a Landlock-enforcing kernel (Linux); ensure sandbox-exec is \
            usable (macOS). `cordon doctor` says what this host lacks.";
        assert_eq!(
            sandbox_unavailable_message(SandboxMode::ReadOnly, None),
            format!("{lead}{fixes}")
        );
        let with_cause = sandbox_unavailable_message(SandboxMode::ReadOnly, Some("bwrap: no"));
        assert_eq!(
            with_cause,
            format!("{lead} Runner failure: bwrap: no.{fixes}")
        );
        // Never a suggestion to give the sandbox up.
        assert!(!with_cause.contains("danger-full-access"));
    }
}
