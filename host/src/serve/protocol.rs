//! The wire format of `cordon serve`: JSON-RPC 2.0 envelopes, the params
//! of each method, and how library errors become JSON-RPC errors.
//!
//! Params and results are camelCase JSON mirroring the library types
//! (`docs/protocol.md` has an example of every method). Params are strict:
//! an unknown, missing or mistyped field is an `invalid params` error whose
//! message and `data.field` name the field, so a client learns what to fix.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::error::{ErrorCode, RunError};
use crate::host::BuildError;
use crate::model::{ExecRequest, RunLimits, SandboxPolicy};
use crate::tasks::TaskId;

/// JSON-RPC's own error codes.
pub mod code {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON, but not a JSON-RPC 2.0 request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method (or the request is invalid).
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// `SANDBOX_UNAVAILABLE`: no usable sandbox; the command did not run.
    pub const SANDBOX_UNAVAILABLE: i64 = -32001;
    /// `POLICY_FAILED`: the policy component failed.
    pub const POLICY_FAILED: i64 = -32002;
    /// `WORKDIR`: the working directory is unusable.
    pub const WORKDIR: i64 = -32003;
    /// `SPAWN_FAILED`: the command could not be started.
    pub const SPAWN_FAILED: i64 = -32004;
    /// `UNKNOWN_TASK`: no task has this id.
    pub const UNKNOWN_TASK: i64 = -32005;
    /// `ABORTED`: the run was aborted before its command started.
    pub const ABORTED: i64 = -32006;
    /// `POLICY_DENIED`: the policy component denied the command.
    pub const POLICY_DENIED: i64 = -32007;
    /// `APPROVAL_REQUIRED`: the policy component asks for approval first.
    pub const APPROVAL_REQUIRED: i64 = -32008;
    /// `BUSY`: a bound of the server is reached; nothing ran (retry later).
    pub const BUSY: i64 = -32009;
    /// `FORBIDDEN`: the operator's rules refuse this client or method.
    pub const FORBIDDEN: i64 = -32010;
    /// `UNKNOWN_SPILL`: no result of this session holds this spill file.
    pub const UNKNOWN_SPILL: i64 = -32011;
    /// `UNKNOWN_ATTACH_TOKEN`: no detached tasks wait under this token for
    /// this client.
    pub const UNKNOWN_ATTACH_TOKEN: i64 = -32012;
    /// `AUDIT_UNAVAILABLE`: the required audit log cannot be written;
    /// nothing ran.
    pub const AUDIT_UNAVAILABLE: i64 = -32013;
}

/// Every method the server answers, in documentation order.
pub const METHODS: &[&str] = &[
    "run", "start", "read", "write", "kill", "wait", "list", "remove", "release", "detach",
    "attach", "probe", "reload", "shutdown",
];

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RpcError {
    /// The numeric code (see [`code`]).
    pub code: i64,
    /// What went wrong and what to do.
    pub message: String,
    /// Structured detail: always `{"code": "<STABLE_NAME>", ...}`.
    pub data: Value,
}

impl RpcError {
    fn new(code: i64, name: &str, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: json!({ "code": name }),
        }
    }

    /// The line was not JSON.
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        RpcError::new(
            code::PARSE_ERROR,
            "PARSE_ERROR",
            format!("parse error: {detail}; send one JSON-RPC 2.0 request per line"),
        )
    }

    /// Not a JSON-RPC 2.0 request.
    pub fn invalid_request(detail: impl Into<String>) -> Self {
        RpcError::new(
            code::INVALID_REQUEST,
            "INVALID_REQUEST",
            format!("invalid request: {}", detail.into()),
        )
    }

    /// No such method.
    pub fn method_not_found(method: &str) -> Self {
        RpcError::new(
            code::METHOD_NOT_FOUND,
            "METHOD_NOT_FOUND",
            format!(
                "unknown method {method:?}; the methods are {}",
                METHODS.join(", ")
            ),
        )
    }

    /// Params that do not fit; `field` is the dotted path of the culprit.
    pub fn invalid_params(field: &str, detail: impl std::fmt::Display) -> Self {
        let mut error = RpcError::new(
            code::INVALID_PARAMS,
            "INVALID_PARAMS",
            if field.is_empty() {
                format!("invalid params: {detail}")
            } else {
                format!("invalid params: {field}: {detail}")
            },
        );
        if !field.is_empty() {
            error.data["field"] = json!(field);
        }
        error
    }

    /// No task with this id.
    pub fn unknown_task(id: TaskId) -> Self {
        let mut error = RpcError::new(
            code::UNKNOWN_TASK,
            "UNKNOWN_TASK",
            format!("this connection has no task with id {id}; `list` shows its tasks"),
        );
        error.data["taskId"] = json!(id);
        error
    }

    /// A `write` that did not go through: `BUSY` while the command is not
    /// reading (try again), `INVALID_PARAMS` on `taskId` otherwise.
    pub fn stdin(id: TaskId, error: crate::tasks::WriteError) -> Self {
        let mut error = match error {
            crate::tasks::WriteError::NotReading => {
                RpcError::new(code::BUSY, "BUSY", error.to_string())
            }
            other => RpcError::invalid_params("taskId", other),
        };
        error.data["taskId"] = json!(id);
        error
    }

    /// The server itself failed.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        RpcError::new(code::INTERNAL_ERROR, "INTERNAL_ERROR", detail.to_string())
    }

    /// A line past the server's `maxRequestBytes`. Not `BUSY`: the same
    /// line would be refused again, so a client must not retry it.
    pub fn too_large(max: usize) -> Self {
        let mut error = RpcError::invalid_request(format!(
            "the line is longer than {max} bytes (maxRequestBytes); send less per request"
        ));
        error.data["limit"] = json!("maxRequestBytes");
        error.data["max"] = json!(max);
        error
    }

    /// A batch past the server's `maxBatch` (not `BUSY`, as above).
    pub fn batch_too_large(len: usize, max: usize) -> Self {
        let mut error = RpcError::invalid_request(format!(
            "a batch of {len} requests is more than {max} (maxBatch); split it"
        ));
        error.data["limit"] = json!("maxBatch");
        error.data["max"] = json!(max);
        error
    }

    /// The operator's rules refuse this.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        RpcError::new(code::FORBIDDEN, "FORBIDDEN", detail)
    }

    /// No retained result of this session has this spill file.
    pub fn unknown_spill(path: &std::path::Path) -> Self {
        let mut error = RpcError::new(
            code::UNKNOWN_SPILL,
            "UNKNOWN_SPILL",
            format!(
                "no result of this connection holds the spill file {}; it was released \
                 already, or it belongs to another connection or to a task (remove the task)",
                path.display()
            ),
        );
        error.data["spillPath"] = json!(path);
        error
    }
}

impl RpcError {
    /// No detached tasks wait under this token for this client.
    pub fn unknown_attach_token() -> Self {
        RpcError::new(
            code::UNKNOWN_ATTACH_TOKEN,
            "UNKNOWN_ATTACH_TOKEN",
            "no detached tasks wait under this token for this user: it was used already, its \
             TTL passed, the server restarted, or another uid detached them",
        )
    }
}

/// A request as read off the wire: only its envelope is looked at before
/// dispatch; `id` is kept as the exact text the client sent, so any
/// JSON-RPC-legal id (a number past 2^64, `1.50`, a string with escapes)
/// comes back byte for byte.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    /// Must be `"2.0"`.
    #[serde(default)]
    pub jsonrpc: Option<Value>,
    /// The method's name.
    #[serde(default)]
    pub method: Option<Value>,
    /// The params, passed on to [`params`].
    #[serde(default)]
    pub params: Option<Value>,
    /// The id's text; none when the member is absent (a notification).
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
}

/// A member that is present, even as `null`.
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

impl Envelope<'_> {
    /// The id to answer with; none for a notification. An id that is not
    /// a string, a number or null is an invalid request.
    pub fn id(&self) -> Result<Option<Box<RawValue>>, RpcError> {
        let Some(id) = self.id else { return Ok(None) };
        let text = id.get();
        let legal = text == "null"
            || text.starts_with('"')
            || text.starts_with(|c: char| c == '-' || c.is_ascii_digit());
        match legal {
            true => Ok(Some(id.to_owned())),
            false => Err(RpcError::invalid_request(
                "\"id\" must be a string, a number or null",
            )),
        }
    }
}

/// A success response line.
pub fn success(id: Box<RawValue>, result: &Value) -> String {
    #[derive(Serialize)]
    struct Success<'a> {
        jsonrpc: &'static str,
        id: &'a RawValue,
        result: &'a Value,
    }
    let reply = Success {
        jsonrpc: "2.0",
        id: &id,
        result,
    };
    serde_json::to_string(&reply).expect("a reply always serializes")
}

/// An error response line (`id: null` when none is known).
pub fn failure(id: Option<Box<RawValue>>, error: RpcError) -> String {
    #[derive(Serialize)]
    struct Failure<'a> {
        jsonrpc: &'static str,
        id: Option<&'a RawValue>,
        error: RpcError,
    }
    let reply = Failure {
        jsonrpc: "2.0",
        id: id.as_deref(),
        error,
    };
    serde_json::to_string(&reply).expect("a reply always serializes")
}

/// The JSON-RPC code of a stable error code (the one place that maps them).
pub fn numeric(code: ErrorCode) -> i64 {
    match code {
        ErrorCode::InvalidRequest => code::INVALID_PARAMS,
        ErrorCode::SandboxUnavailable => code::SANDBOX_UNAVAILABLE,
        ErrorCode::PolicyFailed => code::POLICY_FAILED,
        ErrorCode::Workdir => code::WORKDIR,
        ErrorCode::SpawnFailed => code::SPAWN_FAILED,
        ErrorCode::Aborted => code::ABORTED,
        ErrorCode::PolicyDenied => code::POLICY_DENIED,
        ErrorCode::ApprovalRequired => code::APPROVAL_REQUIRED,
        ErrorCode::Busy => code::BUSY,
        ErrorCode::AuditUnavailable => code::AUDIT_UNAVAILABLE,
    }
}

impl RpcError {
    /// An error with the library's shared code and details.
    fn from_details(code: ErrorCode, message: String, details: crate::error::Details) -> Self {
        RpcError {
            code: numeric(code),
            message,
            data: Value::Object(details),
        }
    }
}

impl From<RunError> for RpcError {
    fn from(error: RunError) -> Self {
        RpcError::from_details(error.code(), error.to_string(), error.details())
    }
}

impl From<BuildError> for RpcError {
    fn from(error: BuildError) -> Self {
        match error {
            // In `reload`, an unreadable file is a bad `path` param.
            BuildError::ReadPolicy { .. } => RpcError::invalid_params("path", error),
            error => RpcError::from_details(error.code(), error.to_string(), error.details()),
        }
    }
}

/// Deserialize `params` strictly, naming the offending field on failure.
/// Absent params count as `{}`.
pub fn params<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    let value = match params {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(value @ Value::Object(_)) => value,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "",
                "params must be an object (by-name params)",
            ));
        }
    };
    serde_path_to_error::deserialize(value).map_err(|error| {
        let field = error.path().to_string();
        let field = if field == "." { String::new() } else { field };
        RpcError::invalid_params(&field, error.into_inner())
    })
}

/// `run` and `start`: one command, mirroring [`ExecRequest`].
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunParams {
    /// The shell command line.
    pub command: String,
    /// Working directory (default: the deployment's).
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    /// Timeout in milliseconds (default: the policy's).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Extra environment entries.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Text for the command's stdin (default: `/dev/null`).
    #[serde(default)]
    pub stdin: Option<String>,
    /// `start` only: keep the task's stdin open for `write`.
    #[serde(default)]
    pub open_stdin: bool,
    /// `start` only: give the task a terminal as stdin, stdout and stderr
    /// (its input written with `write`, `eof` as `^D`; its output one stream).
    #[serde(default)]
    pub tty: bool,
    /// With `tty`: the terminal's rows (default 24, at most 1000).
    #[serde(default)]
    pub rows: Option<u16>,
    /// With `tty`: the terminal's columns (default 80, at most 1000).
    #[serde(default)]
    pub cols: Option<u16>,
    /// This request's sandbox policy — the grant: `mode`, `workspaceRoot`,
    /// and optionally `writableRoots`, `protected`, `unprotected`,
    /// `denyRead`, `network`, `sockets` (default: the deployment's).
    #[serde(default)]
    pub policy: Option<SandboxPolicy>,
    /// A person approved what the policy asked (`APPROVAL_REQUIRED`):
    /// `policy` is the grant it proposed.
    #[serde(default)]
    pub approved: bool,
    /// HTTP requests a person approved for this run
    /// (`METHOD host:port/path`): a request the policy asks about is sent
    /// only when it is one of these; the last run's facts
    /// (`grant.requests`, `asked`) name the ones it waited for.
    #[serde(default)]
    pub approved_requests: Vec<crate::model::ApprovedRequest>,
    /// Tighter resource limits than the host's (`pids`, `memoryBytes`,
    /// `cpuWeight`; never more than the host's).
    #[serde(default)]
    pub limits: Option<RunLimits>,
}

impl RunParams {
    /// The terminal these params ask for; `rows` or `cols` without `tty`
    /// is a bad param.
    pub fn terminal(&self) -> Result<Option<crate::model::TerminalSize>, RpcError> {
        if !self.tty {
            let stray = [("rows", self.rows), ("cols", self.cols)];
            return match stray.iter().find(|(_, value)| value.is_some()) {
                Some((name, _)) => Err(RpcError::invalid_params(
                    name,
                    format!("{name} sizes a terminal: it needs tty: true"),
                )),
                None => Ok(None),
            };
        }
        let default = crate::model::TerminalSize::default();
        Ok(Some(crate::model::TerminalSize {
            rows: self.rows.unwrap_or(default.rows),
            cols: self.cols.unwrap_or(default.cols),
        }))
    }

    /// The request these params make; a bad param (`rows` without `tty`)
    /// is an error.
    pub fn into_request(self) -> Result<ExecRequest, RpcError> {
        let tty = self.terminal()?;
        Ok(ExecRequest {
            command: self.command,
            workdir: self.workdir,
            timeout_ms: self.timeout_ms,
            env: self.env.into_iter().collect(),
            policy: self.policy,
            approved: self.approved,
            approved_requests: self.approved_requests,
            request_approver: None,
            stdin: self.stdin.map(String::into_bytes),
            stdin_stream: None,
            open_stdin: self.open_stdin,
            tty,
            limits: self.limits,
        })
    }
}

/// `read`, `kill` and `remove`: one task.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskParams {
    /// The task's id (from `start`).
    pub task_id: TaskId,
}

/// `write`: text for a task's open stdin.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteParams {
    /// The task's id (from `start` with `openStdin`).
    pub task_id: TaskId,
    /// The text to write (may be empty).
    #[serde(default)]
    pub data: String,
    /// Close the task's stdin after it (the command reads end of file).
    #[serde(default)]
    pub eof: bool,
}

/// `write`'s result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteResult {
    /// Bytes handed to the command's stdin.
    pub written: usize,
}

/// `wait`: one task, with an optional bound.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitParams {
    /// The task's id (from `start`).
    pub task_id: TaskId,
    /// Give up waiting after this long and return the running state.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `reload`: the new policy component.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReloadParams {
    /// A component file (relative paths: from the server's directory).
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// A component in an OCI registry: `oci://REGISTRY/REPO[:TAG][@sha256:…]`
    /// (pulled and checked as `--policy oci://…` is; a tag is pinned to its digest).
    #[serde(default)]
    pub reference: Option<String>,
}

/// `reload`'s result: what the new component says about itself, and which
/// component it is.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReloadResult {
    /// The component's `describe`.
    #[serde(flatten)]
    pub info: crate::policy::ExecutorInfo,
    /// The world it was built against.
    pub world: String,
    /// `sha256:HEX` of its bytes.
    pub digest: String,
    /// The registry reference it was pulled as, pinned to its manifest digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// `release`: a foreground result's spill files.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseParams {
    /// Either `spillPath` of the result (both of its files are released).
    pub spill_path: PathBuf,
}

/// `start`'s result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StartResult {
    /// The new task's id.
    pub task_id: TaskId,
}

/// `attach`: the token `detach` gave.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttachParams {
    /// The token.
    pub attach_token: String,
}

/// `detach`'s result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DetachResult {
    /// What `attach` takes, on a later connection of the same user.
    pub attach_token: String,
    /// How long the tasks wait after this connection ends.
    pub ttl_secs: u64,
}

/// `attach`'s result: this connection's tasks, the re-attached among them.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttachResult {
    /// Every task of this connection, oldest first.
    pub tasks: Vec<crate::tasks::TaskSnapshot>,
}

/// `kill`'s result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct KillResult {
    /// True only for the first kill of a running task.
    pub killed: bool,
}

/// `remove`'s result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct RemoveResult {
    /// False for a task that is still running.
    pub removed: bool,
}

/// `release`'s result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ReleaseResult {
    /// Always true (an unknown spill file is `UNKNOWN_SPILL`).
    pub released: bool,
}

/// `shutdown`'s result: nothing.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `probe`'s result: the sandbox ladder's verdict (absent when the host
/// was given its own confiner) and the server's bounds and load.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeResult {
    /// The ladder's verdict.
    #[serde(flatten)]
    pub probe: Option<crate::sandbox::Probe>,
    /// The server's bounds and load.
    pub server: ServerStatus,
}

/// `list`'s result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListResult {
    /// This connection's tasks, oldest first.
    pub tasks: Vec<crate::tasks::TaskSnapshot>,
    /// The server's bounds and load.
    pub server: ServerStatus,
}

/// The server's bounds and load (in `list` and `probe`).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// The server's own bounds and rules.
    pub options: super::ServeOptions,
    /// The host's bounds on runs and tasks.
    pub session_limits: crate::admission::SessionLimits,
    /// What the host's sessions hold now.
    pub load: crate::admission::Load,
    /// Connections being served now.
    pub connections: usize,
    /// Threads the policy calls run on.
    pub policy_threads: usize,
    /// How many of them are in a call now.
    pub policy_threads_busy: usize,
    /// Who this connection's client is (a socket's credentials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<super::Peer>,
    /// Whom a socket listener admits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<super::Access>,
    /// Detached connections whose tasks wait to be re-attached.
    pub detached: usize,
}

/// `list`, `probe` and `shutdown` take nothing.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistyped_nested_field_is_named() {
        let err = params::<RunParams>(Some(json!({
            "command": "true",
            "policy": {"mode": "full", "workspaceRoot": "/w"}
        })))
        .unwrap_err();
        assert_eq!(err.code, code::INVALID_PARAMS);
        assert_eq!(err.data["field"], "policy.mode");
        assert!(
            err.message
                .starts_with("invalid params: policy.mode: unknown variant `full`")
        );
    }

    #[test]
    fn unknown_and_missing_fields_are_named() {
        let err = params::<RunParams>(Some(json!({"command": "x", "timeout": 5}))).unwrap_err();
        assert!(
            err.message.contains("unknown field `timeout`"),
            "{}",
            err.message
        );
        let err = params::<RunParams>(Some(json!({}))).unwrap_err();
        assert!(
            err.message.contains("missing field `command`"),
            "{}",
            err.message
        );
        let err = params::<RunParams>(Some(json!({"command": "x", "timeoutMs": "5"}))).unwrap_err();
        assert_eq!(err.data["field"], "timeoutMs");
    }

    #[test]
    fn positional_params_are_refused() {
        let err = params::<NoParams>(Some(json!([1]))).unwrap_err();
        assert!(err.message.contains("by-name"), "{}", err.message);
        params::<NoParams>(None).unwrap();
    }

    #[test]
    fn run_params_mirror_the_library_request() {
        let request: ExecRequest = params::<RunParams>(Some(json!({
            "command": "cat",
            "timeoutMs": 5,
            "env": {"A": "1"},
            "stdin": "hi",
            "policy": {"mode": "workspace-write", "workspaceRoot": "/w"}
        })))
        .unwrap()
        .into_request()
        .unwrap();
        assert_eq!(request.timeout_ms, Some(5));
        assert_eq!(request.env, vec![("A".to_owned(), "1".to_owned())]);
        assert_eq!(request.stdin.as_deref(), Some(&b"hi"[..]));
        assert_eq!(
            request.policy,
            Some(SandboxPolicy::new(
                crate::model::SandboxMode::WorkspaceWrite,
                "/w"
            ))
        );
    }

    #[test]
    fn a_terminal_is_asked_with_tty_and_sized_with_rows_and_cols() {
        let ask = |value| params::<RunParams>(Some(value)).unwrap().into_request();
        let request = ask(json!({"command": "sh", "tty": true, "cols": 132})).unwrap();
        assert_eq!(
            request.tty,
            Some(crate::model::TerminalSize {
                rows: 24,
                cols: 132
            })
        );
        assert_eq!(ask(json!({"command": "sh"})).unwrap().tty, None);
        let stray = ask(json!({"command": "sh", "rows": 40})).unwrap_err();
        assert_eq!(stray.code, code::INVALID_PARAMS);
        assert!(stray.message.contains("tty: true"), "{}", stray.message);
    }

    #[test]
    fn approved_requests_are_read_as_request_lines_and_a_bad_one_is_a_bad_param() {
        let line = "POST api.test:443/repos/o/r/pulls";
        let read = params::<RunParams>(Some(json!({"command": "gh", "approvedRequests": [line]})));
        let request = read.unwrap().into_request().unwrap();
        let approved: Vec<String> = (request.approved_requests.iter())
            .map(ToString::to_string)
            .collect();
        assert_eq!(approved, [line]);
        let bad = json!({"command": "gh", "approvedRequests": ["POST api.test/x"]});
        let error = params::<RunParams>(Some(bad)).unwrap_err();
        assert_eq!(error.code, code::INVALID_PARAMS);
        assert!(
            error.message.contains("METHOD host:port/path"),
            "{}",
            error.message
        );
    }

    #[test]
    fn run_errors_keep_their_stable_names() {
        let rpc: RpcError = RunError::SandboxUnavailable {
            mode: crate::model::SandboxMode::ReadOnly,
            detail: None,
        }
        .into();
        assert_eq!(rpc.code, code::SANDBOX_UNAVAILABLE);
        assert_eq!(rpc.data["code"], "SANDBOX_UNAVAILABLE");
        assert_eq!(rpc.data["mode"], "read-only");
        let rpc: RpcError = RunError::PolicyFailed {
            phase: crate::policy::Phase::Plan,
            reason: "trap".into(),
        }
        .into();
        assert_eq!(
            (rpc.code, rpc.data["phase"].as_str()),
            (code::POLICY_FAILED, Some("plan"))
        );
    }
}
