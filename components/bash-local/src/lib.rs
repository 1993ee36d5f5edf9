//! `bash-local`: bash with no confinement at all.
//!
//! Every run is `danger-full-access`, whatever policy the request carries,
//! and is launched bare; the result says so (`mode: danger-full-access`, no
//! enforcement). It describes its default mode as `danger-full-access`, so
//! a host refuses to load it unless the deployment's ceiling allows that
//! mode — an operator opts in explicitly (`--max-mode danger-full-access`).

use cordon_policy::{
    Deployment, ExecError, ExecRequest, ExecSpec, Executor, ExecutorInfo, SandboxMode,
};

/// The bash executor that never confines.
pub struct BashLocal;

impl Executor for BashLocal {
    fn info() -> ExecutorInfo {
        ExecutorInfo {
            name: "bash-local".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            shell: "bash".into(),
            default_mode: SandboxMode::DangerFullAccess,
        }
    }

    fn argv(command: &str) -> Vec<String> {
        cordon_policy::bash_argv(command)
    }

    fn resolve(request: ExecRequest, deployment: Deployment) -> Result<ExecSpec, ExecError> {
        let mut spec = cordon_policy::resolve::resolve(request, &deployment, Self::default_env())?;
        spec.policy.mode = SandboxMode::DangerFullAccess;
        Ok(spec)
    }
}

cordon_policy::bindings::export!(BashLocal with_types_in cordon_policy::bindings);
