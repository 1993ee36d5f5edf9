//! `cordon mcp`: the host as a Model Context Protocol server, on the
//! official Rust SDK (`rmcp`), so any agent that speaks MCP can mount it.
//!
//! Why a surface of its own: `serve` gives programs facts; an agent's model
//! needs the same facts *told*, in the words that reach it in real clients
//! — the output (head and tail, under every agent's own cut), one exit
//! line, a marker when the sandbox denied something, and the guidance that
//! keeps it from retrying around a denial (`render.rs`). Agents forward a
//! result's structured content *instead of* its text when it has any, so
//! the facts (the very `ExecResult` `run` and `serve` return) go beside the
//! text only when the operator asks for them ([`McpOptions`]).
//!
//! * Tools: `shell` (a command, optionally in the background, optionally
//!   with a wider grant a person approves), `shell_output` (consuming,
//!   with `waitMs`), `shell_kill`, `shell_list`, `shell_mode`. Annotations
//!   tell clients which are harmless, so they need not ask.
//! * The model chooses the command, its working directory, its timeout and
//!   whether it runs in the background; it never sets the grant or
//!   `approved`: a wider grant, a policy's ask and a mode switch each run
//!   only on a person's accept (`approval.rs`), under every ceiling.
//! * Where and as what commands run (`place.rs`): the operator's workspace,
//!   else the client's first root, else the server's working directory
//!   when it can be one; told in the `shell` tool's description.
//! * A cancelled call kills its run; a long call reports progress
//!   (`progress.rs`) when the client asked for it.
//! * One connection is one [`Session`]: its jobs are its own and end with it.
//!   Over stdio there is one; [`listen`] serves a Unix socket's clients,
//!   each admitted by its peer credentials exactly as `serve --listen`
//!   admits them.

pub mod approval;
mod jobs;
pub mod output;
pub mod place;
mod progress;
pub mod render;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use tokio::sync::watch;

use crate::host::Host;
use crate::model::Told;
use crate::session::Session;

pub use tools::{Escalation, JobArgs, ModeArgs, NoArgs, ShellArgs};

/// How an MCP server serves (the operator's choices; `[mcp]` in cordon.toml).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpOptions {
    /// Send each result's facts (the `ExecResult`, a job's read) as
    /// structured content beside the text. Off by default: agents that
    /// receive structured content show their model that instead of the
    /// text, so their model would never read cordon's markers.
    pub structured_content: bool,
    /// Bytes of output one result carries (head and tail).
    pub output_bytes: usize,
    /// The operator named the workspace: client roots do not move it.
    pub workspace_pinned: bool,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            structured_content: false,
            output_bytes: output::DEFAULT_OUTPUT_BYTES,
            workspace_pinned: false,
        }
    }
}

/// How long a call waits for the client's roots before it runs without.
const ROOTS_WAIT: Duration = Duration::from_secs(5);

/// An MCP server over one session of a host.
#[derive(Clone)]
pub struct McpServer {
    session: Arc<Session>,
    place: Arc<place::Place>,
    jobs: Arc<jobs::Jobs>,
    options: Arc<McpOptions>,
    /// True once the client's roots were read (or there are none to read).
    roots_read: Arc<watch::Sender<bool>>,
    tool_router: ToolRouter<Self>,
}

impl McpServer {
    /// A server whose tools run in a new session of `host`, with the
    /// default options.
    pub fn new(host: &Host) -> Self {
        McpServer::with_options(host, McpOptions::default())
    }

    /// A server whose tools run in a new session of `host`.
    pub fn with_options(host: &Host, options: McpOptions) -> Self {
        McpServer::with_session(host.session().with_peer("mcp"), options)
    }

    /// A server whose tools run in `session`.
    pub fn with_session(session: Session, options: McpOptions) -> Self {
        let place = place::Place::new(&session.deployment(), options.workspace_pinned);
        McpServer {
            // Only a person's accept of an elicitation approves here.
            session: Arc::new(session.approved_through("elicitation")),
            place: Arc::new(place),
            jobs: Arc::default(),
            options: Arc::new(options),
            roots_read: Arc::new(watch::channel(false).0),
            tool_router: Self::tool_router(),
        }
    }

    /// One line on where this server's commands run (for the operator's
    /// log and the model's tool description).
    pub fn describe(&self) -> String {
        self.place.describe()
    }

    /// End the session: its live jobs are killed (with the grace).
    pub async fn shutdown(&self) {
        self.session.close().await;
    }

    /// Read the client's roots (when it has them and the operator did not
    /// pin the workspace): the first usable one becomes the workspace.
    #[allow(deprecated)] // roots are what clients send today (SEP-2577)
    async fn read_roots(&self, peer: Peer<RoleServer>) {
        let offers = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if self.place.follows_roots() && offers {
            let listed = tokio::time::timeout(ROOTS_WAIT, peer.list_roots()).await;
            let first = match listed {
                Ok(Ok(listed)) => listed.roots.into_iter().next(),
                _ => None,
            };
            if let Some(root) = first {
                match self.place.adopt_root(&root.uri) {
                    Ok(true) => {
                        tracing::info!(workspace = %self.place.describe(), "client root");
                        let _ = peer.notify_tool_list_changed().await;
                    }
                    Ok(false) => {}
                    Err(why) => eprintln!("cordon mcp: not using the client's root: {why}"),
                }
            }
        }
        self.roots_read.send_replace(true);
    }

    /// Wait (bounded) until the client's roots were read.
    async fn roots_settled(&self) {
        let mut read = self.roots_read.subscribe();
        let _ = tokio::time::timeout(ROOTS_WAIT, read.wait_for(|done| *done)).await;
    }

    /// `default` with its text replaced by the component's rendering of
    /// `told`, when it renders; a failed `render` keeps the host's text and
    /// says so.
    async fn rendered(
        &self,
        command: &str,
        told: &Told,
        mut default: rmcp::model::CallToolResult,
    ) -> rmcp::model::CallToolResult {
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

    /// A tool result: `text` for the model, `facts` as structured content
    /// when the operator asked for them.
    fn reply(
        &self,
        text: String,
        facts: impl FnOnce() -> serde_json::Value,
        failed: bool,
    ) -> rmcp::model::CallToolResult {
        let mut result = match failed {
            true => rmcp::model::CallToolResult::error(vec![ContentBlock::text(text)]),
            false => rmcp::model::CallToolResult::success(vec![ContentBlock::text(text)]),
        };
        if self.options.structured_content {
            result.structured_content = Some(facts());
        }
        result
    }
}

/// The text of a tool result's first content block.
fn first_text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|block| block.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

const INSTRUCTIONS: &str = "Run shell commands with the shell tool. Every command runs in \
    cordon's sandbox under the operator's policy; a denial is final, not a transient error. When \
    a command needs more than the sandbox gives (a write outside the workspace, a network host), \
    call shell again with `escalate` and a reason: a person decides. shell_mode asks the person \
    to switch the session's mode.";

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("cordon", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!("{INSTRUCTIONS}\n{}", self.place.describe()))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // The description names the workspace: the client's root, once read.
        self.roots_settled().await;
        let mut tools = self.tool_router.list_all();
        for tool in &mut tools {
            if tool.name == "shell" {
                let described = tool.description.clone().unwrap_or_default();
                tool.description = Some(format!("{described}\n{}", self.describe()).into());
            }
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let context = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.tool_router.call(context).await
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tool_router.get(name).cloned()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let server = self.clone();
        // Asking the client while its notification is handled would wait
        // on the very loop that reads the answer.
        tokio::spawn(async move { server.read_roots(context.peer).await });
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        let server = self.clone();
        tokio::spawn(async move { server.read_roots(context.peer).await });
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
    options: McpOptions,
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
        let (host, access, stop, options) =
            (host.clone(), access.clone(), stop.clone(), options.clone());
        connections.spawn(async move {
            let session = match admit(&host, &access, &stream) {
                Ok((session, _peer)) => session,
                Err(error) => return refuse(stream, error).await,
            };
            let server = McpServer::with_session(session, options);
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
