//! `cordon mcp`: the host as an MCP server on stdin/stdout.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use cordon::PolicySource;
use cordon::mcp::McpServer;
use rmcp::ServiceExt;

use super::deploy::DeployArgs;

/// Flags of `cordon mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Policy component to use instead of the embedded bash-sandbox: a
    /// file, builtin:NAME (rules-policy, pwsh-sandbox, bash-local) or oci://….
    #[arg(long, value_name = "FILE|builtin:NAME|oci://REF", value_parser = super::deploy::parse_policy)]
    policy: Option<PolicySource>,

    /// Serve many MCP clients on a socket instead of stdin/stdout, admitted
    /// as `serve --listen` admits them ([serve] allowed_uids, …):
    /// `unix:PATH` or `systemd`.
    #[arg(long, value_name = "ADDR")]
    listen: Option<cordon::serve::listen::ListenAt>,

    /// The socket file's group (name or gid); its mode becomes 0660.
    #[arg(long, value_name = "GROUP", requires = "listen")]
    socket_group: Option<String>,

    /// The workspace commands run in (replaces workspace_root of the config
    /// file). Without it: the client's first MCP root, else this
    /// directory when it can be a workspace.
    #[arg(long, value_name = "DIR")]
    workspace: Option<std::path::PathBuf>,

    /// The mode commands run in until a person switches it (replaces
    /// default_mode of the config file) [default: read-only].
    #[arg(long, value_name = "MODE")]
    mode: Option<cordon::SandboxMode>,

    /// Send each result's facts as MCP structured content beside the text
    /// (for programs; agents then show their model the facts instead).
    #[arg(long)]
    structured_content: bool,

    #[command(flatten)]
    deploy: DeployArgs,
}

/// Serve MCP until the client closes stdin, or SIGINT/SIGTERM.
pub fn main(args: McpArgs) -> anyhow::Result<ExitCode> {
    let mut config = args.deploy.config()?;
    if let Some(dir) = &args.workspace {
        let dir =
            std::fs::canonicalize(dir).with_context(|| format!("--workspace {}", dir.display()))?;
        config.workspace_root = Some(dir);
        config.mcp.workspace_pinned = true;
    }
    if let Some(mode) = args.mode {
        let ceiling = config
            .max_mode
            .unwrap_or(cordon::SandboxMode::WorkspaceWrite);
        anyhow::ensure!(
            mode <= ceiling,
            "--mode {mode} is wider than the deployment ceiling {ceiling} (max_mode)"
        );
        config.default_mode = Some(mode);
    }
    config.mcp.structured_content |= args.structured_content;
    let options = config.mcp.clone();
    let (builder, _) = args.deploy.host_builder_with(&config)?;
    // No run may reach the socket this server listens on.
    let builder = match &args.listen {
        Some(cordon::serve::listen::ListenAt::Unix(path)) => builder.hide_from_runs(path),
        _ => builder,
    };
    let source = args
        .policy
        .or(config.policy.clone())
        .unwrap_or(PolicySource::Embedded);
    let host = std::sync::Arc::new(builder.policy(source.clone()).build()?);
    super::deploy::announce_pull(&source, &host);
    workspace_told(&host, &options)?;
    let listening = match &args.listen {
        None => None,
        Some(at) => Some(super::serve::bind(
            at,
            args.socket_group.as_deref(),
            &config.serve,
            &host,
        )?),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    if let Some((bound, access)) = listening {
        let served = runtime.block_on(async {
            let stop = tokio_util::sync::CancellationToken::new();
            let interrupted = super::interrupted();
            let stopper = stop.clone();
            tokio::spawn(async move {
                interrupted.await;
                stopper.cancel();
            });
            cordon::mcp::listen(host, bound, access, options, stop)
                .await
                .context("serving MCP on the socket")
        });
        runtime.shutdown_background();
        served?;
        return Ok(ExitCode::SUCCESS);
    }
    let served = runtime.block_on(async {
        let server = McpServer::with_options(&host, options);
        let interrupted = super::interrupted();
        let running = server
            .clone()
            .serve(rmcp::transport::stdio())
            .await
            .context("the MCP handshake failed")?;
        let cancel = running.cancellation_token();
        tokio::spawn(async move {
            interrupted.await;
            cancel.cancel();
        });
        let ended = running.waiting().await.context("serving MCP");
        // The client is gone: its jobs end with it.
        server.shutdown().await;
        ended.map(|_| ())
    });
    // The stdin reader may be a blocking thread a read of an open pipe holds.
    runtime.shutdown_background();
    served?;
    Ok(ExitCode::SUCCESS)
}

/// A workspace the operator named must be one; without one, say once (on
/// stderr, for the operator) where commands will run.
fn workspace_told(host: &cordon::Host, options: &cordon::mcp::McpOptions) -> anyhow::Result<()> {
    let deployment = host.deployment();
    let writes = deployment.policy.mode == cordon::SandboxMode::WorkspaceWrite;
    let Some(problem) = cordon::mcp::place::problem(deployment).filter(|_| writes) else {
        return Ok(());
    };
    anyhow::ensure!(
        !options.workspace_pinned,
        "the workspace cannot be written: {problem}"
    );
    eprintln!(
        "cordon mcp: no usable workspace ({problem}); commands run read-only until the client \
         offers a root (MCP roots) or the operator passes --workspace DIR"
    );
    Ok(())
}
