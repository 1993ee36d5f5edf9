//! `bash-sandbox`: cordon's default policy component.
//!
//! Runs every command as `bash -c CMD` and confines every mode but
//! `danger-full-access`. All behaviour is the shared [`cordon_policy`]
//! library's; this crate only names the shell.

use cordon_policy::{Executor, ExecutorInfo, SandboxMode};

/// The bash executor that confines every run.
pub struct BashSandbox;

impl Executor for BashSandbox {
    fn info() -> ExecutorInfo {
        ExecutorInfo {
            name: "bash-sandbox".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            shell: "bash".into(),
            default_mode: SandboxMode::ReadOnly,
        }
    }

    fn argv(command: &str) -> Vec<String> {
        cordon_policy::bash_argv(command)
    }
}

cordon_policy::bindings::export!(BashSandbox with_types_in cordon_policy::bindings);
