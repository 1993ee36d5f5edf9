//! [`Host`]: the library entry point. Owns the policy engine, the loaded
//! policy component, the sandbox ladder and the deployment, and runs
//! requests through the pipeline in [`crate::run`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::RunError;
use crate::model::{Deployment, ExecRequest, ExecResult};
use crate::policy::{self, ExecutorInfo, Limits, Policy, PolicyEngine};
use crate::run::{self, RunContext, RunOptions};
use crate::sandbox::{Confine, Sandbox};

/// Where the policy component comes from.
#[derive(Clone, Debug)]
pub enum PolicySource {
    /// The `bash-sandbox` component embedded in this build.
    Embedded,
    /// A component file, read when the host is built.
    File(PathBuf),
    /// Component bytes.
    Bytes(Vec<u8>),
}

/// Why a host could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The policy component file could not be read.
    #[error("cannot read policy component {}: {source}", path.display())]
    ReadPolicy {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The component failed to load or validate.
    #[error(transparent)]
    Policy(#[from] RunError),
    /// The host's working directory is unusable.
    #[error("cannot determine the working directory: {0}")]
    Workdir(#[source] std::io::Error),
}

/// Configures a [`Host`].
#[derive(Default)]
pub struct HostBuilder {
    policy: Option<PolicySource>,
    deployment: Option<Deployment>,
    confiner: Option<Arc<dyn Confine>>,
    limits: Option<Limits>,
}

impl HostBuilder {
    /// Use this policy component (default: the embedded `bash-sandbox`).
    pub fn policy(mut self, source: PolicySource) -> Self {
        self.policy = Some(source);
        self
    }

    /// Use this deployment (default: [`Deployment::in_dir`] of the current
    /// directory).
    pub fn deployment(mut self, deployment: Deployment) -> Self {
        self.deployment = Some(deployment);
        self
    }

    /// Confine with this implementation instead of the platform ladder.
    pub fn confiner(mut self, confiner: Arc<dyn Confine>) -> Self {
        self.confiner = Some(confiner);
        self
    }

    /// Bound policy calls with these limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Load the policy component and build the host.
    pub fn build(self) -> Result<Host, BuildError> {
        let bytes = match self.policy.unwrap_or(PolicySource::Embedded) {
            PolicySource::Embedded => policy::EMBEDDED_DEFAULT.to_vec(),
            PolicySource::Bytes(bytes) => bytes,
            PolicySource::File(path) => {
                std::fs::read(&path).map_err(|source| BuildError::ReadPolicy { path, source })?
            }
        };
        let deployment = match self.deployment {
            Some(deployment) => deployment,
            None => Deployment::in_dir(std::env::current_dir().map_err(BuildError::Workdir)?),
        };
        let engine = PolicyEngine::new()?;
        let policy = Policy::load(&engine, &bytes, self.limits.unwrap_or_default())?;
        Ok(Host {
            policy,
            confiner: self.confiner.unwrap_or_else(|| Arc::new(Sandbox::new())),
            deployment,
            _engine: engine,
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
    policy: Policy,
    confiner: Arc<dyn Confine>,
    deployment: Deployment,
    _engine: PolicyEngine,
}

impl Host {
    /// Start configuring a host.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// What the loaded policy component says about itself.
    pub fn policy_info(&self) -> &ExecutorInfo {
        self.policy.info()
    }

    /// The deployment this host runs under.
    pub fn deployment(&self) -> &Deployment {
        &self.deployment
    }

    /// Run `request` in the foreground and return its result.
    pub async fn run(&self, request: ExecRequest) -> Result<ExecResult, RunError> {
        self.run_with(request, RunOptions::default()).await
    }

    /// Run `request` with per-run options (e.g. streaming output).
    pub async fn run_with(
        &self,
        request: ExecRequest,
        options: RunOptions,
    ) -> Result<ExecResult, RunError> {
        let cx = RunContext {
            policy: &self.policy,
            confiner: self.confiner.clone(),
            deployment: &self.deployment,
        };
        run::run(cx, request, options).await
    }
}
