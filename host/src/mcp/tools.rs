//! The tools a model calls, and what each answers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use serde::Deserialize;

use super::approval::{self, Answer};
use super::{McpServer, progress, render};
use crate::error::RunError;
use crate::model::{ExecRequest, ExecResult, Network, SandboxMode, SandboxPolicy, Told};
use crate::run::{RunOptions, Verdict};
use crate::tasks::TaskStatus;

/// `shell`'s input.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShellArgs {
    /// The shell command line to run.
    pub command: String,
    /// The directory to run it in: absolute, or relative to the workspace
    /// (default: the workspace).
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    /// Kill it after this many milliseconds (default 120000, at most 600000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Run it as a background job and return its id at once; read it with
    /// `shell_output`.
    #[serde(default)]
    pub background: bool,
    /// With `background`: keep the job's stdin open, to answer it with
    /// `shell_write` (a prompt, a REPL).
    #[serde(default)]
    pub open_stdin: bool,
    /// With `background`: run it in a terminal of 24 rows by 80 columns
    /// (a program that asks only a terminal, a REPL, an installer's
    /// prompts); answer it with `shell_write` (`eof` sends `^D`).
    #[serde(default)]
    pub tty: bool,
    /// Ask for a wider sandbox for this one command (a person approves it
    /// first; the deployment's ceiling holds either way).
    #[serde(default)]
    pub escalate: Option<Escalation>,
}

/// A wider grant for one command, which a person approves or not.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Escalation {
    /// Why the command needs it (shown to the person, as your words).
    pub reason: String,
    /// The mode for this command: `read-only` or `workspace-write`.
    #[serde(default)]
    pub mode: Option<SandboxMode>,
    /// More directories it may write: absolute, or relative to the workspace.
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    /// Network endpoints it may reach, as `host:port` (`*.example.org:443`).
    #[serde(default)]
    pub network: Vec<String>,
}

/// `shell_output` and `shell_kill`'s input.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobArgs {
    /// The job's id, as `shell` returned it (`1`, `2`, …).
    pub job_id: String,
    /// `shell_output` only: wait up to this many milliseconds for the job to
    /// end before reading (at most 600000; default: read at once).
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

/// `shell_write`'s input.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteArgs {
    /// The job's id, as `shell` returned it.
    pub job_id: String,
    /// The text to send to its stdin (end a line with `\n`).
    #[serde(default)]
    pub data: String,
    /// Close its stdin after the text (the job reads end of file).
    #[serde(default)]
    pub eof: bool,
}

/// `shell_mode`'s input.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModeArgs {
    /// The mode every later command of this session runs in:
    /// `read-only` or `workspace-write`.
    pub mode: SandboxMode,
    /// Why (shown to the person when the mode widens).
    #[serde(default)]
    pub reason: String,
}

/// `shell_list`'s input: nothing.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// The longest `waitMs` honoured.
const MAX_WAIT: Duration = Duration::from_secs(600);

/// What one `shell` call came to.
enum Shelled {
    /// A background job started: its reply.
    Started(CallToolResult),
    /// A foreground run's result, and its reply with the host's text.
    Ran(Box<ExecResult>, CallToolResult),
}

/// A run error as the model is told it.
fn told_of(error: &RunError) -> Told {
    match error {
        RunError::Denied { reason } => Told::Refused(reason.clone()),
        RunError::ApprovalRequired { reason, .. } => Told::NeedsApproval(reason.clone()),
        other => Told::Failed {
            code: other.code().to_string(),
            message: other.to_string(),
        },
    }
}

impl McpServer {
    /// The reply for a run that produced no result.
    fn failure(&self, text: String, error: &RunError) -> CallToolResult {
        self.reply(text, || serde_json::Value::Object(error.details()), true)
    }

    /// The tool result for `outcome`: its text from the policy's `render`
    /// export where the component has one, else the host's.
    async fn told(&self, command: &str, outcome: Result<Shelled, RunError>) -> CallToolResult {
        let (told, default) = match outcome {
            Ok(Shelled::Started(result)) => return result,
            Ok(Shelled::Ran(result, reply)) => (Told::Finished(result), reply),
            Err(error) => (told_of(&error), self.failure(render::error(&error), &error)),
        };
        self.rendered(command, &told, default).await
    }

    /// What a refused or unasked approval is told (`reason`: the policy's).
    async fn unapproved(
        &self,
        request: &ExecRequest,
        (reason, policy): (String, SandboxPolicy),
        answer: &Answer,
    ) -> CallToolResult {
        let text = render::not_approved(&reason, answer);
        let told = match answer {
            Answer::Declined => Told::Declined(reason.clone()),
            _ => Told::NeedsApproval(reason.clone()),
        };
        let asked = RunError::ApprovalRequired {
            reason,
            policy: Box::new(policy),
        };
        self.rendered(&request.command, &told, self.failure(text, &asked))
            .await
    }

    /// Run (or start) `request` once; a tool result, or the run error.
    async fn shell_once(
        &self,
        request: ExecRequest,
        background: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<Shelled, RunError> {
        if background {
            let task = self.session.start(request).await?;
            let job = self.jobs.add(task.id());
            let text = format!(
                "started job {job}; read it with shell_output (waitMs waits for it to end)"
            );
            let facts = || serde_json::json!({ "jobId": job, "taskId": task.id() });
            return Ok(Shelled::Started(self.reply(text, facts, false)));
        }
        let mut result = self.foreground(request, context).await?;
        let text = render::result(&result, self.options.output_bytes);
        let failed = render::failed(&result);
        // The spill files go with the result (a confined command cannot
        // read the spill root anyway, and nothing here would release them),
        // so the facts name none.
        result.stdout.spill_path = None;
        result.stderr.spill_path = None;
        let facts = serde_json::to_value(&result).unwrap_or_default();
        let reply = self.reply(text, || facts, failed);
        Ok(Shelled::Ran(Box::new(result), reply))
    }

    /// A foreground run: aborted when the client cancels the call, and
    /// reporting progress while it runs when the client asked for that.
    async fn foreground(
        &self,
        request: ExecRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ExecResult, RunError> {
        let token = context.meta.get_progress_token();
        let recent = Arc::new(progress::Recent::default());
        let options = RunOptions {
            sink: token
                .is_some()
                .then(|| recent.clone() as Arc<dyn crate::process::OutputSink>),
            abort: Some(context.ct.clone()),
        };
        let run = self.session.run_with(request, options);
        let Some(token) = token else {
            return run.await;
        };
        let reporter = progress::Reporter::new(context.peer.clone(), token);
        tokio::pin!(run);
        let first = tokio::time::Instant::now() + progress::EVERY;
        let mut ticks = tokio::time::interval_at(first, progress::EVERY);
        loop {
            tokio::select! {
                result = &mut run => return result,
                _ = ticks.tick() => reporter.report(&recent).await,
            }
        }
    }

    /// `shell` with an `escalate`: the wider grant checked against the
    /// ceiling and the policy (which may refuse even to ask), then put to
    /// the person; only their accept runs it, once.
    async fn escalated(
        &self,
        request: ExecRequest,
        escalation: Escalation,
        background: bool,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let wider = match self.wider(&request, &escalation) {
            Ok(wider) => wider,
            Err(error) => return self.told(&request.command, Err(error)).await,
        };
        let asking = ExecRequest {
            policy: Some(wider.clone()),
            ..request.clone()
        };
        let (grant, policy_reason) = match self.session.check(asking.clone()).await {
            Ok(Verdict::Allowed(_)) => (wider, None),
            Ok(Verdict::Asks { reason, policy }) => (*policy, Some(reason)),
            Err(error) => {
                let mut reply = self.failure(render::error(&error), &error);
                reply.content = vec![rmcp::model::ContentBlock::text(format!(
                    "{}\nThe wider grant was not put to the user: the deployment refuses it \
                     whoever approves.",
                    render::error(&error)
                ))];
                return reply;
            }
        };
        let mut message = approval::escalation(&request, &escalation.reason, &grant);
        if let Some(reason) = &policy_reason {
            message = format!("The policy asks first: {reason}\n\n{message}");
        }
        let answer = approval::ask(&context.peer, message).await;
        if answer != Answer::Accepted {
            let reason = policy_reason
                .unwrap_or_else(|| "the agent asked for a wider sandbox for this command".into());
            return self.unapproved(&request, (reason, grant), &answer).await;
        }
        let approved = ExecRequest {
            policy: Some(grant),
            approved: true,
            ..request
        };
        let command = approved.command.clone();
        let ran = self.shell_once(approved, background, context).await;
        self.told(&command, ran).await
    }

    /// The session's grant for `request` widened as `escalation` asks.
    fn wider(
        &self,
        request: &ExecRequest,
        escalation: &Escalation,
    ) -> Result<SandboxPolicy, RunError> {
        let mut wider = request
            .policy
            .clone()
            .unwrap_or_else(|| self.place.policy());
        if let Some(mode) = escalation.mode {
            wider.mode = wider.mode.max(mode);
        }
        let base = wider.workspace_root.clone();
        for root in &escalation.writable_roots {
            let root = match root.is_absolute() {
                true => root.clone(),
                false => base.join(root),
            };
            if !wider.writable_roots.contains(&root) {
                wider.writable_roots.push(root);
            }
            wider.mode = wider.mode.max(SandboxMode::WorkspaceWrite);
        }
        if !escalation.network.is_empty() {
            let mut endpoints = match &wider.network {
                Network::Allow(endpoints) => endpoints.clone(),
                _ => vec![],
            };
            for endpoint in &escalation.network {
                let parsed = endpoint.parse().map_err(|error| {
                    RunError::InvalidRequest(format!("escalate.network: {endpoint:?}: {error}"))
                })?;
                endpoints.push(parsed);
            }
            if wider.network != Network::Full {
                wider.network = Network::Allow(endpoints);
            }
        }
        Ok(wider)
    }

    fn job(&self, id: &str) -> Result<crate::tasks::TaskHandle, CallToolResult> {
        let unknown = || {
            CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
                "no job has id {}; shell_list shows the jobs",
                crate::text::quoted_command(id, 64)
            ))])
        };
        let id = self.jobs.get(id).ok_or_else(unknown)?;
        self.session.task(id).ok_or_else(unknown)
    }

    /// `shell_mode`'s switch to `mode`, once it is allowed and approved.
    async fn switch_mode(
        &self,
        args: ModeArgs,
        context: &RequestContext<RoleServer>,
    ) -> Result<String, String> {
        let (from, to) = (self.place.mode(), args.mode);
        if to == from {
            return Ok(format!("the session already runs {to}"));
        }
        if to > self.place.ceiling() {
            return Err(format!(
                "{to} is above the deployment's ceiling ({}); the operator sets it",
                self.place.ceiling()
            ));
        }
        if to == SandboxMode::WorkspaceWrite && self.place.workspace().is_none() {
            return Err("the server has no workspace to write (the operator passes \
                        --workspace, or the client offers a root)"
                .into());
        }
        if to > from {
            let mut probe = self.place.request("true".into(), None);
            let mut policy = self.place.policy();
            policy.mode = to;
            probe.policy = Some(policy);
            if let Err(error) = self.session.check(probe).await {
                return Err(format!("the deployment refuses it: {error}"));
            }
            let workspace = self
                .place
                .workspace()
                .map(|w| w.display().to_string())
                .unwrap_or_default();
            let message = approval::mode_switch(from, to, &workspace, &args.reason);
            match approval::ask(&context.peer, message).await {
                Answer::Accepted => {}
                answer => {
                    return Err(render::not_approved(
                        "switching the session's mode",
                        &answer,
                    ));
                }
            }
        }
        self.place.set_mode(to);
        let _ = context.peer.notify_tool_list_changed().await;
        Ok(format!(
            "the session now runs {to}. {}",
            self.place.describe()
        ))
    }
}

#[tool_router(vis = "pub(super)")]
impl McpServer {
    /// Run a shell command in the sandbox.
    #[tool(
        description = "Run a shell command in cordon's sandbox (the deployment's policy decides \
                       what it may read, write and reach). Returns its output and exit code; \
                       with background: true, returns a job id at once. A denial is final: to \
                       run one command with more, pass escalate with a reason — a person \
                       decides.",
        annotations(destructive_hint = true, open_world_hint = true)
    )]
    async fn shell(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<ShellArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.session.name_client(|| match context.peer.peer_info() {
            Some(info) => crate::text::quoted_command(
                &format!("{} {}", info.client_info.name, info.client_info.version),
                200,
            ),
            None => "unnamed".to_owned(),
        });
        self.roots_settled().await;
        if (args.open_stdin || args.tty) && !args.background {
            let asked = if args.tty { "tty" } else { "openStdin" };
            return Ok(CallToolResult::error(vec![
                rmcp::model::ContentBlock::text(format!(
                    "{asked} needs background: true (a job's stdin is written with shell_write)"
                )),
            ]));
        }
        let mut request = self.place.request(args.command, args.workdir);
        request.timeout_ms = args.timeout_ms;
        request.open_stdin = args.open_stdin;
        request.tty = args.tty.then(crate::model::TerminalSize::default);
        // A request the policy asks about waits for the person's answer
        // (a client that cannot ask has it refused).
        request.request_approver =
            approval::request_approver(&context.peer, request.command.clone());
        if let Some(escalation) = args.escalate {
            return Ok(self
                .escalated(request, escalation, args.background, &context)
                .await);
        }
        let command = request.command.clone();
        let first = self
            .shell_once(request.clone(), args.background, &context)
            .await;
        // An ask fails before anything runs; only a person's accept makes
        // the request `approved` (never the model).
        let (reason, policy) = match first {
            Err(RunError::ApprovalRequired { reason, policy }) => (reason, *policy),
            other => return Ok(self.told(&command, other).await),
        };
        let message = approval::policy_ask(&request, &reason, &policy, args.background);
        match approval::ask(&context.peer, message).await {
            Answer::Accepted => {
                let approved = ExecRequest {
                    policy: Some(policy),
                    approved: true,
                    ..request
                };
                let again = self.shell_once(approved, args.background, &context).await;
                Ok(self.told(&command, again).await)
            }
            answer => Ok(self.unapproved(&request, (reason, policy), &answer).await),
        }
    }

    /// A job's new output (consuming), and its facts once it has ended.
    #[tool(
        description = "Read what a background job printed since the last read; once it has \
                       ended, also its exit code and the sandbox's markers. waitMs waits for \
                       the job to end first.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn shell_output(
        &self,
        Parameters(args): Parameters<JobArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let task = match self.job(&args.job_id) {
            Ok(task) => task,
            Err(unknown) => return Ok(unknown),
        };
        if let Some(ms) = args.wait_ms.filter(|ms| *ms > 0) {
            task.wait(Some(Duration::from_millis(ms).min(MAX_WAIT)))
                .await;
        }
        let read = task.read();
        let settled = (read.status != TaskStatus::Running).then(|| task.snapshot());
        let text = render::read(&read, settled.as_ref(), self.options.output_bytes);
        let failed = settled.as_ref().is_some_and(render::job_failed);
        let facts = || serde_json::json!({ "read": read, "job": settled });
        Ok(self.reply(text, facts, failed))
    }

    /// Write to a background job's stdin.
    #[tool(
        description = "Send text to the stdin of a background job started with openStdin: true \
                       or tty: true (answer a prompt, feed a REPL); eof: true closes it (in a \
                       terminal: sends ^D). Read the job's answer with shell_output.",
        annotations(destructive_hint = true, open_world_hint = false)
    )]
    async fn shell_write(
        &self,
        Parameters(args): Parameters<WriteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let task = match self.job(&args.job_id) {
            Ok(task) => task,
            Err(unknown) => return Ok(unknown),
        };
        let job = crate::text::quoted_command(&args.job_id, 64);
        let text = match task.write(args.data.as_bytes(), args.eof).await {
            Ok(()) if args.eof => format!(
                "wrote {} bytes to job {job} and ended its input",
                args.data.len()
            ),
            Ok(()) => format!("wrote {} bytes to job {job}", args.data.len()),
            Err(error) => {
                let text = format!("job {job}: {error}");
                return Ok(CallToolResult::error(vec![
                    rmcp::model::ContentBlock::text(text),
                ]));
            }
        };
        let facts = || serde_json::json!({ "written": args.data.len(), "eof": args.eof });
        Ok(self.reply(text, facts, false))
    }

    /// Kill a background job.
    #[tool(
        description = "Kill a background job's whole process tree.",
        annotations(
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn shell_kill(
        &self,
        Parameters(args): Parameters<JobArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let task = match self.job(&args.job_id) {
            Ok(task) => task,
            Err(unknown) => return Ok(unknown),
        };
        let killed = task.kill();
        let done = task.wait(Some(Duration::from_secs(10))).await;
        let job = self.jobs.short(done.id).unwrap_or_default();
        let text = match killed {
            true => format!("killed job {job}"),
            false => format!("job {job} had already ended"),
        };
        let facts = || serde_json::to_value(&done).unwrap_or_default();
        Ok(self.reply(text, facts, false))
    }

    /// Every job of this connection.
    #[tool(
        description = "List this connection's background jobs and their status.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn shell_list(
        &self,
        Parameters(NoArgs {}): Parameters<NoArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let tasks: Vec<_> = self
            .session
            .tasks()
            .into_iter()
            .filter_map(|task| Some((self.jobs.short(task.id)?, task)))
            .collect();
        let text = render::list(&tasks);
        let facts = || serde_json::json!({ "jobs": tasks.iter().map(|(id, t)| serde_json::json!({"jobId": id, "task": t})).collect::<Vec<_>>() });
        Ok(self.reply(text, facts, false))
    }

    /// Switch the session's mode, with a person's approval to widen it.
    #[tool(
        description = "Switch the sandbox mode every later command of this session runs in \
                       (read-only or workspace-write). Widening asks the person; narrowing \
                       does not.",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn shell_mode(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<ModeArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.roots_settled().await;
        let reply = match self.switch_mode(args, &context).await {
            Ok(text) => self.reply(
                text,
                || serde_json::json!({ "mode": self.place.mode() }),
                false,
            ),
            Err(text) => self.reply(
                format!("[mode unchanged] {text}"),
                || serde_json::json!({ "mode": self.place.mode() }),
                true,
            ),
        };
        Ok(reply)
    }
}
