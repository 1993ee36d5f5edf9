//! The `cordon` binary's exit codes. A finished command's own exit code is
//! passed through; cordon's own outcomes use the `sysexits.h` range so they
//! are easy to tell apart in scripts.

use std::process::ExitCode;

use cordon::ErrorCode;

/// The command was killed at its timeout (as coreutils `timeout`).
pub const TIMED_OUT: u8 = 124;
/// The run was interrupted (Ctrl-C / SIGTERM to cordon).
pub const INTERRUPTED: u8 = 130;
/// Invalid request: a malformed field or a mode above the ceiling.
pub const INVALID_REQUEST: u8 = 64;
/// The working directory is unusable.
pub const WORKDIR: u8 = 66;
/// `SANDBOX_UNAVAILABLE`: no usable sandbox; nothing ran.
pub const SANDBOX_UNAVAILABLE: u8 = 69;
/// The policy component failed (load, trap, deadline, bad return).
pub const POLICY_FAILED: u8 = 70;
/// The command could not be started.
pub const SPAWN_FAILED: u8 = 71;
/// `BUSY`: a bound of the host is reached; nothing ran (retry later).
pub const BUSY: u8 = 73;
/// `AUDIT_UNAVAILABLE`: the required audit log cannot be written; nothing ran.
pub const AUDIT_UNAVAILABLE: u8 = 74;
/// `APPROVAL_REQUIRED`: the policy asks a person first; nothing ran.
pub const APPROVAL_REQUIRED: u8 = 75;
/// `POLICY_DENIED`: the policy denied the command; nothing ran.
pub const POLICY_DENIED: u8 = 77;
/// The configuration (file or flags) is unusable.
pub const CONFIG: u8 = 78;

/// The exit code of a stable error code (the one place that maps them).
pub fn for_code(code: ErrorCode) -> u8 {
    match code {
        ErrorCode::InvalidRequest => INVALID_REQUEST,
        ErrorCode::SandboxUnavailable => SANDBOX_UNAVAILABLE,
        ErrorCode::PolicyFailed => POLICY_FAILED,
        ErrorCode::Workdir => WORKDIR,
        ErrorCode::SpawnFailed => SPAWN_FAILED,
        ErrorCode::Aborted => INTERRUPTED,
        ErrorCode::ApprovalRequired => APPROVAL_REQUIRED,
        ErrorCode::PolicyDenied => POLICY_DENIED,
        ErrorCode::Busy => BUSY,
        ErrorCode::AuditUnavailable => AUDIT_UNAVAILABLE,
    }
}

/// The exit code for a failure to set up (before any command runs): a
/// host that cannot be built exits with its error's code, anything else
/// is an unusable configuration.
pub fn for_setup(error: &anyhow::Error) -> ExitCode {
    match error.downcast_ref::<cordon::BuildError>() {
        Some(build) => ExitCode::from(for_code(build.code())),
        None => ExitCode::from(CONFIG),
    }
}

/// The exit code mirroring a finished command: its own code, 128+N for a
/// signal, [`TIMED_OUT`] for a timeout.
pub fn for_result(result: &cordon::ExecResult) -> ExitCode {
    if result.timed_out {
        return ExitCode::from(TIMED_OUT);
    }
    if result.aborted {
        return ExitCode::from(INTERRUPTED);
    }
    match (result.exit_code, result.signal) {
        (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
        (None, Some(signal)) => ExitCode::from((128 + signal).clamp(0, 255) as u8),
        (None, None) => ExitCode::FAILURE,
    }
}

/// The table printed in `cordon run --help`.
pub const HELP: &str = "\
Exit codes:
  N    the command's own exit code (128+N when it died by signal N)
  124  the command was killed at its timeout
  130  cordon was interrupted and terminated the command's process group
       (or was interrupted before the command started: nothing ran)
  2    usage error
  64   invalid request (bad field, or mode above the deployment ceiling)
  66   the working directory is unusable
  69   SANDBOX_UNAVAILABLE: no usable sandbox backend; the command did not run
  70   the policy component failed
  71   the command could not be started
  75   APPROVAL_REQUIRED: the policy asks a person first; nothing ran (the
       reason and the proposed grant are printed; to approve, run again
       with --grant GRANT_JSON)
  77   POLICY_DENIED: the policy denied the command; nothing ran
  78   the configuration (cordon.toml or flags) is unusable";
