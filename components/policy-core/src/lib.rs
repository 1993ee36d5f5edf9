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
pub mod network;
pub mod plan;
pub mod resolve;
#[cfg(feature = "rules")]
pub mod rules;
pub mod settings;
#[cfg(feature = "shell")]
pub mod shell;

/// Bindings generated from the `cordon:sandbox@0.2.0` WIT package.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/0.2.0",
        world: "executor-policy",
        pub_export_macro: true,
        default_bindings_module: "cordon_policy::bindings",
        additional_type_attributes: {
            "cordon:sandbox/types@0.2.0/endpoint": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.2.0/network": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.2.0/sandbox-policy": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.2.0/exec-spec": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.2.0/sandbox-facts": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.2.0/unavailable": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.2.0/exec-error": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.2.0/approval": [#[derive(PartialEq, Eq)]],
            "cordon:sandbox/types@0.2.0/decision": [#[derive(PartialEq, Eq)]],
        },
    });
}

pub use bindings::cordon::sandbox::types::{
    Approval, Backend, Ceiling, Decision, Deployment, Endpoint, Enforcement, ExecError,
    ExecRequest, ExecSpec, ExecutorInfo, LaunchFacts, Network, Outcome, RunnerStatus, SandboxFacts,
    SandboxMode, SandboxPolicy, Signatures, Unavailable, WrapFacts,
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

    /// Check the operator's settings (JSON text) at load. The default
    /// takes none: anything but `{}` is refused, so a setting meant for
    /// another component is not silently ignored.
    fn validate_settings(settings: &str) -> Result<(), String> {
        settings::expect_none(settings)
    }

    /// Turn a request into a fully-defaulted spec.
    fn resolve(request: ExecRequest, deployment: Deployment) -> Result<ExecSpec, ExecError> {
        resolve::resolve(request, &deployment, Self::default_env())
    }

    /// Decide a request: the default allows what [`Executor::resolve`]
    /// makes of it.
    fn decide(request: ExecRequest, deployment: Deployment) -> Result<Decision, ExecError> {
        Self::resolve(request, deployment).map(Decision::Allow)
    }

    /// Build and confine the argv.
    fn plan(spec: ExecSpec) -> Result<Launch, ExecError> {
        plan::plan(&spec, Self::argv(&spec.command), plan::host_confine)
    }

    /// Decide one connection of a run: the default allows what the spec's
    /// network grant names ([`network::allows`]).
    fn connect(spec: ExecSpec, host: String, port: u16) -> Result<(), String> {
        network::decide(&spec.policy.network, &host, port)
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

    fn validate_settings(settings: String) -> Result<(), String> {
        T::validate_settings(&settings)
    }

    fn resolve(request: ExecRequest, deployment: Deployment) -> Result<Decision, ExecError> {
        T::decide(request, deployment)
    }

    fn plan(spec: ExecSpec) -> Result<Launch, ExecError> {
        T::plan(spec)
    }

    fn connect(spec: ExecSpec, host: String, port: u16) -> Result<(), String> {
        T::connect(spec, host, port)
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

/// A policy of `mode` at `root` granting nothing more (no network).
pub fn sandbox_policy(mode: SandboxMode, root: &str) -> SandboxPolicy {
    SandboxPolicy {
        mode,
        workspace_root: root.to_owned(),
        writable_roots: vec![],
        protected: vec![],
        unprotected: vec![],
        deny_read: vec![],
        network: Network::None,
        sockets: vec![],
    }
}

/// The deployment a host hands over when its operator configured nothing:
/// read-only at `dir`, ceiling `workspace-write`, any root, the network as
/// the host has it, no settings. For a component's own unit tests.
pub fn deployment_in(dir: &str) -> Deployment {
    Deployment {
        policy: sandbox_policy(SandboxMode::ReadOnly, dir),
        ceiling: Ceiling {
            max_mode: SandboxMode::WorkspaceWrite,
            allowed_roots: vec![],
            max_network: Network::Full,
            sockets: vec![],
            liftable: vec![],
        },
        workdir: dir.to_owned(),
        settings: "{}".to_owned(),
    }
}

/// The mode's name as it appears in messages and JSON (`read-only`, …).
pub fn mode_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::ReadOnly => "read-only",
        SandboxMode::WorkspaceWrite => "workspace-write",
        SandboxMode::DangerFullAccess => "danger-full-access",
    }
}
