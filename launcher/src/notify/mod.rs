//! The file supervisor: under Landlock, the launcher's supervisor carries
//! out the command's file changes that Landlock cannot judge, on files it
//! resolved itself.
//!
//! Landlock only ever *adds* rights beneath a path: it cannot keep `.git`
//! read-only inside a writable workspace, and it has no right for a file's
//! mode or times. A seccomp filter cannot tell one path from another. So
//! the command's filter hands these calls to its supervisor (seccomp user
//! notification, `SECCOMP_RET_USER_NOTIF`), which decides on what it
//! resolved and never lets the kernel run a call it judged as asked:
//!
//! * **metadata** (`metadata.rs`): `chmod`, `chown`, `utimensat` and the
//!   extended attributes of the command's own files inside the writable
//!   roots, protected paths excepted;
//! * **writes** (`writes.rs`, where a writable root holds protected paths):
//!   Landlock grants such a *supervised root* read and execute only, and
//!   every call that would change it — `open` for writing or creating,
//!   `mkdir`, `mknod`, `unlink`/`rmdir`, `rename`, `link`, `symlink`,
//!   `truncate`, the `bind` of a unix socket to a path — is carried out by
//!   the supervisor unless it touches a protected path (`EROFS`, as the
//!   other rungs' read-only mounts answer).
//!   An `open` is answered with the descriptor itself, injected into the
//!   command (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SEND`,
//!   Linux 5.14). A call outside every supervised root *continues*
//!   (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the kernel runs it in the
//!   command's context and Landlock decides, so a path swapped after the
//!   check can only land where the kernel refuses the write.
//!
//! How each call is resolved (`Caller`): a path is read **once** from the
//! command's memory; its directory is opened by the supervisor (`O_PATH`,
//! from the command's working directory or its directory fd taken with
//! `pidfd_getfd`), each such step checked still to belong to the waiting
//! call (`SECCOMP_IOCTL_NOTIF_ID_VALID`); the decision is made on the path
//! the kernel gives that descriptor (`places.rs`), and the change is made
//! through it, never following a final symlink the supervisor did not
//! judge. The supervisor's thread holds no capability and works as the
//! command's user, so the kernel's own permission checks apply as they
//! would to the command; files are made with the command's umask.
//!
//! The setuid and setgid bits and device nodes never get here: the
//! hardening filter refuses them with `EPERM`, and an errno outranks a
//! notification. x32 numbers are not handed over: the metadata filter
//! refuses those, and a write in a supervised root by any call the
//! supervisor does not see is refused by Landlock. Once a notification is
//! received the call waits out non-fatal signals
//! (`SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`, Linux 5.19), so a change the
//! supervisor made is never made again by a restarted call; on 5.14–5.18
//! the filter goes without, and a call a signal interrupts while the
//! supervisor works may, restarted, meet its own result (`EEXIST`).
//!
//! `seccompiler` has no user-notification action: the filter is compiled
//! with a trace action and its return instructions rewritten (see
//! [`super::seccomp::compile_notifying`]).

mod metadata;
mod places;
mod writes;

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;

use nix::libc;

pub(crate) use places::Places;

use super::seccomp::compile_notifying;

/// The metadata calls the file supervisor takes (the metadata filter leaves
/// them to it).
pub(super) fn metadata_calls() -> Vec<i64> {
    metadata::calls()
}

/// Install the notifying filter on this process (inherited by what it
/// execs): the metadata calls, and with `writes` the write calls too; the
/// listener comes back close-on-exec. Needs no-new-privs.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
pub(super) fn install(writes: bool) -> Result<OwnedFd, String> {
    let mut rules: BTreeMap<_, _> = metadata::calls()
        .into_iter()
        .map(|nr| (nr, vec![]))
        .collect();
    if writes {
        rules.extend(writes::rules()?);
    }
    let program = compile_notifying(rules, "file supervisor")?;
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    let listen = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    let killable = listen | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    let set = |flags| set_filter(&fprog, flags);
    let fd = match writes {
        // Before Linux 5.19 the flag is unknown (EINVAL): go without.
        true => match set(killable) {
            fd if fd < 0 && errno() == libc::EINVAL => set(listen),
            fd => fd,
        },
        false => set(listen),
    };
    if fd < 0 {
        return Err(format!("file supervisor: {}", io::Error::last_os_error()));
    }
    // SAFETY: a non-negative return is a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, fprog)`: the raw return.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn set_filter(fprog: &libc::sock_fprog, flags: libc::c_ulong) -> libc::c_long {
    // SAFETY: seccomp reads the program `fprog` points at, which lives
    // until the call returns; seccompiler's `sock_filter` has the kernel's
    // layout, as libc's does.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            fprog,
        )
    }
}

/// Whether the kernel answers a notification with an injected descriptor
/// (`SECCOMP_ADDFD_FLAG_SEND`, Linux 5.14): asked of `listener` for a
/// notification that does not exist, which such a kernel answers `ENOENT`.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
pub(super) fn injects_descriptors(listener: BorrowedFd<'_>) -> Result<(), String> {
    let addfd = libc::seccomp_notif_addfd {
        id: u64::MAX,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: 0,
        newfd: 0,
        newfd_flags: 0,
    };
    // SAFETY: the ioctl reads one seccomp_notif_addfd we own.
    let done = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &addfd,
        )
    };
    match (done, io::Error::last_os_error().raw_os_error()) {
        (_, Some(libc::ENOENT)) => Ok(()),
        (_, err) => Err(format!(
            "this kernel cannot answer a call with a descriptor (SECCOMP_ADDFD_FLAG_SEND, \
             Linux 5.14): {}",
            io::Error::from_raw_os_error(err.unwrap_or(libc::EINVAL))
        )),
    }
}

/// Install the filter (with `writes`, only where descriptors can be
/// injected) and try it in full: what `--probe` reports.
pub(super) fn probe(writes: bool) -> Result<OwnedFd, String> {
    let listener = install(writes)?;
    if writes {
        injects_descriptors(listener.as_fd())?;
    }
    Ok(listener)
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
    .map_err(|err| format!("file supervisor: cannot hand over the listener: {err}"))
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

/// The places of a run: its writable directories, those of them to
/// supervise, and the protected paths, for this user. Each directory is
/// opened once and taken by the name the kernel gives that descriptor; a
/// writable root the host checked (`roots`) must be that very directory,
/// as for its Landlock rule — else a root swapped for a symlink at launch
/// would point the supervisor elsewhere. Every supervised root must be a
/// directory; a writable grant that is not one (`/dev/null`) has no place.
pub(super) fn places(
    writable: &[PathBuf],
    supervised: &[PathBuf],
    protected: &[PathBuf],
    roots: &[super::verify::Root],
) -> Result<Places, String> {
    let place = |path: &PathBuf| -> Result<Option<PathBuf>, String> {
        let Ok(dir) = open_at(
            None,
            path.as_os_str().as_bytes(),
            libc::O_PATH | libc::O_DIRECTORY,
        ) else {
            return Ok(None);
        };
        if let Some(root) = roots.iter().find(|root| &root.path == path) {
            let stat = stat(dir.as_fd())
                .map_err(|errno| format!("cannot read {}: errno {errno}", path.display()))?;
            root.matches(stat.st_dev, stat.st_ino)?;
        }
        named(dir.as_fd())
            .map(Some)
            .map_err(|_| format!("cannot name {}", path.display()))
    };
    let mut places = Places {
        owner: nix::unistd::geteuid().as_raw(),
        // As the host named them (a protected symlink is the link).
        protected: protected.to_vec(),
        ..Places::default()
    };
    for path in supervised {
        let dir = place(path)?.ok_or_else(|| {
            format!(
                "file supervisor: {} is not a directory here",
                path.display()
            )
        })?;
        places.supervised.push(dir);
    }
    for path in writable {
        places.writable.extend(place(path)?);
    }
    places.writable.extend(places.supervised.iter().cloned());
    Ok(places)
}

/// On a thread of its own: receive the listener from `socket`, then answer
/// every notification until the command's tree is gone (the thread ends
/// with the supervisor). The thread gives up every capability first: what
/// it does for the command, it does with the command's rights.
pub(super) fn start(socket: UnixStream, places: Places) {
    let _ = std::thread::Builder::new()
        .name("cordon-files".into())
        .spawn(move || {
            if let Some(listener) = receive(&socket) {
                drop(socket);
                if crate::privileges::clear_capability_sets().is_err() {
                    return;
                }
                // The supervisor makes no file of its own: a file it makes
                // for the command gets the command's umask, applied by hand.
                nix::sys::stat::umask(nix::sys::stat::Mode::empty());
                serve(&Arc::new(listener), &places);
            }
        });
}

/// How a notification is answered.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// The call returns this value.
    Value(i64),
    /// The call fails with this errno.
    Errno(i32),
    /// The kernel runs the call as asked.
    Continue,
    /// Already answered (a descriptor injected with the answer, or a
    /// thread of its own will answer).
    Sent,
}

impl From<Result<i64, i32>> for Answer {
    fn from(done: Result<i64, i32>) -> Answer {
        match done {
            Ok(value) => Answer::Value(value),
            Err(errno) => Answer::Errno(errno),
        }
    }
}

/// Answer notifications on `listener` until it fails for good.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn serve(listener: &Arc<OwnedFd>, places: &Places) {
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
        let caller = Caller {
            listener: Arc::clone(listener),
            id: notif.id,
            pid: notif.pid,
        };
        let nr = i64::from(notif.data.nr);
        let answer = match metadata::Call::of(nr, notif.data.args) {
            Some(call) => metadata::answer(&caller, call, places).into(),
            None => match writes::Write::of(nr, notif.data.args) {
                Some(write) => writes::answer(&caller, write, places),
                None => Answer::Errno(libc::EPERM),
            },
        };
        caller.respond(answer);
    }
}

/// The caller of one notification, and the checks that it still waits.
#[derive(Clone)]
struct Caller {
    listener: Arc<OwnedFd>,
    id: u64,
    pid: u32,
}

impl Caller {
    /// Send `answer` (nothing to send for [`Answer::Sent`]). A caller that
    /// died meanwhile makes this fail with `ENOENT`: nothing to do.
    #[allow(
        unsafe_code,
        reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
    )]
    fn respond(&self, answer: Answer) {
        let (val, error, flags) = match answer {
            Answer::Sent => return,
            Answer::Value(value) => (value, 0, 0),
            Answer::Errno(errno) => (0, -errno, 0),
            Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        };
        let response = libc::seccomp_notif_resp {
            id: self.id,
            val,
            error,
            flags,
        };
        // SAFETY: the ioctl reads one seccomp_notif_resp we own.
        unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &response,
            )
        };
    }

    /// Install `file` as a new descriptor of the caller's and answer the
    /// call with its number, in one step.
    #[allow(
        unsafe_code,
        reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
    )]
    fn inject(&self, file: &OwnedFd, cloexec: bool) -> Answer {
        let addfd = libc::seccomp_notif_addfd {
            id: self.id,
            flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
            srcfd: file.as_raw_fd() as u32,
            newfd: 0,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: the ioctl reads one seccomp_notif_addfd we own.
        let done = unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                &addfd,
            )
        };
        match done {
            // Answered; a caller gone meanwhile (ENOENT) needs no answer.
            n if n >= 0 => Answer::Sent,
            _ if errno() == libc::ENOENT => Answer::Sent,
            _ => Answer::Errno(errno()),
        }
    }

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

    /// The directory a relative path of the caller's starts from: its
    /// working directory (`AT_FDCWD`) or its directory fd `dir`.
    fn base(&self, dir: RawFd) -> Result<OwnedFd, i32> {
        match dir {
            libc::AT_FDCWD => self.cwd(),
            fd => self.fd(fd),
        }
    }

    /// The caller's umask.
    fn umask(&self) -> Result<u32, i32> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .map_err(|_| libc::ESRCH)?;
        self.still_waiting()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("Umask:"))
            .and_then(|mask| u32::from_str_radix(mask.trim(), 8).ok())
            .ok_or(libc::ESRCH)
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

    /// The NUL-ended path at `at` in the caller's memory, read once: the
    /// first bytes, where most paths end, else up to `PATH_MAX` (read whole
    /// again: what is decided on is one read).
    fn path(&self, at: u64) -> Result<CString, i32> {
        const SHORT: usize = 256;
        if at == 0 {
            return Err(libc::EFAULT);
        }
        let short = self.memory(at, SHORT)?;
        let bytes = match short.contains(&0) || short.len() < SHORT {
            true => short,
            false => self.memory(at, libc::PATH_MAX as usize)?,
        };
        let end = bytes
            .iter()
            .position(|b| *b == 0)
            .ok_or(libc::ENAMETOOLONG)?;
        CString::new(&bytes[..end]).map_err(|_| libc::EINVAL)
    }

    /// The caller's `/proc/self` names in `path`, as this process must
    /// spell them (its own `/proc/self` is another process).
    fn own_proc(&self, path: &[u8]) -> Vec<u8> {
        for alias in [&b"/proc/self"[..], &b"/proc/thread-self"[..]] {
            if let Some(rest) = path.strip_prefix(alias)
                && (rest.is_empty() || rest.starts_with(b"/"))
            {
                let mut spelled = format!("/proc/{}", self.pid).into_bytes();
                spelled.extend_from_slice(rest);
                return spelled;
            }
        }
        path.to_vec()
    }
}

/// The path the kernel gives the descriptor `fd` (its `/proc/self/fd`
/// link): where the file is now, whatever name reached it.
fn named(fd: BorrowedFd<'_>) -> Result<PathBuf, i32> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(|_| libc::EPERM)
}

/// `fd`'s own magic link, for calls that take a path: the very file.
fn by_descriptor(fd: BorrowedFd<'_>) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number")
}

/// The type and owner of `fd`'s file.
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn stat(fd: BorrowedFd<'_>) -> Result<libc::stat, i32> {
    // SAFETY: an all-zero stat is a valid value; fstat fills it.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat we own.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(errno());
    }
    Ok(stat)
}

/// `path` opened close-on-exec with `flags` (and `mode` when it creates),
/// from `dir` (else the working directory, for an absolute path).
#[allow(
    unsafe_code,
    reason = "seccomp user notification (ioctls, pidfd_getfd, /proc/PID/mem) is raw system calls; each block says why it is sound"
)]
fn open_mode(
    dir: Option<BorrowedFd<'_>>,
    path: impl Into<Vec<u8>>,
    flags: i32,
    mode: u32,
) -> Result<OwnedFd, i32> {
    let path = CString::new(path).map_err(|_| libc::EINVAL)?;
    let dir = dir.map_or(libc::AT_FDCWD, |fd| fd.as_raw_fd());
    // SAFETY: openat reads the NUL-ended path we own.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    owned(fd as i64)
}

/// [`open_mode`] for a call that creates nothing.
fn open_at(
    dir: Option<BorrowedFd<'_>>,
    path: impl Into<Vec<u8>>,
    flags: i32,
) -> Result<OwnedFd, i32> {
    open_mode(dir, path, flags, 0)
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

/// A system call's result (0 or -1), as the caller's answer.
fn done(result: i32) -> Result<i64, i32> {
    if result == 0 { Ok(0) } else { Err(errno()) }
}

/// The last errno.
fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM)
}

/// `bytes` as an `OsStr`.
fn os(bytes: &[u8]) -> &OsStr {
    OsStr::from_bytes(bytes)
}
