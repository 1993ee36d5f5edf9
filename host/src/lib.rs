//! cordon runs agent-issued shell commands under an OS sandbox and reports
//! what happened as facts.
//!
//! The host (this crate) owns everything that touches the operating system:
//! spawning ([`process`]), the platform sandbox runners ([`sandbox`]). The
//! *policy* — defaulting a request, building and confining the argv,
//! classifying the finished run — lives in a WebAssembly component that the
//! host calls for every run ([`policy`]). [`run`] sequences the two and
//! checks the host invariants on everything the component returns.
//!
//! Start with [`Host::builder`]: [`Host::run`] runs a command in the
//! foreground, [`Host::start`] as a background task; [`Host::session`] gives
//! each client its own tasks. [`serve`] puts a host behind JSON-RPC 2.0 for
//! platforms in other languages, one session per connection.
//!
//! `docs/architecture.md` maps the rooms of this crate and where new work goes.

#![warn(missing_docs)]
// No function over a screen (100 lines): a long one is split into named
// stages, or says with an `#[expect]` why it is really one thing.
#![warn(clippy::too_many_lines)]

mod admission;
pub mod audit;
pub mod config;
pub mod credentials;
pub mod denials;
pub mod doctor;
mod error;
pub mod files;
mod host;
pub mod mcp;
pub mod model;
pub mod places;
pub mod policy;
pub mod process;
pub mod proxy;
mod random;
pub mod reference;
pub mod registry;
pub mod run;
pub mod sandbox;
pub mod serve;
mod session;
pub mod tasks;
pub mod testkit;
pub mod text;

pub use error::{Details, ErrorCode, RunError, sandbox_unavailable_message};
pub use host::{BuildError, Host, HostBuilder, PolicySource};
pub use model::{
    ApprovedRequest, AskedRequest, Ceiling, Denial, Deployment, Enforcement, Evidence, ExecRequest,
    ExecResult, LimitEnforcer, LimitFacts, LimitKind, RequestApprover, RunLimits, SandboxFacts,
    SandboxMode, SandboxPolicy, StdinStream, StreamOutput, TerminalSize,
};
pub use run::{ProcessLimits, RunOptions, Verdict};
pub use session::{Load, Session, SessionLimits};
pub use tasks::{TaskHandle, TaskId, TaskRead, TaskSnapshot, TaskStatus, WriteError};
pub use tokio_util::sync::CancellationToken;
