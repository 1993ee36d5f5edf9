//! [`Session`]: what one client of a host owns — its background tasks, its
//! spill files, its share of the host's bounds, and (for a client the
//! operator ceilings apart) a narrower deployment.
//!
//! Why sessions: one host serves many clients (a server's connections, an
//! MCP client, an embedder's agents), and what one client starts must be
//! neither visible to nor outlive-able by another. A session sees only its
//! own tasks; ending it terminates exactly those. The policy, the sandbox
//! verdict and the deployment stay the host's, shared by every session, and
//! a `reload` of the host reaches every session's next run.
//!
//! * Task ids are 128 random bits ([`TaskId`]), so an id that leaks from
//!   one session to another names nothing there and none can be guessed.
//! * Every run and task counts against the host's [`SessionLimits`]
//!   (`admission.rs`); past a bound the call fails with `BUSY` at once.
//! * Spill files live in the session's own 0700 directory with a random
//!   name. A foreground result's spill files are the caller's while it
//!   holds the [`ExecResult`]; a surface that cannot hand the value over
//!   (a server writes JSON) [`retain`](Session::retain_spills)s it in the
//!   session until [`release`](Session::release_spill), the session's end,
//!   or [`expire_spills`](Session::expire_spills).

mod host_core;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::audit::Origin;
use crate::error::RunError;
use crate::model::{Deployment, ExecRequest, ExecResult};
use crate::process::identity::Identity;
use crate::process::spill::SpillDir;
use crate::run::{self, RunOptions, Verdict};
use crate::tasks::{TaskHandle, TaskId, TaskSnapshot, Tasks};

pub use crate::admission::{Load, SessionLimits};
use crate::admission::{SessionCount, SessionCounts};
pub(crate) use host_core::HostCore;

/// One client's view of a host: runs, and the background tasks it started.
///
/// Dropping a session `SIGKILL`s its live task groups;
/// [`Session::shutdown`] terminates them with the kill grace first.
pub struct Session {
    core: Arc<HostCore>,
    tasks: Tasks,
    spill_dir: Arc<SpillDir>,
    counts: SessionCounts,
    /// The deployment this session's runs get: the host's, or narrower.
    deployment: Option<Arc<Deployment>>,
    /// Foreground results kept for their spill files (see the module docs).
    retained: Mutex<Vec<Retained>>,
    /// The session id and peer its audit records name.
    origin: Arc<Origin>,
    /// Whom its runs' processes are (none: the host's own user).
    identity: Option<Arc<Identity>>,
    /// The runner kept for its next run, when its host keeps spares.
    spare: Option<Arc<run::ahead::Spare>>,
    _count: SessionCount,
}

/// A result kept for its spill files.
struct Retained {
    result: ExecResult,
    since: Instant,
}

impl Retained {
    fn names(&self, path: &Path) -> bool {
        self.paths().any(|have| have == path)
    }

    fn paths(&self) -> impl Iterator<Item = &Path> {
        let result = &self.result;
        [&result.stdout.spill_path, &result.stderr.spill_path]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
    }
}

impl Session {
    /// A fresh session of the host behind `core`.
    pub(crate) fn new(core: Arc<HostCore>) -> Self {
        Session {
            tasks: Tasks::new(),
            spill_dir: SpillDir::under(&core.spill_parent),
            counts: SessionCounts::default(),
            deployment: None,
            retained: Mutex::default(),
            origin: Arc::new(Origin::new("library")),
            identity: None,
            spare: core.spare_runners.then(Default::default),
            _count: core.admission.session_opened(),
            core,
        }
    }

    /// This session with a narrower deployment than its host's (e.g. the
    /// operator's ceiling for one client's uid). The caller checks that
    /// `deployment` is within the host's ([`Deployment::narrowed`]).
    pub(crate) fn with_deployment(mut self, deployment: Deployment) -> Self {
        self.deployment = Some(Arc::new(deployment));
        self
    }

    /// This session with its audit records naming `peer` (how the
    /// transport knows the client: `stdio`, `uid 1000 gid 1000 pid 42`).
    pub fn with_peer(mut self, peer: impl Into<String>) -> Self {
        let approver = self.origin.approver;
        self.origin = Arc::new(Origin::new(peer).approved_through(approver));
        self
    }

    /// This session with its audit records saying an approval came through
    /// `approver` (`flag`, `elicitation`, `client`; default `caller`).
    pub fn approved_through(mut self, approver: &'static str) -> Self {
        self.origin = Arc::new((*self.origin).clone().approved_through(approver));
        self
    }

    /// Record a `reload` of `source` from this session in the host's audit
    /// log (when it keeps one): carried out (the policy now in force) or
    /// refused (why).
    pub fn audit_reload(
        &self,
        source: &str,
        outcome: Result<crate::policy::PolicyIdentity, String>,
    ) {
        if let Some(log) = &self.core.audit {
            let _ = log.write(crate::audit::Record::reload(&self.origin, source, outcome));
        }
    }

    /// Name the client (an MCP client's `name version`) in this session's
    /// audit records from now on; the first name given stays.
    pub fn name_client(&self, client: impl FnOnce() -> String) {
        if self.origin.client.get().is_none() {
            let _ = self.origin.client.set(client());
        }
    }

    /// This session with its runs' processes being `identity` (a root
    /// server's socket client runs as that client). An identity this
    /// process already is changes nothing.
    pub fn with_identity(mut self, identity: Identity) -> Self {
        self.identity = (!identity.is_this_process()).then(|| Arc::new(identity));
        self
    }

    /// Whom this session's runs' processes are, when not the host's user.
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_deref()
    }

    /// The deployment this session's runs get (the host's, or narrower).
    pub fn deployment(&self) -> Deployment {
        let deployment = self.deployment.as_ref().unwrap_or(&self.core.deployment);
        Deployment::clone(deployment)
    }

    fn context(&self) -> run::RunContext {
        let mut cx = self.core.run_context(&self.spill_dir, &self.origin);
        cx.identity = self.identity.clone();
        cx.spare = self.spare.clone();
        if let Some(deployment) = &self.deployment {
            cx.deployment = deployment.clone();
        }
        cx
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
    /// `BUSY` when a bound of the host is reached.
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
        let _run = self.core.admission.run(&self.counts)?;
        run::run(&self.context(), request, options).await
    }

    /// What a run of `request` would meet — the ceiling, the policy's
    /// decision, the host's checks of the grant — with nothing spawned: a
    /// refusal is the error the run would be refused with. What asks a
    /// person before a wider grant (MCP's escalation) checks with it first.
    pub async fn check(&self, request: ExecRequest) -> Result<Verdict, RunError> {
        run::check(&self.context(), request).await
    }

    /// Start `request` as a background task of this session and return its
    /// handle once it is spawned. Must be called within a tokio runtime.
    /// `BUSY` when a bound of the host is reached.
    ///
    /// ```no_run
    /// # async fn demo(session: cordon::Session) -> Result<(), cordon::RunError> {
    /// let task = session.start(cordon::ExecRequest::new("make -j2")).await?;
    /// let done = task.wait(None).await;
    /// println!("{:?}", done.status);
    /// # Ok(()) }
    /// ```
    pub async fn start(&self, request: ExecRequest) -> Result<TaskHandle, RunError> {
        let slot = self.core.admission.task(&self.counts)?;
        let running = self.core.admission.run(&self.counts)?;
        run::start(&self.context(), &self.tasks, request, slot, running).await
    }

    /// What an agent's model is told of `told` for `command`, from the
    /// active policy component's `render` export (on the policy pool);
    /// none when it does not render (the caller's default text applies).
    pub async fn render(
        &self,
        command: &str,
        told: &crate::model::Told,
    ) -> Result<Option<String>, RunError> {
        let cx = self.context();
        if !cx.policy.renders() {
            return Ok(None);
        }
        let (command, told) = (command.to_owned(), told.clone());
        cx.offload(crate::policy::Phase::Render, move |cx| {
            cx.policy.render(&command, &told)
        })
        .await
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

    /// Keep `result`'s spill files (if it has any) until
    /// [`release_spill`](Session::release_spill) names one of them, the
    /// session ends, or [`expire_spills`](Session::expire_spills) finds it
    /// older than its bound. For a surface that hands out only the paths.
    pub fn retain_spills(&self, result: ExecResult) {
        if result.stdout.spill_path.is_none() && result.stderr.spill_path.is_none() {
            return;
        }
        let mut retained = self.retained.lock().unwrap_or_else(|p| p.into_inner());
        retained.push(Retained {
            result,
            since: Instant::now(),
        });
    }

    /// Release the retained result whose spill file is `path` (both of its
    /// streams' files are deleted). False when no retained result of this
    /// session names `path`.
    pub fn release_spill(&self, path: &Path) -> bool {
        let mut retained = self.retained.lock().unwrap_or_else(|p| p.into_inner());
        let before = retained.len();
        retained.retain(|kept| !kept.names(path));
        retained.len() != before
    }

    /// Release every retained result older than `ttl`; how many.
    pub fn expire_spills(&self, ttl: Duration) -> usize {
        let mut retained = self.retained.lock().unwrap_or_else(|p| p.into_inner());
        let before = retained.len();
        retained.retain(|kept| kept.since.elapsed() < ttl);
        before - retained.len()
    }

    /// Take every task out of this session, to be re-attached to another
    /// with [`Session::adopt`] (they keep running; nothing kills them but
    /// the holder of the returned registry, or its drop).
    pub fn detach_tasks(&self) -> Tasks {
        let detached = Tasks::new();
        detached.absorb(&self.tasks);
        detached
    }

    /// Make `tasks` (from [`Session::detach_tasks`]) this session's own.
    /// They still count against the bounds of the session that started
    /// them until they are removed.
    pub fn adopt(&self, tasks: &Tasks) {
        self.tasks.absorb(tasks);
    }

    /// End the session's work: terminate every live task group (with the
    /// kill grace) and wait for each task to settle. Other sessions of the
    /// host are untouched.
    pub async fn shutdown(&self) {
        self.tasks.shutdown().await;
    }

    /// End the session entirely: [`shutdown`](Session::shutdown), then
    /// forget every task and retained result, deleting their spill files.
    pub async fn close(&self) {
        self.tasks.clear().await;
        self.retained
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}
