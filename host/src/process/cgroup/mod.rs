//! A cgroup per run: the run's process set, its limits, and the one way
//! to end all of it.
//!
//! Membership is the kernel's, so nothing leaves it by `setsid`, a double
//! fork or reparenting; limits (`pids`, memory, CPU weight) bound the whole
//! set, so a fork flood in one run cannot take the pids another run needs;
//! ending the run ends every member (`cgroup.kill` on v2; freeze, kill
//! every member, thaw on v1, where a frozen set cannot fork away from the
//! kill).
//!
//! Both hierarchies (the shared part is here and in `run.rs`, `layout.rs`
//! and `sweep.rs`; each hierarchy's own in `v1.rs` and `v2.rs`):
//!
//! * **v1** (one mount per controller, `/sys/fs/cgroup/<controller>`):
//!   a run gets `<controller mount>/<the host's own cgroup>/cordon/<run>`
//!   in each of `pids`, `memory`, `cpu` and `freezer` that is mounted.
//!   The child is placed *at spawn*: a thread of the host inside the
//!   run's cgroups (v1 `tasks` moves one thread) spawns it — the child
//!   inherits the thread's cgroups, so it is inside before its first
//!   instruction. The thread moves itself by writing `0` to `tasks`
//!   ([`MOVE_THIS_THREAD`]), which spares the migration the RCU grace
//!   period (≈ 10 ms) that naming its id costs. The next runs' cgroups are
//!   still *staged*: made ahead by a background thread, each with a spawner
//!   thread already inside, parked until its run ends (a runner's
//!   parent-death signal is tied to the thread that spawned it). Without a
//!   staged one, the calling thread moves in, spawns and moves back.
//! * **v2** (one unified mount): a run gets `<parent>/<run>`, where parent
//!   is `/sys/fs/cgroup/cordon` for a host in the root cgroup, or an
//!   operator's delegated cgroup (`cgroup_parent`), whose
//!   `cgroup.subtree_control` cordon enables the controllers in. A v2
//!   process cannot move one thread alone, so the child *starts* inside
//!   (`CLONE_INTO_CGROUP`: glibc's `posix_spawnattr_setcgroup_np` where
//!   it has one, else a fork-style `clone3`; see `spawn.rs`).
//!
//! A run's cgroup is named `<host pid>-<n>`, so [`Cgroups::sweep`] at the
//! next start can end and remove those a `SIGKILL`ed host left behind.
//!
//! The host never signals itself: every kill skips the host's own pid,
//! and a thread that could not move back (it stays in a run's cgroup)
//! makes that run skip the freezer.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::model::{LimitEnforcer, LimitKind, RunLimits};

mod layout;
mod run;
mod spawner;
mod sweep;
mod v1;
mod v2;

pub use layout::layout;
pub use run::{Member, RunCgroup};
use spawner::holds_host_thread;
pub use spawner::{Spawner, Staging};

/// Whether runs get their own cgroup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CgroupChoice {
    /// Where the host can make one: v1, or v2 in the root cgroup.
    #[default]
    Auto,
    /// On v2, in this delegated cgroup (its `cgroup.subtree_control` is
    /// cordon's to write); v1 is used as under `Auto`.
    Parent(PathBuf),
    /// Never: the launcher's supervision and `RLIMIT_*` only.
    Off,
}

/// What contains a host's runs, as `cordon probe` reports it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Containment {
    /// `cgroup-v1`, `cgroup-v2`, or `supervisor` (no cgroup: cordon's
    /// launcher ends the tree, where it runs the command).
    pub mechanism: &'static str,
    /// Where runs' cgroups are made, or why there are none.
    pub detail: String,
    /// What enforces the deployment's limits, and those in force.
    pub limits: crate::model::LimitFacts,
}

impl Containment {
    /// The report for a host with `cgroups` (or the reason it has none)
    /// and the deployment's `limits`.
    pub fn of(cgroups: Result<&Cgroups, &str>, limits: &RunLimits) -> Containment {
        match cgroups {
            Ok(cgroups) => Containment {
                mechanism: match cgroups.enforcer() {
                    LimitEnforcer::CgroupV2 => "cgroup-v2",
                    _ => "cgroup-v1",
                },
                detail: cgroups.describe(),
                limits: crate::model::LimitFacts {
                    enforced_by: cgroups.enforcer(),
                    limits: cgroups.in_force(limits),
                    exceeded: vec![],
                },
            },
            Err(why) => Containment {
                mechanism: "supervisor",
                detail: format!(
                    "no cgroup ({why}); cordon's launcher ends each run's tree, and sets \
                     RLIMIT_NPROC (per user; not binding on root) and RLIMIT_AS (per \
                     process) for the command"
                ),
                limits: crate::model::LimitFacts {
                    enforced_by: LimitEnforcer::Rlimit,
                    limits: RunLimits {
                        cpu_weight: None,
                        ..*limits
                    },
                    exceeded: vec![],
                },
            },
        }
    }
}

/// The directory every run's cgroup is made in, under the base.
const CORDON_DIR: &str = "cordon";

/// The v1 controllers cordon uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Controller {
    /// Number of tasks.
    Pids,
    /// Memory (and swap where accounted).
    Memory,
    /// CPU shares.
    Cpu,
    /// Freezing, for a kill nothing escapes.
    Freezer,
}

impl Controller {
    const ALL: [Controller; 4] = [
        Controller::Pids,
        Controller::Memory,
        Controller::Cpu,
        Controller::Freezer,
    ];

    /// Its name in `/proc/self/cgroup` and the mount options.
    pub fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
            Controller::Freezer => "freezer",
        }
    }
}

/// Where runs' cgroups go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// v1: per controller, the `cordon` directory runs are made in and the
    /// host's own cgroup directory (where a spawning thread moves back to).
    V1(Vec<V1Controller>),
    /// v2: the directory runs are made in (controllers enabled in its
    /// `cgroup.subtree_control`), and which controllers it has.
    V2 {
        /// The parent directory.
        parent: PathBuf,
        /// Controllers available to its children.
        controllers: Vec<String>,
    },
}

/// One mounted v1 controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V1Controller {
    /// Which.
    pub controller: Controller,
    /// `<mount>/<host's own path>/cordon`.
    pub parent: PathBuf,
    /// `<mount>/<host's own path>`.
    pub home: PathBuf,
}

/// The host's ability to give runs cgroups: found once per host.
#[derive(Debug)]
pub struct Cgroups {
    layout: Hierarchy,
    /// v1: runs' cgroups made ahead, each with a spawner thread already
    /// inside (see [`Cgroups::create`]).
    staged: Arc<Staged>,
    /// The host runs one command and exits: one cgroup is made ahead, and
    /// none after it (each would cost a memory cgroup made and removed).
    one_run: bool,
}

/// The v1 cgroups made ahead of the runs that will take them.
#[derive(Debug, Default)]
struct Staged {
    ready: std::sync::Mutex<Vec<RunCgroup>>,
    /// A staging thread is at work.
    staging: std::sync::atomic::AtomicBool,
    /// Signalled when a cgroup is staged (or staging stops).
    arrived: std::sync::Condvar,
    /// The host is gone: a staging thread still at work keeps nothing.
    closed: std::sync::atomic::AtomicBool,
}

/// What a thread writes to a v1 `tasks` file to move itself: `0`, "the
/// writer". The kernel then needs no threadgroup stability and skips the
/// global `cgroup_threadgroup_rwsem`, whose write side waits for an RCU
/// grace period; writing the thread's own id instead takes it. Measured on
/// this kernel: 0.15 ms against 6–12 ms for a process's first migration,
/// which was most of a one-shot `cordon run`.
const MOVE_THIS_THREAD: &str = "0";

/// How long a run of a many-run host waits for a staging thread already
/// at work.
const STAGE_WAIT: Duration = Duration::from_millis(50);

/// How long a one-run host waits for its staging thread: that thread is
/// making the run's only cgroup, and a second one made beside it on a busy
/// machine would only queue behind the same migration and leave two. A
/// staging thread that fails stops and says so, so this bound is only
/// reached by a thread stuck in the kernel.
const ONE_RUN_STAGE_WAIT: Duration = Duration::from_secs(5);

/// How many v1 cgroups are kept staged.
const STAGED: usize = 2;

/// The number in the next run cgroup's name: one counter per process, as
/// several hosts in one process share the `cordon` directories.
static NEXT_RUN: AtomicU64 = AtomicU64::new(0);

/// Mounts and memberships as the kernel lists them; passed in so the
/// layout logic is tested against either hierarchy's files.
#[derive(Clone, Debug, Default)]
pub struct System {
    /// `/proc/self/mountinfo`.
    pub mountinfo: String,
    /// `/proc/self/cgroup`.
    pub cgroup: String,
}

impl System {
    /// This machine's.
    pub fn current() -> System {
        System {
            mountinfo: fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
            cgroup: fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
        }
    }
}

impl Cgroups {
    /// Find where runs' cgroups go on this machine and make the `cordon`
    /// parent directories (and, on v2, enable the controllers); an error
    /// says why runs get no cgroup here. `one_run`: the host runs one
    /// command and exits (the CLI), so only its cgroup is made ahead.
    pub fn detect(v2_parent: Option<&Path>, one_run: bool) -> Result<Cgroups, String> {
        if !cfg!(target_os = "linux") {
            return Err("cgroups are Linux only".into());
        }
        let mut layout = layout(&System::current(), v2_parent)?;
        match &mut layout {
            Hierarchy::V1(controllers) => v1::prepare(controllers)?,
            Hierarchy::V2 {
                parent,
                controllers,
            } => *controllers = v2::prepare(parent)?,
        }
        let cgroups = Cgroups {
            layout,
            staged: Arc::default(),
            one_run,
        };
        cgroups.sweep();
        // Ready before the first run: it overlaps the component's load.
        cgroups.stage();
        Ok(cgroups)
    }

    /// The layout in use.
    pub fn layout(&self) -> &Hierarchy {
        &self.layout
    }

    /// What enforces runs' limits.
    pub fn enforcer(&self) -> LimitEnforcer {
        match self.layout {
            Hierarchy::V1(_) => LimitEnforcer::CgroupV1,
            Hierarchy::V2 { .. } => LimitEnforcer::CgroupV2,
        }
    }

    /// One line for `cordon probe`: the hierarchy, where, which controllers.
    pub fn describe(&self) -> String {
        match &self.layout {
            Hierarchy::V1(controllers) => format!(
                "cgroup v1: {}",
                controllers
                    .iter()
                    .map(|c| c.parent.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Hierarchy::V2 {
                parent,
                controllers,
            } => format!(
                "cgroup v2: {} (controllers: {})",
                parent.display(),
                if controllers.is_empty() {
                    "none: membership and kill only".to_owned()
                } else {
                    controllers.join(", ")
                }
            ),
        }
    }

    /// The part of `limits` this layout enforces (a controller that is
    /// not there bounds nothing).
    pub fn in_force(&self, limits: &RunLimits) -> RunLimits {
        let has = |name: &str| match &self.layout {
            Hierarchy::V1(controllers) => controllers.iter().any(|c| c.controller.name() == name),
            Hierarchy::V2 { controllers, .. } => controllers.iter().any(|c| c == name),
        };
        RunLimits {
            pids: limits.pids.filter(|_| has("pids")),
            memory_bytes: limits.memory_bytes.filter(|_| has("memory")),
            cpu_weight: limits.cpu_weight.filter(|_| has("cpu")),
        }
    }

    /// Make a run's cgroup with `limits` written.
    ///
    /// On v1 a run usually takes one made ahead, whose spawner thread is
    /// already inside: moving a thread into a v1 cgroup waits for an RCU
    /// grace period (≈ 10 ms on an idle kernel), which is then paid off the
    /// run's path, by a staging thread, while the host does other work.
    pub fn create(&self, limits: &RunLimits) -> io::Result<RunCgroup> {
        let taken = self.take_staged();
        if !self.one_run {
            self.stage();
        }
        let run = match taken {
            Some(run) => run,
            None => make_in(&self.layout)?,
        };
        // Only what a controller here enforces: the others have no file.
        run.write_limits(&self.in_force(limits))?;
        Ok(run)
    }

    /// Write the limits a controller here enforces of `limits` into `run`
    /// (a cgroup made earlier, whose run turned out to have these).
    pub fn limit(&self, run: &RunCgroup, limits: &RunLimits) -> io::Result<()> {
        run.write_limits(&self.in_force(limits))
    }

    /// A staged cgroup: one that is ready, or the one a staging thread is
    /// moving into now (its migration is under way, and a migration of our
    /// own would only queue behind it), within a bound.
    fn take_staged(&self) -> Option<RunCgroup> {
        let mut ready = self.staged.ready.lock().ok()?;
        let wait = if self.one_run {
            ONE_RUN_STAGE_WAIT
        } else {
            STAGE_WAIT
        };
        let until = Instant::now() + wait;
        loop {
            if let Some(run) = ready.pop() {
                return Some(run);
            }
            let now = Instant::now();
            if !self.staged.staging.load(Ordering::Acquire) || now >= until {
                return None;
            }
            ready = self.staged.arrived.wait_timeout(ready, until - now).ok()?.0;
        }
    }

    /// How many runs' cgroups are kept made ahead.
    fn ahead(&self) -> usize {
        if self.one_run { 1 } else { STAGED }
    }

    /// Start a staging thread, unless one is at work or enough are staged:
    /// it makes the next run's v1 cgroups and a spawner inside them.
    fn stage(&self) {
        if !matches!(self.layout, Hierarchy::V1(_)) {
            return;
        }
        let enough = self
            .staged
            .ready
            .lock()
            .map_or(true, |ready| ready.len() >= self.ahead());
        if enough || self.staged.staging.swap(true, Ordering::AcqRel) {
            return;
        }
        let staged = self.staged.clone();
        let layout = self.layout.clone();
        let ahead = self.ahead();
        // A one-run host makes its one cgroup and no other: counted, not
        // read from `ready` — the run takes the staged one as soon as it is
        // there, and a loop that saw `ready` empty again made a second.
        let mut to_make = if self.one_run { ahead } else { usize::MAX };
        let started = std::thread::Builder::new()
            .name("cordon-stage".into())
            .spawn(move || {
                while to_make > 0 && staged.ready.lock().is_ok_and(|ready| ready.len() < ahead) {
                    to_make -= 1;
                    let Ok(run) = make_in(&layout) else { break };
                    if run.stage_spawner().is_err() {
                        break;
                    }
                    // Checked under the lock the host's drop takes too.
                    let Ok(mut ready) = staged.ready.lock() else {
                        break;
                    };
                    if staged.closed.load(Ordering::Acquire) {
                        drop(ready);
                        break; // `run` is ended and removed here
                    }
                    ready.push(run);
                    drop(ready);
                    staged.arrived.notify_all();
                }
                staged.staging.store(false, Ordering::Release);
                staged.arrived.notify_all();
            });
        if started.is_err() {
            self.staged.staging.store(false, Ordering::Release);
        }
    }
}

/// Make a run's cgroup directories in `layout`, no limits written.
fn make_in(layout: &Hierarchy) -> io::Result<RunCgroup> {
    let name = format!(
        "{}-{}",
        std::process::id(),
        NEXT_RUN.fetch_add(1, Ordering::Relaxed)
    );
    let run = match layout {
        Hierarchy::V1(controllers) => RunCgroup::V1 {
            members: controllers
                .iter()
                .map(|c| Member {
                    controller: c.controller,
                    dir: c.parent.join(&name),
                    home: c.home.clone(),
                })
                .collect(),
            spawner: Default::default(),
        },
        Hierarchy::V2 { parent, .. } => RunCgroup::V2 {
            dir: parent.join(&name),
        },
    };
    for dir in run.dirs() {
        fs::create_dir(dir)?;
    }
    Ok(run)
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        // The staged cgroups of this host end with it (a staging thread
        // still at work removes what it was making).
        let drained = match self.staged.ready.lock() {
            Ok(mut ready) => {
                self.staged.closed.store(true, Ordering::Release);
                std::mem::take(&mut *ready)
            }
            Err(_) => vec![],
        };
        // Ended outside the lock (each joins its spawner thread).
        drop(drained);
    }
}

/// A job for a spawner thread.
type Job = Box<dyn FnOnce() + Send>;

#[cfg(test)]
mod tests {
    use super::layout::cgroup_mounts;
    use super::*;

    const V1_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const V1_CGROUP: &str = "8:pids:/\n6:freezer:/\n4:memory:/svc/agent\n1:cpu,cpuacct:/\n0::/\n";

    const V2_MOUNTS: &str = "\
30 23 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
";

    fn v1() -> System {
        System {
            mountinfo: V1_MOUNTS.into(),
            cgroup: V1_CGROUP.into(),
        }
    }

    #[test]
    fn v1_runs_go_under_the_hosts_own_cgroup_per_controller() {
        let Hierarchy::V1(controllers) = layout(&v1(), None).unwrap() else {
            panic!("not v1");
        };
        let dirs: Vec<_> = controllers
            .iter()
            .map(|c| (c.controller, c.parent.clone(), c.home.clone()))
            .collect();
        assert_eq!(
            dirs,
            vec![
                (
                    Controller::Pids,
                    "/sys/fs/cgroup/pids/cordon".into(),
                    "/sys/fs/cgroup/pids/".into()
                ),
                (
                    Controller::Memory,
                    "/sys/fs/cgroup/memory/svc/agent/cordon".into(),
                    "/sys/fs/cgroup/memory/svc/agent".into()
                ),
                (
                    Controller::Cpu,
                    "/sys/fs/cgroup/cpu/cordon".into(),
                    "/sys/fs/cgroup/cpu/".into()
                ),
                (
                    Controller::Freezer,
                    "/sys/fs/cgroup/freezer/cordon".into(),
                    "/sys/fs/cgroup/freezer/".into()
                ),
            ]
        );
    }

    #[test]
    fn v2_runs_go_under_cordon_at_the_root_or_a_delegated_parent() {
        let root = System {
            mountinfo: V2_MOUNTS.into(),
            cgroup: "0::/\n".into(),
        };
        assert_eq!(
            layout(&root, None).unwrap(),
            Hierarchy::V2 {
                parent: "/sys/fs/cgroup/cordon".into(),
                controllers: vec![]
            }
        );
        let service = System {
            mountinfo: V2_MOUNTS.into(),
            cgroup: "0::/system.slice/agent.service\n".into(),
        };
        let err = layout(&service, None).unwrap_err();
        assert!(err.contains("/system.slice/agent.service"), "{err}");
        assert!(err.contains("cgroup_parent"), "{err}");
        let delegated = Path::new("/sys/fs/cgroup/system.slice/agent.service/runs");
        assert_eq!(
            layout(&service, Some(delegated)).unwrap(),
            Hierarchy::V2 {
                parent: delegated.into(),
                controllers: vec![]
            }
        );
        let none = System::default();
        assert!(layout(&none, None).is_err());
        // On a hybrid host, a delegated v2 parent wins over v1.
        let hybrid = Path::new("/sys/fs/cgroup/unified/runs");
        assert_eq!(
            layout(&v1(), Some(hybrid)).unwrap(),
            Hierarchy::V2 {
                parent: hybrid.into(),
                controllers: vec![]
            }
        );
        assert!(matches!(layout(&v1(), None).unwrap(), Hierarchy::V1(_)));
    }

    /// `FILE=VALUE` for each limit file of `cgroup`.
    fn rendered(cgroup: &RunCgroup, limits: &RunLimits) -> Vec<String> {
        cgroup
            .limit_files(limits)
            .into_iter()
            .map(|(file, value)| format!("{}={value}", file.display()))
            .collect()
    }

    #[test]
    fn limits_are_written_to_each_hierarchys_files() {
        let limits = RunLimits {
            pids: Some(64),
            memory_bytes: Some(1 << 20),
            cpu_weight: Some(50),
        };
        let v1 = RunCgroup::V1 {
            members: Controller::ALL
                .iter()
                .map(|&controller| Member {
                    controller,
                    dir: PathBuf::from(format!("/cg/{}/cordon/1-0", controller.name())),
                    home: PathBuf::new(),
                })
                .collect(),
            spawner: Default::default(),
        };
        let files = rendered(&v1, &limits);
        assert_eq!(
            files,
            [
                "/cg/pids/cordon/1-0/pids.max=64",
                "/cg/memory/cordon/1-0/memory.limit_in_bytes=1048576",
                "/cg/cpu/cordon/1-0/cpu.shares=512",
            ]
        );
        let v2 = RunCgroup::V2 {
            dir: "/cg/cordon/1-0".into(),
        };
        let files = rendered(&v2, &limits);
        assert_eq!(
            files,
            [
                "/cg/cordon/1-0/pids.max=64",
                "/cg/cordon/1-0/memory.max=1048576",
                "/cg/cordon/1-0/memory.swap.max=0",
                "/cg/cordon/1-0/cpu.weight=50",
            ]
        );
        assert!(v2.limit_files(&RunLimits::NONE).is_empty());
    }

    #[test]
    fn mount_points_with_spaces_are_unescaped() {
        let mounts = cgroup_mounts("1 0 0:1 / /a\\040b rw - cgroup2 cgroup2 rw\n");
        assert_eq!(mounts[0].0, PathBuf::from("/a b"));
    }
}
