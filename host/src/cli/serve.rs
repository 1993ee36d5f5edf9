//! `cordon serve`: the host as a JSON-RPC 2.0 server on stdin/stdout.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use cordon::PolicySource;
use cordon::serve::Server;

use super::deploy::DeployArgs;

/// Flags of `cordon serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Policy component to use instead of the embedded bash-sandbox
    /// (replace it later with the `reload` method).
    #[arg(long, value_name = "FILE")]
    policy: Option<std::path::PathBuf>,

    #[command(flatten)]
    deploy: DeployArgs,
}

/// Serve until EOF on stdin, the `shutdown` method, or SIGINT/SIGTERM.
pub fn main(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let (builder, _) = args.deploy.host_builder()?;
    let source = match args.policy {
        Some(path) => PolicySource::File(path),
        None => PolicySource::Embedded,
    };
    let host = Arc::new(builder.policy(source).build()?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(async {
        let server = Server::new(host);
        let stop = server.stopper();
        let interrupted = super::interrupted();
        tokio::spawn(async move {
            interrupted.await;
            stop.cancel();
        });
        server
            .serve(tokio::io::stdin(), tokio::io::stdout())
            .await
            .context("writing responses to stdout")
    });
    // The stdin reader is a blocking thread that a read of an open pipe
    // holds: after SIGTERM or `shutdown` the server must not wait for the
    // client to close its end.
    runtime.shutdown_background();
    served?;
    Ok(ExitCode::SUCCESS)
}
