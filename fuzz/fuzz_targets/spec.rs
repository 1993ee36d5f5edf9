//! The host side of a component's `resolve`: any (well-typed) request and
//! spec — what a hostile component may return — go through the host's
//! checks without a panic, and a spec the checks accept is within every
//! ceiling the deployment sets.
#![no_main]

use libfuzzer_sys::fuzz_target;

use cordon::model::{ExecRequest, ExecSpec, SandboxMode};
use cordon::{Deployment, SandboxPolicy};
use cordon_fuzz::workspace;

fuzz_target!(|data: &[u8]| {
    // Two JSON documents, one per line: the request, the spec returned.
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(2, '\n');
    let (Some(request), Some(spec)) = (parts.next(), parts.next()) else {
        return;
    };
    let (Ok(request), Ok(spec)) = (
        serde_json::from_str::<ExecRequest>(request),
        serde_json::from_str::<ExecSpec>(spec),
    ) else {
        return;
    };
    let mut deployment = Deployment::in_dir(workspace());
    deployment.allowed_roots = vec![workspace().into()];
    if cordon::run::fuzzing::check_request(&request, &deployment).is_err() {
        return;
    }
    if let Ok(spec) =
        cordon::run::fuzzing::check_spec(&request, spec, &deployment, SandboxMode::ReadOnly)
    {
        let policy: &SandboxPolicy = &spec.policy;
        assert!(policy.mode <= deployment.max_mode);
        assert!(policy.network.within(&deployment.max_network));
        if policy.mode == SandboxMode::WorkspaceWrite {
            for root in policy.writable() {
                assert!(root.starts_with(workspace()), "{}", root.display());
            }
        }
    }
});
