//! The last step before the command's exec: the launcher checks that the
//! confinement it was asked for is there, and refuses to run the command
//! otherwise. A runner that does not confine — a `bwrap_path` that only
//! execs its arguments, a kernel that silently ignored a request — is then
//! a runner failure (`failed: …` on the status fd, exit 125), and the
//! command never starts unconfined.
//!
//! What is checked, from the kernel's own view of this process:
//!
//! * every namespace the host named as *outside* (`--outside
//!   pid=INODE,mnt=INODE,…`: the host's own, which a runner that confines
//!   replaces) is another one here;
//! * no capability is held — effective, permitted, inheritable or ambient
//!   — and no-new-privs is set, so no exec can gain one (a setuid-root or
//!   root's own exec is capped at the empty permitted set; bwrap run by
//!   root leaves the bounding set full, which then grants nothing);
//! * at least one seccomp filter is in force;
//! * every writable root (`--writable-root DEV:INO:PATH`) is the very
//!   directory the host checked: the host opened it without following a
//!   symlink, saw the kernel resolve it to exactly its checked path, and
//!   recorded its device and inode. The runner binds — or Landlock grants
//!   — whatever is at that path when it gets there; a racer that swapped
//!   the root for a symlink (or moved a directory in) in between has the
//!   bound directory differ, and the command is not run. Under bwrap and
//!   the namespace runner the check reads the mount inside the sandbox
//!   (fixed once made); under Landlock, the very descriptor the rule is
//!   made from.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A writable root and the identity the host checked it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// Where it is bound (and was checked).
    pub path: PathBuf,
    /// Its device, as `stat` says.
    pub dev: u64,
    /// Its inode.
    pub ino: u64,
}

/// The identity of the directory at `path`, which must be exactly where
/// the kernel resolves it — no symlink anywhere along it, the path already
/// canonical — or none.
#[cfg(target_os = "linux")]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use nix::fcntl::OFlag;
    use std::os::fd::AsFd;
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::open(path, flags, nix::sys::stat::Mode::empty()).ok()?;
    identity_of_open(fd.as_fd(), path)
}

/// The identity of the directory open as `dir`, when the kernel names
/// what was opened `path` itself (`/proc/self/fd`), or none: the rule of
/// [`root_arg`], for a directory its caller opened already.
#[cfg(target_os = "linux")]
pub fn identity_of_open(dir: std::os::fd::BorrowedFd<'_>, path: &Path) -> Option<(u64, u64)> {
    use std::os::fd::AsRawFd;
    // One `readlink` with a `PATH_MAX` buffer (std doubles from 256).
    let resolved = PathBuf::from(
        nix::fcntl::readlink(format!("/proc/self/fd/{}", dir.as_raw_fd()).as_str()).ok()?,
    );
    if resolved != path {
        return None;
    }
    let stat = nix::sys::stat::fstat(dir).ok()?;
    Some((stat.st_dev as u64, stat.st_ino as u64))
}

#[cfg(not(target_os = "linux"))]
fn identity(_: &Path) -> Option<(u64, u64)> {
    None
}

/// The `--writable-root` value for `path`, as the host checks it now:
/// `DEV:INO:PATH`, or `0:0:PATH` (which nothing matches: the run fails
/// inside, the command unstarted) when `path` is not the directory its
/// name says.
pub fn root_arg(path: &Path) -> String {
    let (dev, ino) = identity(path).unwrap_or((0, 0));
    root_arg_of(path, dev, ino)
}

/// The `--writable-root` value for `path` whose identity the caller took
/// itself (a directory it opened and found named `path`).
pub fn root_arg_of(path: &Path, dev: u64, ino: u64) -> String {
    format!("{dev}:{ino}:{}", path.display())
}

/// Parse a `--writable-root` value.
pub(super) fn parse_root(text: &str) -> Result<Root, String> {
    let mut parts = text.splitn(3, ':');
    let (Some(dev), Some(ino), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("--writable-root {text:?} is not DEV:INO:PATH"));
    };
    let number = |n: &str| {
        n.parse::<u64>()
            .map_err(|_| format!("--writable-root {text:?}: {n:?} is not a number"))
    };
    Ok(Root {
        path: PathBuf::from(path),
        dev: number(dev)?,
        ino: number(ino)?,
    })
}

impl Root {
    /// Whether `meta` (of what is bound or opened at the root) is the
    /// directory the host checked.
    pub(super) fn matches(&self, dev: u64, ino: u64) -> Result<(), String> {
        match self.ino != 0 && (dev, ino) == (self.dev, self.ino) {
            true => Ok(()),
            false => Err(format!(
                "the writable root {} is not the directory the host checked (it was replaced, \
                 or is reached through a symlink); the command is not run",
                self.path.display()
            )),
        }
    }

    /// The root as bound in this process's view (no symlink followed).
    fn bound(&self) -> Result<(), String> {
        let meta = std::fs::symlink_metadata(&self.path).map_err(|err| {
            format!(
                "cannot read the writable root {}: {err}",
                self.path.display()
            )
        })?;
        self.matches(meta.dev(), meta.ino())
    }
}

/// The namespaces a runner replaces, as the host names them.
pub const NAMESPACES: &[&str] = &["mnt", "pid", "ipc", "uts", "net", "user", "cgroup"];

/// This process's namespace `name`, by its inode.
pub(crate) fn namespace(name: &str) -> std::io::Result<u64> {
    std::fs::metadata(format!("/proc/self/ns/{name}")).map(|m| m.ino())
}

/// The `--outside` list for `names`: this (the host's) process's own
/// namespaces, `name=INODE` comma-separated; a namespace the kernel does
/// not show is left out.
pub fn outside(names: &[&str]) -> String {
    names
        .iter()
        .filter_map(|name| Some(format!("{name}={}", namespace(name).ok()?)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parse `--outside`: `name=INODE`, comma-separated, each a known name.
pub(super) fn parse(list: &str) -> Result<Vec<(String, u64)>, String> {
    list.split(',')
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (name, inode) = entry
                .split_once('=')
                .ok_or_else(|| format!("--outside entry {entry:?} is not NAME=INODE"))?;
            if !NAMESPACES.contains(&name) {
                return Err(format!("--outside names an unknown namespace {name:?}"));
            }
            let inode = inode
                .parse()
                .map_err(|_| format!("--outside {name}: {inode:?} is not an inode number"))?;
            Ok((name.to_owned(), inode))
        })
        .collect()
}

/// Check that this process is confined: none of the `outside` namespaces,
/// every root in `bound` the directory the host checked, no capability,
/// no-new-privs and a seccomp filter. The error says what is missing.
pub(super) fn confined(outside: &[(String, u64)], bound: &[Root]) -> Result<(), String> {
    for root in bound {
        root.bound()?;
    }
    for (name, inode) in outside {
        let here = namespace(name)
            .map_err(|err| format!("cannot read this process's {name} namespace: {err}"))?;
        if here == *inode {
            return Err(format!(
                "the runner did not give the command a {name} namespace of its own; the \
                 command is not run (check bwrap_path: it must be bubblewrap)"
            ));
        }
    }
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|err| format!("cannot read /proc/self/status: {err}"))?;
    check_status(&status)
}

/// The capability, no-new-privs and seccomp lines of a `/proc/PID/status`.
fn check_status(status: &str) -> Result<(), String> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        match field(set).map(|hex| u64::from_str_radix(hex, 16)) {
            Some(Ok(0)) | None => {}
            Some(Ok(caps)) => {
                return Err(format!(
                    "the command would keep capabilities ({set} {caps:#x}); it is not run"
                ));
            }
            Some(Err(_)) => return Err(format!("cannot read {set} in /proc/self/status")),
        }
    }
    if field("NoNewPrivs") != Some("1") {
        return Err("no-new-privs is not set; the command is not run".into());
    }
    if field("Seccomp") != Some("2") {
        return Err("no seccomp filter is in force; the command is not run".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outside_list_round_trips_and_unknown_names_are_refused() {
        let list = outside(&["pid", "mnt"]);
        let parsed = parse(&list).unwrap();
        assert_eq!(parsed.len(), 2, "{list}");
        assert_eq!(parsed[0].0, "pid");
        assert!(parse("bogus=1").is_err());
        assert!(parse("pid=x").is_err());
        assert!(parse("pid").is_err());
        assert_eq!(parse("").unwrap(), vec![]);
        // This test process is in its own namespaces: it is "outside".
        assert!(
            confined(&parsed, &[])
                .unwrap_err()
                .contains("pid namespace of its own")
        );
    }

    #[test]
    fn a_root_is_known_by_its_identity_and_a_swapped_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let ws = real.join("ws");
        std::fs::create_dir(&ws).unwrap();
        let root = parse_root(&root_arg(&ws)).unwrap();
        assert_eq!(root.path, ws);
        assert_eq!(root.bound(), Ok(()));
        // Swapped for a symlink to another directory: refused.
        let elsewhere = real.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::rename(&ws, real.join("moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &ws).unwrap();
        assert!(
            root.bound()
                .unwrap_err()
                .contains("not the directory the host checked")
        );
        // The host itself will not vouch for a symlinked root.
        assert!(root_arg(&ws).starts_with("0:0:"));
        assert!(parse_root(&root_arg(&ws)).unwrap().bound().is_err());
        assert!(parse_root("1:2").is_err());
        assert_eq!(parse_root("1:2:/a:b").unwrap().path, PathBuf::from("/a:b"));
    }

    #[test]
    fn capabilities_no_new_privs_and_seccomp_are_read_from_status() {
        let good = "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n\
                    CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n\
                    CapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n";
        assert_eq!(check_status(good), Ok(()));
        let caps = good.replace("CapPrm:\t0000000000000000", "CapPrm:\t000001ffffffffff");
        assert!(check_status(&caps).unwrap_err().contains("CapPrm"));
        // A full bounding set grants nothing under no-new-privs with
        // nothing permitted.
        let bounding = good.replace("CapBnd:\t0000000000000000", "CapBnd:\t000001ffffffffff");
        assert_eq!(check_status(&bounding), Ok(()));
        let privs = good.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0");
        assert!(check_status(&privs).unwrap_err().contains("no-new-privs"));
        let filter = good.replace("Seccomp:\t2", "Seccomp:\t0");
        assert!(check_status(&filter).unwrap_err().contains("seccomp"));
    }
}
