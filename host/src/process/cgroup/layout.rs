//! Where runs' cgroups go: the host's cgroup mounts read from
//! `/proc/self/mountinfo`, and which hierarchy runs' cgroups go on.

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
    match v1::find(&mounts, system) {
        Some(v1) => Ok(v1),
        None => v2::find(&mounts, system, v2_parent),
    }
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
