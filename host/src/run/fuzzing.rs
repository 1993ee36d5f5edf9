//! Entry points for the fuzz targets (`fuzz/`), with the `fuzzing`
//! feature only: the host checks every request and every spec a component
//! returns go through, exactly as `prepare` sequences them, reachable from
//! outside the crate without making them part of the API.

use super::checks;
use crate::RunError;
use crate::model::{
    Deployment, ExecRequest, ExecSpec, LaunchFacts, SandboxFacts, SandboxMode, SandboxPolicy,
};

/// The checks of a request before the component sees it.
pub fn check_request(request: &ExecRequest, deployment: &Deployment) -> Result<(), RunError> {
    checks::request_within_ceiling(request, deployment.max_mode)?;
    checks::request_size(request)?;
    checks::limits(request.limits.as_ref(), &deployment.limits).map(drop)
}

/// The checks of a spec a component's `resolve` returned for `request`
/// (the component having declared `declared` as its default mode), in
/// `prepare`'s order; the spec as the host would go on with it.
pub fn check_spec(
    request: &ExecRequest,
    mut spec: ExecSpec,
    deployment: &Deployment,
    declared: SandboxMode,
) -> Result<ExecSpec, RunError> {
    checks::spec_size(&spec)?;
    checks::spec_env(&spec)?;
    checks::canonicalise(&mut spec)?;
    checks::spec_within_ceiling(&spec, deployment.max_mode)?;
    checks::spec_keeps_handed_policy(&spec, checks::handed_policy(request, deployment), declared)?;
    checks::policy_within(&spec.policy, deployment)?;
    Ok(spec)
}

/// Whether a (canonical) policy is within the deployment's ceilings.
pub fn policy_within(policy: &SandboxPolicy, deployment: &Deployment) -> Result<(), RunError> {
    checks::policy_within(policy, deployment)
}

/// The check of the facts a component's `settle` stamped on a run.
pub fn check_stamp(
    spec: &ExecSpec,
    facts: &LaunchFacts,
    stamped: Option<&SandboxFacts>,
) -> Result<(), RunError> {
    checks::stamp(spec, facts, stamped)
}
