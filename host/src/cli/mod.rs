//! Argument parsing and rendering for the `cordon` binary. No logic lives
//! here that the library lacks: every subcommand builds a library request,
//! calls the library, and renders what comes back.

mod audit;
mod deploy;
mod docs;
mod doctor;
mod exit;
mod mcp;
mod policy;
mod probe;
mod run;
mod serve;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Run agent-issued shell commands under an OS sandbox, with policy in a
/// WebAssembly component.
#[derive(Debug, Parser)]
#[command(name = "cordon", version, about)]
struct Cli {
    /// Log what cordon does to stderr at this level: error, warn, info,
    /// debug or trace (or a filter such as `cordon=debug`). Off unless
    /// this or RUST_LOG is set; never mixed into a command's output or a
    /// protocol stream.
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,

    #[command(subcommand)]
    command: Command,
}

/// Turn logging on when `--log-level` or `RUST_LOG` asks for it.
fn init_logging(level: Option<&str>) -> Result<(), String> {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(level) => {
            EnvFilter::try_new(level).map_err(|err| format!("--log-level {level:?}: {err}"))?
        }
        None => match std::env::var("RUST_LOG") {
            Ok(text) if !text.is_empty() => {
                EnvFilter::try_new(&text).map_err(|err| format!("RUST_LOG {text:?}: {err}"))?
            }
            _ => return Ok(()),
        },
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    Ok(())
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one shell command in the foreground under the sandbox.
    Run(Box<run::RunArgs>),
    /// Show which sandbox backend confines runs here, and why.
    Probe(probe::ProbeArgs),
    /// Examine everything a run depends on here, with a fix for each problem.
    Doctor(doctor::DoctorArgs),
    /// Work with policy components.
    Policy(policy::PolicyArgs),
    /// Serve JSON-RPC 2.0 on stdin/stdout or a Unix socket, one request per line (see docs/protocol.md).
    Serve(serve::ServeArgs),
    /// Serve the Model Context Protocol on stdin/stdout: shell tools for an agent (see docs/mcp.md).
    Mcp(mcp::McpArgs),
    /// Check the audit log: its hash chain, its seals.
    Audit(audit::AuditArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(docs::CompletionsArgs),
    /// Print the manual page, or write one per subcommand with --out-dir.
    Man(docs::ManArgs),
}

/// `--version`: the crate's version and the policy worlds this host loads.
fn long_version() -> String {
    format!(
        "{}\npolicy worlds: {}",
        env!("CARGO_PKG_VERSION"),
        cordon::policy::supported_worlds().join(", ")
    )
}

/// The CLI definition, with the long version filled in.
fn command() -> clap::Command {
    Cli::command().long_version(long_version())
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
    let matches = command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    if let Err(message) = init_logging(cli.log_level.as_deref()) {
        eprintln!("cordon: {message}");
        return ExitCode::from(exit::CONFIG);
    }
    if cli.command.prints_a_report() {
        end_quietly_on_a_closed_pipe();
    }
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
        Command::Doctor(args) => doctor::main(args).unwrap_or_else(|error| {
            eprintln!("cordon: {error:#}");
            ExitCode::from(exit::CONFIG)
        }),
        Command::Audit(args) => audit::main(args).unwrap_or_else(|error| {
            eprintln!("cordon: {error:#}");
            ExitCode::from(exit::CONFIG)
        }),
        Command::Completions(args) => report(docs::completions(args, command())),
        Command::Man(args) => report(docs::man(args, command())),
    }
}

impl Command {
    /// Whether this subcommand prints a report and ends (`probe`,
    /// `doctor`, `policy`, `audit`, completions, the manual): a reader
    /// that stops early (`cordon probe | grep -q …`) is no failure of its.
    fn prints_a_report(&self) -> bool {
        match self {
            Command::Probe(_)
            | Command::Doctor(_)
            | Command::Policy(_)
            | Command::Audit(_)
            | Command::Completions(_)
            | Command::Man(_) => true,
            Command::Run(_) | Command::Serve(_) | Command::Mcp(_) => false,
        }
    }
}

/// End on `SIGPIPE` when stdout's reader is gone, as `ls` and `cat` do,
/// instead of the Rust runtime's panic ("failed printing to stdout:
/// Broken pipe") with a backtrace. Only for a report-printing subcommand:
/// `run`, `serve` and `mcp` keep `SIGPIPE` ignored and see `EPIPE` (a
/// client that hangs up must not kill a server, nor the host of a run
/// whose output reader left).
fn end_quietly_on_a_closed_pipe() {
    // SAFETY: setting SIGPIPE's disposition to the default is
    // async-signal-safe, installs no handler, and runs before any thread
    // of cordon's starts.
    unsafe {
        nix::libc::signal(nix::libc::SIGPIPE, nix::libc::SIG_DFL);
    }
}

/// Exit 0, or print the error and exit with the setup failure code.
fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cordon: {error:#}");
            exit::for_setup(&error)
        }
    }
}
