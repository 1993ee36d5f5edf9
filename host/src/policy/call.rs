//! One bounded call into a component: a fresh store with its limits armed,
//! the call, and what went wrong in words an operator can act on.
//!
//! Every call gets its own [`Store`]: a deny-all WASI context, a resource
//! table, a [`CallLimiter`] and an epoch deadline. Nothing survives the
//! call, which is what makes components stateless between calls. This
//! layer names no world version; the binding layers hand it a closure that
//! instantiates and calls their own bindings.
//!
//! Failures are told apart by type, not by message: the epoch deadline by
//! wasmtime's [`Trap::Interrupt`], memory exhaustion by the limiter that
//! refused the growth (it records that it did).

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store, Trap};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::Limits;
use super::engine::TICK;
use crate::sandbox::Confine;

/// The data of one call's store.
pub(super) struct StoreState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    limiter: CallLimiter,
    /// Set only while `plan` runs: the sandbox that `confine` wraps with.
    pub(super) confiner: Option<Arc<dyn Confine>>,
    /// What this call's `confine`s have cost so far.
    confined: ConfineBudget,
    /// During `plan`: the spec's whole policy, which a binding layer of an
    /// older version (whose components cannot name the newer grant fields)
    /// confines with when the component names its mode and root.
    pub(super) planned: Option<crate::model::SandboxPolicy>,
}

/// `sandbox.confine` calls one `plan` may make: each wrap lives in host
/// memory (the resource table), outside the component's memory cap, so
/// their number and size are bounded here.
pub const MAX_CONFINES_PER_PLAN: usize = 8;
/// Bytes of argv all `confine` calls of one `plan` may hand the host.
pub const MAX_CONFINED_BYTES: usize = 4 << 20;

#[derive(Default)]
struct ConfineBudget {
    calls: usize,
    bytes: usize,
}

impl StoreState {
    /// Count one `confine` of `argv` against this call's budget; past it,
    /// the call traps (a policy failure of this run).
    pub(super) fn admit_confine(&mut self, argv: &[String]) -> wasmtime::Result<()> {
        let budget = &mut self.confined;
        budget.calls += 1;
        budget.bytes += argv.iter().map(|arg| arg.len() + 1).sum::<usize>();
        if budget.calls > MAX_CONFINES_PER_PLAN {
            wasmtime::bail!(
                "made more than {MAX_CONFINES_PER_PLAN} sandbox.confine calls in one plan"
            );
        }
        if budget.bytes > MAX_CONFINED_BYTES {
            wasmtime::bail!(
                "handed sandbox.confine more than {MAX_CONFINED_BYTES} bytes of argv in one plan"
            );
        }
        Ok(())
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Bounds a store's memory and remembers whether it had to refuse.
struct CallLimiter {
    memory_bytes: usize,
    exhausted: bool,
}

/// The error a refused memory growth traps with.
#[derive(Debug, thiserror::Error)]
#[error("the component exceeded its memory limit")]
struct MemoryExhausted;

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes || maximum.is_some_and(|max| desired > max) {
            self.exhausted = true;
            return Err(MemoryExhausted.into());
        }
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        // The engine could not provide the memory (the pool's ceiling).
        self.exhausted = true;
        Err(error.context(MemoryExhausted))
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|max| desired > max) {
            wasmtime::bail!("the component grew a table past its declared maximum");
        }
        Ok(true)
    }
}

/// A fresh, deny-all WASI context: no preopens, no environment, no
/// arguments, no stdio, no network. wasmtime-wasi's defaults are exactly
/// that (sockets and name lookups denied, stdio closed), and a component
/// importing `wasi:filesystem` or `wasi:sockets` is refused at load anyway
/// (`world.rs`). `WasiCtx::default` builds it once; the builder builds its
/// defaults twice (random state included), in every call.
fn deny_all_wasi() -> WasiCtx {
    WasiCtx::default()
}

/// Why a call produced nothing: one bounded line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CallFailure(pub String);

/// A fresh store with `limits` armed: the deny-all WASI context, a memory
/// limiter and one call's epoch deadline.
pub(super) fn fresh_store(
    engine: &Engine,
    limits: &Limits,
    confiner: Option<Arc<dyn Confine>>,
) -> Store<StoreState> {
    let state = StoreState {
        wasi: deny_all_wasi(),
        table: ResourceTable::new(),
        limiter: CallLimiter {
            memory_bytes: limits.memory_bytes,
            exhausted: false,
        },
        confiner,
        confined: ConfineBudget::default(),
        planned: None,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    rearm(&mut store, limits);
    store
}

/// Give `store` a whole call's deadline again (for a store that serves
/// more than one call).
pub(super) fn rearm(store: &mut Store<StoreState>, limits: &Limits) {
    let ticks = limits.call_deadline.as_millis().div_ceil(TICK.as_millis()) as u64;
    store.set_epoch_deadline(ticks.max(1));
}

/// What a failed call in `store` did, for the operator.
pub(super) fn failure(err: &wasmtime::Error, store: &Store<StoreState>) -> CallFailure {
    describe(err, store.data().limiter.exhausted)
}

/// Run `f` against a fresh store with `limits` armed.
///
/// Called from inside a tokio runtime, the call runs on the policy thread
/// instead: wasmtime-wasi's synchronous bindings (a guest that writes to
/// stderr, e.g. while panicking) block on a runtime, which must not happen
/// on a thread that drives async tasks. The call is bounded by its epoch
/// deadline, so the caller's wait is bounded too.
pub(super) fn bounded<R: Send + 'static>(
    engine: &Engine,
    limits: &Limits,
    confiner: Option<Arc<dyn Confine>>,
    f: impl FnOnce(&mut Store<StoreState>) -> wasmtime::Result<R> + Send + 'static,
) -> Result<R, CallFailure> {
    let engine = engine.clone();
    let limits = limits.clone();
    off_runtime(move || {
        let mut store = fresh_store(&engine, &limits, confiner);
        f(&mut store).map_err(|err| failure(&err, &store))
    })
}

/// Run `job` here, or on the policy thread when called from inside a tokio
/// runtime (see [`bounded`]).
pub(super) fn off_runtime<R: Send + 'static>(
    job: impl FnOnce() -> Result<R, CallFailure> + Send + 'static,
) -> Result<R, CallFailure> {
    if tokio::runtime::Handle::try_current().is_ok() {
        policy_thread::run(job).unwrap_or_else(|| {
            Err(CallFailure(
                "the host panicked while running the call".into(),
            ))
        })
    } else {
        job()
    }
}

/// What a failed call did, for the operator.
fn describe(err: &wasmtime::Error, memory_exhausted: bool) -> CallFailure {
    CallFailure(if memory_exhausted {
        "trapped: exceeded its memory limit".to_owned()
    } else {
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => "exceeded its call deadline".to_owned(),
            Some(trap) => format!("trapped: {trap}"),
            None => one_line(&format!("{err:#}")),
        }
    })
}

/// An error as one bounded line (an operator reads it in a log).
pub(super) fn one_line(text: &str) -> String {
    let mut line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.len() > 600 {
        let cut = line.char_indices().nth(600).map_or(line.len(), |(i, _)| i);
        line.truncate(cut);
        line.push('…');
    }
    line
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limiter_refuses_growth_past_its_limit_and_remembers() {
        let mut limiter = CallLimiter {
            memory_bytes: 1 << 20,
            exhausted: false,
        };
        assert!(limiter.memory_growing(0, 1 << 20, None).unwrap());
        assert!(!limiter.exhausted);
        let err = limiter.memory_growing(1 << 20, 2 << 20, None).unwrap_err();
        assert!(err.downcast_ref::<MemoryExhausted>().is_some());
        assert!(limiter.exhausted);
    }

    #[test]
    fn a_deadline_and_an_exhausted_memory_are_told_apart_by_type() {
        let interrupt = wasmtime::Error::from(Trap::Interrupt);
        assert_eq!(describe(&interrupt, false).0, "exceeded its call deadline");
        // Whatever the message, the limiter's record decides.
        let any = wasmtime::Error::msg("something else entirely");
        assert_eq!(describe(&any, true).0, "trapped: exceeded its memory limit");
        assert_eq!(describe(&any, false).0, "something else entirely");
    }

    #[test]
    fn confine_calls_are_bounded_in_number_and_bytes() {
        let mut state = StoreState {
            wasi: deny_all_wasi(),
            table: ResourceTable::new(),
            limiter: CallLimiter {
                memory_bytes: 1,
                exhausted: false,
            },
            confiner: None,
            confined: ConfineBudget::default(),
            planned: None,
        };
        let small = vec!["true".to_owned()];
        for _ in 0..MAX_CONFINES_PER_PLAN {
            state.admit_confine(&small).unwrap();
        }
        let err = state.admit_confine(&small).unwrap_err().to_string();
        assert!(err.contains("more than 8 sandbox.confine calls"), "{err}");
        state.confined = ConfineBudget::default();
        let big = vec!["x".repeat(MAX_CONFINED_BYTES)];
        let err = state.admit_confine(&big).unwrap_err().to_string();
        assert!(err.contains("bytes of argv"), "{err}");
    }

    #[test]
    fn one_line_folds_whitespace_and_bounds_length() {
        assert_eq!(one_line("a\n  b\tc"), "a b c");
        let long = "x".repeat(700);
        let line = one_line(&long);
        assert_eq!(line.chars().count(), 601);
        assert!(line.ends_with('…'));
    }
}
