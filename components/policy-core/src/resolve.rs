//! Request defaulting: a caller's request becomes a fully-defaulted spec.
//!
//! Numbers and precedence follow SPEC.md §1 and §3: timeout 120 000 ms by
//! default, positive, capped at 600 000 ms; the request's own sandbox policy
//! wins over the deployment's; the environment defaults come before the
//! request's entries so an explicit entry always wins.

use crate::{Deployment, ExecError, ExecRequest, ExecSpec, SandboxMode};

/// Timeout when the request names none.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The largest timeout a request can get; larger requests are capped.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// Environment defaults for non-interactive, colourless, pager-free output.
pub const DEFAULT_ENV: &[(&str, &str)] = &[
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
];

/// The same defaults for PowerShell, which has no use for `TERM` (SPEC.md §3).
pub const PWSH_ENV: &[(&str, &str)] = &[("NO_COLOR", "1"), ("PAGER", "cat"), ("GIT_PAGER", "cat")];

/// Default `request` against `deployment`, adding `default_env` before the
/// request's own environment entries.
pub fn resolve(
    request: ExecRequest,
    deployment: &Deployment,
    default_env: &[(&str, &str)],
) -> Result<ExecSpec, ExecError> {
    if request.command.trim().is_empty() {
        return Err(invalid(
            "command is empty; pass the shell command line to run",
        ));
    }
    if request.command.contains('\0') {
        return Err(invalid(
            "command contains a NUL byte, which no shell can receive",
        ));
    }
    let timeout_ms = match request.timeout_ms {
        None => DEFAULT_TIMEOUT_MS,
        Some(0) => return Err(invalid("timeout-ms must be positive (milliseconds)")),
        Some(ms) => ms.min(MAX_TIMEOUT_MS),
    };
    let workdir = match request.workdir {
        None => deployment.workdir.clone(),
        Some(dir) if dir.is_empty() => {
            return Err(invalid("workdir is empty; omit it to use the default"));
        }
        Some(dir) if dir.starts_with('/') => dir,
        Some(dir) => format!("{}/{}", deployment.workdir.trim_end_matches('/'), dir),
    };
    for (name, value) in &request.env {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(invalid(&format!(
                "env name {name:?} is not a valid variable name (non-empty, no '=' or NUL)"
            )));
        }
        if value.contains('\0') {
            return Err(invalid(&format!("env value of {name} contains a NUL byte")));
        }
    }
    let policy = request.policy.unwrap_or_else(|| deployment.policy.clone());
    if policy.mode == SandboxMode::WorkspaceWrite && policy.workspace_root.is_empty() {
        return Err(invalid(
            "workspace-write needs a workspace root; set policy.workspace-root",
        ));
    }
    let env = default_env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .chain(request.env)
        .collect();
    Ok(ExecSpec {
        command: request.command,
        workdir,
        timeout_ms,
        env,
        policy,
    })
}

fn invalid(message: &str) -> ExecError {
    ExecError::InvalidRequest(message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sandbox_policy;

    fn deployment() -> Deployment {
        crate::deployment_in("/srv/ws")
    }

    fn request(command: &str) -> ExecRequest {
        ExecRequest {
            command: command.into(),
            workdir: None,
            timeout_ms: None,
            env: vec![],
            policy: None,
            approved: false,
        }
    }

    fn resolve_ok(request: ExecRequest) -> ExecSpec {
        resolve(request, &deployment(), DEFAULT_ENV).expect("resolves")
    }

    fn resolve_err(request: ExecRequest) -> String {
        match resolve(request, &deployment(), DEFAULT_ENV) {
            Err(ExecError::InvalidRequest(message)) => message,
            other => panic!("expected invalid-request, got {other:?}"),
        }
    }

    #[test]
    fn defaults_come_from_the_deployment() {
        let spec = resolve_ok(request("ls"));
        assert_eq!(spec.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(spec.workdir, "/srv/ws");
        assert_eq!(spec.policy, deployment().policy);
        assert_eq!(spec.command, "ls");
    }

    #[test]
    fn timeout_is_capped_and_must_be_positive() {
        let mut r = request("ls");
        r.timeout_ms = Some(MAX_TIMEOUT_MS + 1);
        assert_eq!(resolve_ok(r).timeout_ms, MAX_TIMEOUT_MS);
        let mut r = request("ls");
        r.timeout_ms = Some(250);
        assert_eq!(resolve_ok(r).timeout_ms, 250);
        let mut r = request("ls");
        r.timeout_ms = Some(0);
        assert!(resolve_err(r).contains("timeout-ms"));
    }

    #[test]
    fn request_policy_wins_over_deployment() {
        let mut r = request("ls");
        let mut own = sandbox_policy(SandboxMode::WorkspaceWrite, "/home/me/proj");
        own.deny_read.push("/home/me/.ssh".into());
        r.policy = Some(own.clone());
        assert_eq!(resolve_ok(r).policy, own);
    }

    #[test]
    fn workspace_write_without_root_is_invalid() {
        let mut r = request("ls");
        r.policy = Some(sandbox_policy(SandboxMode::WorkspaceWrite, ""));
        assert!(resolve_err(r).contains("workspace root"));
    }

    #[test]
    fn relative_workdir_is_joined_to_the_default() {
        let mut r = request("ls");
        r.workdir = Some("sub/dir".into());
        assert_eq!(resolve_ok(r).workdir, "/srv/ws/sub/dir");
        let mut r = request("ls");
        r.workdir = Some("/abs".into());
        assert_eq!(resolve_ok(r).workdir, "/abs");
    }

    #[test]
    fn request_env_comes_after_defaults() {
        let mut r = request("ls");
        r.env = vec![("TERM".into(), "xterm".into())];
        let env = resolve_ok(r).env;
        assert_eq!(env.first(), Some(&("NO_COLOR".to_owned(), "1".to_owned())));
        assert_eq!(env.last(), Some(&("TERM".to_owned(), "xterm".to_owned())));
    }

    #[test]
    fn malformed_requests_name_the_field() {
        assert!(resolve_err(request("  ")).contains("command is empty"));
        assert!(resolve_err(request("a\0b")).contains("NUL"));
        let mut r = request("ls");
        r.env = vec![("A=B".into(), "1".into())];
        assert!(resolve_err(r).contains("env name"));
    }
}
