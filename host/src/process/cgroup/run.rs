//! One run's cgroup: its directories, limits, the spawn placed inside,
//! its members, and the one way to end all of it.

#[allow(unused_imports, reason = "the parent module's names, as one scope")]
use super::*;

/// One v1 controller's directory of a run.
#[derive(Debug)]
pub struct Member {
    pub(super) controller: Controller,
    pub(super) dir: PathBuf,
    pub(super) home: PathBuf,
}

/// A run's own cgroup; ended and removed when dropped.
#[derive(Debug)]
pub enum RunCgroup {
    /// One directory per v1 controller.
    V1 {
        /// The directories.
        members: Vec<Member>,
        /// A thread of the host already inside them, staged to spawn the
        /// run's child (see [`Cgroups::create`]); taken by the spawn.
        spawner: std::sync::Mutex<Option<Staging>>,
    },
    /// One directory on the unified hierarchy.
    V2 {
        /// The run's directory.
        dir: PathBuf,
    },
}

/// How long ending a run's cgroup may take before it is left (and named
/// in the host's log by the caller); a kill normally takes milliseconds.
const KILL_BOUND: Duration = Duration::from_secs(2);

impl RunCgroup {
    pub(super) fn dirs(&self) -> Vec<&Path> {
        match self {
            RunCgroup::V1 { members, .. } => members.iter().map(|m| m.dir.as_path()).collect(),
            RunCgroup::V2 { dir } => vec![dir.as_path()],
        }
    }

    /// Its directories (each gone once the cgroup is removed: the kernel
    /// removes a cgroup only when no process is left in it).
    pub fn directories(&self) -> Vec<PathBuf> {
        self.dirs().into_iter().map(Path::to_path_buf).collect()
    }

    pub(super) fn member(&self, controller: Controller) -> Option<&Path> {
        match self {
            RunCgroup::V1 { members, .. } => v1::member(members, controller),
            RunCgroup::V2 { .. } => None,
        }
    }

    /// The files and values `limits` are written as, for this hierarchy.
    pub fn limit_files(&self, limits: &RunLimits) -> Vec<(PathBuf, String)> {
        match self {
            RunCgroup::V1 { members, .. } => v1::limit_files(members, limits),
            RunCgroup::V2 { dir } => v2::limit_files(dir, limits),
        }
    }

    pub(super) fn write_limits(&self, limits: &RunLimits) -> io::Result<()> {
        for (file, value) in self.limit_files(limits) {
            match fs::write(&file, &value) {
                Ok(()) => {}
                // No swap controller: nothing to bound.
                Err(_) if file.ends_with("memory.swap.max") => {}
                Err(err) => {
                    return Err(io::Error::new(
                        err.kind(),
                        format!("{}: {err}", file.display()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Run `spawn` so that the process it starts is a member from its
    /// first instruction: on v1 the calling thread moves into the run's
    /// cgroups for the spawn (the child inherits them) and back; on v2
    /// `spawn` gets an open fd of the run's directory to start the child
    /// in (`CLONE_INTO_CGROUP`).
    pub fn spawn_inside<T: Send + 'static>(
        &self,
        spawn: impl FnOnce(Option<std::os::fd::RawFd>) -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        match self {
            RunCgroup::V1 { members, spawner } => v1::spawn_inside(members, spawner, spawn),
            RunCgroup::V2 { dir } => v2::spawn_inside(dir, spawn),
        }
    }

    /// Park a spawner thread inside this (v1) cgroup, for the spawn.
    pub(super) fn stage_spawner(&self) -> io::Result<()> {
        let RunCgroup::V1 { members, spawner } = self else {
            return Ok(());
        };
        let into = members.iter().map(|m| m.dir.join("tasks")).collect();
        let staged = Spawner::inside(into)?;
        if let Ok(mut slot) = spawner.lock() {
            *slot = Some(Staging::Ready(staged));
        }
        Ok(())
    }

    /// The processes in the run's cgroup(s).
    pub fn members(&self) -> Vec<i32> {
        let mut all = vec![];
        for dir in self.dirs() {
            if let Ok(list) = fs::read_to_string(dir.join("cgroup.procs")) {
                all.extend(
                    list.lines()
                        .filter_map(|pid| pid.trim().parse::<i32>().ok()),
                );
            }
        }
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Whether any process is still in it.
    pub fn populated(&self) -> bool {
        !self.members().is_empty()
    }

    /// `SIGKILL` every member, with nothing able to fork away: v2 writes
    /// `cgroup.kill`; v1 freezes the set, kills each member and thaws.
    /// Never signals the host itself.
    pub fn kill(&self) {
        match self {
            RunCgroup::V2 { dir } => v2::kill(self, dir),
            RunCgroup::V1 { spawner, .. } => v1::kill(self, spawner),
        }
    }

    /// The limits the run reached, from the kernel's counters.
    pub fn exceeded(&self) -> Vec<LimitKind> {
        let [pids, memory] = match self {
            RunCgroup::V1 { members, .. } => v1::counters(members),
            RunCgroup::V2 { dir } => v2::counters(dir),
        };
        let mut hit = vec![];
        if pids.is_some_and(|(file, key)| count(&file, key) > 0) {
            hit.push(LimitKind::Pids);
        }
        if memory.is_some_and(|(file, key)| count(&file, key) > 0) {
            hit.push(LimitKind::Memory);
        }
        hit
    }

    /// End every member and remove the cgroup(s), within a bound.
    pub fn remove(&self) {
        let until = Instant::now() + KILL_BOUND;
        loop {
            self.kill();
            let mut left = false;
            for dir in self.dirs() {
                if dir.exists() && fs::remove_dir(dir).is_err() {
                    left = true;
                }
            }
            if !left || Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // A staged spawner leaves first (its thread exits), so the
        // directories can go.
        if let RunCgroup::V1 { spawner, .. } = self {
            drop(spawner.get_mut().ok().and_then(Option::take));
        }
        self.remove();
    }
}

/// The value of `key` in the kernel's counter file `file` (0 when absent).
fn count(file: &Path, key: &str) -> u64 {
    fs::read_to_string(file)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let (name, value) = line.split_once(' ')?;
                (name == key).then(|| value.trim().parse().ok())?
            })
        })
        .unwrap_or(0)
}

/// `SIGKILL` each of `pids` but `me`.
pub(super) fn kill_each(pids: &[i32], me: i32) {
    for &pid in pids {
        if pid != me && pid > 1 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
