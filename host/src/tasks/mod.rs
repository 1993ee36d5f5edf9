//! Background tasks: started at once, read incrementally, killed, waited on.
//!
//! A task is a run without a foreground caller. The host spawns it, returns
//! its id, and a tokio task follows it to the end: it waits for the process,
//! has the policy component that *planned* the task settle it (so a policy
//! swapped meanwhile never sees half a run), stamps the sandbox facts and
//! status, and only then wakes the waiters.
//!
//! * `read` is consuming: the delta since the last read, stdout first, then
//!   `[stderr]\n` and the stderr delta (SPEC.md §4). While the task runs, a
//!   UTF-8 character whose bytes have not all arrived waits for the next
//!   read, so no read splits one into replacement characters.
//! * `kill` is true only for the first kill of a running task; the group is
//!   terminated with the usual grace escalation; status becomes `killed`.
//! * status: `running` → `completed` (any exit code) or `killed` (killed,
//!   aborted, died by a signal, or its runner failed).
//! * A task belongs to the session that started it (see
//!   [`crate::session::Session`]) and stays there until [`Tasks::remove`] or the
//!   session's end; its spill files live exactly as long.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::admission::Permit;
use crate::model::{GrantFacts, SandboxFacts};
use crate::process::{self, Capture};

/// A task's id: 128 random bits, written as 32 lowercase hex digits (a
/// JSON string, so no client's number type rounds it). Unguessable, so an
/// id is never a capability another session could derive; and a session
/// looks ids up only among its own tasks anyway.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(u128);

impl TaskId {
    /// A fresh random id.
    pub(crate) fn random() -> TaskId {
        TaskId(crate::random::u128())
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({self})")
    }
}

/// A string that is not a task id.
#[derive(Debug, thiserror::Error)]
#[error("a task id is 32 lowercase hex digits (as `start` returned it)")]
pub struct BadTaskId;

impl std::str::FromStr for TaskId {
    type Err = BadTaskId;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        if text.len() != 32 || !text.as_bytes().iter().all(hex) {
            return Err(BadTaskId);
        }
        u128::from_str_radix(text, 16)
            .map(TaskId)
            .map_err(|_| BadTaskId)
    }
}

impl schemars::JsonSchema for TaskId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TaskId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A task's id: 128 random bits as 32 lowercase hex digits.",
            "type": "string",
            "pattern": "^[0-9a-f]{32}$"
        })
    }
}

impl Serialize for TaskId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TaskId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TaskStatus {
    /// Still running.
    Running,
    /// Exited by itself, with any exit code.
    Completed,
    /// Killed, aborted, died by a signal, or never started.
    Killed,
}

/// A consuming read of a task's output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRead {
    /// New stdout, then (when stderr has new text) `[stderr]\n` and that text.
    pub text: String,
    /// The reader fell behind the in-memory tail: `text` is the retained
    /// tail, and the complete output is in `spill_paths`.
    pub lossy: bool,
    /// Spill files of the task's streams (set on lossy reads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spill_paths: Vec<PathBuf>,
    /// The task's status at the time of the read.
    pub status: TaskStatus,
    /// A process of the running task is seen blocked reading the stdin
    /// it is written (a prompt, a REPL): see [`TaskSnapshot::awaiting_input`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaiting_input: bool,
}

/// A task's state at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskSnapshot {
    /// The task's id.
    pub id: TaskId,
    /// The command line it runs.
    pub command: String,
    /// Its status.
    pub status: TaskStatus,
    /// Exit code, once exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended it (by name in JSON: `"SIGKILL"`).
    #[serde(with = "crate::model::signal_name")]
    #[schemars(with = "Option<String>")]
    pub signal: Option<i32>,
    /// Killed at an explicit timeout.
    pub timed_out: bool,
    /// Sandbox facts, stamped before any waiter wakes; absent for an
    /// unconfined task, and while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxFacts>,
    /// The grant a confined task runs under, as the host enforces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantFacts>,
    /// A process of the running task is seen blocked reading the stdin
    /// the host feeds it (an open stdin or a terminal): it waits for a
    /// write. Seen on Linux for a read of that stdin, or a `select` on it
    /// alone (GNU readline); a program polling several descriptors at
    /// once is not seen, so false does not prove it is not waiting.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaiting_input: bool,
}

/// How a task ended, as recorded by its follower.
#[derive(Clone, Debug)]
pub(crate) struct TaskEnd {
    pub status: TaskStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub sandbox: Option<SandboxFacts>,
    /// Text delivered once, as the stderr section of the next read
    /// (`spawn failed: …`).
    pub notice: Option<String>,
}

#[derive(Debug)]
struct State {
    status: TaskStatus,
    ending: TaskEnd,
    group: Option<process::Group>,
    /// What tells whether it waits on its stdin, while it runs.
    input: Option<process::InputWatch>,
}

/// One background task, shared by the registry, handles and its follower.
#[derive(Debug)]
struct Task {
    id: TaskId,
    command: String,
    grant: Option<GrantFacts>,
    stdout: Arc<Mutex<Capture>>,
    stderr: Arc<Mutex<Capture>>,
    state: Mutex<State>,
    kill: CancellationToken,
    done: watch::Sender<bool>,
    /// Whether it was started with an open stdin.
    opened: bool,
    /// The sender of an open stdin (`ExecRequest::open_stdin`), until
    /// closed.
    stdin: Mutex<Option<tokio::sync::mpsc::Sender<Vec<u8>>>>,
}

/// How long [`TaskHandle::write`] waits for a command that is not reading
/// its stdin before it says so.
const WRITE_WAIT: Duration = Duration::from_secs(2);

/// Why a write to a task's stdin did not go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The task was started without an open stdin.
    #[error("the task's stdin is not open (start it with openStdin)")]
    NotOpen,
    /// Its stdin was closed, or the task ended.
    #[error("the task's stdin is closed (closed by a write with eof, or the task ended)")]
    Closed,
    /// The command has not read what was written before.
    #[error("the command is not reading its stdin (earlier writes still wait)")]
    NotReading,
}

/// A handle on one task. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TaskHandle(Arc<Task>);

impl TaskHandle {
    /// The task's id.
    ///
    /// ```no_run
    /// # async fn demo(host: cordon::Host) -> Result<(), cordon::RunError> {
    /// let task = host.start(cordon::ExecRequest::new("make")).await?;
    /// println!("started task {}", task.id());
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> TaskId {
        self.0.id
    }

    /// Consume and return the output produced since the previous read.
    ///
    /// ```no_run
    /// # async fn demo(task: cordon::TaskHandle) {
    /// loop {
    ///     let read = task.read(); // only what is new since the last read
    ///     print!("{}", read.text);
    ///     if read.status != cordon::TaskStatus::Running {
    ///         break;
    ///     }
    ///     tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    /// }
    /// # }
    /// ```
    pub fn read(&self) -> TaskRead {
        let task = &self.0;
        let status = lock(&task.state).status;
        // While it runs, a half-written UTF-8 character waits for the next read.
        let running = status == TaskStatus::Running;
        let out = lock(&task.stdout).read_delta(running);
        let err = lock(&task.stderr).read_delta(running);
        let notice = lock(&task.state).ending.notice.take();
        let mut stdout = String::from_utf8_lossy(&out.bytes).into_owned();
        let mut stderr = String::from_utf8_lossy(&err.bytes).into_owned();
        if let Some(notice) = notice {
            stderr.push_str(&notice);
        }
        if !stderr.is_empty() {
            if !stdout.is_empty() && !stdout.ends_with('\n') {
                stdout.push('\n');
            }
            stdout.push_str("[stderr]\n");
            stdout.push_str(&stderr);
        }
        let lossy = out.lossy || err.lossy;
        let spill_paths = if lossy {
            [&task.stdout, &task.stderr]
                .iter()
                .filter_map(|c| lock(c).spill().map(|s| s.path().to_path_buf()))
                .collect()
        } else {
            vec![]
        };
        TaskRead {
            text: stdout,
            lossy,
            spill_paths,
            status,
            awaiting_input: self.awaiting_input(),
        }
    }

    /// Kill the task's process group. True only for the first kill of a
    /// running task.
    ///
    /// ```no_run
    /// # async fn demo(task: cordon::TaskHandle) {
    /// if task.kill() {
    ///     let done = task.wait(None).await;
    ///     assert_eq!(done.status, cordon::TaskStatus::Killed);
    /// }
    /// # }
    /// ```
    pub fn kill(&self) -> bool {
        let running = lock(&self.0.state).status == TaskStatus::Running;
        if !running || self.0.kill.is_cancelled() {
            return false;
        }
        self.0.kill.cancel();
        true
    }

    /// Write `bytes` to the task's stdin (one started with `open_stdin`,
    /// or its terminal's input with `tty`); `eof` ends it after them —
    /// closes the pipe, or on a terminal sends its end-of-file character
    /// (`^D`). Waits a bounded time for a command that is not reading.
    ///
    /// ```no_run
    /// # async fn demo(session: cordon::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut request = cordon::ExecRequest::new("read a; echo got $a");
    /// request.open_stdin = true;
    /// let task = session.start(request).await?;
    /// task.write(b"yes\n", true).await?;
    /// # Ok(()) }
    /// ```
    pub async fn write(&self, bytes: &[u8], eof: bool) -> Result<(), WriteError> {
        let sender = lock(&self.0.stdin).clone();
        let Some(sender) = sender else {
            return Err(match self.0.opened {
                true => WriteError::Closed,
                false => WriteError::NotOpen,
            });
        };
        if !bytes.is_empty() {
            match tokio::time::timeout(WRITE_WAIT, sender.send(bytes.to_vec())).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(WriteError::Closed),
                Err(_) => return Err(WriteError::NotReading),
            }
        }
        if eof {
            lock(&self.0.stdin).take();
        }
        Ok(())
    }

    /// The task's state now.
    ///
    /// ```no_run
    /// # fn demo(task: cordon::TaskHandle) {
    /// let now = task.snapshot();
    /// println!("{:?} exit {:?}", now.status, now.exit_code);
    /// # }
    /// ```
    pub fn snapshot(&self) -> TaskSnapshot {
        let awaiting_input = self.awaiting_input();
        let state = lock(&self.0.state);
        TaskSnapshot {
            awaiting_input,
            id: self.0.id,
            command: self.0.command.clone(),
            status: state.status,
            exit_code: state.ending.exit_code,
            signal: state.ending.signal,
            timed_out: state.ending.timed_out,
            sandbox: state.ending.sandbox.clone(),
            grant: self.0.grant.clone(),
        }
    }

    /// Wait until the task has settled, or `bound` has passed; returns the
    /// state at that moment (still `running` when the bound passed first).
    ///
    /// ```no_run
    /// # async fn demo(task: cordon::TaskHandle) {
    /// let done = task.wait(Some(std::time::Duration::from_secs(30))).await;
    /// if done.status == cordon::TaskStatus::Running {
    ///     println!("still running after 30 s");
    /// }
    /// # }
    /// ```
    pub async fn wait(&self, bound: Option<Duration>) -> TaskSnapshot {
        let mut done = self.0.done.subscribe();
        let settled = done.wait_for(|settled| *settled);
        match bound {
            Some(bound) => {
                let _ = tokio::time::timeout(bound, settled).await;
            }
            None => {
                let _ = settled.await;
            }
        }
        self.snapshot()
    }

    /// The token a follower watches for kills.
    pub(crate) fn kill_token(&self) -> &CancellationToken {
        &self.0.kill
    }

    /// Record the spawned group (for shutdown) and what tells whether it
    /// waits on its stdin.
    pub(crate) fn set_group(&self, group: process::Group, input: Option<process::InputWatch>) {
        let mut state = lock(&self.0.state);
        state.group = Some(group);
        state.input = input;
    }

    /// Whether a process of the running task is seen waiting on its stdin
    /// (its watch is gone once it settled; read outside the state's lock:
    /// it walks `/proc`).
    fn awaiting_input(&self) -> bool {
        let input = lock(&self.0.state).input;
        input.is_some_and(|input| input.awaiting())
    }

    /// Stamp how the task ended, then wake every waiter — in that order.
    pub(crate) fn settle(&self, ending: TaskEnd) {
        {
            let mut state = lock(&self.0.state);
            state.status = ending.status;
            state.ending = ending;
            state.group = None;
            state.input = None;
        }
        lock(&self.0.stdin).take();
        self.0.done.send_replace(true);
    }
}

/// The tasks of one session, oldest first.
#[derive(Debug, Default)]
pub struct Tasks {
    tasks: Mutex<Vec<Registered>>,
}

/// A task in its registry, with what it holds against the host's bounds.
#[derive(Debug)]
struct Registered {
    handle: TaskHandle,
    /// The task's unit of `maxTasks` (released when it is removed).
    _slot: Option<Permit>,
}

impl Tasks {
    /// An empty registry.
    pub fn new() -> Self {
        Tasks::default()
    }

    /// Register a new running task for `command` with these captures,
    /// holding `slot` until it is removed.
    pub(crate) fn register(
        &self,
        command: String,
        grant: Option<GrantFacts>,
        stdout: Arc<Mutex<Capture>>,
        stderr: Arc<Mutex<Capture>>,
        slot: Option<Permit>,
        stdin: Option<tokio::sync::mpsc::Sender<Vec<u8>>>,
    ) -> TaskHandle {
        let handle = TaskHandle(Arc::new(Task {
            opened: stdin.is_some(),
            stdin: Mutex::new(stdin),
            id: TaskId::random(),
            command,
            grant,
            stdout,
            stderr,
            state: Mutex::new(State {
                status: TaskStatus::Running,
                ending: TaskEnd {
                    status: TaskStatus::Running,
                    exit_code: None,
                    signal: None,
                    timed_out: false,
                    sandbox: None,
                    notice: None,
                },
                group: None,
                input: None,
            }),
            kill: CancellationToken::new(),
            done: watch::channel(false).0,
        }));
        lock(&self.tasks).push(Registered {
            handle: handle.clone(),
            _slot: slot,
        });
        handle
    }

    /// The task with this id.
    pub fn get(&self, id: TaskId) -> Option<TaskHandle> {
        lock(&self.tasks)
            .iter()
            .find(|held| held.handle.id() == id)
            .map(|held| held.handle.clone())
    }

    /// Every task, oldest first.
    pub fn list(&self) -> Vec<TaskSnapshot> {
        lock(&self.tasks)
            .iter()
            .map(|held| held.handle.snapshot())
            .collect()
    }

    /// Forget a settled task (freeing its spill files). Returns false for an
    /// unknown or still running task.
    pub fn remove(&self, id: TaskId) -> bool {
        let mut tasks = lock(&self.tasks);
        let found = tasks.iter().position(|held| {
            held.handle.id() == id && lock(&held.handle.0.state).status != TaskStatus::Running
        });
        match found {
            Some(index) => {
                tasks.remove(index);
                true
            }
            None => false,
        }
    }

    /// Kill every running task and wait for each to settle.
    pub async fn shutdown(&self) {
        let running: Vec<TaskHandle> = lock(&self.tasks)
            .iter()
            .map(|held| held.handle.clone())
            .collect();
        for task in &running {
            task.kill();
        }
        for task in &running {
            task.wait(None).await;
        }
    }

    /// Move every task of `other` into this registry (after its own,
    /// oldest first), leaving `other` empty: a detached session's tasks
    /// re-attached to a new one. Each keeps the slot it was started with.
    pub fn absorb(&self, other: &Tasks) {
        let moved = std::mem::take(&mut *lock(&other.tasks));
        lock(&self.tasks).extend(moved);
    }

    /// Kill every running task, wait for each to settle, and forget them
    /// all (their spill files and slots go with them).
    pub async fn clear(&self) {
        self.shutdown().await;
        lock(&self.tasks).clear();
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        // No runtime to wait on here: SIGKILL whatever still runs.
        for task in lock(&self.tasks).iter().map(|held| &held.handle) {
            task.0.kill.cancel();
            if let Some(group) = &lock(&task.0.state).group {
                group.kill_now();
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
