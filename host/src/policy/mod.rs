//! Policy components: loading one, and calling it — version-neutral.
//!
//! A component is code an operator deploys without rebuilding the host, so
//! it is treated as untrusted for safety: it is linked with a deny-all WASI
//! (no files, environment, stdio or network), every call runs under an epoch
//! deadline and a memory cap (`call.rs`), and any trap or malformed return
//! becomes a [`RunError::PolicyFailed`] for that run (a failure to load is a
//! [`LoadError`]). The host checks what a component returns (see
//! [`crate::run`]); it never trusts it to enforce invariants.
//!
//! This module names no interface version. A component is checked against
//! the worlds this host supports (`world.rs`), and [`Policy`] holds the
//! binding layer of the one it was built against — one module per version
//! (`v0_1_0`, `v0_2_0`, `v0_3_0`, each with its WIT frozen in `wit/<version>/`), each
//! owning its generated bindings and the conversions to the neutral
//! [`model`](crate::model). Adding a version adds a module and a variant of
//! the dispatch enum; the compiler then names every place that must call it.
//!
//! The component is compiled once and linked once per [`Policy`]; each call
//! gets a fresh store and instance (a few µs), which is what makes
//! components stateless between calls — except that a run's `resolve` and
//! `plan` share one ([`Policy::begin`]): one instance less per run, and
//! still nothing carried from one run to the next.

pub mod builtin;
pub mod cache;
mod call;
mod compilation;
mod engine;
pub mod pool;
mod shared;
mod v0_1_0;
mod v0_2_0;
mod v0_3_0;
mod world;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use wasmtime::Store;
use wasmtime::component::Component;

use crate::error::{Details, ErrorCode, RunError};
use crate::model::{
    Decision, Deployment, ExecRequest, ExecSpec, HttpRequest, LaunchFacts, Outcome, RequestVerdict,
    SandboxFacts, SandboxMode,
};
use crate::sandbox::{Confine, Wrap};

use call::StoreState;
pub use engine::{MAX_MEMORY_BYTES, PolicyEngine};
use world::Version;

/// The full names of the WIT worlds this host loads components built
/// against, newest first (e.g. `cordon:sandbox/executor-policy@0.2.0`).
pub fn supported_worlds() -> Vec<&'static str> {
    Version::ALL
        .iter()
        .map(|version| version.world().name)
        .collect()
}

/// The default policy component (`components/bash-sandbox`), built from
/// source by the host's build script and embedded in the binary.
pub static EMBEDDED_DEFAULT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bash-sandbox.wasm"));

/// `sha256:HEX` of [`EMBEDDED_DEFAULT`], computed by the build script.
pub static EMBEDDED_DIGEST: &str = include_str!(concat!(env!("OUT_DIR"), "/bash-sandbox.sha256"));

/// [`EMBEDDED_DEFAULT`] precompiled by the build script for this
/// architecture's baseline CPU with the host engine's settings (empty for a
/// cross-built host).
static EMBEDDED_PRECOMPILED: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/bash-sandbox.cwasm"));

/// The embedded default, precompiled, when `engine` accepts the artifact
/// (wasmtime checks its version, settings and CPU features).
fn embedded_precompiled(engine: &wasmtime::Engine) -> Option<Component> {
    if EMBEDDED_PRECOMPILED.is_empty() {
        return None;
    }
    // SAFETY: the artifact was written by this binary's build script with
    // this very wasmtime version, and is part of the binary itself (as
    // trusted as the code running this); wasmtime refuses it when the
    // engine's settings or the CPU do not match.
    unsafe { Component::deserialize(engine, EMBEDDED_PRECOMPILED) }.ok()
}

/// The worlds this host can load, newest first. A later interface version
/// is added beside the older ones (with its own binding layer); components
/// built against an older world keep loading.
pub const SUPPORTED_WORLDS: &[&str] = &[v0_3_0::WORLD.name, v0_2_0::WORLD.name, v0_1_0::WORLD.name];

/// Limits that bound every call into a component.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock budget of one call (enforced by epoch interruption).
    pub call_deadline: Duration,
    /// Linear memory a component instance may grow to.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_deadline: Duration::from_millis(1_000),
            memory_bytes: 64 << 20,
        }
    }
}

/// A component's text (a reason, an error) as the host passes it on: one
/// line, bounded, inert ([`crate::text::inert`]: a `connect` refusal's
/// reason reaches a model too).
pub fn bounded_text(text: &str) -> String {
    crate::text::inert(&call::one_line(text)).into_owned()
}

/// The call of a run in which a component failed (defined in the ground
/// floor, [`crate::model`], since errors name it).
pub use crate::model::Phase;

impl PartialEq<&str> for Phase {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Why a component could not be loaded. Every variant reads
/// `policy component failed in load: …` and has the stable code
/// `POLICY_FAILED` (phase `load`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The engine could not be set up.
    #[error("policy component failed in load: {0}")]
    Engine(String),
    /// The bytes are not a component wasmtime can compile, or it cannot be
    /// linked.
    #[error("policy component failed in load: {0}")]
    Invalid(String),
    /// Its imports or exports are not those of a supported world.
    #[error("policy component failed in load: {0}")]
    World(String),
    /// Its `describe` failed.
    #[error("policy component failed in load: {0}")]
    Describe(String),
    /// Its `validate-settings` refused the operator's settings (or failed).
    #[error("policy component failed in load: {0}")]
    Settings(String),
}

impl LoadError {
    /// Always `POLICY_FAILED`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::PolicyFailed
    }

    /// `{"code": "POLICY_FAILED", "phase": "load"}`.
    pub fn details(&self) -> Details {
        crate::error::details(self.code(), serde_json::json!({ "phase": "load" }))
    }

    fn invalid(err: &wasmtime::Error) -> Self {
        LoadError::Invalid(call::one_line(&format!("{err:#}")))
    }
}

/// What a component says about itself (`describe`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorInfo {
    /// Short name.
    pub name: String,
    /// The component's own version.
    pub version: String,
    /// The shell it runs.
    pub shell: String,
    /// Its default mode.
    pub default_mode: SandboxMode,
}

/// What a component's `plan` asks the host to spawn.
#[derive(Debug)]
pub enum Launch {
    /// A wrap the host issued during this plan.
    Confined(Box<Wrap>),
    /// A bare argv (the run pipeline accepts it only under
    /// `danger-full-access` within the ceiling).
    Unconfined(Vec<String>),
}

/// Decides the connections of one run (see [`Policy::connector`]), and
/// its HTTP requests when the component's world has `request`.
pub struct Connector {
    engine: wasmtime::Engine,
    limits: Limits,
    binding: Binding,
    spec: ExecSpec,
    /// The operator's settings `request` is handed.
    settings: String,
    live: std::sync::Mutex<Option<(Store<StoreState>, Connecting)>>,
}

/// The instance a [`Connector`] keeps, in the layer of its world.
enum Connecting {
    V0_2_0(v0_2_0::Connecting),
    V0_3_0(v0_3_0::Connecting),
}

impl Connector {
    /// May the run connect to `host:port`? `Ok(Err(reason))` is a refusal;
    /// a failed call is `POLICY_FAILED` in `connect` (a refusal of that
    /// connection to the proxy). Calls are serialized. Call it off the
    /// async threads (`spawn_blocking`): a guest's stderr blocks on the
    /// runtime.
    pub fn connect(&self, host: &str, port: u16) -> Result<Result<(), String>, RunError> {
        if let Binding::V0_1_0(_) = &self.binding {
            // No `connect` in the component's world: the grant decides.
            return Ok(self.spec.policy.network.decide(host, port));
        }
        let answer = self.on_live(Phase::Connect, |store, connecting| match connecting {
            Connecting::V0_2_0(instance) => instance.connect(store, host, port),
            Connecting::V0_3_0(instance) => instance.executor.connect(store, host, port),
        })?;
        Ok(answer.map_err(|reason| bounded_text(&reason)))
    }

    /// Whether the component decides requests (world `0.3.0`): when it
    /// does not, a request the connection allowed is sent undecided.
    pub fn decides_requests(&self) -> bool {
        matches!(self.binding, Binding::V0_3_0(_))
    }

    /// The component's verdict on one request of the run; a component
    /// without `request` allows every request. A failed call is
    /// `POLICY_FAILED` in `request` (the proxy refuses that request). Call
    /// it off the async threads, like [`Connector::connect`].
    pub fn request(&self, request: &HttpRequest) -> Result<RequestVerdict, RunError> {
        if !self.decides_requests() {
            return Ok(RequestVerdict::Allow);
        }
        let verdict = self.on_live(Phase::Request, |store, connecting| match connecting {
            Connecting::V0_3_0(instance) => instance.request(store, &self.settings, request),
            Connecting::V0_2_0(_) => Ok(RequestVerdict::Allow),
        })?;
        Ok(match verdict {
            RequestVerdict::Deny(reason) => RequestVerdict::Deny(bounded_text(&reason)),
            RequestVerdict::Ask { reason, edits } => RequestVerdict::Ask {
                reason: bounded_text(&reason),
                edits,
            },
            verdict => verdict,
        })
    }

    /// Run `call` on the kept instance, made on first use; a failed call
    /// drops it, so the next one starts afresh.
    fn on_live<R>(
        &self,
        phase: Phase,
        call: impl FnOnce(&mut Store<StoreState>, &Connecting) -> wasmtime::Result<R>,
    ) -> Result<R, RunError> {
        let failed = |reason: String| RunError::PolicyFailed { phase, reason };
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.is_none() {
            let mut store = call::fresh_store(&self.engine, &self.limits, None);
            let made = match &self.binding {
                Binding::V0_3_0(binding) => binding
                    .connecting(&mut store, &self.spec)
                    .map(|made| made.map(Connecting::V0_3_0)),
                Binding::V0_2_0(binding) => binding
                    .connecting(&mut store, &self.spec)
                    .map(|made| made.map(Connecting::V0_2_0)),
                Binding::V0_1_0(_) => {
                    return Err(failed("a 0.1.0 component has no connect".into()));
                }
            };
            let instance = match made {
                Ok(Ok(instance)) => instance,
                Ok(Err(reason)) => return Err(RunError::InvalidRequest(reason)),
                Err(err) => return Err(failed(call::failure(&err, &store).0)),
            };
            *live = Some((store, instance));
        }
        let (store, instance) = live.as_mut().expect("made above");
        call::rearm(store, &self.limits);
        match call(store, instance) {
            Ok(answer) => Ok(answer),
            Err(err) => {
                let reason = call::failure(&err, store).0;
                *live = None;
                Err(failed(reason))
            }
        }
    }
}

/// The binding layer of a loaded component: one variant per world version.
#[derive(Clone)]
enum Binding {
    V0_3_0(v0_3_0::Binding),
    V0_2_0(v0_2_0::Binding),
    V0_1_0(v0_1_0::Binding),
}

impl Binding {
    fn link(
        version: Version,
        engine: &wasmtime::Engine,
        component: &Component,
    ) -> wasmtime::Result<Self> {
        Ok(match version {
            Version::V0_3_0 => Binding::V0_3_0(v0_3_0::Binding::link(engine, component)?),
            Version::V0_2_0 => Binding::V0_2_0(v0_2_0::Binding::link(engine, component)?),
            Version::V0_1_0 => Binding::V0_1_0(v0_1_0::Binding::link(engine, component)?),
        })
    }

    fn describe(&self, store: &mut Store<StoreState>) -> wasmtime::Result<ExecutorInfo> {
        match self {
            Binding::V0_2_0(binding)
            | Binding::V0_3_0(v0_3_0::Binding {
                executor: binding, ..
            }) => binding.describe(store),
            Binding::V0_1_0(binding) => binding.describe(store),
        }
    }

    /// `validate-settings`; a `0.1.0` component takes none, so only `{}`
    /// (no settings) is valid for it.
    fn validate_settings(
        &self,
        store: &mut Store<StoreState>,
        settings: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            Binding::V0_2_0(binding)
            | Binding::V0_3_0(v0_3_0::Binding {
                executor: binding, ..
            }) => binding.validate_settings(store, settings),
            Binding::V0_1_0(_) => Ok(match serde_json::from_str::<serde_json::Value>(settings) {
                _ if settings.trim().is_empty() => Ok(()),
                Ok(value) if value.as_object().is_some_and(|o| o.is_empty()) => Ok(()),
                _ => Err(format!(
                    "the component is built against {} and takes no settings; \
                     remove [policy.settings] or rebuild it against {}",
                    v0_1_0::WORLD.name,
                    v0_2_0::WORLD.name
                )),
            }),
        }
    }

    /// A fresh instance in `store`.
    fn instantiate(&self, store: &mut Store<StoreState>) -> wasmtime::Result<Instance> {
        Ok(match self {
            Binding::V0_2_0(binding)
            | Binding::V0_3_0(v0_3_0::Binding {
                executor: binding, ..
            }) => Instance::V0_2_0(binding.instantiate(store)?),
            Binding::V0_1_0(binding) => Instance::V0_1_0(binding.instantiate(store)?),
        })
    }

    /// `connect`; a `0.1.0` component has none, so the host answers from
    /// the spec's network grant.
    fn connect(
        &self,
        store: &mut Store<StoreState>,
        spec: &ExecSpec,
        host: &str,
        port: u16,
    ) -> wasmtime::Result<Result<Result<(), String>, RunError>> {
        match self {
            Binding::V0_2_0(binding)
            | Binding::V0_3_0(v0_3_0::Binding {
                executor: binding, ..
            }) => binding.connect(store, spec, host, port),
            Binding::V0_1_0(_) => Ok(Ok(spec.policy.network.decide(host, port))),
        }
    }

    fn settle(
        &self,
        store: &mut Store<StoreState>,
        spec: &ExecSpec,
        facts: &LaunchFacts,
        outcome: &Outcome,
    ) -> wasmtime::Result<Result<Option<SandboxFacts>, RunError>> {
        match self {
            Binding::V0_2_0(binding)
            | Binding::V0_3_0(v0_3_0::Binding {
                executor: binding, ..
            }) => binding.settle(store, spec, facts, outcome),
            Binding::V0_1_0(binding) => binding.settle(store, spec, facts, outcome),
        }
    }
}

/// One instance of a loaded component, in the binding layer of its world.
enum Instance {
    V0_2_0(v0_2_0::Instance),
    V0_1_0(v0_1_0::Instance),
}

impl Instance {
    fn resolve(
        &self,
        store: &mut Store<StoreState>,
        request: &ExecRequest,
        deployment: &Deployment,
    ) -> wasmtime::Result<Result<Decision, RunError>> {
        match self {
            Instance::V0_2_0(instance) => instance.resolve(store, request, deployment),
            Instance::V0_1_0(instance) => instance.resolve(store, request, deployment),
        }
    }

    fn plan(
        &self,
        store: &mut Store<StoreState>,
        spec: &ExecSpec,
    ) -> wasmtime::Result<Result<Launch, RunError>> {
        match self {
            Instance::V0_2_0(instance) => instance.plan(store, spec),
            Instance::V0_1_0(instance) => instance.plan(store, spec),
        }
    }
}

/// A run's `resolve` done, its `plan` still to come on the same instance
/// (see [`Policy::begin`]).
pub struct Preparation {
    store: Store<StoreState>,
    instance: Instance,
    limits: Limits,
}

impl Preparation {
    /// `plan` on the instance that resolved: the launch for `spec` (the
    /// resolved spec as the host checked it), confined through `confiner`,
    /// under a whole call's deadline of its own.
    pub fn plan(self, spec: &ExecSpec, confiner: Arc<dyn Confine>) -> Result<Launch, RunError> {
        let spec = spec.clone();
        let Preparation {
            mut store,
            instance,
            limits,
        } = self;
        call::off_runtime(move || {
            call::rearm(&mut store, &limits);
            store.data_mut().confiner = Some(confiner);
            instance
                .plan(&mut store, &spec)
                .map_err(|err| call::failure(&err, &store))
        })
        .map_err(|failure| RunError::PolicyFailed {
            phase: Phase::Plan,
            reason: failure.0,
        })?
    }
}

/// A loaded, validated policy component.
pub struct Policy {
    engine: wasmtime::Engine,
    binding: Binding,
    version: Version,
    compiled: bool,
    info: ExecutorInfo,
    limits: Limits,
    interfaces: Interfaces,
    digest: String,
    pulled_as: Option<crate::reference::PolicyRef>,
    /// The settings it carries (a whole policy from a registry): handed to
    /// it in place of the deployment's.
    settings: Option<String>,
}

/// Which component is in force, as the audit log and `cordon doctor`
/// name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyIdentity {
    /// The component's own name (`describe`).
    pub name: String,
    /// The component's own version (`describe`).
    pub version: String,
    /// The world it was built against.
    pub world: String,
    /// `sha256:HEX` of its bytes.
    pub digest: String,
    /// The registry reference it was pulled as, pinned to its manifest digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// `sha256:HEX` of the settings its artifact carries (a whole policy
    /// from a registry), which it runs with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
}

/// The names a component imports and exports (as a registry artifact's
/// config records them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Interfaces {
    /// Every import, e.g. `cordon:sandbox/sandbox@0.2.0`.
    pub imports: Vec<String>,
    /// Every export, e.g. `cordon:sandbox/executor@0.2.0`.
    pub exports: Vec<String>,
}

impl Policy {
    /// Compile and validate `bytes` (a component binary) against the
    /// worlds this host supports, and ask it to describe itself.
    pub fn load(engine: &PolicyEngine, bytes: &[u8], limits: Limits) -> Result<Self, LoadError> {
        let cache = engine.cache.as_ref();
        let engine = engine.engine.clone();
        let embedded = bytes == EMBEDDED_DEFAULT;
        let digest = if embedded {
            EMBEDDED_DIGEST.to_owned()
        } else {
            crate::reference::digest_of(bytes)
        };
        let precompiled = embedded.then(|| embedded_precompiled(&engine)).flatten();
        let loaded = precompiled.or_else(|| cache.and_then(|c| c.load(&engine, bytes)));
        let (component, compiled) = match loaded {
            Some(component) => (component, false),
            None => {
                let component =
                    Component::new(&engine, bytes).map_err(|err| LoadError::invalid(&err))?;
                (component, true)
            }
        };
        let version = world::check(&engine, &component)?;
        let interfaces = world::interfaces(&engine, &component);
        let binding =
            Binding::link(version, &engine, &component).map_err(|err| LoadError::invalid(&err))?;
        if compiled && let Some(cache) = cache {
            cache.store(&engine, bytes, &component);
        }
        let describing = binding.clone();
        let info = call::bounded(&engine, &limits, None, move |store| {
            describing.describe(store)
        })
        .map_err(|failure| LoadError::Describe(failure.0))?;
        Ok(Policy {
            engine,
            binding,
            version,
            compiled,
            info,
            limits,
            interfaces,
            digest,
            pulled_as: None,
            settings: None,
        })
    }

    /// Record the registry reference (pinned to its manifest digest) this
    /// component was pulled as.
    pub fn pulled_as(mut self, reference: Option<crate::reference::PolicyRef>) -> Self {
        self.pulled_as = reference;
        self
    }

    /// Give it `settings` (JSON text) to run with in place of the
    /// deployment's: the settings a whole policy's artifact carries.
    pub fn carrying(mut self, settings: Option<String>) -> Self {
        self.settings = settings;
        self
    }

    /// The settings it carries, if any (see [`Policy::carrying`]).
    pub fn settings(&self) -> Option<&str> {
        self.settings.as_deref()
    }

    /// Which component this is.
    pub fn identity(&self) -> PolicyIdentity {
        PolicyIdentity {
            name: self.info.name.clone(),
            version: self.info.version.clone(),
            world: self.world().to_owned(),
            digest: self.digest.clone(),
            reference: self.pulled_as.as_ref().map(ToString::to_string),
            settings: self
                .settings
                .as_ref()
                .map(|json| crate::reference::digest_of(json.as_bytes())),
        }
    }

    /// The registry reference this component was pulled as, pinned to its
    /// manifest digest; none for a file, bytes or the embedded default.
    pub fn reference(&self) -> Option<&crate::reference::PolicyRef> {
        self.pulled_as.as_ref()
    }

    /// `sha256:HEX` of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// What the component imports and exports.
    pub fn interfaces(&self) -> &Interfaces {
        &self.interfaces
    }

    /// Whether loading compiled the component (false: it came from the
    /// compiled-component cache).
    pub fn compiled(&self) -> bool {
        self.compiled
    }

    /// The world the component was built against, e.g.
    /// `cordon:sandbox/executor-policy@0.1.0`.
    pub fn world(&self) -> &'static str {
        self.version.world().name
    }

    /// What the component said about itself when it was loaded.
    pub fn info(&self) -> &ExecutorInfo {
        &self.info
    }

    /// `validate-settings`: whether the component accepts the operator's
    /// `settings` (JSON text); its own message when not.
    pub fn validate_settings(&self, settings: &str) -> Result<(), LoadError> {
        let binding = self.binding.clone();
        let settings = settings.to_owned();
        call::bounded(&self.engine, &self.limits, None, move |store| {
            binding.validate_settings(store, &settings)
        })
        .map_err(|failure| LoadError::Settings(failure.0))?
        .map_err(|message| {
            LoadError::Settings(format!("the component refused its settings: {message}"))
        })
    }

    /// `resolve`: decide `request` against `deployment` — a spec to run,
    /// a denial or a request for approval.
    pub fn resolve(
        &self,
        request: &ExecRequest,
        deployment: &Deployment,
    ) -> Result<Decision, RunError> {
        self.begin(request, deployment)
            .map(|(decision, _)| decision)
    }

    /// `resolve`, keeping its instance for the run's [`Preparation::plan`]:
    /// the two calls of one run's preparation share an instance (each
    /// with its own deadline), so a run costs one instance less; no two
    /// runs share one, and `settle` always gets a fresh one.
    pub fn begin(
        &self,
        request: &ExecRequest,
        deployment: &Deployment,
    ) -> Result<(Decision, Preparation), RunError> {
        let (request, mut deployment) = (request.clone(), deployment.clone());
        if let Some(settings) = &self.settings {
            deployment.settings.clone_from(settings);
        }
        let (engine, limits, binding) = (
            self.engine.clone(),
            self.limits.clone(),
            self.binding.clone(),
        );
        let failed = |failure: call::CallFailure| RunError::PolicyFailed {
            phase: Phase::Resolve,
            reason: failure.0,
        };
        let (decision, preparation) = call::off_runtime(move || {
            let mut store = call::fresh_store(&engine, &limits, None);
            let resolved = binding
                .instantiate(&mut store)
                .and_then(|instance| {
                    let decision = instance.resolve(&mut store, &request, &deployment)?;
                    Ok((decision, instance))
                })
                .map_err(|err| call::failure(&err, &store))?;
            let (decision, instance) = resolved;
            Ok((
                decision,
                Preparation {
                    store,
                    instance,
                    limits,
                },
            ))
        })
        .map_err(failed)?;
        Ok((decision?, preparation))
    }

    /// `plan`: the launch for `spec`, confined through `confiner`, in a
    /// fresh instance (a run plans through [`Preparation::plan`]).
    pub fn plan(&self, spec: &ExecSpec, confiner: Arc<dyn Confine>) -> Result<Launch, RunError> {
        let spec = spec.clone();
        self.call(Phase::Plan, Some(confiner), move |store, binding| {
            binding.instantiate(store)?.plan(store, &spec)
        })
    }

    /// `connect`: may the run of `spec` connect to `host:port`? `Ok(Err)`
    /// is the component's refusal with its reason; a failed call (a trap,
    /// the deadline) is `POLICY_FAILED` in `connect`, which a caller treats
    /// as a refusal of that one connection.
    pub fn connect(
        &self,
        spec: &ExecSpec,
        host: &str,
        port: u16,
    ) -> Result<Result<(), String>, RunError> {
        let (spec, host) = (spec.clone(), host.to_owned());
        self.call(Phase::Connect, None, move |store, binding| {
            binding.connect(store, &spec, &host, port)
        })
        .map(|answer| answer.map_err(|reason| bounded_text(&reason)))
    }

    /// A connector for the connections of the run of `spec`: the same
    /// answers as [`Policy::connect`], from one instance kept across calls
    /// (each call still has its own deadline, and a call that fails drops
    /// the instance: the next one starts afresh). The allow-list proxy asks
    /// it for every connection, at a fraction of a fresh instance's cost.
    /// `settings` are the deployment's, which the settings this policy
    /// carries replace (as in `resolve`).
    pub fn connector(&self, spec: &ExecSpec, settings: &str) -> Connector {
        Connector {
            engine: self.engine.clone(),
            limits: self.limits.clone(),
            binding: self.binding.clone(),
            spec: spec.clone(),
            settings: self.settings.as_deref().unwrap_or(settings).to_owned(),
            live: std::sync::Mutex::new(None),
        }
    }

    /// `settle`: classify a finished run.
    pub fn settle(
        &self,
        spec: &ExecSpec,
        facts: &LaunchFacts,
        outcome: &Outcome,
    ) -> Result<Option<SandboxFacts>, RunError> {
        let (spec, facts, outcome) = (spec.clone(), facts.clone(), outcome.clone());
        self.call(Phase::Settle, None, move |store, binding| {
            binding.settle(store, &spec, &facts, &outcome)
        })
    }

    /// Whether the component exports `render` (world `0.2.0`'s optional
    /// `cordon:sandbox/render` interface).
    pub fn renders(&self) -> bool {
        match &self.binding {
            Binding::V0_2_0(binding)
            | Binding::V0_3_0(v0_3_0::Binding {
                executor: binding, ..
            }) => binding.renders(),
            Binding::V0_1_0(_) => false,
        }
    }

    /// `render`: the text an agent's model reads of `outcome` for
    /// `command`, inert and at most [`crate::text::MAX_RENDERED_BYTES`];
    /// none when the component does not render (the host's default text
    /// applies).
    pub fn render(
        &self,
        command: &str,
        outcome: &crate::model::Told,
    ) -> Result<Option<String>, RunError> {
        if !self.renders() {
            return Ok(None);
        }
        let (command, outcome) = (command.to_owned(), outcome.clone());
        let rendered = self.call(Phase::Render, None, move |store, binding| match binding {
            Binding::V0_2_0(binding)
            | Binding::V0_3_0(v0_3_0::Binding {
                executor: binding, ..
            }) => binding.render(store, &command, &outcome).map(Ok),
            Binding::V0_1_0(_) => Ok(Ok(None)),
        })?;
        Ok(rendered.map(|text| crate::text::rendered(&text)))
    }

    /// One bounded call in `phase`: a failed call is `POLICY_FAILED` in it.
    fn call<R: Send + 'static>(
        &self,
        phase: Phase,
        confiner: Option<Arc<dyn Confine>>,
        f: impl FnOnce(&mut Store<StoreState>, &Binding) -> wasmtime::Result<Result<R, RunError>>
        + Send
        + 'static,
    ) -> Result<R, RunError> {
        let binding = self.binding.clone();
        call::bounded(&self.engine, &self.limits, confiner, move |store| {
            f(store, &binding)
        })
        .map_err(|failure| RunError::PolicyFailed {
            phase,
            reason: failure.0,
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supported_worlds_are_the_version_tables() {
        assert_eq!(SUPPORTED_WORLDS, supported_worlds());
    }

    #[test]
    fn a_components_text_is_one_bounded_inert_line() {
        let text = bounded_text("no\x1b]52;c;ZXZpbA==\x07\n  way");
        assert_eq!(text, "no\\x1b]52;c;ZXZpbA==\\x07 way");
    }

    #[test]
    fn the_embedded_default_loads_precompiled_into_the_hosts_engine() {
        // A setting of the host's engine that the build script's lacks (or
        // the reverse) makes wasmtime refuse the artifact: every host would
        // then compile the default on load, silently slower.
        assert!(
            !EMBEDDED_PRECOMPILED.is_empty(),
            "a native build precompiles the default"
        );
        let engine = PolicyEngine::new().unwrap();
        let component = embedded_precompiled(&engine.engine).expect("accepted");
        assert_eq!(
            world::check(&engine.engine, &component).unwrap(),
            Version::V0_2_0
        );
        let policy = Policy::load(&engine, EMBEDDED_DEFAULT, Limits::default()).unwrap();
        assert!(!policy.compiled, "loaded, not compiled");
    }
}
