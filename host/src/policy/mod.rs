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

pub mod cache;
mod v0_1_0;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits,
    StoreLimitsBuilder, Trap,
};
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

/// The worlds this host can load, newest first. A later interface version
/// is added beside the older ones (with its own binding layer next to
/// [`v0_1_0`]); components built against an older world keep loading.
pub const SUPPORTED_WORLDS: &[&str] = &["cordon:sandbox/executor-policy@0.1.0"];

/// The interface a component must export (world `executor-policy@0.1.0`).
const EXECUTOR_EXPORT: &str = "cordon:sandbox/executor@0.1.0";

/// Imports a component may have: its own package's host interfaces, and
/// the WASI families that the deny-all context answers without granting
/// anything (a Rust guest's std imports some of them).
const ALLOWED_IMPORTS: &[&str] = &[
    "cordon:sandbox/types@0.1.0",
    "cordon:sandbox/sandbox@0.1.0",
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
];

/// Component instances alive at once per engine (calls are short and
/// their stores dropped at once, so this bounds concurrency, not runs).
const POOL_INSTANCES: u32 = 32;

/// Memory per pooled slot kept resident between instances, reset with a
/// `memset` instead of `madvise` and page faults: a Rust guest's 64 KiB
/// shadow stack (see `.cargo/config.toml`), its data and its first heap
/// pages. Twice that only doubled the bytes zeroed per instance.
const KEEP_RESIDENT_BYTES: usize = 128 << 10;

/// The hard ceiling on a component's linear memory, whatever [`Limits`] say.
pub const MAX_MEMORY_BYTES: usize = 256 << 20;

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
    cache: Option<cache::ComponentCache>,
}

impl PolicyEngine {
    /// An engine configured for policy components (component model, epoch
    /// interruption, the pooling allocator) and its ticker.
    ///
    /// The pooling allocator makes a fresh instance cost microseconds; its
    /// per-instance memory size is the hard ceiling under every store's
    /// own memory limit. Where its address-space reservation fails (a
    /// tight `ulimit -v`), the engine falls back to on-demand allocation.
    pub fn new() -> Result<Self, RunError> {
        let engine = Engine::new(&Self::config(true))
            .or_else(|_| Engine::new(&Self::config(false)))
            .map_err(|err| load_failed(&err))?;
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
            cache: None,
        })
    }

    /// Keep compiled components in `cache` (see [`cache`]).
    pub fn with_cache(mut self, cache: cache::ComponentCache) -> Self {
        self.cache = Some(cache);
        self
    }
}

impl PolicyEngine {
    fn config(pooling: bool) -> Config {
        let mut config = Config::new();
        config.epoch_interruption(true);
        if pooling {
            let mut pool = PoolingAllocationConfig::default();
            pool.total_component_instances(POOL_INSTANCES)
                .total_core_instances(POOL_INSTANCES * 16)
                .total_memories(POOL_INSTANCES * 2)
                .total_tables(POOL_INSTANCES * 8)
                .total_stacks(POOL_INSTANCES)
                .max_memory_size(MAX_MEMORY_BYTES)
                // Reset a reused slot by zeroing what a policy call
                // typically touches, instead of madvise + page faults.
                .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
                .table_keep_resident(KEEP_RESIDENT_BYTES);
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        config
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
    compiled: bool,
    info: ExecutorInfo,
    limits: Limits,
}

impl Policy {
    /// Compile and validate `bytes` (a component binary) against the
    /// `executor-policy` world, and ask it to describe itself.
    pub fn load(engine: &PolicyEngine, bytes: &[u8], limits: Limits) -> Result<Self, RunError> {
        let cache = engine.cache.as_ref();
        let engine = engine.engine.clone();
        let (component, compiled) = match cache.and_then(|c| c.load(&engine, bytes)) {
            Some(component) => (component, false),
            None => {
                let component = Component::new(&engine, bytes).map_err(|err| load_failed(&err))?;
                (component, true)
            }
        };
        check_world(&engine, &component)?;
        let mut linker = Linker::<StoreState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|err| load_failed(&err))?;
        ExecutorPolicy::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|err| load_failed(&err))?;
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(|err| load_failed(&err))?;
        let pre = ExecutorPolicyPre::new(instance_pre).map_err(|err| load_failed(&err))?;
        if compiled && let Some(cache) = cache {
            cache.store(&engine, bytes, &component);
        }
        let mut policy = Policy {
            engine,
            pre,
            compiled,
            info: ExecutorInfo {
                name: String::new(),
                version: String::new(),
                shell: String::new(),
                default_mode: SandboxMode::ReadOnly,
            },
            limits,
        };
        let info = policy.call("load", None, |store, bindings| {
            bindings.cordon_sandbox_executor().call_describe(store)
        })?;
        policy.info = info.into();
        Ok(policy)
    }

    /// Whether loading compiled the component (false: it came from the
    /// compiled-component cache).
    pub fn compiled(&self) -> bool {
        self.compiled
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
        let spec = self.call("resolve", None, move |store, bindings| {
            bindings
                .cordon_sandbox_executor()
                .call_resolve(store, &request, &deployment)
        })??;
        Ok(spec.into())
    }

    /// `plan`: the launch for `spec`, confined through `confiner`.
    pub fn plan(&self, spec: &ExecSpec, confiner: Arc<dyn Confine>) -> Result<Launch, RunError> {
        let wit_spec = wit::ExecSpec::try_from(spec).map_err(RunError::InvalidRequest)?;
        let launch = self.call("plan", Some(confiner), move |store, bindings| {
            let launch = bindings
                .cordon_sandbox_executor()
                .call_plan(&mut *store, &wit_spec)?;
            Ok(launch.map(|launch| match launch {
                WitLaunch::Unconfined(argv) => Ok(Launch::Unconfined(argv)),
                WitLaunch::Confined(handle) => {
                    v0_1_0::take_wrap(&mut store.data_mut().table, handle)
                        .map(Launch::Confined)
                        .map_err(|err| {
                            format!("returned a confinement the host did not issue: {err}")
                        })
                }
            }))
        })??;
        launch.map_err(|reason| RunError::PolicyFailed {
            phase: "plan",
            reason,
        })
    }

    /// `settle`: classify a finished run.
    pub fn settle(
        &self,
        spec: &ExecSpec,
        facts: &LaunchFacts,
        outcome: &Outcome,
    ) -> Result<Option<SandboxFacts>, RunError> {
        let wit_spec = wit::ExecSpec::try_from(spec).map_err(RunError::InvalidRequest)?;
        let facts: wit::LaunchFacts = facts.clone().into();
        let outcome: wit::Outcome = outcome.clone().into();
        let stamped = self.call("settle", None, move |store, bindings| {
            bindings
                .cordon_sandbox_executor()
                .call_settle(store, &wit_spec, &facts, &outcome)
        })??;
        Ok(stamped.map(Into::into))
    }

    /// Run `f` against a fresh store and instance, with its limits armed.
    ///
    /// Called from inside a tokio runtime, the call runs on the policy
    /// thread instead: wasmtime-wasi's synchronous bindings (a guest that
    /// writes to stderr, e.g. while panicking) block on a runtime, which
    /// must not happen on a thread that drives async tasks. The call is
    /// bounded by its epoch deadline, so the caller's wait is bounded too.
    fn call<R: Send + 'static>(
        &self,
        phase: &'static str,
        confiner: Option<Arc<dyn Confine>>,
        f: impl FnOnce(&mut Store<StoreState>, &ExecutorPolicy) -> wasmtime::Result<R> + Send + 'static,
    ) -> Result<R, RunError> {
        let engine = self.engine.clone();
        let pre = self.pre.clone();
        let limits = self.limits.clone();
        let job = move || -> Result<R, RunError> {
            let state = StoreState {
                wasi: v0_1_0::deny_all_wasi(),
                table: ResourceTable::new(),
                limits: StoreLimitsBuilder::new()
                    .memory_size(limits.memory_bytes)
                    .trap_on_grow_failure(true)
                    .build(),
                confiner,
            };
            let mut store = Store::new(&engine, state);
            store.limiter(|state| &mut state.limits);
            let ticks = limits.call_deadline.as_millis().div_ceil(TICK.as_millis()) as u64;
            store.set_epoch_deadline(ticks.max(1));
            let bindings = pre
                .instantiate(&mut store)
                .map_err(|err| call_failed(phase, &err))?;
            f(&mut store, &bindings).map_err(|err| call_failed(phase, &err))
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            policy_thread::run(job).unwrap_or_else(|| {
                Err(RunError::PolicyFailed {
                    phase,
                    reason: "the host panicked while running the call".into(),
                })
            })
        } else {
            job()
        }
    }
}

/// The thread that runs policy calls made from inside a tokio runtime.
mod policy_thread {
    use std::sync::OnceLock;
    use std::sync::mpsc;

    type Job = Box<dyn FnOnce() + Send>;

    fn sender() -> &'static mpsc::Sender<Job> {
        static SENDER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
        SENDER.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("cordon-policy".into())
                .spawn(move || {
                    for job in rx {
                        // A panic in one job must not take the thread down.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                })
                .expect("spawn the cordon-policy thread");
            tx
        })
    }

    /// Run `job` on the policy thread and wait for its result; none if
    /// the job panicked.
    pub fn run<R: Send + 'static>(job: impl FnOnce() -> R + Send + 'static) -> Option<R> {
        let (tx, rx) = mpsc::sync_channel(1);
        sender()
            .send(Box::new(move || {
                let _ = tx.send(job());
            }))
            .ok()?;
        rx.recv().ok()
    }
}

/// Check a component against the world before linking: every import must
/// be one cordon grants, and the executor interface must be exported. The
/// error names the offending import or export and the expected world.
fn check_world(engine: &Engine, component: &Component) -> Result<(), RunError> {
    let world = SUPPORTED_WORLDS[0];
    let ty = component.component_type();
    for (name, _) in ty.imports(engine) {
        let allowed = ALLOWED_IMPORTS.iter().any(|allowed| {
            if allowed.ends_with('/') {
                name.starts_with(allowed)
            } else {
                name == *allowed
            }
        });
        if !allowed {
            let hint = if name.starts_with("cordon:sandbox/") {
                format!("; this host supports {}", SUPPORTED_WORLDS.join(", "))
            } else {
                "; policy components get no files, sockets or other host authority".to_owned()
            };
            return Err(RunError::PolicyFailed {
                phase: "load",
                reason: format!(
                    "the component imports {name}, which the world {world} does not provide{hint}"
                ),
            });
        }
    }
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    if !exports.iter().any(|name| name == EXECUTOR_EXPORT) {
        return Err(RunError::PolicyFailed {
            phase: "load",
            reason: format!(
                "the component does not export {EXECUTOR_EXPORT} (world {world}); it exports [{}]",
                exports.join(", ")
            ),
        });
    }
    Ok(())
}

fn load_failed(err: &wasmtime::Error) -> RunError {
    RunError::PolicyFailed {
        phase: "load",
        reason: one_line(&format!("{err:#}")),
    }
}

/// An error as one bounded line (an operator reads it in a log).
fn one_line(text: &str) -> String {
    let mut line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.len() > 600 {
        let cut = line.char_indices().nth(600).map_or(line.len(), |(i, _)| i);
        line.truncate(cut);
        line.push('…');
    }
    line
}

fn call_failed(phase: &'static str, err: &wasmtime::Error) -> RunError {
    let text = format!("{err:#}");
    let reason = match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => "exceeded its call deadline".to_owned(),
        Some(trap) => format!("trapped: {trap}"),
        None if text.contains("forcing trap when growing memory") => {
            "trapped: exceeded its memory limit".to_owned()
        }
        None => one_line(&text),
    };
    RunError::PolicyFailed { phase, reason }
}
