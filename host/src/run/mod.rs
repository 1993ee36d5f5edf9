//! The per-run pipeline: resolve → plan → spawn → settle. The only place
//! that sequences policy, sandbox and process. Every step's result passes
//! a host check before the next step sees it (`checks.rs` holds them and
//! their tests); a runner that could not start is a sandbox failure, never
//! a reason to run the command some other way.
//!
//! Foreground runs (`run`) and background tasks (`start`) share the
//! preparation, the settle of a failed spawn and the classification; they
//! differ only in who waits.

pub(crate) mod ahead;
mod checks;
pub use checks::workspace_problem;
mod essentials;
mod evidence;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod netns;

use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::admission::Permit;
use crate::audit::{AuditLog, Origin, Record, RecordedEnd, Stamp};
use crate::credentials::RunCredentials;
use crate::error::RunError;
use crate::model::{
    Decision, Deployment, ExecRequest, ExecResult, ExecSpec, GrantFacts, LaunchFacts, Network,
    Outcome, RunnerStatus, SandboxFacts, SandboxMode, SandboxPolicy, WrapFacts,
};
use crate::model::{LimitEnforcer, LimitFacts, LimitKind, RequestVerdict, RunLimits, StreamOutput};
use crate::policy::pool::{Panicked, PolicyPool};
use crate::policy::{Phase, Policy};
use crate::process::spill::{DEFAULT_SPILL_LIMIT, SpillDir};
use crate::process::{self, Cgroups, Finished, OutputSink, Process, RunCgroup, SpawnError};
use crate::proxy::{Proxy, ProxyAt, Recorded};
use crate::sandbox::grant::{self, Held, expand_home};
use crate::sandbox::{Confine, StatusReport, Supervision};
use crate::tasks::{TaskEnd, TaskHandle, TaskStatus, Tasks};

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
    /// Bytes a spill file may hold; 0: no spill file at all (only the
    /// tail is kept).
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
    pub env: Arc<process::env::EnvPolicy>,
    /// Where runs get their own cgroup; none: the launcher's `RLIMIT_*`
    /// fallback, or nothing.
    pub cgroups: Option<Arc<Cgroups>>,
    /// The threads the run's policy calls (and the host's checks between
    /// them) run on, off the async threads.
    pub pool: Arc<PolicyPool>,
    /// A runner started ahead of the run's plan ([`ahead`]), for the
    /// first foreground run to take when its launch fits.
    pub ahead: Arc<ahead::Ahead>,
    /// The session's spare runner ([`ahead::Spare`]), when its host keeps
    /// them.
    pub spare: Option<Arc<ahead::Spare>>,
    /// Where each run and refusal is recorded, when the operator keeps a log.
    pub audit: Option<Arc<AuditLog>>,
    /// The session and peer the run's records name.
    pub origin: Arc<Origin>,
    /// Whom the run's processes are, when not the host's own user (a root
    /// server's socket client).
    pub identity: Option<Arc<process::identity::Identity>>,
    /// Credentials a proxied run gets placeholders for.
    pub credentials: Arc<[Arc<crate::credentials::Credential>]>,
}

impl RunContext {
    /// What this context's audit records of `command` name.
    fn stamp<'a>(
        &'a self,
        command: &'a str,
        workdir: Option<&'a std::path::Path>,
        approved: bool,
        started: SystemTime,
    ) -> Stamp<'a> {
        Stamp {
            origin: &self.origin,
            policy: self.policy.identity(),
            run_as: self.identity.as_ref().map(|who| who.uid),
            command,
            workdir,
            approved,
            started,
        }
    }

    /// Record that `request` (taken at `started`) did not run, when the
    /// operator keeps an audit log.
    fn audit_refused(&self, request: &ExecRequest, started: SystemTime, error: &RunError) {
        if let Some(log) = &self.audit {
            // The request's, else the deployment's (where it would have run).
            let workdir = Some(
                request
                    .workdir
                    .as_deref()
                    .unwrap_or(&self.deployment.workdir),
            );
            let stamp = self.stamp(&request.command, workdir, request.approved, started);
            let _ = log.write(Record::refused(&stamp, error));
        }
    }

    /// Run `job` with this context on the policy pool: the async thread
    /// that awaits it stays free for other runs. A job that panicked is a
    /// policy failure in `phase`.
    pub(crate) async fn offload<R: Send + 'static>(
        &self,
        phase: Phase,
        job: impl FnOnce(&RunContext) -> Result<R, RunError> + Send + 'static,
    ) -> Result<R, RunError> {
        let cx = self.clone();
        self.pool
            .run(move || job(&cx))
            .await
            .unwrap_or_else(|Panicked| {
                Err(RunError::PolicyFailed {
                    phase,
                    reason: "the host panicked while running the call".into(),
                })
            })
    }
}

/// A request resolved, planned and checked: ready to spawn.
struct Prepared {
    spec: ExecSpec,
    launch: process::SpawnRequest,
    wrap: Option<WrapFacts>,
    /// The grant the wrap enforces (confined runs only).
    grant: Option<GrantFacts>,
    /// The placeholders the run holds while it runs.
    placeholders: Vec<std::path::PathBuf>,
    /// Where the run's allow-list proxy listens, when it has one.
    proxy: Option<ProxyAt>,
    /// The run's credentials, whose placeholders its environment holds
    /// (a proxied run only).
    credentials: Option<Arc<RunCredentials>>,
    report: StatusReport,
    supervision: Supervision,
    /// The run's limits (the deployment's, tightened by the request).
    run_limits: RunLimits,
    /// Whether cordon's launcher gets the `RLIMIT_*` fallback's limits.
    launcher_limits: bool,
    /// Whether the request came approved.
    approved: bool,
    /// The HTTP requests a person approved for the run.
    approved_requests: Vec<crate::model::ApprovedRequest>,
    /// Who the run asks about the asked requests not among them.
    request_approver: Option<crate::model::RequestApprover>,
    /// When the request was taken (its records' start).
    started: SystemTime,
}

impl Prepared {
    /// What this run's audit records name.
    fn stamp<'a>(&'a self, cx: &'a RunContext) -> Stamp<'a> {
        let workdir = Some(self.spec.workdir.as_path());
        cx.stamp(&self.spec.command, workdir, self.approved, self.started)
    }

    /// Record that this run starts (`run-start` or `task-start`): a task
    /// always, a foreground run when the operator requires the log. A
    /// required log that cannot take the record refuses the run.
    fn audit_start(&self, cx: &RunContext, event: &'static str) -> Result<(), RunError> {
        let Some(log) = &cx.audit else {
            return Ok(());
        };
        if event == "run-start" && !log.required() {
            return Ok(());
        }
        let backend = self.wrap.as_ref().map(|wrap| wrap.backend);
        let record = Record::starting(&self.stamp(cx), event, self.spec.policy.clone(), backend);
        match (log.write(record), log.required()) {
            (Err(err), true) => Err(RunError::AuditUnavailable {
                path: log.path().to_path_buf(),
                reason: err.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// The launch facts `settle` gets for this run.
    fn facts(&self, background: bool) -> LaunchFacts {
        LaunchFacts {
            background,
            wrap: self.wrap.clone(),
        }
    }
}

/// What one attempt at a foreground run came to.
enum Attempt {
    /// The run's result.
    Done(Box<ExecResult>),
    /// The runner never started the command and the ladder moved on: plan
    /// the request again (its stdin given back; the mode it was planned in).
    Again(Option<process::StdinSource>, SandboxMode),
    /// A runner started ahead (or the session's spare) refused the command
    /// — its view changed while it waited — and nothing ran: the request
    /// again, its runner spawned afresh.
    Afresh(Option<process::StdinSource>),
}

/// How many times a foreground run is planned at most: once per rung of
/// the longest ladder, and once more to fail closed.
const MAX_ATTEMPTS: usize = 3;

/// Run `request` in the foreground. A runner chosen without a probe is
/// tried by this very run (see `sandbox/ladder.rs`): when it did not start
/// the command and its probe fails too, the request is planned again on
/// the next rung — it never ran, so it cannot run twice.
pub(crate) async fn run(
    cx: &RunContext,
    mut request: ExecRequest,
    options: RunOptions,
) -> Result<ExecResult, RunError> {
    if request.open_stdin {
        return Err(RunError::InvalidRequest(
            "openStdin: only a task (start) can be written to; a foreground run reads the \
             stdin it is given"
                .into(),
        ));
    }
    if request.tty.is_some() {
        return Err(RunError::InvalidRequest(
            "tty: only a task (start) gets a terminal, written to with write and read with \
             read; a foreground run has pipes"
                .into(),
        ));
    }
    let started = SystemTime::now();
    let stdin = request.stdin.take();
    let template = request.clone();
    request.stdin = stdin;
    tracing::debug!(session = %cx.origin.session, command = %crate::text::inert(&template.command), "run");
    let ran = run_attempts(cx, request, &template, options).await;
    match &ran {
        Ok(result) => tracing::debug!(
            session = %cx.origin.session,
            exit_code = ?result.exit_code,
            signal = ?result.signal,
            timed_out = result.timed_out,
            "run ended"
        ),
        Err(error) => {
            tracing::info!(session = %cx.origin.session, code = %error.code(), %error, "run refused")
        }
    }
    if let Err(error) = &ran {
        cx.audit_refused(&template, started, error);
    }
    ran
}

/// [`run`]'s attempts, until one is done or the ladder is exhausted.
async fn run_attempts(
    cx: &RunContext,
    mut request: ExecRequest,
    template: &ExecRequest,
    options: RunOptions,
) -> Result<ExecResult, RunError> {
    let (mut mode, mut waiting_ok, mut planned) = (None, true, 0);
    // A runner that refused afresh is not counted: it happens once.
    while planned < MAX_ATTEMPTS {
        let stdin = match attempt(cx, request, options.clone(), waiting_ok).await? {
            Attempt::Done(result) => return Ok(*result),
            Attempt::Again(stdin, again) => {
                (mode, planned) = (Some(again), planned + 1);
                stdin
            }
            Attempt::Afresh(stdin) => {
                waiting_ok = false;
                stdin
            }
        };
        request = template.clone();
        request.stdin = match stdin {
            Some(process::StdinSource::Bytes(bytes)) => Some(bytes),
            _ => None,
        };
    }
    Err(RunError::SandboxUnavailable {
        mode: mode.unwrap_or(SandboxMode::ReadOnly),
        detail: Some("no rung of the sandbox ladder started the command".into()),
    })
}

/// One foreground attempt: prepare, spawn, wait, settle. `waiting_ok`: a
/// runner started ahead or the session's spare may be taken.
async fn attempt(
    cx: &RunContext,
    request: ExecRequest,
    options: RunOptions,
    waiting_ok: bool,
) -> Result<Attempt, RunError> {
    let prepared = cx
        .offload(Phase::Resolve, move |cx| prepare(cx, request, false))
        .await?;
    let facts = prepared.facts(false);
    // An abort that came while the request was prepared (or before) ends
    // the run here: nothing is spawned only to be killed.
    if options
        .abort
        .as_ref()
        .is_some_and(CancellationToken::is_cancelled)
    {
        return Err(RunError::Aborted);
    }
    prepared.audit_start(cx, "run-start")?;
    // The runner started ahead of the plan, or the session's spare, when
    // this launch fits it; a spare's thread is kept until this attempt ends.
    let (ahead, _spare_thread) = match waiting_ok {
        true => ahead::taken(cx, &prepared),
        false => (None, None),
    };
    let adopted = ahead.is_some();
    let (spawned, limits, (held, proxy)) = launch(cx, &prepared, ahead, options.sink)?;
    if let Some(spare) = &cx.spare {
        spare.refill(cx, &prepared);
    }
    let process = match spawned {
        Ok(process) => process,
        Err(err) => return spawn_failed(cx, prepared, &facts, err).await,
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
    if let Some(wrap) = &prepared.wrap {
        if !prepared
            .report
            .never_started(&finished, prepared.supervision)
        {
            cx.confiner.confirm(wrap.backend);
        } else if adopted {
            drop((held, proxy));
            return Ok(Attempt::Afresh(prepared.launch.stdin));
        } else if refuted(cx, &prepared).await {
            drop((held, proxy));
            return Ok(Attempt::Again(
                prepared.launch.stdin,
                prepared.spec.policy.mode,
            ));
        }
    }
    let stderr = stderr.lock().expect("capture lock").stream_output();
    let stdout = stdout.lock().expect("capture lock").stream_output();
    let ran = Ran {
        facts,
        finished,
        stdout,
        stderr,
        limits,
        network: proxy.as_ref().map(Proxy::recorded).unwrap_or_default(),
    };
    let result = finish(cx, prepared, ran).await?;
    drop(held);
    Ok(Attempt::Done(Box::new(result)))
}

/// What a launch holds while its command runs: its placeholders and its
/// proxy (released when dropped).
type Holds = (Held, Option<Proxy>);

/// The one launch path of foreground runs and background tasks: the run's
/// cgroup and limits (a runner started `ahead` brings its own cgroup, now
/// given the run's limits), its placeholders held, its proxy started, then
/// the spawn — whose failure is the caller's to settle.
fn launch(
    cx: &RunContext,
    prepared: &Prepared,
    ahead: Option<(process::Waiting, Vec<u8>)>,
    sink: Option<Arc<dyn OutputSink>>,
) -> Result<(Result<Process, SpawnError>, InForce, Holds), RunError> {
    let (cgroup, limits) = match (&ahead, &cx.cgroups) {
        (Some(_), Some(cgroups)) => (None, in_force_in(cgroups, prepared)),
        _ => contain(cx, prepared)?,
    };
    let holds = (hold(prepared)?, start_proxy(cx, prepared)?);
    let spawned = match ahead {
        Some((waiting, message)) => {
            waiting.adopt_unchecked(message, &prepared.launch, Some(&cx.spill_dir), sink)
        }
        None => process::spawn_unchecked(&prepared.launch, cgroup, Some(&cx.spill_dir), sink),
    };
    Ok((spawned, limits, holds))
}

/// A launch that could not be spawned: on another rung when its runner is
/// refuted (nothing ran), else the error — `SANDBOX_UNAVAILABLE` when the
/// runner itself is missing.
async fn spawn_failed(
    cx: &RunContext,
    prepared: Prepared,
    facts: &LaunchFacts,
    err: SpawnError,
) -> Result<Attempt, RunError> {
    if matches!(err, SpawnError::Program(_)) && refuted(cx, &prepared).await {
        return Ok(Attempt::Again(
            prepared.launch.stdin,
            prepared.spec.policy.mode,
        ));
    }
    Err(match settle_spawn_failure(cx, &prepared, facts, &err) {
        Some(RunnerMissing { detail, settled }) => {
            settled?;
            RunError::SandboxUnavailable {
                mode: prepared.spec.policy.mode,
                detail: Some(detail),
            }
        }
        None => spawn_error(&prepared, err),
    })
}

/// What a run that ran left to settle.
struct Ran {
    facts: LaunchFacts,
    finished: Finished,
    stdout: StreamOutput,
    stderr: StreamOutput,
    limits: InForce,
    /// What the run's proxy refused and decided.
    network: Recorded,
}

/// Classify a run that ran (the component's `settle`, off the async
/// threads) and make its result; audited.
async fn finish(cx: &RunContext, prepared: Prepared, ran: Ran) -> Result<ExecResult, RunError> {
    let Ran {
        facts,
        finished,
        stdout,
        stderr,
        limits,
        network,
    } = ran;
    let (exit_code, signal) = prepared.supervision.command_end(&finished);
    let tail = stderr.text.clone();
    // The kernel's list is read while the component classifies: neither
    // needs the other until the facts are stamped.
    let kernel = evidence::kernel_denials(prepared.started, prepared.supervision, &finished);
    let settled = cx.offload(Phase::Settle, move |cx| {
        let sandbox = classify(cx, &prepared, &facts, &finished, (exit_code, signal), &tail);
        Ok((prepared, finished, sandbox))
    });
    let (kernel, settled) = tokio::join!(kernel, settled);
    let (prepared, finished, sandbox) = settled?;
    let sandbox = evidence::stamped(sandbox?, kernel, &network.refused);
    let result = ExecResult {
        exit_code,
        signal,
        timed_out: finished.timed_out,
        aborted: finished.aborted,
        timeout_ms: prepared.spec.timeout_ms,
        stdout,
        stderr,
        sandbox,
        limits: Some(limits.reached(finished.exceeded)),
        grant: prepared.grant.clone().map(|mut grant| {
            grant.refused = network.refused;
            grant.requests = network.requests;
            grant.requests_unlisted = network.requests_unlisted;
            grant
        }),
    };
    audit_ran(cx, &prepared, &result);
    Ok(result)
}

/// Record a run that ran, when the operator keeps an audit log.
fn audit_ran(cx: &RunContext, prepared: &Prepared, result: &ExecResult) {
    if let Some(log) = &cx.audit {
        let _ = log.write(Record::ran(
            &prepared.stamp(cx),
            Some(prepared.spec.policy.clone()),
            prepared.wrap.as_ref().map(|wrap| wrap.backend),
            result,
        ));
    }
}

/// Ask the confiner whether a run whose runner never started the command
/// is to be planned again on another rung (its probe runs off the async
/// threads).
async fn refuted(cx: &RunContext, prepared: &Prepared) -> bool {
    let Some(backend) = prepared.wrap.as_ref().map(|wrap| wrap.backend) else {
        return false;
    };
    let confiner = cx.confiner.clone();
    tokio::task::spawn_blocking(move || confiner.refute(backend))
        .await
        .unwrap_or(false)
}

/// The sender of a task's open stdin (`open_stdin`, or its terminal's
/// input with `tty`), the request reading its stream; refused beside stdin
/// bytes or a stream of the caller's, and for a terminal of no size.
fn open_stdin(
    request: &mut ExecRequest,
) -> Result<Option<tokio::sync::mpsc::Sender<Vec<u8>>>, RunError> {
    if let Some(why) = request.tty.as_ref().and_then(|size| size.invalid()) {
        return Err(RunError::InvalidRequest(why));
    }
    if !request.open_stdin && request.tty.is_none() {
        return Ok(None);
    }
    if request.stdin.is_some() || request.stdin_stream.is_some() {
        return Err(RunError::InvalidRequest(
            "openStdin/tty: a task reads either the stdin it was given or what is written to \
             it, not both (send those bytes as its first write)"
                .into(),
        ));
    }
    let (sender, stream) = crate::model::StdinStream::channel(16);
    request.stdin_stream = Some(stream);
    Ok(Some(sender))
}

/// Start `request` as a background task of `tasks` and return at once.
///
/// Errors before the spawn (invalid request, no sandbox, policy failure)
/// are returned here; a failure of the spawn itself settles the task as
/// `killed` and is delivered once by its next read. No executor timeout
/// applies to a task unless the request names one.
///
/// `slot` is the task's unit of the host's task bound (held until it is
/// removed), `running` its unit of the run bound (held until it settles).
pub(crate) async fn start(
    cx: &RunContext,
    tasks: &Tasks,
    mut request: ExecRequest,
    slot: Permit,
    running: Permit,
) -> Result<TaskHandle, RunError> {
    let explicit_timeout = request.timeout_ms.is_some();
    let stdin = open_stdin(&mut request)?;
    let started = SystemTime::now();
    let template = cx.audit.as_ref().map(|_| ExecRequest {
        stdin: None,
        ..request.clone()
    });
    let prepared = match cx
        .offload(Phase::Resolve, move |cx| prepare(cx, request, true))
        .await
        .and_then(|prepared| prepared.audit_start(cx, "task-start").map(|()| prepared))
    {
        Ok(prepared) => prepared,
        Err(error) => {
            if let Some(template) = &template {
                cx.audit_refused(template, started, &error);
            }
            return Err(error);
        }
    };
    let facts = prepared.facts(true);
    let (spawned, _limits, held) = launch(cx, &prepared, None, None)?;
    match spawned {
        Ok(process) => {
            let task = tasks.register(
                prepared.spec.command.clone(),
                prepared.grant.clone(),
                process.stdout().clone(),
                process.stderr().clone(),
                Some(slot),
                stdin,
            );
            task.set_group(process.group(), process.input());
            let deadline =
                explicit_timeout.then(|| Duration::from_millis(prepared.spec.timeout_ms));
            tokio::spawn(follow(
                cx.clone(),
                task.clone(),
                prepared,
                facts,
                process,
                deadline,
                (held, running),
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
            let task = tasks.register(
                prepared.spec.command.clone(),
                prepared.grant.clone(),
                empty(),
                empty(),
                Some(slot),
                None,
            );
            // A missing runner is named in the notice, as the foreground
            // error names it; any other failure of a confined task still
            // carries the sandbox facts (`{mode, denied: false, enforcement}`).
            let (sandbox, notice) = match settle_spawn_failure(cx, &prepared, &facts, &err) {
                Some(missing) => (missing.settled.ok().flatten(), missing.detail),
                None if prepared.wrap.is_some() => {
                    let outcome = Outcome::default();
                    let sandbox = settle(cx, &prepared, &facts, &outcome).ok().flatten();
                    (sandbox, err.to_string())
                }
                None => (None, err.to_string()),
            };
            task.settle(TaskEnd {
                status: TaskStatus::Killed,
                exit_code: None,
                signal: None,
                timed_out: false,
                sandbox,
                notice: Some(format!("spawn failed: {notice}\n")),
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
    // Released (and removed when last) once the task has ended; the proxy
    // stops then too, and the task's unit of the run bound is given back.
    held: (Holds, Permit),
) {
    let stderr = process.stderr().clone();
    let kill = task.kill_token().clone();
    // What the task's record names, taken before `prepared` goes to settle.
    let audited = cx.audit.clone().map(|log| {
        (
            log,
            (prepared.spec.command.clone(), prepared.spec.workdir.clone()),
            (prepared.approved, prepared.started),
            prepared.spec.policy.clone(),
            prepared.wrap.as_ref().map(|wrap| wrap.backend),
        )
    });
    let ending = match process.wait(deadline, cx.limits.kill_grace, &kill).await {
        Ok(finished) => {
            let tail = stderr.lock().expect("capture lock").stream_output().text;
            let (exit_code, signal) = prepared.supervision.command_end(&finished);
            let end = (exit_code, signal);
            let (timed_out, aborted) = (finished.timed_out, finished.aborted);
            let kernel =
                evidence::kernel_denials(prepared.started, prepared.supervision, &finished);
            let network = held.0.1.as_ref().map(Proxy::recorded).unwrap_or_default();
            let refused = network.refused.clone();
            let classified = cx.offload(Phase::Settle, move |cx| {
                Ok(classify(cx, &prepared, &facts, &finished, end, &tail))
            });
            let (kernel, classified) = tokio::join!(kernel, classified);
            let classified = classified
                .and_then(|classified| classified)
                .map(|sandbox| evidence::stamped(sandbox, kernel, &refused));
            let (sandbox, notice) = match classified {
                Ok(sandbox) => (sandbox, None),
                Err(err) => (None, Some(format!("cordon: {}: {err}\n", err.code()))),
            };
            let runner_failed = sandbox.as_ref().is_some_and(|f| f.runner_failed);
            let exited = exit_code.is_some() && !aborted && !timed_out;
            TaskEnd {
                status: if exited && !runner_failed {
                    TaskStatus::Completed
                } else {
                    TaskStatus::Killed
                },
                exit_code,
                signal,
                timed_out,
                sandbox,
                notice,
            }
        }
        Err(err) => TaskEnd {
            status: TaskStatus::Killed,
            exit_code: None,
            signal: None,
            timed_out: false,
            sandbox: None,
            notice: Some(format!("cordon: waiting for the task failed: {err}\n")),
        },
    };
    if let Some((log, (command, workdir), (approved, started), grant, backend)) = audited {
        let network = held.0.1.as_ref().map(Proxy::recorded).unwrap_or_default();
        let end = RecordedEnd {
            exit_code: ending.exit_code,
            signal: ending.signal,
            timed_out: ending.timed_out,
            sandbox: ending.sandbox.as_ref(),
            refused: network.refused,
            requests: (network.requests, network.requests_unlisted),
        };
        let stamp = cx.stamp(&command, Some(&workdir), approved, started);
        let _ = log.write(Record::ended(&stamp, "task", Some(grant), backend, end));
    }
    task.settle(ending);
}

/// Resolve, check, canonicalise, plan, and check the launch. `verify`:
/// the confiner's runner must be proven before the plan (a background task
/// is not planned again once it started).
fn prepare(cx: &RunContext, mut request: ExecRequest, verify: bool) -> Result<Prepared, RunError> {
    let started = SystemTime::now();
    checks::workdir_from_deployment(&mut request, &cx.deployment);
    let approved = request.approved;
    let ceiling = cx.deployment.max_mode;
    checks::request_within_ceiling(&request, ceiling)?;
    checks::request_size(&request)?;
    let approved_requests = std::mem::take(&mut request.approved_requests);
    let request_approver = request.request_approver.take();
    let run_limits = checks::limits(request.limits.as_ref(), &cx.deployment.limits)?;
    // `plan` runs on the instance that resolved (one instance less a run).
    let (decision, preparation) = cx.policy.begin(&request, &cx.deployment)?;
    let mut spec = match decision {
        Decision::Allow(spec) => spec,
        Decision::Deny(reason) => {
            return Err(RunError::Denied {
                reason: crate::text::reason(&reason),
            });
        }
        Decision::Ask { reason, policy } => return Err(approval(cx, &request, reason, policy)),
    };
    spec_checked(cx, &request, &mut spec)?;
    checks::host_additions(&mut spec.policy, &cx.deployment, &run_homes(cx))?;
    if spec.policy.mode.is_confined() {
        // Choose the runner (probing where a run cannot be the probe) on
        // the host's time, before the component's `plan` and its deadline:
        // a slow probe must not read as a policy failure.
        match verify {
            true => cx.confiner.verify(),
            false => cx.confiner.prepare(),
        }
    }
    let accepted = checks::launch(preparation.plan(&spec, confiner(cx))?, &spec)?;
    // Without a cgroup, cordon's launcher sets the fallback rlimits.
    let launcher_limits = cx.cgroups.is_none() && accepted.handover.reaches_launcher();
    let launcher_vars = match launcher_limits {
        true => rlimit_vars(&run_limits),
        false => vec![],
    };
    let (mut env, credentials) = command_env(cx, &spec, accepted.proxy.as_ref());
    // A run as another user (a root server's client) names that user, and
    // its runner takes the identity on before it confines.
    let inherits = accepted.handover == crate::sandbox::EnvHandover::Inherit;
    let confined = accepted.wrap.is_some();
    let argv = taken_on(
        cx,
        accepted.argv,
        (confined, inherits),
        &mut env,
        spec.policy.mode,
    )?;
    let over_fd = inherits && cx.identity.is_some();
    let (env, handover, init_env) = match over_fd {
        // `__as` gets a fixed environment and the command's at
        // HANDOVER_FD (the status slot below it stays unused).
        true => crate::sandbox::EnvHandover::LauncherFd.split(env, &[]),
        false => accepted.handover.split(env, &launcher_vars),
    };
    let launch = process::SpawnRequest {
        argv,
        env,
        workdir: spec.workdir.clone(),
        stdin: process::StdinSource::of(request.stdin, request.stdin_stream),
        tty: request.tty,
        tail_bytes: cx.limits.tail_bytes,
        spill_limit: cx.limits.spill_limit,
        status_pipe: accepted.report.needs_pipe() || over_fd,
        handover,
        init_pipe: accepted.supervision.init_pipe(),
        init_env,
        supervisor: accepted.supervision.process(),
    };
    Ok(Prepared {
        spec,
        launch,
        wrap: accepted.wrap,
        grant: accepted.grant,
        placeholders: accepted.placeholders,
        proxy: accepted.proxy,
        credentials,
        report: accepted.report,
        supervision: accepted.supervision,
        run_limits,
        launcher_limits,
        approved,
        approved_requests,
        request_approver,
        started,
    })
}

/// The host's checks of a spec the component allowed for `request`.
fn spec_checked(
    cx: &RunContext,
    request: &ExecRequest,
    spec: &mut crate::model::ExecSpec,
) -> Result<(), RunError> {
    checks::spec_size(spec)?;
    checks::spec_env(spec)?;
    let returned_root = spec.policy.workspace_root.clone();
    checks::canonicalise(spec)?;
    checks::spec_within_ceiling(spec, cx.deployment.max_mode)?;
    let handed = checks::handed_policy(request, &cx.deployment);
    let declared = cx.policy.info().default_mode;
    checks::spec_keeps_handed_policy(spec, handed, Some(&returned_root), declared)?;
    spec.policy.network.keep_inspection_marks(&handed.network);
    spec.policy.network.inspect_where(&cx.deployment.inspect);
    checks::policy_within(&spec.policy, &cx.deployment)?;
    if let Some(who) = &cx.identity {
        checks::reachable_by(spec, who)?;
    }
    Ok(())
}

/// What the host and the policy would say of a request, with nothing run.
#[derive(Debug)]
pub enum Verdict {
    /// It would run as this grant, without asking anyone.
    Allowed(Box<SandboxPolicy>),
    /// It would run only once a person approved: why, and the grant.
    Asks {
        /// The policy's reason.
        reason: String,
        /// The grant an approval runs it under.
        policy: Box<SandboxPolicy>,
    },
}

/// Check `request` as a run would — the ceiling, the component's
/// decision, the host's checks of its grant — and spawn nothing: a refusal
/// is the error the run would have been refused with.
pub(crate) async fn check(cx: &RunContext, request: ExecRequest) -> Result<Verdict, RunError> {
    cx.offload(Phase::Resolve, move |cx| {
        let mut request = request;
        checks::workdir_from_deployment(&mut request, &cx.deployment);
        checks::request_within_ceiling(&request, cx.deployment.max_mode)?;
        checks::request_size(&request)?;
        checks::limits(request.limits.as_ref(), &cx.deployment.limits)?;
        let (decision, _unplanned) = cx.policy.begin(&request, &cx.deployment)?;
        match decision {
            Decision::Allow(mut spec) => {
                spec_checked(cx, &request, &mut spec)?;
                Ok(Verdict::Allowed(Box::new(spec.policy)))
            }
            Decision::Deny(reason) => Err(RunError::Denied {
                reason: crate::text::reason(&reason),
            }),
            Decision::Ask { reason, policy } => match approval(cx, &request, reason, policy) {
                RunError::ApprovalRequired { reason, policy } => {
                    Ok(Verdict::Asks { reason, policy })
                }
                other => Err(other),
            },
        }
    })
    .await
}

/// `argv` started as the run's user, when it is not the host's (a root
/// server's client: `cordon __as`, with `env` naming that user).
///
/// `cordon __as` runs as root until it takes the identity on: it must
/// never hold the command's environment (a client's `LD_PRELOAD` would
/// load into it as root). An unconfined command's environment goes to it
/// over a memfd instead (`inherits`: the launch hands the environment to
/// what it starts); a runner that takes the environment in its own (an
/// operator's `runner_command`) cannot be started so.
fn taken_on(
    cx: &RunContext,
    argv: Vec<String>,
    (confined, inherits): (bool, bool),
    env: &mut Vec<(OsString, OsString)>,
    mode: SandboxMode,
) -> Result<Vec<String>, RunError> {
    let Some(identity) = &cx.identity else {
        return Ok(argv);
    };
    if confined && inherits {
        return Err(RunError::SandboxUnavailable {
            mode,
            detail: Some(format!(
                "the operator's runner takes the command's environment in its own, so it \
                 cannot be started as uid {} (cordon takes that identity on as root, before \
                 the runner): confine socket clients with cordon's runners, or set \
                 [serve.uid.{}] run_as = \"server\"",
                identity.uid, identity.uid
            )),
        });
    }
    identity.name_user_in(env);
    identity
        .wrap(
            argv,
            inherits,
            crate::sandbox::landlock::installed_launcher(),
        )
        .map_err(|source| RunError::Spawn {
            program: cordon_launcher::AS_SUBCOMMAND.into(),
            source,
        })
}

/// The confiner a run plans with: the host's, or — for a run as another
/// user — the host's confining as that user.
fn confiner(cx: &RunContext) -> Arc<dyn crate::sandbox::Confine> {
    match &cx.identity {
        Some(identity) => Arc::new(crate::sandbox::ConfineAs {
            inner: cx.confiner.clone(),
            identity: identity.clone(),
        }),
        None => cx.confiner.clone(),
    }
}

/// The home directories whose credentials a run must not write: its
/// user's (a root server's client's), or the host's own user's (`HOME` and
/// the user database's, when they differ).
fn run_homes(cx: &RunContext) -> Vec<std::path::PathBuf> {
    static HOST_HOMES: std::sync::OnceLock<Vec<std::path::PathBuf>> = std::sync::OnceLock::new();
    if let Some(home) = cx.identity.as_ref().and_then(|who| who.home.clone()) {
        return vec![home];
    }
    let homes = HOST_HOMES.get_or_init(|| {
        let mut homes: Vec<std::path::PathBuf> = std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .filter(|home| home.is_absolute())
            .into_iter()
            .collect();
        let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten();
        if let Some(user) = me.filter(|user| !homes.contains(&user.dir)) {
            homes.push(user.dir);
        }
        homes
    });
    homes.clone()
}

/// The error for a component's *ask*: the proposed grant, checked as a
/// re-send carrying it would be (a grant no re-send could run is the
/// ceiling's error, not a question for a person).
fn approval(
    cx: &RunContext,
    request: &ExecRequest,
    reason: String,
    policy: SandboxPolicy,
) -> RunError {
    let resend = ExecRequest {
        policy: Some(policy.clone()),
        ..request.clone()
    };
    let checked = checks::request_within_ceiling(&resend, cx.deployment.max_mode).and_then(|()| {
        let mut spec = ExecSpec {
            command: request.command.clone(),
            workdir: cx.deployment.workdir.clone(),
            timeout_ms: 1,
            env: vec![],
            policy: policy.clone(),
        };
        checks::canonicalise(&mut spec)?;
        checks::policy_within(&spec.policy, &cx.deployment)
    });
    match checked {
        Ok(()) => RunError::ApprovalRequired {
            reason: crate::text::reason(&reason),
            policy: Box::new(policy),
        },
        Err(err) => err,
    }
}

/// The launcher variables of the `RLIMIT_*` fallback for `limits`.
fn rlimit_vars(limits: &RunLimits) -> Vec<(OsString, OsString)> {
    use crate::sandbox::launcher::{LIMIT_AS_VAR, LIMIT_NPROC_VAR};
    let mut vars = vec![];
    if let Some(pids) = limits.pids {
        vars.push((LIMIT_NPROC_VAR.into(), pids.to_string().into()));
    }
    if let Some(bytes) = limits.memory_bytes {
        vars.push((LIMIT_AS_VAR.into(), bytes.to_string().into()));
    }
    vars
}

/// The command's environment (a runner that takes it over its own channel
/// is itself spawned without it), and the run's credentials when its
/// network goes through the proxy at `proxy`.
fn command_env(
    cx: &RunContext,
    spec: &ExecSpec,
    proxy: Option<&ProxyAt>,
) -> (Vec<(OsString, OsString)>, Option<Arc<RunCredentials>>) {
    // A closed network withholds the variables that point at host sockets
    // (an explicit entry of the request's still wins).
    let closed = spec.policy.mode.is_confined() && spec.policy.network != Network::Full;
    let exposed: Vec<std::path::PathBuf> =
        spec.policy.sockets.iter().map(|s| expand_home(s)).collect();
    let mut env = process::env::child_env(
        std::env::vars_os(),
        &cx.env,
        &spec.env,
        closed.then_some(exposed.as_slice()),
    );
    // The variables credentials' values come from never reach a command.
    let sources: Vec<&str> = (cx.credentials.iter())
        .filter_map(|credential| credential.source_var.as_deref())
        .collect();
    env.retain(|(name, _)| !sources.iter().any(|source| name == source));
    // An allow-list run's clients go to the proxy, whatever the host said.
    // An inspected run's TLS clients trust its bundle, whatever the host said.
    // Its credentials are placeholders the proxy alone can fill in.
    let credentials = (proxy.is_some() && !cx.credentials.is_empty())
        .then(|| Arc::new(RunCredentials::issue(&cx.credentials)));
    if let Some(at) = proxy {
        let mut vars = crate::proxy::client_env(at.client_port());
        vars.extend(
            at.bundle()
                .map(crate::proxy::bundle_env)
                .unwrap_or_default(),
        );
        vars.extend(credentials.iter().flat_map(|held| held.env()));
        for (name, value) in vars {
            env.retain(|(have, _)| *have != *name);
            env.push((name.into(), value.into()));
        }
    }
    (env, credentials)
}

/// Start the run's allow-list proxy, when its wrap goes through one: each
/// connection is decided by the policy that planned the run, for its spec
/// (a failed call refuses that connection).
fn start_proxy(cx: &RunContext, prepared: &Prepared) -> Result<Option<Proxy>, RunError> {
    let Some(at) = &prepared.proxy else {
        return Ok(None);
    };
    // One instance decides all of the run's connections and requests (the
    // proxy asks off the async threads).
    let settings = &cx.deployment.settings;
    let connector = Arc::new(cx.policy.connector(&prepared.spec, settings));
    let connecting = connector.clone();
    let decide: crate::proxy::Decide = Arc::new(move |host: &str, port: u16| {
        connecting
            .connect(host, port)
            .unwrap_or_else(|err| Err(err.to_string()))
    });
    let decide_request = connector.decides_requests().then(|| {
        let decide: crate::proxy::DecideRequest = Arc::new(move |request| {
            connector
                .request(request)
                .unwrap_or_else(|err| RequestVerdict::Deny(err.to_string()))
        });
        decide
    });
    let gate = crate::proxy::Gate {
        grant: prepared.spec.policy.network.clone(),
        ceiling: cx.deployment.max_network.clone(),
        decide,
        decide_request,
        approved_requests: prepared.approved_requests.clone(),
        approver: prepared.request_approver.clone(),
        credentials: prepared.credentials.clone(),
        inspection: at.inspection().cloned(),
    };
    Proxy::start(at, gate)
        .and_then(|proxy| {
            // A run as another user reaches the socket as that user.
            if let Some(who) = &cx.identity {
                at.give_to(who.uid, who.gid)?;
            }
            Ok(Some(proxy))
        })
        .map_err(|source| RunError::Spawn {
            program: prepared.launch.argv[0].clone(),
            source: std::io::Error::new(
                source.kind(),
                format!("cannot start the network proxy ({at:?}): {source}"),
            ),
        })
}

/// Hold the run's placeholders (an absent protected path that bwrap binds
/// read-only) until the returned value is dropped, after the run.
fn hold(prepared: &Prepared) -> Result<Held, RunError> {
    grant::hold(&prepared.placeholders).map_err(|source| RunError::Spawn {
        program: prepared.launch.argv[0].clone(),
        source,
    })
}

/// The limits a run has and what enforces them, before it starts.
struct InForce {
    enforced_by: LimitEnforcer,
    limits: RunLimits,
}

impl InForce {
    /// The facts, with the limits the run reached.
    fn reached(self, exceeded: Vec<LimitKind>) -> LimitFacts {
        LimitFacts {
            enforced_by: self.enforced_by,
            limits: self.limits,
            exceeded,
        }
    }
}

/// The limits `prepared` has in a cgroup of `cgroups`, and what enforces them.
fn in_force_in(cgroups: &Cgroups, prepared: &Prepared) -> InForce {
    InForce {
        enforced_by: cgroups.enforcer(),
        limits: cgroups.in_force(&prepared.run_limits),
    }
}

/// The run's own cgroup, with its limits written, where the host can make
/// one; else the launcher's fallback, or nothing. A host that has cgroups
/// but cannot make this run's fails the run: it never runs unbounded.
fn contain(cx: &RunContext, prepared: &Prepared) -> Result<(Option<RunCgroup>, InForce), RunError> {
    let limits = prepared.run_limits;
    match &cx.cgroups {
        Some(cgroups) => {
            let cgroup = cgroups.create(&limits).map_err(|err| RunError::Spawn {
                program: prepared.launch.argv[0].clone(),
                source: std::io::Error::new(
                    err.kind(),
                    format!("cannot make the run's cgroup: {err}"),
                ),
            })?;
            Ok((Some(cgroup), in_force_in(cgroups, prepared)))
        }
        None if prepared.launcher_limits => Ok((
            None,
            InForce {
                enforced_by: LimitEnforcer::Rlimit,
                limits: RunLimits {
                    cpu_weight: None,
                    ..limits
                },
            },
        )),
        None => Ok((
            None,
            InForce {
                enforced_by: LimitEnforcer::None,
                limits: RunLimits::NONE,
            },
        )),
    }
}

/// Have the policy classify a finished run: `finished` as the host saw
/// it (the runner's own status), told to the policy with the command's
/// end (`Supervision::command_end`).
fn classify(
    cx: &RunContext,
    prepared: &Prepared,
    facts: &LaunchFacts,
    finished: &Finished,
    (exit_code, signal): (Option<i32>, Option<i32>),
    stderr_tail: &str,
) -> Result<Option<SandboxFacts>, RunError> {
    let host_killed = finished.timed_out || finished.aborted;
    let outcome = Outcome {
        exit_code,
        signal,
        timed_out: finished.timed_out,
        aborted: finished.aborted,
        stderr_tail: stderr_tail.to_owned(),
        runner_status: match prepared.supervision.failure(finished) {
            Some(detail) => RunnerStatus::Failed(detail),
            None => prepared.report.interpret(
                finished.status_report.as_deref(),
                host_killed,
                finished.signal,
                finished.exit_code,
                stderr_tail,
            ),
        },
    };
    settle(cx, prepared, facts, &outcome)
}

/// The policy's settle, and the host's check of what it stamped: the one
/// way a run gets its sandbox facts.
fn settle(
    cx: &RunContext,
    prepared: &Prepared,
    facts: &LaunchFacts,
    outcome: &Outcome,
) -> Result<Option<SandboxFacts>, RunError> {
    let sandbox = cx.policy.settle(&prepared.spec, facts, outcome)?;
    checks::stamp(&prepared.spec, facts, sandbox.as_ref())?;
    Ok(sandbox)
}

/// A confined run whose runner binary could not be started.
struct RunnerMissing {
    /// `RUNNER: error`.
    detail: String,
    /// What the policy made of it.
    settled: Result<Option<SandboxFacts>, RunError>,
}

/// Settle a run whose spawn failed, once for foreground and background: a
/// confined run whose runner binary is missing or not executable is a
/// runner failure, settled by the policy like any other; anything else
/// (none) is an ordinary error that no policy classifies.
fn settle_spawn_failure(
    cx: &RunContext,
    prepared: &Prepared,
    facts: &LaunchFacts,
    err: &SpawnError,
) -> Option<RunnerMissing> {
    if !matches!(err, SpawnError::Program(_)) || prepared.wrap.is_none() {
        return None;
    }
    let detail = format!("{}: {err}", prepared.launch.argv[0]);
    let outcome = Outcome {
        exit_code: None,
        signal: None,
        timed_out: false,
        aborted: false,
        stderr_tail: String::new(),
        runner_status: RunnerStatus::Failed(detail.clone()),
    };
    let settled = settle(cx, prepared, facts, &outcome);
    Some(RunnerMissing { detail, settled })
}

/// The error for a spawn failure that is not the runner's.
fn spawn_error(prepared: &Prepared, err: SpawnError) -> RunError {
    match err {
        SpawnError::Workdir(err) => RunError::Workdir {
            path: prepared.spec.workdir.clone(),
            reason: err.to_string(),
        },
        SpawnError::Program(source) | SpawnError::Other(source) => RunError::Spawn {
            program: prepared.launch.argv[0].clone(),
            source,
        },
    }
}
