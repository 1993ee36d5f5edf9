//! The errors of one run. A nonzero exit, a timeout or a denial is a result;
//! these are the cases where there is no result to give.

use std::path::PathBuf;

use crate::model::SandboxMode;

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
        /// `resolve`, `plan`, `settle` or `load`.
        phase: &'static str,
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
    /// The stable error code: `INVALID_REQUEST`, `SANDBOX_UNAVAILABLE`,
    /// `POLICY_FAILED`, `WORKDIR` or `SPAWN_FAILED`.
    pub fn code(&self) -> &'static str {
        match self {
            RunError::InvalidRequest(_) | RunError::AboveCeiling { .. } => "INVALID_REQUEST",
            RunError::SandboxUnavailable { .. } => "SANDBOX_UNAVAILABLE",
            RunError::PolicyFailed { .. } => "POLICY_FAILED",
            RunError::Workdir { .. } => "WORKDIR",
            RunError::Spawn { .. } => "SPAWN_FAILED",
        }
    }
}

/// The exact `SANDBOX_UNAVAILABLE` message of SPEC.md §2.
pub fn sandbox_unavailable_message(mode: SandboxMode, detail: Option<&str>) -> String {
    let mut message = format!(
        "sandbox mode \"{mode}\" is requested but no sandbox backend is usable on this host; \
         refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing \
         kernel (Linux), ensure sandbox-exec is usable (macOS) — otherwise switch to \
         danger-full-access."
    );
    if let Some(detail) = detail {
        message.push_str(" Runner failure: ");
        message.push_str(detail);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_unavailable_message_is_the_contract_text() {
        let expected = "sandbox mode \"read-only\" is requested but no sandbox backend is usable \
            on this host; refusing to run the command unconfined. Install bubblewrap or run a \
            Landlock-enforcing kernel (Linux), ensure sandbox-exec is usable (macOS) — otherwise \
            switch to danger-full-access.";
        assert_eq!(
            sandbox_unavailable_message(SandboxMode::ReadOnly, None),
            expected
        );
        assert_eq!(
            sandbox_unavailable_message(SandboxMode::ReadOnly, Some("bwrap: no")),
            format!("{expected} Runner failure: bwrap: no")
        );
    }
}
