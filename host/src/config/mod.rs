//! `cordon.toml`: the operator's deployment configuration.
//!
//! ```toml
//! default_mode = "read-only"          # read-only | workspace-write | danger-full-access
//! workspace_root = "/srv/project"     # default: the working directory
//! max_mode = "workspace-write"        # the ceiling; danger-full-access must be allowed here
//! allowed_roots = ["/srv", "/home/ci"] # every writable workspace must lie inside one
//! backend = "auto"                    # auto | namespaces | bwrap | landlock | seatbelt
//! probe_timeout_ms = 5000             # bound on each runner probe; positive
//! landlock_launcher = "/usr/local/bin/cordon"  # executable with the launcher mode
//! bwrap_path = "/usr/bin/bwrap"       # default: found in /usr/bin, /bin, … (never PATH)
//! kernel_denials = true               # Landlock runs' denials read from the kernel's audit (when it can)
//! runner_command = ["/opt/sb", "--mode", "{mode}", "--root", "{workspace}", "--"]
//! runner_failure_signatures = ["sb: "]         # both runner keys or neither
//! max_network = "full"                # none (default) | full | ["github.com:22", "*.npmjs.org:443"]
//! default_network = "none"            # within max_network; a grant may widen it per command
//! exposable_sockets = ["~/.ssh/agent.sock"]  # host sockets a grant may expose
//! liftable_protected = [".git"]       # protected defaults a grant may lift
//!
//! [env]                               # which host variables reach commands
//! inherit = "all"                     # all | core (PATH, HOME, LANG, LC_*, …) | none
//! include = ["CI_*"]                  # let through even past the credential scrub
//! exclude = ["*_INTERNAL"]            # always withheld
//!
//! [limits]                            # every run's; a request may ask for less
//! pids = 1024                         # processes at once (default 1024; "unlimited")
//! memory_bytes = 4294967296           # default: unlimited
//! cpu_weight = 100                    # 1–10000, relative; default: the kernel's
//! cgroup = "auto"                     # auto | off: a cgroup per run where possible
//! cgroup_parent = "/sys/fs/cgroup/agents.slice/runs"  # cgroup v2: a delegated parent
//!
//! audit_log = "/var/log/cordon/audit.jsonl"  # one chained JSON line per run, refusal, reload (0600)
//! audit_required = true               # runs refuse while the log cannot be written
//! audit_max_bytes = 104857600         # rotate into audit.jsonl.d/ past this size
//! audit_rotate_secs = 86400           # … or at this age
//! audit_signing_key = "/etc/cordon/audit.pem"  # seal each rotated file (PEM, P-256)
//!
//! [policy]                            # the policy component (a --policy flag wins)
//! file = "rules-policy.wasm"          # relative to this file; or:
//! # reference = "oci://registry.lan/policies/rules:1.2"
//! # builtin = "rules-policy"          # one shipped inside the binary
//! settings = "rules.toml"             # a settings file (relative to this file), or inline:
//! # [policy.settings]                 # handed to the component as JSON (validate-settings)
//! # opaque = "deny"
//!
//! [mcp]                               # `cordon mcp`'s tool results
//! structured_content = false          # the facts as structured content beside the text
//! output_bytes = 8192                 # output one result carries (head and tail)
//!
//! [registry]                          # policies pulled with --policy oci://…
//! public_key = "/etc/cordon/policy.pub"  # require a signature that verifies under it
//! insecure = ["registry.lan:5000"]    # plain HTTP besides loopback registries
//! connect_timeout_secs = 10           # connecting to a registry (default 10)
//! timeout_secs = 120                  # a whole pull or push (default 120)
//! allow_settings_override = false     # [policy] settings may replace a whole policy's own
//!
//! inspect = ["api.github.com:443"]   # HTTPS the proxy reads (and decides request by request)
//!
//! [credentials.github]                # a credential no command holds (credentials.rs)
//! hosts = ["api.github.com:443"]
//! from_env = "GITHUB_TOKEN"           # or from_file, or from_command
//! env = "GITHUB_TOKEN"                # where a proxied run finds its placeholder
//!
//! [serve]                             # `cordon serve`: bounds, socket access (serve.rs)
//! max_session_runs = 16
//! ```
//!
//! Every key is optional and validated; an unknown key, a wrong type or an
//! inconsistent combination is an error that names the key. The file is
//! read only when named explicitly (never picked up from the working
//! directory, which a command could write to).

pub mod credentials;
mod serve;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::model::{
    Deployment, Endpoint, Network, PROTECTED_DEFAULTS, RunLimits, SandboxMode, SandboxPolicy,
};
use crate::process::cgroup::CgroupChoice;
use crate::process::env::{EnvPolicy, Inherit};
use crate::sandbox::{BackendChoice, RunnerCommand, SandboxConfig};
pub use serve::{ServeConfig, group_id};

/// A configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {}: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (the operating system's error, or what the file is not).
        reason: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown key or a wrong type.
    #[error("config {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said (it names the key and line).
        message: String,
    },
    /// A key (named at run time, e.g. `serve.uid.1000.max_mode`) has a
    /// value cordon cannot use.
    #[error("config {}: {key}: {message}", path.display())]
    InvalidKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A key has a value cordon cannot use.
    #[error("config {}: {key}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key.
        key: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
}

/// The file as written: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The default mode for requests that bring no policy.
    pub default_mode: Option<String>,
    /// The default workspace root.
    pub workspace_root: Option<PathBuf>,
    /// The ceiling.
    pub max_mode: Option<String>,
    /// Directories every writable workspace must lie inside.
    pub allowed_roots: Option<Vec<PathBuf>>,
    /// `auto` or a pinned backend.
    pub backend: Option<String>,
    /// Bound on each probe, in milliseconds.
    pub probe_timeout_ms: Option<u64>,
    /// The executable with cordon's launcher modes (the namespace runner, bwrap's init, the Landlock launcher).
    pub landlock_launcher: Option<PathBuf>,
    /// The bwrap binary.
    pub bwrap_path: Option<PathBuf>,
    /// Have Landlock log runs' denials and read them from the kernel's
    /// audit where the host can (default true).
    pub kernel_denials: Option<bool>,
    /// The operator's runner command.
    pub runner_command: Option<Vec<String>>,
    /// Stderr signatures of the runner's own failures.
    pub runner_failure_signatures: Option<Vec<String>>,
    /// The environment policy.
    pub env: Option<EnvFile>,
    /// Per-run resource limits and containment.
    pub limits: Option<LimitsFile>,
    /// The widest network a grant may have: `"none"`, `"full"` or a list
    /// of endpoints (`"github.com:22"`, `"*.npmjs.org:443"`).
    pub max_network: Option<toml::Value>,
    /// The network of requests that bring no policy (default `"none"`).
    pub default_network: Option<toml::Value>,
    /// Host unix sockets a grant may expose.
    pub exposable_sockets: Option<Vec<PathBuf>>,
    /// Protected defaults a grant may lift (`".git"`).
    pub liftable_protected: Option<Vec<String>>,
    /// The policy component's own configuration.
    pub policy: Option<PolicyFile>,
    /// `cordon serve`'s bounds and socket access.
    pub serve: Option<serve::ServeFile>,
    /// `cordon mcp`'s results.
    pub mcp: Option<McpFile>,
    /// The audit log: one JSON line per run and per refusal.
    pub audit_log: Option<PathBuf>,
    /// Runs refuse while the audit log cannot be written.
    pub audit_required: Option<bool>,
    /// Rotate the audit log once it would pass this many bytes.
    pub audit_max_bytes: Option<u64>,
    /// Rotate the audit log once it is this many seconds old.
    pub audit_rotate_secs: Option<u64>,
    /// Seal each rotated audit file with this key (PEM, P-256).
    pub audit_signing_key: Option<PathBuf>,
    /// How policy components are pulled from OCI registries.
    pub registry: Option<RegistryFile>,
    /// Credentials a command never holds, by name.
    pub credentials: Option<std::collections::BTreeMap<String, credentials::CredentialFile>>,
    /// Endpoints whose HTTPS the proxy inspects wherever a grant allows
    /// them (`"api.github.com:443"`).
    pub inspect: Option<Vec<String>>,
}

/// `[registry]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryFile {
    /// A PEM public key every pulled component must be signed under.
    pub public_key: Option<PathBuf>,
    /// Registries reached over plain HTTP besides loopback ones.
    pub insecure: Option<Vec<String>>,
    /// Seconds a connection to a registry may take.
    pub connect_timeout_secs: Option<u64>,
    /// Seconds a whole pull or push may take.
    pub timeout_secs: Option<u64>,
    /// Whether the deployment's own settings (`[policy] settings`,
    /// `--settings`) may replace those a pulled whole policy carries
    /// (default false: a host given both refuses to start).
    pub allow_settings_override: Option<bool>,
}

/// `[policy]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// The policy component's file (relative to the config file).
    pub file: Option<PathBuf>,
    /// The policy component in a registry: `oci://REGISTRY/REPO[:TAG][@sha256:…]`.
    pub reference: Option<String>,
    /// A policy component shipped inside the binary, by name (`rules-policy`).
    pub builtin: Option<String>,
    /// `[policy.settings]` (a table, handed to the component as JSON), or
    /// the path of a settings file (TOML, or JSON for `.json`; relative to
    /// the config file).
    pub settings: Option<toml::Value>,
}

/// `[mcp]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpFile {
    /// Send each result's facts as MCP structured content beside the text.
    pub structured_content: Option<bool>,
    /// Bytes of output one tool result carries (head and tail).
    pub output_bytes: Option<usize>,
}

/// `[limits]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    /// Processes at once, or `"unlimited"`.
    pub pids: Option<LimitValue>,
    /// Memory in bytes, or `"unlimited"`.
    pub memory_bytes: Option<LimitValue>,
    /// Relative CPU weight, 1–10000.
    pub cpu_weight: Option<u64>,
    /// `auto` or `off`.
    pub cgroup: Option<String>,
    /// A delegated cgroup v2 directory to make runs' cgroups in.
    pub cgroup_parent: Option<PathBuf>,
}

/// A limit: a positive number, or the word `unlimited`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum LimitValue {
    /// The number.
    Number(u64),
    /// `unlimited`.
    Word(String),
}

/// `[env]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvFile {
    /// `all`, `core` or `none`.
    pub inherit: Option<String>,
    /// Patterns let through.
    pub include: Option<Vec<String>>,
    /// Patterns withheld.
    pub exclude: Option<Vec<String>>,
}

/// A validated configuration.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Default mode.
    pub default_mode: Option<SandboxMode>,
    /// Default workspace root.
    pub workspace_root: Option<PathBuf>,
    /// Ceiling.
    pub max_mode: Option<SandboxMode>,
    /// Directories every writable workspace must lie inside (empty: any
    /// root that passes the host's own checks).
    pub allowed_roots: Vec<PathBuf>,
    /// The sandbox ladder's configuration.
    pub sandbox: SandboxConfig,
    /// Which host variables reach commands.
    pub env: EnvPolicy,
    /// Every run's limits, the most a request may ask for.
    pub limits: RunLimits,
    /// Whether runs get their own cgroup.
    pub cgroups: CgroupChoice,
    /// The widest network a grant may have (default `none`).
    pub max_network: Option<Network>,
    /// The network of the deployment's default policy.
    pub default_network: Network,
    /// Host sockets a grant may expose.
    pub exposable_sockets: Vec<PathBuf>,
    /// Protected defaults a grant may lift.
    pub liftable_protected: Vec<String>,
    /// The component's settings as JSON text (`{}` when none).
    pub settings: String,
    /// The policy component `[policy]` names (a flag's `--policy` wins).
    pub policy: Option<crate::host::PolicySource>,
    /// The operator's files of `[policy]` (component, settings): protected
    /// in every run.
    pub policy_files: Vec<PathBuf>,
    /// `[mcp]`.
    pub mcp: crate::mcp::McpOptions,
    /// The file this configuration was read from: protected in every run.
    pub path: Option<PathBuf>,
    /// `[serve]`.
    pub serve: ServeConfig,
    /// Where the audit log is written (none: no audit log).
    pub audit_log: Option<PathBuf>,
    /// The audit log as the operator keeps it (required, rotated, sealed).
    pub audit: Option<crate::audit::AuditOptions>,
    /// `[registry]`, the public key read.
    pub registry: crate::registry::RegistryOptions,
    /// The file of `registry.public_key`: protected in every run.
    pub public_key_path: Option<PathBuf>,
    /// `[credentials.NAME]`, their values read; their files are hidden
    /// from every run.
    pub credentials: credentials::Credentials,
    /// `inspect`, with every credential's hosts.
    pub inspect: Vec<Endpoint>,
}

impl Config {
    /// Read and validate `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = read_text(path)?;
        let mut config = Self::parse(&text, path)?;
        config.path = Some(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
        Ok(config)
    }

    /// Validate `text` (named `path` in errors): each table by a function
    /// of its own, each refusal naming its key.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let file: ConfigFile = toml::from_str(text).map_err(|err| ConfigError::Parse {
            path: path.to_path_buf(),
            message: err.to_string().trim().to_owned(),
        })?;
        let invalid = |(key, message): Invalid| ConfigError::Invalid {
            path: path.to_path_buf(),
            key,
            message,
        };
        let (default_mode, max_mode) = modes(file.default_mode, file.max_mode).map_err(invalid)?;
        let backend = backend_choice(file.backend).map_err(invalid)?;
        let probe_timeout = probe_timeout(file.probe_timeout_ms).map_err(invalid)?;
        let runner =
            runner(file.runner_command, file.runner_failure_signatures).map_err(invalid)?;
        let env = file.env.map(env_policy).transpose().map_err(invalid)?;
        let env = env.unwrap_or_default();
        let (limits, cgroups) = run_limits(file.limits.unwrap_or_default()).map_err(invalid)?;
        let allowed_roots = file.allowed_roots.unwrap_or_default();
        absolute_paths(&allowed_roots, &file.bwrap_path, &file.landlock_launcher)
            .map_err(invalid)?;
        let (max_network, default_network) =
            networks(file.max_network, file.default_network).map_err(invalid)?;
        let exposable_sockets = exposable(file.exposable_sockets).map_err(invalid)?;
        let liftable_protected = liftable(file.liftable_protected).map_err(invalid)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let (policy, policy_files, settings) =
            policy_keys(file.policy.unwrap_or_default(), dir).map_err(invalid)?;
        let mcp = mcp_keys(file.mcp.unwrap_or_default(), file.workspace_root.is_some())
            .map_err(invalid)?;
        let serve = serve::parse(file.serve.unwrap_or_default()).map_err(|(key, message)| {
            ConfigError::InvalidKey {
                path: path.to_path_buf(),
                key,
                message,
            }
        })?;
        let audit_log = file.audit_log.clone();
        let audit = audit(AuditKeys {
            path: file.audit_log.as_deref(),
            required: file.audit_required,
            max_bytes: file.audit_max_bytes,
            rotate_secs: file.audit_rotate_secs,
            signing_key: file.audit_signing_key.as_deref(),
        })
        .map_err(invalid)?;
        let (registry, public_key_path) =
            registry(file.registry.unwrap_or_default()).map_err(invalid)?;
        let credentials =
            credentials::read(file.credentials.unwrap_or_default(), max_network.as_ref()).map_err(
                |(key, message)| ConfigError::InvalidKey {
                    path: path.to_path_buf(),
                    key,
                    message,
                },
            )?;
        let inspect =
            inspected(file.inspect, max_network.as_ref(), &credentials).map_err(invalid)?;
        if runner.is_some() && backend != BackendChoice::Auto {
            return Err(invalid((
                "backend",
                "a runner command replaces the ladder; remove backend or the runner keys".into(),
            )));
        }
        Ok(Config {
            default_mode,
            workspace_root: file.workspace_root,
            max_mode,
            allowed_roots,
            sandbox: SandboxConfig {
                backend,
                runner,
                probe_timeout,
                launcher: file.landlock_launcher,
                bwrap: file.bwrap_path,
                kernel_denials: file.kernel_denials.unwrap_or(true),
                protected: vec![],
                hidden: vec![],
                ..SandboxConfig::default()
            },
            env,
            limits,
            cgroups,
            max_network,
            default_network,
            exposable_sockets,
            liftable_protected,
            settings,
            policy,
            policy_files,
            mcp,
            path: None,
            serve,
            audit_log,
            audit,
            registry,
            public_key_path,
            credentials,
            inspect,
        })
    }

    /// A host builder with this configuration's deployment (in working
    /// directory `cwd`) and sandbox ladder.
    pub fn host_builder(&self, cwd: &Path) -> crate::host::HostBuilder {
        let builder = crate::host::Host::builder()
            .deployment(self.deployment(cwd))
            .sandbox(self.sandbox.clone())
            .env_policy(self.env.clone())
            .cgroups(self.cgroups.clone())
            .session_limits(self.serve.session_limits)
            .spare_runners(self.serve.spare_runners)
            .registry(self.registry.clone());
        let builder = match &self.audit_log {
            Some(_) => builder.audit(self.audit.clone().expect("parsed with audit_log")),
            None => builder,
        };
        let builder = (self.credentials.files.iter())
            .fold(builder, |builder, file| builder.hide_from_runs(file));
        let builder = builder.credentials(self.credentials.list.clone());
        builder.policy_threads(
            self.serve
                .policy_threads
                .unwrap_or(crate::policy::pool::DEFAULT_POLICY_THREADS),
        )
    }

    /// The deployment in working directory `cwd`.
    pub fn deployment(&self, cwd: &Path) -> Deployment {
        let mut deployment = Deployment::in_dir(cwd);
        deployment.policy = SandboxPolicy::new(
            self.default_mode.unwrap_or(SandboxMode::ReadOnly),
            self.workspace_root
                .clone()
                .unwrap_or_else(|| cwd.to_path_buf()),
        );
        if let Some(max) = self.max_mode {
            deployment.max_mode = max;
        }
        deployment.allowed_roots = self.allowed_roots.clone();
        deployment.limits = self.limits;
        if let Some(max) = &self.max_network {
            deployment.max_network = max.clone();
        }
        deployment.policy.network = self.default_network.clone();
        deployment.sockets = self.exposable_sockets.clone();
        deployment.liftable = self.liftable_protected.clone();
        if !self.settings.is_empty() {
            deployment.settings = self.settings.clone();
        }
        deployment.protected.extend(self.path.clone());
        deployment.protected.extend(self.public_key_path.clone());
        deployment
            .protected
            .extend(self.policy_files.iter().cloned());
        deployment.protected.extend(self.audit_log.clone());
        deployment.inspect = self.inspect.clone();
        deployment
    }
}

/// An operator's file as text: a bounded regular file, UTF-8.
fn read_text(path: &Path) -> Result<String, ConfigError> {
    let read_error = |reason| ConfigError::Read {
        path: path.to_path_buf(),
        reason,
    };
    let bytes =
        crate::files::read_regular(path, crate::files::MAX_CONFIG_BYTES).map_err(read_error)?;
    String::from_utf8(bytes).map_err(|_| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not UTF-8 text",
        ))
    })
}

/// A settings file for the policy component (`--settings FILE`): TOML, or
/// JSON when the name ends in `.json`; the component gets it as JSON text.
pub fn read_settings(path: &Path) -> Result<String, ConfigError> {
    let text = read_text(path)?;
    let parse = |message: String| ConfigError::Parse {
        path: path.to_path_buf(),
        message,
    };
    let value: serde_json::Value = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(|e| parse(e.to_string()))?
    } else {
        let table: toml::Table =
            toml::from_str(&text).map_err(|e| parse(e.to_string().trim().to_owned()))?;
        serde_json::to_value(table).map_err(|e| parse(e.to_string()))?
    };
    if !value.is_object() {
        return Err(parse("settings must be a table (a JSON object)".into()));
    }
    Ok(value.to_string())
}

/// A network ceiling as written: `"none"`, `"full"` or a list of endpoints.
pub fn network(value: &toml::Value) -> Result<Network, String> {
    match value {
        toml::Value::String(word) if word == "none" => Ok(Network::None),
        toml::Value::String(word) if word == "full" => Ok(Network::Full),
        toml::Value::Array(items) => items
            .iter()
            .map(|item| match item {
                toml::Value::String(text) => text.parse::<Endpoint>(),
                other => Err(format!("{other} is not an endpoint string")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Network::Allow),
        other => Err(format!(
            "{other} is not a network; write \"none\", \"full\" or a list like \
             [\"github.com:22\", \"*.npmjs.org:443\"]"
        )),
    }
}

/// A refused value: its key and why.
type Invalid = (&'static str, String);

/// `default_mode` and `max_mode`, the default no wider than the ceiling.
fn modes(
    default: Option<String>,
    max: Option<String>,
) -> Result<(Option<SandboxMode>, Option<SandboxMode>), Invalid> {
    let mode = |key, value: Option<String>| {
        value
            .map(|v| v.parse::<SandboxMode>().map_err(|e| (key, e.to_string())))
            .transpose()
    };
    let default_mode = mode("default_mode", default)?;
    let max_mode = mode("max_mode", max)?;
    if let (Some(default), Some(max)) = (default_mode, max_mode)
        && default > max
    {
        return Err((
            "default_mode",
            format!("\"{default}\" is wider than max_mode \"{max}\""),
        ));
    }
    Ok((default_mode, max_mode))
}

/// `backend`: a rung pinned, or the ladder.
fn backend_choice(backend: Option<String>) -> Result<BackendChoice, Invalid> {
    backend
        .map(|b| b.parse::<BackendChoice>().map_err(|e| ("backend", e)))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// `probe_timeout_ms`: positive.
fn probe_timeout(ms: Option<u64>) -> Result<Duration, Invalid> {
    match ms {
        Some(0) => Err(("probe_timeout_ms", "must be positive (milliseconds)".into())),
        Some(ms) => Ok(Duration::from_millis(ms)),
        None => Ok(crate::sandbox::DEFAULT_PROBE_TIMEOUT),
    }
}

/// `runner_command` with its `runner_failure_signatures`: both or neither.
fn runner(
    argv: Option<Vec<String>>,
    signatures: Option<Vec<String>>,
) -> Result<Option<RunnerCommand>, Invalid> {
    match (argv, signatures) {
        (None, None) => Ok(None),
        (Some(argv), Some(signatures)) => RunnerCommand::new(argv, signatures)
            .map(Some)
            .map_err(|e| ("runner_command", e)),
        (Some(_), None) => Err((
            "runner_failure_signatures",
            "runner_command needs runner_failure_signatures too (both or neither)".into(),
        )),
        (None, Some(_)) => Err((
            "runner_command",
            "runner_failure_signatures needs runner_command too (both or neither)".into(),
        )),
    }
}

/// `[env]`: what of the caller's environment reaches a command.
fn env_policy(env: EnvFile) -> Result<EnvPolicy, Invalid> {
    let inherit = match env.inherit.as_deref() {
        None | Some("all") => Inherit::All,
        Some("core") => Inherit::Core,
        Some("none") => Inherit::None,
        Some(other) => {
            return Err((
                "env.inherit",
                format!("unknown value {other:?}; expected all, core or none"),
            ));
        }
    };
    let patterns = |key, list: Option<Vec<String>>| {
        let list = list.unwrap_or_default();
        match list
            .iter()
            .find(|p| p.is_empty() || p.contains(['=', '\0']))
        {
            Some(bad) => Err((key, format!("{bad:?} is not a variable name pattern"))),
            None => Ok(list),
        }
    };
    Ok(EnvPolicy {
        inherit,
        include: patterns("env.include", env.include)?,
        exclude: patterns("env.exclude", env.exclude)?,
    })
}

/// `[limits]`: the run limits, and where runs' cgroups go.
fn run_limits(limits: LimitsFile) -> Result<(RunLimits, CgroupChoice), Invalid> {
    let limit = |key, value: Option<LimitValue>, default: Option<u64>| match value {
        None => Ok(default),
        Some(LimitValue::Number(0)) => Err((key, "must be positive (or \"unlimited\")".into())),
        Some(LimitValue::Number(n)) => Ok(Some(n)),
        Some(LimitValue::Word(word)) if word == "unlimited" => Ok(None),
        Some(LimitValue::Word(word)) => Err((
            key,
            format!("{word:?} is neither a number nor \"unlimited\""),
        )),
    };
    let run_limits = RunLimits {
        pids: limit("limits.pids", limits.pids, RunLimits::default().pids)?,
        memory_bytes: limit("limits.memory_bytes", limits.memory_bytes, None)?,
        cpu_weight: match limits.cpu_weight {
            Some(w @ 1..=10_000) => Some(w),
            Some(_) => return Err(("limits.cpu_weight", "must be 1..=10000".into())),
            None => None,
        },
    };
    let cgroups = match (limits.cgroup.as_deref(), limits.cgroup_parent) {
        (Some("off"), Some(_)) => {
            return Err((
                "limits.cgroup_parent",
                "names a parent for cgroups that limits.cgroup turns off".into(),
            ));
        }
        (Some("off"), None) => CgroupChoice::Off,
        (None | Some("auto"), Some(parent)) if parent.is_absolute() => CgroupChoice::Parent(parent),
        (None | Some("auto"), Some(parent)) => {
            return Err((
                "limits.cgroup_parent",
                format!("{} is not an absolute path", parent.display()),
            ));
        }
        (None | Some("auto"), None) => CgroupChoice::Auto,
        (Some(other), _) => {
            return Err((
                "limits.cgroup",
                format!("unknown value {other:?}; expected auto or off"),
            ));
        }
    };
    Ok((run_limits, cgroups))
}

/// `allowed_roots`, `bwrap_path` and `landlock_launcher`: absolute paths.
fn absolute_paths(
    allowed_roots: &[PathBuf],
    bwrap_path: &Option<PathBuf>,
    landlock_launcher: &Option<PathBuf>,
) -> Result<(), Invalid> {
    let paths = allowed_roots
        .iter()
        .map(|root| ("allowed_roots", root))
        .chain(bwrap_path.iter().map(|path| ("bwrap_path", path)))
        .chain(
            landlock_launcher
                .iter()
                .map(|path| ("landlock_launcher", path)),
        );
    for (key, path) in paths {
        if !path.is_absolute() {
            return Err((key, format!("{} is not an absolute path", path.display())));
        }
    }
    Ok(())
}

/// `max_network` and `default_network`, the default within the ceiling.
fn networks(
    max: Option<toml::Value>,
    default: Option<toml::Value>,
) -> Result<(Option<Network>, Network), Invalid> {
    let max_network = max
        .map(|value| network(&value).map_err(|e| ("max_network", e)))
        .transpose()?;
    let default_network = match default {
        None => Network::None,
        Some(value) => network(&value).map_err(|e| ("default_network", e))?,
    };
    if let Some(max) = &max_network
        && !default_network.within(max)
    {
        return Err((
            "default_network",
            format!("{default_network} is wider than max_network {max}"),
        ));
    }
    Ok((max_network, default_network))
}

/// `inspect`: endpoints within `max_network` (one outside it could never
/// be reached), and the hosts of every credential, which the proxy can
/// only send where it reads the requests.
fn inspected(
    inspect: Option<Vec<String>>,
    max_network: Option<&Network>,
    credentials: &credentials::Credentials,
) -> Result<Vec<Endpoint>, Invalid> {
    let ceiling = max_network.cloned().unwrap_or(Network::None);
    let mut endpoints = vec![];
    for text in inspect.unwrap_or_default() {
        let endpoint: Endpoint = text.parse().map_err(|err| ("inspect", err))?;
        if !Network::Allow(vec![endpoint.clone()]).within(&ceiling) {
            return Err((
                "inspect",
                format!("{text} is not within max_network ({ceiling})"),
            ));
        }
        endpoints.push(endpoint);
    }
    let bound = credentials
        .list
        .iter()
        .flat_map(|c| c.hosts.iter().cloned());
    endpoints.extend(bound);
    Ok(endpoints)
}

/// `exposable_sockets`: absolute paths (or `~/…`).
fn exposable(sockets: Option<Vec<PathBuf>>) -> Result<Vec<PathBuf>, Invalid> {
    let sockets = sockets.unwrap_or_default();
    match sockets
        .iter()
        .find(|p| !p.is_absolute() && !p.starts_with("~"))
    {
        Some(bad) => Err((
            "exposable_sockets",
            format!("{} is not an absolute path (or ~/…)", bad.display()),
        )),
        None => Ok(sockets),
    }
}

/// `liftable_protected`: protected defaults only.
fn liftable(names: Option<Vec<String>>) -> Result<Vec<String>, Invalid> {
    let names = names.unwrap_or_default();
    match names
        .iter()
        .find(|name| !PROTECTED_DEFAULTS.contains(&name.as_str()))
    {
        Some(bad) => Err((
            "liftable_protected",
            format!(
                "{bad:?} is not a protected default (those are {})",
                PROTECTED_DEFAULTS.join(", ")
            ),
        )),
        None => Ok(names),
    }
}

/// `[policy.settings]`, as the JSON the component is handed.
/// `[policy]`: the component it names (relative paths are the config
/// file's `dir`'s), the operator's files to protect, the settings as JSON.
fn policy_keys(
    policy: PolicyFile,
    dir: &Path,
) -> Result<(Option<crate::host::PolicySource>, Vec<PathBuf>, String), Invalid> {
    let mut files = vec![];
    let named = [
        policy.file.is_some(),
        policy.reference.is_some(),
        policy.builtin.is_some(),
    ];
    if named.iter().filter(|set| **set).count() > 1 {
        return Err((
            "policy.file",
            "more than one of policy.file, policy.reference and policy.builtin is set; \
             name the component once"
                .into(),
        ));
    }
    let source = if let Some(file) = policy.file {
        let file = dir.join(file);
        files.push(file.clone());
        Some(crate::host::PolicySource::File(file))
    } else if let Some(reference) = policy.reference {
        let parsed = crate::reference::PolicyRef::parse(&reference)
            .map_err(|e| ("policy.reference", e.to_string()))?;
        Some(crate::host::PolicySource::Registry(parsed))
    } else if let Some(name) = policy.builtin {
        crate::policy::builtin::named(&name).map_err(|e| ("policy.builtin", e.to_string()))?;
        Some(crate::host::PolicySource::Builtin(name))
    } else {
        None
    };
    let settings = match policy.settings {
        None => "{}".to_owned(),
        Some(toml::Value::Table(table)) => {
            serde_json::to_string(&table).map_err(|e| ("policy.settings", e.to_string()))?
        }
        Some(toml::Value::String(file)) => {
            let file = dir.join(file);
            files.push(file.clone());
            read_settings(&file).map_err(|e| ("policy.settings", e.to_string()))?
        }
        Some(_) => {
            return Err((
                "policy.settings",
                "a table of settings, or the path of a settings file".into(),
            ));
        }
    };
    Ok((source, files, settings))
}

/// `[mcp]`; `pinned` when the file names the workspace.
fn mcp_keys(mcp: McpFile, pinned: bool) -> Result<crate::mcp::McpOptions, Invalid> {
    let defaults = crate::mcp::McpOptions::default();
    let output_bytes = mcp.output_bytes.unwrap_or(defaults.output_bytes);
    if output_bytes < crate::mcp::output::MIN_OUTPUT_BYTES {
        return Err((
            "mcp.output_bytes",
            format!(
                "at least {} (the markers and a few lines of output)",
                crate::mcp::output::MIN_OUTPUT_BYTES
            ),
        ));
    }
    Ok(crate::mcp::McpOptions {
        structured_content: mcp.structured_content.unwrap_or(false),
        output_bytes,
        workspace_pinned: pinned,
    })
}

/// The audit keys of `cordon.toml`, as written.
struct AuditKeys<'a> {
    path: Option<&'a Path>,
    required: Option<bool>,
    max_bytes: Option<u64>,
    rotate_secs: Option<u64>,
    signing_key: Option<&'a Path>,
}

/// The audit log's keys: its path (absolute), whether runs require it, its
/// rotation, and the key that seals rotated files (read now). None when
/// there is no log; a rotation or seal key without one is an error.
fn audit(file: AuditKeys<'_>) -> Result<Option<crate::audit::AuditOptions>, Invalid> {
    let Some(path) = file.path else {
        let stray = [
            ("audit_required", file.required.is_some()),
            ("audit_max_bytes", file.max_bytes.is_some()),
            ("audit_rotate_secs", file.rotate_secs.is_some()),
            ("audit_signing_key", file.signing_key.is_some()),
        ];
        return match stray.iter().find(|(_, set)| *set) {
            Some((key, _)) => Err((key, "needs audit_log".to_owned())),
            None => Ok(None),
        };
    };
    if !path.is_absolute() {
        return Err((
            "audit_log",
            format!("{} is not an absolute path", path.display()),
        ));
    }
    let positive = |key: &'static str, value: Option<u64>| match value {
        Some(0) => Err((key, "must be positive".to_owned())),
        value => Ok(value),
    };
    let signing_key = match file.signing_key {
        None => None,
        Some(key) => Some(std::sync::Arc::new(
            crate::registry::PrivateKey::read(key)
                .map_err(|e| ("audit_signing_key", e.to_string()))?,
        )),
    };
    Ok(Some(crate::audit::AuditOptions {
        path: path.to_path_buf(),
        required: file.required.unwrap_or(false),
        max_bytes: positive("audit_max_bytes", file.max_bytes)?,
        max_age: positive("audit_rotate_secs", file.rotate_secs)?
            .map(std::time::Duration::from_secs),
        signing_key,
    }))
}

/// `[registry]`: the signing key (read now) and the plain-HTTP registries.
fn registry(
    registry: RegistryFile,
) -> Result<(crate::registry::RegistryOptions, Option<PathBuf>), Invalid> {
    let public_key_path = registry.public_key;
    let public_key = match &public_key_path {
        None => None,
        Some(key) if !key.is_absolute() => {
            return Err((
                "registry.public_key",
                format!("{} is not an absolute path", key.display()),
            ));
        }
        Some(key) => Some(
            crate::registry::PublicKey::read(key)
                .map_err(|e| ("registry.public_key", e.to_string()))?,
        ),
    };
    let insecure = registry.insecure.unwrap_or_default();
    if let Some(bad) = insecure
        .iter()
        .find(|r| r.is_empty() || r.contains('/') || r.contains(char::is_whitespace))
    {
        return Err((
            "registry.insecure",
            format!("{bad:?} is not a registry HOST[:PORT]"),
        ));
    }
    let seconds = |key: &'static str, value: Option<u64>| match value {
        Some(0) => Err((key, "must be positive".to_owned())),
        value => Ok(value.map(std::time::Duration::from_secs)),
    };
    Ok((
        crate::registry::RegistryOptions {
            public_key,
            insecure,
            connect_timeout: seconds(
                "registry.connect_timeout_secs",
                registry.connect_timeout_secs,
            )?,
            timeout: seconds("registry.timeout_secs", registry.timeout_secs)?,
            allow_settings_override: registry.allow_settings_override.unwrap_or(false),
        },
        public_key_path,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("cordon.toml"))
    }

    #[test]
    fn inspect_names_endpoints_within_max_network_and_takes_in_the_credentials_hosts() {
        let config = parse(
            "max_network = [\"*.github.com:443\", \"127.0.0.1\"]\ninspect = [\"api.github.com:443\"]\n\
             [credentials.local]\nhosts = [\"127.0.0.1:8080\"]\nfrom_command = [\"printf\", \"x\"]\n",
        )
        .unwrap();
        let inspected: Vec<String> = (config.deployment(Path::new("/ws")).inspect.iter())
            .map(|e| format!("{}:{}", e.host, e.port.unwrap()))
            .collect();
        assert_eq!(inspected, ["api.github.com:443", "127.0.0.1:8080"]);
        let err = parse("max_network = [\"github.com:443\"]\ninspect = [\"evil.test:443\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("inspect") && err.contains("not within max_network"),
            "{err}"
        );
        let err = parse("credentials = 1\n").unwrap_err().to_string();
        assert!(err.contains("credentials"), "{err}");
    }

    #[test]
    fn limits_default_to_pids_only_and_are_validated() {
        let config = parse("").unwrap();
        assert_eq!(config.limits, RunLimits::default());
        assert_eq!(config.limits.pids, Some(crate::model::DEFAULT_PIDS_LIMIT));
        assert_eq!(config.cgroups, CgroupChoice::Auto);
        let config = parse(
            "[limits]\npids = \"unlimited\"\nmemory_bytes = 1048576\ncpu_weight = 50\ncgroup = \"off\"\n",
        )
        .unwrap();
        assert_eq!(
            config.limits,
            RunLimits {
                pids: None,
                memory_bytes: Some(1 << 20),
                cpu_weight: Some(50),
            }
        );
        assert_eq!(config.cgroups, CgroupChoice::Off);
        let config = parse("[limits]\ncgroup_parent = \"/sys/fs/cgroup/x\"\n").unwrap();
        assert_eq!(
            config.cgroups,
            CgroupChoice::Parent("/sys/fs/cgroup/x".into())
        );
        for (bad, key) in [
            ("[limits]\npids = 0\n", "limits.pids"),
            ("[limits]\npids = \"lots\"\n", "limits.pids"),
            ("[limits]\ncpu_weight = 0\n", "limits.cpu_weight"),
            ("[limits]\ncgroup = \"maybe\"\n", "limits.cgroup"),
            (
                "[limits]\ncgroup_parent = \"rel\"\n",
                "limits.cgroup_parent",
            ),
            (
                "[limits]\ncgroup = \"off\"\ncgroup_parent = \"/x\"\n",
                "limits.cgroup_parent",
            ),
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains(key), "{bad}: {err}");
        }
        let deployment = parse("[limits]\npids = 7\n")
            .unwrap()
            .deployment(Path::new("/w"));
        assert_eq!(deployment.limits.pids, Some(7));
    }

    fn error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn every_key_parses() {
        let config = parse(
            r#"
            default_mode = "workspace-write"
            workspace_root = "/srv/ws"
            max_mode = "danger-full-access"
            allowed_roots = ["/srv"]
            probe_timeout_ms = 250
            landlock_launcher = "/usr/local/bin/cordon"
            bwrap_path = "/usr/bin/bwrap"
            runner_command = ["/opt/sb", "{mode}"]
            runner_failure_signatures = ["sb: "]

            [env]
            inherit = "core"
            include = ["CI_*"]
            exclude = ["X"]
            "#,
        )
        .unwrap();
        assert_eq!(config.default_mode, Some(SandboxMode::WorkspaceWrite));
        assert_eq!(config.max_mode, Some(SandboxMode::DangerFullAccess));
        assert_eq!(config.sandbox.probe_timeout, Duration::from_millis(250));
        assert!(config.sandbox.runner.is_some());
        assert_eq!(
            config.sandbox.bwrap.as_deref(),
            Some(Path::new("/usr/bin/bwrap"))
        );
        let deployment = config.deployment(Path::new("/cwd"));
        assert_eq!(deployment.policy.workspace_root, Path::new("/srv/ws"));
        assert_eq!(deployment.workdir, Path::new("/cwd"));
        assert_eq!(deployment.allowed_roots, [Path::new("/srv")]);
    }

    #[test]
    fn errors_name_the_key() {
        assert!(error("bogus = 1").contains("bogus"));
        assert!(error("max_mode = \"full\"").contains("max_mode: unknown sandbox mode"));
        assert!(error("probe_timeout_ms = 0").contains("probe_timeout_ms: must be positive"));
        assert!(error("probe_timeout_ms = -5").contains("probe_timeout_ms"));
        assert!(error("backend = \"docker\"").contains("backend: unknown backend"));
        assert!(
            error("allowed_roots = [\"srv\"]").contains("allowed_roots: srv is not an absolute")
        );
        assert!(error("runner_command = [\"/x\"]").contains("both or neither"));
        assert!(error("runner_failure_signatures = [\"x\"]").contains("both or neither"));
        assert!(
            error("runner_command = [\"/x\"]\nrunner_failure_signatures = [\"a\\nb\"]")
                .contains("single lines")
        );
        assert!(
            error("default_mode = \"danger-full-access\"\nmax_mode = \"read-only\"")
                .contains("wider than max_mode")
        );
        assert!(
            error("backend = \"bwrap\"\nrunner_command = [\"/x\"]\nrunner_failure_signatures = [\"x\"]")
                .contains("replaces the ladder")
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Keys the loader knows (top level and in tables), and some it does not.
        const KEYS: &[&str] = &[
            "default_mode",
            "workspace_root",
            "max_mode",
            "allowed_roots",
            "backend",
            "probe_timeout_ms",
            "landlock_launcher",
            "bwrap_path",
            "kernel_denials",
            "runner_command",
            "runner_failure_signatures",
            "max_network",
            "default_network",
            "exposable_sockets",
            "liftable_protected",
            "audit_log",
            "unknown_key",
            "env.inherit",
            "env.include",
            "limits.pids",
            "limits.memory_bytes",
            "limits.cpu_weight",
            "limits.cgroup",
            "limits.cgroup_parent",
            "serve.reload",
            "serve.max_session_runs",
            "serve.allowed_uids",
            "registry.insecure",
            "policy.settings.x",
        ];

        fn value() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<i64>().prop_map(|n| n.to_string()),
                any::<bool>().prop_map(|b| b.to_string()),
                "[a-z/~.*:_ -]{0,20}".prop_map(|s| format!("{s:?}")),
                prop::collection::vec("[a-z/~.:*0-9-]{0,12}", 0..4).prop_map(|v| format!("{v:?}")),
                Just("\"read-only\"".to_owned()),
                Just("\"danger-full-access\"".to_owned()),
                Just("\"unlimited\"".to_owned()),
                Just("{}".to_owned()),
            ]
        }

        fn file() -> impl Strategy<Value = String> {
            prop::collection::vec((prop::sample::select(KEYS), value()), 0..8).prop_map(|pairs| {
                pairs
                    .into_iter()
                    .map(|(key, value)| format!("{key} = {value}\n"))
                    .collect()
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any text loads or is refused with a message naming the file;
            /// never a panic.
            #[test]
            fn any_text_loads_or_is_refused_clearly(text in any::<String>()) {
                if let Err(err) = Config::parse(&text, Path::new("/etc/cordon.toml")) {
                    prop_assert!(err.to_string().contains("/etc/cordon.toml"));
                }
            }

            /// Known keys with values of every type: a config that loads
            /// keeps its ceilings consistent; one that does not names a key
            /// or the parser's line.
            #[test]
            fn known_keys_with_any_values(text in file()) {
                match Config::parse(&text, Path::new("/c.toml")) {
                    Ok(config) => {
                        let deployment = config.deployment(Path::new("/srv/ws"));
                        // A written ceiling bounds the written default (an
                        // unwritten one may still be raised by --max-mode).
                        if config.max_mode.is_some() {
                            prop_assert!(deployment.policy.mode <= deployment.max_mode);
                        }
                        if let Some(max) = &config.max_network {
                            prop_assert!(config.default_network.within(max));
                        }
                    }
                    Err(err) => {
                        let message = err.to_string();
                        prop_assert!(message.starts_with("config /c.toml"), "{}", message);
                    }
                }
            }
        }
    }
}
