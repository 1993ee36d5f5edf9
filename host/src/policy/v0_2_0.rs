//! The binding layer for `cordon:sandbox@0.2.0` (WIT in `wit/0.2.0/`): its
//! world, its generated bindings, its calls, the host's implementation of
//! its `sandbox` import, and conversions between its WIT types and the
//! host's neutral [`model`](crate::model). This version adds the grant
//! (writable roots, protected and deny-read paths, network, sockets), the
//! operator's settings (`validate-settings`) and decisions (allow, deny,
//! ask) to `0.1.0`.
//!
//! Everything that names this version lives here; the neutral core in
//! [`super`] dispatches to [`Binding`] and never sees a generated type. A
//! later version gets a sibling module shaped like this one.

use wasmtime::component::{Component, ComponentExportIndex, HasSelf, Linker, Resource};
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
    path: "wit/0.2.0",
    world: "executor-policy",
    with: {
        "cordon:sandbox/sandbox.confined": crate::sandbox::Wrap,
    },
    imports: { default: trappable },
});

/// The optional `render` export, found in an instance of the same
/// component.
mod rendering {
    wasmtime::component::bindgen!({
        path: "wit/0.2.0",
        world: "renderer",
    });
}

use self::cordon::sandbox::types as wit;
use self::exports::cordon::sandbox::executor::Launch as WitLaunch;

/// The world this layer binds.
pub(super) const WORLD: World = World {
    name: "cordon:sandbox/executor-policy@0.2.0",
    export: "cordon:sandbox/executor@0.2.0",
    also_exports: &[],
    imports: &["cordon:sandbox/types@0.2.0", "cordon:sandbox/sandbox@0.2.0"],
};

/// A component of this version, linked and ready to instantiate per call.
#[derive(Clone)]
pub(super) struct Binding {
    pre: ExecutorPolicyPre<StoreState>,
    /// Where a run's own calls sit in the component.
    run_calls: RunCalls,
    /// The component's `render` export, when it has one.
    render: Option<rendering::RendererPre<StoreState>>,
}

/// Where the calls a run makes (`resolve`, `plan`, `settle`, and
/// `connect` for a run behind the allow-list proxy) sit in the component,
/// found once when it is linked. An instance made for a run looks up and
/// type-checks only the export it calls: the generated bindings'
/// `instantiate` type-checks all six exports, four of them taking the
/// whole `exec-spec`, at every instantiation (measured: a quarter of an
/// instantiation's time, a tenth of a policy round trip).
#[derive(Clone)]
struct RunCalls {
    resolve: ComponentExportIndex,
    plan: ComponentExportIndex,
    settle: ComponentExportIndex,
    connect: ComponentExportIndex,
}

impl RunCalls {
    /// The run's exports of `component`'s executor interface (linking it
    /// through the generated bindings has already found them all).
    fn find(component: &Component) -> wasmtime::Result<Self> {
        let find = |name: &str| export_index(component, WORLD.export, name);
        Ok(RunCalls {
            resolve: find("resolve")?,
            plan: find("plan")?,
            settle: find("settle")?,
            connect: find("connect")?,
        })
    }
}

/// Where function `name` of exported interface `interface` sits in
/// `component`, for an instance to type-check that export alone.
pub(super) fn export_index(
    component: &Component,
    interface: &str,
    name: &str,
) -> wasmtime::Result<ComponentExportIndex> {
    let exported = component
        .get_export_index(None, interface)
        .ok_or_else(|| wasmtime::format_err!("the component does not export `{interface}`"))?;
    component
        .get_export_index(Some(&exported), name)
        .ok_or_else(|| wasmtime::format_err!("`{interface}` has no function `{name}`"))
}

impl Binding {
    /// Link `component` against this version's imports (and the deny-all
    /// WASI it may import).
    pub(super) fn link(engine: &Engine, component: &Component) -> wasmtime::Result<Self> {
        let mut linker = Linker::<StoreState>::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        ExecutorPolicy::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        let instance = linker.instantiate_pre(component)?;
        let render = rendering::RendererPre::new(instance.clone()).ok();
        let pre = ExecutorPolicyPre::new(instance)?;
        let run_calls = RunCalls::find(component)?;
        Ok(Binding {
            pre,
            run_calls,
            render,
        })
    }

    /// Whether the component exports `render`.
    pub(super) fn renders(&self) -> bool {
        self.render.is_some()
    }

    /// `render`: the text the model reads, or none for the host's own.
    pub(super) fn render(
        &self,
        store: &mut Store<StoreState>,
        command: &str,
        outcome: &crate::model::Told,
    ) -> wasmtime::Result<Option<String>> {
        let Some(pre) = &self.render else {
            return Ok(None);
        };
        let bindings = pre.instantiate(&mut *store)?;
        bindings
            .cordon_sandbox_render()
            .call_render(store, command, &told(outcome))
    }

    /// `describe`.
    pub(super) fn describe(&self, store: &mut Store<StoreState>) -> wasmtime::Result<ExecutorInfo> {
        let bindings = self.pre.instantiate(&mut *store)?;
        let info = bindings.cordon_sandbox_executor().call_describe(store)?;
        Ok(info.into())
    }

    /// `validate-settings`: the component's own message when it refuses.
    pub(super) fn validate_settings(
        &self,
        store: &mut Store<StoreState>,
        settings: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        let bindings = self.pre.instantiate(&mut *store)?;
        bindings
            .cordon_sandbox_executor()
            .call_validate_settings(store, settings)
    }

    /// A fresh instance in `store`, for the calls of one run's
    /// preparation (`resolve`, then `plan`).
    pub(super) fn instantiate(&self, store: &mut Store<StoreState>) -> wasmtime::Result<Instance> {
        Ok(Instance {
            instance: self.pre.instance_pre().instantiate(&mut *store)?,
            calls: self.run_calls.clone(),
        })
    }

    /// The linked component, for a later version's layer to find its own
    /// exports in (world `0.3.0`'s `requests`).
    pub(super) fn instance_pre(&self) -> &wasmtime::component::InstancePre<StoreState> {
        self.pre.instance_pre()
    }

    /// An instance kept for many `connect` calls of one run.
    pub(super) fn connecting(
        &self,
        store: &mut Store<StoreState>,
        spec: &ExecSpec,
    ) -> wasmtime::Result<Result<Connecting, String>> {
        let instance = self.pre.instance_pre().instantiate(&mut *store)?;
        Ok(self.connecting_on(&instance, spec))
    }

    /// [`Binding::connecting`] on an instance the caller made (and may
    /// call other exports of).
    pub(super) fn connecting_on(
        &self,
        instance: &wasmtime::component::Instance,
        spec: &ExecSpec,
    ) -> Result<Connecting, String> {
        Ok(Connecting {
            instance: *instance,
            connect: self.run_calls.connect,
            spec: wit::ExecSpec::try_from(spec)?,
        })
    }

    /// `connect`: the component's answer for one connection.
    pub(super) fn connect(
        &self,
        store: &mut Store<StoreState>,
        spec: &ExecSpec,
        host: &str,
        port: u16,
    ) -> wasmtime::Result<Result<Result<(), String>, RunError>> {
        Ok(match self.connecting(store, spec)? {
            Ok(instance) => Ok(instance.connect(store, host, port)?),
            Err(reason) => Err(RunError::InvalidRequest(reason)),
        })
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
        let instance = self.pre.instance_pre().instantiate(&mut *store)?;
        let settle = instance.get_typed_func::<
            (&wit::ExecSpec, &wit::LaunchFacts, &wit::Outcome),
            (Result<Option<wit::SandboxFacts>, wit::ExecError>,),
        >(&mut *store, &self.run_calls.settle)?;
        let (stamped,) = settle.call(&mut *store, (&spec, &facts, &outcome))?;
        Ok(stamped
            .map(|facts| facts.map(Into::into))
            .map_err(Into::into))
    }
}

/// One instance of a component: the host keeps a run's `resolve` instance
/// for its `plan`, so a run costs one instance less; runs never share one.
pub(super) struct Instance {
    instance: wasmtime::component::Instance,
    calls: RunCalls,
}

impl Instance {
    /// `resolve`. The outer error is the call's failure; the inner one
    /// the request's (a path that is not UTF-8) or the component's answer.
    pub(super) fn resolve(
        &self,
        store: &mut Store<StoreState>,
        request: &ExecRequest,
        deployment: &Deployment,
    ) -> wasmtime::Result<Result<Decision, RunError>> {
        let converted = wit::ExecRequest::try_from(request)
            .and_then(|request| Ok((request, wit::Deployment::try_from(deployment)?)));
        let (request, deployment) = match converted {
            Ok(converted) => converted,
            Err(reason) => return Ok(Err(RunError::InvalidRequest(reason))),
        };
        let resolve = self.instance.get_typed_func::<
            (&wit::ExecRequest, &wit::Deployment),
            (Result<wit::Decision, wit::ExecError>,),
        >(&mut *store, &self.calls.resolve)?;
        let (decision,) = resolve.call(&mut *store, (&request, &deployment))?;
        Ok(decision.map(Into::into).map_err(Into::into))
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
        let plan = self
            .instance
            .get_typed_func::<(&wit::ExecSpec,), (Result<WitLaunch, wit::ExecError>,)>(
                &mut *store,
                &self.calls.plan,
            )?;
        let launch = match plan.call(&mut *store, (&spec,))?.0 {
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

/// One instance of a component, and the spec it decides connections for.
pub(super) struct Connecting {
    instance: wasmtime::component::Instance,
    /// Where `connect` sits (see [`RunCalls`]).
    connect: ComponentExportIndex,
    spec: wit::ExecSpec,
}

impl Connecting {
    /// The spec, as this version hands it over.
    pub(super) fn spec(&self) -> &wit::ExecSpec {
        &self.spec
    }

    /// `connect` on this instance.
    pub(super) fn connect(
        &self,
        store: &mut Store<StoreState>,
        host: &str,
        port: u16,
    ) -> wasmtime::Result<Result<(), String>> {
        let connect = self
            .instance
            .get_typed_func::<(&wit::ExecSpec, &str, u16), (Result<(), String>,)>(
                &mut *store,
                &self.connect,
            )?;
        Ok(connect.call(&mut *store, (&self.spec, host, port))?.0)
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
        // This world has no word for an inspection mark: the endpoints the
        // planned spec marks stay marked.
        if let Some(planned) = &self.planned {
            policy.network.keep_inspection_marks(&planned.network);
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

/// Paths handed to a component.
fn paths_text(paths: &[std::path::PathBuf], field: &str) -> Result<Vec<String>, String> {
    paths.iter().map(|path| path_text(path, field)).collect()
}

impl From<&model::Network> for wit::Network {
    fn from(network: &model::Network) -> Self {
        match network {
            model::Network::None => wit::Network::None,
            model::Network::Full => wit::Network::Full,
            model::Network::Allow(endpoints) => wit::Network::Allow(
                endpoints
                    .iter()
                    .map(|e| wit::Endpoint {
                        host: e.host.clone(),
                        port: e.port,
                    })
                    .collect(),
            ),
        }
    }
}

impl TryFrom<&model::SandboxPolicy> for wit::SandboxPolicy {
    type Error = String;

    fn try_from(policy: &model::SandboxPolicy) -> Result<Self, String> {
        Ok(wit::SandboxPolicy {
            mode: policy.mode.into(),
            workspace_root: path_text(&policy.workspace_root, "workspace root")?,
            writable_roots: paths_text(&policy.writable_roots, "writable root")?,
            protected: paths_text(&policy.protected, "protected path")?,
            unprotected: policy.unprotected.clone(),
            deny_read: paths_text(&policy.deny_read, "deny-read path")?,
            network: (&policy.network).into(),
            sockets: paths_text(&policy.sockets, "socket")?,
        })
    }
}

impl TryFrom<&model::Deployment> for wit::Deployment {
    type Error = String;

    fn try_from(deployment: &model::Deployment) -> Result<Self, String> {
        Ok(wit::Deployment {
            policy: (&deployment.policy).try_into()?,
            ceiling: wit::Ceiling {
                max_mode: deployment.max_mode.into(),
                allowed_roots: paths_text(&deployment.allowed_roots, "allowed root")?,
                max_network: (&deployment.max_network).into(),
                sockets: paths_text(&deployment.sockets, "socket")?,
                liftable: deployment.liftable.clone(),
            },
            workdir: path_text(&deployment.workdir, "deployment workdir")?,
            settings: deployment.settings.clone(),
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
            approved: request.approved,
        })
    }
}

// ---- conversions: WIT -> model (this version's own) -----------------------

impl From<wit::Network> for model::Network {
    fn from(network: wit::Network) -> Self {
        match network {
            wit::Network::None => model::Network::None,
            wit::Network::Full => model::Network::Full,
            wit::Network::Allow(endpoints) => model::Network::Allow(
                endpoints
                    .into_iter()
                    .map(|e| model::Endpoint {
                        host: e.host,
                        port: e.port,
                        // World 0.2.0 cannot mark one: the host carries the
                        // handed grant's marks over (`keep_inspection_marks`).
                        inspect: false,
                    })
                    .collect(),
            ),
        }
    }
}

impl From<wit::SandboxPolicy> for model::SandboxPolicy {
    fn from(policy: wit::SandboxPolicy) -> Self {
        let paths = |list: Vec<String>| list.into_iter().map(Into::into).collect();
        model::SandboxPolicy {
            mode: policy.mode.into(),
            workspace_root: policy.workspace_root.into(),
            writable_roots: paths(policy.writable_roots),
            protected: paths(policy.protected),
            unprotected: policy.unprotected,
            deny_read: paths(policy.deny_read),
            network: policy.network.into(),
            sockets: paths(policy.sockets),
        }
    }
}

impl From<wit::Decision> for Decision {
    fn from(decision: wit::Decision) -> Self {
        match decision {
            wit::Decision::Allow(spec) => Decision::Allow(spec.into()),
            wit::Decision::Deny(reason) => Decision::Deny(reason),
            wit::Decision::Ask(approval) => Decision::Ask {
                reason: approval.reason,
                policy: approval.policy.into(),
            },
        }
    }
}

/// An outcome as the `render` export takes it.
fn told(outcome: &crate::model::Told) -> rendering::exports::cordon::sandbox::render::Outcome {
    use crate::model::Told;
    use rendering::cordon::sandbox::types::SandboxMode as Mode;
    use rendering::exports::cordon::sandbox::render::{Finished, Outcome};
    match outcome {
        Told::Finished(result) => {
            let sandbox = result.sandbox.as_ref();
            Outcome::Finished(Finished {
                exit_code: result.exit_code,
                signal: result.signal.map(model::signal_name::of),
                timed_out: result.timed_out,
                timeout_ms: result.timeout_ms,
                stdout: result.stdout.text.clone(),
                stderr: result.stderr.text.clone(),
                truncated: result.stdout.truncated || result.stderr.truncated,
                mode: match sandbox.map(|s| s.mode) {
                    Some(model::SandboxMode::ReadOnly) => Mode::ReadOnly,
                    Some(model::SandboxMode::WorkspaceWrite) => Mode::WorkspaceWrite,
                    None | Some(model::SandboxMode::DangerFullAccess) => Mode::DangerFullAccess,
                },
                denied: sandbox.is_some_and(|s| s.denied),
                runner_failed: sandbox.is_some_and(|s| s.runner_failed),
                refused_connections: result
                    .grant
                    .iter()
                    .flat_map(|g| &g.refused)
                    .map(|r| format!("{}:{} — {}", r.host, r.port, r.reason))
                    .collect(),
            })
        }
        Told::Refused(reason) => Outcome::Refused(reason.clone()),
        Told::NeedsApproval(reason) => Outcome::NeedsApproval(reason.clone()),
        Told::Declined(reason) => Outcome::Declined(reason.clone()),
        Told::Failed { code, message } => Outcome::Failed((code.clone(), message.clone())),
    }
}
