//! cgroup v2: one unified mount. A run gets `<parent>/<run>`, where the
//! parent is `cordon` at the root for a host in the root cgroup or an
//! operator's delegated cgroup; the child starts inside
//! (`CLONE_INTO_CGROUP`), and ending a run writes `cgroup.kill`.

#[allow(unused_imports, reason = "the parent module's names, as one scope")]
use super::*;

/// The parent runs' cgroups go in on the unified mount: `v2_parent` where
/// configured, else `<mount>/cordon` for a host in the root cgroup.
pub(super) fn find(
    mounts: &[(PathBuf, String, String)],
    system: &System,
    v2_parent: Option<&Path>,
) -> Result<Hierarchy, String> {
    let Some((point, _, _)) = mounts.iter().find(|(_, fstype, _)| fstype == "cgroup2") else {
        return Err("no cgroup hierarchy is mounted".into());
    };
    let parent = match v2_parent {
        Some(parent) => parent.to_path_buf(),
        None => match layout::own_path(&system.cgroup, None).as_deref() {
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

/// Make `parent` and enable the controllers its children get; the ones
/// now enabled.
pub(super) fn prepare(parent: &Path) -> Result<Vec<String>, String> {
    layout::make_writable(parent)
        .map_err(|err| format!("cgroup v2: cannot make {}: {err}", parent.display()))?;
    Ok(enable_controllers(parent))
}

/// Enable pids, memory and cpu for `parent`'s children where the parent's
/// own `cgroup.controllers` offers them; the ones now enabled.
fn enable_controllers(parent: &Path) -> Vec<String> {
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

/// The files and values `limits` are written as in the run's `dir`.
pub(super) fn limit_files(dir: &Path, limits: &RunLimits) -> Vec<(PathBuf, String)> {
    let mut files = vec![];
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
    files
}

/// Run `spawn` with an open fd of the run's `dir` to start the child in.
pub(super) fn spawn_inside<T>(
    dir: &Path,
    spawn: impl FnOnce(Option<std::os::fd::RawFd>) -> io::Result<T>,
) -> io::Result<T> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let directory = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY)
        .open(dir)?;
    spawn(Some(directory.as_raw_fd()))
}

/// `SIGKILL` every member of `run`: `cgroup.kill`, else one by one.
pub(super) fn kill(run: &RunCgroup, dir: &Path) {
    if fs::write(dir.join("cgroup.kill"), "1").is_err() {
        run::kill_each(&run.members(), std::process::id() as i32);
    }
}

/// The counter files whose key counts the pids and memory limits reached.
pub(super) fn counters(dir: &Path) -> [Option<(PathBuf, &'static str)>; 2] {
    [
        Some((dir.join("pids.events"), "max")),
        Some((dir.join("memory.events"), "oom_kill")),
    ]
}
