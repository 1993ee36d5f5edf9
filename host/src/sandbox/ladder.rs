//! The runner ladder: which backend confines runs on this host, decided
//! once, lazily, by bounded probes, and kept for the ladder's life.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::model::{Backend, Enforcement, SandboxPolicy};

use super::{Confine, RunnerCommand, Unavailable, Wrap, bwrap, landlock, seatbelt};

/// Default bound on each probe (SPEC.md §5).
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_millis(5_000);

/// Which backend to use: the platform ladder, or one pinned rung.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// The platform ladder: bwrap, then Landlock (Linux); Seatbelt (macOS).
    #[default]
    Auto,
    /// Only bubblewrap.
    Bwrap,
    /// Only the Landlock launcher.
    Landlock,
    /// Only Seatbelt.
    Seatbelt,
}

impl FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "bwrap" => Ok(BackendChoice::Bwrap),
            "landlock" => Ok(BackendChoice::Landlock),
            "seatbelt" => Ok(BackendChoice::Seatbelt),
            other => Err(format!(
                "unknown backend {other:?}; expected auto, bwrap, landlock or seatbelt"
            )),
        }
    }
}

/// How the ladder is configured.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// The ladder or a pinned backend.
    pub backend: BackendChoice,
    /// An operator's runner command, used instead of any probing.
    pub runner: Option<RunnerCommand>,
    /// Bound on each probe; must be positive.
    pub probe_timeout: Duration,
    /// The executable with the Landlock launcher mode (default: this
    /// executable, which is right for the `cordon` binary; an embedder
    /// points it at an installed `cordon`).
    pub launcher: Option<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            backend: BackendChoice::Auto,
            runner: None,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            launcher: None,
        }
    }
}

/// One rung of the ladder and what its probe found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rung {
    /// The backend.
    pub backend: Backend,
    /// Whether it can confine runs here.
    pub usable: bool,
    /// Its enforcement, when usable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<Enforcement>,
    /// Why it is or is not usable.
    pub reason: String,
}

/// The ladder's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// The backend that confines runs; none means every confined run fails
    /// closed with `SANDBOX_UNAVAILABLE`.
    pub backend: Option<Backend>,
    /// Its enforcement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<Enforcement>,
    /// The kernel's Landlock ABI (Linux; 0 when unsupported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub landlock_abi: Option<i64>,
    /// Every rung considered, in ladder order.
    pub rungs: Vec<Rung>,
    #[serde(skip)]
    chosen: Option<Chosen>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Chosen {
    Bwrap(PathBuf),
    Landlock(PathBuf, Enforcement),
    Seatbelt(Option<PathBuf>),
    Runner(RunnerCommand),
}

/// The platform ladder as a [`Confine`].
#[derive(Debug, Default)]
pub struct Sandbox {
    config: SandboxConfig,
    verdict: OnceLock<Probe>,
}

impl Sandbox {
    /// A ladder with the default configuration.
    pub fn new() -> Self {
        Sandbox::default()
    }

    /// A ladder with `config`.
    pub fn with_config(config: SandboxConfig) -> Self {
        Sandbox {
            config,
            verdict: OnceLock::new(),
        }
    }

    /// The verdict, probing on first use.
    pub fn probe(&self) -> &Probe {
        self.verdict.get_or_init(|| decide(&self.config))
    }
}

impl Confine for Sandbox {
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable> {
        if !policy.mode.is_confined() {
            return Err(Unavailable {
                mode: policy.mode,
                detail: Some(
                    "danger-full-access is never confined; plan an unconfined launch".into(),
                ),
            });
        }
        match &self.probe().chosen {
            Some(Chosen::Bwrap(runner)) => Ok(bwrap::wrap(runner, argv, policy)),
            Some(Chosen::Landlock(launcher, enforcement)) => {
                Ok(landlock::wrap(launcher, *enforcement, argv, policy))
            }
            Some(Chosen::Seatbelt(user_temp)) => {
                Ok(seatbelt::wrap(argv, policy, user_temp.as_deref()))
            }
            Some(Chosen::Runner(runner)) => Ok(runner.wrap(argv, policy)),
            None => Err(Unavailable {
                mode: policy.mode,
                detail: None,
            }),
        }
    }

    fn probe(&self) -> Option<Probe> {
        Some(Sandbox::probe(self).clone())
    }

    fn prepare(&self) {
        Sandbox::probe(self);
    }
}

fn decide(config: &SandboxConfig) -> Probe {
    let landlock_abi = cfg!(target_os = "linux").then(landlock::kernel_abi);
    if let Some(runner) = &config.runner {
        return Probe {
            backend: Some(Backend::RunnerCommand),
            enforcement: Some(Enforcement::Full),
            landlock_abi,
            rungs: vec![Rung {
                backend: Backend::RunnerCommand,
                usable: true,
                enforcement: Some(Enforcement::Full),
                reason: format!(
                    "runner command {} configured by the operator; not probed",
                    runner.program()
                ),
            }],
            chosen: Some(Chosen::Runner(runner.clone())),
        };
    }
    let ladder: &[Backend] = if cfg!(target_os = "linux") {
        &[Backend::Bwrap, Backend::Landlock]
    } else if cfg!(target_os = "macos") {
        &[Backend::Seatbelt]
    } else {
        &[]
    };
    let pinned = match config.backend {
        BackendChoice::Auto => None,
        BackendChoice::Bwrap => Some(Backend::Bwrap),
        BackendChoice::Landlock => Some(Backend::Landlock),
        BackendChoice::Seatbelt => Some(Backend::Seatbelt),
    };
    let mut rungs = vec![];
    let mut chosen = None;
    for &backend in ladder {
        if pinned.is_some_and(|p| p != backend) {
            rungs.push(not_probed(backend, "another backend is pinned"));
            continue;
        }
        if chosen.is_some() {
            rungs.push(not_probed(backend, "an earlier backend is usable"));
            continue;
        }
        let (rung, found) = match backend {
            Backend::Bwrap => probe_bwrap(config.probe_timeout),
            Backend::Landlock => probe_landlock(config),
            _ => probe_seatbelt(config.probe_timeout),
        };
        rungs.push(rung);
        chosen = found;
    }
    if let Some(pinned) = pinned
        && !ladder.contains(&pinned)
    {
        rungs.push(not_probed(pinned, "not available on this platform"));
    }
    if ladder.is_empty() {
        rungs.push(Rung {
            backend: Backend::RunnerCommand,
            usable: false,
            enforcement: None,
            reason: "no sandbox backend exists for this platform; configure a runner command"
                .into(),
        });
    }
    let (backend, enforcement) = match &chosen {
        Some(Chosen::Bwrap(_)) => (Some(Backend::Bwrap), Some(Enforcement::Full)),
        Some(Chosen::Landlock(_, e)) => (Some(Backend::Landlock), Some(*e)),
        Some(Chosen::Seatbelt(_)) => (Some(Backend::Seatbelt), Some(Enforcement::Full)),
        Some(Chosen::Runner(_)) | None => (None, None),
    };
    Probe {
        backend,
        enforcement,
        landlock_abi,
        rungs,
        chosen,
    }
}

fn not_probed(backend: Backend, why: &str) -> Rung {
    Rung {
        backend,
        usable: false,
        enforcement: None,
        reason: format!("not probed: {why}"),
    }
}

fn unusable(backend: Backend, reason: String) -> (Rung, Option<Chosen>) {
    let rung = Rung {
        backend,
        usable: false,
        enforcement: None,
        reason,
    };
    (rung, None)
}

fn probe_bwrap(timeout: Duration) -> (Rung, Option<Chosen>) {
    let Some(runner) = find_on_path(bwrap::PROGRAM) else {
        return unusable(
            Backend::Bwrap,
            "bwrap is not installed (not found on PATH)".into(),
        );
    };
    let mut argv = vec![runner.to_string_lossy().into_owned()];
    argv.extend(bwrap::probe_args());
    match run_bounded(&argv, timeout) {
        Ok(out) if out.success => (
            Rung {
                backend: Backend::Bwrap,
                usable: true,
                enforcement: Some(Enforcement::Full),
                reason: format!("{} ran the probe", runner.display()),
            },
            Some(Chosen::Bwrap(runner)),
        ),
        Ok(out) => unusable(
            Backend::Bwrap,
            format!(
                "{} failed the probe: {}",
                runner.display(),
                out.first_line()
            ),
        ),
        Err(why) => unusable(Backend::Bwrap, why),
    }
}

fn probe_landlock(config: &SandboxConfig) -> (Rung, Option<Chosen>) {
    let launcher = match &config.launcher {
        Some(path) => path.clone(),
        None => match std::env::current_exe() {
            Ok(exe) => exe,
            Err(err) => {
                return unusable(
                    Backend::Landlock,
                    format!("cannot locate the launcher: {err}"),
                );
            }
        },
    };
    let argv = vec![
        launcher.to_string_lossy().into_owned(),
        landlock::SUBCOMMAND.into(),
        "--probe".into(),
    ];
    match run_bounded(&argv, config.probe_timeout) {
        Ok(out) => match landlock::parse_probe(&out.stdout).filter(|_| out.success) {
            Some(enforcement) => (
                Rung {
                    backend: Backend::Landlock,
                    usable: true,
                    enforcement: Some(enforcement),
                    reason: format!(
                        "{} answered: {}",
                        launcher.display(),
                        out.stdout.lines().next().unwrap_or("")
                    ),
                },
                Some(Chosen::Landlock(launcher, enforcement)),
            ),
            None => unusable(
                Backend::Landlock,
                format!(
                    "{} failed the probe: {}",
                    launcher.display(),
                    out.first_line()
                ),
            ),
        },
        Err(why) => unusable(Backend::Landlock, why),
    }
}

fn probe_seatbelt(timeout: Duration) -> (Rung, Option<Chosen>) {
    let argv: Vec<String> = [
        seatbelt::PROGRAM,
        "-p",
        "(version 1) (allow default)",
        "--",
        "/usr/bin/true",
    ]
    .map(String::from)
    .to_vec();
    match run_bounded(&argv, timeout) {
        Ok(out) if out.success => {
            let user_temp = std::env::var_os("TMPDIR").and_then(|t| std::fs::canonicalize(t).ok());
            (
                Rung {
                    backend: Backend::Seatbelt,
                    usable: true,
                    enforcement: Some(Enforcement::Full),
                    reason: "sandbox-exec ran the probe".into(),
                },
                Some(Chosen::Seatbelt(user_temp)),
            )
        }
        Ok(out) => unusable(
            Backend::Seatbelt,
            format!("sandbox-exec failed the probe: {}", out.first_line()),
        ),
        Err(why) => unusable(Backend::Seatbelt, why),
    }
}

struct ProbeOutput {
    success: bool,
    stdout: String,
    stderr: String,
}

impl ProbeOutput {
    fn first_line(&self) -> String {
        self.stderr
            .lines()
            .chain(self.stdout.lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or("exited nonzero with no output")
            .trim()
            .to_owned()
    }
}

/// Run a probe in its own process group; kill the group at `timeout`.
fn run_bounded(argv: &[String], timeout: Duration) -> Result<ProbeOutput, String> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|err| format!("cannot run {}: {err}", argv[0]))?;
    let deadline = Instant::now() + timeout;
    let exited = ExitWaiter::new(child.id());
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let group = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                return Err(format!(
                    "{} did not answer the probe within {} ms",
                    argv[0],
                    timeout.as_millis()
                ));
            }
            Ok(None) => exited.wait_until(deadline),
            Err(err) => return Err(format!("waiting for {}: {err}", argv[0])),
        }
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    Ok(ProbeOutput {
        success: status.success(),
        stdout,
        stderr,
    })
}

/// Sleeps until a child exits or a deadline passes: on a pidfd where the
/// kernel has them (so a probe costs what the probed program costs), else
/// in short naps.
struct ExitWaiter(Option<std::os::fd::OwnedFd>);

impl ExitWaiter {
    fn new(pid: u32) -> Self {
        ExitWaiter(crate::process::spawn::pidfd::open(
            nix::unistd::Pid::from_raw(pid as i32),
        ))
    }

    fn wait_until(&self, deadline: Instant) {
        let nap = Duration::from_millis(2);
        match &self.0 {
            Some(pidfd) => {
                use std::os::fd::AsFd;
                let left = deadline.saturating_duration_since(Instant::now());
                let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
                let mut fds = [nix::poll::PollFd::new(
                    pidfd.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                )];
                if nix::poll::poll(&mut fds, ms).is_err() {
                    std::thread::sleep(nap);
                }
            }
            None => std::thread::sleep(nap),
        }
    }
}

/// The first executable file called `program` on `PATH`.
fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_command_is_used_without_probing() {
        let runner = RunnerCommand::new(vec!["/opt/sb".into()], vec!["sb: ".into()]).unwrap();
        let sandbox = Sandbox::with_config(SandboxConfig {
            runner: Some(runner),
            ..SandboxConfig::default()
        });
        let probe = sandbox.probe();
        assert_eq!(probe.backend, Some(Backend::RunnerCommand));
        assert_eq!(probe.rungs.len(), 1);
        assert!(probe.rungs[0].reason.contains("not probed"));
    }

    #[test]
    fn a_hanging_probe_is_cut_at_the_bound() {
        let started = Instant::now();
        let err = run_bounded(&["sleep".into(), "30".into()], Duration::from_millis(100))
            .err()
            .expect("times out");
        assert!(
            err.contains("did not answer the probe within 100 ms"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn backend_names_parse() {
        assert_eq!("landlock".parse(), Ok(BackendChoice::Landlock));
        assert!(
            "docker"
                .parse::<BackendChoice>()
                .unwrap_err()
                .contains("expected auto")
        );
    }
}
