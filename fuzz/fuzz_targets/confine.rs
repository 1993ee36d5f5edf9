//! The host side of a component's `plan`: any (well-typed) argv a
//! component hands `sandbox.confine` with a spec the host's checks
//! accepted is wrapped on every Linux runner without a panic, and
//!
//! * the runner's own arguments do not depend on the command: the wrap is
//!   the runner's arguments, then the command exactly;
//! * each runner's launcher (and bwrap, read in its own dialect) reads the
//!   command back exactly, and lets it write no host path but the policy's
//!   writable roots (and, under Landlock, `/tmp` and `/dev/null`);
//! * the launch check accepts that wrap for that spec, refuses a wrap
//!   issued for another policy, and accepts a bare argv only for
//!   `danger-full-access`.
#![no_main]

use std::ffi::OsString;
use std::path::Path;

use libfuzzer_sys::fuzz_target;

use cordon::Deployment;
use cordon::model::{ExecRequest, ExecSpec, Network, SandboxMode};
use cordon::run::fuzzing::{Confined, check_launch, check_request, check_spec, confine_everywhere};
use cordon_fuzz::workspace;

fuzz_target!(|data: &[u8]| {
    // Three JSON documents, one per line: the request, the spec `resolve`
    // returned, the argv `plan` hands `sandbox.confine`.
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\n');
    let (Some(request), Some(spec), Some(argv)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let (Ok(request), Ok(spec), Ok(argv)) = (
        serde_json::from_str::<ExecRequest>(request),
        serde_json::from_str::<ExecSpec>(spec),
        serde_json::from_str::<Vec<String>>(argv),
    ) else {
        return;
    };
    let mut deployment = Deployment::in_dir(workspace());
    deployment.allowed_roots = vec![workspace().into()];
    deployment.max_mode = SandboxMode::DangerFullAccess;
    // Every network grant is within reach: the allow-list's proxy too.
    deployment.max_network = Network::Full;
    if check_request(&request, &deployment).is_err() {
        return;
    }
    let Ok(spec) = check_spec(&request, spec, &deployment, SandboxMode::ReadOnly) else {
        return;
    };

    let bare = check_launch(&spec, None, argv.clone());
    if spec.policy.mode == SandboxMode::DangerFullAccess {
        // `sandbox.confine` refuses danger-full-access: a bare argv is its
        // plan, taken as it is.
        if let Ok(accepted) = bare {
            assert_eq!(accepted, argv);
        }
        return;
    }
    assert!(bare.is_err(), "a bare argv was accepted for a confined run");
    check(&spec, &argv);
});

fn check(spec: &ExecSpec, argv: &[String]) {
    let policy = &spec.policy;
    let writable: Vec<&Path> = policy.writable();
    let empty = confine_everywhere(&[], policy);
    for (wrap, without) in confine_everywhere(argv, policy).iter().zip(&empty) {
        let Confined { runner, .. } = wrap;
        assert_eq!(wrap.runner, without.runner);
        // The runner's arguments, then the command, exactly.
        assert!(
            wrap.argv.ends_with(argv),
            "{runner}: the wrap does not end with the command"
        );
        let own = &wrap.argv[..wrap.argv.len() - argv.len()];
        assert_eq!(
            masked(own, wrap),
            masked(&without.argv, without),
            "{runner}: the command changed the runner's arguments"
        );
        assert_eq!(own.last().map(String::as_str), Some("--"), "{runner}");
        // What the runner reads back.
        let (command, granted) = match &wrap.read_back {
            Ok(read) => read,
            // A launcher refuses an empty command: nothing runs.
            Err(_) if argv.is_empty() => continue,
            Err(err) => panic!(
                "{runner} refuses the argv the host built: {err}\n{:?}",
                wrap.argv
            ),
        };
        let expected: Vec<OsString> = argv.iter().map(OsString::from).collect();
        assert_eq!(command, &expected, "{runner} reads back another command");
        for path in granted {
            // Landlock's own: `/tmp`, and the devices the mount rungs
            // bind (`/dev/tty` is no terminal: a run has none).
            let extra = *runner == "landlock"
                && ["/tmp", "/dev/null", "/dev/tty"]
                    .iter()
                    .any(|own| path == Path::new(own));
            // A directory above a protected path is bound writable onto
            // itself (pinned): inside a root, it grants nothing more.
            assert!(
                extra || writable.iter().any(|root| path.starts_with(root)),
                "{runner} lets the command write {} ({:?} are the policy's)",
                path.display(),
                writable
            );
        }
        // The launch check takes this wrap for this spec, and no other
        // policy's.
        assert!(check_launch(spec, Some(policy.clone()), wrap.argv.clone()).is_ok());
        let mut other = policy.clone();
        other.workspace_root = other.workspace_root.join("other");
        assert!(check_launch(spec, Some(other), wrap.argv.clone()).is_err());
    }
}

/// `argv` with the wrap's fresh proxy socket or port masked.
fn masked(argv: &[String], wrap: &Confined) -> Vec<String> {
    argv.iter()
        .map(|arg| match &wrap.proxy {
            Some(proxy) if arg == proxy => "<proxy>".to_owned(),
            _ => arg.clone(),
        })
        .collect()
}
