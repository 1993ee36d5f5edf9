//! Code that runs *inside* the sandbox: cordon's own launcher, hidden
//! modes of the `cordon` binary (one binary to ship). The host side of each
//! backend (`sandbox/*.rs`) builds argvs that start it; this module is what
//! runs then, between the runner's exec and the command's. It is the place
//! for everything that must run confined or right before confinement: the
//! Landlock launcher, cordon's init inside bubblewrap, a network bridge or
//! a namespace runner next.
//!
//! ```text
//! cordon __landlock [--status-fd N] [--env-fd N] [--parent PID] [--unshare-ipc] [--socket-families LIST] [--writable-root DEV:INO:PATH]... (--ro PATH | --ls PATH | --rw PATH)... -- ARGV...
//! cordon __landlock --probe
//! cordon __init [--status-fd N] [--env-fd N] [--outside NS=INODE,...] [--writable-root DEV:INO:PATH]... [--socket-families LIST] [--proxy-socket PATH] -- ARGV...
//! cordon __init --probe
//! cordon __ns [--status-fd N] [--env-fd N] [--parent PID] [--unshare-net] [--socket-families LIST] [--proxy-socket PATH] [--writable-root DEV:INO:PATH]... PROFILE... -- ARGV...
//! cordon __ns --await-fd N [--status-fd N] [--parent PID] [--unshare-net] [--socket-families LIST] [--proxy-socket PATH] PROFILE... --
//! ```
//!
//! With `--await-fd` the runner is started ahead of its command: it builds
//! the sandbox, then reads the command — working directory, argv and
//! environment ([`namespaces::Command`]) — from that fd, checks the
//! sandbox is still the view it built ([`namespaces::View`]: a cover the
//! host moved meanwhile fails the run, nothing executed), and runs it.
//!
//! `__ns` is cordon's namespace runner ([`namespaces`]): it builds the
//! sandbox bwrap would from the same profile (`--ro-bind`, `--bind`,
//! `--ro-bind-try`, `--tmpfs`, `--remount-ro`, `--dev`, `--proc`) and is
//! the command's init inside it.
//!
//! Both modes fork the command and stay as its supervisor
//! ([`supervise`]): the run's process tree ends with the leader, a
//! forwarded `SIGTERM` gets the grace, and the leader's exact wait status
//! is reported. The Landlock launcher confines the child (ruleset, scopes,
//! metadata filter) before it execs; the init runs inside bwrap, which has
//! confined it already.
//!
//! Every failure of the launcher itself — usage, a kernel without Landlock,
//! an unopenable grant path, a ruleset error, a failed exec — exits
//! [`FAILURE_EXIT`] with a line starting with [`PREFIX`] ([`INIT_PREFIX`]
//! for the init), and is written to the status fd (`failed: …`). Just
//! before exec the child writes `exec`; when the leader has ended the
//! supervisor writes `exit N` or `signal N`. The fd is close-on-exec, so
//! the command never sees it. The command's own exit status, including its
//! own 125, passes through unchanged.
//!
//! The launcher is spawned with a fixed minimal environment; the command's
//! own comes over `--env-fd` (`NAME=VALUE` entries, NUL-separated) and
//! reaches the command only, so a caller's `LD_PRELOAD` never loads into
//! the launcher, which runs before confinement.
//!
//! Nothing here depends on the rest of the host (no policy, no tokio):
//! what the launcher and the host agree on is the constants below.

#[cfg(target_os = "linux")]
mod bridge;
#[cfg(target_os = "linux")]
mod hardening;
#[cfg(target_os = "linux")]
pub mod landlock;
#[cfg(not(target_os = "linux"))]
#[path = "landlock_unsupported.rs"]
pub mod landlock;
#[cfg(target_os = "linux")]
mod metadata;
#[cfg(target_os = "linux")]
pub mod namespaces;
#[cfg(target_os = "linux")]
mod notify;
#[cfg(target_os = "linux")]
mod seccomp;
// Host-side too (the bwrap wrap names the host's namespaces), on every
// platform; only Linux's launcher checks them.
#[cfg(target_os = "linux")]
pub mod sockets;
pub mod supervise;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub mod verify;

use std::convert::Infallible;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

pub use supervise::Ended;

/// The hidden subcommand of the `cordon` binary that is the Landlock launcher.
pub const SUBCOMMAND: &str = "__landlock";
/// The hidden subcommand that is cordon's init inside bubblewrap.
pub const INIT_SUBCOMMAND: &str = "__init";
/// The hidden subcommand that is cordon's namespace runner.
pub const NS_SUBCOMMAND: &str = "__ns";
/// The prefix of every line the namespace runner writes about itself.
pub const NS_PREFIX: &str = "cordon-ns: ";
/// The prefix of every line the launcher writes about itself.
pub const PREFIX: &str = "cordon-landlock: ";
/// The prefix of every line the init writes about itself.
pub const INIT_PREFIX: &str = "cordon-init: ";
/// The launcher's exit code for any failure of its own.
pub const FAILURE_EXIT: i32 = 125;
/// The informational notice on a kernel with an older ABI.
pub const PARTIAL_NOTICE: &str = "partially enforced (older ABI)";
/// Probe output for a fully enforcing kernel.
pub const PROBE_FULL: &str = "landlock: fully enforced";
/// Probe output for a partially enforcing kernel.
pub const PROBE_PARTIAL: &str = "landlock: partially enforced (older ABI)";
/// The probe's line when the launcher can give runs their own SysV IPC
/// and UTS namespaces (it needs `CAP_SYS_ADMIN`: root).
pub const PROBE_IPC_ISOLATED: &str = "ipc: isolated";
/// The probe's line when it cannot (IPC stays the host's: partial).
pub const PROBE_IPC_SHARED: &str = "ipc: shared (unsharing needs CAP_SYS_ADMIN)";
/// The probe's line prefix listing the Landlock scopes in force.
pub const PROBE_SCOPES: &str = "scopes: ";
/// The probe's line prefix saying how `chmod` and `utimensat` fare: carried
/// out by the metadata supervisor inside the writable roots, or refused.
pub const PROBE_METADATA: &str = "metadata: ";
/// What `cordon __init --probe` prints: the binary has the init mode.
pub const INIT_PROBE: &str = "cordon-init: ready";
/// In the launcher's own environment (never the command's): the
/// `RLIMIT_NPROC` to set for the command, where no cgroup bounds the run.
pub const LIMIT_NPROC_VAR: &str = "CORDON_LIMIT_NPROC";
/// Likewise, the `RLIMIT_AS` (bytes of address space per process).
pub const LIMIT_AS_VAR: &str = "CORDON_LIMIT_AS";

/// The loopback port inside a bwrap sandbox where cordon's init bridges
/// the command's proxy clients (HTTP and SOCKS5 alike) to the host's
/// allow-list proxy.
pub const PROXY_PORT: u16 = 3128;

/// Which of the launcher's modes the binary was started in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The Landlock launcher: confines the command itself, supervises it.
    Landlock,
    /// cordon's init inside bubblewrap: supervises and reports only (bwrap
    /// has confined it already).
    Init,
    /// cordon's namespace runner: builds the sandbox, then is the
    /// command's init inside it.
    Namespaces,
}

impl Mode {
    fn prefix(self) -> &'static str {
        match self {
            Mode::Landlock => PREFIX,
            Mode::Init => INIT_PREFIX,
            Mode::Namespaces => NS_PREFIX,
        }
    }

    /// Write `detail` to the status fd and stderr, then exit 125.
    fn fail(self, status: Option<&mut File>, detail: &str) -> ! {
        if let Some(status) = status {
            let _ = writeln!(status, "failed: {detail}");
        }
        eprintln!("{}{detail}", self.prefix());
        std::process::exit(FAILURE_EXIT)
    }
}

/// Set once this executable's `main` has asked [`invoked`]: it dispatches
/// the launcher modes, so it can be the init without a probe saying so.
static DISPATCHES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The mode the binary was started in, when `argv[1]` is one of the
/// launcher's subcommands. A `main` that calls this (as `cordon`'s does,
/// before anything else) dispatches the modes: the ladder then uses this
/// executable as the init without probing it ([`dispatches`]).
pub fn invoked(args: &[OsString]) -> Option<Mode> {
    DISPATCHES.store(true, std::sync::atomic::Ordering::Relaxed);
    match args.get(1)?.to_str()? {
        SUBCOMMAND => Some(Mode::Landlock),
        INIT_SUBCOMMAND => Some(Mode::Init),
        NS_SUBCOMMAND => Some(Mode::Namespaces),
        _ => None,
    }
}

/// Whether this executable dispatches the launcher modes: its `main`
/// called [`invoked`].
pub fn dispatches() -> bool {
    DISPATCHES.load(std::sync::atomic::Ordering::Relaxed)
}

/// What the launcher was asked to do.
#[derive(Debug, PartialEq, Eq)]
enum Invocation {
    Probe,
    Launch(Box<Launch>),
}

/// What to confine and run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Launch {
    status_fd: Option<RawFd>,
    /// Where the command's environment comes from (else: the launcher's own).
    env_fd: Option<RawFd>,
    /// The namespace runner builds its sandbox first and then waits here
    /// for the command (its working directory, argv and environment).
    await_fd: Option<RawFd>,
    /// Give the command its own SysV IPC and UTS namespaces.
    unshare_ipc: bool,
    /// The host's pid, to die with (and to check is still there).
    parent: Option<i32>,
    read_only: Vec<PathBuf>,
    /// Directories whose entries may be listed (not read): the ancestors
    /// of a deny-read path, whose other entries are granted one by one.
    listable: Vec<PathBuf>,
    writable: Vec<PathBuf>,
    /// The socket families the command may make (none: no filter).
    #[cfg(target_os = "linux")]
    socket_families: Option<Vec<sockets::Allowed>>,
    /// The one TCP port the command may connect to (Landlock: the host's
    /// allow-list proxy on the loopback).
    connect_port: Option<u16>,
    /// The host's proxy socket to bridge the sandbox's loopback to.
    proxy_socket: Option<PathBuf>,
    /// The host's own namespaces, which a runner that confines has
    /// replaced (cordon's init checks before it runs the command).
    #[cfg(target_os = "linux")]
    outside: Vec<(String, u64)>,
    /// The writable roots with the identity the host checked them by.
    roots: Vec<verify::Root>,
    /// The namespace runner's sandbox.
    #[cfg(target_os = "linux")]
    plan: namespaces::Plan,
    argv: Vec<OsString>,
}

/// Run the launcher in `mode` with `args` (everything after the
/// subcommand). Never returns: it supervises the command or exits.
pub fn main(mode: Mode, args: Vec<OsString>) -> ! {
    let invocation = match parse(mode, args) {
        Ok(invocation) => invocation,
        Err(message) => mode.fail(None, &format!("usage: {message}")),
    };
    match (invocation, mode) {
        (Invocation::Probe, Mode::Landlock) => landlock::probe(),
        (Invocation::Probe, Mode::Init | Mode::Namespaces) => {
            println!("{INIT_PROBE}");
            std::process::exit(0)
        }
        (Invocation::Launch(request), _) => launch(mode, *request),
    }
}

fn parse(mode: Mode, args: Vec<OsString>) -> Result<Invocation, String> {
    let mut args = args.into_iter();
    let mut launch = Launch::default();
    let mut first = true;
    let landlock = mode == Mode::Landlock;
    let runner = mode == Mode::Namespaces;
    while let Some(arg) = args.next() {
        let flag = arg.to_str().unwrap_or_default().to_owned();
        match flag.as_str() {
            "--probe" if first => {
                return match args.next() {
                    None => Ok(Invocation::Probe),
                    Some(extra) => Err(format!("--probe takes no arguments, got {extra:?}")),
                };
            }
            "--status-fd" | "--env-fd" | "--await-fd" if flag != "--await-fd" || runner => {
                let fd = number(&flag, args.next())?;
                if fd <= 2 {
                    return Err(format!("{flag} needs a number above 2, got {fd}"));
                }
                match flag.as_str() {
                    "--status-fd" => launch.status_fd = Some(fd),
                    "--env-fd" => launch.env_fd = Some(fd),
                    _ => launch.await_fd = Some(fd),
                }
            }
            "--parent" if landlock || runner => launch.parent = Some(number(&flag, args.next())?),
            "--proxy-socket" if !landlock => {
                let path = args.next().ok_or("--proxy-socket needs a path")?;
                launch.proxy_socket = Some(PathBuf::from(path));
            }
            #[cfg(target_os = "linux")]
            "--socket-families" => {
                let list = args
                    .next()
                    .ok_or("--socket-families needs a list (may be empty)")?;
                let list = list.to_str().ok_or("--socket-families is not UTF-8")?;
                launch.socket_families = Some(sockets::parse(list)?);
            }
            #[cfg(target_os = "linux")]
            "--outside" if mode == Mode::Init => {
                let list = args.next().ok_or("--outside needs a list")?;
                let list = list.to_str().ok_or("--outside is not UTF-8")?;
                launch.outside = verify::parse(list)?;
            }
            "--writable-root" => {
                let value = args.next().ok_or("--writable-root needs DEV:INO:PATH")?;
                let value = value.to_str().ok_or("--writable-root is not UTF-8")?;
                launch.roots.push(verify::parse_root(value)?);
            }
            "--unshare-ipc" if landlock => launch.unshare_ipc = true,
            "--connect-port" if landlock => {
                let port = number(&flag, args.next())?;
                let port = u16::try_from(port)
                    .map_err(|_| format!("--connect-port {port} is not a port"))?;
                launch.connect_port = Some(port);
            }
            "--ro" | "--rw" | "--ls" if landlock => {
                let path = args.next().ok_or_else(|| format!("{flag} needs a path"))?;
                let list = match flag.as_str() {
                    "--ro" => &mut launch.read_only,
                    "--ls" => &mut launch.listable,
                    _ => &mut launch.writable,
                };
                list.push(PathBuf::from(path));
            }
            "--" => {
                launch.argv = args.collect();
                match (launch.await_fd, launch.argv.is_empty(), launch.env_fd) {
                    (None, true, _) => return Err("no command after --".into()),
                    (Some(_), false, _) => {
                        return Err("with --await-fd the command comes over that fd, \
                                    not after --"
                            .into());
                    }
                    (Some(_), _, Some(_)) => {
                        return Err("with --await-fd the environment comes over that fd, \
                                    not --env-fd"
                            .into());
                    }
                    _ => {}
                }
                #[cfg(target_os = "linux")]
                if runner {
                    launch.plan.check()?;
                }
                return Ok(Invocation::Launch(Box::new(launch)));
            }
            #[cfg(target_os = "linux")]
            profile if runner && launch.plan.take(profile, &mut args)? => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
        first = false;
    }
    Err("missing -- and the command to run".into())
}

/// What the launcher in `mode` reads from `args` (everything after its
/// subcommand), as the fuzz targets check it: the command it would run and
/// every path it would let that command write. `Err` when it refuses the
/// arguments.
#[cfg(feature = "fuzzing")]
pub(crate) fn read_back(
    mode: Mode,
    args: Vec<OsString>,
) -> Result<(Vec<OsString>, Vec<PathBuf>), String> {
    let Invocation::Launch(launch) = parse(mode, args)? else {
        return Err("read a probe".into());
    };
    #[cfg(target_os = "linux")]
    let mounted: Vec<PathBuf> = launch.plan.writable_sources().map(PathBuf::from).collect();
    #[cfg(not(target_os = "linux"))]
    let mounted: Vec<PathBuf> = vec![];
    let writable = launch.writable.iter().cloned().chain(mounted).collect();
    Ok((launch.argv, writable))
}

/// A positive number argument of `flag`.
fn number(flag: &str, value: Option<OsString>) -> Result<i32, String> {
    let value = value.ok_or_else(|| format!("{flag} needs a number"))?;
    value
        .to_str()
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{flag} needs a positive number, got {value:?}"))
}

fn launch(mode: Mode, request: Launch) -> ! {
    let fail = |status: Option<&mut File>, detail: &str| -> ! { mode.fail(status, detail) };
    let reported = |status: Option<&mut File>, detail: &str| -> Infallible { fail(status, detail) };
    // SAFETY: the host handed us this fd for our exclusive use.
    let mut status = request.status_fd.map(|fd| unsafe { File::from_raw_fd(fd) });
    if let Some(fd) = request.status_fd {
        // Never let the command inherit the status pipe.
        // SAFETY: fcntl on an fd we own.
        if unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC) } != 0 {
            fail(
                None,
                &format!("--status-fd {fd} is not an open file descriptor"),
            );
        }
    }
    let env = match request.env_fd.map(read_env) {
        None => None,
        Some(Ok(env)) => Some(env),
        Some(Err(err)) => fail(
            status.as_mut(),
            &format!("cannot read the command's environment: {err}"),
        ),
    };
    #[cfg(target_os = "linux")]
    let (request, env) = match mode {
        Mode::Namespaces => match enter_sandbox(&request) {
            // A runner started ahead of its command: the command comes
            // now, into a sandbox still as it was built.
            Ok(Some(command)) => (
                Launch {
                    argv: command.argv,
                    ..request
                },
                Some(command.env),
            ),
            Ok(None) => (request, env),
            Err(detail) => fail(status.as_mut(), &detail),
        },
        Mode::Landlock | Mode::Init => (request, env),
    };
    // Never a supervisor of an unconfined command: the runner builds its
    // sandbox from Linux namespaces only.
    #[cfg(not(target_os = "linux"))]
    if mode == Mode::Namespaces {
        fail(
            status.as_mut(),
            "cordon's namespace runner needs Linux namespaces; this system has none",
        );
    }
    #[cfg(target_os = "linux")]
    if request.unshare_ipc
        && let Err(err) = unshare_ipc()
    {
        fail(
            status.as_mut(),
            &format!("cannot give the command its own IPC namespace: {err}"),
        );
    }
    // The bridge's port is bound now, before the command exists (so it
    // never races it); its thread starts in the supervisor after the fork,
    // which must happen while the launcher is single-threaded.
    #[cfg(target_os = "linux")]
    let bridge = match &request.proxy_socket {
        None => None,
        Some(socket) => match bridge::bind(PROXY_PORT) {
            Ok(listener) => Some((listener, socket.clone())),
            Err(err) => fail(
                status.as_mut(),
                &format!("cannot bridge to the network proxy: {err}"),
            ),
        },
    };
    // Under Landlock, a run that may write gets the metadata supervisor:
    // its filter's listener comes back from the command over this pair.
    #[cfg(target_os = "linux")]
    let (supervisor_end, command_end) = match mode == Mode::Landlock {
        true => {
            let allowed = notify::Allowed::of(&request.writable);
            match allowed.roots.is_empty() {
                true => (None, None),
                false => match std::os::unix::net::UnixStream::pair() {
                    Ok((ours, theirs)) => (Some((ours, allowed)), Some(theirs)),
                    Err(err) => fail(
                        status.as_mut(),
                        &format!("metadata supervisor: cannot make its channel: {err}"),
                    ),
                },
            }
        }
        false => (None, None),
    };
    #[cfg(target_os = "linux")]
    let alongside = move || {
        if let Some((listener, socket)) = bridge {
            bridge::start(listener, socket);
        }
        if let Some((socket, allowed)) = supervisor_end {
            notify::start(socket, allowed);
        }
    };
    #[cfg(not(target_os = "linux"))]
    let alongside = || {};
    let supervision = supervise::Supervision {
        // Pid 1 of the namespace runner is watched by its launcher.
        parent: request.parent.filter(|_| mode != Mode::Namespaces),
    };
    let rlimits = [
        (nix::libc::RLIMIT_NPROC, LIMIT_NPROC_VAR),
        (nix::libc::RLIMIT_AS, LIMIT_AS_VAR),
    ]
    .into_iter()
    .filter_map(|(resource, var)| {
        let value = std::env::var(var).ok()?.parse::<u64>().ok()?;
        Some((resource, var, value))
    })
    .collect::<Vec<_>>();
    supervise::run(
        supervision,
        status,
        reported,
        alongside,
        move |mut status| -> Infallible {
            if mode == Mode::Landlock {
                match landlock::restrict(
                    &request.read_only,
                    &request.listable,
                    &request.writable,
                    &request.roots,
                    request.connect_port,
                ) {
                    Ok(landlock::Restricted::Fully) => {}
                    Ok(landlock::Restricted::Partially) => eprintln!("{PREFIX}{PARTIAL_NOTICE}"),
                    Err(detail) => fail(status.as_mut(), &detail),
                }
                // The supervisor takes chmod and utimensat where it has the
                // listener; else they stay refused with the rest.
                #[cfg(target_os = "linux")]
                let supervised = command_end.as_ref().is_some_and(|socket| {
                    notify::install().is_ok_and(|listener| notify::send(socket, &listener).is_ok())
                });
                #[cfg(target_os = "linux")]
                drop(command_end);
                #[cfg(target_os = "linux")]
                if let Err(detail) = metadata::refuse_metadata_changes(supervised) {
                    fail(status.as_mut(), &detail);
                }
            }
            #[cfg(target_os = "linux")]
            if let Some(families) = &request.socket_families
                && let Err(detail) = sockets::allow_only(families)
            {
                fail(status.as_mut(), &detail);
            }
            // Every rung: no setuid file, no device node, no keyring.
            #[cfg(target_os = "linux")]
            if let Err(detail) = hardening::install() {
                fail(status.as_mut(), &detail);
            }
            for &(resource, var, value) in &rlimits {
                let limit = nix::libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                // SAFETY: setrlimit reads one struct we own.
                if unsafe { nix::libc::setrlimit(resource, &limit) } != 0 {
                    let err = std::io::Error::last_os_error();
                    fail(
                        status.as_mut(),
                        &format!("cannot apply {var}={value}: {err}"),
                    );
                }
            }
            // The command gets no capability, even as root (bwrap's
            // `--cap-drop ALL`): Landlock confines files, not what
            // `CAP_SYS_BOOT`, `CAP_SYS_MODULE` or `CAP_NET_ADMIN` reach.
            #[cfg(target_os = "linux")]
            if matches!(mode, Mode::Landlock | Mode::Namespaces)
                && let Err(detail) = drop_capabilities()
            {
                fail(status.as_mut(), &detail);
            }
            #[cfg(target_os = "linux")]
            if mode == Mode::Namespaces
                && let Err(err) = no_new_privileges()
            {
                fail(status.as_mut(), &format!("cannot set no-new-privs: {err}"));
            }
            // The runner confined us as asked, or the command never runs.
            // (Landlock checked its roots on the descriptors its rules
            // were made from.)
            #[cfg(target_os = "linux")]
            {
                let bound: &[verify::Root] = match mode {
                    Mode::Landlock => &[],
                    Mode::Init | Mode::Namespaces => &request.roots,
                };
                if let Err(detail) = verify::confined(&request.outside, bound) {
                    fail(status.as_mut(), &detail);
                }
            }
            if let Some(status) = status.as_mut() {
                let _ = writeln!(status, "exec");
            }
            let argv = &request.argv;
            let mut command = std::process::Command::new(&argv[0]);
            command.args(&argv[1..]);
            if let Some(env) = env {
                command.env_clear().envs(env);
            }
            let err = command.exec();
            fail(
                status.as_mut(),
                &format!("cannot execute {}: {err}", argv[0].to_string_lossy()),
            )
        },
    )
}

/// The command a runner started ahead of it waits for on `fd`, once the
/// sandbox `plan` built is checked to be still the view it was when built;
/// then in its working directory.
#[cfg(target_os = "linux")]
fn awaited(fd: RawFd, plan: &namespaces::Plan) -> Result<namespaces::Command, String> {
    let view = namespaces::View::of(plan)?;
    let command = namespaces::Command::read(fd)?;
    view.unchanged()?;
    namespaces::enter_workdir(&command.workdir)?;
    Ok(command)
}

/// The namespace runner's first half: enter the namespaces, fork pid 1
/// and — in the launcher — relay signals to it until it ends (never
/// returns); in pid 1, build the sandbox (and, for a runner that awaits
/// its command, wait for it), to supervise the command as its init.
#[cfg(target_os = "linux")]
fn enter_sandbox(request: &Launch) -> Result<Option<namespaces::Command>, String> {
    use nix::unistd::{ForkResult, fork};
    use std::os::fd::OwnedFd;
    let cwd = std::env::current_dir()
        .map_err(|err| format!("cannot read the working directory: {err}"))?;
    if let Some(parent) = request.parent {
        supervise::die_with(parent, nix::libc::SIGKILL)?;
    }
    namespaces::enter(&request.plan)?;
    let set = supervise::watched();
    nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_BLOCK, Some(&set), None)
        .map_err(|err| format!("cannot block signals: {err}"))?;
    let (watch, alive): (OwnedFd, OwnedFd) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|err| format!("pipe: {err}"))?;
    // SAFETY: the launcher is single-threaded: the child may allocate.
    match unsafe { fork() } {
        Err(err) => Err(format!("cannot fork the sandbox's first process: {err}")),
        Ok(ForkResult::Parent { child }) => {
            drop(watch);
            namespaces::relay(child.as_raw(), &set, alive)
        }
        Ok(ForkResult::Child) => {
            drop(alive);
            if supervise::parent_death(nix::libc::SIGKILL).is_err()
                || !namespaces::launcher_alive(&watch)
            {
                std::process::exit(FAILURE_EXIT);
            }
            drop(watch);
            namespaces::build(&request.plan, &cwd)?;
            request
                .await_fd
                .map(|fd| awaited(fd, &request.plan))
                .transpose()
        }
    }
}

/// Set no-new-privs: nothing this process execs gains privileges (no
/// setuid, no file capabilities); a seccomp filter needs it too.
#[cfg(target_os = "linux")]
fn no_new_privileges() -> std::io::Result<()> {
    // SAFETY: prctl with constant arguments affects this process only.
    match unsafe { nix::libc::prctl(nix::libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Drop every capability from this process and what it execs: the
/// bounding set where this process may (it needs `CAP_SETPCAP`), the
/// ambient set, and the effective, permitted and inheritable sets.
///
/// An unprivileged user cannot shrink the bounding set, and need not: it
/// only caps what an exec could gain, and under no-new-privs (which every
/// rung sets) an exec gains nothing — no setuid, no file capabilities. What
/// does matter, that no capability is held, is checked before the exec
/// (`verify::confined`).
#[cfg(target_os = "linux")]
fn drop_capabilities() -> Result<(), String> {
    use nix::libc;
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments; EINVAL past the last
        // capability this kernel knows, EPERM without CAP_SETPCAP.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINVAL) | Some(libc::EPERM) => break,
                _ => {
                    return Err(format!(
                        "cannot drop capability {cap} from the bounding set: {err}"
                    ));
                }
            }
        }
    }
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads one header and two data structs we own.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
        return Err(format!(
            "cannot drop the command's capabilities: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The command's environment from `fd`: `NAME=VALUE` entries, each ended
/// by a NUL. The fd is closed.
fn read_env(fd: RawFd) -> std::io::Result<Vec<(OsString, OsString)>> {
    use std::io::Read;
    use std::os::unix::ffi::OsStringExt;
    // SAFETY: the host handed us this fd for our exclusive use.
    let mut file = unsafe { File::from_raw_fd(fd) };
    let mut bytes = vec![];
    file.read_to_end(&mut bytes)?;
    Ok(parse_env(&bytes)
        .into_iter()
        .map(|(name, value)| (OsString::from_vec(name), OsString::from_vec(value)))
        .collect())
}

/// Split NUL-ended `NAME=VALUE` entries (an entry without `=` is skipped).
fn parse_env(bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let at = entry.iter().position(|b| *b == b'=')?;
            Some((entry[..at].to_vec(), entry[at + 1..].to_vec()))
        })
        .collect()
}

/// New SysV IPC and UTS namespaces for this process and what it execs:
/// the command can neither see nor remove the host's shared memory,
/// semaphores and message queues, nor change its hostname.
#[cfg(target_os = "linux")]
fn unshare_ipc() -> std::io::Result<()> {
    // SAFETY: unshare with namespace flags only affects this process.
    if unsafe { nix::libc::unshare(nix::libc::CLONE_NEWIPC | nix::libc::CLONE_NEWUTS) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

// The launcher's contract as Linux parses it (namespace and socket flags).
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_launcher_parses_its_contract() {
        assert_eq!(
            parse(Mode::Landlock, os(&["--probe"])),
            Ok(Invocation::Probe)
        );
        assert_eq!(
            parse(
                Mode::Landlock,
                os(&[
                    "--status-fd",
                    "3",
                    "--ro",
                    "/",
                    "--ls",
                    "/root",
                    "--rw",
                    "/w",
                    "--",
                    "a",
                    "--ro"
                ])
            ),
            Ok(Invocation::Launch(Box::new(Launch {
                status_fd: Some(3),
                env_fd: None,
                await_fd: None,
                unshare_ipc: false,
                parent: None,
                read_only: vec!["/".into()],
                listable: vec!["/root".into()],
                writable: vec!["/w".into()],
                socket_families: None,
                connect_port: None,
                proxy_socket: None,
                outside: vec![],
                roots: vec![],
                plan: Default::default(),
                argv: os(&["a", "--ro"]),
            })))
        );
        for bad in [
            &["--ro"][..],
            &["--"][..],
            &["--bogus"][..],
            &["--status-fd", "1", "--", "x"][..],
            &["--ro", "/"][..],
            &["--probe", "x"][..],
        ] {
            assert!(parse(Mode::Landlock, os(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_ipc_flag_is_parsed_and_probe_comes_alone_and_first() {
        match parse(
            Mode::Landlock,
            os(&["--unshare-ipc", "--ro", "/", "--", "x"]),
        ) {
            Ok(Invocation::Launch(launch)) => assert!(launch.unshare_ipc),
            other => panic!("{other:?}"),
        }
        assert!(parse(Mode::Landlock, os(&["--unshare-ipc", "--probe"])).is_err());
    }

    #[test]
    fn the_environment_comes_as_nul_ended_entries() {
        assert_eq!(
            parse_env(b"A=1\0B=x=y\0junk\0EMPTY=\0"),
            vec![
                (b"A".to_vec(), b"1".to_vec()),
                (b"B".to_vec(), b"x=y".to_vec()),
                (b"EMPTY".to_vec(), vec![]),
            ]
        );
        match parse(Mode::Landlock, os(&["--env-fd", "4", "--", "x"])) {
            Ok(Invocation::Launch(launch)) => assert_eq!(launch.env_fd, Some(4)),
            other => panic!("{other:?}"),
        }
        assert!(parse(Mode::Landlock, os(&["--env-fd", "2", "--", "x"])).is_err());
    }

    #[test]
    fn the_launcher_is_recognised_by_its_subcommand() {
        assert_eq!(
            invoked(&os(&["cordon", SUBCOMMAND, "--probe"])),
            Some(Mode::Landlock)
        );
        assert_eq!(
            invoked(&os(&["cordon", INIT_SUBCOMMAND, "--probe"])),
            Some(Mode::Init)
        );
        assert_eq!(invoked(&os(&["cordon", "run"])), None);
        assert_eq!(invoked(&os(&["cordon"])), None);
    }
}
