//! The wasmtime engine shared by every policy component of a host, and the
//! ticker thread that drives call deadlines. Nothing here names a world
//! version: the engine compiles whatever component it is handed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::{LoadError, cache};

/// Component instances alive at once per engine (calls are short and
/// their stores dropped at once, so this bounds concurrency, not runs).
const POOL_INSTANCES: u32 = 32;

/// The same for a host that runs one command and exits (the CLI): its run
/// holds at most a few instances at once (the plan's, the settle's, the
/// one its proxy decides with). The pool's reservation is made at start
/// and unmapped at exit, in proportion to its size: 32 slots cost a
/// one-shot `cordon run` ≈ 0.3 ms that 8 do not (measured: the load of a
/// refused run 5.09 → 4.80 ms at 4).
const ONE_RUN_POOL_INSTANCES: u32 = 8;

/// Memory per pooled slot kept resident between instances, reset with a
/// `memset` instead of `madvise` and page faults: a Rust guest's 64 KiB
/// shadow stack (see `.cargo/config.toml`), its data and its first heap
/// pages. Twice that only doubled the bytes zeroed per instance.
const KEEP_RESIDENT_BYTES: usize = 128 << 10;

/// The hard ceiling on a component's linear memory, whatever
/// [`Limits`](super::Limits) say.
pub const MAX_MEMORY_BYTES: usize = 256 << 20;

/// How often the epoch advances; a call's deadline is counted in ticks.
pub(super) const TICK: Duration = Duration::from_millis(10);

/// The wasmtime engine shared by every policy component of a host, with
/// the ticker thread that drives call deadlines.
pub struct PolicyEngine {
    pub(super) engine: Engine,
    ticker_stop: Arc<AtomicBool>,
    pub(super) cache: Option<cache::ComponentCache>,
}

impl PolicyEngine {
    /// An engine configured for policy components (component model, epoch
    /// interruption, the pooling allocator) and its ticker.
    ///
    /// The pooling allocator makes a fresh instance cost microseconds; its
    /// per-instance memory size is the hard ceiling under every store's
    /// own memory limit. Where its address-space reservation fails (a
    /// tight `ulimit -v`), the engine falls back to on-demand allocation.
    pub fn new() -> Result<Self, LoadError> {
        Self::with_slots(POOL_INSTANCES)
    }

    /// [`PolicyEngine::new`] for a host that runs one command and exits:
    /// a smaller pool, made and unmapped faster.
    pub fn for_one_run() -> Result<Self, LoadError> {
        Self::with_slots(ONE_RUN_POOL_INSTANCES)
    }

    /// The engine with `slots` pooled component instances.
    fn with_slots(slots: u32) -> Result<Self, LoadError> {
        let engine = Engine::new(&config(Some(slots)))
            .or_else(|_| Engine::new(&config(None)))
            .map_err(|err| LoadError::Engine(super::bounded_text(&format!("{err:#}"))))?;
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
            .map_err(|err| LoadError::Engine(format!("cannot start the deadline ticker: {err}")))?;
        Ok(PolicyEngine {
            engine,
            ticker_stop,
            cache: None,
        })
    }

    /// The compiled-component cache, if this engine keeps one.
    pub fn cache(&self) -> Option<&cache::ComponentCache> {
        self.cache.as_ref()
    }

    /// Keep compiled components in `cache` (see [`cache`]).
    pub fn with_cache(mut self, cache: cache::ComponentCache) -> Self {
        self.cache = Some(cache);
        self
    }
}

/// The engine's configuration: pooled with `slots` component instances,
/// or on-demand allocation (none).
fn config(slots: Option<u32>) -> Config {
    let mut config = Config::new();
    super::compilation::apply(&mut config);
    if let Some(slots) = slots {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(slots)
            .total_core_instances(slots * 16)
            .total_memories(slots * 2)
            .total_tables(slots * 8)
            .total_stacks(slots)
            .max_memory_size(MAX_MEMORY_BYTES)
            // Reset a reused slot by zeroing what a policy call
            // typically touches, instead of madvise + page faults.
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_BYTES);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

impl Drop for PolicyEngine {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}
