//! Flags shared by the subcommands that build a host: the config file and
//! the deployment settings that override it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use cordon::config::Config;
use cordon::policy::cache::ComponentCache;
use cordon::registry::PublicKey;
use cordon::sandbox::BackendChoice;
use cordon::{HostBuilder, PolicySource, SandboxMode};

/// Deployment flags; each overrides the same key of the config file.
#[derive(Debug, Args)]
pub struct DeployArgs {
    /// The deployment config file (cordon.toml). Never read implicitly
    /// from the working directory, which a command could write to.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// The deployment ceiling: the widest mode this host may run
    /// [default: workspace-write].
    #[arg(long, value_name = "MODE")]
    max_mode: Option<SandboxMode>,

    /// A directory every writable workspace must lie inside (repeatable;
    /// replaces allowed_roots of the config file).
    #[arg(long = "allowed-root", value_name = "DIR")]
    allowed_roots: Vec<PathBuf>,

    /// Sandbox backend: auto (the ladder), namespaces, bwrap, landlock or seatbelt.
    #[arg(long, value_name = "BACKEND")]
    backend: Option<BackendChoice>,

    /// Bound on each runner probe in milliseconds [default: 5000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    probe_timeout_ms: Option<u64>,

    /// Settings for the policy component, TOML (or JSON for a `.json`
    /// file); replaces [policy.settings] of the config file. The component
    /// checks them when it loads.
    #[arg(long, value_name = "FILE")]
    settings: Option<PathBuf>,

    /// Require every policy pulled from a registry to carry a signature
    /// that verifies under this public key (PEM, P-256); replaces
    /// [registry] public_key of the config file.
    #[arg(long, value_name = "KEY.pem")]
    public_key: Option<PathBuf>,

    /// Let --settings (or [policy] settings) replace the settings a pulled
    /// whole policy carries; without it a host given both refuses to
    /// start ([registry] allow_settings_override).
    #[arg(long)]
    allow_settings_override: bool,

    #[command(flatten)]
    cache: CacheArgs,
}

/// `--policy`: a component file, `builtin:NAME`, or
/// `oci://REGISTRY/REPO[:TAG][@sha256:…]`.
pub fn parse_policy(text: &str) -> Result<PolicySource, String> {
    PolicySource::parse(text).map_err(|err| err.to_string())
}

/// Tell the operator which digest a tag resolved to (stderr: never mixed
/// into a command's output or a protocol stream).
pub fn announce_pull(source: &PolicySource, host: &cordon::Host) {
    if let PolicySource::Registry(reference) = source
        && reference.digest().is_none()
        && let Some(pinned) = host.policy_identity().reference
    {
        eprintln!("cordon: policy {reference} is {pinned}");
    }
}

/// Where compiled policy components are kept.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// Directory for compiled policy components (0700, owned by you)
    /// [default: $XDG_CACHE_HOME/cordon/components or ~/.cache/cordon/components].
    #[arg(long, value_name = "DIR")]
    component_cache: Option<PathBuf>,

    /// Compile the policy component on every start instead.
    #[arg(long, conflicts_with = "component_cache")]
    no_component_cache: bool,
}

impl CacheArgs {
    /// Where the cache is meant to be (none: turned off or no home).
    pub fn path(&self) -> Option<PathBuf> {
        if self.no_component_cache {
            return None;
        }
        self.component_cache
            .clone()
            .or_else(ComponentCache::default_path)
    }

    /// The cache, when one is wanted and usable. An unusable one costs only
    /// a compile, so it is a warning, not an error.
    pub fn open(&self) -> Option<ComponentCache> {
        if self.no_component_cache {
            return None;
        }
        let path = self
            .component_cache
            .clone()
            .or_else(ComponentCache::default_path)?;
        match ComponentCache::open(&path) {
            Ok(cache) => Some(cache),
            Err(err) => {
                eprintln!("cordon: warning: not caching compiled policy components: {err}");
                None
            }
        }
    }
}

impl DeployArgs {
    /// The component cache flags.
    pub fn cache(&self) -> &CacheArgs {
        &self.cache
    }

    /// The config file (if any) with the flags laid over it.
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        if let Some(max) = self.max_mode {
            config.max_mode = Some(max);
        }
        if !self.allowed_roots.is_empty() {
            config.allowed_roots = self
                .allowed_roots
                .iter()
                .map(std::path::absolute)
                .collect::<Result<_, _>>()
                .context("--allowed-root")?;
        }
        if let Some(backend) = self.backend {
            anyhow::ensure!(
                config.sandbox.runner.is_none() || backend == BackendChoice::Auto,
                "--backend {backend:?} conflicts with the runner command in the config file"
            );
            config.sandbox.backend = backend;
        }
        if let Some(ms) = self.probe_timeout_ms {
            config.sandbox.probe_timeout = Duration::from_millis(ms);
        }
        if let Some(path) = &self.settings {
            config.settings = cordon::config::read_settings(path)?;
        }
        if let Some(path) = &self.public_key {
            let path = std::path::absolute(path).context("--public-key")?;
            config.registry.public_key = Some(PublicKey::read(&path)?);
            // Protected in every run, as the config file's key is.
            config.public_key_path = Some(path);
        }
        if self.allow_settings_override {
            config.registry.allow_settings_override = true;
        }
        Ok(config)
    }

    /// A host builder for this deployment in the current directory.
    pub fn host_builder(&self) -> anyhow::Result<(HostBuilder, PathBuf)> {
        self.host_builder_with(&self.config()?)
    }

    /// A host builder for `config` (from [`DeployArgs::config`]) in the
    /// current directory.
    pub fn host_builder_with(&self, config: &Config) -> anyhow::Result<(HostBuilder, PathBuf)> {
        let cwd = std::env::current_dir().context("cannot determine the current directory")?;
        let mut builder = config.host_builder(Path::new(&cwd));
        if let Some(cache) = self.cache.open() {
            builder = builder.component_cache(cache);
        }
        Ok((builder, cwd))
    }
}
