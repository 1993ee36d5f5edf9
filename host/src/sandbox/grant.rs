//! The grant as the backends enforce it: a [`SandboxPolicy`] laid out on
//! this host's file tree ([`Layout`]), and the placeholders that keep an
//! absent protected path from being created ([`hold`]).
//!
//! A policy names paths; a backend needs facts about them: which writable
//! roots there are, which protected paths exist inside them (read-only
//! binds) and which are absent (they must not be creatable), which
//! deny-read paths exist and whether each is a directory. [`lay_out`]
//! answers once per wrap, with the host's defaults
//! ([`PROTECTED_DEFAULTS`]) and the operator's own protected files added,
//! and with a worktree's `.git` file followed to the gitdir it names.
//!
//! bubblewrap can only mount over something that exists, so an absent
//! protected path gets a *placeholder*: an empty directory the host makes
//! before the spawn and bwrap binds read-only over itself; a directory is
//! not a file, so a command can create neither `.git/hooks` nor `.bashrc`
//! there. The host removes the placeholder after the run when no other run
//! still holds it (a shared `flock` on it says who does: removing a
//! directory another namespace has mounted over would detach that mount).

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use nix::libc;

use super::launcher::prefix::{sort_shallowest_first, starts_with, strip_prefix};
use super::opened::Opened;
use crate::model::{Endpoint, GrantFacts, Network, PROTECTED_DEFAULTS, SandboxPolicy};

/// A protected path inside a writable root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protected {
    /// Where it is.
    pub path: PathBuf,
    /// Whether it exists (else the backend must keep it from being made;
    /// a placeholder counts as absent: it is held like a new one).
    pub present: bool,
    /// It is a symlink: a mount lands on its target, and the link itself
    /// stays replaceable where its directory is writable.
    pub link: bool,
}

/// A deny-read path that exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hidden {
    /// Where it is.
    pub path: PathBuf,
    /// A directory (hidden under an empty one) rather than a file.
    pub dir: bool,
    /// The host's own (the spill root), not the grant's: what a backend
    /// enforces of it only in part is not the grant's partial.
    pub host: bool,
}

/// A policy laid out on this host's file tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Every directory the run may write to (workspace root first).
    pub writable: Vec<PathBuf>,
    /// Each writable root's `(device, inode)` as the layout opened it, in
    /// `writable`'s order, where its path is canonical (else none): what
    /// `--writable-root` tells the runner to find there.
    pub writable_identities: Vec<Option<(u64, u64)>>,
    /// Protected paths inside them, shallowest first.
    pub protected: Vec<Protected>,
    /// Deny-read paths that exist, shallowest first.
    pub hidden: Vec<Hidden>,
    /// What the result reports (each backend adds what it enforces only
    /// in part).
    pub facts: GrantFacts,
    /// The grant's allow-list, which a backend with the proxy carries
    /// (`facts.network` says `none` until one does).
    pub allow_list: Option<Vec<Endpoint>>,
}

impl Layout {
    /// Whether the run's network is closed (anything but `full`).
    pub fn network_closed(&self) -> bool {
        self.facts.network != Network::Full
    }

    /// The reason a backend gives when it must let every host unix socket
    /// through to expose the granted ones (the filter works by family).
    pub fn exposed_sockets_reason(&self) -> Option<String> {
        (self.network_closed() && !self.facts.sockets.is_empty()).then(|| {
            format!(
                "sockets: exposing {} leaves every host unix socket the run can name reachable \
                 (the socket filter works by family, not by path)",
                self.facts
                    .sockets
                    .iter()
                    .map(|s| s.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }

    /// The directories a mount-based backend binds onto themselves,
    /// writable, so that they are mount points a command cannot rename or
    /// remove: every directory strictly between a writable root and a
    /// protected path in it (moving `sub` away would move `sub/.git/hooks`'
    /// read-only mount with it, and a new `sub/.git` could be made in its
    /// place). Shallowest first.
    pub fn pinned(&self) -> Vec<PathBuf> {
        let mut pinned: Vec<PathBuf> = vec![];
        for protected in self.protected.iter().filter(|p| !p.link) {
            let Some(root) = self
                .writable
                .iter()
                .find(|r| starts_with(&protected.path, r))
            else {
                continue;
            };
            let mut at = protected.path.parent();
            while let Some(dir) = at.filter(|dir| starts_with(dir, root) && dir != root) {
                let guarded = self.protected.iter().any(|p| starts_with(dir, &p.path));
                if !guarded && !dir.is_symlink() && !pinned.iter().any(|p| p == dir) {
                    pinned.push(dir.to_path_buf());
                }
                at = dir.parent();
            }
        }
        sort_shallowest_first(&mut pinned, |p| p.as_path());
        pinned
    }

    /// The absent protected paths, which a placeholder must hold.
    pub fn absent(&self) -> Vec<PathBuf> {
        self.protected
            .iter()
            .filter(|p| !p.present)
            .map(|p| p.path.clone())
            .collect()
    }
}

pub use crate::places::expand_home;

/// Whether `path` names something on disk (a dangling symlink counts),
/// asked through the open root it lies below.
fn exists(path: &Path, opened: &Opened) -> bool {
    opened.at(path).symlink_metadata().is_ok()
}

/// The mode of a placeholder directory: what tells one from a user's own
/// empty directory (which is never removed).
const PLACEHOLDER_MODE: u32 = 0o500;

/// The mode of a placeholder file (see [`super::git::placeholder_content`]).
const PLACEHOLDER_FILE_MODE: u32 = 0o444;

/// Whether `path` is a placeholder (another run's, or a crashed host's),
/// asked through the open root it lies below.
fn is_placeholder(path: &Path, opened: &Opened) -> bool {
    let through = opened.at(path);
    match through.symlink_metadata() {
        Ok(meta) if meta.is_file() => {
            File::open(&through).is_ok_and(|file| file_is_placeholder(path, &file))
        }
        Ok(meta) => {
            meta.is_dir()
                && meta.mode() & 0o7777 == PLACEHOLDER_MODE
                && meta.nlink() <= 2
                && std::fs::read_dir(&through).is_ok_and(|mut entries| entries.next().is_none())
        }
        Err(_) => false,
    }
}

/// Whether the open `file` at `path` is a placeholder file: mode 0444, one
/// link, and the content a placeholder there has.
fn file_is_placeholder(path: &Path, file: &File) -> bool {
    use std::io::Read;
    let Some(content) = super::git::placeholder_content(path) else {
        return false;
    };
    let meta = file.metadata();
    let mut read = Vec::new();
    meta.is_ok_and(|meta| {
        meta.is_file()
            && meta.mode() & 0o7777 == PLACEHOLDER_FILE_MODE
            && meta.nlink() <= 2
            && meta.len() == content.len() as u64
    }) && file.take(64).read_to_end(&mut read).is_ok()
        && read == content.as_bytes()
}

/// The first component of `path` below `root` that does not exist (or is
/// a placeholder), when `path` lies inside `root`; `path` itself when it
/// exists.
fn first_missing(root: &Path, path: &Path, opened: &Opened) -> PathBuf {
    let mut at = root.to_path_buf();
    for component in strip_prefix(path, root).unwrap_or(path).components() {
        at.push(component);
        // A placeholder counts as absent: one a SIGKILLed host left (mode
        // 0500) is joined as the path to hold, not made a parent that a
        // user without privilege could not make the deeper one in.
        if !exists(&at, opened) || (at != path && is_placeholder(&at, opened)) {
            return at;
        }
    }
    at
}

/// Whether a component of `path` strictly between `root` and `path` is a
/// symlink.
fn beneath_link(root: &Path, path: &Path, opened: &Opened) -> bool {
    let Some(rest) = strip_prefix(path, root) else {
        return false;
    };
    let mut at = root.to_path_buf();
    let mut components = rest.components().peekable();
    while let Some(component) = components.next() {
        at.push(component);
        if components.peek().is_some() && opened.at(&at).is_symlink() {
            return true;
        }
    }
    false
}

/// `path` with `.` and `..` resolved lexically.
pub(super) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other @ (Component::Prefix(_) | Component::RootDir | Component::Normal(_)) => {
                out.push(other)
            }
        }
    }
    out
}

/// Lay `policy` out on this host. `host_protected` are the operator's own
/// files (the deployed policy and config), protected wherever they lie in
/// a writable root; `host_hidden` are the host's own directories (the
/// sessions' spill root), hidden from every run like a deny-read path but
/// not reported among the grant's.
pub fn lay_out(
    policy: &SandboxPolicy,
    host_protected: &[PathBuf],
    host_hidden: &[PathBuf],
) -> Layout {
    let writable: Vec<PathBuf> = policy
        .writable()
        .into_iter()
        .map(Path::to_path_buf)
        .collect();
    let opened = Opened::open(&writable);
    let wanted = wanted_protected(policy, &writable, host_protected, &opened);
    let protected = protected_paths(policy, &writable, wanted, &opened);
    let (deny_read, hidden) = hidden_paths(policy, host_hidden);
    let (network, narrowed) = closed_until_proxied(&policy.network);
    let facts = GrantFacts {
        writable_roots: writable.clone(),
        protected: protected.iter().map(|p| p.path.clone()).collect(),
        deny_read,
        network,
        sockets: policy.sockets.iter().map(|p| expand_home(p)).collect(),
        unenforced: vec![],
        partial: vec![],
        narrowed,
        ..GrantFacts::default()
    };
    let allow_list = match &policy.network {
        Network::Allow(endpoints) => Some(endpoints.clone()),
        Network::None | Network::Full => None,
    };
    let writable_identities = writable.iter().map(|root| opened.identity(root)).collect();
    Layout {
        writable,
        writable_identities,
        protected,
        hidden,
        facts,
        allow_list,
    }
}

/// The names a grant of `policy` protects in each writable root: the
/// protected defaults less the lifted ones (git's own come from `git.rs`),
/// and the policy's relative names.
fn protected_names(policy: &SandboxPolicy) -> impl Iterator<Item = PathBuf> + '_ {
    PROTECTED_DEFAULTS
        .iter()
        .filter(|name| !name.starts_with(".git"))
        .filter(|name| !policy.unprotected.iter().any(|lifted| lifted == *name))
        .map(PathBuf::from)
        .chain(policy.protected.iter().filter(|p| p.is_relative()).cloned())
}

/// Whether a name `policy` protects is missing from one of its writable
/// roots, so that its layout would hold it with a placeholder: a stat of
/// each name through the open root, for whoever gives up on a grant with
/// placeholders before laying it out (the runner started ahead of its
/// plan). A guess — git's paths and the policy's absolute ones are not
/// asked —; [`lay_out`] decides.
pub fn lacks_a_protected_name(policy: &SandboxPolicy) -> bool {
    let writable: Vec<PathBuf> = policy
        .writable()
        .into_iter()
        .map(Path::to_path_buf)
        .collect();
    let opened = Opened::open(&writable);
    protected_names(policy).any(|name| {
        writable
            .iter()
            .any(|root| !exists(&root.join(&name), &opened))
    })
}

/// Every path a run of `policy` must not write, with the writable root it
/// lies in: the protected defaults (less the lifted ones) and the policy's
/// relative names in each root, its absolute paths and the host's where a
/// root holds them, and git's code in every gitdir found (`git.rs`).
fn wanted_protected(
    policy: &SandboxPolicy,
    writable: &[PathBuf],
    host_protected: &[PathBuf],
    opened: &Opened,
) -> Vec<(PathBuf, PathBuf)> {
    let mut wanted: Vec<(PathBuf, PathBuf)> = vec![];
    for name in protected_names(policy) {
        for root in writable {
            wanted.push((root.clone(), root.join(&name)));
        }
    }
    let absolute = policy
        .protected
        .iter()
        .filter(|p| p.is_absolute())
        .chain(host_protected)
        .map(|p| normalize(p));
    for path in absolute {
        if let Some(root) = writable.iter().find(|root| starts_with(&path, root)) {
            wanted.push((root.clone(), path));
        }
    }
    wanted.extend(super::git::wanted(writable, &policy.unprotected, opened));
    wanted
}

/// The protected paths a backend must hold, from the `wanted` ones: each
/// where it exists, or where its first missing component would be made
/// (`.git/hooks` needs no placeholder of its own when `.git` is absent);
/// nothing beneath a symlink (the link is held and reported instead), and
/// a protected symlink's target too where a run may write it. Shallowest
/// first.
fn protected_paths(
    policy: &SandboxPolicy,
    writable: &[PathBuf],
    wanted: Vec<(PathBuf, PathBuf)>,
    opened: &Opened,
) -> Vec<Protected> {
    let inside_writable = |path: &Path| writable.iter().any(|root| starts_with(path, root));
    let mut protected: Vec<Protected> = vec![];
    for (root, wanted) in wanted {
        if beneath_link(&root, &wanted, opened) {
            continue;
        }
        let path = first_missing(&root, &wanted, opened);
        if path == root || !inside_writable(&path) {
            continue;
        }
        // A lifted default is never held, not even for a path beneath it
        // (with `.git` lifted and absent, `git init` may make it; its hooks
        // are protected once it exists).
        let lifted = strip_prefix(&path, &root)
            .is_some_and(|rel| policy.unprotected.iter().any(|n| Path::new(n) == rel));
        if path != wanted && lifted {
            continue;
        }
        let present = exists(&path, opened) && !is_placeholder(&path, opened);
        let link = opened.at(&path).is_symlink();
        if !protected.iter().any(|p| p.path == path) {
            protected.push(Protected {
                path,
                present,
                link,
            });
        }
    }
    let targets: Vec<PathBuf> = protected
        .iter()
        .filter(|p| p.link)
        .filter_map(|p| std::fs::canonicalize(&p.path).ok())
        .filter(|target| inside_writable(target))
        .collect();
    for target in targets {
        if !protected.iter().any(|p| p.path == target) {
            protected.push(Protected {
                path: target,
                present: true,
                link: false,
            });
        }
    }
    sort_shallowest_first(&mut protected, |p| &p.path);
    protected
}

/// The policy's deny-read paths as written (`~` expanded), and every path
/// to hide that exists — the policy's and the host's own — shallowest
/// first.
fn hidden_paths(policy: &SandboxPolicy, host_hidden: &[PathBuf]) -> (Vec<PathBuf>, Vec<Hidden>) {
    let deny_read: Vec<PathBuf> = policy
        .deny_read
        .iter()
        .map(|p| normalize(&expand_home(p)))
        .collect();
    let mut hidden: Vec<Hidden> = deny_read
        .iter()
        .map(|path| (path, false))
        .chain(host_hidden.iter().map(|path| (path, true)))
        .filter_map(|(path, host)| {
            let meta = std::fs::metadata(path).ok()?;
            Some(Hidden {
                path: path.clone(),
                dir: meta.is_dir(),
                host,
            })
        })
        .collect();
    sort_shallowest_first(&mut hidden, |h| &h.path);
    hidden.dedup();
    (deny_read, hidden)
}

/// The network a layout grants before the allow-list's proxy is built
/// (the backend's wrap builds it): an allow-list is closed, and says so.
fn closed_until_proxied(network: &Network) -> (Network, Vec<String>) {
    match network {
        Network::Full => (Network::Full, vec![]),
        Network::None => (Network::None, vec![]),
        Network::Allow(endpoints) => (
            Network::None,
            vec![format!(
                "network: the allow-list ({}) needs cordon's network proxy, which this host \
                 does not have yet; the run has no network at all",
                endpoints
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )],
        ),
    }
}

/// The placeholders of one run, held until it is dropped: each one's
/// parent directory, its name there, the placeholder itself (locked
/// shared), and whether it is a file.
#[derive(Debug, Default)]
pub struct Held {
    held: Vec<(OwnedFd, CString, OwnedFd, bool)>,
}

/// `openat(dir, name)` as a directory, never following a symlink.
fn open_dir_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    open_at(dir, name, libc::O_DIRECTORY)
}

/// `openat(dir, name)` read-only with `flags` too, never following a
/// symlink.
fn open_at(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let flags = flags | libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid directory fd and a NUL-terminated name.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    match fd {
        -1 => Err(io::Error::last_os_error()),
        // SAFETY: openat returned a new fd that nothing else owns.
        fd => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
    }
}

/// Open the directory `path` (absolute), never following a symlink: a
/// placeholder is made in the directory the path names, not wherever a
/// link a command left there points. One `openat2` with
/// `RESOLVE_NO_SYMLINKS` (Linux 5.6) — a workspace 400 directories deep
/// once cost 400 opens for each placeholder — else component by component.
fn open_dir_nofollow(path: &Path) -> io::Result<OwnedFd> {
    #[cfg(not(target_os = "linux"))]
    return open_dir_by_components(path);
    #[cfg(target_os = "linux")]
    match open_dir_no_symlinks(path) {
        // No openat2 (an older kernel, or a seccomp filter that refuses
        // it): the same answer, one component at a time.
        Err(err) if matches!(err.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
            open_dir_by_components(path)
        }
        opened => opened,
    }
}

/// `openat2(path, O_DIRECTORY, RESOLVE_NO_SYMLINKS)`: a symlink anywhere
/// in `path` is `ELOOP`.
#[cfg(target_os = "linux")]
fn open_dir_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not an absolute path", path.display()),
        ));
    }
    super::launcher::paths::open_no_symlinks(
        path,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )
}

/// Open the directory `path` (absolute) component by component, never
/// following a symlink.
fn open_dir_by_components(path: &Path) -> io::Result<OwnedFd> {
    let mut dir: OwnedFd = File::open("/")?.into();
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => {
                let name = CString::new(name.as_bytes())
                    .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
                dir = open_dir_at(dir.as_fd(), &name)?;
            }
            Component::Prefix(_) | Component::CurDir | Component::ParentDir => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a normalized absolute path", path.display()),
                ));
            }
        }
    }
    Ok(dir)
}

/// Whether the open directory `dir` is a placeholder: mode 0500, empty.
fn fd_is_placeholder(dir: &OwnedFd) -> bool {
    let file = File::from(dir.try_clone().expect("dup a directory fd"));
    file.metadata()
        .is_ok_and(|meta| meta.mode() & 0o7777 == PLACEHOLDER_MODE && meta.nlink() <= 2)
}

/// Make (or join) a placeholder at each of `paths` — an empty directory of
/// mode 0500 (or, where git reads the name, a file of mode 0444 git reads
/// as absent: [`super::git::placeholder_content`]), locked shared for the
/// run's life — so that bwrap can bind it read-only. Every directory on
/// the way is opened without following a symlink, so a link a command left
/// in a workspace cannot point the host's `mkdir` elsewhere (such a path
/// is skipped: it is the command's own state, and bwrap binds it read-only
/// as it is). A path that exists by now as something else is left alone
/// too.
pub fn hold(paths: &[PathBuf]) -> io::Result<Held> {
    let mut held = Held::default();
    // Each parent is walked once (most share the writable root: a walk
    // of a deep workspace's path costs tens of microseconds each time).
    let mut parents: Vec<(&Path, OwnedFd)> = vec![];
    for path in paths {
        let cannot = |err: io::Error| {
            io::Error::new(
                err.kind(),
                format!(
                    "cannot make the placeholder that keeps {} from being created: {err}",
                    path.display()
                ),
            )
        };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        let opened = match parents.iter().find(|(opened, _)| *opened == parent) {
            Some((_, fd)) => fd.try_clone(),
            None => open_dir_nofollow(parent).and_then(|fd| {
                parents.push((parent, fd.try_clone()?));
                Ok(fd)
            }),
        };
        let parent = match opened {
            Ok(parent) => parent,
            Err(err) if err.raw_os_error() == Some(libc::ELOOP) => continue,
            Err(err) if err.raw_os_error() == Some(libc::ENOTDIR) => continue,
            Err(err) => return Err(cannot(err)),
        };
        let name = CString::new(name.as_bytes())
            .map_err(|_| cannot(io::ErrorKind::InvalidInput.into()))?;
        let content = super::git::placeholder_content(path);
        for attempt in 0.. {
            let made = match content {
                Some(content) => make_file(&parent, &name, content),
                None => make_dir(&parent, &name),
            };
            if let Err(err) = made
                && err.kind() != io::ErrorKind::AlreadyExists
            {
                return Err(cannot(err));
            }
            let opened = match content {
                Some(_) => open_at(parent.as_fd(), &name, libc::O_NONBLOCK).and_then(|file| {
                    match file_is_placeholder(path, &File::from(file.try_clone()?)) {
                        true => Ok(file),
                        false => Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
                    }
                }),
                None => open_dir_at(parent.as_fd(), &name),
            };
            match opened {
                Ok(fd) => {
                    lock(&fd, libc::LOCK_SH).map_err(cannot)?;
                    held.held.push((parent, name, fd, content.is_some()));
                    break;
                }
                // Removed by the run that held it last, between our mkdir
                // and our open: make it again.
                Err(err) if err.kind() == io::ErrorKind::NotFound && attempt < 8 => continue,
                // A symlink, a file or a directory of someone's own, not a
                // placeholder.
                Err(err)
                    if matches!(err.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) =>
                {
                    break;
                }
                Err(err) => return Err(cannot(err)),
            }
        }
    }
    Ok(held)
}

/// `mkdirat(parent, name)`, mode 0500.
fn make_dir(parent: &OwnedFd, name: &CStr) -> io::Result<()> {
    // SAFETY: a valid directory fd and a NUL-terminated name.
    let made = unsafe {
        libc::mkdirat(
            parent.as_raw_fd(),
            name.as_ptr(),
            PLACEHOLDER_MODE as libc::mode_t,
        )
    };
    match made {
        -1 => Err(io::Error::last_os_error()),
        _ => Ok(()),
    }
}

/// A placeholder file `name` in `parent` holding `content`, whole from the
/// moment it has its name: written under a private name first, then
/// linked to its name without replacing anything (`EEXIST` when the name
/// is taken; for a moment it has two links).
fn make_file(parent: &OwnedFd, name: &CStr, content: &str) -> io::Result<()> {
    use std::io::Write;
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary =
        CString::new(format!(".cordon-placeholder-{}-{made}", std::process::id())).expect("no NUL");
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid directory fd and a NUL-terminated name.
    let fd = unsafe { libc::openat(parent.as_raw_fd(), temporary.as_ptr(), flags, 0o400) };
    if fd == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new fd that nothing else owns.
    let mut file = unsafe { File::from_raw_fd(fd) };
    let written = file.write_all(content.as_bytes()).and_then(|()| {
        file.set_permissions(std::fs::Permissions::from_mode(PLACEHOLDER_FILE_MODE))
    });
    // A second name made without replacing anything (`EEXIST` when the
    // name is taken), then the private one dropped: linkat is atomic and
    // exists on every platform the host builds for.
    // SAFETY: linkat on names in a directory fd this function holds.
    let linked = written.and_then(|()| {
        match unsafe {
            libc::linkat(
                parent.as_raw_fd(),
                temporary.as_ptr(),
                parent.as_raw_fd(),
                name.as_ptr(),
                0,
            )
        } {
            -1 => Err(io::Error::last_os_error()),
            _ => Ok(()),
        }
    });
    // SAFETY: as above; the private name is this function's own.
    unsafe { libc::unlinkat(parent.as_raw_fd(), temporary.as_ptr(), 0) };
    linked
}

fn lock(dir: &OwnedFd, how: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on an fd this function's caller owns.
    match unsafe { libc::flock(dir.as_raw_fd(), how) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        for (parent, name, held, file) in self.held.drain(..) {
            // Removed only when no other run holds it (an exclusive lock
            // is then free), and only a placeholder (rmdir refuses a
            // directory that is not empty; a file is removed only while
            // its name is still this very file), by name in its parent.
            if lock(&held, libc::LOCK_EX | libc::LOCK_NB).is_err() {
                continue;
            }
            if file && still_named(&parent, &name, &held) {
                // SAFETY: a valid directory fd and a NUL-terminated name.
                unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), 0) };
            } else if !file && fd_is_placeholder(&held) {
                // SAFETY: a valid directory fd and a NUL-terminated name.
                unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) };
            }
        }
    }
}

/// Whether `name` in `parent` is still the placeholder file `held` (same
/// inode, mode 0444, one link).
fn still_named(parent: &OwnedFd, name: &CStr, held: &OwnedFd) -> bool {
    let stat_of = |fd: RawFd, name: &CStr, flags: libc::c_int| {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::zeroed();
        // SAFETY: fstatat writes a whole stat into the buffer it is given.
        let done = unsafe { libc::fstatat(fd, name.as_ptr(), stat.as_mut_ptr(), flags) };
        // SAFETY: zeroed is a valid stat, and fstatat filled it on success.
        (done == 0).then(|| unsafe { stat.assume_init() })
    };
    let named = stat_of(parent.as_raw_fd(), name, libc::AT_SYMLINK_NOFOLLOW);
    let own = File::from(held.try_clone().expect("dup a placeholder fd")).metadata();
    // `st_dev` and `st_ino` are not u64 on every platform the host builds for.
    #[allow(clippy::unnecessary_cast)]
    match (named, own) {
        (Some(named), Ok(own)) => {
            (named.st_dev as u64, named.st_ino as u64) == (own.dev(), own.ino())
                && own.mode() & 0o7777 == PLACEHOLDER_FILE_MODE
                && own.nlink() == 1
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SandboxMode;

    fn ws() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn host_defaults_are_protected_in_every_writable_root() {
        let (a, b) = (ws(), ws());
        std::fs::create_dir_all(a.path().join(".git/objects")).unwrap();
        std::fs::write(a.path().join(".bashrc"), "").unwrap();
        let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, a.path());
        policy.writable_roots.push(b.path().to_path_buf());
        let layout = lay_out(&policy, &[], &[]);
        let find = |p: PathBuf| layout.protected.iter().find(|x| x.path == p).cloned();
        assert!(
            find(a.path().join(".git")).is_none(),
            "git's data is writable"
        );
        assert!(find(a.path().join(".git/hooks")).is_some_and(|p| !p.present));
        assert!(find(a.path().join(".git/config")).is_some_and(|p| !p.present));
        assert!(find(a.path().join(".bashrc")).unwrap().present);
        assert!(find(b.path().join(".git")).is_some_and(|p| !p.present));
        assert!(
            find(b.path().join(".git/hooks")).is_none(),
            "the .git placeholder holds it"
        );
        assert_eq!(layout.writable, [a.path(), b.path()]);
        assert_eq!(layout.pinned(), [a.path().join(".git")]);
    }

    /// The guess agrees with the layout where it answers: a root holding
    /// every protected name (less a lifted one) has no placeholder, one
    /// lacking a name has; a read-only grant has no writable root.
    #[test]
    fn a_missing_protected_name_is_known_before_the_layout() {
        let a = ws();
        let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, a.path());
        // git's own paths are the layout's alone: lifted here.
        policy.unprotected.extend([".zshrc".into(), ".git".into()]);
        for name in protected_names(&policy) {
            std::fs::write(a.path().join(name), "").unwrap();
        }
        assert!(
            !lacks_a_protected_name(&policy),
            "the lifted .zshrc is not asked"
        );
        assert!(lay_out(&policy, &[], &[]).absent().is_empty());
        std::fs::remove_file(a.path().join(".bashrc")).unwrap();
        assert!(lacks_a_protected_name(&policy));
        assert!(!lay_out(&policy, &[], &[]).absent().is_empty());
        let ro = SandboxPolicy::new(SandboxMode::ReadOnly, a.path());
        assert!(!lacks_a_protected_name(&ro));
    }

    #[test]
    fn every_directory_above_a_protected_path_is_pinned() {
        let a = ws();
        std::fs::create_dir_all(a.path().join("x/y/.git/hooks")).unwrap();
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, a.path());
        let pinned = lay_out(&policy, &[], &[]).pinned();
        let want = ["x", "x/y", "x/y/.git"].map(|p| a.path().join(p));
        assert_eq!(pinned, want);
    }

    #[test]
    fn a_lifted_default_is_not_protected_and_read_only_protects_nothing() {
        let a = ws();
        let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, a.path());
        policy.unprotected.push(".bashrc".into());
        let layout = lay_out(&policy, &[], &[]);
        assert!(!layout.facts.protected.contains(&a.path().join(".bashrc")));
        assert!(layout.facts.protected.contains(&a.path().join(".profile")));
        let ro = SandboxPolicy::new(SandboxMode::ReadOnly, a.path());
        assert!(lay_out(&ro, &[], &[]).protected.is_empty());
    }

    #[test]
    fn a_lifted_git_is_not_held_at_all() {
        let a = ws();
        let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, a.path());
        policy.unprotected.push(".git".into());
        let layout = lay_out(&policy, &[], &[]);
        assert!(!layout.facts.protected.contains(&a.path().join(".git")));
        std::fs::create_dir(a.path().join(".git")).unwrap();
        let layout = lay_out(&policy, &[], &[]);
        assert!(
            !layout
                .facts
                .protected
                .iter()
                .any(|p| p.starts_with(a.path().join(".git")))
        );
    }

    #[test]
    fn a_worktree_gitdir_is_followed_and_host_files_count_inside_roots_only() {
        let a = ws();
        let gitdir = a.path().join("main/.git/worktrees/wt");
        std::fs::create_dir_all(&gitdir).unwrap();
        std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
        std::fs::create_dir(a.path().join("wt")).unwrap();
        std::fs::write(
            a.path().join("wt/.git"),
            format!("gitdir: {}\n", gitdir.display()),
        )
        .unwrap();
        let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, a.path().join("wt"));
        policy.writable_roots.push(a.path().join("main"));
        let layout = lay_out(
            &policy,
            &[a.path().join("main/cordon.toml"), "/etc/cordon.toml".into()],
            &[],
        );
        let paths = &layout.facts.protected;
        assert!(paths.contains(&gitdir.join("commondir")), "{paths:?}");
        assert!(paths.contains(&a.path().join("wt/.git")), "{paths:?}");
        assert!(
            paths.contains(&a.path().join("main/.git/hooks")),
            "{paths:?}"
        );
        assert!(paths.contains(&a.path().join("main/cordon.toml")));
        assert!(!paths.contains(&PathBuf::from("/etc/cordon.toml")));
    }

    #[test]
    fn deny_read_expands_home_and_keeps_what_exists() {
        let a = ws();
        std::fs::create_dir(a.path().join("secret")).unwrap();
        std::fs::write(a.path().join("key"), "k").unwrap();
        let mut policy = SandboxPolicy::new(SandboxMode::ReadOnly, a.path());
        policy.deny_read = vec![
            a.path().join("secret"),
            a.path().join("key"),
            a.path().join("absent"),
        ];
        let layout = lay_out(&policy, &[], &[]);
        assert_eq!(layout.hidden.len(), 2);
        assert!(
            layout
                .hidden
                .iter()
                .any(|h| h.dir && h.path.ends_with("secret"))
        );
        assert_eq!(layout.facts.deny_read.len(), 3);
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        assert_eq!(expand_home(Path::new("~/.ssh")), home.join(".ssh"));
        assert_eq!(expand_home(Path::new("/x/~")), PathBuf::from("/x/~"));
    }

    #[test]
    fn a_leftover_placeholder_is_the_path_held_not_a_parent() {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let ws = tempfile::tempdir().unwrap();
        let git = ws.path().join(".git");
        std::fs::DirBuilder::new()
            .mode(PLACEHOLDER_MODE)
            .create(&git)
            .unwrap();
        // Through the open root, as the layout asks, and by the path.
        let opened = Opened::open(&[ws.path().to_path_buf()]);
        for opened in [&opened, &Opened::default()] {
            assert_eq!(first_missing(ws.path(), &git.join("hooks"), opened), git);
            assert_eq!(first_missing(ws.path(), &git, opened), git);
        }
        std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            first_missing(ws.path(), &git.join("hooks"), &opened),
            git.join("hooks"),
            "a user's own empty .git is a parent"
        );
    }

    #[test]
    fn a_placeholder_file_reads_as_absent_to_git_and_goes_with_its_last_run() {
        let a = ws();
        std::fs::create_dir(a.path().join(".git")).unwrap();
        let path = a.path().join(".git/commondir");
        let first = hold(std::slice::from_ref(&path)).unwrap();
        let second = hold(std::slice::from_ref(&path)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), ".\n");
        let opened = Opened::open(&[a.path().to_path_buf()]);
        assert!(is_placeholder(&path, &opened));
        assert!(is_placeholder(&path, &Opened::default()));
        assert!(
            !lay_out(
                &SandboxPolicy::new(SandboxMode::WorkspaceWrite, a.path()),
                &[],
                &[]
            )
            .protected
            .iter()
            .any(|p| p.path == path && p.present)
        );
        drop(first);
        assert!(path.is_file(), "another run still holds it");
        drop(second);
        assert!(!path.exists());
        // A user's own file is neither taken for one nor removed.
        std::fs::write(&path, ".\n").unwrap();
        drop(hold(std::slice::from_ref(&path)).unwrap());
        assert!(path.is_file());
        assert!(std::fs::read_dir(a.path().join(".git")).unwrap().count() == 1);
    }

    #[test]
    fn a_directory_is_opened_through_no_symlink_in_one_call_or_by_components_alike() {
        let a = ws();
        let deep = (0..400).fold(a.path().to_path_buf(), |at, _| at.join("d"));
        std::fs::create_dir_all(&deep).unwrap();
        std::os::unix::fs::symlink(a.path(), a.path().join("link")).unwrap();
        std::fs::write(a.path().join("file"), "").unwrap();
        // What `hold` reads: opened, refused (a link or a file on the way:
        // ELOOP or ENOTDIR, skipped alike), or missing.
        let said = |opened: io::Result<OwnedFd>| match opened.map_err(|e| e.raw_os_error()) {
            Ok(_) => "opened",
            Err(Some(libc::ELOOP | libc::ENOTDIR)) => "refused",
            Err(Some(libc::ENOENT)) => "missing",
            Err(other) => panic!("{other:?}"),
        };
        let cases = [
            (deep.clone(), "opened"),
            (a.path().join("link/d"), "refused"),
            (a.path().join("link"), "refused"),
            (a.path().join("file/d"), "refused"),
            (a.path().join("absent/d"), "missing"),
        ];
        for (path, expected) in cases {
            assert_eq!(
                said(open_dir_nofollow(&path)),
                expected,
                "{}",
                path.display()
            );
            assert_eq!(
                said(open_dir_by_components(&path)),
                expected,
                "{}",
                path.display()
            );
        }
        // A placeholder 400 directories down is held like any other.
        let held = hold(&[deep.join(".git")]).unwrap();
        assert!(is_placeholder(
            &deep.join(".git"),
            &Opened::open(std::slice::from_ref(&deep))
        ));
        drop(held);
        assert!(!deep.join(".git").exists());
    }

    #[test]
    fn a_placeholder_is_removed_by_the_last_run_that_holds_it() {
        let a = ws();
        let path = a.path().join(".git");
        let first = hold(std::slice::from_ref(&path)).unwrap();
        let second = hold(std::slice::from_ref(&path)).unwrap();
        assert!(path.is_dir());
        drop(first);
        assert!(path.is_dir(), "another run still holds it");
        drop(second);
        assert!(!path.exists());
        // Something real that appeared in it is never removed, nor is a
        // user's own empty directory.
        let held = hold(std::slice::from_ref(&path)).unwrap();
        std::fs::write(path.join("HEAD"), "x").unwrap();
        drop(held);
        assert!(path.join("HEAD").exists());
        let own = a.path().join(".cordon");
        std::fs::create_dir(&own).unwrap();
        drop(hold(std::slice::from_ref(&own)).unwrap());
        assert!(own.is_dir());
        // A symlink a command left on the way is never followed.
        let outside = ws();
        std::os::unix::fs::symlink(outside.path(), a.path().join("link")).unwrap();
        drop(hold(&[a.path().join("link/.git")]).unwrap());
        assert!(
            !outside.path().join(".git").exists(),
            "the host made a dir through a link"
        );
        let held = hold(&[a.path().join("link")]).unwrap();
        assert!(held.held.is_empty(), "a symlink is not a placeholder");
    }
}
