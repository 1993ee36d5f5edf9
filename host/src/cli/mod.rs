//! Argument parsing and rendering for the `cordon` binary. No logic lives
//! here that the library lacks: every subcommand builds a library request,
//! calls the library, and renders what comes back.

mod deploy;
mod exit;
mod mcp;
mod policy;
mod probe;
mod run;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Run agent-issued shell commands under an OS sandbox, with policy in a
/// WebAssembly component.
#[derive(Debug, Parser)]
#[command(name = "cordon", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one shell command in the foreground under the sandbox.
    Run(Box<run::RunArgs>),
    /// Show which sandbox backend confines runs here, and why.
    Probe(probe::ProbeArgs),
    /// Work with policy components.
    Policy(policy::PolicyArgs),
    /// Serve JSON-RPC 2.0 on stdin/stdout or a Unix socket, one request per line (see docs/protocol.md).
    Serve(serve::ServeArgs),
    /// Serve the Model Context Protocol on stdin/stdout: shell tools for an agent (see docs/mcp.md).
    Mcp(mcp::McpArgs),
}

/// Resolves at the first Ctrl-C (`SIGINT`) or `SIGTERM` to cordon.
///
/// The handlers are installed when this is *called*, not when the future is
/// first polled: call it before starting the command, so a signal that
/// arrives while the command is being spawned is not lost.
fn interrupted() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}

/// Parse the command line, run it, and turn the outcome into an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run::main(*args),
        Command::Policy(args) => policy::main(args),
        Command::Probe(args) => probe::main(args).unwrap_or_else(|error| {
            eprintln!("cordon: {error:#}");
            ExitCode::from(exit::CONFIG)
        }),
        Command::Serve(args) => serve::main(args).unwrap_or_else(|error| {
            eprintln!("cordon: {error:#}");
            exit::for_setup(&error)
        }),
        Command::Mcp(args) => mcp::main(args).unwrap_or_else(|error| {
            eprintln!("cordon: {error:#}");
            exit::for_setup(&error)
        }),
    }
}
