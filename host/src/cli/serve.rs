//! `cordon serve`: the host as a JSON-RPC 2.0 server on stdin/stdout, or
//! on a Unix socket for many clients (`--listen`).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use cordon::PolicySource;
use cordon::serve::listen::{Bound, ListenAt, SocketMode};
use cordon::serve::{Access, Server};

use super::deploy::DeployArgs;

/// Flags of `cordon serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Policy component to use instead of the embedded bash-sandbox
    /// (replace it later with the `reload` method, where allowed).
    #[arg(long, value_name = "FILE|builtin:NAME|oci://REF", value_parser = super::deploy::parse_policy)]
    policy: Option<PolicySource>,

    /// Serve many clients on a socket instead of stdin/stdout:
    /// `unix:PATH` (created 0600; removed on exit) or `systemd` (the
    /// socket of a .socket unit). Who may connect: [serve] allowed_uids.
    #[arg(long, value_name = "ADDR")]
    listen: Option<ListenAt>,

    /// The socket file's group (name or gid); its mode becomes 0660, and
    /// members of the group may connect. Replaces [serve] socket_group.
    #[arg(long, value_name = "GROUP", requires = "listen")]
    socket_group: Option<String>,

    /// Print the protocol's JSON Schema (every method's params and result,
    /// and the error object) and exit.
    #[arg(long, exclusive = true)]
    schema: bool,

    #[command(flatten)]
    deploy: DeployArgs,
}

/// Serve until EOF on stdin (or, on a socket, until stopped), the
/// `shutdown` method (stdio), or SIGINT/SIGTERM.
pub fn main(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.schema {
        let document = cordon::serve::schema::document();
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(ExitCode::SUCCESS);
    }
    let config = args.deploy.config()?;
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
    let host = Arc::new(builder.policy(source.clone()).build()?);
    super::deploy::announce_pull(&source, &host);
    let serve = &config.serve;
    let options = serve.options(args.listen.is_some());
    // Bind before the runtime's threads start: the socket is created
    // under a process-wide umask.
    let listening = match &args.listen {
        None => None,
        Some(at) => Some(bind(at, args.socket_group.as_deref(), serve, &host)?),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(async {
        let server = Server::with_options(host, options);
        let server = match &listening {
            Some((_, access)) => server.with_access(access.clone()),
            None => server,
        };
        let server = Arc::new(server);
        let stop = server.stopper();
        let interrupted = super::interrupted();
        tokio::spawn(async move {
            interrupted.await;
            stop.cancel();
        });
        match listening {
            Some((bound, _)) => {
                if let Some(path) = bound.path() {
                    eprintln!("cordon: serving on unix:{}", path.display());
                }
                server.listen(bound).await.context("serving the socket")
            }
            None => {
                let served = server
                    .serve(tokio::io::stdin(), tokio::io::stdout())
                    .await
                    .context("writing responses to stdout");
                // Nobody can come back to a stdio server's detached tasks.
                server.clear_detached().await;
                served
            }
        }
    });
    // The stdin reader is a blocking thread that a read of an open pipe
    // holds: after SIGTERM or `shutdown` the server must not wait for the
    // client to close its end.
    runtime.shutdown_background();
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Bind the socket `at` (before the runtime's threads start: the socket is
/// created under a process-wide umask) and gather whom it admits from
/// `[serve]`: the allowed uids and gids, the socket's group (`group`
/// replaces `socket_group`), and the per-uid ceilings, each checked never to
/// widen `host`'s deployment. Shared by `serve --listen` and `mcp --listen`.
pub(super) fn bind(
    at: &ListenAt,
    group: Option<&str>,
    serve: &cordon::config::ServeConfig,
    host: &cordon::Host,
) -> anyhow::Result<(Bound, Access)> {
    let group = match group {
        Some(name) => Some(cordon::config::group_id(name).map_err(anyhow::Error::msg)?),
        None => serve.socket_group,
    };
    let mode = SocketMode {
        mode: if group.is_some() { 0o660 } else { 0o600 },
        group,
    };
    let mut access = Access::owner();
    if let Some(uids) = &serve.allowed_uids {
        access.uids = uids.clone();
    }
    access.gids = serve.allowed_gids.clone();
    access.gids.extend(group);
    for (uid, ceiling) in &serve.ceilings {
        host.deployment()
            .narrowed(ceiling)
            .map_err(|why| anyhow::anyhow!("[serve.uid.{uid}]: {why}"))?;
    }
    access.ceilings = serve.ceilings.clone();
    access.run_as = serve.run_as.clone();
    Ok((Bound::bind(at, &mode)?, access))
}
