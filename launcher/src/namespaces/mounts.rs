//! Building the sandbox: the namespaces entered, every bind source cloned
//! from the host's view before anything is covered, the root built with the
//! new mount API and pivoted into, and the view a runner started ahead
//! checks before it takes its command.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::libc;

use super::profile::{Plan, Step};
use crate::paths::Anchors;

/// Enter the run's namespaces (the launcher, before it forks pid 1): a
/// user namespace mapping this user to itself when not root, then new
/// mount, PID, IPC and UTS namespaces, and a network namespace when the
/// plan closes the network — or, given `join_net`, the network namespace
/// at that fd ([`join_network`]), closed here either way.
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
pub fn enter(plan: &Plan, join_net: Option<RawFd>) -> Result<(), String> {
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut flags =
        libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    match join_net {
        // SAFETY: the host handed this fd over for the launcher alone;
        // owned (and closed) from here on.
        Some(fd) => join_network(unsafe { OwnedFd::from_raw_fd(fd) })?,
        None if plan.unshare_net => flags |= libc::CLONE_NEWNET,
        None => {}
    }
    let user = uid != 0;
    if user {
        flags |= libc::CLONE_NEWUSER;
    }
    // SAFETY: unshare with namespace flags affects this process only.
    if unsafe { libc::unshare(flags) } != 0 {
        let err = std::io::Error::last_os_error();
        return Err(format!(
            "cannot create the sandbox's namespaces ({}): {err}{}",
            if user {
                "user, mount, pid, ipc, uts"
            } else {
                "mount, pid, ipc, uts"
            },
            match (user, err.raw_os_error()) {
                (true, Some(libc::EPERM | libc::ENOSPC | libc::EACCES)) => {
                    " (unprivileged user namespaces are disabled or restricted here: \
                     kernel.unprivileged_userns_clone, user.max_user_namespaces, AppArmor \
                     or a seccomp filter)"
                }
                (false, Some(libc::EPERM)) => " (a seccomp filter or a missing CAP_SYS_ADMIN)",
                _ => "",
            }
        ));
    }
    if user {
        write_proc("/proc/self/setgroups", "deny")?;
        write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
        write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    }
    Ok(())
}

/// Join the network namespace `ns` the host lent (`--join-net`) in place
/// of a fresh one: refused unless it is a network namespace other than
/// the launcher's own (the host's) and has no interface but the loopback
/// — what a fresh one would be. Whether it is quiet (no socket left by
/// an earlier run) the host checked before lending it.
fn join_network(ns: OwnedFd) -> Result<(), String> {
    let own = crate::verify::namespace("net")
        .map_err(|err| format!("cannot read the launcher's own network namespace: {err}"))?;
    let ns = std::fs::File::from(ns);
    let lent = ns
        .metadata()
        .map(|meta| std::os::unix::fs::MetadataExt::ino(&meta))
        .map_err(|err| format!("cannot read the lent network namespace: {err}"))?;
    if own == lent {
        return Err("the network namespace to join is the host's own: refused".into());
    }
    nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|err| {
        format!("cannot join the lent network namespace (--join-net needs root and a network namespace): {err}")
    })?;
    let devices = std::fs::read_to_string("/proc/thread-self/net/dev")
        .map_err(|err| format!("cannot list the joined network namespace's interfaces: {err}"))?;
    // Two heading lines, then one line per interface: `NAME: counters`.
    let mut names = devices
        .lines()
        .skip(2)
        .filter_map(|line| line.split(':').next());
    if !names.all(|name| name.trim() == "lo") {
        return Err(
            "the lent network namespace has an interface other than the loopback: refused".into(),
        );
    }
    Ok(())
}

fn write_proc(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|err| format!("cannot write {path}: {err}"))
}

/// A mount to attach: a detached tree (a clone or a fresh filesystem).
struct Detached(OwnedFd);

/// The host's sources, cloned before anything is covered.
struct Sources {
    /// One per [`Step::Bind`], in order, with whether it is a directory
    /// (none: an optional source that is absent).
    binds: Vec<Option<(Detached, bool)>>,
    /// `/dev/null`, `/dev/zero`, … for `--dev`.
    devices: Vec<(&'static str, Detached)>,
}

/// The device nodes a minimal `/dev` holds (bwrap's set).
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Build the sandbox (pid 1, in the launcher's namespaces): clone the
/// sources, attach the read-only root over `base`, pivot into it, run the
/// mount program, bring the loopback up, and go back to `cwd`.
pub fn build(plan: &Plan, cwd: &Path) -> Result<(), String> {
    // Nothing mounted here reaches the host; the host's later mounts still
    // appear (as under bwrap).
    mount_propagation_slave()?;
    let sources = clone_sources(plan)?;
    let root = clone_tree(&Anchors::default(), Path::new("/"), true)?
        .ok_or("cannot clone the host's root: it vanished")?;
    set_attributes(
        &root,
        libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
        true,
        "/",
    )?;
    pivot_into(root)?;
    // The mounts attached so far, each a directory a later destination
    // below it is reached from.
    let mut places = Anchors::default();
    let mut binds = sources.binds.into_iter();
    let mut devices = Some(sources.devices);
    for step in &plan.steps[1..] {
        match step {
            Step::Bind {
                source,
                dest,
                writable,
                ..
            } => {
                let Some((tree, dir)) = binds.next().flatten() else {
                    continue;
                };
                let attributes = match writable {
                    true => libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
                    false => {
                        libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV
                    }
                };
                set_attributes(&tree, attributes, true, &source.to_string_lossy())?;
                attach(tree, dest, dir, &mut places)?;
            }
            Step::Tmpfs(dest) => {
                let fs = fresh(
                    "tmpfs",
                    &[("mode", "0755")],
                    libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
                )?;
                attach(fs, dest, true, &mut places)?;
            }
            Step::RemountRo(dest) => {
                let at = reach(&places, dest)?;
                set_attributes(&at, libc::MOUNT_ATTR_RDONLY, false, &dest.to_string_lossy())?;
            }
            Step::Dev(dest) => {
                let devices = devices.take().ok_or("--dev given twice")?;
                build_dev(dest, devices, &mut places)?;
            }
            Step::Proc(dest) => {
                let fs = fresh(
                    "proc",
                    &[],
                    libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC,
                )?;
                attach(fs, dest, true, &mut places)?;
            }
        }
    }
    if plan.unshare_net {
        loopback_up()?;
    }
    enter_workdir_via(&places, cwd)
}

/// [`enter_workdir`], from the mount at the workdir or the nearest above
/// it (a `chdir` by path walked every name again: 400 of them in a
/// workspace 400 directories deep). A workdir the mounts do not reach
/// through no symlink is entered by its path, as before.
fn enter_workdir_via(places: &Anchors, cwd: &Path) -> Result<(), String> {
    if let Ok(dir) = places.open_dir(cwd)
        && nix::unistd::fchdir(&dir).is_ok()
    {
        return Ok(());
    }
    enter_workdir(cwd)
}

/// Go to the command's working directory, in the sandbox's view.
pub fn enter_workdir(cwd: &Path) -> Result<(), String> {
    std::env::set_current_dir(cwd).map_err(|err| {
        format!(
            "cannot enter the working directory {} in the sandbox: {err}",
            cwd.display()
        )
    })
}

/// Which mount each destination of the mount program reaches: the view
/// the runner built.
///
/// A runner that waits for its command (`--await-fd`) checks this view
/// again when the command comes. The sandbox's root is the host's tree,
/// live: a rename on the host (of a covered directory, or of one above
/// it) carries the cover with it, and the path it covered would reach the
/// root's read-only (or, under a writable root, writable) tree instead.
/// A fresh runner builds its view from the paths as they are now; a
/// waiting one must find every destination still reaching the very mount
/// it attached there, or it runs nothing.
///
/// An optional bind (`--ro-bind-try`) whose source was absent mounted
/// nothing: its path must still be absent, or a fresh runner would have
/// covered what appeared there since.
#[derive(Debug, PartialEq, Eq)]
pub struct View(Vec<(PathBuf, Option<u64>)>);

impl View {
    /// The view `plan` built (right after [`build`]).
    pub fn of(plan: &Plan) -> Result<View, String> {
        let mut reached = Anchors::default();
        let root = mount_id(&mut reached, Path::new("/"))?;
        let mut seen = vec![(PathBuf::from("/"), Some(root))];
        for step in &plan.steps[1..] {
            let dest = match step {
                Step::Bind { dest, .. }
                | Step::Tmpfs(dest)
                | Step::RemountRo(dest)
                | Step::Dev(dest)
                | Step::Proc(dest) => dest,
            };
            // None: nothing there now (a skipped optional bind, or a
            // destination a later step covered); it must stay so.
            let id = mount_id(&mut reached, dest).ok();
            match seen.iter_mut().find(|(at, _)| at == dest) {
                Some(entry) => entry.1 = id,
                None => seen.push((dest.clone(), id)),
            }
        }
        Ok(View(seen))
    }

    /// Whether every destination still reaches the mount it reached when
    /// the view was built (and every skipped one is still absent); the
    /// first one that does not, when not.
    pub fn unchanged(&self) -> Result<(), String> {
        // Reached afresh, each from a destination above it reached afresh
        // in this same check: as strong as a walk of each from `/`.
        let mut reached = Anchors::default();
        for (dest, id) in &self.0 {
            if mount_id(&mut reached, dest).ok() != *id {
                return Err(format!(
                    "the sandbox's view of {} changed while the runner waited for its \
                     command (moved, replaced or made on the host); nothing ran",
                    dest.display()
                ));
            }
        }
        Ok(())
    }
}

/// The id of the mount `path` reaches (through no symlink, from a
/// directory `reached` holds above it), which then holds `path` too when
/// it is a directory.
fn mount_id(reached: &mut Anchors, path: &Path) -> Result<u64, String> {
    let at = reach(reached, path)?;
    let stx = statx_of(&at, libc::STATX_MNT_ID | libc::STATX_TYPE)
        .filter(|stx| stx.stx_mask & libc::STATX_MNT_ID != 0)
        .ok_or_else(|| os_error(format!("cannot read the mount of {}", path.display())))?;
    if u32::from(stx.stx_mode) & libc::S_IFMT == libc::S_IFDIR {
        reached.add(path, at.0);
    }
    Ok(stx.stx_mnt_id)
}

/// Whether `tree` (a cloned mount) is a directory.
fn is_dir(tree: &Detached) -> bool {
    statx_of(tree, libc::STATX_TYPE)
        .is_some_and(|stx| u32::from(stx.stx_mode) & libc::S_IFMT == libc::S_IFDIR)
}

/// `statx` of what `at` refers to (not following it), asking for `mask`;
/// none when the call fails (the system's error is `errno`).
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
fn statx_of(at: &Detached, mask: libc::c_uint) -> Option<libc::statx> {
    // SAFETY: statx is plain data; zeroed is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: statx reads an empty path and writes the struct we own.
    let done = unsafe {
        libc::statx(
            at.0.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            mask,
            &mut stx,
        )
    };
    (done == 0).then_some(stx)
}

/// Clone every bind source (and `/dev`'s nodes) from the host's view.
fn clone_sources(plan: &Plan) -> Result<Sources, String> {
    // Each writable root reached: a source below it is cloned from it.
    let mut anchors = Anchors::default();
    let mut binds = vec![];
    let mut devices = vec![];
    for step in &plan.steps[1..] {
        match step {
            Step::Bind {
                source,
                optional,
                writable,
                ..
            } => {
                // A writable root is cloned through no symlink: a root swapped
                // for a link on the host (a rename race) would otherwise bind
                // the link's target writable, and the mountpoints made inside
                // it for the protected paths would land there, on the host.
                let tree = match writable {
                    true => clone_tree_through_no_symlink(&mut anchors, source)?,
                    false => clone_tree(&anchors, source, true)?,
                };
                if tree.is_none() && !optional {
                    return Err(format!(
                        "cannot bind {}: it does not exist",
                        source.display()
                    ));
                }
                // Its kind, the clone's own: once covered, the host's path
                // is gone.
                binds.push(tree.map(|tree| {
                    let dir = is_dir(&tree);
                    (tree, dir)
                }));
            }
            Step::Dev(_) => {
                for name in DEVICES {
                    let at = Path::new("/dev").join(name);
                    if let Some(tree) = clone_tree(&anchors, &at, false)? {
                        devices.push((*name, tree));
                    }
                }
            }
            Step::Tmpfs(_) | Step::RemountRo(_) | Step::Proc(_) => {}
        }
    }
    Ok(Sources { binds, devices })
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} contains a NUL byte", path.display()))
}

fn os_error(what: String) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// A detached clone of the mount tree at `path` (`recursive`: with what
/// is mounted below it), reached from the nearest of `anchors` above it;
/// none when `path` does not exist.
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
fn clone_tree(anchors: &Anchors, path: &Path, recursive: bool) -> Result<Option<Detached>, String> {
    let (dir, c) = match anchors.below(path) {
        Some((at, rest)) => (at.as_raw_fd(), rest),
        None => (libc::AT_FDCWD, c_path(path)?),
    };
    let mut flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: open_tree reads a NUL-terminated path we own, relative to
    // AT_FDCWD or to a descriptor `anchors` holds.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, dir, c.as_ptr(), flags) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ENOENT) {
            return Ok(None);
        }
        return Err(format!(
            "cannot clone the mount at {}: {err}",
            path.display()
        ));
    }
    // SAFETY: a fresh fd the kernel just gave us.
    Ok(Some(Detached(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })))
}

/// A detached clone of the mount tree at `path`, with what is mounted
/// below it, reached through no symlink at all (as [`reach`] reaches a
/// mountpoint); none when `path` does not exist. A directory cloned is an
/// anchor for the sources below it.
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
fn clone_tree_through_no_symlink(
    anchors: &mut Anchors,
    path: &Path,
) -> Result<Option<Detached>, String> {
    let at = match anchors.open(path, libc::O_PATH) {
        Ok(at) => at,
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(err) => {
            return Err(format!(
                "cannot bind {} writable through no symlink ({err}): it was moved or replaced \
                 on the host since it was checked; nothing ran",
                path.display()
            ));
        }
    };
    let flags = libc::OPEN_TREE_CLONE
        | libc::OPEN_TREE_CLOEXEC
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_EMPTY_PATH as libc::c_uint;
    // SAFETY: open_tree on an fd we own, with an empty NUL-terminated path.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, at.as_raw_fd(), c"".as_ptr(), flags) };
    if fd < 0 {
        return Err(os_error(format!(
            "cannot clone the mount at {}",
            path.display()
        )));
    }
    // SAFETY: a fresh fd the kernel just gave us.
    let tree = Detached(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    if is_dir(&tree) {
        anchors.add(path, at);
    }
    Ok(Some(tree))
}

/// An `O_PATH` fd of `path` in the sandbox's view, reached through no
/// symlink at all (`openat2` with `RESOLVE_NO_SYMLINKS`, from the nearest
/// of `places` above it): a directory an earlier (or concurrent) run
/// swapped for a link cannot move a mount or a cover somewhere else.
fn reach(places: &Anchors, path: &Path) -> Result<Detached, String> {
    places
        .open(path, libc::O_PATH)
        .map(Detached)
        .map_err(|err| unreachable_mountpoint(path, err))
}

fn unreachable_mountpoint(path: &Path, err: std::io::Error) -> String {
    format!(
        "cannot reach the mountpoint {} without following a symlink: {err}",
        path.display()
    )
}

/// Set `attributes` on the mount `tree` refers to (`recursive`: and on
/// every mount below it).
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
fn set_attributes(
    tree: &Detached,
    attributes: u64,
    recursive: bool,
    what: &str,
) -> Result<(), String> {
    let attr = libc::mount_attr {
        attr_set: attributes,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: mount_setattr reads an empty path and a struct we own.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.0.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if done != 0 {
        return Err(os_error(format!(
            "cannot set the mount attributes of {what}"
        )));
    }
    Ok(())
}

/// A fresh filesystem of `kind` with `options`, as a detached mount with
/// `attributes`.
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
fn fresh(kind: &str, options: &[(&str, &str)], attributes: u64) -> Result<Detached, String> {
    let name = CString::new(kind).expect("a filesystem name has no NUL");
    // SAFETY: fsopen reads a NUL-terminated name we own.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, name.as_ptr(), libc::FSOPEN_CLOEXEC) };
    if fs < 0 {
        return Err(os_error(format!("cannot open a {kind} filesystem")));
    }
    // SAFETY: a fresh fd the kernel just gave us.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as RawFd) };
    let config = |command: libc::c_uint, key: Option<&CString>, value: Option<&CString>| {
        // SAFETY: fsconfig reads NUL-terminated strings we own (or null).
        unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                command,
                key.map_or(std::ptr::null(), |k| k.as_ptr()),
                value.map_or(std::ptr::null(), |v| v.as_ptr()),
                0,
            )
        }
    };
    for (key, value) in options {
        let (k, v) = (CString::new(*key).unwrap(), CString::new(*value).unwrap());
        if config(libc::FSCONFIG_SET_STRING, Some(&k), Some(&v)) != 0 {
            return Err(os_error(format!("cannot set {key}={value} on {kind}")));
        }
    }
    if config(libc::FSCONFIG_CMD_CREATE, None, None) != 0 {
        return Err(os_error(format!("cannot create a {kind} filesystem")));
    }
    // SAFETY: fsmount on the configured context we own.
    let mount = unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            libc::FSMOUNT_CLOEXEC,
            attributes as libc::c_uint,
        )
    };
    if mount < 0 {
        return Err(os_error(format!("cannot mount a {kind} filesystem")));
    }
    // SAFETY: a fresh fd the kernel just gave us.
    Ok(Detached(unsafe { OwnedFd::from_raw_fd(mount as RawFd) }))
}

/// Attach `tree` at `dest` in the sandbox's view (reached from the
/// nearest of `places` above it), making the mountpoint (a directory, or a
/// file for a file's bind) where it is missing — which only a fresh tmpfs
/// allows. The mount attached is then the place `dest` reaches.
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
fn attach(tree: Detached, dest: &Path, dir: bool, places: &mut Anchors) -> Result<(), String> {
    // A symlink at `dest` or above it is ELOOP: refused, never followed.
    let at = match places.open(dest, libc::O_PATH) {
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
            places.make_missing(dest, dir).map_err(|err| {
                format!(
                    "cannot make the mountpoint {} in the sandbox: {err}",
                    dest.display()
                )
            })?;
            reach(places, dest)?
        }
        reached => Detached(reached.map_err(|err| unreachable_mountpoint(dest, err))?),
    };
    // SAFETY: move_mount reads two empty paths.
    let done = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.0.as_raw_fd(),
            c"".as_ptr(),
            at.0.as_raw_fd(),
            c"".as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if done != 0 {
        return Err(os_error(format!("cannot mount {}", dest.display())));
    }
    // The fd of a tree attached refers to the mount now at `dest`.
    places.covered(dest);
    if dir {
        places.add(dest, tree.0);
    }
    Ok(())
}

#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
fn mount_propagation_slave() -> Result<(), String> {
    // SAFETY: mount with a NUL-terminated path and no data.
    let done = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_SLAVE | libc::MS_REC,
            std::ptr::null(),
        )
    };
    if done != 0 {
        return Err(os_error("cannot make the sandbox's mounts private".into()));
    }
    Ok(())
}

/// Make `root` the root of this mount namespace: attach it over a
/// directory of the host's view, pivot into it, and detach the host's
/// tree (the sources are clones already, so nothing is lost).
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
fn pivot_into(root: Detached) -> Result<(), String> {
    let base = ["/tmp", "/mnt", "/run", "/var/tmp"]
        .into_iter()
        .map(Path::new)
        .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .ok_or("no directory to mount the sandbox's root on (/tmp, /mnt, /run, /var/tmp)")?;
    attach(root, base, true, &mut Anchors::default())?;
    std::env::set_current_dir(base)
        .map_err(|err| format!("cannot enter the sandbox's root: {err}"))?;
    // pivot_root(".", "."): the host's root ends stacked over the new one,
    // and is detached next.
    // SAFETY: pivot_root and umount2 read NUL-terminated paths we own.
    unsafe {
        if libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) != 0 {
            return Err(os_error("cannot pivot into the sandbox's root".into()));
        }
        if libc::umount2(c".".as_ptr(), libc::MNT_DETACH) != 0 {
            return Err(os_error("cannot detach the host's root".into()));
        }
    }
    std::env::set_current_dir("/").map_err(|err| format!("cannot enter /: {err}"))
}

/// A minimal `/dev` at `dest`: a tmpfs with the host's `null`, `zero`,
/// `full`, `random`, `urandom` and `tty` bound in, its own `devpts`, an
/// empty `shm` and the usual symlinks.
fn build_dev(
    dest: &Path,
    devices: Vec<(&'static str, Detached)>,
    places: &mut Anchors,
) -> Result<(), String> {
    let fs = fresh("tmpfs", &[("mode", "0755")], libc::MOUNT_ATTR_NOSUID)?;
    attach(fs, dest, true, places)?;
    for (name, node) in devices {
        set_attributes(
            &node,
            libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NOEXEC,
            false,
            name,
        )?;
        attach(node, &dest.join(name), false, places)?;
    }
    let made = |what: &str, result: std::io::Result<()>| {
        result.map_err(|err| format!("cannot make {}/{what}: {err}", dest.display()))
    };
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("core", "/proc/kcore"),
        ("ptmx", "pts/ptmx"),
    ] {
        made(link, std::os::unix::fs::symlink(target, dest.join(link)))?;
    }
    made("shm", std::fs::create_dir(dest.join("shm")))?;
    let pts = dest.join("pts");
    made("pts", std::fs::create_dir(&pts))?;
    let devpts = fresh(
        "devpts",
        &[("ptmxmode", "0666"), ("mode", "620")],
        libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NOEXEC,
    )?;
    attach(devpts, &pts, true, places)
}

/// Bring the new network namespace's loopback up (the kernel gives it
/// 127.0.0.1 and ::1).
#[allow(
    unsafe_code,
    reason = "namespaces, mounts and the new mount API are raw system calls; each block says why it is sound"
)]
fn loopback_up() -> Result<(), String> {
    // SAFETY: socket with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(os_error(
            "cannot open a socket to bring the loopback up".into(),
        ));
    }
    // SAFETY: a fresh fd the kernel just gave us.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *to = *from as libc::c_char;
    }
    // The request's type is the C library's (glibc's `unsigned long`,
    // musl's `int`: the static release binaries); the values fit both.
    #[allow(clippy::unnecessary_cast)]
    let (get, set) = (
        libc::SIOCGIFFLAGS as libc::Ioctl,
        libc::SIOCSIFFLAGS as libc::Ioctl,
    );
    // SAFETY: the ioctls read and write the ifreq we own.
    unsafe {
        if libc::ioctl(socket.as_raw_fd(), get, &mut request) != 0 {
            return Err(os_error("cannot read the loopback's flags".into()));
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), set, &request) != 0 {
            return Err(os_error("cannot bring the loopback up".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writable root swapped for a symlink between the host's check and
    /// the clone is refused, not followed; a real directory is cloned.
    /// Cloning a mount needs CAP_SYS_ADMIN: as root only (the e2e suite
    /// races the swap itself, tests/all/escapes.rs).
    #[test]
    fn a_writable_root_is_cloned_through_no_symlink() {
        if !nix::unistd::Uid::effective().is_root() {
            eprintln!("SKIPPED a_writable_root_is_cloned_through_no_symlink: needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (root, victim, link) = (
            dir.path().join("root"),
            dir.path().join("victim"),
            dir.path().join("link"),
        );
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&victim).unwrap();
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let anchors = &mut Anchors::default();
        assert!(
            clone_tree_through_no_symlink(anchors, &root)
                .unwrap()
                .is_some()
        );
        let Err(refused) = clone_tree_through_no_symlink(&mut Anchors::default(), &link) else {
            panic!("a symlinked root was cloned");
        };
        assert!(refused.contains("moved or replaced"), "{refused}");
        // A symlink above the root is refused too.
        let above = dir.path().join("above");
        std::os::unix::fs::symlink(dir.path(), &above).unwrap();
        assert!(clone_tree_through_no_symlink(anchors, &above.join("root")).is_err());
        assert!(
            clone_tree_through_no_symlink(anchors, &dir.path().join("absent"))
                .unwrap()
                .is_none()
        );
    }
}
