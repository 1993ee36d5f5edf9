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

/// A fixed set of threads that run policy jobs (see the module docs).
pub struct PolicyPool {
    queue: Mutex<mpsc::Sender<Job>>,
    threads: usize,
    busy: Arc<AtomicUsize>,
}

/// A job panicked: the host's own fault, reported as the run's error.
#[derive(Debug)]
pub struct Panicked;

impl PolicyPool {
    /// A pool of `threads` threads (at least one, at most
    /// [`MAX_POLICY_THREADS`]).
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let threads = threads.clamp(1, MAX_POLICY_THREADS);
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let busy = Arc::new(AtomicUsize::new(0));
        for index in 0..threads {
            let receiver = receiver.clone();
            let busy = busy.clone();
            std::thread::Builder::new()
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
                })?;
        }
        Ok(PolicyPool {
            queue: Mutex::new(sender),
            threads,
            busy,
        })
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
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Box::new(move || {
                let _ = tx.send(job());
            }));
        if sent.is_err() {
            return Err(Panicked);
        }
        // A job that panicked drops its sender unsent.
        rx.await.map_err(|_| Panicked)
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
}
