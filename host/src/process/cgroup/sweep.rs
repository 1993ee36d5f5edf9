//! The run cgroups a `SIGKILL`ed host left behind, ended and removed at
//! the next start.

#[allow(unused_imports, reason = "the parent module's names, as one scope")]
use super::*;

/// Which v1 controller the directory `dir` belongs to.
pub(super) fn v1_controller_of(dir: &Path, layout: &Hierarchy) -> Controller {
    match layout {
        Hierarchy::V1(controllers) => controllers
            .iter()
            .find(|c| dir.starts_with(&c.parent))
            .map_or(Controller::Pids, |c| c.controller),
        Hierarchy::V2 { .. } => Controller::Pids,
    }
}

/// Whether a process `pid` exists.
pub(super) fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

impl Cgroups {
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
