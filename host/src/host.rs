//! [`Host`]: the library entry point. Owns what every run of a deployment
//! shares — the policy engine, the loaded policy component, the sandbox
//! ladder and the deployment — and hands out [`Session`]s, each of which
//! runs requests through the pipeline in [`crate::run`] and owns its own
//! tasks and spill files. A host has a default session of its own, so
//! `host.run(…)` and `host.start(…)` work without asking for one.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use crate::admission::{Admission, Load, SessionLimits};
use crate::audit::{AuditError, AuditLog, AuditOptions};
use crate::credentials::Credential;
use crate::error::{Details, ErrorCode, RunError};
use crate::model::{Deployment, ExecRequest, ExecResult, SandboxMode};
use crate::policy::cache::ComponentCache;
use crate::policy::pool::{DEFAULT_POLICY_THREADS, PolicyPool};
use crate::policy::{self, ExecutorInfo, Limits, LoadError, Policy, PolicyEngine, builtin};
use crate::process::cgroup::{CgroupChoice, Cgroups, Containment};
use crate::process::env::EnvPolicy;
use crate::registry::{PolicyRef, RefError, RegistryError, RegistryOptions};
use crate::run::{ProcessLimits, RunOptions};
use crate::sandbox::{Confine, Probe, Sandbox, SandboxConfig};
use crate::session::{HostCore, Session};
use crate::tasks::{TaskHandle, TaskId, TaskSnapshot};

/// Where the policy component comes from.
#[derive(Clone, Debug)]
pub enum PolicySource {
    /// The `bash-sandbox` component embedded in this build.
    Embedded,
    /// A component shipped inside this build, by name (`builtin:NAME`;
    /// see [`crate::policy::builtin`]).
    Builtin(String),
    /// A component file, read when the host is built.
    File(PathBuf),
    /// Component bytes.
    Bytes(Vec<u8>),
    /// A component in an OCI registry (`oci://…`), pulled and checked when
    /// the host is built (see [`crate::registry`]); a tag is resolved and
    /// pinned to its digest.
    Registry(PolicyRef),
}

impl PolicySource {
    /// `oci://…` as a registry reference, `builtin:NAME` as a component
    /// shipped inside this build, anything else as a file.
    pub fn parse(text: &str) -> Result<Self, SourceError> {
        if PolicyRef::is_reference(text) {
            Ok(PolicySource::Registry(PolicyRef::parse(text)?))
        } else if let Some(name) = text.strip_prefix(builtin::PREFIX) {
            builtin::named(name)?;
            Ok(PolicySource::Builtin(name.to_owned()))
        } else {
            Ok(PolicySource::File(PathBuf::from(text)))
        }
    }

    /// The component file, absolute, for a file source (protected wherever
    /// a run may write).
    fn file(&self) -> Option<PathBuf> {
        match self {
            PolicySource::File(path) => {
                Some(std::path::absolute(path).unwrap_or_else(|_| path.clone()))
            }
            PolicySource::Embedded
            | PolicySource::Builtin(_)
            | PolicySource::Bytes(_)
            | PolicySource::Registry(_) => None,
        }
    }

    /// Load the component (and, for a whole policy from a registry, the
    /// settings it carries) as `deployment`'s policy: see [`with_settings`].
    fn load(
        self,
        engine: &PolicyEngine,
        limits: Limits,
        registry: &RegistryOptions,
        deployment: &Deployment,
    ) -> Result<Policy, BuildError> {
        let local = |bytes: Vec<u8>| (bytes, None, None);
        let (bytes, pinned, settings) = match self {
            PolicySource::Embedded => local(policy::EMBEDDED_DEFAULT.to_vec()),
            PolicySource::Builtin(name) => local(builtin::named(&name)?.bytes.to_vec()),
            PolicySource::Bytes(bytes) => local(bytes),
            PolicySource::File(path) => local(
                crate::files::read_regular(&path, crate::files::MAX_COMPONENT_BYTES)
                    .map_err(|source| BuildError::ReadPolicy { path, source })?,
            ),
            PolicySource::Registry(reference) => {
                let pulled = crate::registry::pull(&reference, registry, engine.cache())?;
                (pulled.bytes, Some(pulled.pinned), pulled.settings)
            }
        };
        let policy = Policy::load(engine, &bytes, limits)?.pulled_as(pinned);
        check_ceiling(&policy, deployment)?;
        with_settings(
            policy,
            settings,
            deployment,
            registry.allow_settings_override,
        )
    }
}

/// `policy` carrying the `settings` its artifact brought, checked by it:
/// a whole policy runs with its own settings, and settings the deployment
/// gives too (`[policy] settings`, `--settings`) would silently change what
/// was reviewed and signed — refused, unless the operator allowed
/// overrides (`[registry] allow_settings_override`), when the deployment's
/// replace them. An empty table is no settings.
fn with_settings(
    policy: Policy,
    carried: Option<String>,
    deployment: &Deployment,
    allow_override: bool,
) -> Result<Policy, BuildError> {
    let local = serde_json::from_str::<serde_json::Value>(&deployment.settings)
        .map_or(true, |value| {
            value.as_object().is_none_or(|o| !o.is_empty())
        });
    let carried = match carried {
        Some(_) if local && allow_override => {
            tracing::warn!(
                reference = ?policy.reference().map(ToString::to_string),
                "the deployment's settings replace those the policy artifact carries \
                 ([registry] allow_settings_override)"
            );
            None
        }
        Some(_) if local => {
            return Err(BuildError::SettingsOverride {
                reference: policy
                    .reference()
                    .map_or_else(String::new, ToString::to_string),
            });
        }
        carried => carried,
    };
    let policy = policy.carrying(carried);
    policy.validate_settings(policy.settings().unwrap_or(&deployment.settings))?;
    Ok(policy)
}

/// Why a policy source's text names no source.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A malformed `oci://` reference.
    #[error(transparent)]
    Reference(#[from] RefError),
    /// A `builtin:` name this build does not ship.
    #[error(transparent)]
    Builtin(#[from] builtin::UnknownBuiltin),
}

/// Why a host could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `builtin:NAME` names no component this build ships.
    #[error(transparent)]
    Builtin(#[from] builtin::UnknownBuiltin),
    /// The policy component file could not be read.
    #[error("cannot read policy component {}: {source}", path.display())]
    ReadPolicy {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The component could not be pulled from its registry, or what was
    /// pulled is not the component the reference names (digest, layout,
    /// signature).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The audit log could not be opened.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The component failed to load or validate.
    #[error(transparent)]
    Policy(#[from] LoadError),
    /// The policy pulled carries its own settings and the deployment gives
    /// settings too.
    #[error(
        "policy {reference} carries its own settings (a whole policy, signed with them) and \
         this deployment gives settings too ([policy] settings or --settings); remove the \
         deployment's settings to run the policy as published, or set [registry] \
         allow_settings_override = true (--allow-settings-override) to replace them"
    )]
    SettingsOverride {
        /// The policy's pinned reference.
        reference: String,
    },
    /// The host's working directory is unusable.
    #[error("cannot determine the working directory: {0}")]
    Workdir(#[source] std::io::Error),
    /// The sessions' spill directory cannot be made private.
    #[error("{0}")]
    SpillRoot(#[source] std::io::Error),
    /// The policy threads could not be started.
    #[error("cannot start the policy threads: {0}")]
    Threads(#[source] std::io::Error),
    /// The component runs commands in a mode this deployment does not
    /// allow (e.g. `bash-local`, which never confines).
    #[error(
        "policy component {name} runs commands as {mode} by default, above this deployment's \
         ceiling {ceiling}; raise the ceiling (--max-mode {mode}, or max_mode in cordon.toml) \
         to load it, or use a confining policy"
    )]
    AboveCeiling {
        /// The component's name.
        name: String,
        /// The mode it describes as its default.
        mode: SandboxMode,
        /// The deployment's ceiling.
        ceiling: SandboxMode,
    },
}

/// Refuse a component whose default mode is above the deployment's
/// ceiling: every run it plans would be refused anyway, so say so at load.
fn check_ceiling(policy: &Policy, deployment: &Deployment) -> Result<(), BuildError> {
    let info = policy.info();
    if info.default_mode > deployment.max_mode {
        return Err(BuildError::AboveCeiling {
            name: info.name.clone(),
            mode: info.default_mode,
            ceiling: deployment.max_mode,
        });
    }
    Ok(())
}

/// Configures a [`Host`].
#[derive(Default)]
pub struct HostBuilder {
    policy: Option<PolicySource>,
    deployment: Option<Deployment>,
    confiner: Option<Arc<dyn Confine>>,
    sandbox: Option<SandboxConfig>,
    limits: Option<Limits>,
    process: Option<ProcessLimits>,
    spill_parent: Option<PathBuf>,
    cache: Option<ComponentCache>,
    registry: RegistryOptions,
    audit_log: Option<AuditOptions>,
    peer: Option<String>,
    approver: Option<&'static str>,
    probe_early: bool,
    env: Option<EnvPolicy>,
    cgroups: CgroupChoice,
    session_limits: Option<SessionLimits>,
    policy_threads: Option<usize>,
    one_run: bool,
    /// The request a one-run host expects, to start its runner ahead.
    expecting: Option<ExecRequest>,
    /// Each session keeps a spare runner for its next run.
    spare_runners: bool,
    /// Paths of the embedder's hidden from every confined run.
    hidden: Vec<PathBuf>,
    /// Credentials runs get placeholders for.
    credentials: Vec<Arc<Credential>>,
}

impl HostBuilder {
    /// Credentials a command never holds ([`crate::credentials`]): each
    /// run through the allow-list proxy gets a placeholder for each, which
    /// the proxy replaces with the value only on requests to an endpoint
    /// the credential is bound to. Withhold the variables and hide the
    /// files the values came from too (`cordon.toml` does both).
    pub fn credentials(mut self, credentials: Vec<Arc<Credential>>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Use this policy component (default: the embedded `bash-sandbox`).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// use cordon::{Host, PolicySource};
    /// let host = Host::builder()
    ///     .policy(PolicySource::File("/etc/cordon/policy.wasm".into()))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn policy(mut self, source: PolicySource) -> Self {
        self.policy = Some(source);
        self
    }

    /// Use this deployment (default: [`Deployment::in_dir`] of the current
    /// directory).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// use cordon::{Deployment, Host, SandboxMode};
    /// let mut deployment = Deployment::in_dir("/srv/project");
    /// deployment.max_mode = SandboxMode::DangerFullAccess; // the operator's ceiling
    /// let host = Host::builder().deployment(deployment).build()?;
    /// # Ok(()) }
    /// ```
    pub fn deployment(mut self, deployment: Deployment) -> Self {
        self.deployment = Some(deployment);
        self
    }

    /// Configure the platform ladder (pinned backend, runner command,
    /// probe timeout, Landlock launcher).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// use cordon::sandbox::{BackendChoice, SandboxConfig};
    /// let config = SandboxConfig {
    ///     backend: BackendChoice::Bwrap,
    ///     launcher: Some("/usr/local/bin/cordon".into()), // for the Landlock rung
    ///     ..SandboxConfig::default()
    /// };
    /// let host = cordon::Host::builder().sandbox(config).build()?;
    /// # Ok(()) }
    /// ```
    pub fn sandbox(mut self, config: SandboxConfig) -> Self {
        self.sandbox = Some(config);
        self
    }

    /// Hide `path` from every confined run like the spill root (a
    /// socket a server listens on, so that no run can reach it by path;
    /// it need not exist yet: each run lays it out when it starts).
    pub fn hide_from_runs(mut self, path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        self.hidden.push(std::path::absolute(&path).unwrap_or(path));
        self
    }

    /// Confine with this implementation instead of the platform ladder.
    ///
    /// ```no_run
    /// # fn demo(my_confiner: std::sync::Arc<dyn cordon::sandbox::Confine>) -> Result<(), cordon::BuildError> {
    /// let host = cordon::Host::builder().confiner(my_confiner).build()?;
    /// # Ok(()) }
    /// ```
    pub fn confiner(mut self, confiner: Arc<dyn Confine>) -> Self {
        self.confiner = Some(confiner);
        self
    }

    /// Bound policy calls with these limits.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// use cordon::policy::Limits;
    /// let limits = Limits {
    ///     call_deadline: std::time::Duration::from_millis(200),
    ///     ..Limits::default()
    /// };
    /// let host = cordon::Host::builder().limits(limits).build()?;
    /// # Ok(()) }
    /// ```
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Tail size, spill limit and kill grace (defaults: SPEC.md §3).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// use cordon::ProcessLimits;
    /// let limits = ProcessLimits {
    ///     kill_grace: std::time::Duration::from_secs(1),
    ///     ..ProcessLimits::default()
    /// };
    /// let host = cordon::Host::builder().process_limits(limits).build()?;
    /// # Ok(()) }
    /// ```
    pub fn process_limits(mut self, limits: ProcessLimits) -> Self {
        self.process = Some(limits);
        self
    }

    /// Create the sessions' private spill directories under `parent`
    /// instead of the default root (`/run/cordon-spill-<uid>`, or in
    /// `$XDG_RUNTIME_DIR` or the temp dir), which is hidden from every
    /// confined run; `parent` is not (hide it with the grant's `denyRead`
    /// if commands could reach it).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// let host = cordon::Host::builder().spill_parent("/var/lib/agent/spill").build()?;
    /// # Ok(()) }
    /// ```
    pub fn spill_parent(mut self, parent: impl Into<PathBuf>) -> Self {
        self.spill_parent = Some(parent.into());
        self
    }

    /// Which host variables reach commands (default: all but what the
    /// credential scrub withholds; see [`crate::process::env`]).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// use cordon::process::env::{EnvPolicy, Inherit};
    /// let env = EnvPolicy {
    ///     inherit: Inherit::Core,
    ///     include: vec!["CI_*".into()],
    ///     exclude: vec![],
    /// };
    /// let host = cordon::Host::builder().env_policy(env).build()?;
    /// # Ok(()) }
    /// ```
    pub fn env_policy(mut self, policy: EnvPolicy) -> Self {
        self.env = Some(policy);
        self
    }

    /// Keep compiled policy components in `cache`, so the next host that
    /// loads the same component skips compiling it.
    ///
    /// ```no_run
    /// # fn demo() -> anyhow::Result<()> {
    /// use cordon::policy::cache::ComponentCache;
    /// let cache = ComponentCache::open(std::path::Path::new("/var/cache/cordon"))?;
    /// let host = cordon::Host::builder().component_cache(cache).build()?;
    /// # Ok(()) }
    /// ```
    pub fn component_cache(mut self, cache: ComponentCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Keep an audit log at `path`: one JSON line per run and per refusal
    /// (see [`crate::audit`]). Opened when the host is built; a log that
    /// cannot be opened privately fails the build.
    pub fn audit_log(mut self, path: PathBuf) -> Self {
        self.audit_log = Some(AuditOptions::at(path));
        self
    }

    /// Keep the audit log `options` describe (required, rotated, sealed).
    pub fn audit(mut self, options: AuditOptions) -> Self {
        self.audit_log = Some(options);
        self
    }

    /// No audit log, whatever the configuration said (a `cordon doctor`
    /// or a test whose own runs are not the operator's record).
    pub fn without_audit_log(mut self) -> Self {
        self.audit_log = None;
        self
    }

    /// How the host's own session ([`Host::run`], [`Host::start`]) is
    /// named in the audit log (default `library`; the CLI says `cli`).
    pub fn peer(mut self, peer: impl Into<String>) -> Self {
        self.peer = Some(peer.into());
        self
    }

    /// Through what an approval reaches the host's own session, as its
    /// audit records say (default `caller`; the CLI says `flag`).
    pub fn approved_through(mut self, approver: &'static str) -> Self {
        self.approver = Some(approver);
        self
    }

    /// How policy components are pulled from OCI registries (a required
    /// signature key, plain-HTTP registries), for
    /// [`PolicySource::Registry`] here and in [`Host::reload`].
    pub fn registry(mut self, options: RegistryOptions) -> Self {
        self.registry = options;
        self
    }

    /// Probe the sandbox runner on a background thread as soon as the host
    /// is built, instead of letting the first confined run be its probe.
    /// Runs do not wait for a probe either way (the first run tries the
    /// chosen runner and moves down the ladder only if it did not start the
    /// command and its probe fails too); this is for a long-lived host
    /// that wants the verdict settled before work arrives, and for
    /// background tasks, which probe before their first plan otherwise.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// let host = cordon::Host::builder().probe_early().build()?;
    /// # Ok(()) }
    /// ```
    pub fn probe_early(mut self) -> Self {
        self.probe_early = true;
        self
    }

    /// Whether runs get their own cgroup (default: wherever the host can
    /// make one; see [`crate::process::cgroup`]).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// use cordon::process::cgroup::CgroupChoice;
    /// let delegated = "/sys/fs/cgroup/agents.slice/cordon.service/runs";
    /// let host = cordon::Host::builder()
    ///     .cgroups(CgroupChoice::Parent(delegated.into()))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn cgroups(mut self, choice: CgroupChoice) -> Self {
        self.cgroups = choice;
        self
    }

    /// Bound what the host's sessions hold at once (default:
    /// [`SessionLimits::default`]); past a bound a run or start is `BUSY`.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// let limits = cordon::SessionLimits { max_session_runs: 4, ..Default::default() };
    /// let host = cordon::Host::builder().session_limits(limits).build()?;
    /// # Ok(()) }
    /// ```
    pub fn session_limits(mut self, limits: SessionLimits) -> Self {
        self.session_limits = Some(limits);
        self
    }

    /// How many threads run the policy calls of the host's runs (default
    /// 8, started as runs need them): a slow call holds one of them, never
    /// the others' runs. `0` runs each call on the thread that awaits the
    /// run — for a one-shot host that runs one command and exits (the
    /// CLI's `cordon run`), which then starts no thread and makes no hop.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// let host = cordon::Host::builder().policy_threads(16).build()?;
    /// # Ok(()) }
    /// ```
    pub fn policy_threads(mut self, threads: usize) -> Self {
        self.policy_threads = Some(threads);
        self
    }

    /// The host runs one command and exits (the CLI's `cordon run`):
    /// policy calls run on the awaiting thread (as `policy_threads(0)`),
    /// and nothing is prepared for a next run (on cgroup v1, the run's
    /// cgroup is made ahead, and no other). A host that runs more still
    /// works, paying at each run what was not prepared.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// let host = cordon::Host::builder().one_run().build()?;
    /// # Ok(()) }
    /// ```
    pub fn one_run(mut self) -> Self {
        self.one_run = true;
        self.policy_threads = Some(0);
        self
    }

    /// The one request a [`one_run`](Self::one_run) host will run: its
    /// runner is started now for the grant it will most likely get, and
    /// builds its sandbox while the host loads the policy component; the
    /// run takes it when its own checked launch has the same runner, else
    /// it is ended unused (see `run/ahead.rs`). Build it inside a tokio
    /// runtime (its exit is watched there).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// let request = cordon::ExecRequest::new("cargo test");
    /// let runtime = tokio::runtime::Runtime::new().unwrap();
    /// let _inside = runtime.enter();
    /// let host = cordon::Host::builder().one_run().expecting(&request).build()?;
    /// # Ok(()) }
    /// ```
    pub fn expecting(mut self, request: &ExecRequest) -> Self {
        self.expecting = Some(request.clone());
        self
    }

    /// Each session keeps one spare runner for its next foreground run
    /// (default: off): after a run, cordon's namespace runner is started
    /// for the grant that run was planned with and builds its sandbox
    /// while the client reads the reply; the session's next run with the
    /// same runner is handed the built sandbox (see `run/ahead.rs`). Costs
    /// an idle process and its cgroup per session; needs cgroups (no spare
    /// without) and a tokio runtime. `cordon serve` and `cordon mcp` keep
    /// spares unless `[serve] spare_runners = false`; a one-run host never
    /// does.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// let host = cordon::Host::builder().spare_runners(true).build()?;
    /// # Ok(()) }
    /// ```
    pub fn spare_runners(mut self, keep: bool) -> Self {
        self.spare_runners = keep;
        self
    }

    /// Load the policy component and build the host.
    ///
    /// ```no_run
    /// # fn demo() {
    /// match cordon::Host::builder().build() {
    ///     Ok(host) => println!("policy: {}", host.policy_info().name),
    ///     Err(err) => eprintln!("cannot start cordon: {err}"),
    /// }
    /// # }
    /// ```
    pub fn build(self) -> Result<Host, BuildError> {
        let source = self.policy.unwrap_or(PolicySource::Embedded);
        // The deployed component is protected wherever a run may write.
        let policy_file = source.file();
        let audit = self
            .audit_log
            .map(AuditLog::open_with)
            .transpose()?
            .map(Arc::new);
        let deployment = match self.deployment {
            Some(deployment) => deployment,
            None => Deployment::in_dir(std::env::current_dir().map_err(BuildError::Workdir)?),
        };
        // The default spill root is hidden from every confined run; an
        // embedder's own parent is the embedder's to place.
        let (spill_parent, hide_spills) = match self.spill_parent {
            Some(parent) => (parent, None),
            None => {
                let root = crate::process::spill::default_root().map_err(BuildError::SpillRoot)?;
                (root.clone(), Some(root))
            }
        };
        let confiner = match self.confiner {
            Some(confiner) => confiner,
            None => {
                let mut hidden: Vec<PathBuf> = hide_spills.into_iter().collect();
                hidden.extend(self.hidden);
                hidden.extend(self.cache.as_ref().map(|c| c.path().to_path_buf()));
                // The audit log holds every client's commands: no run reads it.
                hidden.extend(audit.iter().flat_map(|log| log.hidden_paths()));
                let protected = deployment.protected.iter().cloned().chain(policy_file);
                host_sandbox(self.sandbox.unwrap_or_default(), hidden, protected)
            }
        };
        if self.probe_early {
            let probing = confiner.clone();
            // A failure to start the thread only means the probe runs
            // lazily, as it would without this option.
            let _ = std::thread::Builder::new()
                .name("cordon-probe".into())
                .spawn(move || probing.verify());
        }
        // The one run's runner first: its thread confines the grant while
        // this one finds the cgroups, and its sandbox is built while the
        // component loads, on the other CPU.
        let (cgroups_found, cgroups_for_ahead) = std::sync::mpsc::sync_channel(1);
        let ahead = match (&self.expecting, self.one_run) {
            (Some(request), true) => crate::run::ahead::Ahead::start(
                confiner.clone(),
                cgroups_for_ahead,
                deployment.clone(),
                request.clone(),
            ),
            _ => Default::default(),
        };
        // Before the component loads: on v1 the first runs' cgroups are
        // staged by a background thread meanwhile.
        let cgroups = match &self.cgroups {
            CgroupChoice::Off => Err("turned off by the operator".to_owned()),
            CgroupChoice::Auto => Cgroups::detect(None, self.one_run),
            CgroupChoice::Parent(parent) => Cgroups::detect(Some(parent), self.one_run),
        }
        .map(Arc::new);
        let _ = cgroups_found.send(cgroups.as_ref().ok().cloned());
        let mut engine = match self.one_run {
            true => PolicyEngine::for_one_run()?,
            false => PolicyEngine::new()?,
        };
        if let Some(cache) = self.cache {
            engine = engine.with_cache(cache);
        }
        let limits = self.limits.unwrap_or_default();
        let policy = source.load(&engine, limits.clone(), &self.registry, &deployment)?;
        let identity = policy.identity();
        tracing::info!(
            name = %identity.name,
            version = %identity.version,
            world = %identity.world,
            digest = %identity.digest,
            reference = ?identity.reference,
            settings = ?identity.settings,
            compiled = policy.compiled(),
            "policy component loaded"
        );
        let core = Arc::new(HostCore {
            registry: self.registry,
            audit,
            cgroups,
            policy: RwLock::new(Arc::new(policy)),
            limits,
            confiner,
            deployment: Arc::new(deployment),
            spill_parent,
            process: self.process.unwrap_or_default(),
            env: Arc::new(self.env.unwrap_or_default()),
            admission: Arc::new(Admission::new(self.session_limits.unwrap_or_default())),
            pool: Arc::new(
                PolicyPool::new(self.policy_threads.unwrap_or(DEFAULT_POLICY_THREADS))
                    .map_err(BuildError::Threads)?,
            ),
            engine,
            ahead: Arc::new(ahead),
            spare_runners: self.spare_runners && !self.one_run,
            credentials: self.credentials.into(),
        });
        Ok(Host {
            session: Session::new(core.clone())
                .with_peer(self.peer.unwrap_or_else(|| "library".to_owned()))
                .approved_through(self.approver.unwrap_or("caller")),
            core,
        })
    }
}

/// A cordon host: runs shell commands under the deployment's sandbox, with
/// policy from a Wasm component.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use cordon::{ExecRequest, Host, SandboxMode, SandboxPolicy};
///
/// let host = Host::builder().build()?;
/// let request = ExecRequest::new("ls -la")
///     .with_policy(SandboxPolicy::new(SandboxMode::ReadOnly, "/srv/project"));
/// let result = host.run(request).await?;
/// println!("exit {:?}, denied {:?}", result.exit_code, result.sandbox.map(|s| s.denied));
/// # Ok(()) }
/// ```
pub struct Host {
    core: Arc<HostCore>,
    /// The session behind the host's own `run`, `start` and task methods.
    session: Session,
}

impl Host {
    /// Start configuring a host.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), cordon::BuildError> {
    /// let host = cordon::Host::builder().build()?; // embedded bash-sandbox, this directory
    /// # Ok(()) }
    /// ```
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// What the active policy component says about itself.
    ///
    /// ```no_run
    /// # fn demo(host: cordon::Host) {
    /// let info = host.policy_info();
    /// println!("{} {} runs {}", info.name, info.version, info.shell);
    /// # }
    /// ```
    pub fn policy_info(&self) -> ExecutorInfo {
        self.core.active_policy().info().clone()
    }

    /// Which component is in force: its name, version, world, digest and,
    /// when pulled from a registry, the pinned reference.
    pub fn policy_identity(&self) -> crate::policy::PolicyIdentity {
        self.core.active_policy().identity()
    }

    /// A new session: its own background tasks and spill files, over this
    /// host's policy, sandbox and deployment. Ending it (dropping it, or
    /// [`Session::shutdown`]) ends its tasks and nothing else — which is
    /// what a server gives each connection.
    ///
    /// ```no_run
    /// # async fn demo(host: cordon::Host) -> Result<(), cordon::RunError> {
    /// let alice = host.session();
    /// let bob = host.session();
    /// let task = alice.start(cordon::ExecRequest::new("make")).await?;
    /// assert!(bob.task(task.id()).is_none()); // bob cannot see alice's task
    /// alice.shutdown().await;                 // bob's tasks run on
    /// # Ok(()) }
    /// ```
    pub fn session(&self) -> Session {
        Session::new(self.core.clone())
    }

    /// Replace the policy component. The new one is loaded and validated
    /// first; if that fails the previous one stays active and the error
    /// says why. Runs and tasks already under way finish with the version
    /// that planned them.
    ///
    /// ```no_run
    /// # fn demo(host: cordon::Host) {
    /// use cordon::PolicySource;
    /// match host.reload(PolicySource::File("/etc/cordon/policy-v2.wasm".into())) {
    ///     Ok(info) => println!("now running {} {}", info.name, info.version),
    ///     Err(err) => eprintln!("kept the previous policy: {err}"),
    /// }
    /// # }
    /// ```
    pub fn reload(&self, source: PolicySource) -> Result<ExecutorInfo, BuildError> {
        let core = &self.core;
        let policy = source.load(
            &core.engine,
            core.limits.clone(),
            &core.registry,
            &core.deployment,
        )?;
        let info = policy.info().clone();
        tracing::info!(name = %info.name, version = %info.version, digest = %policy.digest(), "policy component reloaded");
        *core.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
        Ok(info)
    }

    /// Which sandbox backend confines runs, its enforcement, and why each
    /// rung of the ladder is or is not usable (probing on first use). None
    /// for a custom confiner without a ladder.
    ///
    /// ```no_run
    /// # fn demo(host: cordon::Host) {
    /// if let Some(probe) = host.probe() {
    ///     println!("backend {:?}", probe.backend);
    ///     for rung in &probe.rungs {
    ///         println!("  {:?}: {}", rung.backend, rung.reason);
    ///     }
    /// }
    /// # }
    /// ```
    pub fn probe(&self) -> Option<Probe> {
        self.core.confiner.probe()
    }

    /// What contains this host's runs and bounds them: the cgroup
    /// hierarchy and where, or the launcher's supervision and `RLIMIT_*`
    /// fallback (and why there is no cgroup); the deployment's limits.
    ///
    /// ```no_run
    /// # fn demo(host: cordon::Host) {
    /// let containment = host.containment();
    /// println!("{}: {}", containment.mechanism, containment.detail);
    /// # }
    /// ```
    pub fn containment(&self) -> Containment {
        Containment::of(
            self.core.cgroups.as_deref().map_err(String::as_str),
            &self.core.deployment.limits,
        )
    }

    /// The deployment this host runs under.
    ///
    /// ```no_run
    /// # fn demo(host: cordon::Host) {
    /// println!("ceiling: {}", host.deployment().max_mode);
    /// # }
    /// ```
    pub fn deployment(&self) -> &Deployment {
        &self.core.deployment
    }

    /// Run `request` in the foreground and return its result.
    ///
    /// ```no_run
    /// # async fn demo(host: cordon::Host) -> Result<(), cordon::RunError> {
    /// use cordon::{ExecRequest, SandboxMode, SandboxPolicy};
    /// let request = ExecRequest::new("cargo test")
    ///     .with_policy(SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/srv/project"))
    ///     .with_timeout_ms(60_000);
    /// let result = host.run(request).await?;
    /// println!("exit {:?}: {}", result.exit_code, result.stdout.text);
    /// # Ok(()) }
    /// ```
    pub async fn run(&self, request: ExecRequest) -> Result<ExecResult, RunError> {
        self.run_with(request, RunOptions::default()).await
    }

    /// Run `request` with per-run options (e.g. streaming output).
    ///
    /// ```no_run
    /// # async fn demo(host: cordon::Host) -> Result<(), cordon::RunError> {
    /// use cordon::{CancellationToken, ExecRequest, RunOptions};
    /// let abort = CancellationToken::new();
    /// let options = RunOptions { sink: None, abort: Some(abort.clone()) };
    /// // abort.cancel() from elsewhere terminates the command's process group.
    /// let result = host.run_with(ExecRequest::new("sleep 5"), options).await?;
    /// assert!(result.aborted || result.exit_code == Some(0));
    /// # Ok(()) }
    /// ```
    pub async fn run_with(
        &self,
        request: ExecRequest,
        options: RunOptions,
    ) -> Result<ExecResult, RunError> {
        self.session.run_with(request, options).await
    }

    /// Start `request` as a background task and return its handle at once.
    ///
    /// Must be called within a tokio runtime (the task is followed by a
    /// tokio task). No timeout applies unless the request names one.
    ///
    /// ```no_run
    /// # async fn demo(host: cordon::Host) -> Result<(), cordon::RunError> {
    /// let task = host.start(cordon::ExecRequest::new("make -j2")).await?;
    /// let first = task.read();          // consuming: only what is new
    /// let done = task.wait(None).await; // facts are stamped before this returns
    /// println!("{first:?} {:?} {:?}", done.status, done.sandbox);
    /// # Ok(()) }
    /// ```
    pub async fn start(&self, request: ExecRequest) -> Result<TaskHandle, RunError> {
        self.session.start(request).await
    }

    /// The host's session bounds.
    pub fn session_limits(&self) -> SessionLimits {
        self.core.admission.limits
    }

    /// What the host's sessions hold right now.
    pub fn load(&self) -> Load {
        self.core.admission.load()
    }

    /// The policy threads: how many, and how many are busy now.
    pub fn policy_threads(&self) -> (usize, usize) {
        (self.core.pool.threads(), self.core.pool.busy())
    }

    /// A session whose runs get `deployment` instead of the host's: for a
    /// client the operator bounds more tightly. Errors when `deployment`
    /// is wider than the host's in any ceiling.
    pub fn session_within(&self, deployment: Deployment) -> Result<Session, String> {
        deployment.within(&self.core.deployment)?;
        Ok(Session::new(self.core.clone()).with_deployment(deployment))
    }

    /// The background task with this id, in the host's own session.
    ///
    /// ```no_run
    /// # fn demo(host: cordon::Host, id: cordon::TaskId) {
    /// if let Some(task) = host.task(id) {
    ///     println!("{:?}", task.snapshot().status);
    /// }
    /// # }
    /// ```
    pub fn task(&self, id: TaskId) -> Option<TaskHandle> {
        self.session.task(id)
    }

    /// Every background task of the host's own session, oldest first.
    ///
    /// ```no_run
    /// # fn demo(host: cordon::Host) {
    /// for task in host.tasks() {
    ///     println!("{} {:?} {}", task.id, task.status, task.command);
    /// }
    /// # }
    /// ```
    pub fn tasks(&self) -> Vec<TaskSnapshot> {
        self.session.tasks()
    }

    /// Forget a settled task, freeing its spill files. False for an
    /// unknown or running task.
    ///
    /// ```no_run
    /// # async fn demo(host: cordon::Host, id: cordon::TaskId) {
    /// if let Some(task) = host.task(id) {
    ///     task.wait(None).await;
    ///     assert!(host.remove_task(id));
    /// }
    /// # }
    /// ```
    pub fn remove_task(&self, id: TaskId) -> bool {
        self.session.remove_task(id)
    }

    /// Terminate every live task group of the host's own session (with the
    /// kill grace) and wait for each task to settle. Dropping the host
    /// instead `SIGKILL`s them. Sessions from [`Host::session`] end on their
    /// own ([`Session::shutdown`], or when dropped).
    ///
    /// ```no_run
    /// # async fn demo(host: cordon::Host) {
    /// host.shutdown().await; // every live task group terminated and settled
    /// # }
    /// ```
    pub async fn shutdown(&self) {
        self.session.shutdown().await;
    }
}

/// The sandbox ladder of a host built from the operator's `config`: the
/// host's own state (`hidden`: the spill root, the component cache, the
/// verdicts) is no run's business, wherever it lies in a writable root — a
/// command that could write the component cache (its MAC key is there)
/// would have the next host run native code of its choosing, and one that
/// could write a verdict would move runs down the ladder — and the
/// deployment's `protected` paths (the deployed component too) are
/// protected wherever a run may write.
fn host_sandbox(
    mut config: SandboxConfig,
    hidden: Vec<PathBuf>,
    protected: impl IntoIterator<Item = PathBuf>,
) -> Arc<dyn Confine> {
    config.hidden.extend(hidden);
    if let Some(verdicts) = &config.verdicts {
        // Made now, so that no run can make it first.
        if verdicts.prepare().is_ok() {
            config.hidden.push(verdicts.path().to_path_buf());
        } else {
            config.verdicts = None;
        }
    }
    config.protected.extend(protected);
    Arc::new(Sandbox::with_config(config))
}

impl BuildError {
    /// The stable error code: `POLICY_FAILED` for every failure to load a
    /// component (unreadable, unknown, invalid, above the ceiling, its
    /// settings overridden unasked), `WORKDIR` for an
    /// unusable working directory.
    pub fn code(&self) -> ErrorCode {
        match self {
            BuildError::ReadPolicy { .. }
            | BuildError::Builtin(_)
            | BuildError::Registry(_)
            | BuildError::Policy(_)
            | BuildError::SettingsOverride { .. }
            | BuildError::AboveCeiling { .. } => ErrorCode::PolicyFailed,
            BuildError::Workdir(_) => ErrorCode::Workdir,
            BuildError::Audit(_) => ErrorCode::SpawnFailed,
            BuildError::Threads(_) | BuildError::SpillRoot(_) => ErrorCode::SpawnFailed,
        }
    }

    /// The code and the stable fields of this error (see [`Details`]);
    /// every failure to load says `phase: load`.
    pub fn details(&self) -> Details {
        let fields = match self {
            BuildError::Policy(load) => return load.details(),
            BuildError::ReadPolicy { path, .. } => {
                serde_json::json!({ "phase": "load", "path": path })
            }
            BuildError::Registry(_) => serde_json::json!({ "phase": "pull" }),
            BuildError::Builtin(_) => serde_json::json!({ "phase": "load" }),
            BuildError::SettingsOverride { reference } => {
                serde_json::json!({ "phase": "load", "reference": reference })
            }
            BuildError::AboveCeiling { mode, ceiling, .. } => {
                serde_json::json!({ "phase": "load", "mode": mode, "ceiling": ceiling })
            }
            BuildError::Workdir(_)
            | BuildError::Threads(_)
            | BuildError::SpillRoot(_)
            | BuildError::Audit(_) => serde_json::json!({}),
        };
        crate::error::details(self.code(), fields)
    }
}
