//! The plan: confine the shell argv, or launch it bare under
//! `danger-full-access` (the only mode the host accepts an unconfined launch for).

use crate::bindings::cordon::sandbox::sandbox::{self, Confined};
use crate::{ExecError, ExecSpec, Launch, SandboxMode, SandboxPolicy, Unavailable};

/// Plan `argv` for `spec`, asking `confine` to wrap it for any confined mode.
///
/// `confine` is the host's `sandbox.confine` in a component
/// ([`host_confine`]); tests pass a fake.
pub fn plan<F>(spec: &ExecSpec, argv: Vec<String>, confine: F) -> Result<Launch, ExecError>
where
    F: FnOnce(&[String], &SandboxPolicy) -> Result<Confined, Unavailable>,
{
    if spec.policy.mode == SandboxMode::DangerFullAccess {
        return Ok(Launch::Unconfined(argv));
    }
    confine(&argv, &spec.policy)
        .map(Launch::Confined)
        .map_err(ExecError::SandboxUnavailable)
}

/// The host's `sandbox.confine` import.
pub fn host_confine(argv: &[String], policy: &SandboxPolicy) -> Result<Confined, Unavailable> {
    sandbox::confine(argv, policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: SandboxMode) -> ExecSpec {
        ExecSpec {
            command: "true".into(),
            workdir: "/".into(),
            timeout_ms: 1,
            env: vec![],
            policy: crate::sandbox_policy(mode, "/ws"),
        }
    }

    #[test]
    fn danger_full_access_is_launched_bare_without_asking_the_host() {
        let launch = plan(
            &spec(SandboxMode::DangerFullAccess),
            crate::bash_argv("true"),
            |_, _| panic!("confine must not be called"),
        )
        .expect("plans");
        match launch {
            Launch::Unconfined(argv) => assert_eq!(argv, ["bash", "-c", "true"]),
            Launch::Confined(_) => panic!("expected unconfined"),
        }
    }

    #[test]
    fn confined_modes_fail_closed_when_the_host_cannot_confine() {
        for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
            let mut asked = None;
            let result = plan(&spec(mode), crate::bash_argv("true"), |argv, policy| {
                asked = Some((argv.to_vec(), policy.clone()));
                Err(Unavailable { mode, detail: None })
            });
            assert!(matches!(
                result,
                Err(ExecError::SandboxUnavailable(Unavailable { mode: m, .. })) if m == mode
            ));
            let (argv, policy) = asked.expect("confine was asked");
            assert_eq!(argv, ["bash", "-c", "true"]);
            assert_eq!(policy, spec(mode).policy);
        }
    }
}
