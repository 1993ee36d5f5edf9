//! `cordon serve`: the host as a long-lived JSON-RPC 2.0 server over byte
//! streams — stdio (one connection) or a Unix socket (many; `listen.rs`) —
//! one request or batch per line.
//!
//! Why a server: agent platforms written in TypeScript, Python or Go drive
//! one cordon process for many sessions instead of paying a process start
//! (and a probe) per command. Everything a method does is a call on the
//! connection's [`Session`] (or, for `probe` and `reload`, its [`Host`]);
//! this module only frames, bounds, dispatches and renders ([`protocol`]
//! has the wire types and error mapping, `docs/protocol.md` the contract).
//!
//! * Each connection is a session of the host: it sees only the tasks it
//!   started, and its end ends those tasks and deletes its spill files —
//!   not the host's, and not another connection's.
//! * Every request is handled in its own task, so a slow `run` never holds
//!   up a `read`; responses are written whole, one per line, as they finish
//!   (match them by `id`, echoed byte for byte).
//! * **Bounded.** A connection has at most [`ServeOptions::max_in_flight`]
//!   lines read and not yet answered, and at most
//!   [`ServeOptions::max_queued_replies`] replies written to it and not yet
//!   taken by its client: when the client stops reading replies, the
//!   server stops reading its requests (the client's writes block) and
//!   other connections are unaffected. Lines longer than
//!   `max_request_bytes` and batches longer than `max_batch` are refused;
//!   runs and tasks past the host's bounds are `BUSY`.
//! * A foreground result's spill files stay until the client `release`s
//!   them, the connection ends, or `spill_ttl` passes.
//! * EOF on the input or the `shutdown` method end the connection
//!   gracefully: no further line is read, requests already read are
//!   answered (a foreground run finishes, within its timeout), the session's
//!   live background tasks are killed (grace escalation) and settled, every
//!   response is flushed, and the connection's serve returns.
//! * [`Server::stopper`] (the CLI cancels it on `SIGINT`/`SIGTERM`) ends
//!   every connection at once: the same, except that foreground runs in
//!   flight are aborted too, and replies get [`FLUSH_BOUND`] to be written
//!   to a client that is not reading.

mod lines;
pub mod listen;
mod parking;
pub mod protocol;
pub mod schema;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::host::{Host, PolicySource};
use crate::registry::PolicyRef;
use crate::run::RunOptions;
use crate::session::Session;
use crate::tasks::TaskHandle;
use lines::{Line, LineReader};
pub use listen::{Access, Peer};
use protocol::{
    AttachParams, AttachResult, DetachResult, Empty, Envelope, KillResult, ListResult, NoParams,
    ProbeResult, ReleaseParams, ReleaseResult, ReloadParams, ReloadResult, RemoveResult, RpcError,
    RunParams, ServerStatus, StartResult, TaskParams, WaitParams, WriteParams, WriteResult, params,
};

/// How long replies get to be written once the server is stopping.
pub const FLUSH_BOUND: Duration = Duration::from_secs(5);

/// The operator's bounds and rules of a server (`[serve]` in `cordon.toml`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServeOptions {
    /// The longest request line accepted, in bytes.
    pub max_request_bytes: usize,
    /// The most requests one batch may hold.
    pub max_batch: usize,
    /// Lines one connection may have read and not yet answered (a long
    /// `wait` counts until it returns).
    pub max_in_flight: usize,
    /// Replies one connection may have queued and not yet written to a
    /// client that is not reading; at the bound, no more of its lines are
    /// read.
    pub max_queued_replies: usize,
    /// Connections a socket listener serves at once.
    pub max_connections: usize,
    /// How long a foreground result's spill files are kept unreleased.
    #[serde(rename = "spillTtlSecs", serialize_with = "seconds")]
    #[schemars(with = "u64")]
    pub spill_ttl: Duration,
    /// Whether and from where `reload` may load a component.
    pub reload: ReloadRule,
    /// How long a detached connection's tasks wait to be re-attached
    /// (none: `detach` is off, and a connection's end kills its tasks).
    #[serde(
        rename = "detachTtlSecs",
        serialize_with = "some_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<u64>")]
    pub detach_ttl: Option<Duration>,
}

fn seconds<S: serde::Serializer>(ttl: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(ttl.as_secs())
}

fn some_seconds<S: serde::Serializer>(ttl: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match ttl {
        Some(ttl) => s.serialize_some(&ttl.as_secs()),
        None => s.serialize_none(),
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            max_request_bytes: 16 << 20,
            max_batch: 256,
            max_in_flight: 256,
            max_queued_replies: 32,
            max_connections: 256,
            spill_ttl: Duration::from_secs(3600),
            reload: ReloadRule::Any,
            detach_ttl: None,
        }
    }
}

/// Whether `reload` may replace the policy component.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReloadRule {
    /// From any file the server can read (stdio's default: its one client
    /// is the one who started it).
    Any,
    /// Never (a socket listener's default: one client would swap the
    /// policy of every other).
    Off,
    /// Only a component inside this directory (after resolving symlinks).
    Under(PathBuf),
}

impl ReloadRule {
    /// The rule when the operator names none: any over stdio (its one
    /// client started the server), off on a socket (one client would swap
    /// the policy of every other).
    pub fn default_for(socket: bool) -> ReloadRule {
        match socket {
            true => ReloadRule::Off,
            false => ReloadRule::Any,
        }
    }

    /// May a registry reference be loaded? Only where any file may: a
    /// directory rule names files, and a socket's default is off.
    fn admits_reference(&self) -> Result<(), RpcError> {
        match self {
            ReloadRule::Any => Ok(()),
            ReloadRule::Off => self.admits(Path::new("")),
            ReloadRule::Under(dir) => Err(RpcError::forbidden(format!(
                "reload may load component files from {} only, not registry references \
                 (the operator sets [serve] reload = \"any\" to allow them)",
                dir.display()
            ))),
        }
    }

    /// May `path` be loaded? The error says why not.
    fn admits(&self, path: &Path) -> Result<(), RpcError> {
        match self {
            ReloadRule::Any => Ok(()),
            ReloadRule::Off => Err(RpcError::forbidden(
                "reload is turned off on this server; the operator sets [serve] reload",
            )),
            ReloadRule::Under(dir) => {
                let real = std::fs::canonicalize(path).map_err(|err| {
                    RpcError::invalid_params("path", format!("{}: {err}", path.display()))
                })?;
                let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
                match real.starts_with(&dir) {
                    true => Ok(()),
                    false => Err(RpcError::forbidden(format!(
                        "reload may load components from {} only; {} is outside it",
                        dir.display(),
                        real.display()
                    ))),
                }
            }
        }
    }
}

/// A JSON-RPC server over one [`Host`]: each connection it serves gets a
/// [`Session`] of its own, ended with the connection.
pub struct Server {
    host: Arc<Host>,
    options: ServeOptions,
    /// Cancelled to stop every connection at once (aborting foreground runs).
    stop: CancellationToken,
    /// Connections being served now.
    connections: Arc<AtomicUsize>,
    /// What a socket listener admits (for `probe`).
    access: Option<Access>,
    /// Detached connections' tasks, by attach token.
    parking: Arc<parking::Parking>,
}

impl Server {
    /// A server for `host` with the default [`ServeOptions`].
    ///
    /// ```no_run
    /// # async fn demo() -> anyhow::Result<()> {
    /// use std::sync::Arc;
    /// let host = Arc::new(cordon::Host::builder().build()?);
    /// cordon::serve::Server::new(host)
    ///     .serve(tokio::io::stdin(), tokio::io::stdout())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn new(host: Arc<Host>) -> Self {
        Server::with_options(host, ServeOptions::default())
    }

    /// A server for `host` with the operator's `options`.
    pub fn with_options(host: Arc<Host>, options: ServeOptions) -> Self {
        Server {
            host,
            options,
            stop: CancellationToken::new(),
            connections: Arc::new(AtomicUsize::new(0)),
            access: None,
            parking: Arc::default(),
        }
    }

    /// Kill every detached connection's tasks (call when the server stops;
    /// a socket listener does it itself).
    pub async fn clear_detached(&self) {
        self.parking.clear().await;
    }

    /// The server's options.
    pub fn options(&self) -> &ServeOptions {
        &self.options
    }

    /// A token that stops the server at once when cancelled (e.g. on
    /// `SIGTERM`): every connection ends, foreground runs in flight are
    /// aborted, tasks killed.
    pub fn stopper(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Serve one connection in a new session of the host (see
    /// [`Server::serve_session`]).
    ///
    /// ```no_run
    /// # async fn demo(server: std::sync::Arc<cordon::serve::Server>) {
    /// let (client_a, server_a) = tokio::io::duplex(1 << 16);
    /// let (read_a, write_a) = tokio::io::split(server_a);
    /// let serving = server.clone();
    /// tokio::spawn(async move { serving.serve(read_a, write_a).await });
    /// // … a second connection gets a session of its own the same way.
    /// # drop(client_a);
    /// # }
    /// ```
    pub async fn serve<R, W>(&self, input: R, output: W) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let session = self.host.session().with_peer("stdio");
        self.serve_session(session.approved_through("client"), None, input, output)
            .await
    }

    /// The end of a connection's session (the module docs say how): its
    /// runs cancelled when the server stops, its tasks parked when it
    /// detached, else killed; the replies in flight answered (bounded when
    /// stopping); then the session closed.
    async fn end_session(
        &self,
        connection: &Arc<Connection>,
        mut handlers: JoinSet<()>,
        stopping: bool,
    ) {
        if stopping {
            connection.runs.cancel();
        }
        // A detached connection's tasks wait for their client to come back
        // (unless the whole server is stopping).
        let token = connection
            .detached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match (token, self.options.detach_ttl, stopping) {
            (Some(token), Some(ttl), false) => {
                let uid = connection.peer.as_ref().map(|peer| peer.uid);
                self.parking
                    .park(token, connection.session.detach_tasks(), uid, ttl);
            }
            (Some(token), _, _) => self.parking.drop_pending(&token),
            (None, _, _) => {}
        }
        // Kill the session's tasks first: a `wait` in flight returns once
        // they settle.
        connection.session.shutdown().await;
        let answered = async { while handlers.join_next().await.is_some() {} };
        if stopping {
            if tokio::time::timeout(FLUSH_BOUND, answered).await.is_err() {
                handlers.abort_all();
            }
        } else {
            answered.await;
        }
        // And any task a `start` in flight began meanwhile; then forget
        // them all, with their spill files and the retained results'.
        connection.session.close().await;
    }

    /// Serve one connection: requests from `input`, responses to `output`,
    /// in `session`, until EOF, `shutdown` or the stopper; then end the
    /// session as the module docs say. `peer` is who is on the other end,
    /// when known (a socket's credentials). Errors only when `output` fails.
    ///
    /// Several connections may be served at once (share the server in an
    /// `Arc`). Must run inside a tokio runtime; a multi-threaded one lets
    /// requests proceed in parallel.
    pub async fn serve_session<R, W>(
        &self,
        session: Session,
        peer: Option<Peer>,
        input: R,
        output: W,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let _connection = Counted::new(&self.connections);
        let connection = Arc::new(Connection {
            host: self.host.clone(),
            session,
            peer,
            options: self.options.clone(),
            connections: self.connections.clone(),
            access: self.access.clone(),
            parking: self.parking.clone(),
            detached: std::sync::Mutex::new(None),
            drain: CancellationToken::new(),
            runs: CancellationToken::new(),
        });
        let in_flight = Arc::new(Semaphore::new(self.options.max_in_flight.max(1)));
        let room = Arc::new(Semaphore::new(self.options.max_queued_replies.max(1)));
        let (replies, pending) = mpsc::unbounded_channel::<Reply>();
        let writer = tokio::spawn(write_lines(output, pending));
        let sweeper = tokio::spawn(sweep_spills(connection.clone()));
        let mut handlers = JoinSet::new();
        let mut lines = LineReader::new(input, self.options.max_request_bytes);
        loop {
            // Back-pressure: no line is read while the connection has its
            // most lines unanswered…
            let permit = tokio::select! {
                biased;
                () = self.stop.cancelled() => break,
                () = connection.drain.cancelled() => break,
                permit = in_flight.clone().acquire_owned() => permit.expect("never closed"),
            };
            // …nor while its client is not taking the replies already written.
            tokio::select! {
                biased;
                () = self.stop.cancelled() => break,
                () = connection.drain.cancelled() => break,
                slot = room.acquire() => drop(slot.expect("never closed")),
            }
            let line = tokio::select! {
                biased;
                () = self.stop.cancelled() => break,
                () = connection.drain.cancelled() => break,
                line = lines.next() => line,
            };
            match line {
                // EOF, or the input failed: either way nobody is sending.
                None | Some(Err(_)) => break,
                Some(Ok(Line::TooLong)) => {
                    let error = RpcError::too_large(self.options.max_request_bytes);
                    let slot = room.clone().acquire_owned().await.expect("never closed");
                    drop(permit);
                    let _ = replies.send(Reply(protocol::failure(None, error), slot));
                }
                Some(Ok(Line::Text(bytes))) => {
                    if bytes.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let connection = connection.clone();
                    let replies = replies.clone();
                    let room = room.clone();
                    handlers.spawn(async move {
                        if let Some(reply) = connection.handle_line(&bytes).await {
                            // Waits while the client is not reading.
                            let slot = room.acquire_owned().await.expect("never closed");
                            drop(permit);
                            let _ = replies.send(Reply(reply, slot));
                        }
                    });
                }
            }
            while handlers.try_join_next().is_some() {}
        }
        let stopping = self.stop.is_cancelled();
        self.end_session(&connection, handlers, stopping).await;
        // Awaited, so the sweeper's hold on the host is gone before this
        // returns (a host dropped late leaves its staged cgroups behind).
        sweeper.abort();
        let _ = sweeper.await;
        drop(replies);
        let mut writer = writer;
        let written = match stopping {
            true => tokio::time::timeout(FLUSH_BOUND, &mut writer).await,
            false => Ok((&mut writer).await),
        };
        match written {
            Ok(done) => done.map_err(io::Error::other)?,
            // A client that does not read while the server stops: its
            // replies are dropped, and so is the writer blocked on it.
            Err(_) => {
                writer.abort();
                Ok(())
            }
        }
    }
}

/// A reply line and the unit of the connection's reply queue it frees once
/// written.
struct Reply(String, OwnedSemaphorePermit);

/// One unit of a counter, given back on drop.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Counted(counter.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection: its session, and the tokens that end it.
struct Connection {
    host: Arc<Host>,
    session: Session,
    peer: Option<Peer>,
    options: ServeOptions,
    connections: Arc<AtomicUsize>,
    access: Option<Access>,
    parking: Arc<parking::Parking>,
    /// The attach token `detach` gave: the connection's end parks its tasks.
    detached: std::sync::Mutex<Option<String>>,
    /// Cancelled by the `shutdown` method: stop reading, answer the rest.
    drain: CancellationToken,
    /// Parent of every foreground run's abort token.
    runs: CancellationToken,
}

impl Connection {
    /// One line: a request or a batch. None when nothing is to be sent
    /// (notifications only).
    async fn handle_line(self: &Arc<Self>, bytes: &[u8]) -> Option<String> {
        let line: &RawValue = match serde_json::from_slice(bytes) {
            Ok(line) => line,
            Err(err) => return Some(protocol::failure(None, RpcError::parse_error(err))),
        };
        if !line.get().starts_with('[') {
            return self.handle_request(line).await;
        }
        let batch: Vec<&RawValue> = serde_json::from_str(line.get()).unwrap_or_default();
        if batch.is_empty() {
            return Some(protocol::failure(
                None,
                RpcError::invalid_request("an empty batch"),
            ));
        }
        if batch.len() > self.options.max_batch {
            return Some(protocol::failure(
                None,
                RpcError::batch_too_large(batch.len(), self.options.max_batch),
            ));
        }
        let mut calls = JoinSet::new();
        for (index, request) in batch.into_iter().enumerate() {
            let connection = self.clone();
            let request = request.to_owned();
            calls.spawn(async move { (index, connection.handle_request(&request).await) });
        }
        let mut replies = Vec::new();
        while let Some(done) = calls.join_next().await {
            if let Ok((index, Some(reply))) = done {
                replies.push((index, reply));
            }
        }
        replies.sort_by_key(|(index, _)| *index);
        let replies: Vec<String> = replies.into_iter().map(|(_, reply)| reply).collect();
        (!replies.is_empty()).then(|| format!("[{}]", replies.join(",")))
    }

    /// One request object; None for a notification.
    async fn handle_request(self: &Arc<Self>, request: &RawValue) -> Option<String> {
        let envelope: Envelope = match serde_json::from_str(request.get()) {
            Ok(envelope) => envelope,
            Err(_) => {
                return Some(protocol::failure(
                    None,
                    RpcError::invalid_request("a request must be a JSON object"),
                ));
            }
        };
        let id = match envelope.id() {
            Ok(id) => id,
            Err(error) => return Some(protocol::failure(None, error)),
        };
        if envelope.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
            let error = RpcError::invalid_request("\"jsonrpc\" must be \"2.0\"");
            return Some(protocol::failure(id, error));
        }
        let Some(Value::String(method)) = &envelope.method else {
            let error = RpcError::invalid_request("\"method\" must be a string");
            return Some(protocol::failure(id, error));
        };
        let outcome = self.dispatch(method, envelope.params.clone()).await;
        // A request without an id is a notification: never answered.
        let id = id?;
        Some(match outcome {
            Ok(result) => protocol::success(id, &result),
            Err(error) => protocol::failure(Some(id), error),
        })
    }

    async fn dispatch(&self, method: &str, raw: Option<Value>) -> Result<Value, RpcError> {
        match method {
            "run" => self.run(raw).await,
            "start" => {
                let request = params::<RunParams>(raw)?.into_request()?;
                let handle = self.session.start(request).await?;
                to_value(&StartResult {
                    task_id: handle.id(),
                })
            }
            "read" => to_value(&self.task(params::<TaskParams>(raw)?.task_id)?.read()),
            "write" => {
                let write = params::<WriteParams>(raw)?;
                let task = self.task(write.task_id)?;
                task.write(write.data.as_bytes(), write.eof)
                    .await
                    .map_err(|error| RpcError::stdin(write.task_id, error))?;
                to_value(&WriteResult {
                    written: write.data.len(),
                })
            }
            "kill" => {
                let task = self.task(params::<TaskParams>(raw)?.task_id)?;
                to_value(&KillResult {
                    killed: task.kill(),
                })
            }
            "wait" => {
                let wait = params::<WaitParams>(raw)?;
                let task = self.task(wait.task_id)?;
                to_value(&task.wait(wait.timeout_ms.map(Duration::from_millis)).await)
            }
            "list" => {
                params::<NoParams>(raw)?;
                to_value(&ListResult {
                    tasks: self.session.tasks(),
                    server: self.status(),
                })
            }
            "remove" => {
                let id = params::<TaskParams>(raw)?.task_id;
                self.task(id)?;
                to_value(&RemoveResult {
                    removed: self.session.remove_task(id),
                })
            }
            "release" => {
                let path = params::<ReleaseParams>(raw)?.spill_path;
                match self.session.release_spill(&path) {
                    true => to_value(&ReleaseResult { released: true }),
                    false => Err(RpcError::unknown_spill(&path)),
                }
            }
            "detach" => self.detach(raw),
            "attach" => self.attach(raw).await,
            "probe" => self.probe(raw).await,
            "reload" => self.reload(raw).await,
            "shutdown" => {
                params::<NoParams>(raw)?;
                self.drain.cancel();
                to_value(&Empty {})
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }

    /// `run`: a foreground run, its result rendered and its spills kept.
    async fn run(&self, raw: Option<Value>) -> Result<Value, RpcError> {
        let request = params::<RunParams>(raw)?.into_request()?;
        let options = RunOptions {
            sink: None,
            abort: Some(self.runs.child_token()),
        };
        let result = self.session.run_with(request, options).await?;
        let rendered = to_value(&result)?;
        self.session.retain_spills(result);
        Ok(rendered)
    }

    /// `detach`: a token that lets a later connection take this session's
    /// tasks (where the operator allows detaching).
    fn detach(&self, raw: Option<Value>) -> Result<Value, RpcError> {
        params::<NoParams>(raw)?;
        let Some(ttl) = self.options.detach_ttl else {
            return Err(RpcError::forbidden(
                "detached tasks are off on this server; the operator sets [serve] \
                 detach_ttl_secs",
            ));
        };
        let mut detached = self.detached.lock().unwrap_or_else(|p| p.into_inner());
        let token = detached
            .get_or_insert_with(|| {
                let token = parking::token();
                self.parking.reserve(&token);
                token
            })
            .clone();
        to_value(&DetachResult {
            attach_token: token,
            ttl_secs: ttl.as_secs(),
        })
    }

    /// `attach`: take the tasks a detached session parked under a token —
    /// once its connection has ended, which a client that reconnects at
    /// once may ask before the server has read (then it waits, bounded).
    async fn attach(&self, raw: Option<Value>) -> Result<Value, RpcError> {
        let token = params::<AttachParams>(raw)?.attach_token;
        let uid = self.peer.as_ref().map(|peer| peer.uid);
        let tasks = self
            .parking
            .claim_when_parked(&token, uid)
            .await
            .ok_or_else(RpcError::unknown_attach_token)?;
        self.session.adopt(&tasks);
        to_value(&AttachResult {
            tasks: self.session.tasks(),
        })
    }

    /// `probe`: the sandbox verdict, off the reactor.
    async fn probe(&self, raw: Option<Value>) -> Result<Value, RpcError> {
        params::<NoParams>(raw)?;
        let host = self.host.clone();
        // The first probe runs bounded child processes: off the reactor.
        let probe = tokio::task::spawn_blocking(move || host.probe())
            .await
            .map_err(RpcError::internal)?;
        to_value(&ProbeResult {
            probe,
            server: self.status(),
        })
    }

    /// `reload`: replace the policy component from a file or a registry;
    /// audited, whether it was carried out or refused.
    async fn reload(&self, raw: Option<Value>) -> Result<Value, RpcError> {
        let source = raw
            .as_ref()
            .and_then(|raw| raw.get("path").or_else(|| raw.get("reference")))
            .map_or_else(String::new, |source| match source.as_str() {
                Some(text) => text.to_owned(),
                None => source.to_string(),
            });
        let reloaded = self.reload_unaudited(raw).await;
        let outcome = match &reloaded {
            Ok(_) => Ok(self.host.policy_identity()),
            Err(error) => Err(crate::text::reason(&error.message)),
        };
        self.session.audit_reload(&source, outcome);
        reloaded
    }

    async fn reload_unaudited(&self, raw: Option<Value>) -> Result<Value, RpcError> {
        let source = match params::<ReloadParams>(raw)? {
            ReloadParams {
                path: Some(path),
                reference: None,
            } => {
                self.options.reload.admits(&path)?;
                PolicySource::File(path)
            }
            ReloadParams {
                path: None,
                reference: Some(reference),
            } => {
                self.options.reload.admits_reference()?;
                PolicySource::Registry(
                    PolicyRef::parse(&reference)
                        .map_err(|err| RpcError::invalid_params("reference", err))?,
                )
            }
            _ => {
                return Err(RpcError::invalid_params(
                    "path",
                    "give exactly one of path (a component file) or reference (oci://…)",
                ));
            }
        };
        let host = self.host.clone();
        // Compiling (or pulling) a component takes a while: off the reactor.
        let (info, identity) = tokio::task::spawn_blocking(move || {
            let info = host.reload(source)?;
            Ok::<_, crate::host::BuildError>((info, host.policy_identity()))
        })
        .await
        .map_err(RpcError::internal)??;
        to_value(&ReloadResult {
            info,
            world: identity.world,
            digest: identity.digest,
            reference: identity.reference,
        })
    }

    fn task(&self, id: crate::tasks::TaskId) -> Result<TaskHandle, RpcError> {
        self.session
            .task(id)
            .ok_or_else(|| RpcError::unknown_task(id))
    }

    /// The server's bounds and load, as `probe` and `list` show them.
    fn status(&self) -> ServerStatus {
        let (threads, busy) = self.host.policy_threads();
        ServerStatus {
            options: self.options.clone(),
            session_limits: self.host.session_limits(),
            load: self.host.load(),
            connections: self.connections.load(Ordering::Acquire),
            policy_threads: threads,
            policy_threads_busy: busy,
            peer: self.peer.clone(),
            access: self.access.clone(),
            detached: self.parking.len(),
        }
    }
}

fn to_value(value: &impl Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(RpcError::internal)
}

/// Release the connection's unreleased spills as they pass the TTL.
async fn sweep_spills(connection: Arc<Connection>) {
    let ttl = connection.options.spill_ttl;
    let every = (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        connection.session.expire_spills(ttl);
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(
    output: W,
    mut pending: mpsc::UnboundedReceiver<Reply>,
) -> io::Result<()> {
    let mut output = tokio::io::BufWriter::with_capacity(64 << 10, output);
    while let Some(Reply(mut line, permit)) = pending.recv().await {
        line.push('\n');
        output.write_all(line.as_bytes()).await?;
        // Flush when nothing else is ready: one write for a burst.
        if pending.is_empty() {
            output.flush().await?;
        }
        // Written (or buffered with the next flush due): the connection
        // may read another line.
        drop(permit);
    }
    output.flush().await
}
