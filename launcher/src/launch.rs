//! One launch, as an ordered list of steps (nsjail's `containProc`,
//! firecracker's `Env::run`): [`launch`] reads top to bottom, one call per
//! step, each step a function of its own (most in a file of their own).
//!
//! Before the fork, in the launcher: the status pipe, the command's
//! environment, the namespace runner's namespaces (and the command a runner
//! started ahead waits for), IPC namespaces, the bridge's port, the
//! file supervisor's channel and the Landlock ruleset (and the command a
//! Landlock launcher started ahead waits for). Then [`supervise::run`]
//! forks; the supervisor starts the bridge and the file supervisor; the
//! child runs [`confine_and_exec`]: the ruleset put in force and the
//! metadata filter, the socket and hardening filters, the limits, the
//! capabilities and no-new-privs, the check that it is confined, then the
//! exec.

use std::convert::Infallible;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;

use crate::{
    COMMAND_NOT_FOUND, COMMAND_NOT_RUNNABLE, LIMIT_AS_VAR, LIMIT_NPROC_VAR, Mode, PARTIAL_NOTICE,
    PREFIX, PROXY_PORT, Request, environment, landlock, supervise,
};
#[cfg(target_os = "linux")]
use crate::{bridge, hardening, metadata, namespaces, notify, sockets, verify};

/// The command's environment: the host's handover, else the launcher's own.
type Environment = Option<Vec<(OsString, OsString)>>;

/// An `RLIMIT_*` resource as this libc types it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = nix::libc::__rlimit_resource_t;
/// An `RLIMIT_*` resource as this libc types it.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type Resource = nix::libc::c_int;

/// A limit to set: the resource, the variable that asked for it, the value.
type Limit = (Resource, &'static str, u64);

/// Run `request` in `mode`: confine, supervise and exec the command, or
/// fail (never returns).
pub(crate) fn launch(mode: Mode, request: Request) -> ! {
    let mut status = status_pipe(mode, request.status_fd);
    let env = command_environment(mode, &mut status, request.env_fd);
    let (request, env) = sandbox_namespaces(mode, &mut status, request, env);
    own_ipc(mode, &mut status, &request);
    let helpers = Helpers::prepare(mode, &mut status, &request);
    let rules = landlock_rules(mode, &mut status, &request);
    let (request, env) = landlock_awaited(mode, &mut status, request, env, rules.as_ref());
    let limits = limits();
    let supervision = supervise::HostLink {
        // Pid 1 of the namespace runner is watched by its launcher.
        parent: request.parent.filter(|_| mode != Mode::Namespaces),
    };
    let (alongside, command_end) = helpers.split();
    supervise::run(
        supervision,
        status,
        move |status, detail| -> Infallible { mode.fail(status, detail) },
        alongside,
        move |status| confine_and_exec(mode, &request, env, rules, &limits, command_end, status),
    )
}

/// The status pipe (`--status-fd`), made close-on-exec: the command never
/// inherits it.
#[allow(
    unsafe_code,
    reason = "the status fd the host handed over, fork and setrlimit; each block says why it is sound"
)]
fn status_pipe(mode: Mode, fd: Option<RawFd>) -> Option<File> {
    let fd = fd?;
    // SAFETY: fcntl on an fd the host handed us for our exclusive use.
    if unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC) } != 0 {
        mode.fail(
            None,
            &format!("--status-fd {fd} is not an open file descriptor"),
        );
    }
    // SAFETY: the host handed us this fd for our exclusive use.
    Some(unsafe { File::from_raw_fd(fd) })
}

/// The command's environment from `--env-fd`, if the host handed one over.
fn command_environment(mode: Mode, status: &mut Option<File>, fd: Option<RawFd>) -> Environment {
    match fd.map(environment::read_env)? {
        Ok(env) => Some(env),
        Err(err) => mode.fail(
            status.as_mut(),
            &format!("cannot read the command's environment: {err}"),
        ),
    }
}

/// The namespace runner's sandbox: enter the namespaces and build it (as
/// the sandbox's pid 1; the launcher stays outside relaying signals). A
/// runner started ahead of its command takes the command now, into a
/// sandbox still as it was built. Other modes pass through.
fn sandbox_namespaces(
    mode: Mode,
    status: &mut Option<File>,
    request: Request,
    env: Environment,
) -> (Request, Environment) {
    if mode != Mode::Namespaces {
        return (request, env);
    }
    #[cfg(target_os = "linux")]
    match enter_sandbox(&request) {
        Ok(Some(command)) => (
            Request {
                argv: command.argv,
                ..request
            },
            Some(command.env),
        ),
        Ok(None) => (request, env),
        Err(detail) => mode.fail(status.as_mut(), &detail),
    }
    // Never a supervisor of an unconfined command: the runner builds its
    // sandbox from Linux namespaces only.
    #[cfg(not(target_os = "linux"))]
    mode.fail(
        status.as_mut(),
        "cordon's namespace runner needs Linux namespaces; this system has none",
    )
}

/// The Landlock launcher's ruleset, made from its grants before the fork
/// (the command's process puts it in force); none in the other modes.
fn landlock_rules(
    mode: Mode,
    status: &mut Option<File>,
    request: &Request,
) -> Option<landlock::Rules> {
    if mode != Mode::Landlock {
        return None;
    }
    let grants = landlock::Grants {
        read_only: &request.read_only,
        listable: &request.listable,
        writable: &request.writable,
        supervised: &request.supervised,
    };
    let made = landlock::Rules::make(
        &grants,
        &request.roots,
        request.connect_port,
        request.log_denials,
    );
    Some(made.unwrap_or_else(|detail| mode.fail(status.as_mut(), &detail)))
}

/// A Landlock launcher started ahead of its command (`--await-fd`): wait
/// for the command, once its ruleset is made, and take it when every
/// rule still names what it was made from; then in its working
/// directory. The launcher dies with the host meanwhile. Else as it was.
fn landlock_awaited(
    mode: Mode,
    status: &mut Option<File>,
    request: Request,
    env: Environment,
    rules: Option<&landlock::Rules>,
) -> (Request, Environment) {
    let (Some(fd), Some(rules)) = (request.await_fd, rules) else {
        return (request, env);
    };
    #[cfg(target_os = "linux")]
    {
        let awaited = || -> Result<crate::command::Command, String> {
            if let Some(parent) = request.parent {
                supervise::die_with(parent, nix::libc::SIGKILL)?;
            }
            let command = crate::command::Command::read(fd)?;
            rules.unchanged()?;
            namespaces::enter_workdir(&command.workdir)?;
            Ok(command)
        };
        match awaited() {
            Ok(command) => (
                Request {
                    argv: command.argv,
                    ..request
                },
                Some(command.env),
            ),
            Err(detail) => mode.fail(status.as_mut(), &detail),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (fd, rules, env);
        mode.fail(
            status.as_mut(),
            "Landlock is a Linux interface; this system has none",
        )
    }
}

/// The command's own SysV IPC and UTS namespaces, where asked
/// (`--unshare-ipc`, the Landlock launcher as root).
fn own_ipc(mode: Mode, status: &mut Option<File>, request: &Request) {
    #[cfg(target_os = "linux")]
    if request.unshare_ipc
        && let Err(err) = crate::ipc::unshare_ipc()
    {
        mode.fail(
            status.as_mut(),
            &format!("cannot give the command its own IPC namespace: {err}"),
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (mode, status, request);
}

/// What the supervisor runs beside the command, prepared before the fork
/// (which must happen while the launcher is single-threaded; their
/// threads start after it).
#[derive(Default)]
struct Helpers {
    /// The init's proxy bridge: its port bound now, before the command
    /// exists (so it never races it), and the host's proxy socket.
    #[cfg(target_os = "linux")]
    bridge: Option<(std::net::TcpListener, std::path::PathBuf)>,
    /// The file supervisor (Landlock, a run that may write): its end of
    /// the channel the command sends its filter's listener over, and the
    /// run's places.
    #[cfg(target_os = "linux")]
    files: Option<(std::os::unix::net::UnixStream, notify::Places)>,
    /// The command's end of that channel.
    #[cfg(target_os = "linux")]
    command_end: Option<std::os::unix::net::UnixStream>,
}

impl Helpers {
    fn prepare(mode: Mode, status: &mut Option<File>, request: &Request) -> Helpers {
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut helpers = Helpers::default();
        #[cfg(target_os = "linux")]
        if let Some(socket) = &request.proxy_socket {
            match bridge::bind(PROXY_PORT) {
                Ok(listener) => helpers.bridge = Some((listener, socket.clone())),
                Err(err) => mode.fail(
                    status.as_mut(),
                    &format!("cannot bridge to the network proxy: {err}"),
                ),
            }
        }
        #[cfg(target_os = "linux")]
        if mode == Mode::Landlock {
            let places = notify::places(
                &request.writable,
                &request.supervised,
                &request.protected,
                &request.roots,
            )
            .unwrap_or_else(|detail| mode.fail(status.as_mut(), &detail));
            if !places.writable.is_empty() {
                match std::os::unix::net::UnixStream::pair() {
                    Ok((ours, theirs)) => {
                        helpers.files = Some((ours, places));
                        helpers.command_end = Some(theirs);
                    }
                    Err(err) => mode.fail(
                        status.as_mut(),
                        &format!("file supervisor: cannot make its channel: {err}"),
                    ),
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (mode, status, request, PROXY_PORT);
        helpers
    }

    /// What the supervisor starts after the fork, and the command's end of
    /// the file supervisor's channel.
    fn split(self) -> (impl FnOnce(), Option<std::os::unix::net::UnixStream>) {
        #[cfg(target_os = "linux")]
        {
            let (bridge, files) = (self.bridge, self.files);
            let alongside = move || {
                if let Some((listener, socket)) = bridge {
                    bridge::start(listener, socket);
                }
                if let Some((socket, places)) = files {
                    notify::start(socket, places);
                }
            };
            (alongside, self.command_end)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = self;
            (|| {}, None)
        }
    }
}

/// The `RLIMIT_*` the host asked for in the launcher's own environment
/// (where no cgroup bounds the run).
fn limits() -> Vec<Limit> {
    [
        (nix::libc::RLIMIT_NPROC, LIMIT_NPROC_VAR),
        (nix::libc::RLIMIT_AS, LIMIT_AS_VAR),
    ]
    .into_iter()
    .filter_map(|(resource, var)| {
        let value = std::env::var(var).ok()?.parse::<u64>().ok()?;
        Some((resource, var, value))
    })
    .collect()
}

/// In the forked child: confine this process step by step, then exec the
/// command (never returns).
fn confine_and_exec(
    mode: Mode,
    request: &Request,
    env: Environment,
    rules: Option<landlock::Rules>,
    limits: &[Limit],
    command_end: Option<std::os::unix::net::UnixStream>,
    mut status: Option<File>,
) -> Infallible {
    let step = |status: &mut Option<File>, done: Result<(), String>| {
        if let Err(detail) = done {
            mode.fail(status.as_mut(), &detail);
        }
    };
    step(&mut status, restrict_files(request, rules, command_end));
    if let (true, Some(status)) = (request.log_denials, status.as_mut()) {
        // This pid names the Landlock domain in the kernel's denial records.
        let confined = crate::protocol::Status::Confined(std::process::id() as i32);
        let _ = writeln!(status, "{confined}");
    }
    step(&mut status, filter_calls(mode, request));
    step(&mut status, apply_limits(limits));
    step(&mut status, drop_privileges(mode));
    step(&mut status, check_confined(mode, request));
    if let Some(status) = status.as_mut() {
        let _ = writeln!(status, "{}", crate::protocol::Status::Exec);
    }
    let argv = &request.argv;
    let mut command = std::process::Command::new(&argv[0]);
    command.args(&argv[1..]);
    if let Some(env) = env {
        command.env_clear().envs(env);
    }
    let err = command.exec();
    cannot_execute(mode, &argv[0], &err)
}

/// The command could not be executed in a sandbox that is fully built
/// (`exec` is already reported): the command's own end, not the
/// launcher's failure — exit 127 when it is not there, 126 when it cannot
/// be run (as `env`, `nice` and `timeout` do), with a line saying why. A
/// missing program is not a missing sandbox.
fn cannot_execute(mode: Mode, program: &std::ffi::OsStr, err: &std::io::Error) -> Infallible {
    eprintln!(
        "{}cannot execute {}: {err}",
        mode.prefix(),
        program.to_string_lossy()
    );
    let not_found = matches!(
        err.raw_os_error(),
        Some(nix::libc::ENOENT) | Some(nix::libc::ENOTDIR)
    );
    std::process::exit(if not_found {
        COMMAND_NOT_FOUND
    } else {
        COMMAND_NOT_RUNNABLE
    })
}

/// Landlock's ruleset put in force and the metadata filter (the Landlock
/// launcher, which made `rules`; the other modes' files are the mount
/// tree's). The file supervisor takes `chmod` and `utimensat` where it has
/// the listener, else they stay refused with the rest; a run with
/// supervised roots gets their writes supervised or does not run
/// (Landlock grants them read only).
fn restrict_files(
    request: &Request,
    rules: Option<landlock::Rules>,
    command_end: Option<std::os::unix::net::UnixStream>,
) -> Result<(), String> {
    let Some(rules) = rules else {
        return Ok(());
    };
    match rules.restrict_self()? {
        landlock::Restricted::Fully => {}
        landlock::Restricted::Partially => eprintln!("{PREFIX}{PARTIAL_NOTICE}"),
    }
    #[cfg(target_os = "linux")]
    {
        let writes = !request.supervised.is_empty();
        let listener = command_end.as_ref().map(|socket| {
            notify::install(writes).and_then(|listener| notify::send(socket, &listener))
        });
        drop(command_end);
        let supervised = match listener {
            Some(Ok(())) => true,
            Some(Err(detail)) if writes => return Err(detail),
            _ if writes => return Err("file supervisor: no channel to it".into()),
            _ => false,
        };
        metadata::refuse_metadata_changes(supervised)?;
    }
    #[cfg(not(target_os = "linux"))]
    drop(command_end);
    Ok(())
}

/// The socket filter (a closed or proxied network) and the hardening
/// filter every rung gets: no setuid file, no device node, no keyring.
fn filter_calls(mode: Mode, request: &Request) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        if let Some(families) = &request.socket_families {
            sockets::allow_only(families)?;
        }
        hardening::install()?;
        // The Landlock launcher that could not unshare IPC: no IPC at all.
        if mode == Mode::Landlock && !request.unshare_ipc {
            crate::ipc::refuse_host_ipc()?;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (mode, request);
    Ok(())
}

/// The `RLIMIT_*` of [`limits`].
#[allow(
    unsafe_code,
    reason = "the status fd the host handed over, fork and setrlimit; each block says why it is sound"
)]
fn apply_limits(limits: &[Limit]) -> Result<(), String> {
    for &(resource, var, value) in limits {
        let limit = nix::libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads one struct we own.
        if unsafe { nix::libc::setrlimit(resource, &limit) } != 0 {
            let err = std::io::Error::last_os_error();
            return Err(format!("cannot apply {var}={value}: {err}"));
        }
    }
    Ok(())
}

/// No capability for the command, even as root (bwrap's `--cap-drop ALL`;
/// inside bwrap the init has none already), and no-new-privs for the
/// namespace runner's (Landlock's restriction and bwrap set it).
fn drop_privileges(mode: Mode) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        if matches!(mode, Mode::Landlock | Mode::Namespaces) {
            crate::privileges::drop_capabilities()?;
        }
        if mode == Mode::Namespaces {
            crate::privileges::no_new_privileges()
                .map_err(|err| format!("cannot set no-new-privs: {err}"))?;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = mode;
    Ok(())
}

/// The runner confined us as asked, or the command never runs. (Landlock
/// checked its roots on the descriptors its rules were made from.)
fn check_confined(mode: Mode, request: &Request) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let bound: &[verify::Root] = match mode {
            Mode::Landlock => &[],
            Mode::Init | Mode::Namespaces | Mode::Identity => &request.roots,
        };
        verify::confined(&request.outside, bound)?;
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (mode, request);
    Ok(())
}

/// The command a runner started ahead of it waits for on `fd`, once the
/// sandbox `plan` built is checked to be still the view it was when built;
/// then in its working directory.
#[cfg(target_os = "linux")]
fn awaited(fd: RawFd, plan: &namespaces::Plan) -> Result<crate::command::Command, String> {
    let view = namespaces::View::of(plan)?;
    let command = crate::command::Command::read(fd)?;
    view.unchanged()?;
    namespaces::enter_workdir(&command.workdir)?;
    Ok(command)
}

/// The namespace runner's first half: enter the namespaces, fork pid 1
/// and — in the launcher — relay signals to it until it ends (never
/// returns); in pid 1, build the sandbox (and, for a runner that awaits
/// its command, wait for it), to supervise the command as its init.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "the status fd the host handed over, fork and setrlimit; each block says why it is sound"
)]
fn enter_sandbox(request: &Request) -> Result<Option<crate::command::Command>, String> {
    use nix::unistd::{ForkResult, fork};
    use std::os::fd::OwnedFd;
    let cwd = std::env::current_dir()
        .map_err(|err| format!("cannot read the working directory: {err}"))?;
    if let Some(parent) = request.parent {
        supervise::die_with(parent, nix::libc::SIGKILL)?;
    }
    namespaces::enter(&request.plan, request.join_net)?;
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
                std::process::exit(crate::FAILURE_EXIT);
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
