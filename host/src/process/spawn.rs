//! Starting a child without forking the host, and learning when it exits.
//!
//! Why not `std::process::Command`: a run needs its own session (`setsid`)
//! and only fds 0–2 (plus the runner's status fd) in the child. std can do
//! both only through a `pre_exec` hook, which forces a full `fork` of the
//! host. A fork of a process holding a wasmtime engine is expensive twice:
//! the fork copies the page tables, and afterwards every page the next
//! policy call writes takes a copy-on-write fault (measured: one `resolve`
//! went from 27 µs to 326 µs when a forked spawn ran in between).
//!
//! On Linux with glibc (≥ 2.34) a child is therefore started with
//! `posix_spawn`, which uses `CLONE_VM|CLONE_VFORK` and never copies the
//! address space: `POSIX_SPAWN_SETSID` gives the session, file actions
//! place stdio and the status fd and `closefrom` everything above them, and
//! every signal disposition is reset to its default (the host ignores
//! `SIGPIPE`; a command must not inherit that, nor glibc's own internal
//! signals, which its `posix_spawn` would otherwise leave ignored). On
//! Linux without glibc (musl: the static release build) the same child is
//! made with the kernel's clone directly (`raw.rs`): musl's `posix_spawn`
//! has no `closefrom`, and the std `fork` path would copy the host and
//! mark every fd up to the open-file limit close-on-exec one system call
//! at a time. Elsewhere (macOS) the std `fork` path with a `pre_exec` hook
//! does the same.
//!
//! A child that must start inside a cgroup v2 directory is spawned with
//! `POSIX_SPAWN_SETCGROUP` where glibc has it (2.39+, found at run time);
//! with an older glibc, or musl, it is made with a fork-style
//! `clone3(CLONE_INTO_CGROUP)` that runs only raw system calls before
//! `execve` (`raw.rs`) — the one case that copies the host, the price of a
//! child that is inside from its first instruction. On cgroup v1 the
//! calling thread moves into the run's cgroups around an ordinary spawn
//! instead.
//!
//! The host learns of the exit through a pidfd (Linux ≥ 5.3) registered
//! with the tokio reactor, or a blocking `waitpid` thread where there is
//! none; either way one [`ExitWatch`] reaps the child exactly once, so no
//! zombie outlives a dropped run.

#[cfg(target_os = "linux")]
use std::ffi::CString;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
#[cfg(target_os = "linux")]
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use nix::libc;
use nix::unistd::Pid;
use tokio::sync::watch;

#[cfg(target_os = "linux")]
mod raw;

/// Where a child's stdin comes from.
pub(super) enum Stdin {
    /// `/dev/null`.
    Null,
    /// A pipe; the host keeps the write end.
    Piped,
    /// A new terminal of this size, as stdin, stdout and stderr; the host
    /// keeps its master ([`Output::Terminal`]).
    Terminal(crate::model::TerminalSize),
}

/// The host's ends of a child's output.
#[derive(Debug)]
pub(super) enum Output {
    /// Its stdout and stderr pipes.
    Pipes { stdout: OwnedFd, stderr: OwnedFd },
    /// Its terminal's master: stdout and stderr are the terminal, and so
    /// is stdin (written through the master too).
    Terminal(OwnedFd),
}

/// A started child: its pid (also its session and group id) and the host's
/// ends of its pipes.
#[derive(Debug)]
pub(super) struct Started {
    pub pid: Pid,
    pub stdin: Option<OwnedFd>,
    pub output: Output,
    pub status: Option<OwnedFd>,
    pub init: Option<OwnedFd>,
    /// The write end of the handover pipe of a child started ahead of
    /// what it is handed ([`Spec::handover_later`]).
    pub handover: Option<OwnedFd>,
    /// What tells whether the child waits on the stdin the host feeds
    /// (a pipe or a terminal; none for `/dev/null`).
    pub input: Option<super::input::InputWatch>,
}

/// What to start: the program is looked up in the child's own `PATH`.
pub(super) struct Spec<'a> {
    pub argv: &'a [String],
    pub env: &'a [(OsString, OsString)],
    pub workdir: &'a Path,
    pub stdin: Stdin,
    /// Give the child a pipe at [`super::STATUS_FD`].
    pub status_pipe: bool,
    /// Give the child a file with these bytes at [`super::HANDOVER_FD`].
    pub handover: Option<&'a [u8]>,
    /// Give the child a pipe at [`super::HANDOVER_FD`] instead, whose
    /// write end the host keeps ([`Started::handover`]): a runner started
    /// ahead of its command reads the command from it.
    pub handover_later: bool,
    /// Give the child a pipe at [`super::INIT_FD`] (for a report from
    /// inside the runner).
    pub init_pipe: bool,
    /// Give the child a file with these bytes at [`super::INIT_ENV_FD`].
    pub init_env: Option<&'a [u8]>,
    /// Give the child this fd too, at the slot right above the others
    /// ([`passed_slot`]): what the argv tells the child is there.
    pub passed: Option<std::os::fd::BorrowedFd<'a>>,
    /// Start the child inside this cgroup v2 directory (an open fd of it),
    /// from its first instruction.
    #[cfg_attr(
        not(target_os = "linux"),
        allow(dead_code, reason = "only Linux starts a child in a cgroup")
    )]
    pub cgroup: Option<RawFd>,
}

/// A close-on-exec pipe: (read end, write end).
#[cfg(target_os = "linux")]
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)
}

/// A close-on-exec pipe where there is no `pipe2` (macOS): both ends
/// marked right after they are made.
#[cfg(not(target_os = "linux"))]
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let (read, write) = nix::unistd::pipe()?;
    for end in [&read, &write] {
        fcntl(end, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    Ok((read, write))
}

/// An anonymous in-memory file holding `bytes`, positioned at its start
/// (close-on-exec; the child gets a `dup2` of it). Linux only: no other
/// platform's runner takes a handover.
#[cfg(not(target_os = "linux"))]
fn memfd_with(_bytes: &[u8]) -> io::Result<OwnedFd> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "a handover fd needs Linux",
    ))
}

/// An anonymous in-memory file holding `bytes`, positioned at its start
/// (close-on-exec; the child gets a `dup2` of it).
#[cfg(target_os = "linux")]
fn memfd_with(bytes: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name and flags; returns a new fd or -1.
    let raw = unsafe { libc::memfd_create(c"cordon-handover".as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes)?;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
    Ok(OwnedFd::from(file))
}

/// The same open file at an fd number above every slot the child's file
/// actions write (0–6), so that no action can clobber another's source
/// and no source is already sitting at its target (a `dup2` onto itself
/// would keep close-on-exec set).
fn above_child_slots(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > HIGHEST_SLOT {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on a valid fd returns a new fd we own.
    let raw = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, HIGHEST_SLOT + 1) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

#[cfg(target_os = "linux")]
fn c_string(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

/// Resolve `program` the way `execvp` would in the child, after its
/// `chdir` to `workdir` and with its environment: a name with a slash is
/// used as given; otherwise the first executable regular file along the
/// child's `PATH` (default `/usr/bin:/bin`), relative entries taken from
/// `workdir`.
pub(super) fn resolve_program(
    program: &str,
    env: &[(OsString, OsString)],
    workdir: &Path,
) -> io::Result<PathBuf> {
    if program.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "empty program name",
        ));
    }
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = env
        .iter()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| value.as_os_str())
        .unwrap_or(OsStr::new("/usr/bin:/bin"));
    let mut denied = false;
    for dir in std::env::split_paths(path) {
        let candidate = workdir.join(dir).join(program);
        let Ok(meta) = std::fs::metadata(&candidate) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK).is_ok() {
            return Ok(candidate);
        }
        denied = true;
    }
    Err(if denied {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{program}: permission denied"),
        )
    } else {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{program}: not found in the command's PATH"),
        )
    })
}

/// A child's stdio: its ends (stdin, stdout, stderr) and the host's.
struct Stdio {
    stdin_child: OwnedFd,
    stdin_host: Option<OwnedFd>,
    output: Output,
    stdout_child: OwnedFd,
    stderr_child: OwnedFd,
}

/// Make the stdio `stdin` asks for: `/dev/null`, a pipe or a terminal
/// in; pipes out, or the terminal.
fn stdio(stdin: &Stdin) -> io::Result<Stdio> {
    let (stdin_child, stdin_host, terminal) = match *stdin {
        Stdin::Null => (
            OwnedFd::from(std::fs::OpenOptions::new().read(true).open("/dev/null")?),
            None,
            None,
        ),
        Stdin::Piped => {
            let (read, write) = pipe()?;
            (read, Some(write), None)
        }
        Stdin::Terminal(size) => {
            let (master, slave) = super::terminal::open(size)?;
            (slave, None, Some(master))
        }
    };
    let (output, stdout_child, stderr_child) = match terminal {
        Some(master) => (
            Output::Terminal(master),
            stdin_child.try_clone()?,
            stdin_child.try_clone()?,
        ),
        None => {
            let (stdout_host, stdout_child) = pipe()?;
            let (stderr_host, stderr_child) = pipe()?;
            let output = Output::Pipes {
                stdout: stdout_host,
                stderr: stderr_host,
            };
            (output, stdout_child, stderr_child)
        }
    };
    Ok(Stdio {
        stdin_child,
        stdin_host,
        output,
        stdout_child,
        stderr_child,
    })
}

/// Start `spec` in a new session with only its stdio (and status fd).
pub(super) fn start(spec: &Spec<'_>) -> io::Result<Started> {
    let (program, _) = spec
        .argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
    let program = resolve_program(program, spec.env, spec.workdir)?;
    let Stdio {
        stdin_child,
        stdin_host,
        output,
        stdout_child,
        stderr_child,
    } = stdio(&spec.stdin)?;
    let (status_host, status_child) = match spec.status_pipe {
        true => {
            let (read, write) = pipe()?;
            (Some(read), Some(write))
        }
        false => (None, None),
    };
    if (spec.handover.is_some() || spec.handover_later) && status_child.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a handover fd needs a status pipe below it",
        ));
    }
    if spec.handover.is_some() && spec.handover_later {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a handover is a file or a pipe, not both",
        ));
    }
    if spec.init_pipe && spec.handover.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an init pipe needs a handover fd below it",
        ));
    }
    if spec.init_env.is_some() && !spec.init_pipe {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an init environment needs an init pipe below it",
        ));
    }
    let init_env = spec.init_env.map(memfd_with).transpose()?;
    let (init_host, init_child) = match spec.init_pipe {
        true => {
            let (read, write) = pipe()?;
            (Some(read), Some(write))
        }
        false => (None, None),
    };
    let (handover, handover_host) = match spec.handover_later {
        true => {
            let (read, write) = pipe()?;
            (Some(read), Some(write))
        }
        false => (spec.handover.map(memfd_with).transpose()?, None),
    };
    let child_fds = ChildFds {
        stdin: above_child_slots(stdin_child)?,
        stdout: above_child_slots(stdout_child)?,
        stderr: above_child_slots(stderr_child)?,
        status: status_child.map(above_child_slots).transpose()?,
        handover: handover.map(above_child_slots).transpose()?,
        init: init_child.map(above_child_slots).transpose()?,
        init_env: init_env.map(above_child_slots).transpose()?,
        passed: spec
            .passed
            .map(|fd| fd.try_clone_to_owned().and_then(above_child_slots))
            .transpose()?,
    };
    let pid = platform::start(&program, spec, &child_fds)?;
    let input = match spec.stdin {
        Stdin::Null => None,
        Stdin::Piped | Stdin::Terminal(_) => super::input::InputWatch::new(pid, &child_fds.stdin),
    };
    // The child's ends close here, so the host sees EOF once the child
    // (and everything that inherited them) is gone.
    drop(child_fds);
    Ok(Started {
        pid,
        stdin: stdin_host,
        output,
        status: status_host,
        init: init_host,
        handover: handover_host,
        input,
    })
}

/// What `execve` gets, as C strings owned here.
#[cfg(target_os = "linux")]
struct Exec {
    path: CString,
    workdir: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
}

#[cfg(target_os = "linux")]
impl Exec {
    fn new(program: &Path, spec: &Spec<'_>) -> io::Result<Exec> {
        Ok(Exec {
            path: c_string(program.as_os_str().as_bytes(), "program path")?,
            workdir: c_string(spec.workdir.as_os_str().as_bytes(), "working directory")?,
            argv: spec
                .argv
                .iter()
                .map(|arg| c_string(arg.as_bytes(), "an argument"))
                .collect::<io::Result<_>>()?,
            envp: spec
                .env
                .iter()
                .map(|(key, value)| {
                    let mut entry = key.as_bytes().to_vec();
                    entry.push(b'=');
                    entry.extend_from_slice(value.as_bytes());
                    c_string(&entry, "an environment variable")
                })
                .collect::<io::Result<_>>()?,
        })
    }

    /// The argument pointers, NULL-ended (valid while `self` lives).
    fn argv(&self) -> Vec<*const libc::c_char> {
        null_ended(&self.argv)
    }

    /// The environment pointers, NULL-ended (valid while `self` lives).
    fn envp(&self) -> Vec<*const libc::c_char> {
        null_ended(&self.envp)
    }
}

#[cfg(target_os = "linux")]
fn null_ended(strings: &[CString]) -> Vec<*const libc::c_char> {
    let mut pointers: Vec<_> = strings.iter().map(|s| s.as_ptr()).collect();
    pointers.push(std::ptr::null());
    pointers
}

/// The host-side copies of the fds the child gets at 0–6.
struct ChildFds {
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    status: Option<OwnedFd>,
    handover: Option<OwnedFd>,
    init: Option<OwnedFd>,
    init_env: Option<OwnedFd>,
    /// [`Spec::passed`], at the slot above the others.
    passed: Option<OwnedFd>,
}

/// The highest slot a child's fd may have: a passed fd above all four.
const HIGHEST_SLOT: RawFd = super::INIT_ENV_FD + 1;

/// The slot a passed fd ([`Spec::passed`]) gets: the one above the fds
/// the child has (a status pipe, a handover, an init pipe, its
/// environment; each needs the one below it, checked in `start`).
pub(super) fn passed_slot(status: bool, handover: bool, init: bool, init_env: bool) -> RawFd {
    if init_env {
        super::INIT_ENV_FD + 1
    } else if init {
        super::INIT_FD + 1
    } else if handover {
        super::HANDOVER_FD + 1
    } else if status {
        super::STATUS_FD + 1
    } else {
        3
    }
}

impl ChildFds {
    /// (source fd, target slot) in the order the child installs them.
    fn slots(&self) -> Vec<(RawFd, RawFd)> {
        let mut slots = vec![
            (self.stdin.as_raw_fd(), 0),
            (self.stdout.as_raw_fd(), 1),
            (self.stderr.as_raw_fd(), 2),
        ];
        if let Some(status) = &self.status {
            slots.push((status.as_raw_fd(), super::STATUS_FD));
        }
        if let Some(handover) = &self.handover {
            slots.push((handover.as_raw_fd(), super::HANDOVER_FD));
        }
        if let Some(init) = &self.init {
            slots.push((init.as_raw_fd(), super::INIT_FD));
        }
        if let Some(env) = &self.init_env {
            slots.push((env.as_raw_fd(), super::INIT_ENV_FD));
        }
        if let Some(passed) = &self.passed {
            slots.push((passed.as_raw_fd(), self.passed_slot()));
        }
        slots
    }

    /// The slot [`Self::passed`] has.
    fn passed_slot(&self) -> RawFd {
        passed_slot(
            self.status.is_some(),
            self.handover.is_some(),
            self.init.is_some(),
            self.init_env.is_some(),
        )
    }

    /// The first fd the child must not keep.
    fn first_closed(&self) -> RawFd {
        self.passed_slot() + RawFd::from(self.passed.is_some())
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod platform {
    //! `posix_spawn` with `POSIX_SPAWN_SETSID` and `closefrom` (glibc).

    use super::*;

    /// Owns a `posix_spawn_file_actions_t` and destroys it on drop.
    struct FileActions(libc::posix_spawn_file_actions_t);

    impl Drop for FileActions {
        fn drop(&mut self) {
            // SAFETY: initialised in `start`, destroyed exactly once.
            unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
        }
    }

    /// Owns a `posix_spawnattr_t` and destroys it on drop.
    struct Attributes(libc::posix_spawnattr_t);

    impl Drop for Attributes {
        fn drop(&mut self) {
            // SAFETY: initialised in `start`, destroyed exactly once.
            unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
        }
    }

    /// posix_spawn's functions return the error number instead of setting errno.
    fn check(rc: libc::c_int) -> io::Result<()> {
        match rc {
            0 => Ok(()),
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    }

    pub(super) fn start(program: &Path, spec: &Spec<'_>, fds: &ChildFds) -> io::Result<Pid> {
        if let Some(cgroup) = spec.cgroup
            && into_cgroup::setcgroup().is_none()
        {
            // No posix_spawn way into a cgroup here (glibc < 2.39): fork.
            return super::raw::into_cgroup(program, spec, fds, cgroup);
        }
        let exec = Exec::new(program, spec)?;
        let (path, workdir) = (&exec.path, &exec.workdir);
        let argv_ptrs: Vec<*mut libc::c_char> =
            exec.argv().into_iter().map(|p| p as *mut _).collect();
        let envp_ptrs: Vec<*mut libc::c_char> =
            exec.envp().into_iter().map(|p| p as *mut _).collect();

        // SAFETY: every pointer handed to libc below points into a CString
        // or Vec that outlives the posix_spawn call; the attribute and
        // action objects are initialised before use and destroyed by their
        // owners' Drop.
        unsafe {
            let mut actions = FileActions(std::mem::zeroed());
            check(libc::posix_spawn_file_actions_init(&mut actions.0))?;
            for (source, slot) in fds.slots() {
                check(libc::posix_spawn_file_actions_adddup2(
                    &mut actions.0,
                    source,
                    slot,
                ))?;
            }
            check(libc::posix_spawn_file_actions_addclosefrom_np(
                &mut actions.0,
                fds.first_closed(),
            ))?;
            check(libc::posix_spawn_file_actions_addchdir_np(
                &mut actions.0,
                workdir.as_ptr(),
            ))?;

            let mut attributes = Attributes(std::mem::zeroed());
            check(libc::posix_spawnattr_init(&mut attributes.0))?;
            // Every bit set, not `sigfillset`: glibc's leaves out its two
            // internal signals (32, 33), which its posix_spawn then sets to
            // SIG_IGN in the child — and an ignored signal survives exec.
            let mut all: libc::sigset_t = std::mem::zeroed();
            std::ptr::write_bytes(
                &mut all as *mut libc::sigset_t as *mut u8,
                0xff,
                size_of::<libc::sigset_t>(),
            );
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            check(libc::posix_spawnattr_setsigdefault(&mut attributes.0, &all))?;
            check(libc::posix_spawnattr_setsigmask(&mut attributes.0, &none))?;
            let mut flags = libc::POSIX_SPAWN_SETSID
                | (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as libc::c_short;
            if let (Some(cgroup), Some(setcgroup)) = (spec.cgroup, into_cgroup::setcgroup()) {
                check(setcgroup(&mut attributes.0, cgroup))?;
                flags |= into_cgroup::POSIX_SPAWN_SETCGROUP;
            }
            check(libc::posix_spawnattr_setflags(&mut attributes.0, flags))?;

            let mut pid: libc::pid_t = 0;
            check(libc::posix_spawn(
                &mut pid,
                path.as_ptr(),
                &actions.0,
                &attributes.0,
                argv_ptrs.as_ptr(),
                envp_ptrs.as_ptr(),
            ))?;
            Ok(Pid::from_raw(pid))
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod into_cgroup {
    //! Starting a child inside a cgroup v2 directory with glibc.
    //!
    //! glibc ≥ 2.39 can `posix_spawn` into a cgroup
    //! (`posix_spawnattr_setcgroup_np`), looked up at run time so the
    //! binary still loads on an older glibc. Without it the child is made
    //! by [`super::raw::into_cgroup`].

    use super::*;
    use std::sync::OnceLock;

    /// glibc's flag for `posix_spawnattr_setcgroup_np` (`spawn.h`).
    pub(super) const POSIX_SPAWN_SETCGROUP: libc::c_short = 0x100;

    /// `posix_spawnattr_setcgroup_np`.
    pub(super) type SetCgroup =
        unsafe extern "C" fn(*mut libc::posix_spawnattr_t, libc::c_int) -> libc::c_int;

    /// glibc's `posix_spawnattr_setcgroup_np`, where this glibc has it.
    pub(super) fn setcgroup() -> Option<SetCgroup> {
        static FOUND: OnceLock<Option<usize>> = OnceLock::new();
        let address = *FOUND.get_or_init(|| {
            // SAFETY: dlsym with the default handle and a NUL-terminated
            // name only looks the symbol up.
            let symbol = unsafe {
                libc::dlsym(libc::RTLD_DEFAULT, c"posix_spawnattr_setcgroup_np".as_ptr())
            };
            (!symbol.is_null()).then_some(symbol as usize)
        });
        // SAFETY: the symbol is glibc's function of exactly this type.
        address.map(|address| unsafe { std::mem::transmute::<usize, SetCgroup>(address) })
    }
}

#[cfg(all(target_os = "linux", not(target_env = "gnu")))]
mod platform {
    //! Linux without glibc (musl: the static release build), whose
    //! `posix_spawn` has no `closefrom` and no cgroup: the kernel's clone
    //! directly ([`super::raw`]).

    use super::*;

    pub(super) fn start(program: &Path, spec: &Spec<'_>, fds: &ChildFds) -> io::Result<Pid> {
        match spec.cgroup {
            Some(cgroup) => super::raw::into_cgroup(program, spec, fds, cgroup),
            None => super::raw::vfork(program, spec, fds),
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    //! `fork` + `exec` through std, with a `pre_exec` hook for the session
    //! and the fds (macOS: no `posix_spawn` with `closefrom`).

    use super::*;
    use std::os::unix::process::CommandExt;

    pub(super) fn start(program: &Path, spec: &Spec<'_>, fds: &ChildFds) -> io::Result<Pid> {
        let slots = fds.slots();
        let first_closed = fds.first_closed();
        let mut command = std::process::Command::new(program);
        command
            .arg0(&spec.argv[0])
            .args(&spec.argv[1..])
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(spec.workdir);
        // SAFETY: between fork and exec only async-signal-safe calls
        // (setsid, dup2, fcntl, signal) on integers; no allocation.
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                for &(source, slot) in &slots {
                    if libc::dup2(source, slot) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(first_closed as i64, 65_536);
                for fd in first_closed..max as RawFd {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        Ok(Pid::from_raw(child.id() as i32))
    }
}

/// A child's exit, reaped once and shared with whoever asks.
#[derive(Clone, Debug)]
pub(super) struct ExitWatch(watch::Receiver<Option<io::Result<ExitStatus>>>);

impl ExitWatch {
    /// Start reaping `pid` (a child of this process) in the background.
    /// Must be called inside a tokio runtime.
    pub fn reap(pid: Pid) -> ExitWatch {
        let (sender, receiver) = watch::channel(None);
        match pidfd::open(pid) {
            Some(pidfd) => {
                tokio::spawn(async move {
                    let status = pidfd::exited(pidfd, pid).await;
                    let _ = sender.send(Some(status));
                });
            }
            None => {
                tokio::task::spawn_blocking(move || {
                    let _ = sender.send(Some(wait_blocking(pid)));
                });
            }
        }
        ExitWatch(receiver)
    }

    /// The exit status, once the child has been reaped.
    pub fn try_status(&self) -> Option<io::Result<ExitStatus>> {
        self.0.borrow().as_ref().map(clone_result)
    }

    /// Wait for the exit status.
    pub async fn status(&mut self) -> io::Result<ExitStatus> {
        match self.0.wait_for(Option::is_some).await {
            Ok(status) => status.as_ref().map(clone_result).expect("checked is_some"),
            Err(_) => Err(io::Error::other("the reaper of the child went away")),
        }
    }
}

fn clone_result(status: &io::Result<ExitStatus>) -> io::Result<ExitStatus> {
    match status {
        Ok(status) => Ok(*status),
        Err(err) => Err(io::Error::new(err.kind(), err.to_string())),
    }
}

/// `waitpid(pid, 0)`, retried on `EINTR`.
fn wait_blocking(pid: Pid) -> io::Result<ExitStatus> {
    let mut raw = 0;
    loop {
        // SAFETY: waitpid writes one int we own.
        let rc = unsafe { libc::waitpid(pid.as_raw(), &mut raw, 0) };
        if rc >= 0 {
            return Ok(ExitStatus::from_raw(raw));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(target_os = "linux")]
pub(crate) mod pidfd {
    //! A pidfd becomes readable when its process exits (Linux ≥ 5.3).

    use super::*;
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    /// A pidfd for `pid`; none where the kernel has no `pidfd_open`.
    pub(crate) fn open(pid: Pid) -> Option<OwnedFd> {
        // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
        // SAFETY: a non-negative return is a fresh fd we own.
        (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw as RawFd) })
    }

    pub(super) async fn exited(pidfd: OwnedFd, pid: Pid) -> io::Result<ExitStatus> {
        // SAFETY: the AsyncFd owns the OwnedFd, which stays open and the
        // same file until the AsyncFd drops it.
        match unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) } {
            Ok(fd) => {
                let _ = fd.readable().await?;
                // The child is a zombie now: this returns at once.
                wait_blocking(pid)
            }
            Err(_) => tokio::task::spawn_blocking(move || wait_blocking(pid))
                .await
                .map_err(io::Error::other)?,
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) mod pidfd {
    use super::*;

    /// No pidfds on this platform.
    pub(crate) fn open(_pid: Pid) -> Option<OwnedFd> {
        None
    }

    pub(super) async fn exited(_pidfd: OwnedFd, _pid: Pid) -> io::Result<ExitStatus> {
        unreachable!("no pidfd is ever opened here")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(path: &str) -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), path.into())]
    }

    #[test]
    fn a_name_with_a_slash_is_used_as_given() {
        assert_eq!(
            resolve_program("./x", &[], Path::new("/")).unwrap(),
            PathBuf::from("./x")
        );
    }

    #[test]
    fn a_bare_name_is_found_along_the_childs_path() {
        let found =
            resolve_program("sh", &env("/nonexistent:/bin:/usr/bin"), Path::new("/")).unwrap();
        assert!(found.ends_with("sh"), "{found:?}");
        let err = resolve_program("sh", &env("/nonexistent"), Path::new("/")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn relative_path_entries_are_taken_from_the_workdir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let tool = dir.path().join("bin/tool");
        std::fs::write(&tool, "").unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        assert_eq!(
            resolve_program("tool", &env("bin"), dir.path()).unwrap(),
            tool
        );
        let err = resolve_program("tool", &env("bin"), Path::new("/")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_directory_on_the_path_is_not_a_program() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tool")).unwrap();
        let err = resolve_program("tool", &env(dir.path().to_str().unwrap()), Path::new("/"))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_non_executable_file_is_permission_denied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tool"), "").unwrap();
        let err = resolve_program("tool", &env(dir.path().to_str().unwrap()), Path::new("/"))
            .unwrap_err();
        // No execute bit at all: even root is refused.
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    }
}
