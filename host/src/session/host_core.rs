//! What every session of a host shares: the active policy, the sandbox,
//! the deployment, the bounds and the pools — the host's core, which
//! [`crate::host::Host`] builds and each [`super::Session`] holds.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use crate::admission::Admission;
use crate::audit::{AuditLog, Origin};
use crate::model::Deployment;
use crate::policy::pool::PolicyPool;
use crate::policy::{Limits, Policy, PolicyEngine};
use crate::process::cgroup::Cgroups;
use crate::process::env::EnvPolicy;
use crate::registry::RegistryOptions;
use crate::run::{ProcessLimits, RunContext};
use crate::sandbox::Confine;

/// What every session of a host shares.
pub(crate) struct HostCore {
    /// The active policy; replaced whole by [`Host::reload`]. Each run
    /// takes its own reference, so a run or task finishes with the version
    /// that planned it.
    pub(crate) policy: RwLock<Arc<Policy>>,
    /// Where runs get their own cgroup, or why they do not.
    pub(crate) cgroups: Result<Arc<Cgroups>, String>,
    pub(crate) limits: Limits,
    pub(crate) confiner: Arc<dyn Confine>,
    pub(crate) deployment: Arc<Deployment>,
    /// Where each session creates its private spill directory.
    pub(crate) spill_parent: PathBuf,
    pub(crate) process: ProcessLimits,
    pub(crate) env: Arc<EnvPolicy>,
    /// The host's bounds and what its sessions hold against them.
    pub(crate) admission: Arc<Admission>,
    /// The threads the runs' policy calls run on.
    pub(crate) pool: Arc<PolicyPool>,
    pub(crate) engine: PolicyEngine,
    /// How [`Host::reload`] pulls from registries.
    pub(crate) registry: RegistryOptions,
    /// The operator's audit log.
    pub(crate) audit: Option<Arc<AuditLog>>,
    /// A runner started ahead of the expected request's plan.
    pub(crate) ahead: Arc<crate::run::ahead::Ahead>,
    /// Whether each session keeps a spare runner for its next run.
    pub(crate) spare_runners: bool,
    /// Credentials each proxied run gets placeholders for.
    pub(crate) credentials: Arc<[Arc<crate::credentials::Credential>]>,
}

impl HostCore {
    pub(crate) fn active_policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The context of one run of a session: the active policy at this moment.
    pub(crate) fn run_context(
        &self,
        spill_dir: &Arc<crate::process::spill::SpillDir>,
        origin: &Arc<Origin>,
    ) -> RunContext {
        RunContext {
            audit: self.audit.clone(),
            origin: origin.clone(),
            policy: self.active_policy(),
            confiner: self.confiner.clone(),
            deployment: self.deployment.clone(),
            spill_dir: spill_dir.clone(),
            limits: self.process.clone(),
            env: self.env.clone(),
            cgroups: self.cgroups.as_ref().ok().cloned(),
            pool: self.pool.clone(),
            ahead: self.ahead.clone(),
            spare: None,
            identity: None,
            credentials: self.credentials.clone(),
        }
    }
}
