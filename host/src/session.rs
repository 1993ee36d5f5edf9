//! [`Session`]: what one client of a host owns — its background tasks, its
//! spill files, and (as limits land) its share of the host.
//!
//! Why sessions: one host serves many clients (a server's connections, an
//! MCP client, an embedder's agents), and what one client starts must be
//! neither visible to nor outlive-able by another. A session sees only its
//! own tasks; ending it terminates exactly those. The policy, the sandbox
//! verdict and the deployment stay the host's, shared by every session, and
//! a `reload` of the host reaches every session's next run.
//!
//! Task ids are unique across the host (not only within a session), so an
//! id that leaks from one session to another names nothing there.

use std::sync::Arc;

use crate::RunError;
use crate::host::HostCore;
use crate::model::{ExecRequest, ExecResult};
use crate::process::spill::SpillDir;
use crate::run::{self, RunOptions};
use crate::tasks::{TaskHandle, TaskId, TaskSnapshot, Tasks};

/// One client's view of a host: runs, and the background tasks it started.
///
/// Dropping a session `SIGKILL`s its live task groups;
/// [`Session::shutdown`] terminates them with the kill grace first.
pub struct Session {
    core: Arc<HostCore>,
    tasks: Tasks,
    spill_dir: Arc<SpillDir>,
}

impl Session {
    /// A fresh session of the host behind `core`.
    pub(crate) fn new(core: Arc<HostCore>) -> Self {
        Session {
            tasks: Tasks::with_ids(core.task_ids.clone()),
            spill_dir: SpillDir::under(&core.spill_parent),
            core,
        }
    }

    /// Run `request` in the foreground and return its result.
    ///
    /// ```no_run
    /// # async fn demo(host: cordon::Host) -> Result<(), cordon::RunError> {
    /// let session = host.session();
    /// let result = session.run(cordon::ExecRequest::new("git status")).await?;
    /// println!("{}", result.stdout.text);
    /// # Ok(()) }
    /// ```
    pub async fn run(&self, request: ExecRequest) -> Result<ExecResult, RunError> {
        self.run_with(request, RunOptions::default()).await
    }

    /// Run `request` with per-run options (streaming output, an abort token).
    ///
    /// ```no_run
    /// # async fn demo(session: cordon::Session) -> Result<(), cordon::RunError> {
    /// use cordon::{CancellationToken, ExecRequest, RunOptions};
    /// let abort = CancellationToken::new();
    /// let options = RunOptions { sink: None, abort: Some(abort.clone()) };
    /// let result = session.run_with(ExecRequest::new("sleep 5"), options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run_with(
        &self,
        request: ExecRequest,
        options: RunOptions,
    ) -> Result<ExecResult, RunError> {
        run::run(&self.core.run_context(&self.spill_dir), request, options).await
    }

    /// Start `request` as a background task of this session and return its
    /// handle at once. Must be called within a tokio runtime.
    ///
    /// ```no_run
    /// # async fn demo(session: cordon::Session) -> Result<(), cordon::RunError> {
    /// let task = session.start(cordon::ExecRequest::new("make -j2"))?;
    /// let done = task.wait(None).await;
    /// println!("{:?}", done.status);
    /// # Ok(()) }
    /// ```
    pub fn start(&self, request: ExecRequest) -> Result<TaskHandle, RunError> {
        run::start(
            &self.core.run_context(&self.spill_dir),
            &self.tasks,
            request,
        )
    }

    /// This session's task with this id (none for another session's).
    pub fn task(&self, id: TaskId) -> Option<TaskHandle> {
        self.tasks.get(id)
    }

    /// Every task of this session, oldest first.
    pub fn tasks(&self) -> Vec<TaskSnapshot> {
        self.tasks.list()
    }

    /// Forget a settled task, freeing its spill files. False for an
    /// unknown or running task, or another session's.
    pub fn remove_task(&self, id: TaskId) -> bool {
        self.tasks.remove(id)
    }

    /// End the session's work: terminate every live task group (with the
    /// kill grace) and wait for each task to settle. Other sessions of the
    /// host are untouched.
    pub async fn shutdown(&self) {
        self.tasks.shutdown().await;
    }
}
