//! `cordon run`: one foreground command.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use cordon::process::{OutputSink, Stream};
use cordon::text::Neutraliser;
use cordon::{
    CancellationToken, ExecRequest, PolicySource, RunError, RunOptions, SandboxMode, SandboxPolicy,
};

use super::deploy::DeployArgs;
use super::exit;

/// Flags of `cordon run`.
#[derive(Debug, Args)]
#[command(after_help = exit::HELP)]
pub struct RunArgs {
    /// Sandbox mode: read-only, workspace-write or danger-full-access
    /// [default: the deployment's, read-only].
    #[arg(long, value_name = "MODE")]
    mode: Option<SandboxMode>,

    /// Workspace root that workspace-write may write to [default: the
    /// current directory].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// Working directory of the command [default: the current directory].
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,

    /// Timeout in milliseconds [default: 120000, capped at 600000].
    #[arg(long, value_name = "N")]
    timeout_ms: Option<u64>,

    /// Feed this file to the command's stdin (default: /dev/null).
    #[arg(long, value_name = "FILE", conflicts_with = "stdin")]
    stdin_file: Option<PathBuf>,

    /// `-`: stream this process's stdin to the command while it runs
    /// (copied through a pipe: the command never gets the terminal itself).
    #[arg(long, value_name = "-", value_parser = parse_stdin_dash)]
    stdin: Option<StdinDash>,

    /// Set an environment variable for the command (repeatable); it wins
    /// over every default and survives the credential scrub.
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_env)]
    env: Vec<(String, String)>,

    /// At most this many processes at once for this run (at most the
    /// deployment's limits.pids).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pids_limit: Option<u64>,

    /// At most this many bytes of memory for this run (at most the
    /// deployment's limits.memory_bytes).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    memory_limit: Option<u64>,

    /// Relative CPU weight for this run, 1–10000 (at most the
    /// deployment's limits.cpu_weight).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    cpu_weight: Option<u64>,

    /// The request's own grant, as JSON: `{"mode": …, "workspaceRoot": …}`
    /// plus any of `writableRoots`, `protected`, `unprotected`, `denyRead`,
    /// `network`, `sockets` (replaces --mode and --workspace).
    #[arg(long, value_name = "GRANT_JSON", conflicts_with_all = ["mode", "workspace"], value_parser = parse_grant)]
    grant: Option<SandboxPolicy>,

    /// A person approved what the policy asked (exit 75): --grant is the
    /// grant it proposed.
    #[arg(long, requires = "grant")]
    approved: bool,

    /// An HTTP request a person approved for this run, as
    /// `METHOD host:port/path` (repeatable): a request the policy asks
    /// about is sent only when it is one of these. A run that met one
    /// unapproved says which on stderr.
    #[arg(long = "approve-request", value_name = "METHOD HOST:PORT/PATH")]
    approve_requests: Vec<cordon::ApprovedRequest>,

    /// Policy component to use instead of the embedded bash-sandbox: a
    /// file, builtin:NAME (rules-policy, pwsh-sandbox, bash-local) or oci://….
    #[arg(long, value_name = "FILE|builtin:NAME|oci://REF", value_parser = super::deploy::parse_policy)]
    policy: Option<PolicySource>,

    #[command(flatten)]
    deploy: DeployArgs,

    /// Print the whole result (or error) as JSON instead of streaming output.
    #[arg(long)]
    json: bool,

    /// The shell command line; several words are joined with spaces.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Run the command and mirror its exit code.
pub fn main(args: RunArgs) -> ExitCode {
    let json = args.json;
    match execute(args) {
        Ok(Outcome::Finished(code)) => code,
        Ok(Outcome::Failed(error)) => {
            if json {
                println!("{}", error_json(&error));
            } else {
                let message = error.to_string();
                eprintln!(
                    "cordon: {}: {}",
                    error.code(),
                    cordon::text::inert(&message)
                );
                if let RunError::ApprovalRequired { policy, .. } = &error {
                    let grant = serde_json::to_string(policy).unwrap_or_default();
                    let grant = cordon::text::inert(&grant);
                    eprintln!("cordon: proposed grant: {grant}");
                    eprintln!(
                        "cordon: to approve, run again with: --approved --grant '{}'",
                        grant.replace('\'', "'\\''")
                    );
                }
            }
            ExitCode::from(exit::for_code(error.code()))
        }
        Err(error) => {
            eprintln!("cordon: {error:#}");
            exit::for_setup(&error)
        }
    }
}

enum Outcome {
    Finished(ExitCode),
    Failed(RunError),
}

fn execute(args: RunArgs) -> anyhow::Result<Outcome> {
    let config = args.deploy.config()?;
    let (mut builder, cwd) = args.deploy.host_builder_with(&config)?;
    let source = args
        .policy
        .or(config.policy.clone())
        .unwrap_or(PolicySource::Embedded);
    let mut request = ExecRequest::new(args.command.join(" "));
    request.workdir = args.workdir;
    request.timeout_ms = args.timeout_ms;
    request.env = args.env;
    request.approved_requests = args.approve_requests;
    if args.pids_limit.is_some() || args.memory_limit.is_some() || args.cpu_weight.is_some() {
        request.limits = Some(cordon::RunLimits {
            pids: args.pids_limit,
            memory_bytes: args.memory_limit,
            cpu_weight: args.cpu_weight,
        });
    }
    if let Some(path) = &args.stdin_file {
        request.stdin = Some(
            cordon::files::read_regular(path, cordon::files::MAX_STDIN_BYTES).with_context(
                || {
                    format!(
                        "cannot read --stdin-file {} (to stream this process's stdin to the \
                         command, use --stdin -)",
                        path.display()
                    )
                },
            )?,
        );
    }
    if args.stdin.is_some() {
        request.stdin_stream = Some(stream_stdin());
    }
    if let Some(grant) = args.grant {
        request.policy = Some(grant);
        request.approved = args.approved;
    } else if args.mode.is_some() || args.workspace.is_some() {
        // The deployment's default policy with another mode or root: its
        // network (`default_network`) and the rest of its grant stay.
        request.policy = Some(SandboxPolicy {
            mode: args.mode.unwrap_or(SandboxMode::ReadOnly),
            workspace_root: args.workspace.unwrap_or_else(|| cwd.clone()),
            ..config.deployment(&cwd).policy
        });
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // No probe up front: the run itself tries the runner (see the ladder).
    // One run, then exit: its policy calls run on this thread, nothing is
    // made ready for a next run, and its runner is started for the
    // request's grant before the component loads (inside the runtime,
    // which watches it).
    // Without `--json` the output streams to this process's own stdout and
    // stderr and no result is printed: a spill file would be written and
    // thrown away unread.
    if !args.json {
        builder = builder.process_limits(cordon::ProcessLimits {
            spill_limit: 0,
            ..cordon::ProcessLimits::default()
        });
    }
    let host = {
        let _inside = runtime.enter();
        builder
            .policy(source.clone())
            .peer("cli")
            .approved_through("flag")
            .one_run()
            .expecting(&request)
            .build()?
    };
    super::deploy::announce_pull(&source, &host);

    let abort = CancellationToken::new();
    let terminal = Arc::new(Terminal::new());
    let options = RunOptions {
        sink: (!args.json).then(|| terminal.clone() as Arc<dyn OutputSink>),
        abort: Some(abort.clone()),
    };

    let outcome = runtime.block_on(async {
        // Ctrl-C (or SIGTERM to cordon) terminates the command's whole
        // process group, not just its leader.
        let interrupted = super::interrupted();
        let run = host.run_with(request, options);
        tokio::pin!(run);
        tokio::select! {
            outcome = &mut run => outcome,
            () = interrupted => {
                abort.cancel();
                run.await
            }
        }
    });
    terminal.finish();
    let result = match outcome {
        Ok(result) => result,
        Err(error) => return Ok(Outcome::Failed(error)),
    };
    if args.json {
        // The caller reads the spill files after cordon exits: keep them.
        result.stdout.keep_spill();
        result.stderr.keep_spill();
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else if result.timed_out {
        eprintln!("cordon: timed out after {} ms", result.timeout_ms);
    } else if result.aborted {
        eprintln!("cordon: interrupted; the command's process group was terminated");
    }
    if !args.json {
        say_awaiting_approval(&result);
    }
    Ok(Outcome::Finished(exit::for_result(&result)))
}

/// Name on stderr each request of the run that the policy asked a person
/// about and no one approved, and how to approve it.
fn say_awaiting_approval(result: &cordon::ExecResult) {
    let Some(grant) = &result.grant else { return };
    for request in grant.awaiting_approval() {
        let line = request.approval().to_string();
        let approval = cordon::text::inert(&line);
        eprintln!("cordon: a request waited for a person's approval and was refused: {approval}");
        eprintln!(
            "cordon: to approve, run again with: --approve-request '{}'",
            approval.replace('\'', "'\\''")
        );
    }
}

/// Streams the command's output to cordon's own stdout and stderr: as it
/// is where that is a file or a pipe (the output is data), made inert
/// where it is a terminal (an agent's command must not set the clipboard,
/// forge links or rewrite the screen: [`cordon::text`]).
struct Terminal {
    stdout: Option<std::sync::Mutex<Neutraliser>>,
    stderr: Option<std::sync::Mutex<Neutraliser>>,
}

impl Terminal {
    fn new() -> Self {
        use std::io::IsTerminal;
        let inert = |tty: bool| tty.then(|| std::sync::Mutex::new(Neutraliser::default()));
        Terminal {
            stdout: inert(std::io::stdout().is_terminal()),
            stderr: inert(std::io::stderr().is_terminal()),
        }
    }

    /// Write whatever a neutraliser still holds (an incomplete character
    /// at the output's end), escaped.
    fn finish(&self) {
        for stream in [Stream::Stdout, Stream::Stderr] {
            if let Some(neutraliser) = self.neutraliser(stream) {
                let rest = neutraliser
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .finish();
                write_to(stream, rest.as_bytes());
            }
        }
    }

    fn neutraliser(&self, stream: Stream) -> Option<&std::sync::Mutex<Neutraliser>> {
        match stream {
            Stream::Stdout => self.stdout.as_ref(),
            Stream::Stderr => self.stderr.as_ref(),
        }
    }
}

/// Write `bytes` to cordon's own stdout or stderr as they come: straight
/// to the descriptor (nothing else writes to it during the run), not
/// through stdout's line buffer, which searches every chunk for a newline.
fn write_to(stream: Stream, bytes: &[u8]) {
    let _ = match stream {
        Stream::Stdout => write_all_to(std::io::stdout().lock(), bytes),
        Stream::Stderr => write_all_to(std::io::stderr().lock(), bytes),
    };
}

fn write_all_to(mut out: impl std::os::fd::AsFd + Write, mut bytes: &[u8]) -> std::io::Result<()> {
    // Whatever the line buffer holds goes first.
    out.flush()?;
    while !bytes.is_empty() {
        match nix::unistd::write(&out, bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

impl OutputSink for Terminal {
    /// cordon's own stdout, when it is a pipe or a file (not a terminal:
    /// that output is made inert): the command's stdout moves there inside
    /// the kernel. stderr always comes through the host, whose facts
    /// (denials) read it.
    fn passthrough(&self, stream: Stream) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        if stream != Stream::Stdout || self.stdout.is_some() {
            return None;
        }
        let stdout = std::io::stdout();
        let kind = nix::sys::stat::fstat(&stdout).ok()?.st_mode & nix::libc::S_IFMT;
        (kind == nix::libc::S_IFIFO || kind == nix::libc::S_IFREG).then(|| stdout.as_raw_fd())
    }

    fn write(&self, stream: Stream, bytes: &[u8]) {
        match self.neutraliser(stream) {
            Some(neutraliser) => {
                let text = neutraliser
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .feed(bytes);
                write_to(stream, text.as_bytes());
            }
            None => write_to(stream, bytes),
        }
    }
}

/// A `--grant` value: a sandbox policy as JSON.
fn parse_grant(text: &str) -> Result<SandboxPolicy, String> {
    serde_json::from_str(text).map_err(|err| format!("not a grant: {err}"))
}

/// `{"error": {"code", "message", …details}}` for `--json`.
fn error_json(error: &RunError) -> String {
    let mut body = error.details();
    body.insert("message".into(), serde_json::json!(error.to_string()));
    serde_json::json!({ "error": body }).to_string()
}

/// `NAME=VALUE` for `--env`.
fn parse_env(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

/// `--stdin`'s only value, `-`.
#[derive(Clone, Copy, Debug)]
struct StdinDash;

fn parse_stdin_dash(value: &str) -> Result<StdinDash, String> {
    match value {
        "-" => Ok(StdinDash),
        _ => Err("--stdin takes `-` (this process's stdin); for a file use --stdin-file".into()),
    }
}

/// This process's stdin as a live stream: a thread reads it in chunks and
/// sends each on (it ends with the process, or at end of file).
fn stream_stdin() -> cordon::StdinStream {
    use std::io::Read;
    let (sender, stream) = cordon::StdinStream::channel(16);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            match stdin.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => {
                    if sender.blocking_send(chunk[..n].to_vec()).is_err() {
                        return;
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    });
    stream
}
