//! The metadata calls the file supervisor carries out: `chmod`, `chown`
//! and `utimensat` of the command's own regular files and directories
//! (and `chown` of its symlinks), and the setting and removing of their
//! extended attributes, inside the run's writable places, protected paths
//! excepted (`places.rs`). The supervisor's thread holds no capability, so
//! the kernel lets a `chown` through only as it would the command's — to
//! the owner it already has, a group the user is in — and an attribute only
//! where the command could set it (`user.*`, the POSIX ACLs of its own
//! files; `security.*` and `trusted.*` need capabilities): `tar`, `cp -p`,
//! `mv` across file systems and `sed -i` do just that.
//!
//! The metadata filter (`crate::metadata`) refuses these calls everywhere
//! where no supervisor takes them; `npm install` and `pip install` need
//! `chmod +x` of what they just wrote, which this brings back. The target is
//! opened once by the supervisor (the caller's fd taken with `pidfd_getfd`,
//! or its path opened `O_PATH` from the caller's working directory or
//! directory fd, not following a final symlink where the call does not),
//! judged by the path the kernel gives that descriptor, and changed through
//! it; otherwise the call fails `EPERM`, as it did before.

use std::os::fd::{AsFd, AsRawFd, RawFd};

use nix::libc;

use super::{Caller, Places, by_descriptor, done, named, open_at, stat};
use crate::seccomp::FCHMODAT2;

/// The calls taken, by this architecture's numbers.
pub(super) fn calls() -> Vec<i64> {
    // Other architectures add nothing: only x86_64 has the legacy calls.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut calls = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        FCHMODAT2,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_chmod, libc::SYS_chown, libc::SYS_lchown]);
    calls
}

/// The call a notification carries, read from its arguments.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Call {
    /// Set the mode of `target` to `mode`.
    Chmod { target: Target, mode: u32 },
    /// Set the owner and group of `target` (`u32::MAX`: unchanged).
    Chown { target: Target, uid: u32, gid: u32 },
    /// Set the times of `target` (`times`: a pointer to two `timespec`s,
    /// or 0 for now).
    Times { target: Target, times: u64 },
    /// Set (with a value: a pointer and its size) or remove an extended
    /// attribute of `target` (`name`: a pointer to its name).
    Xattr {
        target: Target,
        name: u64,
        value: Option<(u64, usize)>,
        flags: i32,
    },
}

/// The file a call names.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// An fd of the caller's.
    Fd(RawFd),
    /// A path (a pointer into the caller's memory) from a directory fd
    /// (`AT_FDCWD`: its working directory); `empty` when an empty path
    /// names the directory fd itself (`AT_EMPTY_PATH`).
    At {
        dir: RawFd,
        path: u64,
        follow: bool,
        empty: bool,
    },
}

impl Call {
    /// The call of system call `nr` with `args`; `None` for another call.
    pub(super) fn of(nr: i64, args: [u64; 6]) -> Option<Call> {
        let fd = |arg: u64| arg as i32;
        let at = |dir: u64, path: u64, flags: u64| Target::At {
            dir: fd(dir),
            path,
            follow: flags & libc::AT_SYMLINK_NOFOLLOW as u64 == 0,
            empty: flags & libc::AT_EMPTY_PATH as u64 != 0,
        };
        let mode = |arg: u64| arg as u32;
        let id = |arg: u64| arg as u32;
        let chown = |target, uid: u64, gid: u64| Call::Chown {
            target,
            uid: id(uid),
            gid: id(gid),
        };
        #[cfg(target_arch = "x86_64")]
        {
            let cwd = libc::AT_FDCWD as u64;
            let nofollow = libc::AT_SYMLINK_NOFOLLOW as u64;
            match nr {
                libc::SYS_chmod => {
                    return Some(Call::Chmod {
                        target: at(cwd, args[0], 0),
                        mode: mode(args[1]),
                    });
                }
                libc::SYS_chown => return Some(chown(at(cwd, args[0], 0), args[1], args[2])),
                libc::SYS_lchown => {
                    return Some(chown(at(cwd, args[0], nofollow), args[1], args[2]));
                }
                _ => {}
            }
        }
        let path = |arg: u64, follow: bool| {
            let flags = if follow {
                0
            } else {
                libc::AT_SYMLINK_NOFOLLOW as u64
            };
            at(libc::AT_FDCWD as u64, arg, flags)
        };
        let set = |target, args: [u64; 6]| Call::Xattr {
            target,
            name: args[1],
            value: Some((args[2], args[3] as usize)),
            flags: args[4] as i32,
        };
        let remove = |target, args: [u64; 6]| Call::Xattr {
            target,
            name: args[1],
            value: None,
            flags: 0,
        };
        match nr {
            libc::SYS_setxattr => Some(set(path(args[0], true), args)),
            libc::SYS_lsetxattr => Some(set(path(args[0], false), args)),
            libc::SYS_fsetxattr => Some(set(Target::Fd(fd(args[0])), args)),
            libc::SYS_removexattr => Some(remove(path(args[0], true), args)),
            libc::SYS_lremovexattr => Some(remove(path(args[0], false), args)),
            libc::SYS_fremovexattr => Some(remove(Target::Fd(fd(args[0])), args)),
            libc::SYS_fchown => Some(chown(Target::Fd(fd(args[0])), args[1], args[2])),
            libc::SYS_fchownat => Some(chown(at(args[0], args[1], args[4]), args[2], args[3])),
            libc::SYS_fchmod => Some(Call::Chmod {
                target: Target::Fd(fd(args[0])),
                mode: mode(args[1]),
            }),
            libc::SYS_fchmodat => Some(Call::Chmod {
                target: at(args[0], args[1], 0),
                mode: mode(args[2]),
            }),
            FCHMODAT2 => Some(Call::Chmod {
                target: at(args[0], args[1], args[3]),
                mode: mode(args[2]),
            }),
            // utimensat(fd, NULL, …) is futimens: the fd itself.
            libc::SYS_utimensat if args[1] == 0 => Some(Call::Times {
                target: Target::Fd(fd(args[0])),
                times: args[2],
            }),
            libc::SYS_utimensat => Some(Call::Times {
                target: at(args[0], args[1], args[3]),
                times: args[2],
            }),
            _ => None,
        }
    }
}

impl Caller {
    /// The file `target` names, opened by this process.
    fn open(&self, target: &Target) -> Result<std::os::fd::OwnedFd, i32> {
        match *target {
            Target::Fd(fd) => self.fd(fd),
            Target::At {
                dir,
                path,
                follow,
                empty,
            } => {
                let base = self.base(dir)?;
                let path = self.path(path)?;
                if path.as_bytes().is_empty() {
                    return if empty { Ok(base) } else { Err(libc::ENOENT) };
                }
                let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
                let path = self.own_proc(path.as_bytes());
                open_at(Some(base.as_fd()), path, libc::O_PATH | nofollow)
            }
        }
    }

    /// The two `timespec`s at `at` in the caller's memory.
    #[allow(
        unsafe_code,
        reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
    )]
    fn timespecs(&self, at: u64) -> Result<[libc::timespec; 2], i32> {
        let size = std::mem::size_of::<[libc::timespec; 2]>();
        let bytes = self.memory(at, size)?;
        if bytes.len() != size {
            return Err(libc::EFAULT);
        }
        // SAFETY: `bytes` holds exactly one [timespec; 2] (plain integers,
        // any bit pattern valid), read without assuming its alignment.
        Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) })
    }
}

/// Carry out `call` if `places` admits its file; else the errno to answer.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
pub(super) fn answer(caller: &Caller, call: Call, places: &Places) -> Result<i64, i32> {
    let target = match &call {
        Call::Chmod { target, .. }
        | Call::Chown { target, .. }
        | Call::Times { target, .. }
        | Call::Xattr { target, .. } => target,
    };
    let file = caller.open(target)?;
    let stat = stat(file.as_fd())?;
    if let (Call::Times { times, .. }, &Target::At { dir, path, .. }) = (&call, target)
        && stat.st_mode & libc::S_IFMT == libc::S_IFLNK
    {
        return link_times(caller, places, dir, path, *times);
    }
    let path = named(file.as_fd())?;
    // A symlink's owner is its own (its times: `link_times`).
    let links = matches!(call, Call::Chown { .. });
    if !places.admits_metadata(&path, stat.st_mode, stat.st_uid, links) {
        return Err(libc::EPERM);
    }
    let held = file.as_raw_fd();
    let file = by_descriptor(file.as_fd());
    match call {
        Call::Chown { uid, gid, .. } => {
            // SAFETY: fchownat reads the empty NUL-ended path we own; with
            // AT_EMPTY_PATH it changes the file our descriptor holds.
            done(unsafe { libc::fchownat(held, c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH) })
        }
        Call::Chmod { mode, .. } => {
            if mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
                return Err(libc::EPERM);
            }
            // SAFETY: fchmodat reads the NUL-ended path we own.
            done(unsafe { libc::fchmodat(libc::AT_FDCWD, file.as_ptr(), mode & 0o7777, 0) })
        }
        Call::Xattr {
            name, value, flags, ..
        } => xattr(caller, &file, name, value, flags),
        Call::Times { times, .. } => {
            let times = match times {
                0 => None,
                at => Some(caller.timespecs(at)?),
            };
            let times = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
            // SAFETY: utimensat reads the path we own and, when not null,
            // the two timespecs we own.
            done(unsafe { libc::utimensat(libc::AT_FDCWD, file.as_ptr(), times, 0) })
        }
    }
}

/// `utimensat(…, AT_SYMLINK_NOFOLLOW)` of a symlink (`tar` sets the times
/// of the links it extracts): a descriptor cannot name a symlink for it, so
/// the times are set by name in the link's directory, which the supervisor
/// opened and judged — the path read once more and decided on alone. The
/// kernel checks ownership, as for the command (the thread has no
/// capability).
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn link_times(
    caller: &Caller,
    places: &Places,
    dir: RawFd,
    path: u64,
    times: u64,
) -> Result<i64, i32> {
    let path = caller.path(path)?;
    let entry = caller.entry_of(dir, path.as_bytes())?;
    let named = entry.named();
    let name = named.name;
    // SAFETY: an all-zero stat is a valid value; fstatat fills it.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat reads the NUL-ended name we own and writes one stat.
    let found = unsafe {
        libc::fstatat(
            entry.dir.as_raw_fd(),
            entry.name.as_ptr(),
            &mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    done(found)?;
    let path = entry.dir_path.join(name);
    if !places.admits_metadata(&path, stat.st_mode, stat.st_uid, true) {
        return Err(libc::EPERM);
    }
    let times = match times {
        0 => None,
        at => Some(caller.timespecs(at)?),
    };
    let times = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: utimensat reads the name we own and, when not null, the two
    // timespecs we own.
    done(unsafe {
        libc::utimensat(
            entry.dir.as_raw_fd(),
            entry.name.as_ptr(),
            times,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

/// The longest value of an extended attribute (`XATTR_SIZE_MAX`).
const XATTR_SIZE_MAX: usize = 64 * 1024;

/// Set (a `value` read once from the caller) or remove the attribute
/// `name` of `file` (a path to the very file).
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn xattr(
    caller: &Caller,
    file: &std::ffi::CStr,
    name: u64,
    value: Option<(u64, usize)>,
    flags: i32,
) -> Result<i64, i32> {
    let name = caller.path(name)?;
    match value {
        None => {
            // SAFETY: removexattr reads the two NUL-ended strings we own.
            done(unsafe { libc::removexattr(file.as_ptr(), name.as_ptr()) })
        }
        Some((_, size)) if size > XATTR_SIZE_MAX => Err(libc::E2BIG),
        Some((at, size)) => {
            let bytes = match size {
                0 => vec![],
                _ => caller.memory(at, size)?,
            };
            if bytes.len() != size {
                return Err(libc::EFAULT);
            }
            // SAFETY: setxattr reads the two NUL-ended strings and `size`
            // bytes of the buffer we own.
            done(unsafe {
                libc::setxattr(
                    file.as_ptr(),
                    name.as_ptr(),
                    bytes.as_ptr().cast(),
                    size,
                    flags,
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_read_from_their_arguments() {
        let cwd = libc::AT_FDCWD as u64;
        assert_eq!(
            Call::of(libc::SYS_fchmod, [3, 0o755, 0, 0, 0, 0]),
            Some(Call::Chmod {
                target: Target::Fd(3),
                mode: 0o755
            })
        );
        assert_eq!(
            Call::of(
                FCHMODAT2,
                [cwd, 0x1000, 0o644, libc::AT_SYMLINK_NOFOLLOW as u64, 0, 0]
            ),
            Some(Call::Chmod {
                target: Target::At {
                    dir: libc::AT_FDCWD,
                    path: 0x1000,
                    follow: false,
                    empty: false
                },
                mode: 0o644
            })
        );
        assert_eq!(
            Call::of(libc::SYS_utimensat, [5, 0, 0, 0, 0, 0]),
            Some(Call::Times {
                target: Target::Fd(5),
                times: 0
            })
        );
        assert_eq!(
            Call::of(
                libc::SYS_fchownat,
                [cwd, 0x10, 0, u32::MAX as u64, 0x100, 0]
            ),
            Some(Call::Chown {
                target: Target::At {
                    dir: libc::AT_FDCWD,
                    path: 0x10,
                    follow: false,
                    empty: false
                },
                uid: 0,
                gid: u32::MAX
            })
        );
        assert_eq!(
            Call::of(libc::SYS_fremovexattr, [4, 0x20, 0, 0, 0, 0]),
            Some(Call::Xattr {
                target: Target::Fd(4),
                name: 0x20,
                value: None,
                flags: 0
            })
        );
        assert_eq!(Call::of(libc::SYS_fchdir, [0; 6]), None);
    }
}
