//! The component test kit: run a policy component's `resolve`, `plan`,
//! `settle`, `connect` and `request` in isolation, against a scripted fake `sandbox` import, without
//! spawning anything.
//!
//! Why: a policy author must be able to check a component — theirs or a
//! shipped one — against cordon's contract before deploying it, in
//! milliseconds and on any machine (no bwrap, no Landlock). The kit loads
//! the component exactly as a host does (same engine, same world checks,
//! same bounds), but its `confine` is a [`FakeSandbox`] that reports
//! whichever backend, enforcement and message dialect the test asks for,
//! or that no sandbox is usable.
//!
//! [`cases`] runs table-driven case files (`cordon policy test`); the
//! shipped components' behaviour is written down as such files in
//! `components/cases/`, so any custom component can be checked against the
//! same contract.
//!
//! ```no_run
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use cordon::model::{Deployment, ExecRequest, LaunchFacts, Outcome};
//! use cordon::testkit::{FakeSandbox, Kit};
//!
//! let kit = Kit::load(&std::fs::read("my-policy.wasm").unwrap())?;
//! let spec = kit.resolve(&ExecRequest::new("touch /etc/x"), &Deployment::in_dir("/ws"))?;
//! let sandbox = std::sync::Arc::new(FakeSandbox::backend(cordon::model::Backend::Bwrap));
//! let planned = kit.plan(&spec, &sandbox)?;
//! assert_eq!(planned.argv, ["bash", "-c", "touch /etc/x"]);
//! let outcome = Outcome {
//!     exit_code: Some(1),
//!     stderr_tail: "touch: cannot touch '/etc/x': Read-only file system".into(),
//!     ..Outcome::default()
//! };
//! let facts = kit.settle(&spec, &planned.facts(false), &outcome)?;
//! assert!(facts.unwrap().denied);
//! # Ok(()) }
//! ```

pub mod cases;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::RunError;
use crate::model::{
    Backend, Decision, Deployment, Enforcement, ExecRequest, ExecSpec, HttpRequest, LaunchFacts,
    Outcome, RequestVerdict, SandboxFacts, SandboxPolicy, Signatures, WrapFacts,
};
use crate::policy::{ExecutorInfo, Launch, Limits, LoadError, Policy, PolicyEngine};
use crate::sandbox::{
    Confine, RunnerCommand, Unavailable, Wrap, bwrap, landlock, namespaces, seatbelt,
};

/// What the fake `sandbox.confine` reports: a backend with its real
/// message dialect, or that no sandbox is usable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxScript {
    /// The backend whose facts and dialect `confine` reports (default bwrap).
    #[serde(default)]
    pub backend: Option<Backend>,
    /// Its enforcement (default `full`).
    #[serde(default)]
    pub enforcement: Option<Enforcement>,
    /// For `runner-command`: the runner's own failure signatures.
    #[serde(default)]
    pub runner_failure: Vec<String>,
    /// A whole message dialect instead of the backend's own (to test how
    /// a component reads an unusual runner).
    #[serde(default)]
    pub signatures: Option<Signatures>,
    /// When set, `confine` answers "unavailable" with this detail.
    #[serde(default)]
    pub unavailable: Option<String>,
}

/// A `sandbox` import that confines nothing: it answers as its
/// [`SandboxScript`] says, with a wrap whose argv is exactly what the
/// component asked to confine (see [`PlannedLaunch`]).
#[derive(Debug, Default)]
pub struct FakeSandbox {
    script: SandboxScript,
}

impl FakeSandbox {
    /// A fake following `script`.
    pub fn new(script: SandboxScript) -> Self {
        FakeSandbox { script }
    }

    /// A fake `backend` with full enforcement and its real dialect.
    pub fn backend(backend: Backend) -> Self {
        FakeSandbox::new(SandboxScript {
            backend: Some(backend),
            ..SandboxScript::default()
        })
    }

    /// The facts a real wrap by this backend carries.
    fn facts(&self) -> WrapFacts {
        let enforcement = self.script.enforcement.unwrap_or(Enforcement::Full);
        let mut facts = match self.script.backend.unwrap_or(Backend::Bwrap) {
            Backend::Bwrap => bwrap::facts(),
            Backend::Namespaces => namespaces::facts(),
            Backend::Landlock => landlock::facts(enforcement),
            Backend::Seatbelt => seatbelt::facts(),
            Backend::RunnerCommand => {
                RunnerCommand::new(vec!["runner".into()], self.script.runner_failure.clone())
                    .map(|runner| runner.facts())
                    .unwrap_or_else(|_| {
                        // No signatures given: the runner dialect without them.
                        let mut facts = bwrap::facts();
                        facts.backend = Backend::RunnerCommand;
                        facts.signatures.runner_failure.clear();
                        facts
                    })
            }
        };
        facts.enforcement = enforcement;
        if let Some(signatures) = &self.script.signatures {
            facts.signatures = signatures.clone();
        }
        facts
    }
}

impl Confine for FakeSandbox {
    fn confine(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Wrap, Unavailable> {
        if let Some(detail) = &self.script.unavailable {
            return Err(Unavailable {
                mode: policy.mode,
                detail: (!detail.is_empty()).then(|| detail.clone()),
            });
        }
        Ok(Wrap::new(argv.to_vec(), policy.clone(), self.facts()))
    }
}

/// What a component's `plan` asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedLaunch {
    /// Through `sandbox.confine` (true) or a bare argv (false).
    pub confined: bool,
    /// The command's argv (for a confined launch: what was confined,
    /// without any runner).
    pub argv: Vec<String>,
    /// The policy it was confined for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SandboxPolicy>,
    /// The confinement's facts, as the host would hand them to `settle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrap: Option<WrapFacts>,
}

impl PlannedLaunch {
    /// The launch facts `settle` gets for this launch.
    pub fn facts(&self, background: bool) -> LaunchFacts {
        LaunchFacts {
            background,
            wrap: self.wrap.clone(),
        }
    }
}

/// A policy component loaded for testing.
pub struct Kit {
    policy: Policy,
    // Keeps the engine (and its deadline ticker) alive.
    _engine: PolicyEngine,
}

impl Kit {
    /// Load and validate a component, as a host would (no compiled cache).
    pub fn load(bytes: &[u8]) -> Result<Kit, LoadError> {
        Kit::load_with(PolicyEngine::new()?, bytes)
    }

    /// The same, on `engine` (e.g. one with a compiled-component cache).
    pub fn load_with(engine: PolicyEngine, bytes: &[u8]) -> Result<Kit, LoadError> {
        let policy = Policy::load(&engine, bytes, Limits::default())?;
        Ok(Kit {
            policy,
            _engine: engine,
        })
    }

    /// What the component says about itself.
    pub fn info(&self) -> &ExecutorInfo {
        self.policy.info()
    }

    /// The component's `validate-settings` for `settings` (JSON text), as
    /// a host runs it when it loads the component with them.
    pub fn validate_settings(&self, settings: &str) -> Result<(), LoadError> {
        self.policy.validate_settings(settings)
    }

    /// The component's `resolve`: its decision.
    pub fn decide(
        &self,
        request: &ExecRequest,
        deployment: &Deployment,
    ) -> Result<Decision, RunError> {
        self.policy.resolve(request, deployment)
    }

    /// The component's `resolve`, as the host treats it: the spec of an
    /// *allow*; a *deny* is [`RunError::Denied`], an *ask*
    /// [`RunError::ApprovalRequired`] (with the proposed grant, unchecked).
    pub fn resolve(
        &self,
        request: &ExecRequest,
        deployment: &Deployment,
    ) -> Result<ExecSpec, RunError> {
        match self.decide(request, deployment)? {
            Decision::Allow(spec) => Ok(spec),
            Decision::Deny(reason) => Err(RunError::Denied { reason }),
            Decision::Ask { reason, policy } => Err(RunError::ApprovalRequired {
                reason,
                policy: Box::new(policy),
            }),
        }
    }

    /// The component's `plan`, confining through `sandbox`.
    pub fn plan(
        &self,
        spec: &ExecSpec,
        sandbox: &Arc<FakeSandbox>,
    ) -> Result<PlannedLaunch, RunError> {
        let confiner: Arc<dyn Confine> = sandbox.clone();
        match self.policy.plan(spec, confiner)? {
            Launch::Unconfined(argv) => Ok(PlannedLaunch {
                confined: false,
                argv,
                policy: None,
                wrap: None,
            }),
            Launch::Confined(wrap) => Ok(PlannedLaunch {
                confined: true,
                argv: wrap.argv().to_vec(),
                policy: Some(wrap.policy().clone()),
                wrap: Some(wrap.facts().clone()),
            }),
        }
    }

    /// The component's `connect`: `Ok(Err(reason))` is a refusal.
    pub fn connect(
        &self,
        spec: &ExecSpec,
        host: &str,
        port: u16,
    ) -> Result<Result<(), String>, RunError> {
        self.policy.connect(spec, host, port)
    }

    /// The component's `request` (world `0.3.0`) for one HTTP request of
    /// the run of `spec`, with the operator's `settings`: a component of
    /// an older world allows every request its connection allowed.
    pub fn request(
        &self,
        spec: &ExecSpec,
        settings: &str,
        request: &HttpRequest,
    ) -> Result<RequestVerdict, RunError> {
        self.policy.connector(spec, settings).request(request)
    }

    /// The component's optional `render`: the text an agent's model reads
    /// of `outcome` (none: the host's default text, or no `render` export).
    pub fn render(
        &self,
        command: &str,
        outcome: &crate::model::Told,
    ) -> Result<Option<String>, RunError> {
        self.policy.render(command, outcome)
    }

    /// The component's `settle`.
    pub fn settle(
        &self,
        spec: &ExecSpec,
        facts: &LaunchFacts,
        outcome: &Outcome,
    ) -> Result<Option<SandboxFacts>, RunError> {
        self.policy.settle(spec, facts, outcome)
    }
}
