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
//! Both hierarchies:
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

/// How long a run waits for a staging thread already at work.
/// What a thread writes to a v1 `tasks` file to move itself: `0`, "the
/// writer". The kernel then needs no threadgroup stability and skips the
/// global `cgroup_threadgroup_rwsem`, whose write side waits for an RCU
/// grace period; writing the thread's own id instead takes it. Measured on
/// this kernel: 0.15 ms against 6–12 ms for a process's first migration,
/// which was most of a one-shot `cordon run`.
const MOVE_THIS_THREAD: &str = "0";

const STAGE_WAIT: Duration = Duration::from_millis(50);

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

/// The cgroup mounts in `mountinfo`: (mount point, filesystem type, super
/// options) for every `cgroup` and `cgroup2` mount.
fn cgroup_mounts(mountinfo: &str) -> Vec<(PathBuf, String, String)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            // `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS`
            let (before, after) = line.split_once(" - ")?;
            let point = before.split_whitespace().nth(4)?;
            let mut after = after.split_whitespace();
            let fstype = after.next()?;
            let _source = after.next()?;
            let options = after.next().unwrap_or_default();
            matches!(fstype, "cgroup" | "cgroup2").then(|| {
                (
                    PathBuf::from(unescape(point)),
                    fstype.to_owned(),
                    options.to_owned(),
                )
            })
        })
        .collect()
}

/// Mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// The host's own path in the hierarchy of `controller` (v1), or in the
/// unified one (`None`), from `/proc/self/cgroup`.
fn own_path(cgroup: &str, controller: Option<&str>) -> Option<String> {
    cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _id = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?;
        let matches = match controller {
            None => controllers.is_empty(),
            Some(name) => controllers.split(',').any(|c| c == name),
        };
        matches.then(|| path.to_owned())
    })
}

/// `base` joined with an absolute cgroup path.
fn under(base: &Path, path: &str) -> PathBuf {
    base.join(path.trim_start_matches('/'))
}

/// Where runs' cgroups would go on `system`: v1 when any of cordon's
/// controllers is mounted on its own, else v2 with controllers at
/// `parent` (configured, or `<mount>/cordon` for a host in the root
/// cgroup). Pure: nothing is created.
pub fn layout(system: &System, v2_parent: Option<&Path>) -> Result<Hierarchy, String> {
    let mounts = cgroup_mounts(&system.mountinfo);
    // An operator's delegated v2 parent is used as named, even beside v1
    // controllers (a hybrid host).
    if let Some(parent) = v2_parent
        && mounts
            .iter()
            .any(|(point, fstype, _)| fstype == "cgroup2" && parent.starts_with(point))
    {
        return Ok(Hierarchy::V2 {
            parent: parent.to_path_buf(),
            controllers: vec![],
        });
    }
    let mut v1 = vec![];
    for controller in Controller::ALL {
        let Some((point, _, _)) = mounts.iter().find(|(_, fstype, options)| {
            fstype == "cgroup" && options.split(',').any(|o| o == controller.name())
        }) else {
            continue;
        };
        let Some(own) = own_path(&system.cgroup, Some(controller.name())) else {
            continue;
        };
        let home = under(point, &own);
        v1.push(V1Controller {
            controller,
            parent: home.join(CORDON_DIR),
            home,
        });
    }
    if v1
        .iter()
        .any(|c| matches!(c.controller, Controller::Pids | Controller::Memory))
    {
        return Ok(Hierarchy::V1(v1));
    }
    let Some((point, _, _)) = mounts.iter().find(|(_, fstype, _)| fstype == "cgroup2") else {
        return Err("no cgroup hierarchy is mounted".into());
    };
    let parent = match v2_parent {
        Some(parent) => parent.to_path_buf(),
        None => match own_path(&system.cgroup, None).as_deref() {
            Some("/") => point.join(CORDON_DIR),
            Some(own) => {
                return Err(format!(
                    "cgroup v2: the host runs in {own}, not the root cgroup, and no \
                     cgroup_parent names a delegated cgroup it may make runs in"
                ));
            }
            None => return Err("cgroup v2: the host's own cgroup is not listed".into()),
        },
    };
    Ok(Hierarchy::V2 {
        parent,
        controllers: vec![],
    })
}

/// Make `dir` (and its parents) unless it exists, and check that this
/// user may make runs' cgroups in it: another user (root, an earlier run)
/// may have made it, and a cgroup this host cannot make is no cgroup, not
/// a failed spawn.
fn make_writable(dir: &Path) -> io::Result<()> {
    use nix::unistd::{AccessFlags, access};
    fs::create_dir_all(dir)?;
    access(dir, AccessFlags::W_OK | AccessFlags::X_OK).map_err(io::Error::from)
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
            Hierarchy::V1(controllers) => {
                let mut made = vec![];
                let mut why = vec![];
                for controller in controllers.drain(..) {
                    match make_writable(&controller.parent) {
                        Ok(()) => made.push(controller),
                        Err(err) => why.push(format!("{}: {err}", controller.parent.display())),
                    }
                }
                if !made
                    .iter()
                    .any(|c| matches!(c.controller, Controller::Pids | Controller::Memory))
                {
                    return Err(format!(
                        "cgroup v1: cannot make cordon's cgroups ({}); run as root or \
                         delegate the pids and memory hierarchies",
                        why.join("; ")
                    ));
                }
                *controllers = made;
            }
            Hierarchy::V2 {
                parent,
                controllers,
            } => {
                make_writable(parent)
                    .map_err(|err| format!("cgroup v2: cannot make {}: {err}", parent.display()))?;
                *controllers = enable_v2_controllers(parent);
            }
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
        let until = Instant::now() + STAGE_WAIT;
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
        let started = std::thread::Builder::new()
            .name("cordon-stage".into())
            .spawn(move || {
                while staged.ready.lock().is_ok_and(|ready| ready.len() < ahead) {
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

    /// End and remove every run cgroup a host that is gone left behind
    /// (its pid, the name's prefix, is not alive).
    pub fn sweep(&self) {
        let parents: Vec<&Path> = match &self.layout {
            Hierarchy::V1(controllers) => controllers.iter().map(|c| c.parent.as_path()).collect(),
            Hierarchy::V2 { parent, .. } => vec![parent.as_path()],
        };
        for parent in parents {
            let Ok(entries) = fs::read_dir(parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(owner) = name
                    .split_once('-')
                    .and_then(|(pid, _)| pid.parse::<i32>().ok())
                else {
                    continue;
                };
                if owner == std::process::id() as i32 || alive(owner) {
                    continue;
                }
                let dir = entry.path();
                let stale = match &self.layout {
                    Hierarchy::V1(_) => RunCgroup::V1 {
                        members: vec![Member {
                            controller: v1_controller_of(&dir, &self.layout),
                            dir,
                            home: PathBuf::new(),
                        }],
                        spawner: Default::default(),
                    },
                    Hierarchy::V2 { .. } => RunCgroup::V2 { dir },
                };
                drop(stale); // ends and removes it
            }
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

/// Which v1 controller the directory `dir` belongs to.
fn v1_controller_of(dir: &Path, layout: &Hierarchy) -> Controller {
    match layout {
        Hierarchy::V1(controllers) => controllers
            .iter()
            .find(|c| dir.starts_with(&c.parent))
            .map_or(Controller::Pids, |c| c.controller),
        Hierarchy::V2 { .. } => Controller::Pids,
    }
}

/// Whether a process `pid` exists.
fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// Enable pids, memory and cpu for `parent`'s children where the parent's
/// own `cgroup.controllers` offers them; the ones now enabled.
fn enable_v2_controllers(parent: &Path) -> Vec<String> {
    let offered = fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
    let mut enabled = vec![];
    for name in ["pids", "memory", "cpu"] {
        if offered.split_whitespace().any(|c| c == name)
            && fs::write(parent.join("cgroup.subtree_control"), format!("+{name}")).is_ok()
        {
            enabled.push(name.to_owned());
        }
    }
    enabled
}

/// One v1 controller's directory of a run.
#[derive(Debug)]
pub struct Member {
    controller: Controller,
    dir: PathBuf,
    home: PathBuf,
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
    fn dirs(&self) -> Vec<&Path> {
        match self {
            RunCgroup::V1 { members, .. } => members.iter().map(|m| m.dir.as_path()).collect(),
            RunCgroup::V2 { dir } => vec![dir.as_path()],
        }
    }

    fn member(&self, controller: Controller) -> Option<&Path> {
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

    fn write_limits(&self, limits: &RunLimits) -> io::Result<()> {
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
    fn stage_spawner(&self) -> io::Result<()> {
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
    fn take(&mut self) -> Option<Spawner> {
        match std::mem::replace(self, Staging::Lent) {
            Staging::Ready(spawner) => Some(spawner),
            other => {
                *self = other;
                None
            }
        }
    }
}

/// A job for a spawner thread.
type Job = Box<dyn FnOnce() + Send>;

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
    fn inside(into: Vec<PathBuf>) -> io::Result<Spawner> {
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
    fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
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

/// `SIGKILL` each of `pids` but `me`.
fn kill_each(pids: &[i32], me: i32) {
    for &pid in pids {
        if pid != me && pid > 1 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Whether a thread of the host is in the v1 cgroup `dir` (one that could
/// not move back after a spawn): freezing it would freeze the host.
fn holds_host_thread(dir: &Path) -> bool {
    let me = std::process::id() as i32;
    fs::read_to_string(dir.join("cgroup.procs"))
        .is_ok_and(|list| list.lines().any(|pid| pid.trim().parse() == Ok(me)))
}

#[cfg(test)]
mod tests {
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
