//! Where runs' cgroups go: the host's cgroup mounts read from
//! `/proc/self/mountinfo`, the layout on either hierarchy, and v2's
//! controllers enabled for the children.

#[allow(unused_imports, reason = "the parent module's names, as one scope")]
use super::*;

/// The cgroup mounts in `mountinfo`: (mount point, filesystem type, super
/// options) for every `cgroup` and `cgroup2` mount.
pub(super) fn cgroup_mounts(mountinfo: &str) -> Vec<(PathBuf, String, String)> {
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
pub(super) fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// The host's own path in the hierarchy of `controller` (v1), or in the
/// unified one (`None`), from `/proc/self/cgroup`.
pub(super) fn own_path(cgroup: &str, controller: Option<&str>) -> Option<String> {
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
pub(super) fn under(base: &Path, path: &str) -> PathBuf {
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
pub(super) fn make_writable(dir: &Path) -> io::Result<()> {
    use nix::unistd::{AccessFlags, access};
    fs::create_dir_all(dir)?;
    access(dir, AccessFlags::W_OK | AccessFlags::X_OK).map_err(io::Error::from)
}

/// Enable pids, memory and cpu for `parent`'s children where the parent's
/// own `cgroup.controllers` offers them; the ones now enabled.
pub(super) fn enable_v2_controllers(parent: &Path) -> Vec<String> {
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
