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

    pub(super) fn member(&self, controller: Controller) -> Option<&Path> {
        match self {
            RunCgroup::V1 { members, .. } => members
                .iter()
                .find(|m| m.controller == controller)
                .map(|m| m.dir.as_path()),
            RunCgroup::V2 { .. } => None,
        }
    }

    /// The files and values `limits` are written as, for this hierarchy.
    pub fn limit_files(&self, limits: &RunLimits) -> Vec<(PathBuf, String)> {
        let mut files = vec![];
        match self {
            RunCgroup::V1 { .. } => {
                if let (Some(pids), Some(dir)) = (limits.pids, self.member(Controller::Pids)) {
                    files.push((dir.join("pids.max"), pids.to_string()));
                }
                if let (Some(bytes), Some(dir)) =
                    (limits.memory_bytes, self.member(Controller::Memory))
                {
                    files.push((dir.join("memory.limit_in_bytes"), bytes.to_string()));
                    // With swap accounting, swap counts too (written after
                    // the memory limit, which it may not be below).
                    let swap = dir.join("memory.memsw.limit_in_bytes");
                    if swap.exists() {
                        files.push((swap, bytes.to_string()));
                    }
                }
                if let (Some(weight), Some(dir)) = (limits.cpu_weight, self.member(Controller::Cpu))
                {
                    // cpu.shares 1024 is the default weight 100.
                    files.push((
                        dir.join("cpu.shares"),
                        (weight * 1024 / 100).max(2).to_string(),
                    ));
                }
            }
            RunCgroup::V2 { dir } => {
                if let Some(pids) = limits.pids {
                    files.push((dir.join("pids.max"), pids.to_string()));
                }
                if let Some(bytes) = limits.memory_bytes {
                    files.push((dir.join("memory.max"), bytes.to_string()));
                    files.push((dir.join("memory.swap.max"), "0".into()));
                }
                if let Some(weight) = limits.cpu_weight {
                    files.push((dir.join("cpu.weight"), weight.to_string()));
                }
            }
        }
        files
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
            // A staged spawner is used once; it stays (parked) with the run.
            RunCgroup::V1 { spawner, .. }
                if let Some(staged) = spawner
                    .lock()
                    .ok()
                    .and_then(|mut slot| slot.as_mut().and_then(Staging::take)) =>
            {
                let result = staged.run(move || spawn(None));
                if let Ok(mut slot) = spawner.lock() {
                    *slot = Some(Staging::Used(staged));
                }
                result?
            }
            RunCgroup::V1 { members, .. } => {
                for member in members {
                    fs::write(member.dir.join("tasks"), MOVE_THIS_THREAD)?;
                }
                let spawned = spawn(None);
                for member in members {
                    // Back home; a thread left inside would be frozen and
                    // killed with the run.
                    let _ = fs::write(member.home.join("tasks"), MOVE_THIS_THREAD);
                }
                spawned
            }
            RunCgroup::V2 { dir } => {
                use std::os::fd::AsRawFd;
                use std::os::unix::fs::OpenOptionsExt;
                let directory = fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(nix::libc::O_DIRECTORY)
                    .open(dir)?;
                spawn(Some(directory.as_raw_fd()))
            }
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
        let me = std::process::id() as i32;
        match self {
            RunCgroup::V2 { dir } => {
                if fs::write(dir.join("cgroup.kill"), "1").is_err() {
                    kill_each(&self.members(), me);
                }
            }
            RunCgroup::V1 { spawner, .. } => {
                // The parked spawner goes first (a frozen host thread would
                // stall the host); its exit also ends a runner still alive.
                if let Ok(mut slot) = spawner.lock() {
                    drop(slot.take());
                }
                // Nothing left (the supervisor swept its tree): nothing can
                // fork into an empty cgroup, so there is nothing to freeze.
                // Freezing is not free on v1: the first frozen cgroup turns
                // a kernel static key on and the thaw turns it off, each
                // patching kernel text on every CPU.
                if self.members().is_empty() {
                    return;
                }
                let freezer = self
                    .member(Controller::Freezer)
                    .filter(|dir| !holds_host_thread(dir));
                if let Some(dir) = freezer {
                    let state = dir.join("freezer.state");
                    if fs::write(&state, "FROZEN").is_ok() {
                        let until = Instant::now() + Duration::from_millis(500);
                        while fs::read_to_string(&state).is_ok_and(|s| s.trim() != "FROZEN")
                            && Instant::now() < until
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    kill_each(&self.members(), me);
                    let _ = fs::write(&state, "THAWED");
                } else {
                    kill_each(&self.members(), me);
                }
            }
        }
    }

    /// The limits the run reached, from the kernel's counters.
    pub fn exceeded(&self) -> Vec<LimitKind> {
        let mut hit = vec![];
        let count = |file: PathBuf, key: &str| -> u64 {
            fs::read_to_string(file)
                .ok()
                .and_then(|text| {
                    text.lines().find_map(|line| {
                        let (name, value) = line.split_once(' ')?;
                        (name == key).then(|| value.trim().parse().ok())?
                    })
                })
                .unwrap_or(0)
        };
        let (pids, memory) = match self {
            RunCgroup::V1 { .. } => (
                self.member(Controller::Pids)
                    .map_or(0, |d| count(d.join("pids.events"), "max")),
                self.member(Controller::Memory)
                    .map_or(0, |d| count(d.join("memory.oom_control"), "oom_kill")),
            ),
            RunCgroup::V2 { dir } => (
                count(dir.join("pids.events"), "max"),
                count(dir.join("memory.events"), "oom_kill"),
            ),
        };
        if pids > 0 {
            hit.push(LimitKind::Pids);
        }
        if memory > 0 {
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
