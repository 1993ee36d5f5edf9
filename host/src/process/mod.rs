//! Process mechanics: spawning an argv in its own session and process
//! group (and its own cgroup), bounded output capture with spill, stdin,
//! and termination.
//!
//! This layer knows nothing about sandboxes or policy: it runs exactly the
//! argv it is given and reports what happened. That is why its one door,
//! `spawn_unchecked`, is crate-private and named for what it bypasses: it
//! runs an argv with no confinement check, and only the run pipeline —
//! which has checked the launch against the host invariants — calls it.
//!
//! * Every run gets its own session, so its own process group, and — when
//!   the host can make one — its own cgroup ([`cgroup`]), entered before
//!   the child's first instruction. A timeout, an abort or a kill signals
//!   the whole group: `SIGTERM`, then `SIGKILL` once the grace has passed
//!   if any member is still alive — even when the leader already exited.
//!   Where a [`Supervisor`] runs the command (cordon's launcher), the
//!   `SIGTERM` goes to it to forward, and `SIGHUP` after the grace has it
//!   end the tree. When the leader has ended, whatever is left in the
//!   run's cgroup is killed. Dropping a [`Process`] before it finished (a
//!   dropped future) ends its group and its cgroup at once.
//! * stdin is `/dev/null` unless the launch carries bytes or a live stream;
//!   those are fed by a detached writer, so a child that never reads them
//!   cannot stall the host. A launch may ask for a terminal instead
//!   (`terminal.rs`): stdin, stdout and stderr are then one pty the host
//!   holds the master of, and `input.rs` can tell when the command waits
//!   on it.
//! * Only fds 0–2 (and a runner's status, handover and init fds 3–6, and
//!   a spare runner's lent network namespace right above them) reach the
//!   child; the host is not forked to start it, except to start it
//!   inside a cgroup v2 where glibc cannot (see `spawn.rs` for why and how).
//! * When the leader exits, output still buffered is drained for a short
//!   bound, so a daemon that inherited the pipes cannot hold the run open.

pub mod cgroup;
pub mod env;
pub mod identity;
pub mod input;
pub mod lineage;
pub mod output;
mod passthrough;
pub(crate) mod spawn;
pub mod spill;
mod terminal;

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

pub use cgroup::{Cgroups, RunCgroup};
pub use input::InputWatch;
pub use output::{Capture, OutputSink, Stream, Tail};

use crate::model::LimitKind;
use spawn::ExitWatch;
use spill::SpillDir;

/// Time between `SIGTERM` and `SIGKILL` (SPEC.md §3).
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(3_000);

/// How long output is still read after the leader exited.
const DRAIN_BOUND: Duration = Duration::from_millis(500);

/// What to run.
#[derive(Clone, Debug)]
pub struct SpawnRequest {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Working directory.
    pub workdir: PathBuf,
    /// What the command reads on stdin; `/dev/null` when none.
    pub stdin: Option<StdinSource>,
    /// Give the command a terminal of this size as stdin, stdout and
    /// stderr instead: `stdin` is then written to the terminal (its end
    /// as the end-of-file character), and its output is captured as stdout.
    pub tty: Option<crate::model::TerminalSize>,
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
    /// Give the program a pipe at fd [`INIT_FD`] for a report from inside
    /// its runner (cordon's init under bwrap); it comes back in
    /// [`Finished::init_report`]. Needs `handover`.
    pub init_pipe: bool,
    /// Bytes the supervisor inside the runner reads from fd
    /// [`INIT_ENV_FD`]: the command's environment, kept from the runner
    /// and the supervisor themselves. Needs `init_pipe`.
    pub init_env: Option<Vec<u8>>,
    /// Whether a cordon supervisor runs the command, and where.
    pub supervisor: Supervisor,
}

/// Where a command's stdin comes from, when not `/dev/null`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StdinSource {
    /// These bytes, then end of file.
    Bytes(Vec<u8>),
    /// What a caller sends while the run lasts.
    Stream(crate::model::StdinStream),
}

impl StdinSource {
    /// The source a request asks for: its bytes, or its live stream.
    pub fn of(bytes: Option<Vec<u8>>, stream: Option<crate::model::StdinStream>) -> Option<Self> {
        bytes
            .map(StdinSource::Bytes)
            .or(stream.map(StdinSource::Stream))
    }
}

/// The old name of [`SpawnRequest`], kept so embedders' paths still resolve.
#[deprecated(note = "renamed `SpawnRequest`: `policy::Launch` is what a component plans")]
pub type Launch = SpawnRequest;

/// Whether a cordon supervisor ([`crate::sandbox::launcher::supervise`])
/// runs the command, and where it is: that decides who gets the
/// termination signals.
#[derive(Clone, Copy, Debug, Default)]
pub enum Supervisor {
    /// None: the spawned group gets `SIGTERM`, then `SIGKILL` after the grace.
    #[default]
    None,
    /// The spawned process is the supervisor (the Landlock launcher): it
    /// gets `SIGTERM`, which it forwards to the command's group, then
    /// `SIGHUP` after the grace, which kills the tree; `SIGKILL` follows
    /// only if it has not ended within [`SUPERVISOR_MARGIN`].
    Leader,
    /// The supervisor runs inside the runner, in the process group of the
    /// pid the runner reports on its status pipe (bwrap's `child-pid`),
    /// found by this parser. Signalled as [`Supervisor::Leader`]; the
    /// runner's own group gets the final `SIGKILL`.
    Reported(fn(&[u8]) -> Option<i32>),
}

/// How long a supervisor may take to end the tree after `SIGHUP`, before
/// the spawned group is `SIGKILL`ed.
pub const SUPERVISOR_MARGIN: Duration = Duration::from_millis(1_000);

/// The fd slots a runner is handed: the protocol's (`launcher/src/protocol.rs`).
pub use crate::sandbox::launcher::protocol::{HANDOVER_FD, INIT_ENV_FD, INIT_FD, STATUS_FD};

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
    /// What the supervisor inside the runner wrote to [`INIT_FD`].
    pub init_report: Option<Vec<u8>>,
    /// The limits the run's cgroup says it reached.
    pub exceeded: Vec<LimitKind>,
}

/// A run's spawned process group, its supervisor and its cgroup: what
/// the host signals to end the run.
#[derive(Clone, Debug)]
pub struct Group {
    leader: Pid,
    supervisor: Supervisor,
    cgroup: Option<Arc<RunCgroup>>,
}

impl Group {
    /// The spawned process group (equal to the leader's pid).
    pub fn leader(&self) -> Pid {
        self.leader
    }

    /// End the run at once, without waiting (a dropped run, host
    /// shutdown): a supervisor that is the leader gets `SIGHUP` and ends
    /// the tree itself; anything else — bwrap, whose death ends its PID
    /// namespace, or an unsupervised group — is `SIGKILL`ed.
    pub fn kill_now(&self) {
        match self.supervisor {
            Supervisor::Leader => {
                let _ = killpg(self.leader, Signal::SIGHUP);
            }
            Supervisor::None | Supervisor::Reported(_) => {
                let _ = killpg(self.leader, Signal::SIGKILL);
            }
        }
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill();
        }
    }
}

/// A run's group, ended at once when this guard is dropped armed.
#[derive(Debug)]
struct GroupGuard {
    group: Group,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            self.group.kill_now();
        }
    }
}

/// Bytes read so far from a report pipe, shared with its reader.
type Report = Arc<Mutex<Vec<u8>>>;

/// A running process and its captured output.
#[derive(Debug)]
pub struct Process {
    exit: ExitWatch,
    guard: GroupGuard,
    stdout: Arc<Mutex<Capture>>,
    stderr: Arc<Mutex<Capture>>,
    readers: Vec<JoinHandle<()>>,
    feeder: Option<JoinHandle<()>>,
    status: Option<(Report, JoinHandle<()>)>,
    init: Option<(Report, JoinHandle<()>)>,
    input: Option<InputWatch>,
}

/// Start `launch` in its own session — inside `cgroup` from its first
/// instruction, when given — capturing output (spilling into `spill_dir`
/// when given) and streaming it to `sink`.
///
/// *Unchecked*: the argv runs exactly as given, confined or not. Only
/// [`crate::run`] calls this, with a launch its host checks accepted.
pub(crate) fn spawn_unchecked(
    launch: &SpawnRequest,
    cgroup: Option<RunCgroup>,
    spill_dir: Option<&Arc<SpillDir>>,
    sink: Option<Arc<dyn OutputSink>>,
) -> Result<Process, SpawnError> {
    let (started, cgroup) = start(launch, cgroup, false, None)?;
    let exit = ExitWatch::reap(started.pid);
    running(started, exit, cgroup, launch, spill_dir, sink)
}

/// A runner started ahead of its command ([`start_waiting_unchecked`]):
/// it builds its sandbox meanwhile and waits for the command on its
/// handover pipe. Dropped without being handed one, it is ended at once,
/// with its process group and its cgroup.
#[derive(Debug)]
pub(crate) struct Waiting {
    argv: Vec<String>,
    env: Vec<(OsString, OsString)>,
    started: spawn::Started,
    exit: ExitWatch,
    guard: GroupGuard,
}

/// Start `launch` — a runner that takes its command later over a pipe at
/// [`HANDOVER_FD`] — in its own session, inside `cgroup` when given, with
/// `passed` too at the slot [`passed_slot`] names (what `launch`'s argv
/// says is there).
///
/// *Unchecked*: the argv runs exactly as given. Only the host starts one,
/// from a confinement the sandbox issued; a run adopts it only when its
/// own checked launch has the very same runner argv (but for a network
/// namespace lent to it: `sandbox::without_lent_network`).
pub(crate) fn start_waiting_unchecked(
    launch: &SpawnRequest,
    cgroup: Option<RunCgroup>,
    passed: Option<&std::os::fd::OwnedFd>,
) -> Result<Waiting, SpawnError> {
    let (started, cgroup) = start(launch, cgroup, true, passed)?;
    let exit = ExitWatch::reap(started.pid);
    let guard = GroupGuard {
        group: Group {
            leader: started.pid,
            supervisor: launch.supervisor,
            cgroup,
        },
        armed: true,
    };
    Ok(Waiting {
        argv: launch.argv.clone(),
        env: launch.env.clone(),
        started,
        exit,
        guard,
    })
}

/// The fd number a fd passed to a runner started ahead of its command
/// ([`start_waiting_unchecked`]) has in it, for a `launch` like this.
pub(crate) fn passed_slot(launch: &SpawnRequest) -> std::os::fd::RawFd {
    spawn::passed_slot(
        launch.status_pipe,
        true,
        launch.init_pipe,
        launch.init_env.is_some(),
    )
}

impl Waiting {
    /// The runner's argv.
    pub(crate) fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The runner's own environment.
    pub(crate) fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    /// The cgroup it runs in.
    pub(crate) fn cgroup(&self) -> Option<&RunCgroup> {
        self.guard.group.cgroup.as_deref()
    }

    /// Hand the runner its command (`message`, in the runner's encoding)
    /// and capture the run as [`spawn_unchecked`] does for `launch`, the
    /// run's own checked launch.
    ///
    /// *Unchecked*: the caller has compared `launch`'s runner with this
    /// one's argv and environment.
    pub(crate) fn adopt_unchecked(
        mut self,
        message: Vec<u8>,
        launch: &SpawnRequest,
        spill_dir: Option<&Arc<SpillDir>>,
        sink: Option<Arc<dyn OutputSink>>,
    ) -> Result<Process, SpawnError> {
        // As a fresh spawn checks it (the runner would only fail closed).
        check_workdir(&launch.workdir).map_err(SpawnError::Workdir)?;
        self.guard.armed = false;
        let Waiting {
            mut started,
            exit,
            guard,
            ..
        } = self;
        let handover = started.handover.take().ok_or_else(|| {
            SpawnError::Other(io::Error::other("the runner has no handover pipe"))
        })?;
        let mut pipe = pipe::Sender::from_owned_fd(handover).map_err(SpawnError::Other)?;
        // Written off the caller's thread: a runner that died meanwhile
        // gives EPIPE, and its status report says it never started.
        tokio::spawn(async move {
            let _ = pipe.write_all(&message).await;
        });
        let cgroup = guard.group.cgroup.clone();
        running(started, exit, cgroup, launch, spill_dir, sink)
    }
}

/// Start `launch` in its own session (inside `cgroup` from its first
/// instruction, when given); `handover_later`: with a handover pipe
/// instead of the launch's handover bytes.
fn start(
    launch: &SpawnRequest,
    cgroup: Option<RunCgroup>,
    handover_later: bool,
    passed: Option<&std::os::fd::OwnedFd>,
) -> Result<(spawn::Started, Option<Arc<RunCgroup>>), SpawnError> {
    use std::os::fd::AsFd;
    check_workdir(&launch.workdir).map_err(SpawnError::Workdir)?;
    let started = match &cgroup {
        // The spawn may run on a thread staged inside the cgroup: it gets
        // its own copy of the launch (a few kilobytes) and of `passed`.
        Some(cgroup) => {
            let owned = launch.clone();
            let passed = passed
                .map(std::os::fd::OwnedFd::try_clone)
                .transpose()
                .map_err(SpawnError::Other)?;
            cgroup.spawn_inside(move |directory| {
                let passed = passed.as_ref().map(AsFd::as_fd);
                spawn::start(&spec_of(&owned, directory, handover_later, passed))
            })
        }
        None => {
            let passed = passed.map(AsFd::as_fd);
            spawn::start(&spec_of(launch, None, handover_later, passed))
        }
    }
    .map_err(|err| match err.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => SpawnError::Program(err),
        _ => SpawnError::Other(err),
    })?;
    Ok((started, cgroup.map(Arc::new)))
}

/// The run of a started child: its group, its reports, its output
/// captured (spilling into `spill_dir`) and streamed to `sink`, and its
/// stdin fed.
fn running(
    started: spawn::Started,
    exit: ExitWatch,
    cgroup: Option<Arc<RunCgroup>>,
    launch: &SpawnRequest,
    spill_dir: Option<&Arc<SpillDir>>,
    sink: Option<Arc<dyn OutputSink>>,
) -> Result<Process, SpawnError> {
    let group = Group {
        leader: started.pid,
        supervisor: launch.supervisor,
        cgroup,
    };
    let guard = GroupGuard {
        group: group.clone(),
        armed: true,
    };
    let status = started.status.map(read_report).transpose()?;
    let init = started.init.map(read_report).transpose()?;
    let input = started.input;

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
    let (readers, feeder) = match started.output {
        spawn::Output::Pipes {
            stdout: out,
            stderr: err,
        } => {
            // A stream the sink takes whole moves there by splice; the
            // others are read here.
            let reader = |fd, stream, capture: &Arc<Mutex<Capture>>| {
                let capture = capture.clone();
                let direct = sink.clone().and_then(|s| Some((s.passthrough(stream)?, s)));
                if let Some((target, sink)) = direct {
                    return Ok(passthrough::start(fd, target, stream, capture, sink));
                }
                let receiver = pipe::Receiver::from_owned_fd(fd).map_err(SpawnError::Other)?;
                Ok::<_, SpawnError>(pump(receiver, stream, capture, sink.clone()))
            };
            let readers = vec![
                reader(out, Stream::Stdout, &stdout)?,
                reader(err, Stream::Stderr, &stderr)?,
            ];
            let feeder = match (started.stdin, &launch.stdin) {
                (Some(fd), Some(source)) => {
                    let pipe = pipe::Sender::from_owned_fd(fd).map_err(SpawnError::Other)?;
                    Some(feed(pipe, source.clone(), None))
                }
                _ => None,
            };
            (readers, feeder)
        }
        spawn::Output::Terminal(master) => {
            let master = terminal::Master::new(master).map_err(SpawnError::Other)?;
            let readers = vec![pump(master.clone(), Stream::Stdout, stdout.clone(), sink)];
            let feeder = launch
                .stdin
                .clone()
                .map(|source| feed(master, source, Some(terminal::END_OF_INPUT)));
            (readers, feeder)
        }
    };
    Ok(Process {
        exit,
        guard,
        stdout,
        stderr,
        readers,
        feeder,
        status,
        init,
        input,
    })
}

/// Write `source` into a command's stdin off the caller's task; at its
/// end, `end` when given (a terminal's end-of-file character: the
/// terminal itself stays open).
fn feed(
    mut into: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
    source: StdinSource,
    end: Option<u8>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // A child that exits or never reads gives EPIPE: fine.
        let fed = match source {
            StdinSource::Bytes(bytes) => into.write_all(&bytes).await.is_ok(),
            StdinSource::Stream(stream) => stream.copy_into(&mut into).await,
        };
        if let (true, Some(end)) = (fed, end) {
            let _ = into.write_all(&[end]).await;
        }
    })
}

/// What `spawn::start` gets for `launch`, started inside the cgroup v2
/// directory `cgroup` when given (`handover_later`: with a handover pipe).
fn spec_of<'a>(
    launch: &'a SpawnRequest,
    cgroup: Option<std::os::fd::RawFd>,
    handover_later: bool,
    passed: Option<std::os::fd::BorrowedFd<'a>>,
) -> spawn::Spec<'a> {
    spawn::Spec {
        argv: &launch.argv,
        env: &launch.env,
        workdir: &launch.workdir,
        stdin: match (launch.tty, &launch.stdin) {
            (Some(size), _) => spawn::Stdin::Terminal(size),
            (None, Some(_)) => spawn::Stdin::Piped,
            (None, None) => spawn::Stdin::Null,
        },
        status_pipe: launch.status_pipe,
        handover: launch.handover.as_deref(),
        handover_later,
        init_pipe: launch.init_pipe,
        init_env: launch.init_env.as_deref(),
        passed,
        cgroup,
    }
}

/// Read a report pipe to its end on the runtime, keeping what has arrived
/// readable meanwhile (bwrap's `child-pid` is needed while the run is still
/// going). Async, not a blocking thread: a runner holds its report pipe open
/// for the whole run, and a server with hundreds of live tasks must not
/// hold as many threads. A runner writes a few lines at most; the bound
/// keeps a misbehaving one from growing the host.
fn read_report(read: std::os::fd::OwnedFd) -> Result<(Report, JoinHandle<()>), SpawnError> {
    const REPORT_BOUND: usize = 64 * 1024;
    let mut pipe = pipe::Receiver::from_owned_fd(read).map_err(SpawnError::Other)?;
    let report = Report::default();
    let filled = report.clone();
    let reader = tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => {
                    let mut report = filled.lock().expect("report lock");
                    if report.len() + n <= REPORT_BOUND {
                        report.extend_from_slice(&buf[..n]);
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
    Ok((report, reader))
}

/// Wait a bounded time for a report's reader to finish; what it read.
async fn finish_report(report: Option<(Report, JoinHandle<()>)>) -> Option<Vec<u8>> {
    let (report, reader) = report?;
    let stop = reader.abort_handle();
    match timeout(DRAIN_BOUND, reader).await {
        Ok(Ok(())) => Some(report.lock().expect("report lock").clone()),
        _ => {
            stop.abort();
            None
        }
    }
}

impl Process {
    /// The run's group and how to end it.
    pub fn group(&self) -> Group {
        self.guard.group.clone()
    }

    /// What tells whether the run waits on the stdin the host feeds it.
    pub fn input(&self) -> Option<InputWatch> {
        self.input
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
        let group = self.guard.group.clone();
        let reported = self.status.as_ref().map(|(report, _)| report.clone());
        let end = Escalation {
            group: group.clone(),
            reported: reported.as_ref(),
            grace,
        };
        let (status, timed_out, aborted) = tokio::select! {
            status = self.exit.status() => (status?, false, false),
            () = timer => (end.terminate(&mut self.exit).await?, true, false),
            () = abort.cancelled() => (end.terminate(&mut self.exit).await?, false, true),
        };
        self.guard.armed = false;
        // The leader has ended: whatever is left of the run in its cgroup
        // ends now too (a supervisor has swept its own tree already), and
        // so cannot hold the output pipes open.
        let exceeded = match &group.cgroup {
            Some(cgroup) => {
                let cgroup = cgroup.clone();
                tokio::task::spawn_blocking(move || {
                    cgroup.kill();
                    cgroup.exceeded()
                })
                .await
                .unwrap_or_default()
            }
            None => vec![],
        };
        for reader in self.readers.drain(..) {
            let stop = reader.abort_handle();
            if timeout(DRAIN_BOUND, reader).await.is_err() {
                stop.abort();
            }
        }
        if let Some(feeder) = self.feeder.take() {
            feeder.abort();
        }
        let status_report = finish_report(self.status.take()).await;
        let init_report = finish_report(self.init.take()).await;
        Ok(Finished {
            exit_code: status.code(),
            signal: status.signal(),
            timed_out,
            aborted,
            status_report,
            init_report,
            exceeded,
        })
    }
}

/// The working directory must be a directory we can enter, so that a
/// later `ENOENT`/`EACCES` from spawning names the program, not the directory.
///
/// One walk of its path, not two (a workdir 400 directories deep is 400
/// names a walk): `dir/.` resolves only through a directory that can be
/// searched (`ENOTDIR`, `EACCES`, `ENOENT` otherwise), and `X_OK` asks it
/// again of the directory itself.
fn check_workdir(dir: &Path) -> io::Result<()> {
    nix::unistd::access(&dir.join("."), nix::unistd::AccessFlags::X_OK).map_err(io::Error::from)
}

/// Ending a run from outside: its group, the runner's report so far (for
/// a supervisor it names) and the grace.
struct Escalation<'a> {
    group: Group,
    reported: Option<&'a Report>,
    grace: Duration,
}

impl Escalation<'_> {
    /// `SIGTERM`, then — once the grace has passed and any member is still
    /// alive (the leader may have exited already) — `SIGKILL`; with a
    /// supervisor, `SIGTERM` and `SIGHUP` go to it and `SIGKILL` follows
    /// only if it has not ended the tree within [`SUPERVISOR_MARGIN`].
    async fn terminate(&self, exit: &mut ExitWatch) -> io::Result<ExitStatus> {
        let leader = self.group.leader;
        let supervisor = match self.group.supervisor {
            Supervisor::None => None,
            Supervisor::Leader => Some(leader),
            Supervisor::Reported(parse) => Some(
                self.reported
                    .and_then(|report| parse(&report.lock().expect("report lock")))
                    .map_or(leader, Pid::from_raw),
            ),
        };
        let _ = killpg(supervisor.unwrap_or(leader), Signal::SIGTERM);
        let mut status = None;
        if !wait_until_gone(exit, leader, &mut status, self.grace).await? {
            if let Some(supervisor) = supervisor {
                let _ = killpg(supervisor, Signal::SIGHUP);
                if wait_until_gone(exit, leader, &mut status, SUPERVISOR_MARGIN).await? {
                    return finish(exit, status).await;
                }
            }
            let _ = killpg(leader, Signal::SIGKILL);
            if let Some(cgroup) = &self.group.cgroup {
                cgroup.kill();
            }
        }
        finish(exit, status).await
    }
}

/// Wait up to `bound` for the leader to be reaped and its group to be
/// empty; whether it is.
async fn wait_until_gone(
    exit: &mut ExitWatch,
    group: Pid,
    status: &mut Option<ExitStatus>,
    bound: Duration,
) -> io::Result<bool> {
    let deadline = Instant::now() + bound;
    loop {
        if status.is_none() {
            *status = exit.try_status().transpose()?;
        }
        if status.is_some() && !group_alive(group) {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// The leader's status, waiting for it if it is not reaped yet.
async fn finish(exit: &mut ExitWatch, status: Option<ExitStatus>) -> io::Result<ExitStatus> {
    match status {
        Some(status) => Ok(status),
        None => exit.status().await,
    }
}

/// Whether any process of the group is alive.
fn group_alive(group: Pid) -> bool {
    killpg(group, None).is_ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workdir_is_an_existing_directory_that_can_be_entered() {
        let dir = tempfile::tempdir().unwrap();
        check_workdir(dir.path()).unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = check_workdir(&file).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotADirectory, "{err}");
        let err = check_workdir(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        // A link to a directory is that directory, as before.
        std::os::unix::fs::symlink(dir.path(), dir.path().join("link")).unwrap();
        check_workdir(&dir.path().join("link")).unwrap();
    }
}
