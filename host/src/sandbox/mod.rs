//! The host side of `sandbox.confine`: wrapping an argv in a platform
//! sandbox runner, and choosing the runner.
//!
//! A [`Confine`] implementation turns `(argv, policy)` into a [`Wrap`]: the
//! full argv to spawn, the facts of the confinement, and how the runner
//! reports out of band whether it launched the command. The policy bindings
//! hand a `Wrap` to the component only as an opaque resource, and the run
//! pipeline spawns confined modes only from a `Wrap` the host issued, so a
//! component can neither forge nor edit what actually runs.
//!
//! [`Sandbox`] is the platform ladder (SPEC.md §5): on Linux cordon's own
//! namespace runner, then bubblewrap, then cordon's Landlock launcher,
//! then fail closed; on macOS
//! Seatbelt; elsewhere fail closed without probing. Each rung is probed
//! once, lazily, within a timeout, and the verdict — including "nothing
//! usable" — is kept for the ladder's life. An operator may pin a backend
//! or give a runner command instead ([`SandboxConfig`]).
//!
//! One file per backend, each owning its probe, its wrap and its message
//! dialect (`namespaces.rs`, `bwrap.rs`, `landlock.rs`, `seatbelt.rs`,
//! `runner.rs`); the
//! ladder (`ladder.rs`) only orders them, with exhaustive matches, so a new
//! backend does not compile until it is wired in. Code that runs *inside*
//! the sandbox (cordon's launcher) is a crate of its own, `cordon-launcher`,
//! re-exported here as [`launcher`].

#![warn(clippy::wildcard_enum_match_arm)]

pub mod bwrap;
pub mod git;
pub mod grant;
mod ladder;
pub mod landlock;
/// The code that runs inside the sandbox: the `cordon-launcher` crate.
pub use cordon_launcher as launcher;
pub mod namespaces;
mod opened;
mod probe;
pub mod runner;
pub mod seatbelt;
pub mod verdicts;

pub use ladder::{BackendChoice, DEFAULT_PROBE_TIMEOUT, Probe, Rung, Sandbox, SandboxConfig};
pub use runner::RunnerCommand;

use std::ffi::OsString;
use std::sync::Arc;

use crate::model::{
    Backend, Enforcement, GrantFacts, RunnerStatus, SandboxMode, SandboxPolicy, WrapFacts,
};
use crate::process::{self, Finished};

pub use launcher::Ended;
use launcher::protocol::Report;

/// Why a policy cannot be confined here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// The mode that was asked for.
    pub mode: SandboxMode,
    /// Why, when there is more to say than "no backend".
    pub detail: Option<String>,
}

/// How a runner reports, out of band, whether it launched the command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StatusReport {
    /// No report; the policy classifies by text alone.
    #[default]
    None,
    /// bubblewrap's `--json-status-fd`: an `"exit-code"` record is written
    /// only when the command ran.
    BwrapJson,
    /// cordon's Landlock launcher: `exec` just before exec, `failed: …` on
    /// any failure of its own.
    Launcher,
}

impl StatusReport {
    /// Whether the runner needs a status pipe at fd 3.
    pub fn needs_pipe(self) -> bool {
        self != StatusReport::None
    }

    /// Interpret what the runner wrote. `host_killed` is true when the host
    /// ended the run (timeout, abort, kill), so a missing record proves
    /// nothing; `signal` is the signal the runner itself died of. A bwrap
    /// that died of a signal the host did not send, before it reported the
    /// command's exit, failed as a runner: the command's own death is
    /// reported by bwrap as an exit code, never as bwrap's signal death.
    pub fn interpret(
        self,
        report: Option<&[u8]>,
        host_killed: bool,
        signal: Option<i32>,
        exit_code: Option<i32>,
        stderr_tail: &str,
    ) -> RunnerStatus {
        let Some(report) = report else {
            return RunnerStatus::Unknown;
        };
        let text = String::from_utf8_lossy(report);
        match self {
            StatusReport::None => RunnerStatus::Unknown,
            StatusReport::BwrapJson if text.contains("\"exit-code\"") => RunnerStatus::Launched,
            StatusReport::BwrapJson if host_killed => RunnerStatus::Unknown,
            StatusReport::BwrapJson if let Some(signal) = signal => RunnerStatus::Failed(format!(
                "bwrap was killed by signal {signal} before it reported the command's exit"
            )),
            StatusReport::BwrapJson => RunnerStatus::Failed(
                stderr_tail
                    .lines()
                    .find(|line| line.contains("bwrap: "))
                    .map(|line| line.trim().to_owned())
                    .unwrap_or_else(|| {
                        format!(
                            "bwrap exited ({}) before starting the command",
                            exit_code.map_or("by a signal".into(), |c| format!("code {c}"))
                        )
                    }),
            ),
            StatusReport::Launcher => match Report::read(&text) {
                Report {
                    failed: Some(detail),
                    ..
                } => RunnerStatus::Failed(detail),
                // The supervisor reports the command's end before it ends
                // itself; killed before that, by a signal the host did not
                // send, it failed as a runner (the command dies with it).
                Report { ended: None, .. } if !host_killed && let Some(signal) = signal => {
                    RunnerStatus::Failed(format!(
                        "cordon's launcher was killed by signal {signal} before it reported \
                         the command's end"
                    ))
                }
                Report { exec: true, .. } => RunnerStatus::Launched,
                Report { .. } => RunnerStatus::Unknown,
            },
        }
    }
}

impl StatusReport {
    /// Whether a run's records prove that the runner never started the
    /// command, so that trying it again (on another rung) cannot run it
    /// twice: the runner exited by itself (no signal, the host did not end
    /// it), bwrap wrote no `"exit-code"` record (it writes one only once
    /// it has exec'd the sandbox's first process) and cordon's init, when
    /// there is one, wrote nothing. Anything else — a runner that died of
    /// a signal, a report this cannot read — proves nothing, and the run's
    /// failure stands.
    pub fn never_started(self, finished: &Finished, supervision: Supervision) -> bool {
        if finished.timed_out || finished.aborted || finished.signal.is_some() {
            return false;
        }
        let init_silent = match supervision {
            // An init pipe that did not close in time proves nothing.
            Supervision::BwrapInit => finished
                .init_report
                .as_deref()
                .is_some_and(<[u8]>::is_empty),
            Supervision::None => true,
            Supervision::Launcher => false,
        };
        match self {
            StatusReport::BwrapJson => {
                let Some(report) = finished.status_report.as_deref() else {
                    return false;
                };
                init_silent && !String::from_utf8_lossy(report).contains("\"exit-code\"")
            }
            // cordon's launcher writes `exec` just before the command's
            // exec and `exit N` / `signal N` once it ended; a report of its
            // own failure with neither, at its failure exit, is from before
            // the command.
            StatusReport::Launcher => {
                let Some(report) = finished.status_report.as_deref() else {
                    return false;
                };
                let report = Report::read(&String::from_utf8_lossy(report));
                finished.exit_code == Some(launcher::FAILURE_EXIT)
                    && report.failed.is_some()
                    && !report.exec
                    && report.ended.is_none()
            }
            StatusReport::None => false,
        }
    }
}

/// Whether cordon's supervisor ([`launcher::supervise`]) runs the
/// command, and where it reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Supervision {
    /// None (an operator's runner command, Seatbelt, bwrap without the
    /// init): the spawned group is signalled directly and the command's
    /// end is the runner's exit status.
    #[default]
    None,
    /// The runner is cordon's launcher, which supervises (Landlock): it
    /// reports on the status pipe and ends as the command ended.
    Launcher,
    /// cordon's init runs inside bwrap: it reports on [`process::INIT_FD`],
    /// and its process group is that of bwrap's `child-pid`.
    BwrapInit,
}

impl Supervision {
    /// Who gets the termination signals.
    pub fn process(self) -> process::Supervisor {
        match self {
            Supervision::None => process::Supervisor::None,
            Supervision::Launcher => process::Supervisor::Leader,
            Supervision::BwrapInit => process::Supervisor::Reported(bwrap::child_pid),
        }
    }

    /// Whether the runner needs the init pipe.
    pub fn init_pipe(self) -> bool {
        self == Supervision::BwrapInit
    }

    /// The supervisor's report, where it wrote one.
    fn report(self, finished: &Finished) -> Option<String> {
        let bytes = match self {
            Supervision::None => None,
            Supervision::Launcher => finished.status_report.as_deref(),
            Supervision::BwrapInit => finished.init_report.as_deref(),
        }?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    }

    /// How the command ended — `(exit code, signal)` — from the
    /// supervisor's report where it wrote one (a signal death is a signal,
    /// not bwrap's 128+N); else as the host saw the runner end.
    pub fn command_end(self, finished: &Finished) -> (Option<i32>, Option<i32>) {
        match self.report(finished).as_deref().and_then(Ended::parse) {
            Some(Ended::Exited(code)) => (Some(code), None),
            Some(Ended::Signaled(signal)) => (None, Some(signal)),
            None => (finished.exit_code, finished.signal),
        }
    }

    /// A failure the init inside bwrap reported before the command ran
    /// (the launcher's own are read by [`StatusReport::Launcher`]).
    pub fn failure(self, finished: &Finished) -> Option<String> {
        if self != Supervision::BwrapInit {
            return None;
        }
        Report::read(&self.report(finished)?).failed
    }

    /// The process whose Landlock domain logs the run's denials, as the
    /// supervisor reported it (`confined PID`: `--log-denials`).
    pub fn confined(self, finished: &Finished) -> Option<i32> {
        Report::read(&self.report(finished)?).confined
    }
}

/// The head of every argv that starts cordon's launcher as the run's
/// supervisor: `launcher SUBCOMMAND --status-fd 3 --env-fd 4 --parent HOST`
/// (it reports out of band, takes the command's environment over its own
/// fd, and dies with this host).
pub(super) fn supervised_launch(launcher: &std::path::Path, subcommand: &str) -> Vec<String> {
    vec![
        launcher.to_string_lossy().into_owned(),
        subcommand.into(),
        "--status-fd".into(),
        process::STATUS_FD.to_string(),
        "--env-fd".into(),
        process::HANDOVER_FD.to_string(),
        "--parent".into(),
        std::process::id().to_string(),
    ]
}

/// A wrap of cordon's namespace runner or Landlock launcher (`argv`, as
/// [`namespaces::Namespaces::wrap`] and [`landlock::Landlock::wrap`] make
/// it), split for a launcher started ahead of its command: the launcher's
/// own argv — `--env-fd` become `--await-fd` on the same fd, nothing after
/// `--` — and the command. None when `argv` is not such a wrap.
///
/// Two wraps with the same launcher argv confine alike: a launcher started
/// from one may be handed the command of the other (it checks, when the
/// command comes, that what it prepared still stands).
pub fn awaiting(argv: &[String]) -> Option<(Vec<String>, &[String])> {
    let subcommand = argv.get(1).map(String::as_str);
    if subcommand != Some(launcher::NS_SUBCOMMAND) && subcommand != Some(launcher::SUBCOMMAND) {
        return None;
    }
    let end = argv.iter().position(|arg| arg == "--")?;
    let (runner, command) = (&argv[..end], &argv[end + 1..]);
    let fd = process::HANDOVER_FD.to_string();
    let at = runner.iter().position(|arg| arg == "--env-fd")?;
    if runner.get(at + 1) != Some(&fd) || command.is_empty() {
        return None;
    }
    let mut waiting = runner.to_vec();
    waiting[at] = "--await-fd".into();
    waiting.push("--".into());
    Some((waiting, command))
}

/// The flag that has cordon's namespace runner join a network namespace
/// the host lent instead of making one.
const JOIN_NET: &str = "--join-net";

/// A namespace runner's argv started ahead of its command ([`awaiting`])
/// that makes a network namespace of its own, made to join instead the
/// one at `fd` in it (a session's spare, root only: the namespace is one
/// the session made and found quiet); none when `argv` is no namespace
/// runner's, or makes no network namespace.
pub fn joining_network(argv: &[String], fd: std::os::fd::RawFd) -> Option<Vec<String>> {
    let end = argv.iter().position(|arg| arg == "--")?;
    let makes_one = argv.get(1).map(String::as_str) == Some(launcher::NS_SUBCOMMAND)
        && argv[..end].iter().any(|arg| arg == "--unshare-net");
    if !makes_one {
        return None;
    }
    let mut joining = argv.to_vec();
    joining.splice(2..2, [JOIN_NET.to_owned(), fd.to_string()]);
    Some(joining)
}

/// `argv` without what [`joining_network`] added: two runners that differ
/// only there confine alike — each a closed network of the run's own,
/// made fresh or lent and found quiet.
pub fn without_lent_network(argv: &[String]) -> std::borrow::Cow<'_, [String]> {
    match argv.get(2).map(String::as_str) == Some(JOIN_NET) && argv.len() >= 4 {
        true => std::borrow::Cow::Owned([&argv[..2], &argv[4..]].concat()),
        false => std::borrow::Cow::Borrowed(argv),
    }
}

/// `--writable-root DEV:INO:PATH` for each writable root of `layout`, as
/// the host checks it now: the runner refuses to run the command unless
/// what it bound (or granted) there is that very directory.
///
/// Each root's identity is the one the layout took from the directory it
/// opened (no second walk of a root 400 directories deep); a root the
/// layout could not open is asked again by its path.
pub(super) fn writable_roots(layout: &grant::Layout) -> Vec<String> {
    let identities = layout.writable_identities.iter().copied();
    layout
        .writable
        .iter()
        .zip(identities.chain(std::iter::repeat(None)))
        .flat_map(|(root, identity)| {
            let arg = match identity {
                Some((dev, ino)) => launcher::verify::root_arg_of(root, dev, ino),
                None => launcher::verify::root_arg(root),
            };
            ["--writable-root".to_owned(), arg]
        })
        .collect()
}

/// The environment a runner itself is spawned with when it takes the
/// command's environment over its own channel: a fixed `PATH`, nothing a
/// caller or a component chose (an `LD_PRELOAD` of theirs must reach only
/// processes inside the sandbox).
pub const RUNNER_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// How the command's environment reaches the command through its runner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EnvHandover {
    /// The runner is spawned with the command's environment (an operator's
    /// runner command; `sandbox-exec`, which the system strips of loader
    /// variables).
    #[default]
    Inherit,
    /// bubblewrap reads `--clearenv` and a `--setenv NAME VALUE` per entry
    /// from the handover fd (`--args`): no value shows in the host's
    /// process list, and bwrap itself runs with [`RUNNER_PATH`] only.
    BwrapArgs,
    /// cordon's launcher reads `NAME=VALUE` entries, NUL-separated, from
    /// the handover fd (`--env-fd`) and execs the command with exactly them.
    LauncherFd,
    /// bubblewrap with cordon's init inside: bwrap's `--args` set only
    /// [`RUNNER_PATH`] in the sandbox, and the init reads the command's
    /// entries from [`process::INIT_ENV_FD`] as the launcher does, so a
    /// caller's `LD_PRELOAD` loads into neither bwrap nor the init.
    BwrapInit,
}

/// What [`EnvHandover::split`] gives the spawn: the runner's own
/// environment, the handover fd's bytes and the init's environment bytes.
pub type EnvSplit = (Vec<(OsString, OsString)>, Option<Vec<u8>>, Option<Vec<u8>>);

impl EnvHandover {
    /// Whether cordon's launcher (or init) receives the runner variables
    /// of [`EnvHandover::split`] — the `RLIMIT_*` fallback's limits.
    pub fn reaches_launcher(self) -> bool {
        matches!(self, EnvHandover::LauncherFd | EnvHandover::BwrapInit)
    }

    /// The runner's own environment, the bytes for the handover fd and
    /// those for the init's environment fd. `launcher_vars` are for
    /// cordon's launcher or init only (never the command); they are dropped
    /// where neither runs ([`EnvHandover::reaches_launcher`]).
    pub fn split(
        self,
        env: Vec<(OsString, OsString)>,
        launcher_vars: &[(OsString, OsString)],
    ) -> EnvSplit {
        use std::os::unix::ffi::OsStrExt;
        let fixed = || vec![(OsString::from("PATH"), OsString::from(RUNNER_PATH))];
        let with_vars = || {
            let mut vars = fixed();
            vars.extend(launcher_vars.iter().cloned());
            vars
        };
        let bwrap_args = |env: &[(OsString, OsString)]| {
            let mut bytes = b"--clearenv\0".to_vec();
            for (name, value) in env {
                bytes.extend_from_slice(b"--setenv\0");
                bytes.extend_from_slice(name.as_bytes());
                bytes.push(0);
                bytes.extend_from_slice(value.as_bytes());
                bytes.push(0);
            }
            bytes
        };
        let entries = |env: &[(OsString, OsString)]| {
            let mut bytes = vec![];
            for (name, value) in env {
                bytes.extend_from_slice(name.as_bytes());
                bytes.push(b'=');
                bytes.extend_from_slice(value.as_bytes());
                bytes.push(0);
            }
            bytes
        };
        match self {
            EnvHandover::Inherit => (env, None, None),
            EnvHandover::BwrapArgs => (fixed(), Some(bwrap_args(&env)), None),
            EnvHandover::LauncherFd => (with_vars(), Some(entries(&env)), None),
            EnvHandover::BwrapInit => {
                (fixed(), Some(bwrap_args(&with_vars())), Some(entries(&env)))
            }
        }
    }
}

/// An argv wrapped in a sandbox runner, with the facts of its confinement.
/// Only the host creates these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrap {
    argv: Vec<String>,
    policy: SandboxPolicy,
    facts: WrapFacts,
    report: StatusReport,
    handover: EnvHandover,
    supervision: Supervision,
    grant: Box<GrantFacts>,
    placeholders: Vec<std::path::PathBuf>,
    proxy: Option<crate::proxy::ProxyAt>,
}

impl Wrap {
    /// A confinement of `policy` that spawns `argv` (runner first).
    pub fn new(argv: Vec<String>, policy: SandboxPolicy, facts: WrapFacts) -> Self {
        Wrap {
            argv,
            policy,
            facts,
            report: StatusReport::None,
            handover: EnvHandover::Inherit,
            supervision: Supervision::None,
            grant: Box::default(),
            placeholders: vec![],
            proxy: None,
        }
    }

    /// The same wrap, enforcing the grant `grant` says; where the backend
    /// enforces some of it only in part (`grant.partial`), the wrap's
    /// enforcement is partial.
    pub fn granting(mut self, grant: GrantFacts) -> Self {
        if !grant.partial.is_empty() {
            self.facts.enforcement = Enforcement::Partial;
        }
        self.grant = Box::new(grant);
        self
    }

    /// The grant this wrap enforces.
    pub fn grant(&self) -> &GrantFacts {
        &self.grant
    }

    /// The same wrap, needing a placeholder ([`grant::hold`]) at each of
    /// `paths` while it runs.
    pub fn holding(mut self, paths: Vec<std::path::PathBuf>) -> Self {
        self.placeholders = paths;
        self
    }

    /// The placeholders the run must hold.
    pub fn placeholders(&self) -> &[std::path::PathBuf] {
        &self.placeholders
    }

    /// The same wrap, reaching the network through the host's allow-list
    /// proxy, which must listen `at` while it runs.
    pub fn proxied(mut self, at: crate::proxy::ProxyAt) -> Self {
        self.proxy = Some(at);
        self
    }

    /// Where the run's allow-list proxy listens, if it has one.
    pub fn proxy(&self) -> Option<&crate::proxy::ProxyAt> {
        self.proxy.as_ref()
    }

    /// The same wrap, with cordon's supervisor running the command.
    pub fn supervised(mut self, supervision: Supervision) -> Self {
        self.supervision = supervision;
        self
    }

    /// Whether and where cordon's supervisor runs the command.
    pub fn supervision(&self) -> Supervision {
        self.supervision
    }

    /// The same wrap, with a runner that reports out of band.
    pub fn reporting(mut self, report: StatusReport) -> Self {
        self.report = report;
        self
    }

    /// The same wrap, with a runner that takes the command's environment
    /// over its own channel.
    pub fn handing_over(mut self, handover: EnvHandover) -> Self {
        self.handover = handover;
        self
    }

    /// How the command's environment reaches the command.
    pub fn handover(&self) -> EnvHandover {
        self.handover
    }

    /// The full argv to spawn, runner first.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The policy this wrap enforces.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// Backend, enforcement and message dialect.
    pub fn facts(&self) -> &WrapFacts {
        &self.facts
    }

    /// How the runner reports whether it launched the command.
    pub fn report(&self) -> StatusReport {
        self.report
    }
}

/// Something that can confine an argv: the platform ladder in production,
/// a scripted fake in component tests.
pub trait Confine: Send + Sync {
    /// Wrap `argv` for `policy`, or say why that is impossible here.
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable>;

    /// Which backend confines runs and why (the ladder's verdict); none for
    /// a confiner that has no ladder.
    fn probe(&self) -> Option<Probe> {
        None
    }

    /// Do now whatever the first [`Confine::confine`] would otherwise do
    /// first (the ladder: its probes), so that it happens on the host's
    /// time: the run pipeline calls it before every confined `plan` (a
    /// no-op once done), [`crate::HostBuilder::probe_early`] from a
    /// background thread. The default does nothing.
    fn prepare(&self) {}

    /// Make sure the chosen runner works before a run relies on it: a
    /// ladder that chose a rung without probing it probes it now (and
    /// moves down the ladder if it fails). Background tasks call this
    /// before they plan (a task is not re-planned once it started), and
    /// [`crate::HostBuilder::probe_early`] from a background thread. The
    /// default does nothing.
    fn verify(&self) {}

    /// A run on `backend` ended without the runner starting its command
    /// ([`StatusReport::never_started`]). The confiner checks its runner
    /// (the ladder: the rung's probe, unless a probe or a run already
    /// proved it) and returns true when the run should be planned again
    /// because it now confines with another rung (or with none, and the
    /// plan fails closed). The default: false, the run's failure stands.
    fn refute(&self, backend: Backend) -> bool {
        let _ = backend;
        false
    }

    /// A run on `backend` started its command: the runner works here.
    fn confirm(&self, backend: Backend) {
        let _ = backend;
    }

    /// [`Confine::confine`] for a run whose processes are `identity` (a
    /// root server's client): a path to hide that this user cannot reach
    /// at all is hidden by the kernel already, and its runner — confining
    /// as that user — could not reach it to cover it. The default
    /// confines as for the host's own user.
    fn confine_as(
        &self,
        argv: &[String],
        policy: &SandboxPolicy,
        identity: &crate::process::identity::Identity,
    ) -> Result<Wrap, Unavailable> {
        let _ = identity;
        self.confine(argv, policy)
    }
}

/// A confiner whose every run is another user's ([`Confine::confine_as`]):
/// what a run as a root server's client plans with.
pub(crate) struct ConfineAs {
    /// The host's confiner.
    pub inner: Arc<dyn Confine>,
    /// Whom the runs are.
    pub identity: Arc<crate::process::identity::Identity>,
}

impl Confine for ConfineAs {
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable> {
        self.inner.confine_as(argv, policy, &self.identity)
    }
    fn probe(&self) -> Option<Probe> {
        self.inner.probe()
    }
    fn prepare(&self) {
        self.inner.prepare();
    }
    fn verify(&self) {
        self.inner.verify();
    }
    fn refute(&self, backend: Backend) -> bool {
        self.inner.refute(backend)
    }
    fn confirm(&self, backend: Backend) {
        self.inner.confirm(backend);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(status: &[u8], init: Option<&[u8]>) -> Finished {
        Finished {
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            aborted: false,
            status_report: Some(status.to_vec()),
            init_report: init.map(<[u8]>::to_vec),
            exceeded: vec![],
        }
    }

    /// A wrap that `wrap` makes splits into the launcher `subcommand`
    /// waiting and its command; the same for any other command.
    fn splits(subcommand: &str, wrap: impl Fn(&[String]) -> Wrap) {
        let full = wrap(&["sh".into(), "-c".into(), "--".into()]);
        let (waiting, command) = awaiting(full.argv()).expect("a wrap of a launcher");
        assert_eq!(command, ["sh", "-c", "--"]);
        assert_eq!(waiting.last().map(String::as_str), Some("--"));
        let head = [
            "/usr/bin/cordon",
            subcommand,
            "--status-fd",
            "3",
            "--await-fd",
            "4",
        ];
        assert_eq!(waiting[..6], head);
        assert!(!waiting.iter().any(|arg| arg == "--env-fd"));
        // The same grant for another command: the same waiting launcher.
        let other = wrap(&["true".into()]);
        assert_eq!(awaiting(other.argv()).unwrap().0, waiting);
        // Nothing to hand over.
        let mut bare = full.argv().to_vec();
        bare.truncate(bare.iter().position(|a| a == "--").unwrap() + 1);
        assert!(awaiting(&bare).is_none());
    }

    #[test]
    fn a_wrap_splits_into_a_waiting_launcher_and_its_command() {
        let policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/home/me/ws");
        let layout = grant::lay_out(&policy, &[], &[]);
        let runner = namespaces::Namespaces::at("/usr/bin/cordon");
        splits("__ns", |argv| runner.wrap(argv, &policy, &layout));
        let landlock = landlock::Landlock::at("/usr/bin/cordon", Enforcement::Full);
        splits("__landlock", |argv| landlock.wrap(argv, &policy, &layout));
        // Not a launcher's wrap: bwrap, cordon's init inside it.
        assert!(awaiting(&["bwrap".into(), "--".into(), "true".into()]).is_none());
        let init = [
            "/usr/bin/cordon",
            "__init",
            "--status-fd",
            "3",
            "--env-fd",
            "4",
            "--",
            "true",
        ];
        assert!(awaiting(&init.map(String::from)).is_none());
    }

    #[test]
    fn only_a_clean_exit_without_any_start_record_proves_the_command_never_ran() {
        let bwrap = StatusReport::BwrapJson;
        let child = b"{ \"child-pid\": 12 }\n";
        let ran = b"{ \"child-pid\": 12 }\n{ \"exit-code\": 1 }\n";
        assert!(bwrap.never_started(&finished(child, Some(b"")), Supervision::BwrapInit));
        assert!(bwrap.never_started(&finished(b"", None), Supervision::None));
        assert!(!bwrap.never_started(&finished(ran, Some(b"")), Supervision::BwrapInit));
        assert!(
            !bwrap.never_started(
                &finished(child, Some(b"failed: x\n")),
                Supervision::BwrapInit
            ),
            "the init started"
        );
        assert!(
            !bwrap.never_started(&finished(child, None), Supervision::BwrapInit),
            "an init pipe that did not close proves nothing"
        );
        let mut killed = finished(child, Some(b""));
        killed.signal = Some(9);
        assert!(!bwrap.never_started(&killed, Supervision::BwrapInit));
        let mut timed_out = finished(child, Some(b""));
        timed_out.timed_out = true;
        assert!(!bwrap.never_started(&timed_out, Supervision::BwrapInit));
        let mut unread = finished(child, Some(b""));
        unread.status_report = None;
        assert!(!bwrap.never_started(&unread, Supervision::BwrapInit));
        let launcher = |report: &[u8], code: i32| {
            let mut run = finished(report, None);
            run.exit_code = Some(code);
            StatusReport::Launcher.never_started(&run, Supervision::Launcher)
        };
        assert!(launcher(
            b"failed: cannot create the sandbox's namespaces\n",
            125
        ));
        assert!(!launcher(b"", 125), "no report of its own failure");
        assert!(
            !launcher(b"failed: x\n", 1),
            "not the launcher's failure exit"
        );
        assert!(
            !launcher(b"exec\nfailed: cannot execute nope\n", 125),
            "after exec: the command's own"
        );
        assert!(!launcher(b"failed: x\nexit 125\n", 125));
        assert!(!StatusReport::None.never_started(&finished(b"", None), Supervision::None));
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn a_runner_that_takes_the_environment_over_runs_with_a_fixed_path_only() {
        let command = env(&[("LD_PRELOAD", "/evil.so"), ("A", "b c")]);
        let (runner, bytes, init) = EnvHandover::BwrapArgs.split(command.clone(), &[]);
        assert_eq!(runner, env(&[("PATH", RUNNER_PATH)]));
        assert_eq!(
            bytes.unwrap(),
            b"--clearenv\0--setenv\0LD_PRELOAD\0/evil.so\0--setenv\0A\0b c\0"
        );
        assert_eq!(init, None);
        let (runner, bytes, init) = EnvHandover::LauncherFd.split(command.clone(), &[]);
        assert_eq!(runner, env(&[("PATH", RUNNER_PATH)]));
        assert_eq!(bytes.unwrap(), b"LD_PRELOAD=/evil.so\0A=b c\0");
        assert_eq!(init, None);
        let (runner, bytes, init) = EnvHandover::BwrapInit.split(command.clone(), &[]);
        assert_eq!(runner, env(&[("PATH", RUNNER_PATH)]));
        let path = format!("--clearenv\0--setenv\0PATH\0{RUNNER_PATH}\0");
        assert_eq!(
            bytes.unwrap(),
            path.as_bytes(),
            "bwrap and the init get PATH only"
        );
        assert_eq!(init.unwrap(), b"LD_PRELOAD=/evil.so\0A=b c\0");
        assert_eq!(
            EnvHandover::Inherit.split(command.clone(), &[]),
            (command.clone(), None, None)
        );
        let vars = env(&[("CORDON_LIMIT_AS", "1024")]);
        let (runner, _, _) = EnvHandover::LauncherFd.split(command.clone(), &vars);
        assert_eq!(
            runner,
            env(&[("PATH", RUNNER_PATH), ("CORDON_LIMIT_AS", "1024")])
        );
        let (runner, bytes, _) = EnvHandover::BwrapInit.split(command.clone(), &vars);
        assert_eq!(
            runner,
            env(&[("PATH", RUNNER_PATH)]),
            "bwrap itself gets no limits"
        );
        assert!(
            bytes
                .unwrap()
                .ends_with(&[&b"--setenv\0CORDON_LIMIT_AS\0"[..], b"1024\0"].concat()),
            "the init inside does"
        );
        let (runner, bytes, _) = EnvHandover::BwrapArgs.split(command.clone(), &vars);
        assert_eq!(runner, env(&[("PATH", RUNNER_PATH)]));
        assert!(!String::from_utf8_lossy(&bytes.unwrap()).contains("CORDON_LIMIT"));
    }

    #[test]
    fn bwrap_reports_launched_only_with_an_exit_code_record() {
        let ran = br#"{ "child-pid": 7 }
{ "exit-code": 1 }"#;
        assert_eq!(
            StatusReport::BwrapJson.interpret(Some(ran), false, None, Some(1), "bwrap: spoofed"),
            RunnerStatus::Launched
        );
        let failed = br#"{ "child-pid": 7 }"#;
        assert_eq!(
            StatusReport::BwrapJson.interpret(
                Some(failed),
                false,
                None,
                Some(1),
                "bwrap: Can't find source path /x: No such file or directory\n"
            ),
            RunnerStatus::Failed(
                "bwrap: Can't find source path /x: No such file or directory".into()
            )
        );
        assert_eq!(
            StatusReport::BwrapJson.interpret(Some(failed), true, Some(15), None, ""),
            RunnerStatus::Unknown,
            "a run the host killed proves nothing"
        );
        assert_eq!(
            StatusReport::BwrapJson.interpret(Some(failed), false, Some(9), None, ""),
            RunnerStatus::Failed(
                "bwrap was killed by signal 9 before it reported the command's exit".into()
            ),
            "a bwrap killed from outside is a runner failure"
        );
        assert_eq!(
            StatusReport::BwrapJson.interpret(Some(ran), false, Some(9), None, ""),
            RunnerStatus::Launched,
            "once the command's exit is reported, the runner did its job"
        );
        assert_eq!(
            StatusReport::BwrapJson.interpret(None, false, None, Some(1), ""),
            RunnerStatus::Unknown
        );
    }

    #[test]
    fn the_launcher_reports_exec_or_its_failure() {
        assert_eq!(
            StatusReport::Launcher.interpret(Some(b"exec\n"), false, None, Some(1), ""),
            RunnerStatus::Launched
        );
        assert_eq!(
            StatusReport::Launcher.interpret(
                Some(b"exec\nfailed: cannot execute nope: No such file or directory\n"),
                false,
                None,
                Some(125),
                ""
            ),
            RunnerStatus::Failed("cannot execute nope: No such file or directory".into())
        );
        assert_eq!(
            StatusReport::Launcher.interpret(Some(b""), false, None, Some(125), ""),
            RunnerStatus::Unknown
        );
        assert_eq!(
            StatusReport::Launcher.interpret(Some(b"exec\n"), false, Some(9), None, ""),
            RunnerStatus::Failed(
                "cordon's launcher was killed by signal 9 before it reported the command's end"
                    .into()
            ),
            "a supervisor killed from outside is a runner failure"
        );
        assert_eq!(
            StatusReport::Launcher.interpret(Some(b"exec\nsignal 9\n"), false, Some(9), None, ""),
            RunnerStatus::Launched,
            "a command killed by a signal, reported, is the command's result"
        );
        assert_eq!(
            StatusReport::Launcher.interpret(Some(b"exec\n"), true, Some(9), None, ""),
            RunnerStatus::Launched,
            "the host's own kill proves nothing against the runner"
        );
    }
}
