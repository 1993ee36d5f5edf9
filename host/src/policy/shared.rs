//! What every binding layer converts the same way: the types a newer
//! interface version kept unchanged from `0.1.0` (modes, facts, outcomes,
//! errors, specs whose policy converts by the layer's own rule). Each
//! layer invokes [`conversions!`] with its generated `wit` module in scope,
//! so an unchanged type is converted by one text, not one copy per version;
//! a type a version changes gets its own conversion in that layer instead.
//! And what each layer says of its world ([`World`]), which the version
//! table in `world.rs` lists (so the layers need not import that table).

/// What a binding layer says about the world it binds.
#[derive(Debug)]
pub(super) struct World {
    /// The world's full name, e.g. `cordon:sandbox/executor-policy@0.1.0`.
    pub name: &'static str,
    /// The interface that makes a component one of this world: the first
    /// version (newest first) whose `export` a component has is its world.
    pub export: &'static str,
    /// The other interfaces a component of this world must export (world
    /// `0.3.0` keeps `0.2.0`'s executor).
    pub also_exports: &'static [&'static str],
    /// The host interfaces of the world a component may import.
    pub imports: &'static [&'static str],
}

/// A path handed to a component; components speak UTF-8 only.
pub(super) fn path_text(path: &std::path::Path, field: &str) -> Result<String, String> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{field} {} is not valid UTF-8", path.display()))
}

/// The conversions of the unchanged types, between the layer's `wit`
/// module and [`crate::model`]; the layer has `model`, `wit`,
/// `ExecutorInfo` and `path_text` in scope.
macro_rules! conversions {
    () => {
        impl From<model::SandboxMode> for wit::SandboxMode {
            fn from(mode: model::SandboxMode) -> Self {
                match mode {
                    model::SandboxMode::ReadOnly => wit::SandboxMode::ReadOnly,
                    model::SandboxMode::WorkspaceWrite => wit::SandboxMode::WorkspaceWrite,
                    model::SandboxMode::DangerFullAccess => wit::SandboxMode::DangerFullAccess,
                }
            }
        }

        impl From<model::Enforcement> for wit::Enforcement {
            fn from(enforcement: model::Enforcement) -> Self {
                match enforcement {
                    model::Enforcement::Full => wit::Enforcement::Full,
                    model::Enforcement::Partial => wit::Enforcement::Partial,
                }
            }
        }

        impl From<model::Backend> for wit::Backend {
            fn from(backend: model::Backend) -> Self {
                match backend {
                    // The contract's versions so far have no case for
                    // cordon's namespace runner: it is presented as bwrap,
                    // whose sandbox, mount semantics and denial text it
                    // shares (its own signatures travel in the facts).
                    model::Backend::Namespaces | model::Backend::Bwrap => wit::Backend::Bwrap,
                    model::Backend::Landlock => wit::Backend::Landlock,
                    model::Backend::Seatbelt => wit::Backend::Seatbelt,
                    model::Backend::RunnerCommand => wit::Backend::RunnerCommand,
                }
            }
        }

        impl From<model::WrapFacts> for wit::WrapFacts {
            fn from(facts: model::WrapFacts) -> Self {
                wit::WrapFacts {
                    backend: facts.backend.into(),
                    enforcement: facts.enforcement.into(),
                    signatures: wit::Signatures {
                        runner_failure: facts.signatures.runner_failure,
                        runner_failure_exit: facts.signatures.runner_failure_exit,
                        runner_notices: facts.signatures.runner_notices,
                        denial: facts.signatures.denial,
                    },
                }
            }
        }

        impl From<model::LaunchFacts> for wit::LaunchFacts {
            fn from(facts: model::LaunchFacts) -> Self {
                wit::LaunchFacts {
                    background: facts.background,
                    wrap: facts.wrap.map(Into::into),
                }
            }
        }

        impl From<model::Outcome> for wit::Outcome {
            fn from(outcome: model::Outcome) -> Self {
                wit::Outcome {
                    exit_code: outcome.exit_code,
                    signal: outcome.signal,
                    timed_out: outcome.timed_out,
                    aborted: outcome.aborted,
                    stderr_tail: outcome.stderr_tail,
                    runner_status: match outcome.runner_status {
                        model::RunnerStatus::Launched => wit::RunnerStatus::Launched,
                        model::RunnerStatus::Failed(detail) => wit::RunnerStatus::Failed(detail),
                        model::RunnerStatus::Unknown => wit::RunnerStatus::Unknown,
                    },
                }
            }
        }

        impl TryFrom<&model::ExecSpec> for wit::ExecSpec {
            type Error = String;

            fn try_from(spec: &model::ExecSpec) -> Result<Self, String> {
                Ok(wit::ExecSpec {
                    command: spec.command.clone(),
                    workdir: path_text(&spec.workdir, "workdir")?,
                    timeout_ms: spec.timeout_ms,
                    env: spec.env.clone(),
                    policy: (&spec.policy).try_into()?,
                })
            }
        }

        impl From<wit::SandboxMode> for model::SandboxMode {
            fn from(mode: wit::SandboxMode) -> Self {
                match mode {
                    wit::SandboxMode::ReadOnly => model::SandboxMode::ReadOnly,
                    wit::SandboxMode::WorkspaceWrite => model::SandboxMode::WorkspaceWrite,
                    wit::SandboxMode::DangerFullAccess => model::SandboxMode::DangerFullAccess,
                }
            }
        }

        impl From<wit::Enforcement> for model::Enforcement {
            fn from(enforcement: wit::Enforcement) -> Self {
                match enforcement {
                    wit::Enforcement::Full => model::Enforcement::Full,
                    wit::Enforcement::Partial => model::Enforcement::Partial,
                }
            }
        }

        impl From<wit::ExecSpec> for model::ExecSpec {
            fn from(spec: wit::ExecSpec) -> Self {
                model::ExecSpec {
                    command: spec.command,
                    workdir: spec.workdir.into(),
                    timeout_ms: spec.timeout_ms,
                    env: spec.env,
                    policy: spec.policy.into(),
                }
            }
        }

        impl From<wit::SandboxFacts> for model::SandboxFacts {
            fn from(facts: wit::SandboxFacts) -> Self {
                model::SandboxFacts {
                    mode: facts.mode.into(),
                    denied: facts.denied,
                    enforcement: facts.enforcement.map(Into::into),
                    runner_failed: facts.runner_failed,
                    // The host stamps the evidence after the settle.
                    evidence: None,
                    denials: vec![],
                }
            }
        }

        impl From<wit::ExecError> for crate::error::RunError {
            fn from(error: wit::ExecError) -> Self {
                match error {
                    wit::ExecError::SandboxUnavailable(unavailable) => {
                        crate::error::RunError::SandboxUnavailable {
                            mode: unavailable.mode.into(),
                            detail: unavailable.detail.map(|d| crate::text::reason(&d)),
                        }
                    }
                    // A component's words: inert and bounded.
                    wit::ExecError::InvalidRequest(message) => {
                        crate::error::RunError::InvalidRequest(crate::text::reason(&message))
                    }
                }
            }
        }

        impl From<wit::ExecutorInfo> for ExecutorInfo {
            fn from(info: wit::ExecutorInfo) -> Self {
                ExecutorInfo {
                    name: info.name,
                    version: info.version,
                    shell: info.shell,
                    default_mode: info.default_mode.into(),
                }
            }
        }
    };
}

pub(super) use conversions;
