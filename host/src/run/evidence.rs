//! A run's denial evidence, stamped beside the policy's settle: what the
//! kernel says it refused (Landlock's audit records, `crate::denials`)
//! and what cordon's own proxy refused. The policy classifies from the
//! text; this makes `denied` true whenever there is evidence, whatever
//! the exit code or the wording, and never false against the text (the
//! kernel's list is Landlock's: a socket or metadata filter's refusal is
//! not in it).

use std::time::{Instant, SystemTime};

use crate::denials::KernelDenials;
use crate::model::{Denial, Evidence, RefusedConnection, SandboxFacts};
use crate::process::Finished;
use crate::sandbox::Supervision;

/// The kernel's list of what it refused the run that started at
/// `started`, when its launcher had its denials logged (`confined PID` on
/// its status pipe) and the list can be read whole; read off the async
/// threads (it may wait a bounded time for the kernel's queue).
///
/// The future borrows nothing of `finished`: it may be awaited beside
/// the run's settle.
pub(super) fn kernel_denials(
    started: SystemTime,
    supervision: Supervision,
    finished: &Finished,
) -> impl Future<Output = Option<Vec<Denial>>> + use<> {
    let creator = supervision.confined(finished);
    async move {
        let creator = creator?;
        let reader = KernelDenials::shared().ok()?;
        let ran_for = started.elapsed().unwrap_or_default();
        let since = Instant::now()
            .checked_sub(ran_for)
            .unwrap_or_else(Instant::now);
        tokio::task::spawn_blocking(move || reader.collect(creator, since))
            .await
            .ok()
            .flatten()
    }
}

/// `sandbox` with the evidence stamped: the kernel's list (when read)
/// and the proxy's refusals make a confined run `denied`.
pub(super) fn stamped(
    sandbox: Option<SandboxFacts>,
    kernel: Option<Vec<Denial>>,
    refused: &[RefusedConnection],
) -> Option<SandboxFacts> {
    let mut facts = sandbox?;
    if facts.enforcement.is_none() {
        return Some(facts);
    }
    facts.evidence = Some(Evidence::Text);
    if let Some(denials) = kernel {
        facts.evidence = Some(Evidence::Kernel);
        facts.denied |= !denials.is_empty();
        facts.denials = denials;
    }
    facts.denied |= !refused.is_empty();
    Some(facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Enforcement, SandboxMode};

    fn facts(enforcement: Option<Enforcement>) -> SandboxFacts {
        SandboxFacts {
            mode: SandboxMode::WorkspaceWrite,
            denied: false,
            enforcement,
            runner_failed: false,
            evidence: None,
            denials: vec![],
        }
    }

    fn denial() -> Denial {
        Denial {
            blockers: vec!["fs.make_reg".into()],
            path: Some("/etc".into()),
            address: None,
            by: "landlock".into(),
        }
    }

    #[test]
    fn the_kernels_list_makes_a_run_denied_whatever_its_exit() {
        let full = Some(Enforcement::Full);
        let stamped = stamped(Some(facts(full)), Some(vec![denial()]), &[]).unwrap();
        assert!(stamped.denied);
        assert_eq!(stamped.evidence, Some(Evidence::Kernel));
        assert_eq!(stamped.denials, [denial()]);
        // An empty list is evidence too, and never unsays the text.
        let said = SandboxFacts {
            denied: true,
            ..facts(full)
        };
        let kept = stamped_of(said, Some(vec![]));
        assert!(kept.denied);
        assert_eq!(kept.evidence, Some(Evidence::Kernel));
        // No list: the text's classification, said so.
        assert_eq!(stamped_of(facts(full), None).evidence, Some(Evidence::Text));
        // An unconfined run is never denied, and has no evidence to speak of.
        let unconfined = stamped_of(facts(None), Some(vec![denial()]));
        assert!(!unconfined.denied);
        assert_eq!(unconfined.evidence, None);
    }

    fn stamped_of(sandbox: SandboxFacts, kernel: Option<Vec<Denial>>) -> SandboxFacts {
        stamped(Some(sandbox), kernel, &[]).unwrap()
    }
}
