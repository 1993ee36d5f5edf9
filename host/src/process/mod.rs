//! Process mechanics: spawning an argv in its own session and process
//! group, bounded output capture with spill, stdin, and termination.
//!
//! This layer knows nothing about sandboxes or policy: it runs exactly the
//! argv it is given and reports what happened. That is why its one door,
//! `spawn_unchecked`, is crate-private and named for what it bypasses: it
//! runs an argv with no confinement check, and only the run pipeline —
//! which has checked the launch against the host invariants — calls it.
//!
//! * Every run gets its own session, so its own process group. A timeout, an
//!   abort or a kill signals the whole group: `SIGTERM`, then `SIGKILL` once
//!   the grace has passed if any member is still alive — even when the
//!   leader already exited. Dropping a [`Process`] before it finished (a
//!   dropped future) `SIGKILL`s its group.
//! * stdin is `/dev/null` unless the launch carries bytes; those are fed by
//!   a detached writer, so a child that never reads them cannot stall the host.
//! * Only fds 0–2 (and a runner's status fd 3) reach the child; the host
//!   is never forked to start it (see `spawn.rs` for why and how).
//! * When the leader exits, output still buffered is drained for a short
//!   bound, so a daemon that inherited the pipes cannot hold the run open.

pub mod env;
pub mod output;
pub(crate) mod spawn;
pub mod spill;

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

pub use output::{Capture, OutputSink, Stream, Tail};
use spawn::ExitWatch;
use spill::SpillDir;

/// Time between `SIGTERM` and `SIGKILL` (SPEC.md §3).
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(3_000);

/// How long output is still read after the leader exited.
const DRAIN_BOUND: Duration = Duration::from_millis(500);

/// What to run.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Working directory.
    pub workdir: PathBuf,
    /// Bytes for stdin; `/dev/null` when none.
    pub stdin: Option<Vec<u8>>,
    /// Bytes kept in memory per stream.
    pub tail_bytes: usize,
    /// Bytes a spill file may hold.
    pub spill_limit: u64,
    /// Give the program a status pipe as fd [`STATUS_FD`] (for a runner's
    /// out-of-band report); its contents come back in [`Finished::status_report`].
    pub status_pipe: bool,
    /// Bytes the program reads from fd [`HANDOVER_FD`] (a runner taking
    /// the command's environment over its own channel). Needs `status_pipe`.
    pub handover: Option<Vec<u8>>,
}

/// The fd number a runner's status pipe has in the child.
pub const STATUS_FD: i32 = 3;

/// The fd number of the handover a runner reads (a sealed-in-practice
/// memfd: written whole before the spawn, so no reader can stall the host).
pub const HANDOVER_FD: i32 = 4;

/// Why a launch could not start.
#[derive(Debug)]
pub enum SpawnError {
    /// The program itself is missing or not executable (`ENOENT`/`EACCES`
    /// with a usable working directory).
    Program(io::Error),
    /// The working directory is missing, not a directory, or not enterable.
    Workdir(io::Error),
    /// Any other failure to start (`ENOEXEC`, `EMFILE`, …).
    Other(io::Error),
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpawnError::Program(err) | SpawnError::Other(err) => err.fmt(f),
            SpawnError::Workdir(err) => write!(f, "working directory: {err}"),
        }
    }
}

/// How a process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    /// Exit code; none when killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended the leader.
    pub signal: Option<i32>,
    /// Terminated at the timeout.
    pub timed_out: bool,
    /// Terminated because the caller aborted (or killed) it.
    pub aborted: bool,
    /// What the runner wrote to its status pipe (when it had one and the
    /// pipe closed in time).
    pub status_report: Option<Vec<u8>>,
}

/// A process group that is `SIGKILL`ed when this guard is dropped armed.
#[derive(Debug)]
struct GroupGuard {
    group: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = killpg(self.group, Signal::SIGKILL);
        }
    }
}

/// A running process and its captured output.
#[derive(Debug)]
pub struct Process {
    exit: ExitWatch,
    guard: GroupGuard,
    stdout: Arc<Mutex<Capture>>,
    stderr: Arc<Mutex<Capture>>,
    readers: Vec<JoinHandle<()>>,
    feeder: Option<JoinHandle<()>>,
    status: Option<JoinHandle<Vec<u8>>>,
}

/// Start `launch` in its own session, capturing output (spilling into
/// `spill_dir` when given) and streaming it to `sink`.
///
/// *Unchecked*: the argv runs exactly as given, confined or not. Only
/// [`crate::run`] calls this, with a launch its host checks accepted.
pub(crate) fn spawn_unchecked(
    launch: &Launch,
    spill_dir: Option<&Arc<SpillDir>>,
    sink: Option<Arc<dyn OutputSink>>,
) -> Result<Process, SpawnError> {
    check_workdir(&launch.workdir).map_err(SpawnError::Workdir)?;
    let started = spawn::start(&spawn::Spec {
        argv: &launch.argv,
        env: &launch.env,
        workdir: &launch.workdir,
        stdin: match launch.stdin {
            Some(_) => spawn::Stdin::Piped,
            None => spawn::Stdin::Null,
        },
        status_pipe: launch.status_pipe,
        handover: launch.handover.as_deref(),
    })
    .map_err(|err| match err.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => SpawnError::Program(err),
        _ => SpawnError::Other(err),
    })?;
    let group = started.pid;
    let guard = GroupGuard { group, armed: true };
    let exit = ExitWatch::reap(started.pid);
    let status = started.status.map(|read| {
        // The runner closes the pipe when it execs (or exits); a blocking
        // read of a few bytes on the blocking pool is all this needs.
        tokio::task::spawn_blocking(move || {
            let mut report = vec![];
            let _ = std::io::Read::read_to_end(&mut std::fs::File::from(read), &mut report);
            report
        })
    });

    let capture = |stream| {
        Arc::new(Mutex::new(Capture::new(
            stream,
            launch.tail_bytes,
            spill_dir.cloned(),
            launch.spill_limit,
        )))
    };
    let stdout = capture(Stream::Stdout);
    let stderr = capture(Stream::Stderr);
    let receiver = |fd| pipe::Receiver::from_owned_fd(fd).map_err(SpawnError::Other);
    let readers = vec![
        pump(
            receiver(started.stdout)?,
            Stream::Stdout,
            stdout.clone(),
            sink.clone(),
        ),
        pump(
            receiver(started.stderr)?,
            Stream::Stderr,
            stderr.clone(),
            sink,
        ),
    ];
    let feeder = match (started.stdin, &launch.stdin) {
        (Some(fd), Some(bytes)) => {
            let mut pipe = pipe::Sender::from_owned_fd(fd).map_err(SpawnError::Other)?;
            let bytes = bytes.clone();
            Some(tokio::spawn(async move {
                // A child that exits or never reads gives EPIPE: fine.
                let _ = pipe.write_all(&bytes).await;
            }))
        }
        _ => None,
    };
    Ok(Process {
        exit,
        guard,
        stdout,
        stderr,
        readers,
        feeder,
        status,
    })
}

impl Process {
    /// The process group (equal to the leader's pid).
    pub fn group(&self) -> Pid {
        self.guard.group
    }

    /// The live stdout capture.
    pub fn stdout(&self) -> &Arc<Mutex<Capture>> {
        &self.stdout
    }

    /// The live stderr capture.
    pub fn stderr(&self) -> &Arc<Mutex<Capture>> {
        &self.stderr
    }

    /// Wait for the leader to exit, terminating the group at `deadline` or
    /// when `abort` is cancelled (whichever comes first wins), then drain
    /// the output for a short bound.
    pub async fn wait(
        mut self,
        deadline: Option<Duration>,
        grace: Duration,
        abort: &CancellationToken,
    ) -> io::Result<Finished> {
        let timer = async {
            match deadline {
                Some(after) => sleep(after).await,
                None => std::future::pending().await,
            }
        };
        let group = self.guard.group;
        let (status, timed_out, aborted) = tokio::select! {
            status = self.exit.status() => (status?, false, false),
            () = timer => (terminate(&mut self.exit, group, grace).await?, true, false),
            () = abort.cancelled() => (terminate(&mut self.exit, group, grace).await?, false, true),
        };
        self.guard.armed = false;
        for reader in self.readers.drain(..) {
            let stop = reader.abort_handle();
            if timeout(DRAIN_BOUND, reader).await.is_err() {
                stop.abort();
            }
        }
        if let Some(feeder) = self.feeder.take() {
            feeder.abort();
        }
        let mut status_report = None;
        if let Some(reader) = self.status.take() {
            let stop = reader.abort_handle();
            match timeout(DRAIN_BOUND, reader).await {
                Ok(Ok(report)) => status_report = Some(report),
                _ => stop.abort(),
            }
        }
        Ok(Finished {
            exit_code: status.code(),
            signal: status.signal(),
            timed_out,
            aborted,
            status_report,
        })
    }
}

/// The working directory must be a directory we can enter, so that a
/// later `ENOENT`/`EACCES` from spawning names the program, not the directory.
fn check_workdir(dir: &Path) -> io::Result<()> {
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
async fn terminate(exit: &mut ExitWatch, group: Pid, grace: Duration) -> io::Result<ExitStatus> {
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    let mut status = None;
    loop {
        if status.is_none() {
            status = exit.try_status().transpose()?;
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
        None => exit.status().await,
    }
}

/// Whether any process of the group is alive.
fn group_alive(group: Pid) -> bool {
    killpg(group, None).is_ok()
}

/// `SIGKILL` a group at once (host shutdown without a runtime to wait on).
pub fn kill_group_now(group: Pid) {
    let _ = killpg(group, Signal::SIGKILL);
}

/// Copy a pipe into its capture (and the sink) until EOF.
fn pump(
    mut pipe: impl AsyncRead + Unpin + Send + 'static,
    stream: Stream,
    capture: Arc<Mutex<Capture>>,
    sink: Option<Arc<dyn OutputSink>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = &buf[..n];
                    if let Some(sink) = &sink {
                        sink.write(stream, chunk);
                    }
                    capture.lock().expect("capture lock").push(chunk);
                }
            }
        }
    })
}
