//! The metadata supervisor: under Landlock, `chmod` and `utimensat` inside
//! the run's writable roots, carried out by the launcher's supervisor on
//! the command's behalf.
//!
//! Landlock has no access right for a file's mode or times, so the metadata
//! filter (`metadata.rs`) refuses those calls outright — and with them
//! `chmod +x` of a script the run just wrote, which `npm install` and
//! `pip install` do. A seccomp filter cannot tell a path inside the
//! workspace from one outside. So the command's filter hands these calls
//! to its supervisor instead (seccomp user notification,
//! `SECCOMP_RET_USER_NOTIF`), which decides on a file it resolved itself
//! and never lets the kernel run the call as asked:
//!
//! 1. the target is opened by the supervisor, once: the command's fd taken
//!    with `pidfd_getfd`, or its path read *once* from the command's memory
//!    and opened (`O_PATH`, not following a final symlink where the call
//!    does not) from the command's working directory or directory fd —
//!    each of these checked still to belong to the waiting call
//!    (`SECCOMP_IOCTL_NOTIF_ID_VALID`) before it is used;
//! 2. the opened file must be a regular file or a directory, owned by the
//!    command's user (the rule the kernel applies to a process without
//!    capabilities), lying beneath one of the run's writable roots by the
//!    path the kernel gives the descriptor (a file outside cannot be moved
//!    or linked in: Landlock refuses both);
//! 3. then the supervisor changes that file through its own descriptor and
//!    answers the call with the result; otherwise the call fails `EPERM`,
//!    as it did before.
//!
//! The setuid and setgid bits never get here: the hardening filter refuses
//! them with `EPERM`, and an errno outranks a notification. The x32 numbers
//! stay refused by the metadata filter. Where the kernel has no user
//! notification (Linux < 5.0) the launcher keeps refusing every such call.
//!
//! `seccompiler` has no user-notification action: the filter is compiled
//! with a trace action and its return instructions rewritten (see
//! [`super::seccomp::compile_notifying`]).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::libc;

use super::seccomp::compile_notifying;

/// `fchmodat2` (Linux 6.6), the same number on every architecture.
const FCHMODAT2: i64 = 452;

/// The calls handed to the supervisor, by this architecture's numbers.
pub(super) fn supervised() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        FCHMODAT2,
        libc::SYS_utimensat,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.push(libc::SYS_chmod);
    calls
}

/// Install the notifying filter on this process (inherited by what it
/// execs); the listener comes back close-on-exec. Needs no-new-privs.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
pub(super) fn install() -> Result<OwnedFd, String> {
    let program = compile_notifying(&supervised(), "metadata supervisor")?;
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: seccomp reads the program `fprog` points at, which lives
    // until the call returns; seccompiler's `sock_filter` has the kernel's
    // layout, as libc's does.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog,
        )
    };
    if fd < 0 {
        return Err(format!(
            "metadata supervisor: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: a non-negative return is a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Hand `listener` to the supervisor over `socket`.
pub(super) fn send(socket: &UnixStream, listener: &OwnedFd) -> Result<(), String> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let fds = [listener.as_raw_fd()];
    let byte = [0u8];
    let iov = [io::IoSlice::new(&byte)];
    sendmsg::<()>(
        socket.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map(drop)
    .map_err(|err| format!("metadata supervisor: cannot hand over the listener: {err}"))
}

/// The listener the command sent over `socket`; none when it sent none.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn receive(socket: &UnixStream) -> Option<OwnedFd> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut byte = [0u8];
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let message = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .ok()?;
    let fd = message.cmsgs().ok()?.find_map(|cmsg| {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            fds.first().copied()
        } else {
            None
        }
    })?;
    // SAFETY: the kernel gave us this fd with the message; nobody else has it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What the supervisor lets a command change: files beneath `roots`
/// owned by `owner`.
#[derive(Clone, Debug)]
pub(super) struct Allowed {
    /// The run's writable directories, as the host checked them.
    pub roots: Vec<PathBuf>,
    /// The command's user.
    pub owner: u32,
}

impl Allowed {
    /// The writable grants of a run that are directories, for this user.
    pub(super) fn of(writable: &[PathBuf]) -> Allowed {
        Allowed {
            roots: writable
                .iter()
                .filter(|p| p.is_dir())
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .collect(),
            owner: nix::unistd::geteuid().as_raw(),
        }
    }

    /// Whether the file at `path` (as the kernel names the descriptor),
    /// of type `kind` and owned by `uid`, may be changed.
    fn admits(&self, path: &Path, kind: libc::mode_t, uid: u32) -> bool {
        let file_or_dir = matches!(kind & libc::S_IFMT, libc::S_IFREG | libc::S_IFDIR);
        file_or_dir
            && uid == self.owner
            && path.is_absolute()
            && self.roots.iter().any(|root| path.starts_with(root))
    }
}

/// On a thread of its own: receive the listener from `socket`, then answer
/// every notification until the command's tree is gone (the thread ends
/// with the supervisor).
pub(super) fn start(socket: UnixStream, allowed: Allowed) {
    let _ = std::thread::Builder::new()
        .name("cordon-metadata".into())
        .spawn(move || {
            if let Some(listener) = receive(&socket) {
                drop(socket);
                serve(listener.as_fd(), &allowed);
            }
        });
}

/// Answer notifications on `listener` until it fails for good.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn serve(listener: BorrowedFd<'_>, allowed: &Allowed) {
    loop {
        // SAFETY: an all-zero seccomp_notif is a valid value (plain
        // integers); the kernel requires it zeroed.
        let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl writes one seccomp_notif into `notif`.
        let got = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut notif,
            )
        };
        if got != 0 {
            match io::Error::last_os_error().raw_os_error() {
                // The caller died or was interrupted before we read it.
                Some(libc::EINTR | libc::ENOENT) => continue,
                _ => return,
            }
        }
        let error = match answer(listener, &notif, allowed) {
            Ok(()) => 0,
            Err(errno) => -errno,
        };
        let response = libc::seccomp_notif_resp {
            id: notif.id,
            val: 0,
            error,
            flags: 0,
        };
        // SAFETY: the ioctl reads one seccomp_notif_resp we own. A caller
        // that died meanwhile makes it fail with ENOENT: nothing to do.
        unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &response,
            )
        };
    }
}

/// The call a notification carries, read from its arguments.
#[derive(Debug, PartialEq, Eq)]
enum Call {
    /// Set the mode of `target` to `mode`.
    Chmod { target: Target, mode: u32 },
    /// Set the times of `target` (`times`: a pointer to two `timespec`s,
    /// or 0 for now).
    Times { target: Target, times: u64 },
}

/// The file a call names.
#[derive(Debug, PartialEq, Eq)]
enum Target {
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
    /// The call of system call `nr` with `args`; `None` for one this
    /// supervisor does not carry out (it then fails `EPERM`).
    fn of(nr: i64, args: [u64; 6]) -> Option<Call> {
        let fd = |arg: u64| arg as i32;
        let at = |dir: u64, path: u64, flags: u64| Target::At {
            dir: fd(dir),
            path,
            follow: flags & libc::AT_SYMLINK_NOFOLLOW as u64 == 0,
            empty: flags & libc::AT_EMPTY_PATH as u64 != 0,
        };
        let mode = |arg: u64| arg as u32;
        #[cfg(target_arch = "x86_64")]
        if nr == libc::SYS_chmod {
            let target = at(libc::AT_FDCWD as u64, args[0], 0);
            return Some(Call::Chmod {
                target,
                mode: mode(args[1]),
            });
        }
        match nr {
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

/// The caller of one notification, and the checks that it still waits.
struct Caller<'a> {
    listener: BorrowedFd<'a>,
    id: u64,
    pid: u32,
}

impl Caller<'_> {
    /// `Ok` while the notification is still pending: anything opened by
    /// pid before this check belongs to the waiting caller, not to a
    /// process that reused its pid.
    #[allow(
        unsafe_code,
        reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
    )]
    fn still_waiting(&self) -> Result<(), i32> {
        // SAFETY: the ioctl reads one u64 we own.
        let valid = unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &self.id,
            )
        };
        if valid == 0 {
            Ok(())
        } else {
            Err(libc::ENOENT)
        }
    }

    /// A duplicate of the caller's `fd`.
    #[allow(
        unsafe_code,
        reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
    )]
    fn fd(&self, fd: RawFd) -> Result<OwnedFd, i32> {
        // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.pid, 0) };
        let pidfd = owned(pidfd)?;
        self.still_waiting()?;
        // SAFETY: pidfd_getfd takes three integers and returns a new fd or -1.
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
        owned(got)
    }

    /// The caller's working directory.
    fn cwd(&self) -> Result<OwnedFd, i32> {
        let cwd = open_at(
            None,
            format!("/proc/{}/cwd", self.pid),
            libc::O_PATH | libc::O_DIRECTORY,
        )?;
        self.still_waiting()?;
        Ok(cwd)
    }

    /// `len` bytes of the caller's memory at `at`, read once (fewer where
    /// its mapping ends).
    #[allow(
        unsafe_code,
        reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
    )]
    fn memory(&self, at: u64, len: usize) -> Result<Vec<u8>, i32> {
        let mem = open_at(None, format!("/proc/{}/mem", self.pid), libc::O_RDONLY)?;
        self.still_waiting()?;
        let mut bytes = vec![0u8; len];
        // SAFETY: pread writes at most `len` bytes into the buffer we own.
        let read = unsafe {
            libc::pread(
                mem.as_raw_fd(),
                bytes.as_mut_ptr().cast(),
                len,
                at as libc::off_t,
            )
        };
        if read <= 0 {
            return Err(libc::EFAULT);
        }
        bytes.truncate(read as usize);
        Ok(bytes)
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

    /// The NUL-ended path at `at` in the caller's memory.
    fn path(&self, at: u64) -> Result<CString, i32> {
        if at == 0 {
            return Err(libc::EFAULT);
        }
        let bytes = self.memory(at, libc::PATH_MAX as usize)?;
        let end = bytes
            .iter()
            .position(|b| *b == 0)
            .ok_or(libc::ENAMETOOLONG)?;
        CString::new(&bytes[..end]).map_err(|_| libc::EINVAL)
    }

    /// The file `target` names, opened by this process.
    fn open(&self, target: &Target) -> Result<OwnedFd, i32> {
        match *target {
            Target::Fd(fd) => self.fd(fd),
            Target::At {
                dir,
                path,
                follow,
                empty,
            } => {
                let base = match dir {
                    libc::AT_FDCWD => self.cwd()?,
                    fd => self.fd(fd)?,
                };
                let path = self.path(path)?;
                if path.as_bytes().is_empty() {
                    return if empty { Ok(base) } else { Err(libc::ENOENT) };
                }
                let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
                open_at(Some(base.as_fd()), path, libc::O_PATH | nofollow)
            }
        }
    }
}

/// `path` opened close-on-exec with `flags`, from `dir` (else the working
/// directory, for an absolute path).
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn open_at(
    dir: Option<BorrowedFd<'_>>,
    path: impl Into<Vec<u8>>,
    flags: i32,
) -> Result<OwnedFd, i32> {
    let path = CString::new(path).map_err(|_| libc::EINVAL)?;
    let dir = dir.map_or(libc::AT_FDCWD, |fd| fd.as_raw_fd());
    // SAFETY: openat reads the NUL-ended path we own.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), flags | libc::O_CLOEXEC) };
    owned(fd as i64)
}

/// A system call's returned fd, owned; else its errno.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn owned(fd: i64) -> Result<OwnedFd, i32> {
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a non-negative return is a fresh fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM)
}

/// Carry out the call of `notif` if `allowed` admits its file; else the
/// errno to answer.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn answer(
    listener: BorrowedFd<'_>,
    notif: &libc::seccomp_notif,
    allowed: &Allowed,
) -> Result<(), i32> {
    let call = Call::of(i64::from(notif.data.nr), notif.data.args).ok_or(libc::EPERM)?;
    let caller = Caller {
        listener,
        id: notif.id,
        pid: notif.pid,
    };
    let target = match &call {
        Call::Chmod { target, .. } | Call::Times { target, .. } => target,
    };
    let file = caller.open(target)?;
    let link = format!("/proc/self/fd/{}", file.as_raw_fd());
    let proc_path = CString::new(link.as_str()).map_err(|_| libc::EINVAL)?;
    // SAFETY: an all-zero stat is a valid value; fstat fills it.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat we own.
    if unsafe { libc::fstat(file.as_raw_fd(), &mut stat) } != 0 {
        return Err(errno());
    }
    let named = std::fs::read_link(&link).map_err(|_| libc::EPERM)?;
    if !allowed.admits(&named, stat.st_mode, stat.st_uid) {
        return Err(libc::EPERM);
    }
    let done = match call {
        Call::Chmod { mode, .. } => {
            if mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
                return Err(libc::EPERM);
            }
            // SAFETY: fchmodat reads the NUL-ended path we own.
            unsafe { libc::fchmodat(libc::AT_FDCWD, proc_path.as_ptr(), mode & 0o7777, 0) }
        }
        Call::Times { times, .. } => {
            let times = match times {
                0 => None,
                at => Some(caller.timespecs(at)?),
            };
            let times = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
            // SAFETY: utimensat reads the path we own and, when not null,
            // the two timespecs we own.
            unsafe { libc::utimensat(libc::AT_FDCWD, proc_path.as_ptr(), times, 0) }
        }
    };
    if done == 0 { Ok(()) } else { Err(errno()) }
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
        assert_eq!(Call::of(libc::SYS_fchown, [0; 6]), None);
    }

    #[test]
    fn only_own_files_and_directories_beneath_a_root_are_admitted() {
        let allowed = Allowed {
            roots: vec!["/ws".into(), "/tmp".into()],
            owner: 1000,
        };
        assert!(allowed.admits(Path::new("/ws/a/b"), libc::S_IFREG, 1000));
        assert!(allowed.admits(Path::new("/ws"), libc::S_IFDIR, 1000));
        assert!(allowed.admits(Path::new("/tmp/x"), libc::S_IFREG, 1000));
        assert!(!allowed.admits(Path::new("/wsx/a"), libc::S_IFREG, 1000));
        assert!(!allowed.admits(Path::new("/etc/passwd"), libc::S_IFREG, 1000));
        assert!(!allowed.admits(Path::new("/ws/a"), libc::S_IFREG, 0));
        assert!(!allowed.admits(Path::new("/ws/dev"), libc::S_IFCHR, 1000));
        assert!(!allowed.admits(Path::new("/ws/link"), libc::S_IFLNK, 1000));
        assert!(!allowed.admits(Path::new("anon_inode:[x]"), libc::S_IFREG, 1000));
    }
}
