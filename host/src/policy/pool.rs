//! [`PolicyPool`]: the threads a host's runs make their policy calls on.
//!
//! Why a pool: a component call is synchronous wasm (and wasmtime-wasi's
//! synchronous bindings block on a runtime of their own), so it must not
//! run on a thread that drives async tasks — and one thread for every run
//! of a server means a slow call (a component that loops until its
//! deadline) delays every other run's call behind it. A run's preparation
//! (resolve, the host's checks, plan) and its settle are each one job here;
//! a job waits for a free thread, never for another run's job to finish
//! unless every thread is busy. Each call inside a job is still bounded by
//! its own epoch deadline, so a busy thread frees itself.
//!
//! Threads are started with the pool and end when it is dropped (after the
//! jobs already queued).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};

/// The default number of policy threads of a host.
pub const DEFAULT_POLICY_THREADS: usize = 8;

/// The most policy threads a host may be configured with.
pub const MAX_POLICY_THREADS: usize = 256;

type Job = Box<dyn FnOnce() + Send>;

/// Up to a fixed number of threads that run policy jobs (see the module
/// docs), started as jobs need them: a one-shot host starts one.
pub struct PolicyPool {
    queue: Mutex<mpsc::Sender<Job>>,
    receiver: Arc<Mutex<mpsc::Receiver<Job>>>,
    threads: usize,
    /// Threads started so far (never more than `threads`).
    started: AtomicUsize,
    /// Jobs sent whose result is not yet delivered.
    outstanding: Arc<AtomicUsize>,
    busy: Arc<AtomicUsize>,
}

/// A job panicked: the host's own fault, reported as the run's error.
#[derive(Debug)]
pub struct Panicked;

impl PolicyPool {
    /// A pool of up to `threads` threads (at least one, at most
    /// [`MAX_POLICY_THREADS`]), none started until a job comes. `0` makes
    /// an inline pool ([`PolicyPool::inline`]).
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::channel::<Job>();
        Ok(PolicyPool {
            queue: Mutex::new(sender),
            receiver: Arc::new(Mutex::new(receiver)),
            threads: threads.min(MAX_POLICY_THREADS),
            started: AtomicUsize::new(0),
            outstanding: Arc::new(AtomicUsize::new(0)),
            busy: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// A pool with no threads: each job runs on the thread that awaits it.
    /// For a one-shot host that runs one command and exits (`cordon run`):
    /// no thread to start and no hop between threads, while a slow call
    /// holds the awaiting thread (and each call is still bounded by its own
    /// deadline).
    pub fn inline() -> Self {
        PolicyPool::new(0).expect("an inline pool starts no thread")
    }

    /// Start one more thread when `outstanding` jobs (before this one)
    /// already occupy every started thread and the bound allows; false when
    /// no thread exists to take the job (then it runs inline). A thread
    /// that cannot be started is not an error while another one runs jobs.
    fn grow(&self, outstanding: usize) -> bool {
        let index = self.started.load(Ordering::Acquire);
        if outstanding < index {
            return true;
        }
        let index = self.started.fetch_add(1, Ordering::AcqRel);
        if index >= self.threads {
            self.started.fetch_sub(1, Ordering::AcqRel);
            return index > 0;
        }
        let (receiver, busy) = (self.receiver.clone(), self.busy.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("cordon-policy-{index}"))
            .spawn(move || {
                loop {
                    // Hold the lock only to take the next job.
                    let next = receiver.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(job) = next else { return };
                    busy.fetch_add(1, Ordering::Relaxed);
                    // A panic in one job must not take the thread down.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    busy.fetch_sub(1, Ordering::Relaxed);
                }
            });
        match spawned {
            Ok(_) => true,
            Err(_) => {
                self.started.fetch_sub(1, Ordering::AcqRel);
                index > 0
            }
        }
    }

    /// How many threads the pool has.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How many threads are running a job right now.
    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::Relaxed)
    }

    /// Run `job` on a pool thread and await its result, without holding
    /// the awaiting thread.
    pub async fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, Panicked> {
        let outstanding = Outstanding::count(&self.outstanding);
        if self.threads == 0 || !self.grow(outstanding.before) {
            drop(outstanding);
            self.busy.fetch_add(1, Ordering::Relaxed);
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            self.busy.fetch_sub(1, Ordering::Relaxed);
            return done.map_err(|_| Panicked);
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Box::new(move || {
                let result = job();
                // Counted out before the result is delivered, so that the
                // next job of the same awaiting task finds the thread free.
                drop(outstanding);
                let _ = tx.send(result);
            }));
        if sent.is_err() {
            return Err(Panicked);
        }
        // A job that panicked drops its sender unsent.
        rx.await.map_err(|_| Panicked)
    }
}

/// One job counted in the pool's outstanding jobs until dropped (also when
/// the job panics).
struct Outstanding {
    count: Arc<AtomicUsize>,
    /// The jobs outstanding before this one.
    before: usize,
}

impl Outstanding {
    fn count(count: &Arc<AtomicUsize>) -> Self {
        let before = count.fetch_add(1, Ordering::AcqRel);
        Outstanding {
            count: count.clone(),
            before,
        }
    }
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for PolicyPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyPool")
            .field("threads", &self.threads)
            .field("busy", &self.busy())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_slow_job_does_not_hold_up_another() {
        let pool = Arc::new(PolicyPool::new(2).unwrap());
        let (release, held) = std::sync::mpsc::channel::<()>();
        let slow = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.run(move || held.recv().is_ok()).await.unwrap() })
        };
        // The slow job occupies one thread; the other answers at once.
        let quick = tokio::time::timeout(Duration::from_secs(10), pool.run(|| 7))
            .await
            .expect("the free thread runs the job")
            .unwrap();
        assert_eq!(quick, 7);
        release.send(()).unwrap();
        assert!(slow.await.unwrap());
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_the_thread_lives_on() {
        let pool = PolicyPool::new(1).unwrap();
        assert!(pool.run(|| panic!("boom")).await.is_err());
        assert_eq!(pool.run(|| 1).await.unwrap(), 1);
        assert_eq!(pool.threads(), 1);
    }

    #[tokio::test]
    async fn threads_start_as_jobs_need_them() {
        let pool = PolicyPool::new(4).unwrap();
        assert_eq!(pool.started.load(Ordering::Relaxed), 0, "none up front");
        for _ in 0..5 {
            let name = pool
                .run(|| std::thread::current().name().map(str::to_owned))
                .await
                .unwrap();
            assert_eq!(name.as_deref(), Some("cordon-policy-0"));
        }
        assert_eq!(
            pool.started.load(Ordering::Relaxed),
            1,
            "one job at a time: one thread"
        );
    }

    #[tokio::test]
    async fn an_inline_pool_runs_jobs_on_the_awaiting_thread() {
        let pool = PolicyPool::inline();
        let here = std::thread::current().id();
        assert!(
            pool.run(move || std::thread::current().id() == here)
                .await
                .unwrap()
        );
        assert!(pool.run(|| panic!("boom")).await.is_err());
        assert_eq!(pool.threads(), 0);
    }
}
