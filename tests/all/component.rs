//! The built `bash-sandbox.wasm`, loaded by the real wasmtime host with a
//! scripted fake `sandbox` import: resolve, plan and settle without a real
//! sandbox, and the whole pipeline running the fake's wrap.

use std::sync::{Arc, Mutex};

use cordon::model::{
    Backend, Decision, Deployment, Enforcement, ExecRequest, ExecSpec, LaunchFacts, Outcome,
    RunnerStatus, SandboxMode, SandboxPolicy, Signatures, WrapFacts,
};
use cordon::policy::{EMBEDDED_DEFAULT, Launch, Limits, Policy, PolicyEngine};
use cordon::sandbox::{Confine, Unavailable, Wrap};
use cordon::{Host, RunError};

/// Wraps every argv as `env FAKE_WRAPPED=1 ARGV…` (no real sandbox) and
/// records what it was asked; or refuses, when `available` is false.
struct FakeConfine {
    available: bool,
    asked: Mutex<Vec<(Vec<String>, SandboxPolicy)>>,
}

impl FakeConfine {
    fn new(available: bool) -> Arc<Self> {
        Arc::new(FakeConfine {
            available,
            asked: Mutex::new(vec![]),
        })
    }
}

fn fake_facts() -> WrapFacts {
    WrapFacts {
        backend: Backend::RunnerCommand,
        enforcement: Enforcement::Partial,
        signatures: Signatures {
            runner_failure: vec!["fake-runner: ".into()],
            runner_failure_exit: None,
            runner_notices: vec![],
            denial: vec!["fake denial".into()],
        },
    }
}

impl Confine for FakeConfine {
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable> {
        self.asked
            .lock()
            .unwrap()
            .push((argv.to_vec(), policy.clone()));
        if !self.available {
            return Err(Unavailable {
                mode: policy.mode,
                detail: Some("fake says no".into()),
            });
        }
        let mut wrapped = vec!["env".to_owned(), "FAKE_WRAPPED=1".to_owned()];
        wrapped.extend(argv.iter().cloned());
        Ok(Wrap::new(wrapped, policy.clone(), fake_facts()))
    }
}

fn policy() -> Policy {
    let engine = PolicyEngine::new().unwrap();
    Policy::load(&engine, EMBEDDED_DEFAULT, Limits::default()).unwrap()
}

fn deployment() -> Deployment {
    Deployment::in_dir("/srv/ws")
}

/// The spec of a decision that must be an *allow*.
fn allowed(decision: Decision) -> ExecSpec {
    match decision {
        Decision::Allow(spec) => spec,
        other => panic!("expected an allow, got {other:?}"),
    }
}

#[test]
fn describe_names_the_executor() {
    let info = policy().info().clone();
    assert_eq!(info.name, "bash-sandbox");
    assert_eq!(info.shell, "bash");
    assert_eq!(info.default_mode, SandboxMode::ReadOnly);
}

#[test]
fn resolve_defaults_through_the_component() {
    let spec = policy()
        .resolve(&ExecRequest::new("ls"), &deployment())
        .map(allowed)
        .unwrap();
    assert_eq!(spec.timeout_ms, 120_000);
    assert_eq!(spec.workdir, std::path::Path::new("/srv/ws"));
    assert_eq!(spec.policy, deployment().policy);
    assert!(spec.env.contains(&("NO_COLOR".into(), "1".into())));

    let err = policy()
        .resolve(&ExecRequest::new("ls").with_timeout_ms(0), &deployment())
        .map(allowed)
        .unwrap_err();
    assert!(matches!(err, RunError::InvalidRequest(m) if m.contains("timeout-ms")));
}

#[test]
fn plan_confines_through_the_import_and_returns_the_hosts_wrap() {
    let policy = policy();
    let spec = policy
        .resolve(&ExecRequest::new("echo 'hi'"), &deployment())
        .map(allowed)
        .unwrap();
    let fake = FakeConfine::new(true);
    let launch = policy.plan(&spec, fake.clone()).unwrap();
    let Launch::Confined(wrap) = launch else {
        panic!("expected a confined launch");
    };
    assert_eq!(
        wrap.argv(),
        ["env", "FAKE_WRAPPED=1", "bash", "-c", "echo 'hi'"]
    );
    assert_eq!(wrap.facts(), &fake_facts());
    let asked = fake.asked.lock().unwrap();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].1, spec.policy);
}

#[test]
fn plan_fails_closed_when_the_import_is_unavailable() {
    let policy = policy();
    let spec = policy
        .resolve(&ExecRequest::new("true"), &deployment())
        .map(allowed)
        .unwrap();
    let err = policy.plan(&spec, FakeConfine::new(false)).unwrap_err();
    assert!(matches!(
        err,
        RunError::SandboxUnavailable { mode: SandboxMode::ReadOnly, detail: Some(d) } if d == "fake says no"
    ));
}

#[test]
fn settle_reads_the_wraps_own_dialect() {
    let policy = policy();
    let spec = policy
        .resolve(&ExecRequest::new("true"), &deployment())
        .map(allowed)
        .unwrap();
    let facts = LaunchFacts {
        background: false,
        wrap: Some(fake_facts()),
    };
    let outcome = |stderr: &str| Outcome {
        exit_code: Some(1),
        signal: None,
        timed_out: false,
        aborted: false,
        stderr_tail: stderr.into(),
        runner_status: RunnerStatus::Unknown,
    };
    let denied = policy
        .settle(&spec, &facts, &outcome("x: FAKE DENIAL here\n"))
        .unwrap()
        .unwrap();
    assert!(denied.denied);
    assert_eq!(denied.enforcement, Some(Enforcement::Partial));
    // bwrap's dialect means nothing for this wrap.
    let ordinary = policy
        .settle(&spec, &facts, &outcome("Read-only file system\n"))
        .unwrap()
        .unwrap();
    assert!(!ordinary.denied);
    let err = policy
        .settle(&spec, &facts, &outcome("fake-runner: broke\n"))
        .unwrap_err();
    assert!(
        matches!(err, RunError::SandboxUnavailable { detail: Some(d), .. } if d == "fake-runner: broke")
    );
}

#[tokio::test]
async fn the_pipeline_spawns_exactly_the_hosts_wrap() {
    let dir = std::env::current_dir().unwrap();
    let host = Host::builder()
        .confiner(FakeConfine::new(true))
        .deployment(Deployment::in_dir(&dir))
        .build()
        .unwrap();
    let result = host
        .run(ExecRequest::new("echo wrapped=$FAKE_WRAPPED"))
        .await
        .unwrap();
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.stdout.text, "wrapped=1\n");
    let facts = result.sandbox.unwrap();
    assert_eq!(facts.mode, SandboxMode::ReadOnly);
    assert_eq!(facts.enforcement, Some(Enforcement::Partial));
}

#[tokio::test]
async fn the_pipeline_never_runs_a_confined_mode_bare() {
    let dir = std::env::current_dir().unwrap();
    let host = Host::builder()
        .confiner(FakeConfine::new(false))
        .deployment(Deployment::in_dir(&dir))
        .build()
        .unwrap();
    let request = ExecRequest::new("echo ran")
        .with_policy(SandboxPolicy::new(SandboxMode::WorkspaceWrite, dir.clone()));
    let err = host.run(request).await.unwrap_err();
    assert_eq!(err.code(), "SANDBOX_UNAVAILABLE");
    assert!(
        err.to_string().contains("Runner failure: fake says no"),
        "{err}"
    );
}
