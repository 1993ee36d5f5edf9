//! The binding layer for `cordon:sandbox@0.1.0` (WIT frozen in
//! `wit/0.1.0/`): its world, its generated bindings, its calls, the host's
//! implementation of its `sandbox` import, and conversions between its WIT
//! types and the host's neutral [`model`](crate::model).
//!
//! Everything that names this version lives here; the neutral core in
//! [`super`] dispatches to [`Binding`] and never sees a generated type. A
//! later version gets a sibling module shaped like this one.

use wasmtime::component::{Component, HasSelf, Linker, Resource};
use wasmtime::{Engine, Store};

use crate::error::RunError;
use crate::model::{
    self, Decision, Deployment, ExecRequest, ExecSpec, LaunchFacts, Outcome, SandboxFacts,
};
use crate::sandbox::Wrap;

use super::call::StoreState;
use super::shared::World;
use super::shared::path_text;
use super::{ExecutorInfo, Launch, Phase};

wasmtime::component::bindgen!({
    path: "wit/0.1.0",
    world: "executor-policy",
    with: {
        "cordon:sandbox/sandbox.confined": crate::sandbox::Wrap,
    },
    imports: { default: trappable },
});

use self::cordon::sandbox::types as wit;
use self::exports::cordon::sandbox::executor::Launch as WitLaunch;

/// The world this layer binds.
pub(super) const WORLD: World = World {
    name: "cordon:sandbox/executor-policy@0.1.0",
    export: "cordon:sandbox/executor@0.1.0",
    also_exports: &[],
    imports: &["cordon:sandbox/types@0.1.0", "cordon:sandbox/sandbox@0.1.0"],
};

/// A component of this version, linked and ready to instantiate per call.
#[derive(Clone)]
pub(super) struct Binding {
    pre: ExecutorPolicyPre<StoreState>,
}

impl Binding {
    /// Link `component` against this version's imports (and the deny-all
    /// WASI it may import).
    pub(super) fn link(engine: &Engine, component: &Component) -> wasmtime::Result<Self> {
        let mut linker = Linker::<StoreState>::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        ExecutorPolicy::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        let pre = ExecutorPolicyPre::new(linker.instantiate_pre(component)?)?;
        Ok(Binding { pre })
    }

    /// `describe`.
    pub(super) fn describe(&self, store: &mut Store<StoreState>) -> wasmtime::Result<ExecutorInfo> {
        let bindings = self.pre.instantiate(&mut *store)?;
        let info = bindings.cordon_sandbox_executor().call_describe(store)?;
        Ok(info.into())
    }

    /// A fresh instance in `store`, for the calls of one run's
    /// preparation (`resolve`, then `plan`).
    pub(super) fn instantiate(&self, store: &mut Store<StoreState>) -> wasmtime::Result<Instance> {
        Ok(Instance(self.pre.instantiate(&mut *store)?))
    }

    /// `settle`.
    pub(super) fn settle(
        &self,
        store: &mut Store<StoreState>,
        spec: &ExecSpec,
        facts: &LaunchFacts,
        outcome: &Outcome,
    ) -> wasmtime::Result<Result<Option<SandboxFacts>, RunError>> {
        let spec = match wit::ExecSpec::try_from(spec) {
            Ok(spec) => spec,
            Err(reason) => return Ok(Err(RunError::InvalidRequest(reason))),
        };
        let facts: wit::LaunchFacts = facts.clone().into();
        let outcome: wit::Outcome = outcome.clone().into();
        let bindings = self.pre.instantiate(&mut *store)?;
        let stamped = bindings
            .cordon_sandbox_executor()
            .call_settle(store, &spec, &facts, &outcome)?;
        Ok(stamped
            .map(|facts| facts.map(Into::into))
            .map_err(Into::into))
    }
}

/// One instance of a component: the host keeps a run's `resolve` instance
/// for its `plan`; runs never share one.
pub(super) struct Instance(ExecutorPolicy);

impl Instance {
    /// `resolve`. The outer error is the call's failure; the inner one
    /// the request's (a path that is not UTF-8) or the component's answer.
    /// A `0.1.0` component always allows, and cannot name the grant beyond
    /// mode and root: its spec keeps the rest of the grant it was handed.
    pub(super) fn resolve(
        &self,
        store: &mut Store<StoreState>,
        request: &ExecRequest,
        deployment: &Deployment,
    ) -> wasmtime::Result<Result<Decision, RunError>> {
        let handed = request.policy.as_ref().unwrap_or(&deployment.policy);
        let converted = wit::ExecRequest::try_from(request)
            .and_then(|request| Ok((request, wit::Deployment::try_from(deployment)?)));
        let (request, deployment) = match converted {
            Ok(converted) => converted,
            Err(reason) => return Ok(Err(RunError::InvalidRequest(reason))),
        };
        let spec = self
            .0
            .cordon_sandbox_executor()
            .call_resolve(store, &request, &deployment)?;
        Ok(spec
            .map(|spec| {
                let mut spec = model::ExecSpec::from(spec);
                spec.policy = model::SandboxPolicy {
                    mode: spec.policy.mode,
                    workspace_root: spec.policy.workspace_root,
                    ..handed.clone()
                };
                Decision::Allow(spec)
            })
            .map_err(Into::into))
    }

    /// `plan`: a confined launch is the wrap the host issued in this store.
    pub(super) fn plan(
        &self,
        store: &mut Store<StoreState>,
        spec: &ExecSpec,
    ) -> wasmtime::Result<Result<Launch, RunError>> {
        store.data_mut().planned = Some(spec.policy.clone());
        let spec = match wit::ExecSpec::try_from(spec) {
            Ok(spec) => spec,
            Err(reason) => return Ok(Err(RunError::InvalidRequest(reason))),
        };
        let launch = match self
            .0
            .cordon_sandbox_executor()
            .call_plan(&mut *store, &spec)?
        {
            Ok(launch) => launch,
            Err(error) => return Ok(Err(error.into())),
        };
        Ok(match launch {
            WitLaunch::Unconfined(argv) => Ok(Launch::Unconfined(argv)),
            // A handle this store did not issue fails here.
            WitLaunch::Confined(handle) => match store.data_mut().table.delete(handle) {
                Ok(wrap) => Ok(Launch::Confined(Box::new(wrap))),
                Err(err) => Err(RunError::PolicyFailed {
                    phase: Phase::Plan,
                    reason: format!("returned a confinement the host did not issue: {err}"),
                }),
            },
        })
    }
}

impl wit::Host for StoreState {}

impl self::cordon::sandbox::sandbox::Host for StoreState {
    fn confine(
        &mut self,
        argv: Vec<String>,
        policy: wit::SandboxPolicy,
    ) -> wasmtime::Result<Result<Resource<Wrap>, wit::Unavailable>> {
        self.admit_confine(&argv)?;
        let mut policy = model::SandboxPolicy::from(policy);
        // The spec's grant, which this version cannot name, rides along
        // when the component confines for the spec's mode and root.
        if let Some(planned) = &self.planned
            && (planned.mode, &planned.workspace_root) == (policy.mode, &policy.workspace_root)
        {
            policy = planned.clone();
        }
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

// ---- conversions ---------------------------------------------------------

super::shared::conversions!();

// ---- conversions: model -> WIT (this version's own) -----------------------

impl TryFrom<&model::SandboxPolicy> for wit::SandboxPolicy {
    type Error = String;

    fn try_from(policy: &model::SandboxPolicy) -> Result<Self, String> {
        Ok(wit::SandboxPolicy {
            mode: policy.mode.into(),
            workspace_root: path_text(&policy.workspace_root, "workspace root")?,
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

// ---- conversions: WIT -> model (this version's own) -----------------------

impl From<wit::SandboxPolicy> for model::SandboxPolicy {
    fn from(policy: wit::SandboxPolicy) -> Self {
        model::SandboxPolicy::new(policy.mode.into(), policy.workspace_root)
    }
}
