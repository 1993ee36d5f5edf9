//! Process mechanics: spawning an argv in its own session and process
//! group, capturing bounded output, and the timeout with kill escalation.
//!
//! This layer knows nothing about sandboxes or policy: it runs exactly the
//! argv it is given (the run pipeline decides which argv that may be) and
//! reports what happened.
//!
//! * Every run gets its own session (so its own process group); a timeout
//!   signals the whole group: `SIGTERM`, then `SIGKILL` after the grace,
//!   even if the leader already exited while others in the group live on.
//! * stdin is `/dev/null`; stdout and stderr are kept as bounded tails.
//! * When the leader exits, output still buffered is drained for a short
//!   bound, so a daemon that inherited the pipes cannot hold the run open.

pub mod env;
pub mod output;

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};

pub use output::{OutputSink, Stream, Tail};

/// Time between `SIGTERM` and `SIGKILL` (SPEC.md §3).
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(3_000);

/// How long output is still read after the leader exited.
const DRAIN_BOUND: Duration = Duration::from_millis(500);

/// What to run and how.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Working directory.
    pub workdir: PathBuf,
    /// Kill the group after this long.
    pub timeout: Duration,
    /// Time between `SIGTERM` and `SIGKILL`.
    pub kill_grace: Duration,
    /// Bytes kept per stream.
    pub tail_bytes: usize,
}

/// What happened to a launched process.
#[derive(Debug)]
pub struct Finished {
    /// Exit code; none when killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended the leader.
    pub signal: Option<i32>,
    /// Killed at the timeout.
    pub timed_out: bool,
    /// Retained stdout.
    pub stdout: Tail,
    /// Retained stderr.
    pub stderr: Tail,
}

/// Why a launch could not start.
#[derive(Debug)]
pub enum SpawnError {
    /// The program itself is missing or not executable (`ENOENT`/`EACCES`
    /// on the program with a usable working directory).
    Program(io::Error),
    /// The working directory is missing or not a directory.
    Workdir(io::Error),
    /// Any other failure to start (`ENOEXEC`, `EMFILE`, …).
    Other(io::Error),
}

/// Run `launch` to completion, streaming output to `sink` if given.
pub async fn run(
    launch: &Launch,
    sink: Option<Arc<dyn OutputSink>>,
) -> Result<Finished, SpawnError> {
    check_workdir(&launch.workdir).map_err(SpawnError::Workdir)?;
    let (program, args) = launch
        .argv
        .split_first()
        .ok_or_else(|| SpawnError::Other(io::Error::other("empty argv")))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&launch.workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: `setsid` is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| nix::unistd::setsid().map(drop).map_err(io::Error::from));
    }
    let mut child = command.spawn().map_err(|err| match err.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => SpawnError::Program(err),
        _ => SpawnError::Other(err),
    })?;
    let group = child
        .id()
        .map(|pid| Pid::from_raw(pid as i32))
        .ok_or_else(|| {
            SpawnError::Other(io::Error::other("child exited before its pid was read"))
        })?;

    let stdout = Arc::new(Mutex::new(Tail::new(launch.tail_bytes)));
    let stderr = Arc::new(Mutex::new(Tail::new(launch.tail_bytes)));
    let readers = [
        child
            .stdout
            .take()
            .map(|pipe| pump(pipe, Stream::Stdout, stdout.clone(), sink.clone())),
        child
            .stderr
            .take()
            .map(|pipe| pump(pipe, Stream::Stderr, stderr.clone(), sink.clone())),
    ];

    let (status, timed_out) = tokio::select! {
        status = child.wait() => (status.map_err(SpawnError::Other)?, false),
        () = sleep(launch.timeout) => (terminate(&mut child, group, launch.kill_grace).await?, true),
    };

    for reader in readers.into_iter().flatten() {
        let abort = reader.abort_handle();
        if timeout(DRAIN_BOUND, reader).await.is_err() {
            abort.abort();
        }
    }
    Ok(Finished {
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        stdout: take(stdout),
        stderr: take(stderr),
    })
}

/// The working directory must be a directory we can enter, so that a
/// later `ENOENT`/`EACCES` from spawning names the program, not the directory.
fn check_workdir(dir: &std::path::Path) -> io::Result<()> {
    if !std::fs::metadata(dir)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "not a directory",
        ));
    }
    nix::unistd::access(dir, nix::unistd::AccessFlags::X_OK).map_err(io::Error::from)
}

/// `SIGTERM` the group; `SIGKILL` it once the grace has passed if any
/// member is still alive (the leader may have exited already).
async fn terminate(
    child: &mut Child,
    group: Pid,
    grace: Duration,
) -> Result<ExitStatus, SpawnError> {
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    let mut status = None;
    loop {
        if status.is_none() {
            status = child.try_wait().map_err(SpawnError::Other)?;
        }
        if status.is_some() && !group_alive(group) {
            break;
        }
        if Instant::now() >= deadline {
            let _ = killpg(group, Signal::SIGKILL);
            break;
        }
        sleep(Duration::from_millis(20)).await;
    }
    match status {
        Some(status) => Ok(status),
        None => child.wait().await.map_err(SpawnError::Other),
    }
}

/// Whether any process of the group is alive.
fn group_alive(group: Pid) -> bool {
    killpg(group, None).is_ok()
}

/// Copy a pipe into its tail (and the sink) until EOF.
fn pump(
    mut pipe: impl AsyncRead + Unpin + Send + 'static,
    stream: Stream,
    tail: Arc<Mutex<Tail>>,
    sink: Option<Arc<dyn OutputSink>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = &buf[..n];
                    if let Some(sink) = &sink {
                        sink.write(stream, chunk);
                    }
                    tail.lock().expect("tail lock").push(chunk);
                }
            }
        }
    })
}

fn take(tail: Arc<Mutex<Tail>>) -> Tail {
    match Arc::try_unwrap(tail) {
        Ok(mutex) => mutex.into_inner().expect("tail lock"),
        // A reader that was cut off at the drain bound still holds a clone.
        Err(shared) => shared.lock().expect("tail lock").clone(),
    }
}
