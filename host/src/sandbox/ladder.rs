//! The runner ladder: which backend confines runs on this host, decided
//! lazily and kept for the ladder's life.
//!
//! The ladder only *orders* the backends: each backend file owns its probe,
//! its wrap and its dialect, and the ladder walks the platform's rungs,
//! asks each backend's probe in turn, and keeps the first usable one.
//!
//! A run does not wait for a probe. cordon's namespace runner (when it is
//! this very executable) and bwrap are chosen once found and trusted, and
//! the first real run is the probe: both report out of band whether they
//! started the command ([`super::StatusReport::never_started`]), and a run
//! that did not start it is safe to try again. The run pipeline then
//! asks [`Confine::refute`]: the rung's probe runs now, and only if it
//! fails too does the ladder move down (so one run's own trouble, such as
//! a missing bind source or its pids limit, never demotes the host's
//! runner). What a probe found unusable is remembered for the boot
//! ([`super::verdicts`]), so a host without a usable runner does not probe
//! it again on every command. `cordon probe` ([`Sandbox::probe`]) probes
//! every rung afresh.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::model::{Backend, Enforcement, SandboxPolicy};

use super::bwrap::{self, Bwrap};
use super::grant::{Layout, lay_out};
use super::landlock::{self, Landlock};
use super::namespaces::{self, Namespaces};
use super::probe::{Look, Probed, Usable};
use super::seatbelt::{self, Seatbelt};
use super::verdicts::{RungIdentity, Verdicts};
use super::{Confine, RunnerCommand, Unavailable, Wrap};

/// Default bound on each probe (SPEC.md §5).
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_millis(5_000);

/// Which backend to use: the platform ladder, or one pinned rung.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// The platform ladder: cordon's namespace runner, bwrap, then
    /// Landlock (Linux); Seatbelt (macOS).
    #[default]
    Auto,
    /// Only cordon's namespace runner.
    Namespaces,
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
            "namespaces" => Ok(BackendChoice::Namespaces),
            "bwrap" => Ok(BackendChoice::Bwrap),
            "landlock" => Ok(BackendChoice::Landlock),
            "seatbelt" => Ok(BackendChoice::Seatbelt),
            other => Err(format!(
                "unknown backend {other:?}; expected auto, namespaces, bwrap, landlock or seatbelt"
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
    /// The executable with cordon's launcher modes — the namespace runner,
    /// bwrap's init, the Landlock launcher (default: this executable when
    /// its `main` dispatches them through `cordon_launcher::invoked`, as
    /// the `cordon` binary's does; an embedder that does not points it at
    /// an installed `cordon`, and its namespace runner is then probed up
    /// front). Without either, the rungs that need it are unusable: an
    /// executable that does not dispatch the modes is never started as
    /// if it did (it would run its own `main` with a launcher's argv).
    pub launcher: Option<PathBuf>,
    /// The bwrap to use (default: the first in the fixed system
    /// directories; never looked up on `PATH`).
    pub bwrap: Option<PathBuf>,
    /// Whether Landlock runs have the kernel log their denials, read back
    /// from its audit records where the host can (`kernel_denials`).
    pub kernel_denials: bool,
    /// The operator's own files (the deployed policy and config files),
    /// protected in every run wherever they lie in a writable root.
    pub protected: Vec<PathBuf>,
    /// The host's own directories hidden from every confined run (the
    /// sessions' spill root: one client's command must not read another
    /// client's output).
    pub hidden: Vec<PathBuf>,
    /// Where rungs found unusable are remembered for the boot (default:
    /// [`Verdicts::default_path`]; none: not remembered, so each new host
    /// probes them again).
    pub verdicts: Option<Verdicts>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            backend: BackendChoice::Auto,
            runner: None,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            launcher: None,
            bwrap: None,
            kernel_denials: true,
            protected: vec![],
            hidden: vec![],
            verdicts: Verdicts::default_path().map(Verdicts::at),
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
    /// The chosen rung, when it was chosen without running its probe: the
    /// first run is the probe.
    #[serde(skip)]
    trial: Option<Backend>,
}

impl Probe {
    /// Why no rung is usable, rung by rung (those that were looked at):
    /// what an operator reads in a `SANDBOX_UNAVAILABLE` error.
    fn why_none(&self) -> Option<String> {
        let looked: Vec<String> = self
            .rungs
            .iter()
            .filter(|rung| !rung.usable && !rung.reason.starts_with("not probed: "))
            .map(|rung| format!("{}: {}", backend_name(rung.backend), rung.reason))
            .collect();
        (!looked.is_empty()).then(|| looked.join("; "))
    }
}

/// A backend as operators name it.
fn backend_name(backend: Backend) -> String {
    serde_json::to_value(backend)
        .ok()
        .and_then(|name| name.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{backend:?}"))
}

/// The backend the ladder chose, ready to wrap. Every match over it (and
/// over [`Backend`] in [`probe_rung`]) is exhaustive: a backend added to
/// the model does not compile until the ladder says how it is probed,
/// reported and used.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Chosen {
    Namespaces(Namespaces),
    Bwrap(Bwrap),
    Landlock(Landlock),
    Seatbelt(Seatbelt),
    Runner(RunnerCommand),
}

impl Chosen {
    fn backend(&self) -> Backend {
        match self {
            Chosen::Namespaces(_) => Backend::Namespaces,
            Chosen::Bwrap(_) => Backend::Bwrap,
            Chosen::Landlock(_) => Backend::Landlock,
            Chosen::Seatbelt(_) => Backend::Seatbelt,
            Chosen::Runner(_) => Backend::RunnerCommand,
        }
    }

    fn enforcement(&self) -> Enforcement {
        match self {
            Chosen::Landlock(landlock) => landlock.enforcement(),
            Chosen::Namespaces(_) | Chosen::Bwrap(_) | Chosen::Seatbelt(_) | Chosen::Runner(_) => {
                Enforcement::Full
            }
        }
    }

    fn wrap(&self, argv: &[String], policy: &SandboxPolicy, layout: &Layout) -> Wrap {
        match self {
            Chosen::Namespaces(runner) => runner.wrap(argv, policy, layout),
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
        &[Backend::Namespaces, Backend::Bwrap, Backend::Landlock]
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
        BackendChoice::Namespaces => Some(Backend::Namespaces),
        BackendChoice::Bwrap => Some(Backend::Bwrap),
        BackendChoice::Landlock => Some(Backend::Landlock),
        BackendChoice::Seatbelt => Some(Backend::Seatbelt),
    }
}

/// Whether `backend` is taken on trial ([`Look::Trial`]): chosen without
/// running its probe, because a run it did not start says so out of band
/// and is safe to plan again. bwrap is; cordon's namespace runner is when
/// it is this very executable or the launcher of this build installed
/// beside it (an embedder's configured launcher is probed, since it may
/// lack the mode). The others' probes say what their
/// wrap needs (Landlock's enforcement and scopes).
fn takes_trial(backend: Backend, config: &SandboxConfig) -> bool {
    match backend {
        Backend::Bwrap => true,
        Backend::Namespaces => config.launcher.is_none() && landlock::default_launcher_known(),
        Backend::Landlock | Backend::Seatbelt | Backend::RunnerCommand => false,
    }
}

/// Look at one rung with the backend's own probe.
fn probe_rung(
    backend: Backend,
    config: &SandboxConfig,
    look: Look,
) -> Result<Usable<Chosen>, String> {
    fn chosen<T>(probed: Probed<T>, into: fn(T) -> Chosen) -> Result<Usable<Chosen>, String> {
        probed.map(|usable| Usable {
            runner: into(usable.runner),
            reason: usable.reason,
        })
    }
    match backend {
        Backend::Namespaces => {
            let (launcher, _) = landlock::launcher_path(config)?;
            let known = takes_trial(backend, config);
            chosen(
                namespaces::probe(&launcher, known, config.probe_timeout, look),
                Chosen::Namespaces,
            )
        }
        Backend::Bwrap => {
            let init = landlock::launcher_path(config).ok().map(|(path, _)| path);
            // This very executable, or the launcher of its build beside it,
            // dispatches the modes: no probe needed.
            let known = config.launcher.is_none() && landlock::default_launcher_known();
            chosen(
                bwrap::probe(
                    config.bwrap.as_deref(),
                    init.as_deref().map(|init| (init, known)),
                    config.probe_timeout,
                    look,
                ),
                Chosen::Bwrap,
            )
        }
        Backend::Landlock => {
            let probed = landlock::probe(config);
            if let Ok(usable) = &probed
                && let Some(verdicts) = &config.verdicts
                && let Some(rung) = identity(backend, config)
            {
                verdicts.remember_usable(&rung, usable.runner.said());
            }
            chosen(probed, Chosen::Landlock)
        }
        Backend::Seatbelt => chosen(seatbelt::probe(config.probe_timeout), Chosen::Seatbelt),
        Backend::RunnerCommand => {
            Err("a runner command is configured by the operator, never probed".into())
        }
    }
}

/// The programs a rung runs, which key its remembered verdict; none when
/// they cannot be located (then there is nothing to remember).
fn identity(backend: Backend, config: &SandboxConfig) -> Option<RungIdentity> {
    let launcher = || landlock::launcher_path(config).ok().map(|(path, _)| path);
    let programs = match backend {
        Backend::Namespaces => vec![launcher()?],
        Backend::Bwrap => {
            let mut programs = vec![bwrap::locate(config.bwrap.as_deref()).ok()?];
            programs.extend(launcher());
            programs
        }
        Backend::Landlock => vec![launcher()?],
        Backend::Seatbelt => vec![PathBuf::from(seatbelt::PROGRAM)],
        Backend::RunnerCommand => return None,
    };
    Some(RungIdentity::new(backend, programs))
}

/// What the ladder knows so far.
#[derive(Debug, Default)]
struct State {
    /// The verdict runs use; its rung is proven (by its probe, or by a run
    /// it started) unless it is still on trial ([`Probe::trial`]).
    current: Option<Arc<Probe>>,
    /// Rungs this ladder's probes found unusable, with why.
    failed: Vec<(Backend, String)>,
}

/// The platform ladder as a [`Confine`].
#[derive(Debug, Default)]
pub struct Sandbox {
    config: SandboxConfig,
    state: Mutex<State>,
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
            state: Mutex::default(),
        }
    }

    /// The verdict with every rung it reports looked at by its probe:
    /// `cordon probe`. The first call on a ladder that runs have only
    /// tried probes afresh (and rewrites what is remembered); later calls
    /// return the same verdict.
    pub fn probe(&self) -> Probe {
        let mut state = self.lock();
        if let Some(current) = state.current.as_ref().filter(|c| c.trial.is_none()) {
            return (**current).clone();
        }
        let probe = decide(&self.config, Look::Probe, &state.failed);
        state.current = Some(Arc::new(probe.clone()));
        probe
    }

    /// The verdict runs use, deciding it on first use without running a
    /// probe where the first run can be the probe.
    fn current(&self) -> Arc<Probe> {
        let mut guard = self.lock();
        let state = &mut *guard;
        state
            .current
            .get_or_insert_with(|| Arc::new(decide(&self.config, Look::Trial, &state.failed)))
            .clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Sandbox {
    /// Wrap `argv` for `policy`, hiding the host's `hidden` paths too.
    /// `unprivileged`: the runner runs as another, unprivileged user.
    fn confine_hiding(
        &self,
        argv: &[String],
        policy: &SandboxPolicy,
        hidden: &[PathBuf],
        unprivileged: bool,
    ) -> Result<Wrap, Unavailable> {
        if !policy.mode.is_confined() {
            return Err(Unavailable {
                mode: policy.mode,
                detail: Some(
                    "danger-full-access is never confined; plan an unconfined launch".into(),
                ),
            });
        }
        let current = self.current();
        match &current.chosen {
            Some(chosen) => {
                let layout = lay_out(policy, &self.config.protected, hidden);
                if let Chosen::Landlock(_) = chosen
                    && let Some(detail) = landlock::exposed_host_state(&layout)
                {
                    return Err(Unavailable {
                        mode: policy.mode,
                        detail: Some(detail),
                    });
                }
                if let Chosen::Landlock(landlock) = chosen
                    && unprivileged
                {
                    return Ok(landlock.for_unprivileged_user().wrap(argv, policy, &layout));
                }
                Ok(chosen.wrap(argv, policy, &layout))
            }
            None => Err(Unavailable {
                mode: policy.mode,
                detail: current.why_none(),
            }),
        }
    }
}

impl Confine for Sandbox {
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable> {
        self.confine_hiding(argv, policy, &self.config.hidden, false)
    }

    fn confine_as(
        &self,
        argv: &[String],
        policy: &SandboxPolicy,
        identity: &crate::process::identity::Identity,
    ) -> Result<Wrap, Unavailable> {
        // The rung was chosen for the host's user; a client's runner makes
        // its user namespace as the client, which the kernel may forbid.
        let needs_userns = matches!(
            &self.current().chosen,
            Some(Chosen::Namespaces(_) | Chosen::Bwrap(_))
        );
        if needs_userns && let Err(why) = super::namespaces::kernel_allows(identity.uid) {
            return Err(Unavailable {
                mode: policy.mode,
                detail: Some(format!(
                    "this rung confines a client's run in a user namespace of the client's \
                     (uid {}), and {why}: allow unprivileged user namespaces, or set backend = \
                     \"landlock\"",
                    identity.uid
                )),
            });
        }
        let hidden: Vec<PathBuf> = (self.config.hidden.iter())
            .filter(|path| identity.may_reach(path))
            .cloned()
            .collect();
        let mut policy = policy.clone();
        policy.deny_read.retain(|path| identity.may_reach(path));
        self.confine_hiding(argv, &policy, &hidden, identity.uid != 0)
    }

    fn probe(&self) -> Option<Probe> {
        Some(Sandbox::probe(self))
    }

    fn prepare(&self) {
        self.current();
    }

    fn verify(&self) {
        if self.current().trial.is_some() {
            self.refute_or_prove(None);
        }
    }

    fn refute(&self, backend: Backend) -> bool {
        self.refute_or_prove(Some(backend))
    }

    fn confirm(&self, backend: Backend) {
        let mut state = self.lock();
        if let Some(current) = &state.current
            && current.trial == Some(backend)
        {
            let mut probe = (**current).clone();
            for rung in probe.rungs.iter_mut().filter(|r| r.backend == backend) {
                rung.reason = rung.reason.replace(
                    "not probed up front (the first run is its probe)",
                    "proven by a run it started",
                );
            }
            probe.trial = None;
            state.current = Some(Arc::new(probe));
        }
    }
}

impl Sandbox {
    /// Probe the rung on trial now. When it fails, remember that, move
    /// down the ladder and say so (true: plan again). `after_run` names the
    /// backend of a run that did not start its command: a ladder that
    /// already moved past it says so too, and one whose rung is proven
    /// keeps it (that run failed on its own).
    fn refute_or_prove(&self, after_run: Option<Backend>) -> bool {
        let mut state = self.lock();
        let Some(current) = state.current.clone() else {
            return false;
        };
        if let Some(backend) = after_run
            && current.backend != Some(backend)
        {
            return true;
        }
        let Some(trial) = current.trial else {
            return false;
        };
        match probe_rung(trial, &self.config, Look::Probe) {
            Ok(usable) => {
                forget(&self.config, trial);
                let mut proven = (*current).clone();
                proven.trial = None;
                // A runner taken from a remembered probe that now answers
                // otherwise (Landlock's IPC, its write supervision): runs
                // take the fresh one, and a run it did not start plans again.
                let changed =
                    trial == Backend::Landlock && proven.chosen.as_ref() != Some(&usable.runner);
                if changed {
                    tracing::info!(backend = ?trial, "the rung on trial passed its probe with another answer; planning again");
                    proven.enforcement = Some(usable.runner.enforcement());
                    for rung in proven.rungs.iter_mut().filter(|r| r.backend == trial) {
                        rung.enforcement = proven.enforcement;
                        rung.reason = usable.reason.clone();
                    }
                    proven.chosen = Some(usable.runner);
                } else {
                    tracing::info!(backend = ?trial, "the rung on trial passed its probe; a run's own failure stands");
                }
                state.current = Some(Arc::new(proven));
                changed && after_run.is_some()
            }
            Err(reason) => {
                tracing::warn!(backend = ?trial, %reason, "the rung on trial failed its probe; moving down the ladder");
                remember(&self.config, trial, &reason);
                state.failed.push((trial, reason));
                state.current = Some(Arc::new(decide(&self.config, Look::Trial, &state.failed)));
                true
            }
        }
    }
}

/// Keep a probe's negative verdict for `backend`, where verdicts are kept
/// (and drop what an earlier probe found usable).
fn remember(config: &SandboxConfig, backend: Backend, reason: &str) {
    if let Some(verdicts) = &config.verdicts
        && let Some(rung) = identity(backend, config)
    {
        verdicts.forget_usable(&rung);
        verdicts.remember(&rung, reason);
    }
}

/// The Landlock rung as a probe earlier this boot, with this process's
/// privileges, found it usable — kept so that each `cordon run` does not
/// start the launcher twice to probe it again.
fn remembered_landlock(config: &SandboxConfig) -> Option<Usable<Chosen>> {
    let verdicts = config.verdicts.as_ref()?;
    let said = verdicts.recall_usable(&identity(Backend::Landlock, config)?)?;
    let usable = landlock::remembered(config, &said).ok()?;
    Some(Usable {
        runner: Chosen::Landlock(usable.runner),
        reason: usable.reason,
    })
}

/// Forget what was kept for `backend`: a probe found it usable.
fn forget(config: &SandboxConfig, backend: Backend) {
    if let Some(verdicts) = &config.verdicts
        && let Some(rung) = identity(backend, config)
    {
        verdicts.forget(&rung);
    }
}

/// Walk the ladder. `failed` are rungs this ladder's probes already found
/// unusable. A trial consults the remembered verdicts; a fresh probe
/// (`cordon probe`) does not, and rewrites them instead.
fn decide(config: &SandboxConfig, look: Look, failed: &[(Backend, String)]) -> Probe {
    let landlock_abi = cfg!(target_os = "linux").then(landlock::kernel_abi);
    let landlock_scopes = cfg!(target_os = "linux").then(landlock::kernel_scopes);
    if let Some(runner) = &config.runner {
        return operators_runner(runner, landlock_abi, landlock_scopes);
    }
    let ladder = platform_ladder();
    let pinned = pinned(config.backend);
    let mut rungs = vec![];
    let mut chosen: Option<Chosen> = None;
    let mut trial = None;
    for &backend in ladder {
        if pinned.is_some_and(|p| p != backend) {
            rungs.push(not_probed(backend, "another backend is pinned"));
            continue;
        }
        if chosen.is_some() {
            rungs.push(not_probed(backend, "an earlier backend is usable"));
            continue;
        }
        let (rung, usable) = look_at(backend, config, look, failed);
        if let Some((runner, on_trial)) = usable {
            chosen = Some(runner);
            trial = on_trial.then_some(backend);
        }
        rungs.push(rung);
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
        trial,
    }
}

/// The verdict when the operator configured a runner command: it, unprobed.
fn operators_runner(
    runner: &RunnerCommand,
    landlock_abi: Option<i64>,
    landlock_scopes: Option<Vec<&'static str>>,
) -> Probe {
    let chosen = Chosen::Runner(runner.clone());
    Probe {
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
        trial: None,
    }
}

/// Look at one rung of the ladder: a failure this host saw already, a
/// verdict remembered this boot (trials only), else its probe. The rung as
/// `cordon probe` shows it, and — when usable — the runner and whether it
/// is on trial. A probe's failure is remembered; a fresh probe that found
/// the rung usable clears what was kept.
fn look_at(
    backend: Backend,
    config: &SandboxConfig,
    look: Look,
    failed: &[(Backend, String)],
) -> (Rung, Option<(Chosen, bool)>) {
    let unusable = |reason: String| Rung {
        backend,
        usable: false,
        enforcement: None,
        reason,
    };
    if let Some((_, reason)) = failed.iter().find(|(b, _)| *b == backend) {
        return (unusable(reason.clone()), None);
    }
    let remembered = (look == Look::Trial)
        .then(|| config.verdicts.as_ref().zip(identity(backend, config)))
        .flatten()
        .and_then(|(verdicts, rung)| verdicts.recall(&rung));
    if let Some(reason) = remembered {
        return (
            unusable(format!(
                "{reason} (remembered from a probe earlier this boot; `cordon probe` checks again)"
            )),
            None,
        );
    }
    // Landlock's runs need what its probe says; a probe kept from earlier
    // this boot says it without starting the launcher, and is on trial.
    if look == Look::Trial
        && backend == Backend::Landlock
        && let Some(usable) = remembered_landlock(config)
    {
        let rung = Rung {
            backend,
            usable: true,
            enforcement: Some(usable.runner.enforcement()),
            reason: usable.reason,
        };
        return (rung, Some((usable.runner, true)));
    }
    let on_trial = look == Look::Trial && takes_trial(backend, config);
    match probe_rung(backend, config, look) {
        Ok(usable) => {
            if look == Look::Probe {
                forget(config, backend);
            }
            let rung = Rung {
                backend,
                usable: true,
                enforcement: Some(usable.runner.enforcement()),
                reason: usable.reason,
            };
            (rung, Some((usable.runner, on_trial)))
        }
        Err(reason) => {
            // A trial's failure is only the static check's (found,
            // trusted), which costs nothing to repeat.
            if !on_trial {
                remember(config, backend, &reason);
            }
            (unusable(reason), None)
        }
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
            BackendChoice::Namespaces,
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
        let err = probe_rung(
            Backend::RunnerCommand,
            &SandboxConfig::default(),
            Look::Probe,
        )
        .expect_err("not probed");
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

    /// A ladder pinned to a stand-in bwrap running `script`, remembering
    /// its verdicts in `dir/verdicts`.
    #[cfg(target_os = "linux")]
    fn pinned_to(dir: &std::path::Path, script: &str) -> Sandbox {
        Sandbox::with_config(SandboxConfig {
            backend: BackendChoice::Bwrap,
            bwrap: Some(stand_in(dir, "bwrap", script)),
            verdicts: Some(Verdicts::at(dir.join("verdicts"))),
            ..SandboxConfig::default()
        })
    }

    /// An executable `dir/bin/NAME` running `script`, trusted (its
    /// directory and it mode 0755).
    #[cfg(target_os = "linux")]
    fn stand_in(dir: &std::path::Path, name: &str, script: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let fake = bin.join(name);
        std::fs::write(&fake, script).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        fake
    }

    /// A ladder pinned to Landlock with a stand-in launcher whose probe
    /// prints the file `dir/answer` (every other invocation exits 0) and
    /// that logs each start to `dir/starts`, remembering in `dir/verdicts`.
    #[cfg(target_os = "linux")]
    fn landlock_pinned_to(dir: &std::path::Path) -> Sandbox {
        let (starts, answer) = (dir.join("starts"), dir.join("answer"));
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> {}\n[ \"$2\" = --probe ] && cat {}\nexit 0\n",
            starts.display(),
            answer.display()
        );
        Sandbox::with_config(SandboxConfig {
            backend: BackendChoice::Landlock,
            launcher: Some(stand_in(dir, "cordon", &script)),
            verdicts: Some(Verdicts::at(dir.join("verdicts"))),
            ..SandboxConfig::default()
        })
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_landlock_probe_is_kept_for_the_boot_and_a_stale_one_is_probed_again() {
        let dir = tempfile::tempdir().unwrap();
        let answer = |said: &str| std::fs::write(dir.path().join("answer"), said).unwrap();
        answer("landlock: fully enforced\nipc: isolated\nwrites: supervised\n");
        let sandbox = landlock_pinned_to(dir.path());
        let policy = SandboxPolicy::new(crate::model::SandboxMode::ReadOnly, dir.path());
        let starts = || std::fs::read_to_string(dir.path().join("starts")).unwrap_or_default();
        let ipc = |wrap: &Wrap| wrap.argv().iter().any(|arg| arg == "--unshare-ipc");
        let wrap = sandbox.confine(&["true".into()], &policy).unwrap();
        assert!(ipc(&wrap));
        assert_eq!(
            starts().lines().count(),
            2,
            "probed, ran confined: {}",
            starts()
        );
        assert_eq!(sandbox.current().trial, None, "a probed rung is proven");

        // The next host (the next `cordon run`) starts no launcher to probe.
        let next = Sandbox::with_config(sandbox.config.clone());
        let wrap = next.confine(&["true".into()], &policy).unwrap();
        assert_eq!(starts().lines().count(), 2, "nothing started: {}", starts());
        assert!(ipc(&wrap));
        assert_eq!(next.current().trial, Some(Backend::Landlock));
        let reason = &next.current().rungs[2].reason;
        assert!(reason.contains("remembered"), "{reason}");
        next.confirm(Backend::Landlock);
        assert_eq!(next.current().trial, None);

        // The launcher now answers otherwise (no IPC namespace): a run the
        // remembered answer planned did not start, the probe runs again,
        // and the run is planned again with the fresh answer.
        answer("landlock: fully enforced\nwrites: supervised\n");
        let later = Sandbox::with_config(sandbox.config.clone());
        let wrap = later.confine(&["true".into()], &policy).unwrap();
        assert!(ipc(&wrap), "remembered");
        assert!(later.refute(Backend::Landlock), "plan again");
        let wrap = later.confine(&["true".into()], &policy).unwrap();
        assert!(!ipc(&wrap), "the fresh answer");
        assert_eq!(later.current().backend, Some(Backend::Landlock));
        assert!(
            !later.refute(Backend::Landlock),
            "proven: a run's own failure stands"
        );
        // The fresh answer is what the next host remembers.
        let after = Sandbox::with_config(sandbox.config.clone());
        assert!(!ipc(&after.confine(&["true".into()], &policy).unwrap()));
        // A rung found unusable since keeps no usable answer.
        answer("");
        assert!(!Sandbox::with_config(sandbox.config.clone()).probe().rungs[2].usable);
        let again = Sandbox::with_config(sandbox.config.clone());
        assert!(
            again.confine(&["true".into()], &policy).is_err(),
            "nothing usable is recalled"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn bwrap_is_chosen_on_trial_and_a_failed_probe_moves_the_ladder_down() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = pinned_to(
            dir.path(),
            "#!/bin/sh\necho 'bwrap: no userns' >&2\nexit 1\n",
        );
        let policy = SandboxPolicy::new(crate::model::SandboxMode::ReadOnly, dir.path());
        let wrap = sandbox
            .confine(&["true".into()], &policy)
            .expect("on trial");
        assert_eq!(wrap.facts().backend, Backend::Bwrap);
        assert_eq!(sandbox.current().trial, Some(Backend::Bwrap));
        assert!(sandbox.refute(Backend::Bwrap), "plan again");
        let unavailable = sandbox.confine(&["true".into()], &policy).unwrap_err();
        let detail = unavailable.detail.unwrap();
        assert!(
            detail.contains("bwrap: ") && detail.contains("no userns"),
            "{detail}"
        );
        assert!(
            sandbox.refute(Backend::Bwrap),
            "an old run's refute: plan again"
        );
        // The next ladder remembers, without starting bwrap.
        let again = Sandbox::with_config(sandbox.config.clone());
        let detail = again.confine(&["true".into()], &policy).unwrap_err().detail;
        assert!(detail.unwrap().contains("remembered"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_namespace_runner_is_first_on_trial_and_its_failed_probe_leads_to_bwrap() {
        // This executable dispatches the launcher modes as cordon's main
        // does (so its runner is taken on trial) — but, being the test
        // binary, it has none: the probe that a failed first run asks for
        // fails, and the ladder moves on.
        super::super::launcher::invoked(&[]);
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::with_config(SandboxConfig {
            verdicts: Some(Verdicts::at(dir.path().join("verdicts"))),
            ..SandboxConfig::default()
        });
        let policy = SandboxPolicy::new(crate::model::SandboxMode::ReadOnly, dir.path());
        let wrap = sandbox
            .confine(&["true".into()], &policy)
            .expect("on trial");
        assert_eq!(wrap.facts().backend, Backend::Namespaces);
        assert_eq!(wrap.argv()[1], "__ns");
        let current = sandbox.current();
        assert_eq!(current.trial, Some(Backend::Namespaces));
        assert!(
            current.rungs[0]
                .reason
                .contains("the first run is its probe"),
            "{:?}",
            current.rungs
        );
        assert!(sandbox.refute(Backend::Namespaces), "plan again");
        let current = sandbox.current();
        assert_ne!(current.backend, Some(Backend::Namespaces));
        assert!(
            current.rungs[0].reason.contains("failed the probe"),
            "{:?}",
            current.rungs
        );
        // Remembered for the next ladder.
        let again = Sandbox::with_config(sandbox.config.clone());
        assert!(again.current().rungs[0].reason.contains("remembered"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_rung_whose_probe_passes_keeps_runs_and_a_started_run_proves_it() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = pinned_to(dir.path(), "#!/bin/sh\nexit 0\n");
        sandbox.prepare();
        assert!(!sandbox.refute(Backend::Bwrap), "the run's failure stands");
        assert_eq!(sandbox.current().trial, None);
        let other = pinned_to(&dir.path().join("other"), "#!/bin/sh\nexit 0\n");
        other.prepare();
        other.confirm(Backend::Bwrap);
        let current = other.current();
        assert_eq!(current.trial, None, "proven");
        let bwrap = current.rungs.iter().find(|r| r.backend == Backend::Bwrap);
        assert!(bwrap.unwrap().reason.contains("proven by a run"));
        assert!(!other.refute(Backend::Bwrap), "proven: no probe");
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
