//! Code that runs *inside* the sandbox: cordon's own launcher, hidden
//! modes of the `cordon` binary (one binary to ship: the host's `main`
//! dispatches here). The host side of each backend (the `cordon` crate's
//! `sandbox/*.rs`) builds argvs that start it; this crate is what runs
//! then, between the runner's exec and the command's. It is the place
//! for everything that must run confined or right before confinement: the
//! Landlock launcher, cordon's init inside bubblewrap, a network bridge or
//! a namespace runner next.
//!
//! ```text
//! cordon __landlock [--status-fd N] [--env-fd N] [--parent PID] [--unshare-ipc] [--log-denials] [--socket-families LIST] [--writable-root DEV:INO:PATH]... (--ro PATH | --ls PATH | --rw PATH)... -- ARGV...
//! cordon __landlock --probe
//! cordon __init [--status-fd N] [--env-fd N] [--outside NS=INODE,...] [--writable-root DEV:INO:PATH]... [--socket-families LIST] [--proxy-socket PATH] -- ARGV...
//! cordon __init --probe
//! cordon __ns [--status-fd N] [--env-fd N] [--parent PID] [--unshare-net] [--socket-families LIST] [--proxy-socket PATH] [--writable-root DEV:INO:PATH]... PROFILE... -- ARGV...
//! cordon __as --uid UID --gid GID [--groups GID,...] -- RUNNER-ARGV...
//! cordon __ns --await-fd N [--status-fd N] [--parent PID] [--join-net FD] [--unshare-net] [--socket-families LIST] [--proxy-socket PATH] PROFILE... --
//! cordon __landlock --await-fd N [--status-fd N] [--parent PID] [...] RULES... --
//! ```
//!
//! With `--await-fd` the namespace runner or the Landlock launcher is
//! started ahead of its command: it builds the sandbox (the runner) or
//! makes the ruleset (the Landlock launcher), then reads the command —
//! working directory, argv and environment ([`command::Command`]) — from
//! that fd, checks that what it prepared still stands (the runner: the
//! sandbox is still the view it built, [`namespaces::View`]; the Landlock
//! launcher: each rule's path still names what its rule was made from) —
//! anything moved meanwhile fails the run, nothing executed — and runs it.
//!
//! With `--join-net FD` (root only, beside `--unshare-net`) the namespace
//! runner joins the network namespace at that fd instead of making one: a
//! serving host lends its spare runners namespaces it made and found quiet
//! (no socket in any state) since their last run. The runner refuses one
//! that is its own (the host's) or that has any interface but the loopback.
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
//! Nothing here depends on the host (no policy, no tokio, no wasmtime: this
//! crate's manifest names none of them, and the host's layers test keeps it
//! so): what the launcher and the host agree on is the constants below.
//! One launch is the ordered list of steps in [`launch`](launch/index.html).

#[cfg(target_os = "linux")]
mod bridge;
#[cfg(target_os = "linux")]
pub mod command;
mod environment;
#[cfg(target_os = "linux")]
mod hardening;
#[cfg(target_os = "linux")]
mod identity;
#[cfg(target_os = "linux")]
mod ipc;
#[cfg(target_os = "linux")]
pub mod landlock;
#[cfg(not(target_os = "linux"))]
#[path = "landlock_unsupported.rs"]
pub mod landlock;
mod launch;
#[cfg(target_os = "linux")]
mod metadata;
#[cfg(target_os = "linux")]
pub mod namespaces;
#[cfg(target_os = "linux")]
mod notify;
#[cfg(target_os = "linux")]
pub mod paths;
pub mod prefix;
#[cfg(target_os = "linux")]
mod privileges;
pub mod protocol;
#[cfg(target_os = "linux")]
mod seccomp;
// Host-side too (the bwrap wrap names the host's namespaces), on every
// platform; only Linux's launcher checks them.
#[cfg(target_os = "linux")]
pub mod sockets;
pub mod supervise;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub mod verify;

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::RawFd;
use std::path::PathBuf;

pub use supervise::Ended;

pub use protocol::{
    AS_PREFIX, AS_SUBCOMMAND, BUILD, BUILD_SECTION, COMMAND_NOT_FOUND, COMMAND_NOT_RUNNABLE,
    EXECUTABLE, FAILURE_EXIT, INIT_PREFIX, INIT_PROBE, INIT_SUBCOMMAND, LIMIT_AS_VAR,
    LIMIT_NPROC_VAR, NS_PREFIX, NS_SUBCOMMAND, PARTIAL_NOTICE, PREFIX, PROBE_FULL,
    PROBE_IPC_ISOLATED, PROBE_IPC_SHARED, PROBE_METADATA, PROBE_PARTIAL, PROBE_SCOPES,
    PROBE_WRITES_SUPERVISED, PROBE_WRITES_UNSUPERVISED, PROXY_PORT, SUBCOMMAND,
};

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
    /// Takes on a client's identity and executes its runner (before any
    /// sandbox: the runner confines as that user).
    Identity,
}

impl Mode {
    fn prefix(self) -> &'static str {
        match self {
            Mode::Landlock => PREFIX,
            Mode::Init => INIT_PREFIX,
            Mode::Namespaces => NS_PREFIX,
            Mode::Identity => AS_PREFIX,
        }
    }

    /// Write `detail` to the status fd and stderr, then exit 125.
    fn fail(self, status: Option<&mut File>, detail: &str) -> ! {
        if let Some(status) = status {
            let _ = writeln!(status, "{}", protocol::Status::Failed(detail.into()));
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
        AS_SUBCOMMAND => Some(Mode::Identity),
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
    Run(Box<Request>),
}

/// What to confine and run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Request {
    status_fd: Option<RawFd>,
    /// Where the command's environment comes from (else: the launcher's own).
    env_fd: Option<RawFd>,
    /// The namespace runner builds its sandbox (the Landlock launcher its
    /// ruleset) first and then waits here for the command (its working
    /// directory, argv and environment).
    await_fd: Option<RawFd>,
    /// The namespace runner joins the network namespace at this fd
    /// instead of making one (`--join-net`, with `--unshare-net`).
    join_net: Option<RawFd>,
    /// Give the command its own SysV IPC and UTS namespaces.
    unshare_ipc: bool,
    /// The host's pid, to die with (and to check is still there).
    parent: Option<i32>,
    read_only: Vec<PathBuf>,
    /// Directories whose entries may be listed (not read): the ancestors
    /// of a deny-read path, whose other entries are granted one by one.
    listable: Vec<PathBuf>,
    writable: Vec<PathBuf>,
    /// Writable roots whose changes the file supervisor carries out
    /// (`--rw-supervised`): Landlock grants them read and execute only.
    supervised: Vec<PathBuf>,
    /// The protected paths inside them (`--protected`).
    protected: Vec<PathBuf>,
    /// The socket families the command may make (none: no filter).
    #[cfg(target_os = "linux")]
    socket_families: Option<Vec<sockets::Allowed>>,
    /// The one TCP port the command may connect to (Landlock: the host's
    /// allow-list proxy on the loopback).
    connect_port: Option<u16>,
    /// Have the kernel log the command's denials (Landlock's audit
    /// records, after the exec too) and say which process they name.
    log_denials: bool,
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
    if mode == Mode::Identity {
        #[cfg(target_os = "linux")]
        identity::main(args);
        #[cfg(not(target_os = "linux"))]
        mode.fail(None, "a client's identity is taken on Linux only");
    }
    let invocation = match parse(mode, args) {
        Ok(invocation) => invocation,
        Err(message) => mode.fail(None, &format!("usage: {message}")),
    };
    match (invocation, mode) {
        (Invocation::Probe, Mode::Landlock) => landlock::probe(),
        (Invocation::Probe, Mode::Init | Mode::Namespaces | Mode::Identity) => {
            println!("{INIT_PROBE}");
            std::process::exit(0)
        }
        (Invocation::Run(request), _) => launch::launch(mode, *request),
    }
}

fn parse(mode: Mode, args: Vec<OsString>) -> Result<Invocation, String> {
    let mut args = args.into_iter();
    let mut launch = Request::default();
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
            "--status-fd" | "--env-fd" | "--await-fd" | "--join-net"
                if (flag != "--await-fd" || runner || landlock)
                    && (flag != "--join-net" || runner) =>
            {
                let fd = number(&flag, args.next())?;
                if fd <= 2 {
                    return Err(format!("{flag} needs a number above 2, got {fd}"));
                }
                match flag.as_str() {
                    "--status-fd" => launch.status_fd = Some(fd),
                    "--env-fd" => launch.env_fd = Some(fd),
                    "--join-net" => launch.join_net = Some(fd),
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
            "--log-denials" if landlock => launch.log_denials = true,
            "--connect-port" if landlock => {
                let port = number(&flag, args.next())?;
                let port = u16::try_from(port)
                    .map_err(|_| format!("--connect-port {port} is not a port"))?;
                launch.connect_port = Some(port);
            }
            "--ro" | "--rw" | "--ls" | "--rw-supervised" | "--protected" if landlock => {
                let path = args.next().ok_or_else(|| format!("{flag} needs a path"))?;
                let list = match flag.as_str() {
                    "--ro" => &mut launch.read_only,
                    "--ls" => &mut launch.listable,
                    "--rw-supervised" => &mut launch.supervised,
                    "--protected" => &mut launch.protected,
                    _ => &mut launch.writable,
                };
                list.push(PathBuf::from(path));
            }
            "--" => {
                launch.argv = args.collect();
                return complete(launch, runner).map(|launch| Invocation::Run(Box::new(launch)));
            }
            #[cfg(target_os = "linux")]
            profile if runner && launch.plan.take(profile, &mut args)? => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
        first = false;
    }
    Err("missing -- and the command to run".into())
}

/// The request read up to `--` and its command, checked whole.
#[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
fn complete(launch: Request, runner: bool) -> Result<Request, String> {
    match (launch.await_fd, launch.argv.is_empty(), launch.env_fd) {
        (None, true, _) => return Err("no command after --".into()),
        (Some(_), false, _) => {
            return Err("with --await-fd the command comes over that fd, not after --".into());
        }
        (Some(_), _, Some(_)) => {
            return Err("with --await-fd the environment comes over that fd, not --env-fd".into());
        }
        _ => {}
    }
    #[cfg(target_os = "linux")]
    if runner {
        launch.plan.check()?;
        if launch.join_net.is_some() && !launch.plan.unshare_net {
            return Err(
                "--join-net replaces the network namespace --unshare-net makes: \
                        give both"
                    .into(),
            );
        }
    }
    if let Some(stray) = launch
        .protected
        .iter()
        .find(|path| !launch.supervised.iter().any(|root| path.starts_with(root)))
    {
        return Err(format!(
            "--protected {} lies in no --rw-supervised root",
            stray.display()
        ));
    }
    Ok(launch)
}

/// What the launcher in `mode` reads from `args` (everything after its
/// subcommand), as the fuzz targets check it: the command it would run and
/// every path it would let that command write. `Err` when it refuses the
/// arguments.
#[cfg(feature = "fuzzing")]
pub fn read_back(mode: Mode, args: Vec<OsString>) -> Result<(Vec<OsString>, Vec<PathBuf>), String> {
    let Invocation::Run(launch) = parse(mode, args)? else {
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
                    "--rw-supervised",
                    "/s",
                    "--protected",
                    "/s/.git",
                    "--",
                    "a",
                    "--ro"
                ])
            ),
            Ok(Invocation::Run(Box::new(Request {
                status_fd: Some(3),
                env_fd: None,
                await_fd: None,
                join_net: None,
                unshare_ipc: false,
                parent: None,
                read_only: vec!["/".into()],
                listable: vec!["/root".into()],
                writable: vec!["/w".into()],
                supervised: vec!["/s".into()],
                protected: vec!["/s/.git".into()],
                socket_families: None,
                connect_port: None,
                log_denials: false,
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
            &["--rw", "/w", "--protected", "/w/.git", "--", "x"][..],
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
            Ok(Invocation::Run(launch)) => assert!(launch.unshare_ipc),
            other => panic!("{other:?}"),
        }
        assert!(parse(Mode::Landlock, os(&["--unshare-ipc", "--probe"])).is_err());
    }

    #[test]
    fn only_the_namespace_runner_joins_a_lent_network_and_only_in_place_of_its_own() {
        let runner = |args: &[&str]| parse(Mode::Namespaces, os(args));
        match runner(&[
            "--join-net",
            "5",
            "--ro-bind",
            "/",
            "/",
            "--unshare-net",
            "--",
            "x",
        ]) {
            Ok(Invocation::Run(launch)) => assert_eq!(launch.join_net, Some(5)),
            other => panic!("{other:?}"),
        }
        // No network namespace to replace: the command would keep the host's.
        assert!(runner(&["--join-net", "5", "--ro-bind", "/", "/", "--", "x"]).is_err());
        assert!(
            runner(&[
                "--join-net",
                "1",
                "--ro-bind",
                "/",
                "/",
                "--unshare-net",
                "--",
                "x"
            ])
            .is_err()
        );
        assert!(
            parse(
                Mode::Landlock,
                os(&["--join-net", "5", "--ro", "/", "--", "x"])
            )
            .is_err()
        );
        assert!(parse(Mode::Init, os(&["--join-net", "5", "--", "x"])).is_err());
    }

    #[test]
    fn the_environment_comes_as_nul_ended_entries() {
        assert_eq!(
            environment::parse_env(b"A=1\0B=x=y\0junk\0EMPTY=\0"),
            vec![
                (b"A".to_vec(), b"1".to_vec()),
                (b"B".to_vec(), b"x=y".to_vec()),
                (b"EMPTY".to_vec(), vec![]),
            ]
        );
        match parse(Mode::Landlock, os(&["--env-fd", "4", "--", "x"])) {
            Ok(Invocation::Run(launch)) => assert_eq!(launch.env_fd, Some(4)),
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
