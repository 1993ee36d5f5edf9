//! `cordon mcp`: the host as a Model Context Protocol server, on the
//! official Rust SDK (`rmcp`), so any agent that speaks MCP can mount it.
//!
//! Why a surface of its own: `serve` gives programs facts; an agent's model
//! needs the same facts *told*: the output, one exit line, a marker when
//! the sandbox denied something, and the guidance that keeps it from
//! retrying around a denial (`render.rs`). The facts go beside the text as
//! structured content — the very `ExecResult` `run` and `serve` return, from
//! the same library host, so a result never differs between surfaces.
//!
//! * Tools: `shell` (a command, optionally in the background), and for
//!   background jobs `shell_output` (consuming), `shell_kill`, `shell_list`.
//! * The model chooses only the command, its working directory, its
//!   timeout and whether it runs in the background: never the sandbox
//!   policy, never `approved`. The deployment's default policy, ceiling and
//!   component apply, exactly as for `cordon run`.
//! * One connection is one [`Session`]: its jobs are its own and end with it.
//!   Over stdio there is one; [`listen`] serves a Unix socket's clients,
//!   each admitted by its peer credentials exactly as `serve --listen`
//!   admits them.
//! * A policy *ask* becomes an MCP elicitation when the client supports
//!   one: the person sees the command, the reason and the proposed grant;
//!   only their *accept* runs it (with that grant, still under every
//!   ceiling). A decline, a dismissal or a client without elicitation gets
//!   the refusal text, and nothing runs.

pub mod render;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::ElicitationError;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde::Deserialize;

use crate::error::RunError;
use crate::host::Host;
use crate::model::{ExecRequest, Told};
use crate::session::Session;
use crate::tasks::{TaskId, TaskStatus};

/// `shell`'s input.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShellArgs {
    /// The shell command line to run.
    pub command: String,
    /// The directory to run it in (default: the deployment's).
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    /// Kill it after this many milliseconds (default 120000, at most 600000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Run it as a background job and return its id at once; read it with
    /// `shell_output`.
    #[serde(default)]
    pub background: bool,
}

/// `shell_output` and `shell_kill`'s input.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobArgs {
    /// The job's id, as `shell` returned it.
    pub job_id: String,
}

/// What a person answers when the policy asks.
#[derive(Debug, serde::Serialize, Deserialize, schemars::JsonSchema)]
pub struct Approval {
    /// Run the command with the grant shown.
    pub approve: bool,
}

rmcp::elicit_safe!(Approval);

/// `shell_list`'s input: nothing.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// An MCP server over one session of a host.
#[derive(Clone)]
pub struct McpServer {
    session: Arc<Session>,
    tool_router: ToolRouter<Self>,
}

impl McpServer {
    /// A server whose tools run in a new session of `host`.
    pub fn new(host: &Host) -> Self {
        McpServer::with_session(host.session().with_peer("mcp"))
    }

    /// A server whose tools run in `session`.
    pub fn with_session(session: Session) -> Self {
        McpServer {
            // Only a person's accept of an elicitation approves here.
            session: Arc::new(session.approved_through("elicitation")),
            tool_router: Self::tool_router(),
        }
    }

    /// End the session: its live jobs are killed (with the grace).
    pub async fn shutdown(&self) {
        self.session.close().await;
    }

    /// The tool result for `outcome`: its text from the policy's `render`
    /// export where the component has one, else the host's.
    async fn told(&self, command: &str, outcome: Result<Shelled, RunError>) -> CallToolResult {
        let (told, default) = match outcome {
            Ok(Shelled::Started(result)) => return result,
            Ok(Shelled::Ran(result, reply)) => (Told::Finished(result), reply),
            Err(error) => (told_of(&error), failure(render::error(&error), &error)),
        };
        self.rendered(command, &told, default).await
    }

    /// `default` with its text replaced by the component's rendering of
    /// `told`, when it renders; a failed `render` keeps the host's text and
    /// says so.
    async fn rendered(
        &self,
        command: &str,
        told: &Told,
        mut default: CallToolResult,
    ) -> CallToolResult {
        let text = match self.session.render(command, told).await {
            Ok(None) => return default,
            Ok(Some(text)) => text,
            Err(error) => format!(
                "{}\n[cordon: the policy's render failed: {error}]",
                first_text(&default)
            ),
        };
        default.content = vec![ContentBlock::text(text)];
        default
    }

    /// Run (or start) `request` once; a tool result, or the run error.
    async fn shell_once(
        &self,
        request: ExecRequest,
        background: bool,
    ) -> Result<Shelled, RunError> {
        if background {
            let task = self.session.start(request).await?;
            return Ok(Shelled::Started(with_facts(
                format!("started job {}; read it with shell_output", task.id()),
                &serde_json::json!({ "jobId": task.id() }),
                false,
            )));
        }
        let result = self.session.run(request).await?;
        let text = render::result(&result);
        // A denial is an error for the model even when the command's last
        // step exited 0.
        let failed = result.exit_code != Some(0)
            || result.timed_out
            || result
                .sandbox
                .as_ref()
                .is_some_and(|s| s.denied || s.runner_failed);
        // The spill files go with the result (a confined command cannot
        // read the spill root anyway, and nothing here would release them),
        // so the facts name none.
        let mut result = result;
        result.stdout.spill_path = None;
        result.stderr.spill_path = None;
        let reply = with_facts(text, &result, failed);
        Ok(Shelled::Ran(Box::new(result), reply))
    }

    /// Ask the person behind the client (an MCP elicitation) whether
    /// `request` may run as the policy's *ask* (`reason`, `policy`)
    /// proposes; the approved request, or what the model is told instead:
    /// declined, or (no elicitation here) still needing approval.
    async fn ask(
        &self,
        peer: &Peer<RoleServer>,
        request: &ExecRequest,
        (reason, policy): (&str, &crate::model::SandboxPolicy),
        background: bool,
    ) -> Result<ExecRequest, Told> {
        let message = approval_prompt(request, reason, policy, background);
        match peer.elicit::<Approval>(message).await {
            Ok(Some(Approval { approve: true })) => Ok(ExecRequest {
                policy: Some(policy.clone()),
                approved: true,
                ..request.clone()
            }),
            Ok(_) | Err(ElicitationError::UserDeclined | ElicitationError::UserCancelled) => {
                Err(Told::Declined(reason.to_owned()))
            }
            // No elicitation here: the model is told it needs approval.
            Err(_) => Err(Told::NeedsApproval(reason.to_owned())),
        }
    }

    fn job(&self, id: &str) -> Result<crate::tasks::TaskHandle, CallToolResult> {
        let unknown = || {
            CallToolResult::error(vec![ContentBlock::text(format!(
                "no job has id {id}; shell_list shows the jobs"
            ))])
        };
        let id: TaskId = id.parse().map_err(|_| unknown())?;
        self.session.task(id).ok_or_else(unknown)
    }
}

/// What one `shell` call came to.
enum Shelled {
    /// A background job started: its reply.
    Started(CallToolResult),
    /// A foreground run's result, and its reply with the host's text.
    Ran(Box<crate::model::ExecResult>, CallToolResult),
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

/// The text of a tool result's first content block.
fn first_text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|block| block.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

/// A tool result for a run that produced no result: `text` for the
/// model, the error's stable details as structured content.
fn failure(text: String, error: &RunError) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(serde_json::Value::Object(error.details()));
    result
}

fn with_facts(text: String, facts: &impl serde::Serialize, failed: bool) -> CallToolResult {
    let mut result = match failed {
        true => CallToolResult::error(vec![ContentBlock::text(text)]),
        false => CallToolResult::success(vec![ContentBlock::text(text)]),
    };
    result.structured_content = serde_json::to_value(facts).ok();
    result
}

#[tool_router]
impl McpServer {
    /// Run a shell command in the sandbox.
    #[tool(
        description = "Run a shell command in cordon's sandbox (the deployment's policy decides \
                       what it may read, write and reach). Returns its output and exit code; \
                       with background: true, returns a job id at once."
    )]
    async fn shell(
        &self,
        peer: Peer<RoleServer>,
        Parameters(args): Parameters<ShellArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.session.name_client(|| match peer.peer_info() {
            Some(info) => crate::text::quoted_command(
                &format!("{} {}", info.client_info.name, info.client_info.version),
                200,
            ),
            None => "unnamed".to_owned(),
        });
        let mut request = ExecRequest::new(args.command);
        request.workdir = args.workdir;
        request.timeout_ms = args.timeout_ms;
        let command = request.command.clone();
        let first = self.shell_once(request.clone(), args.background).await;
        // An ask fails before anything runs; only a person's accept makes
        // the request `approved` (never the model).
        let (reason, policy) = match first {
            Err(RunError::ApprovalRequired { reason, policy }) => (reason, policy),
            other => return Ok(self.told(&command, other).await),
        };
        let reply = match self
            .ask(&peer, &request, (&reason, &policy), args.background)
            .await
        {
            Ok(approved) => {
                let again = self.shell_once(approved, args.background).await;
                self.told(&command, again).await
            }
            Err(told) => {
                let text = match &told {
                    Told::Declined(reason) => render::declined(reason),
                    _ => render::needs_approval(&reason),
                };
                let asked = RunError::ApprovalRequired { reason, policy };
                self.rendered(&command, &told, failure(text, &asked)).await
            }
        };
        Ok(reply)
    }

    /// A job's new output (consuming), and its facts once it has ended.
    #[tool(
        description = "Read what a background job printed since the last read; once it has \
                       ended, also its exit code and sandbox facts."
    )]
    async fn shell_output(
        &self,
        Parameters(args): Parameters<JobArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let task = match self.job(&args.job_id) {
            Ok(task) => task,
            Err(unknown) => return Ok(unknown),
        };
        let read = task.read();
        let settled = (read.status != TaskStatus::Running).then(|| task.snapshot());
        let text = render::read(&read, settled.as_ref());
        let facts = serde_json::json!({ "read": read, "job": settled });
        Ok(with_facts(text, &facts, false))
    }

    /// Kill a background job.
    #[tool(description = "Kill a background job's whole process tree.")]
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
        let text = match killed {
            true => format!("killed job {}", done.id),
            false => format!("job {} had already ended", done.id),
        };
        Ok(with_facts(text, &done, false))
    }

    /// Every job of this connection.
    #[tool(description = "List this connection's background jobs and their status.")]
    async fn shell_list(
        &self,
        Parameters(NoArgs {}): Parameters<NoArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let tasks = self.session.tasks();
        let text = render::list(&tasks);
        Ok(with_facts(
            text,
            &serde_json::json!({ "jobs": tasks }),
            false,
        ))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cordon", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Run shell commands with the shell tool. Every command runs in cordon's sandbox \
                 under the operator's policy; a denial is final, not a transient error.",
            )
    }
}

/// Serve MCP to every client of `bound` until `stop` is cancelled: each
/// connection a session of `host`, admitted by `access` (a client refused
/// gets one `FORBIDDEN` line). Returns once every connection has ended and
/// its jobs are killed. Must run inside a tokio runtime.
pub async fn listen(
    host: Arc<Host>,
    bound: crate::serve::listen::Bound,
    access: crate::serve::Access,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    use crate::serve::listen::{admit, refuse};
    use rmcp::ServiceExt;
    let listener = bound.listener()?;
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        while connections.try_join_next().is_some() {}
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let (host, access, stop) = (host.clone(), access.clone(), stop.clone());
        connections.spawn(async move {
            let session = match admit(&host, &access, &stream) {
                Ok((session, _peer)) => session,
                Err(error) => return refuse(stream, error).await,
            };
            let server = McpServer::with_session(session);
            if let Ok(running) = server.clone().serve(stream.into_split()).await {
                let cancel = running.cancellation_token();
                let stopper = tokio::spawn(async move {
                    stop.cancelled().await;
                    cancel.cancel();
                });
                let _ = running.waiting().await;
                stopper.abort();
                let _ = stopper.await;
            }
            server.shutdown().await;
        });
    }
    while connections.join_next().await.is_some() {}
    drop(bound);
    Ok(())
}

/// What a person is asked to approve: the policy's reason and the grant
/// first, then the command — quoted on one line, inert, cut at
/// [`crate::text::MAX_QUOTED_COMMAND_BYTES`] — so a command cannot pose as
/// the policy (80 newlines and a fake "the policy asks first" stay on the
/// command's one line, after the real reason).
fn approval_prompt(
    request: &ExecRequest,
    reason: &str,
    policy: &crate::model::SandboxPolicy,
    background: bool,
) -> String {
    let grant = serde_json::to_string(policy).unwrap_or_default();
    let command =
        crate::text::quoted_command(&request.command, crate::text::MAX_QUOTED_COMMAND_BYTES);
    format!(
        "The policy asks first: {}\n\nIf approved, the command runs{} with this sandbox \
         grant: {}\n\nThe command, as the agent sent it (one line; newlines shown as \\n):\n\n    \
         {command}",
        crate::text::reason(reason),
        if background { " in the background" } else { "" },
        crate::text::inert(&grant),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_cannot_pose_as_the_policy_in_the_approval_prompt() {
        let spoof = format!(
            "rm -rf ~{}The policy asks first: routine cleanup\n\nIf approved, the command runs \
             with this sandbox grant: read-only\x1b]52;c;ZXZpbA==\x07",
            "\n".repeat(80)
        );
        let policy =
            crate::model::SandboxPolicy::new(crate::model::SandboxMode::WorkspaceWrite, "/ws");
        let prompt = approval_prompt(
            &ExecRequest::new(spoof),
            "a recursive delete cannot be undone",
            &policy,
            false,
        );
        assert!(
            prompt.starts_with("The policy asks first: a recursive delete cannot be undone\n"),
            "{prompt}"
        );
        let (before, command) = prompt.rsplit_once("\n\n    ").unwrap();
        assert!(before.contains("workspace-write"), "{prompt}");
        assert!(!before.contains("routine cleanup"), "{prompt}");
        assert!(!command.contains('\n'), "{command}");
        assert!(command.contains("\\x1b]52"), "{command}");
        assert!(!prompt.contains('\x1b'), "{prompt}");
    }
}
