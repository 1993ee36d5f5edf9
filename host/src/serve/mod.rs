//! `cordon serve`: the host as a long-lived JSON-RPC 2.0 server over a
//! byte stream (stdio for the CLI), one request or batch per line.
//!
//! Why a server: agent platforms written in TypeScript, Python or Go drive
//! one cordon process for many sessions instead of paying a process start
//! (and a probe) per command. Everything a method does is a call on the
//! connection's [`Session`] (or, for `probe` and `reload`, its [`Host`]);
//! this module only frames, dispatches and renders ([`protocol`] has the
//! wire types and error mapping, `docs/protocol.md` the contract).
//!
//! * Each connection ([`Server::serve`]) is a session of the host: it sees
//!   only the tasks it started, and its end ends those tasks — not the host,
//!   and not another connection's. Over stdio there is one connection.
//! * Every request is handled in its own task, so a slow `run` never holds
//!   up a `read`; responses are written whole, one per line, as they finish
//!   (match them by `id`).
//! * Each request carries its own sandbox policy (mode + workspace root).
//! * A malformed line gets a parse error and the server keeps serving; a
//!   line longer than [`MAX_LINE_BYTES`] is refused whole.
//! * EOF on the input or the `shutdown` method end the connection
//!   gracefully: no further line is read, requests already read are
//!   answered (a foreground run finishes, within its timeout), the session's
//!   live background tasks are killed (grace escalation) and settled, every
//!   response is flushed, and [`Server::serve`] returns.
//! * [`Server::stopper`] (the CLI cancels it on `SIGINT`/`SIGTERM`) ends
//!   every connection at once: the same, except that foreground runs in
//!   flight are aborted too (their groups terminated; their responses still
//!   written).

pub mod protocol;

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::host::{Host, PolicySource};
use crate::model::ExecResult;
use crate::run::RunOptions;
use crate::session::Session;
use crate::tasks::TaskHandle;
use protocol::{NoParams, ReloadParams, RpcError, RunParams, TaskParams, WaitParams, params};

/// The longest request line accepted (16 MiB).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Foreground results whose spill files are kept after their response, so
/// a client can still read the complete output they name.
pub const RETAINED_SPILLS: usize = 32;

/// A JSON-RPC server over one [`Host`]: each connection it serves gets a
/// [`Session`] of its own, ended with the connection.
pub struct Server {
    host: Arc<Host>,
    /// Cancelled to stop every connection at once (aborting foreground runs).
    stop: CancellationToken,
}

impl Server {
    /// A server for `host`.
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
        Server {
            host,
            stop: CancellationToken::new(),
        }
    }

    /// A token that stops the server at once when cancelled (e.g. on
    /// `SIGTERM`): every connection ends, foreground runs in flight are
    /// aborted, tasks killed.
    pub fn stopper(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Serve one connection: requests from `input`, responses to `output`,
    /// in a new session of the host, until EOF, `shutdown` or the stopper;
    /// then end the session as the module docs say. The host and its other
    /// sessions are untouched. Errors only when `output` fails.
    ///
    /// Several connections may be served at once (share the server in an
    /// `Arc`). Must run inside a tokio runtime; a multi-threaded one lets
    /// requests proceed in parallel.
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
        let connection = Arc::new(Connection {
            host: self.host.clone(),
            session: self.host.session(),
            drain: CancellationToken::new(),
            runs: CancellationToken::new(),
            spilled: Mutex::new(VecDeque::new()),
        });
        let (replies, pending) = mpsc::unbounded_channel::<String>();
        let writer = tokio::spawn(write_lines(output, pending));
        let mut handlers = JoinSet::new();
        let mut lines = LineReader::new(input);
        loop {
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
                    let error = RpcError::invalid_request(format!(
                        "the line is longer than {MAX_LINE_BYTES} bytes"
                    ));
                    let _ = replies.send(render(&failure(Value::Null, error)));
                }
                Some(Ok(Line::Text(bytes))) => {
                    if bytes.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let connection = connection.clone();
                    let replies = replies.clone();
                    handlers.spawn(async move {
                        if let Some(reply) = connection.handle_line(&bytes).await {
                            let _ = replies.send(reply);
                        }
                    });
                }
            }
            while handlers.try_join_next().is_some() {}
        }
        if self.stop.is_cancelled() {
            connection.runs.cancel();
        }
        // Kill the session's tasks first: a `wait` in flight returns once
        // they settle.
        connection.session.shutdown().await;
        while handlers.join_next().await.is_some() {}
        // And any task a `start` in flight began meanwhile.
        connection.session.shutdown().await;
        connection
            .spilled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        drop(replies);
        writer.await.map_err(io::Error::other)?
    }
}

/// One connection: its session, and the tokens that end it.
struct Connection {
    host: Arc<Host>,
    session: Session,
    /// Cancelled by the `shutdown` method: stop reading, answer the rest.
    drain: CancellationToken,
    /// Parent of every foreground run's abort token.
    runs: CancellationToken,
    /// Recent foreground results that spilled (see [`RETAINED_SPILLS`]).
    spilled: Mutex<VecDeque<ExecResult>>,
}

impl Connection {
    /// One line: a request or a batch. None when nothing is to be sent
    /// (notifications only).
    async fn handle_line(self: &Arc<Self>, bytes: &[u8]) -> Option<String> {
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(value) => value,
            Err(err) => return Some(render(&failure(Value::Null, RpcError::parse_error(err)))),
        };
        match value {
            Value::Array(batch) if batch.is_empty() => Some(render(&failure(
                Value::Null,
                RpcError::invalid_request("an empty batch"),
            ))),
            Value::Array(batch) => {
                let mut calls = JoinSet::new();
                for (index, request) in batch.into_iter().enumerate() {
                    let connection = self.clone();
                    calls.spawn(async move { (index, connection.handle_request(request).await) });
                }
                let mut replies = Vec::new();
                while let Some(done) = calls.join_next().await {
                    if let Ok((index, Some(reply))) = done {
                        replies.push((index, reply));
                    }
                }
                replies.sort_by_key(|(index, _)| *index);
                let replies: Vec<Value> = replies.into_iter().map(|(_, reply)| reply).collect();
                (!replies.is_empty()).then(|| render(&replies))
            }
            request => self
                .handle_request(request)
                .await
                .map(|reply| render(&reply)),
        }
    }

    /// One request object; None for a notification.
    async fn handle_request(self: &Arc<Self>, request: Value) -> Option<Value> {
        let Value::Object(mut request) = request else {
            return Some(failure(
                Value::Null,
                RpcError::invalid_request("a request must be a JSON object"),
            ));
        };
        let id = request.remove("id");
        let reply_id = id.clone().unwrap_or(Value::Null);
        if !matches!(
            id,
            None | Some(Value::Null | Value::Number(_) | Value::String(_))
        ) {
            return Some(failure(
                Value::Null,
                RpcError::invalid_request("\"id\" must be a string, a number or null"),
            ));
        }
        if request.get("jsonrpc") != Some(&json!("2.0")) {
            return Some(failure(
                reply_id,
                RpcError::invalid_request("\"jsonrpc\" must be \"2.0\""),
            ));
        }
        let Some(Value::String(method)) = request.remove("method") else {
            return Some(failure(
                reply_id,
                RpcError::invalid_request("\"method\" must be a string"),
            ));
        };
        let outcome = self.dispatch(&method, request.remove("params")).await;
        // A request without an id is a notification: never answered.
        id.as_ref()?;
        Some(match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": reply_id, "result": result}),
            Err(error) => failure(reply_id, error),
        })
    }

    async fn dispatch(&self, method: &str, raw: Option<Value>) -> Result<Value, RpcError> {
        match method {
            "run" => {
                let request = params::<RunParams>(raw)?.into();
                let options = RunOptions {
                    sink: None,
                    abort: Some(self.runs.child_token()),
                };
                let result = self.session.run_with(request, options).await?;
                let rendered = to_value(&result)?;
                self.retain_spills(result);
                Ok(rendered)
            }
            "start" => {
                let handle = self.session.start(params::<RunParams>(raw)?.into())?;
                Ok(json!({ "taskId": handle.id() }))
            }
            "read" => to_value(&self.task(params::<TaskParams>(raw)?.task_id)?.read()),
            "kill" => {
                let task = self.task(params::<TaskParams>(raw)?.task_id)?;
                Ok(json!({ "killed": task.kill() }))
            }
            "wait" => {
                let wait = params::<WaitParams>(raw)?;
                let task = self.task(wait.task_id)?;
                to_value(&task.wait(wait.timeout_ms.map(Duration::from_millis)).await)
            }
            "list" => {
                params::<NoParams>(raw)?;
                Ok(json!({ "tasks": self.session.tasks() }))
            }
            "remove" => {
                let id = params::<TaskParams>(raw)?.task_id;
                self.task(id)?;
                Ok(json!({ "removed": self.session.remove_task(id) }))
            }
            "probe" => {
                params::<NoParams>(raw)?;
                let host = self.host.clone();
                // The first probe runs bounded child processes: off the reactor.
                let probe = tokio::task::spawn_blocking(move || host.probe())
                    .await
                    .map_err(RpcError::internal)?;
                to_value(&probe)
            }
            "reload" => {
                let path = params::<ReloadParams>(raw)?.path;
                let host = self.host.clone();
                // Compiling a component takes a while: off the reactor.
                let info =
                    tokio::task::spawn_blocking(move || host.reload(PolicySource::File(path)))
                        .await
                        .map_err(RpcError::internal)??;
                to_value(&info)
            }
            "shutdown" => {
                params::<NoParams>(raw)?;
                self.drain.cancel();
                Ok(json!({}))
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }

    fn task(&self, id: crate::tasks::TaskId) -> Result<TaskHandle, RpcError> {
        self.session
            .task(id)
            .ok_or_else(|| RpcError::unknown_task(id))
    }

    /// Keep a spilled result's files for the next [`RETAINED_SPILLS`]
    /// spilled runs (or until the connection ends); others are freed at once.
    fn retain_spills(&self, result: ExecResult) {
        if result.stdout.spill_path.is_none() && result.stderr.spill_path.is_none() {
            return;
        }
        let mut spilled = self.spilled.lock().unwrap_or_else(|p| p.into_inner());
        spilled.push_back(result);
        while spilled.len() > RETAINED_SPILLS {
            spilled.pop_front();
        }
    }
}

fn to_value(value: &impl Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(RpcError::internal)
}

fn failure(id: Value, error: RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

fn render(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("JSON values always serialize")
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut output: W,
    mut pending: mpsc::UnboundedReceiver<String>,
) -> io::Result<()> {
    while let Some(mut line) = pending.recv().await {
        line.push('\n');
        output.write_all(line.as_bytes()).await?;
        output.flush().await?;
    }
    Ok(())
}

/// One line of input.
enum Line {
    /// The line's bytes, without the newline.
    Text(Vec<u8>),
    /// A line past [`MAX_LINE_BYTES`], skipped up to its newline.
    TooLong,
}

/// Splits input into lines, never holding more than [`MAX_LINE_BYTES`].
struct LineReader<R> {
    input: BufReader<R>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(input: R) -> Self {
        LineReader {
            input: BufReader::with_capacity(64 << 10, input),
        }
    }

    /// The next line; None at EOF (a last line without a newline counts).
    async fn next(&mut self) -> Option<io::Result<Line>> {
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let available = match self.input.fill_buf().await {
                Ok(available) => available,
                Err(err) => return Some(Err(err)),
            };
            if available.is_empty() {
                return match (line.is_empty() && !too_long, too_long) {
                    (true, _) => None,
                    (false, true) => Some(Ok(Line::TooLong)),
                    (false, false) => Some(Ok(Line::Text(line))),
                };
            }
            let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
                Some(end) => (&available[..end], Some(end + 1)),
                None => (available, None),
            };
            if !too_long && line.len() + chunk.len() > MAX_LINE_BYTES {
                too_long = true;
                line = Vec::new();
            }
            if !too_long {
                line.extend_from_slice(chunk);
            }
            let used = found.unwrap_or(available.len());
            self.input.consume(used);
            if found.is_some() {
                return Some(Ok(if too_long {
                    Line::TooLong
                } else {
                    Line::Text(line)
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8]) -> Vec<Option<Vec<u8>>> {
        let mut reader = LineReader::new(input);
        let mut out = vec![];
        while let Some(line) = reader.next().await {
            out.push(match line.unwrap() {
                Line::Text(text) => Some(text),
                Line::TooLong => None,
            });
        }
        out
    }

    #[tokio::test]
    async fn lines_split_on_newlines_and_keep_a_last_unterminated_one() {
        assert_eq!(
            lines(b"a\n\nbc\nd").await,
            vec![
                Some(b"a".to_vec()),
                Some(vec![]),
                Some(b"bc".to_vec()),
                Some(b"d".to_vec())
            ]
        );
        assert!(lines(b"").await.is_empty());
    }

    #[tokio::test]
    async fn an_overlong_line_is_refused_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 1];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(lines(&input).await, vec![None, Some(b"ok".to_vec())]);
    }
}
