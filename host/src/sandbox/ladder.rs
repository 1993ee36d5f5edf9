//! The runner ladder: which backend confines runs on this host, decided
//! once, lazily, by bounded probes, and kept for the ladder's life.
//!
//! The ladder only *orders* the backends: each backend file owns its probe,
//! its wrap and its dialect, and the ladder walks the platform's rungs,
//! asks each backend's probe in turn, and keeps the first usable one.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::Duration;

use serde::Serialize;

use crate::model::{Backend, Enforcement, SandboxPolicy};

use super::bwrap::{self, Bwrap};
use super::grant::{Layout, lay_out};
use super::landlock::{self, Landlock};
use super::probe::{Probed, Usable};
use super::seatbelt::{self, Seatbelt};
use super::{Confine, RunnerCommand, Unavailable, Wrap};

/// Default bound on each probe (SPEC.md §5).
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_millis(5_000);

/// Which backend to use: the platform ladder, or one pinned rung.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
    /// The bwrap to use (default: the first in the fixed system
    /// directories; never looked up on `PATH`).
    pub bwrap: Option<PathBuf>,
    /// The operator's own files (the deployed policy and config files),
    /// protected in every run wherever they lie in a writable root.
    pub protected: Vec<PathBuf>,
    /// The host's own directories hidden from every confined run (the
    /// sessions' spill root: one client's command must not read another
    /// client's output).
    pub hidden: Vec<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            backend: BackendChoice::Auto,
            runner: None,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            launcher: None,
            bwrap: None,
            protected: vec![],
            hidden: vec![],
        }
    }
}

/// One rung of the ladder and what its probe found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
    /// The Landlock scopes this kernel enforces (Linux): `signal`,
    /// `abstract-unix-socket`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub landlock_scopes: Option<Vec<&'static str>>,
    /// Every rung considered, in ladder order.
    pub rungs: Vec<Rung>,
    #[serde(skip)]
    chosen: Option<Chosen>,
}

/// The backend the ladder chose, ready to wrap. Every match over it (and
/// over [`Backend`] in [`probe_rung`]) is exhaustive: a backend added to
/// the model does not compile until the ladder says how it is probed,
/// reported and used.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Chosen {
    Bwrap(Bwrap),
    Landlock(Landlock),
    Seatbelt(Seatbelt),
    Runner(RunnerCommand),
}

impl Chosen {
    fn backend(&self) -> Backend {
        match self {
            Chosen::Bwrap(_) => Backend::Bwrap,
            Chosen::Landlock(_) => Backend::Landlock,
            Chosen::Seatbelt(_) => Backend::Seatbelt,
            Chosen::Runner(_) => Backend::RunnerCommand,
        }
    }

    fn enforcement(&self) -> Enforcement {
        match self {
            Chosen::Landlock(landlock) => landlock.enforcement(),
            Chosen::Bwrap(_) | Chosen::Seatbelt(_) | Chosen::Runner(_) => Enforcement::Full,
        }
    }

    fn wrap(&self, argv: &[String], policy: &SandboxPolicy, layout: &Layout) -> Wrap {
        match self {
            Chosen::Bwrap(bwrap) => bwrap.wrap(argv, policy, layout),
            Chosen::Landlock(landlock) => landlock.wrap(argv, policy, layout),
            Chosen::Seatbelt(seatbelt) => seatbelt.wrap(argv, policy, layout),
            Chosen::Runner(runner) => runner.wrap(argv, policy, layout),
        }
    }
}

/// The rungs of this platform's ladder, in order (SPEC.md §5).
fn platform_ladder() -> &'static [Backend] {
    if cfg!(target_os = "linux") {
        &[Backend::Bwrap, Backend::Landlock]
    } else if cfg!(target_os = "macos") {
        &[Backend::Seatbelt]
    } else {
        &[]
    }
}

/// The backend an operator pinned, if any.
fn pinned(choice: BackendChoice) -> Option<Backend> {
    match choice {
        BackendChoice::Auto => None,
        BackendChoice::Bwrap => Some(Backend::Bwrap),
        BackendChoice::Landlock => Some(Backend::Landlock),
        BackendChoice::Seatbelt => Some(Backend::Seatbelt),
    }
}

/// Probe one rung with the backend's own probe.
fn probe_rung(backend: Backend, config: &SandboxConfig) -> Result<Usable<Chosen>, String> {
    fn chosen<T>(probed: Probed<T>, into: fn(T) -> Chosen) -> Result<Usable<Chosen>, String> {
        probed.map(|usable| Usable {
            runner: into(usable.runner),
            reason: usable.reason,
        })
    }
    match backend {
        Backend::Bwrap => chosen(
            bwrap::probe(
                config.bwrap.as_deref(),
                landlock::launcher_path(config)
                    .ok()
                    .map(|(path, _)| path)
                    .as_deref(),
                config.probe_timeout,
            ),
            Chosen::Bwrap,
        ),
        Backend::Landlock => chosen(landlock::probe(config), Chosen::Landlock),
        Backend::Seatbelt => chosen(seatbelt::probe(config.probe_timeout), Chosen::Seatbelt),
        Backend::RunnerCommand => {
            Err("a runner command is configured by the operator, never probed".into())
        }
    }
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
            Some(chosen) => Ok(chosen.wrap(
                argv,
                policy,
                &lay_out(policy, &self.config.protected, &self.config.hidden),
            )),
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
    let landlock_scopes = cfg!(target_os = "linux").then(landlock::kernel_scopes);
    if let Some(runner) = &config.runner {
        let chosen = Chosen::Runner(runner.clone());
        return Probe {
            backend: Some(chosen.backend()),
            enforcement: Some(chosen.enforcement()),
            landlock_abi,
            landlock_scopes,
            rungs: vec![Rung {
                backend: Backend::RunnerCommand,
                usable: true,
                enforcement: Some(chosen.enforcement()),
                reason: format!(
                    "runner command {} configured by the operator; not probed",
                    runner.program()
                ),
            }],
            chosen: Some(chosen),
        };
    }
    let ladder = platform_ladder();
    let pinned = pinned(config.backend);
    let mut rungs = vec![];
    let mut chosen: Option<Chosen> = None;
    for &backend in ladder {
        if pinned.is_some_and(|p| p != backend) {
            rungs.push(not_probed(backend, "another backend is pinned"));
            continue;
        }
        if chosen.is_some() {
            rungs.push(not_probed(backend, "an earlier backend is usable"));
            continue;
        }
        rungs.push(match probe_rung(backend, config) {
            Ok(usable) => {
                let rung = Rung {
                    backend,
                    usable: true,
                    enforcement: Some(usable.runner.enforcement()),
                    reason: usable.reason,
                };
                chosen = Some(usable.runner);
                rung
            }
            Err(reason) => Rung {
                backend,
                usable: false,
                enforcement: None,
                reason,
            },
        });
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
    Probe {
        backend: chosen.as_ref().map(Chosen::backend),
        enforcement: chosen.as_ref().map(Chosen::enforcement),
        landlock_abi,
        landlock_scopes,
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
    fn every_pinnable_backend_is_a_rung_of_some_platform() {
        for choice in [
            BackendChoice::Bwrap,
            BackendChoice::Landlock,
            BackendChoice::Seatbelt,
        ] {
            let backend = pinned(choice).expect("pins a backend");
            assert_ne!(backend, Backend::RunnerCommand);
        }
        assert_eq!(pinned(BackendChoice::Auto), None);
    }

    #[test]
    fn a_runner_command_rung_is_never_probed() {
        let err =
            probe_rung(Backend::RunnerCommand, &SandboxConfig::default()).expect_err("not probed");
        assert!(err.contains("never probed"), "{err}");
    }

    #[test]
    fn a_backend_pinned_off_this_platform_is_said_so() {
        let off_platform = if cfg!(target_os = "macos") {
            BackendChoice::Bwrap
        } else {
            BackendChoice::Seatbelt
        };
        let sandbox = Sandbox::with_config(SandboxConfig {
            backend: off_platform,
            ..SandboxConfig::default()
        });
        let probe = sandbox.probe();
        assert_eq!(probe.backend, None);
        let last = probe.rungs.last().unwrap();
        assert_eq!(Some(last.backend), pinned(off_platform));
        assert!(last.reason.contains("not available on this platform"));
        assert!(
            probe.rungs[..probe.rungs.len() - 1]
                .iter()
                .all(|rung| rung.reason.contains("another backend is pinned"))
        );
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
