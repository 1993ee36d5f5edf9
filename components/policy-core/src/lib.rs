//! The policy logic shared by cordon's executor components.
//!
//! A policy component is a thin binding layer: it names its shell and its
//! argv, and everything else — request defaulting ([`resolve`]), the plan
//! ([`plan`]) and classification of a finished run ([`classify`]) — lives
//! here, once, as plain Rust that is unit-tested natively with `cargo test`.
//!
//! A component implements [`Executor`] and exports it:
//!
//! ```ignore
//! struct BashSandbox;
//! impl cordon_policy::Executor for BashSandbox { /* info, argv */ }
//! cordon_policy::bindings::export!(BashSandbox with_types_in cordon_policy::bindings);
//! ```
//!
//! Every [`Executor`] gets the `executor` interface through a blanket
//! implementation; a component overrides a method only where its policy differs.

#![warn(missing_docs)]

pub mod classify;
pub mod plan;
pub mod resolve;
#[cfg(feature = "rules")]
pub mod rules;
#[cfg(feature = "shell")]
pub mod shell;

/// Bindings generated from the `cordon:sandbox@0.1.0` WIT package.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/0.1.0",
        world: "executor-policy",
        pub_export_macro: true,
        default_bindings_module: "cordon_policy::bindings",
        additional_type_attributes: {
            "cordon:sandbox/types@0.1.0/sandbox-policy": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.1.0/exec-spec": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.1.0/sandbox-facts": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.1.0/unavailable": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.1.0/exec-error": [#[derive(PartialEq, Eq)]],
        },
    });
}

pub use bindings::cordon::sandbox::types::{
    Backend, Deployment, Enforcement, ExecError, ExecRequest, ExecSpec, ExecutorInfo, LaunchFacts,
    Outcome, RunnerStatus, SandboxFacts, SandboxMode, SandboxPolicy, Signatures, Unavailable,
    WrapFacts,
};
pub use bindings::exports::cordon::sandbox::executor::Launch;

/// One executor policy. Implement the two required items; the defaults are
/// the behaviour of cordon's shipped components (SPEC.md §1–§3, §7).
pub trait Executor {
    /// Name, version, shell and default mode.
    fn info() -> ExecutorInfo;

    /// The argv that runs `command` in this executor's shell.
    fn argv(command: &str) -> Vec<String>;

    /// Environment defaults laid over the host's scrubbed environment,
    /// before the request's own entries.
    fn default_env() -> &'static [(&'static str, &'static str)] {
        resolve::DEFAULT_ENV
    }

    /// Turn a request into a fully-defaulted spec.
    fn resolve(request: ExecRequest, deployment: Deployment) -> Result<ExecSpec, ExecError> {
        resolve::resolve(request, &deployment, Self::default_env())
    }

    /// Build and confine the argv.
    fn plan(spec: ExecSpec) -> Result<Launch, ExecError> {
        plan::plan(&spec, Self::argv(&spec.command), plan::host_confine)
    }

    /// Classify a finished run.
    fn settle(
        spec: ExecSpec,
        facts: LaunchFacts,
        outcome: Outcome,
    ) -> Result<Option<SandboxFacts>, ExecError> {
        classify::settle(&spec, &facts, &outcome)
    }
}

impl<T: Executor> bindings::exports::cordon::sandbox::executor::Guest for T {
    fn describe() -> ExecutorInfo {
        T::info()
    }

    fn resolve(request: ExecRequest, deployment: Deployment) -> Result<ExecSpec, ExecError> {
        T::resolve(request, deployment)
    }

    fn plan(spec: ExecSpec) -> Result<Launch, ExecError> {
        T::plan(spec)
    }

    fn settle(
        spec: ExecSpec,
        facts: LaunchFacts,
        outcome: Outcome,
    ) -> Result<Option<SandboxFacts>, ExecError> {
        T::settle(spec, facts, outcome)
    }
}

/// The bash argv: `bash -c CMD` (non-login, no rc files).
pub fn bash_argv(command: &str) -> Vec<String> {
    vec!["bash".to_owned(), "-c".to_owned(), command.to_owned()]
}

/// What runs before a PowerShell command: UTF-8 for everything it reads
/// and writes, so output decodes the same as bash's.
pub const PWSH_PREAMBLE: &str = "$OutputEncoding = [Console]::InputEncoding = \
[Console]::OutputEncoding = [System.Text.UTF8Encoding]::new($false); ";

/// The PowerShell argv: `pwsh -NoLogo -NoProfile -NonInteractive -Command
/// PREAMBLE+CMD`.
pub fn pwsh_argv(command: &str) -> Vec<String> {
    [
        "pwsh",
        "-NoLogo",
        "-NoProfile",
        "-NonInteractive",
        "-Command",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([format!("{PWSH_PREAMBLE}{command}")])
    .collect()
}

/// The mode's name as it appears in messages and JSON (`read-only`, …).
pub fn mode_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::ReadOnly => "read-only",
        SandboxMode::WorkspaceWrite => "workspace-write",
        SandboxMode::DangerFullAccess => "danger-full-access",
    }
}
