//! The per-run pipeline: resolve → plan → spawn → settle. The only place
//! that sequences policy, sandbox and process, and the place where the host
//! invariants are checked against what the component returned:
//!
//! 1. the resolved mode is within the deployment's ceiling;
//! 2. a confined mode is spawned only from a [`Wrap`](crate::sandbox::Wrap)
//!    the host issued during this plan, for exactly the spec's policy;
//! 3. an unconfined launch is accepted only for `danger-full-access`;
//! 4. a runner that could not start is a sandbox failure, never a reason
//!    to run the command some other way.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::RunError;
use crate::model::{
    Deployment, ExecRequest, ExecResult, ExecSpec, LaunchFacts, Outcome, RunnerStatus, SandboxMode,
    StreamOutput,
};
use crate::policy::{Launch, Policy};
use crate::process::{self, OutputSink, SpawnError, Tail};
use crate::sandbox::Confine;

/// Per-run options that are not part of the request.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Receives output as it is produced.
    pub sink: Option<Arc<dyn OutputSink>>,
}

/// Everything a run needs from its host.
pub(crate) struct RunContext<'a> {
    pub policy: &'a Policy,
    pub confiner: Arc<dyn Confine>,
    pub deployment: &'a Deployment,
}

/// Run `request` in the foreground.
pub(crate) async fn run(
    cx: RunContext<'_>,
    request: ExecRequest,
    options: RunOptions,
) -> Result<ExecResult, RunError> {
    let ceiling = cx.deployment.max_mode;
    if let Some(policy) = &request.policy
        && policy.mode > ceiling
    {
        return Err(RunError::AboveCeiling {
            mode: policy.mode,
            ceiling,
        });
    }

    let mut spec = cx.policy.resolve(&request, cx.deployment)?;
    canonicalise(&mut spec)?;
    if spec.policy.mode > ceiling {
        return Err(RunError::PolicyFailed {
            phase: "resolve",
            reason: format!(
                "resolved mode \"{}\" is wider than the deployment ceiling \"{ceiling}\"",
                spec.policy.mode
            ),
        });
    }

    let (argv, wrap) = match cx.policy.plan(&spec, cx.confiner.clone())? {
        Launch::Confined(wrap) if *wrap.policy() == spec.policy => {
            (wrap.argv().to_vec(), Some(wrap.facts().clone()))
        }
        Launch::Confined(wrap) => {
            return Err(RunError::PolicyFailed {
                phase: "plan",
                reason: format!(
                    "confined for mode \"{}\" at {} but the spec is mode \"{}\" at {}",
                    wrap.policy().mode,
                    wrap.policy().workspace_root.display(),
                    spec.policy.mode,
                    spec.policy.workspace_root.display()
                ),
            });
        }
        Launch::Unconfined(argv) if spec.policy.mode == SandboxMode::DangerFullAccess => {
            (argv, None)
        }
        Launch::Unconfined(_) => {
            return Err(RunError::PolicyFailed {
                phase: "plan",
                reason: format!(
                    "returned an unconfined launch for a \"{}\" run; refusing to run it unconfined",
                    spec.policy.mode
                ),
            });
        }
    };

    let launch = process::Launch {
        argv,
        env: process::env::child_env(std::env::vars_os(), &spec.env),
        workdir: spec.workdir.clone(),
        timeout: Duration::from_millis(spec.timeout_ms),
        kill_grace: process::DEFAULT_KILL_GRACE,
        tail_bytes: process::output::DEFAULT_TAIL_BYTES,
    };
    let confined = wrap.is_some();
    let facts = LaunchFacts {
        background: false,
        wrap,
    };
    let finished = match process::run(&launch, options.sink).await {
        Ok(finished) => finished,
        Err(SpawnError::Program(err)) if confined => {
            // The runner itself is missing or not executable: a sandbox
            // failure, classified by the policy like any other.
            let outcome = Outcome {
                exit_code: None,
                signal: None,
                timed_out: false,
                aborted: false,
                stderr_tail: String::new(),
                runner_status: RunnerStatus::Failed(format!("{}: {err}", launch.argv[0])),
            };
            cx.policy.settle(&spec, &facts, &outcome)?;
            return Err(RunError::SandboxUnavailable {
                mode: spec.policy.mode,
                detail: Some(format!("{}: {err}", launch.argv[0])),
            });
        }
        Err(SpawnError::Workdir(err)) => {
            return Err(RunError::Workdir {
                path: spec.workdir,
                reason: err.to_string(),
            });
        }
        Err(SpawnError::Program(err) | SpawnError::Other(err)) => {
            return Err(RunError::Spawn {
                program: launch.argv[0].clone(),
                source: err,
            });
        }
    };

    let outcome = Outcome {
        exit_code: finished.exit_code,
        signal: finished.signal,
        timed_out: finished.timed_out,
        aborted: false,
        stderr_tail: String::from_utf8_lossy(&finished.stderr.to_vec()).into_owned(),
        runner_status: RunnerStatus::Unknown,
    };
    let sandbox = cx.policy.settle(&spec, &facts, &outcome)?;
    if let Some(stamped) = &sandbox
        && stamped.mode != spec.policy.mode
    {
        return Err(RunError::PolicyFailed {
            phase: "settle",
            reason: format!(
                "stamped mode \"{}\" on a \"{}\" run",
                stamped.mode, spec.policy.mode
            ),
        });
    }
    Ok(ExecResult {
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        timed_out: outcome.timed_out,
        aborted: outcome.aborted,
        timeout_ms: spec.timeout_ms,
        stdout: stream_output(&finished.stdout),
        stderr: stream_output(&finished.stderr),
        sandbox,
    })
}

/// Make the spec's paths absolute and the workspace root canonical, and
/// refuse a `workspace-write` root that does not exist (binding it would
/// fail inside the runner, which is not the sandbox's fault).
fn canonicalise(spec: &mut ExecSpec) -> Result<(), RunError> {
    spec.workdir = absolute(&spec.workdir, "workdir")?;
    let root = absolute(&spec.policy.workspace_root, "workspace root")?;
    spec.policy.workspace_root = std::fs::canonicalize(&root).unwrap_or(root);
    if spec.policy.mode == SandboxMode::WorkspaceWrite && !spec.policy.workspace_root.is_dir() {
        return Err(RunError::InvalidRequest(format!(
            "workspace root {} is not an existing directory; create it or choose another",
            spec.policy.workspace_root.display()
        )));
    }
    Ok(())
}

fn absolute(path: &Path, field: &str) -> Result<PathBuf, RunError> {
    std::path::absolute(path)
        .map_err(|err| RunError::InvalidRequest(format!("{field} {}: {err}", path.display())))
}

fn stream_output(tail: &Tail) -> StreamOutput {
    StreamOutput {
        text: String::from_utf8_lossy(&tail.to_vec()).into_owned(),
        truncated: tail.truncated(),
        spill_path: None,
    }
}
