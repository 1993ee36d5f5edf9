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
//!
//! Foreground runs ([`run`]) and background tasks ([`start`]) share the
//! preparation and the classification; they differ only in who waits.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::RunError;
use crate::model::{
    Deployment, ExecRequest, ExecResult, ExecSpec, LaunchFacts, Outcome, RunnerStatus,
    SandboxFacts, SandboxMode, StreamOutput, WrapFacts,
};
use crate::policy::{Launch, Policy};
use crate::process::spill::{DEFAULT_SPILL_LIMIT, SpillDir};
use crate::process::{self, Finished, OutputSink, Process, SpawnError};
use crate::sandbox::{Confine, StatusReport};
use crate::tasks::{Ending, TaskHandle, TaskStatus, Tasks};

/// Per-run options that are not part of the request.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Receives output as it is produced.
    pub sink: Option<Arc<dyn OutputSink>>,
    /// Cancel to abort the run: its process group is terminated and the
    /// result says `aborted`. (Dropping the run's future kills the group too.)
    pub abort: Option<CancellationToken>,
}

/// Process-level settings of a host.
#[derive(Clone, Debug)]
pub struct ProcessLimits {
    /// Bytes kept in memory per stream.
    pub tail_bytes: usize,
    /// Bytes a spill file may hold.
    pub spill_limit: u64,
    /// Time between `SIGTERM` and `SIGKILL`.
    pub kill_grace: Duration,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        ProcessLimits {
            tail_bytes: process::output::DEFAULT_TAIL_BYTES,
            spill_limit: DEFAULT_SPILL_LIMIT,
            kill_grace: process::DEFAULT_KILL_GRACE,
        }
    }
}

/// Everything a run needs from its host.
#[derive(Clone)]
pub(crate) struct RunContext {
    pub policy: Arc<Policy>,
    pub confiner: Arc<dyn Confine>,
    pub deployment: Arc<Deployment>,
    pub spill_dir: Arc<SpillDir>,
    pub limits: ProcessLimits,
}

/// A request resolved, planned and checked: ready to spawn.
struct Prepared {
    spec: ExecSpec,
    launch: process::Launch,
    wrap: Option<WrapFacts>,
    report: StatusReport,
}

/// Run `request` in the foreground.
pub(crate) async fn run(
    cx: &RunContext,
    request: ExecRequest,
    options: RunOptions,
) -> Result<ExecResult, RunError> {
    let prepared = prepare(cx, request)?;
    let facts = LaunchFacts {
        background: false,
        wrap: prepared.wrap.clone(),
    };
    let process = match process::spawn(&prepared.launch, Some(&cx.spill_dir), options.sink) {
        Ok(process) => process,
        Err(err) => return Err(spawn_failed(cx, &prepared, &facts, err)?),
    };
    let (stdout, stderr) = (process.stdout().clone(), process.stderr().clone());
    let abort = options.abort.unwrap_or_default();
    let deadline = Some(Duration::from_millis(prepared.spec.timeout_ms));
    let finished = process
        .wait(deadline, cx.limits.kill_grace, &abort)
        .await
        .map_err(|source| RunError::Spawn {
            program: prepared.launch.argv[0].clone(),
            source,
        })?;
    let stderr = StreamOutput::from_capture(&stderr.lock().expect("capture lock"));
    let stdout = StreamOutput::from_capture(&stdout.lock().expect("capture lock"));
    let sandbox = classify(cx, &prepared, &facts, &finished, &stderr.text)?;
    Ok(ExecResult {
        exit_code: finished.exit_code,
        signal: finished.signal,
        timed_out: finished.timed_out,
        aborted: finished.aborted,
        timeout_ms: prepared.spec.timeout_ms,
        stdout,
        stderr,
        sandbox,
    })
}

/// Start `request` as a background task and return at once.
///
/// Errors before the spawn (invalid request, no sandbox, policy failure)
/// are returned here; a failure of the spawn itself settles the task as
/// `killed` and is delivered once by its next read. No executor timeout
/// applies to a task unless the request names one.
pub(crate) fn start(
    cx: &RunContext,
    tasks: &Tasks,
    request: ExecRequest,
) -> Result<TaskHandle, RunError> {
    let explicit_timeout = request.timeout_ms.is_some();
    let prepared = prepare(cx, request)?;
    let facts = LaunchFacts {
        background: true,
        wrap: prepared.wrap.clone(),
    };
    match process::spawn(&prepared.launch, Some(&cx.spill_dir), None) {
        Ok(process) => {
            let task = tasks.register(
                prepared.spec.command.clone(),
                process.stdout().clone(),
                process.stderr().clone(),
            );
            task.set_group(process.group());
            let deadline =
                explicit_timeout.then(|| Duration::from_millis(prepared.spec.timeout_ms));
            tokio::spawn(follow(
                cx.clone(),
                task.clone(),
                prepared,
                facts,
                process,
                deadline,
            ));
            Ok(task)
        }
        Err(err) => {
            let empty = || {
                Arc::new(std::sync::Mutex::new(process::Capture::new(
                    process::Stream::Stdout,
                    0,
                    None,
                    0,
                )))
            };
            let task = tasks.register(prepared.spec.command.clone(), empty(), empty());
            let sandbox = match (&err, &prepared.wrap) {
                (SpawnError::Program(_), Some(_)) => {
                    let outcome = runner_missing(&runner_missing_detail(&prepared, &err));
                    cx.policy
                        .settle(&prepared.spec, &facts, &outcome)
                        .ok()
                        .flatten()
                }
                _ => None,
            };
            task.settle(Ending {
                status: TaskStatus::Killed,
                exit_code: None,
                signal: None,
                timed_out: false,
                sandbox,
                notice: Some(format!("spawn failed: {err}\n")),
            });
            Ok(task)
        }
    }
}

/// Follow a background task to its end: wait, settle with the policy that
/// planned it, stamp the facts, then wake the waiters.
async fn follow(
    cx: RunContext,
    task: TaskHandle,
    prepared: Prepared,
    facts: LaunchFacts,
    process: Process,
    deadline: Option<Duration>,
) {
    let stderr = process.stderr().clone();
    let kill = task.kill_token().clone();
    let ending = match process.wait(deadline, cx.limits.kill_grace, &kill).await {
        Ok(finished) => {
            let tail = StreamOutput::from_capture(&stderr.lock().expect("capture lock")).text;
            let (sandbox, notice) = match classify(&cx, &prepared, &facts, &finished, &tail) {
                Ok(sandbox) => (sandbox, None),
                Err(err) => (None, Some(format!("cordon: {}: {err}\n", err.code()))),
            };
            let runner_failed = sandbox.as_ref().is_some_and(|f| f.runner_failed);
            let exited = finished.exit_code.is_some() && !finished.aborted && !finished.timed_out;
            Ending {
                status: if exited && !runner_failed {
                    TaskStatus::Completed
                } else {
                    TaskStatus::Killed
                },
                exit_code: finished.exit_code,
                signal: finished.signal,
                timed_out: finished.timed_out,
                sandbox,
                notice,
            }
        }
        Err(err) => Ending {
            status: TaskStatus::Killed,
            exit_code: None,
            signal: None,
            timed_out: false,
            sandbox: None,
            notice: Some(format!("cordon: waiting for the task failed: {err}\n")),
        },
    };
    task.settle(ending);
}

/// Resolve, canonicalise, check the ceiling, plan, and check the launch.
fn prepare(cx: &RunContext, request: ExecRequest) -> Result<Prepared, RunError> {
    let ceiling = cx.deployment.max_mode;
    if let Some(policy) = &request.policy
        && policy.mode > ceiling
    {
        return Err(RunError::AboveCeiling {
            mode: policy.mode,
            ceiling,
        });
    }

    let mut spec = cx.policy.resolve(&request, &cx.deployment)?;
    check_spec_size(&spec)?;
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

    let (argv, wrap, report) = match cx.policy.plan(&spec, cx.confiner.clone())? {
        Launch::Confined(wrap) if *wrap.policy() == spec.policy => (
            wrap.argv().to_vec(),
            Some(wrap.facts().clone()),
            wrap.report(),
        ),
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
            (argv, None, StatusReport::None)
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
    if argv.is_empty() || argv.len() > MAX_ARGS || total_len(&argv) > MAX_TEXT_BYTES {
        return Err(RunError::PolicyFailed {
            phase: "plan",
            reason: format!(
                "returned an argv of {} arguments and {} bytes (must be 1..={MAX_ARGS} \
                 arguments and at most {MAX_TEXT_BYTES} bytes)",
                argv.len(),
                total_len(&argv)
            ),
        });
    }

    let launch = process::Launch {
        argv,
        env: process::env::child_env(std::env::vars_os(), &spec.env),
        workdir: spec.workdir.clone(),
        stdin: request.stdin,
        tail_bytes: cx.limits.tail_bytes,
        spill_limit: cx.limits.spill_limit,
        status_pipe: report.needs_pipe(),
    };
    Ok(Prepared {
        spec,
        launch,
        wrap,
        report,
    })
}

/// Arguments a launch may have.
const MAX_ARGS: usize = 4_096;
/// Bytes a command, an argv or an environment from a component may have
/// (the kernel's own limit for a whole exec is in this range).
const MAX_TEXT_BYTES: usize = 2 << 20;

fn total_len(texts: &[String]) -> usize {
    texts.iter().map(String::len).sum()
}

/// A resolved spec is bounded whatever the component returned.
fn check_spec_size(spec: &ExecSpec) -> Result<(), RunError> {
    let env_bytes: usize = spec.env.iter().map(|(k, v)| k.len() + v.len()).sum();
    if spec.command.len() > MAX_TEXT_BYTES
        || spec.env.len() > MAX_ARGS
        || env_bytes > MAX_TEXT_BYTES
    {
        return Err(RunError::PolicyFailed {
            phase: "resolve",
            reason: format!(
                "returned a spec of {} command bytes and {} environment entries ({env_bytes} \
                 bytes); the limits are {MAX_TEXT_BYTES} bytes and {MAX_ARGS} entries",
                spec.command.len(),
                spec.env.len()
            ),
        });
    }
    Ok(())
}

/// Have the policy classify a finished run, and check what it stamped.
fn classify(
    cx: &RunContext,
    prepared: &Prepared,
    facts: &LaunchFacts,
    finished: &Finished,
    stderr_tail: &str,
) -> Result<Option<SandboxFacts>, RunError> {
    let spec = &prepared.spec;
    let killed = finished.timed_out || finished.aborted || finished.signal.is_some();
    let outcome = Outcome {
        exit_code: finished.exit_code,
        signal: finished.signal,
        timed_out: finished.timed_out,
        aborted: finished.aborted,
        stderr_tail: stderr_tail.to_owned(),
        runner_status: prepared.report.interpret(
            finished.status_report.as_deref(),
            killed,
            finished.exit_code,
            stderr_tail,
        ),
    };
    let sandbox = cx.policy.settle(spec, facts, &outcome)?;
    check_stamp(spec, facts, sandbox.as_ref())?;
    Ok(sandbox)
}

/// The facts a component stamped must describe this run: its mode, and
/// enforcement exactly when (and as) a runner confined it. A foreground
/// run always gets facts; a confined run never loses them.
fn check_stamp(
    spec: &ExecSpec,
    facts: &LaunchFacts,
    stamped: Option<&SandboxFacts>,
) -> Result<(), RunError> {
    let wrong = |reason: String| {
        Err(RunError::PolicyFailed {
            phase: "settle",
            reason,
        })
    };
    let Some(stamped) = stamped else {
        if facts.wrap.is_some() || !facts.background {
            return wrong("returned no sandbox facts for a run that must carry them".into());
        }
        return Ok(());
    };
    if stamped.mode != spec.policy.mode {
        return wrong(format!(
            "stamped mode \"{}\" on a \"{}\" run",
            stamped.mode, spec.policy.mode
        ));
    }
    let expected = facts.wrap.as_ref().map(|wrap| wrap.enforcement);
    if stamped.enforcement != expected {
        return wrong(format!(
            "stamped enforcement {:?} but the run's confinement was {:?}",
            stamped.enforcement, expected
        ));
    }
    if facts.wrap.is_none() && (stamped.denied || stamped.runner_failed) {
        return wrong("claimed a sandbox denial or runner failure for an unconfined run".into());
    }
    Ok(())
}

/// The error for a foreground spawn failure. A confined run whose runner
/// binary is missing or not executable is a sandbox failure (settled by the
/// policy like any other runner failure); the rest are ordinary errors.
fn spawn_failed(
    cx: &RunContext,
    prepared: &Prepared,
    facts: &LaunchFacts,
    err: SpawnError,
) -> Result<RunError, RunError> {
    let program = prepared.launch.argv[0].clone();
    Ok(match err {
        SpawnError::Program(_) if prepared.wrap.is_some() => {
            let detail = runner_missing_detail(prepared, &err);
            cx.policy
                .settle(&prepared.spec, facts, &runner_missing(&detail))?;
            RunError::SandboxUnavailable {
                mode: prepared.spec.policy.mode,
                detail: Some(detail),
            }
        }
        SpawnError::Workdir(err) => RunError::Workdir {
            path: prepared.spec.workdir.clone(),
            reason: err.to_string(),
        },
        SpawnError::Program(source) | SpawnError::Other(source) => {
            RunError::Spawn { program, source }
        }
    })
}

/// Why a runner binary could not be started: `RUNNER: error`.
fn runner_missing_detail(prepared: &Prepared, err: &SpawnError) -> String {
    format!("{}: {err}", prepared.launch.argv[0])
}

/// The outcome of a run whose runner binary could not be started.
fn runner_missing(detail: &str) -> Outcome {
    Outcome {
        exit_code: None,
        signal: None,
        timed_out: false,
        aborted: false,
        stderr_tail: String::new(),
        runner_status: RunnerStatus::Failed(detail.to_owned()),
    }
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
