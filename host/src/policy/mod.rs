//! Policy components: the wasmtime engine, loading a component, and one
//! fresh instance per call.
//!
//! A component is code an operator deploys without rebuilding the host, so
//! it is treated as untrusted for safety: it is linked with a deny-all WASI
//! (no files, environment, stdio or network), every call runs under an epoch
//! deadline and a memory cap, and any trap or malformed return becomes a
//! [`RunError::PolicyFailed`] for that run. The host checks what a component
//! returns (see [`crate::run`]); it never trusts it to enforce invariants.
//!
//! The component is compiled once and its `InstancePre` built once per
//! [`Policy`]; each call gets a fresh `Store` and instance (a few µs), which
//! is what makes components stateless between calls.

mod v0_1_0;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder, Trap};
use wasmtime_wasi::WasiCtx;

use crate::RunError;
use crate::model::{
    Deployment, ExecRequest, ExecSpec, LaunchFacts, Outcome, SandboxFacts, SandboxMode,
};
use crate::sandbox::{Confine, Wrap};

use v0_1_0::{ExecutorPolicy, ExecutorPolicyPre, WitLaunch, wit};

/// The default policy component (`components/bash-sandbox`), built from
/// source by the host's build script and embedded in the binary.
pub static EMBEDDED_DEFAULT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bash-sandbox.wasm"));

/// Epoch ticks per second of call deadline.
const TICK: Duration = Duration::from_millis(10);

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

/// The wasmtime engine shared by every policy component of a host, with
/// the ticker thread that drives call deadlines.
pub struct PolicyEngine {
    engine: Engine,
    ticker_stop: Arc<AtomicBool>,
}

impl PolicyEngine {
    /// An engine configured for policy components (component model, epoch
    /// interruption) and its ticker.
    pub fn new() -> Result<Self, RunError> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|err| load_failed(&err))?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        let ticking = engine.clone();
        let stop = ticker_stop.clone();
        thread::Builder::new()
            .name("cordon-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    thread::sleep(TICK);
                    ticking.increment_epoch();
                }
            })
            .map_err(|err| RunError::PolicyFailed {
                phase: "load",
                reason: format!("cannot start the deadline ticker: {err}"),
            })?;
        Ok(PolicyEngine {
            engine,
            ticker_stop,
        })
    }
}

impl Drop for PolicyEngine {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// What a component says about itself (`describe`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
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
    Confined(Wrap),
    /// A bare argv (the run pipeline accepts it only under
    /// `danger-full-access` within the ceiling).
    Unconfined(Vec<String>),
}

/// The data of one call's store.
pub(crate) struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    /// Set only while `plan` runs: the sandbox that `confine` wraps with.
    confiner: Option<Arc<dyn Confine>>,
}

/// A loaded, validated policy component.
pub struct Policy {
    engine: Engine,
    pre: ExecutorPolicyPre<StoreState>,
    info: ExecutorInfo,
    limits: Limits,
}

impl Policy {
    /// Compile and validate `bytes` (a component binary) against the
    /// `executor-policy` world, and ask it to describe itself.
    pub fn load(engine: &PolicyEngine, bytes: &[u8], limits: Limits) -> Result<Self, RunError> {
        let engine = engine.engine.clone();
        let component = Component::new(&engine, bytes).map_err(|err| load_failed(&err))?;
        let mut linker = Linker::<StoreState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|err| load_failed(&err))?;
        ExecutorPolicy::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|err| load_failed(&err))?;
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(|err| load_failed(&err))?;
        let pre = ExecutorPolicyPre::new(instance_pre).map_err(|err| load_failed(&err))?;
        let mut policy = Policy {
            engine,
            pre,
            info: ExecutorInfo {
                name: String::new(),
                version: String::new(),
                shell: String::new(),
                default_mode: SandboxMode::ReadOnly,
            },
            limits,
        };
        let (mut store, bindings) = policy.instance("load", None)?;
        let info = bindings
            .cordon_sandbox_executor()
            .call_describe(&mut store)
            .map_err(|err| call_failed("load", &err))?;
        policy.info = info.into();
        Ok(policy)
    }

    /// What the component said about itself when it was loaded.
    pub fn info(&self) -> &ExecutorInfo {
        &self.info
    }

    /// `resolve`: default `request` against `deployment`.
    pub fn resolve(
        &self,
        request: &ExecRequest,
        deployment: &Deployment,
    ) -> Result<ExecSpec, RunError> {
        let request = wit::ExecRequest::try_from(request).map_err(RunError::InvalidRequest)?;
        let deployment = wit::Deployment::try_from(deployment).map_err(RunError::InvalidRequest)?;
        let (mut store, bindings) = self.instance("resolve", None)?;
        let spec = bindings
            .cordon_sandbox_executor()
            .call_resolve(&mut store, &request, &deployment)
            .map_err(|err| call_failed("resolve", &err))??;
        Ok(spec.into())
    }

    /// `plan`: the launch for `spec`, confined through `confiner`.
    pub fn plan(&self, spec: &ExecSpec, confiner: Arc<dyn Confine>) -> Result<Launch, RunError> {
        let wit_spec = wit::ExecSpec::try_from(spec).map_err(RunError::InvalidRequest)?;
        let (mut store, bindings) = self.instance("plan", Some(confiner))?;
        let launch = bindings
            .cordon_sandbox_executor()
            .call_plan(&mut store, &wit_spec)
            .map_err(|err| call_failed("plan", &err))??;
        match launch {
            WitLaunch::Unconfined(argv) => Ok(Launch::Unconfined(argv)),
            WitLaunch::Confined(handle) => {
                let wrap =
                    v0_1_0::take_wrap(&mut store.data_mut().table, handle).map_err(|err| {
                        RunError::PolicyFailed {
                            phase: "plan",
                            reason: format!("returned a confinement the host did not issue: {err}"),
                        }
                    })?;
                Ok(Launch::Confined(wrap))
            }
        }
    }

    /// `settle`: classify a finished run.
    pub fn settle(
        &self,
        spec: &ExecSpec,
        facts: &LaunchFacts,
        outcome: &Outcome,
    ) -> Result<Option<SandboxFacts>, RunError> {
        let wit_spec = wit::ExecSpec::try_from(spec).map_err(RunError::InvalidRequest)?;
        let (mut store, bindings) = self.instance("settle", None)?;
        let facts = bindings
            .cordon_sandbox_executor()
            .call_settle(
                &mut store,
                &wit_spec,
                &facts.clone().into(),
                &outcome.clone().into(),
            )
            .map_err(|err| call_failed("settle", &err))??;
        Ok(facts.map(Into::into))
    }

    /// A fresh store and instance for one call, with its limits armed.
    fn instance(
        &self,
        phase: &'static str,
        confiner: Option<Arc<dyn Confine>>,
    ) -> Result<(Store<StoreState>, ExecutorPolicy), RunError> {
        let state = StoreState {
            wasi: v0_1_0::deny_all_wasi(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(self.limits.memory_bytes)
                .trap_on_grow_failure(true)
                .build(),
            confiner,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limits);
        let ticks = self
            .limits
            .call_deadline
            .as_millis()
            .div_ceil(TICK.as_millis()) as u64;
        store.set_epoch_deadline(ticks.max(1));
        let bindings = self
            .pre
            .instantiate(&mut store)
            .map_err(|err| call_failed(phase, &err))?;
        Ok((store, bindings))
    }
}

fn load_failed(err: &wasmtime::Error) -> RunError {
    RunError::PolicyFailed {
        phase: "load",
        reason: format!("{err:#}"),
    }
}

fn call_failed(phase: &'static str, err: &wasmtime::Error) -> RunError {
    let reason = match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => "exceeded its call deadline".to_owned(),
        _ => format!("{err:#}"),
    };
    RunError::PolicyFailed { phase, reason }
}
