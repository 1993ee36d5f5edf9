//! The host side of a component's `settle`: any (well-typed) facts it
//! stamps on any run go through the host's check without a panic, and
//! facts the check accepts describe the run — its mode, the enforcement of
//! its own confinement, no denial or runner failure claimed for an
//! unconfined run.
#![no_main]

use libfuzzer_sys::fuzz_target;

use cordon::model::{ExecSpec, LaunchFacts, SandboxFacts};

fuzz_target!(|data: &[u8]| {
    // Three JSON documents, one per line: the spec, the launch facts, the
    // stamped facts (or null).
    let text = String::from_utf8_lossy(data);
    let mut lines = text.splitn(3, '\n');
    let (Some(spec), Some(facts), Some(stamped)) = (lines.next(), lines.next(), lines.next())
    else {
        return;
    };
    let (Ok(spec), Ok(facts), Ok(stamped)) = (
        serde_json::from_str::<ExecSpec>(spec),
        serde_json::from_str::<LaunchFacts>(facts),
        serde_json::from_str::<Option<SandboxFacts>>(stamped),
    ) else {
        return;
    };
    if cordon::run::fuzzing::check_stamp(&spec, &facts, stamped.as_ref()).is_ok()
        && let Some(stamped) = &stamped
    {
        assert_eq!(stamped.mode, spec.policy.mode);
        assert_eq!(
            stamped.enforcement,
            facts.wrap.as_ref().map(|w| w.enforcement)
        );
        if facts.wrap.is_none() {
            assert!(!stamped.denied && !stamped.runner_failed);
        }
    }
});
