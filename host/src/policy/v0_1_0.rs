//! The binding layer for `cordon:sandbox@0.1.0`: generated bindings, the
//! host's implementation of the `sandbox` import, and conversions between
//! the WIT types of this version and the host's neutral [`model`](crate::model).
//!
//! A later interface version gets a sibling module like this one; the
//! neutral core in [`super`] does not change.

use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::model;
use crate::sandbox::Wrap;

use super::StoreState;

wasmtime::component::bindgen!({
    path: "../wit",
    world: "executor-policy",
    with: {
        "cordon:sandbox/sandbox.confined": crate::sandbox::Wrap,
    },
    imports: { default: trappable },
});

pub use self::cordon::sandbox::types as wit;
pub use self::exports::cordon::sandbox::executor::Launch as WitLaunch;

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wit::Host for StoreState {}

impl self::cordon::sandbox::sandbox::Host for StoreState {
    fn confine(
        &mut self,
        argv: Vec<String>,
        policy: wit::SandboxPolicy,
    ) -> wasmtime::Result<Result<Resource<Wrap>, wit::Unavailable>> {
        let policy = model::SandboxPolicy::from(policy);
        let Some(confiner) = self.confiner.clone() else {
            // Only `plan` may confine; any other phase is a policy bug.
            return Ok(Err(wit::Unavailable {
                mode: policy.mode.into(),
                detail: Some("sandbox.confine may only be called during plan".into()),
            }));
        };
        match confiner.confine(&argv, &policy) {
            Ok(wrap) => Ok(Ok(self.table.push(wrap)?)),
            Err(unavailable) => Ok(Err(wit::Unavailable {
                mode: unavailable.mode.into(),
                detail: unavailable.detail,
            })),
        }
    }
}

impl self::cordon::sandbox::sandbox::HostConfined for StoreState {
    fn argv(&mut self, wrap: Resource<Wrap>) -> wasmtime::Result<Vec<String>> {
        Ok(self.table.get(&wrap)?.argv().to_vec())
    }

    fn facts(&mut self, wrap: Resource<Wrap>) -> wasmtime::Result<wit::WrapFacts> {
        Ok(self.table.get(&wrap)?.facts().clone().into())
    }

    fn drop(&mut self, wrap: Resource<Wrap>) -> wasmtime::Result<()> {
        self.table.delete(wrap)?;
        Ok(())
    }
}

/// Take a returned `confined` handle out of the table: the host now owns
/// the wrap it issued. A handle this store did not issue fails here.
pub(super) fn take_wrap(table: &mut ResourceTable, wrap: Resource<Wrap>) -> wasmtime::Result<Wrap> {
    Ok(table.delete(wrap)?)
}

/// A fresh, deny-all WASI context: no preopens, no environment, no
/// arguments, no stdio, no network.
pub(super) fn deny_all_wasi() -> WasiCtx {
    let mut builder = WasiCtx::builder();
    builder
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    builder.build()
}

// ---- conversions: model -> WIT -------------------------------------------

impl From<model::SandboxMode> for wit::SandboxMode {
    fn from(mode: model::SandboxMode) -> Self {
        match mode {
            model::SandboxMode::ReadOnly => wit::SandboxMode::ReadOnly,
            model::SandboxMode::WorkspaceWrite => wit::SandboxMode::WorkspaceWrite,
            model::SandboxMode::DangerFullAccess => wit::SandboxMode::DangerFullAccess,
        }
    }
}

impl From<model::Enforcement> for wit::Enforcement {
    fn from(enforcement: model::Enforcement) -> Self {
        match enforcement {
            model::Enforcement::Full => wit::Enforcement::Full,
            model::Enforcement::Partial => wit::Enforcement::Partial,
        }
    }
}

impl From<model::Backend> for wit::Backend {
    fn from(backend: model::Backend) -> Self {
        match backend {
            model::Backend::Bwrap => wit::Backend::Bwrap,
            model::Backend::Landlock => wit::Backend::Landlock,
            model::Backend::Seatbelt => wit::Backend::Seatbelt,
            model::Backend::RunnerCommand => wit::Backend::RunnerCommand,
        }
    }
}

impl From<model::WrapFacts> for wit::WrapFacts {
    fn from(facts: model::WrapFacts) -> Self {
        wit::WrapFacts {
            backend: facts.backend.into(),
            enforcement: facts.enforcement.into(),
            signatures: wit::Signatures {
                runner_failure: facts.signatures.runner_failure,
                runner_failure_exit: facts.signatures.runner_failure_exit,
                runner_notices: facts.signatures.runner_notices,
                denial: facts.signatures.denial,
            },
        }
    }
}

impl From<model::LaunchFacts> for wit::LaunchFacts {
    fn from(facts: model::LaunchFacts) -> Self {
        wit::LaunchFacts {
            background: facts.background,
            wrap: facts.wrap.map(Into::into),
        }
    }
}

impl From<model::Outcome> for wit::Outcome {
    fn from(outcome: model::Outcome) -> Self {
        wit::Outcome {
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            timed_out: outcome.timed_out,
            aborted: outcome.aborted,
            stderr_tail: outcome.stderr_tail,
            runner_status: match outcome.runner_status {
                model::RunnerStatus::Launched => wit::RunnerStatus::Launched,
                model::RunnerStatus::Failed(detail) => wit::RunnerStatus::Failed(detail),
                model::RunnerStatus::Unknown => wit::RunnerStatus::Unknown,
            },
        }
    }
}

/// A path handed to a component; components speak UTF-8 only.
pub(super) fn path_text(path: &std::path::Path, field: &str) -> Result<String, String> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{field} {} is not valid UTF-8", path.display()))
}

impl TryFrom<&model::SandboxPolicy> for wit::SandboxPolicy {
    type Error = String;

    fn try_from(policy: &model::SandboxPolicy) -> Result<Self, String> {
        Ok(wit::SandboxPolicy {
            mode: policy.mode.into(),
            workspace_root: path_text(&policy.workspace_root, "workspace root")?,
        })
    }
}

impl TryFrom<&model::ExecRequest> for wit::ExecRequest {
    type Error = String;

    fn try_from(request: &model::ExecRequest) -> Result<Self, String> {
        Ok(wit::ExecRequest {
            command: request.command.clone(),
            workdir: request
                .workdir
                .as_deref()
                .map(|dir| path_text(dir, "workdir"))
                .transpose()?,
            timeout_ms: request.timeout_ms,
            env: request.env.clone(),
            policy: request.policy.as_ref().map(TryInto::try_into).transpose()?,
        })
    }
}

impl TryFrom<&model::Deployment> for wit::Deployment {
    type Error = String;

    fn try_from(deployment: &model::Deployment) -> Result<Self, String> {
        Ok(wit::Deployment {
            policy: (&deployment.policy).try_into()?,
            max_mode: deployment.max_mode.into(),
            workdir: path_text(&deployment.workdir, "deployment workdir")?,
        })
    }
}

impl TryFrom<&model::ExecSpec> for wit::ExecSpec {
    type Error = String;

    fn try_from(spec: &model::ExecSpec) -> Result<Self, String> {
        Ok(wit::ExecSpec {
            command: spec.command.clone(),
            workdir: path_text(&spec.workdir, "workdir")?,
            timeout_ms: spec.timeout_ms,
            env: spec.env.clone(),
            policy: (&spec.policy).try_into()?,
        })
    }
}

// ---- conversions: WIT -> model -------------------------------------------

impl From<wit::SandboxMode> for model::SandboxMode {
    fn from(mode: wit::SandboxMode) -> Self {
        match mode {
            wit::SandboxMode::ReadOnly => model::SandboxMode::ReadOnly,
            wit::SandboxMode::WorkspaceWrite => model::SandboxMode::WorkspaceWrite,
            wit::SandboxMode::DangerFullAccess => model::SandboxMode::DangerFullAccess,
        }
    }
}

impl From<wit::Enforcement> for model::Enforcement {
    fn from(enforcement: wit::Enforcement) -> Self {
        match enforcement {
            wit::Enforcement::Full => model::Enforcement::Full,
            wit::Enforcement::Partial => model::Enforcement::Partial,
        }
    }
}

impl From<wit::SandboxPolicy> for model::SandboxPolicy {
    fn from(policy: wit::SandboxPolicy) -> Self {
        model::SandboxPolicy::new(policy.mode.into(), policy.workspace_root)
    }
}

impl From<wit::ExecSpec> for model::ExecSpec {
    fn from(spec: wit::ExecSpec) -> Self {
        model::ExecSpec {
            command: spec.command,
            workdir: spec.workdir.into(),
            timeout_ms: spec.timeout_ms,
            env: spec.env,
            policy: spec.policy.into(),
        }
    }
}

impl From<wit::SandboxFacts> for model::SandboxFacts {
    fn from(facts: wit::SandboxFacts) -> Self {
        model::SandboxFacts {
            mode: facts.mode.into(),
            denied: facts.denied,
            enforcement: facts.enforcement.map(Into::into),
            runner_failed: facts.runner_failed,
        }
    }
}

impl From<wit::ExecError> for crate::RunError {
    fn from(error: wit::ExecError) -> Self {
        match error {
            wit::ExecError::SandboxUnavailable(unavailable) => {
                crate::RunError::SandboxUnavailable {
                    mode: unavailable.mode.into(),
                    detail: unavailable.detail,
                }
            }
            wit::ExecError::InvalidRequest(message) => crate::RunError::InvalidRequest(message),
        }
    }
}

impl From<wit::ExecutorInfo> for super::ExecutorInfo {
    fn from(info: wit::ExecutorInfo) -> Self {
        super::ExecutorInfo {
            name: info.name,
            version: info.version,
            shell: info.shell,
            default_mode: info.default_mode.into(),
        }
    }
}
