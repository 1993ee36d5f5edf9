//! The v1 spawner thread parked inside a staged cgroup, which spawns the
//! run's child there (the child inherits the thread's cgroups).

#[allow(unused_imports, reason = "the parent module's names, as one scope")]
use super::*;

/// A run's staged spawner, before and after its spawn.
#[derive(Debug)]
pub enum Staging {
    /// Inside, waiting for the spawn.
    Ready(Spawner),
    /// Spawned the run's child; kept alive for it.
    Used(Spawner),
    /// Lent to the spawn in progress.
    Lent,
}

impl Staging {
    /// The ready spawner, leaving `Lent` in its place.
    pub(super) fn take(&mut self) -> Option<Spawner> {
        match std::mem::replace(self, Staging::Lent) {
            Staging::Ready(spawner) => Some(spawner),
            other => {
                *self = other;
                None
            }
        }
    }
}

/// A thread of the host parked inside a run's v1 cgroups, to spawn the
/// run's child from there (the child inherits the thread's cgroups). After
/// its one job it stays, parked, until the run is ended: a runner's
/// parent-death signal (bwrap's `--die-with-parent`, the launcher's) fires
/// when the *thread* that spawned it exits, so the thread must outlive the
/// runner. Ending the run lets it go first, so the freezer can be used.
#[derive(Debug)]
pub struct Spawner {
    jobs: Option<std::sync::mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spawner {
    /// A thread that writes its id to each of `into` (moving itself into
    /// those cgroups) and waits for its job; returns once it is inside.
    pub(super) fn inside(into: Vec<PathBuf>) -> io::Result<Spawner> {
        let (jobs, job) = std::sync::mpsc::channel::<Job>();
        let (ready, joined) = std::sync::mpsc::channel::<io::Result<()>>();
        let thread = std::thread::Builder::new()
            .name("cordon-spawner".into())
            .spawn(move || {
                let moved = into
                    .iter()
                    .try_for_each(|file| fs::write(file, MOVE_THIS_THREAD));
                let inside = moved.is_ok();
                let _ = ready.send(moved);
                if inside && let Ok(job) = job.recv() {
                    job();
                }
                // Parked until the run is ended (the channel closes), so
                // the runner's parent-death signal holds. It stays inside:
                // moving home would be one more migration, and exiting
                // leaves the cgroups without one.
                let _ = job.recv();
            })?;
        let spawner = Spawner {
            jobs: Some(jobs),
            thread: Some(thread),
        };
        match joined.recv() {
            Ok(Ok(())) => Ok(spawner),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(io::Error::other(
                "the spawner thread ended before it was inside",
            )),
        }
    }

    /// Run `job` on the thread, inside the cgroups, and wait for it.
    pub(super) fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<T> {
        let (done, result) = std::sync::mpsc::channel();
        let job: Job = Box::new(move || {
            let _ = done.send(job());
        });
        let gone = || io::Error::other("the staged spawner thread is gone");
        self.jobs
            .as_ref()
            .ok_or_else(gone)?
            .send(job)
            .map_err(|_| gone())?;
        result.recv().map_err(|_| gone())
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        // Closing the job channel ends a thread still waiting.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether a thread of the host is in the v1 cgroup `dir` (one that could
/// not move back after a spawn): freezing it would freeze the host.
pub(super) fn holds_host_thread(dir: &Path) -> bool {
    let me = std::process::id() as i32;
    fs::read_to_string(dir.join("cgroup.procs"))
        .is_ok_and(|list| list.lines().any(|pid| pid.trim().parse() == Ok(me)))
}
