//! `pwsh-sandbox`: the call-for-call twin of `bash-sandbox` for PowerShell.
//!
//! Runs every command as `pwsh -NoLogo -NoProfile -NonInteractive -Command
//! PREAMBLE+CMD` (the preamble makes output UTF-8) and confines every mode
//! but `danger-full-access`. Defaulting and classification are the shared
//! [`cordon_policy`] library's; only the shell and its environment differ.

use cordon_policy::{Executor, ExecutorInfo, SandboxMode};

/// The PowerShell executor that confines every run.
pub struct PwshSandbox;

impl Executor for PwshSandbox {
    fn info() -> ExecutorInfo {
        ExecutorInfo {
            name: "pwsh-sandbox".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            shell: "pwsh".into(),
            default_mode: SandboxMode::ReadOnly,
        }
    }

    fn argv(command: &str) -> Vec<String> {
        cordon_policy::pwsh_argv(command)
    }

    fn default_env() -> &'static [(&'static str, &'static str)] {
        cordon_policy::resolve::PWSH_ENV
    }
}

cordon_policy::bindings::export!(PwshSandbox with_types_in cordon_policy::bindings);
