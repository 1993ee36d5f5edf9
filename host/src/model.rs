//! The neutral vocabulary of the host: requests, specs, outcomes, results and
//! sandbox facts.
//!
//! Every layer (policy bindings, sandbox runners, process mechanics, the CLI
//! and embedders) speaks these types; the versioned policy bindings convert
//! them to and from the WIT types of the interface version they bind, so a
//! second interface version adds a binding layer, not a second vocabulary.
//!
//! This module depends on nothing else in the crate: the layers below it
//! (process, sandbox, policy) build these values, never the other way round.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What a command may change on disk; ordered narrowest first, so `<`
/// compares width (`ReadOnly < WorkspaceWrite < DangerFullAccess`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No writes except `/dev/null`.
    ReadOnly,
    /// Writes inside the workspace root and a temporary area only.
    WorkspaceWrite,
    /// No confinement.
    DangerFullAccess,
}

impl SandboxMode {
    /// Every mode, narrowest first.
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    /// The mode's name: `read-only`, `workspace-write` or `danger-full-access`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }

    /// Whether a run in this mode must be confined by a sandbox runner.
    pub fn is_confined(self) -> bool {
        self != SandboxMode::DangerFullAccess
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text was not a mode name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox mode {0:?}; expected read-only, workspace-write or danger-full-access")]
pub struct UnknownMode(pub String);

impl FromStr for SandboxMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SandboxMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

/// How completely a backend enforces what a mode promises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    /// Everything the mode promises.
    Full,
    /// Not every file right the mode denies (e.g. Landlock on an older ABI).
    Partial,
}

/// The platform mechanism that confines a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// cordon's own namespace runner (`cordon __ns`): bwrap's sandbox,
    /// built by cordon's launcher.
    Namespaces,
    /// bubblewrap.
    Bwrap,
    /// cordon's Landlock launcher.
    Landlock,
    /// macOS `sandbox-exec`.
    Seatbelt,
    /// An operator-configured runner command.
    RunnerCommand,
}

/// One endpoint a command may reach: a host pattern (`github.com`, or
/// `*.npmjs.org` for any subdomain) or an IP address, and a port (none:
/// any port).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Host name pattern or address.
    pub host: String,
    /// Port; none for any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Whether the proxy inspects this endpoint's HTTPS: ends the
    /// client's TLS with the run's own certificate authority and decides
    /// request by request (`proxy::inspect`). Every other HTTPS
    /// connection is tunnelled untouched.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inspect: bool,
}

impl Endpoint {
    /// The one endpoint `host:port`, not inspected.
    pub fn at(host: &str, port: u16) -> Endpoint {
        Endpoint {
            host: host.to_owned(),
            port: Some(port),
            inspect: false,
        }
    }

    /// Whether every connection `other` allows, this one allows too.
    pub fn covers(&self, other: &Endpoint) -> bool {
        let port = self.port.is_none() || self.port == other.port;
        let (mine, theirs) = (
            self.host.to_ascii_lowercase(),
            other.host.to_ascii_lowercase(),
        );
        let host = match mine.strip_prefix("*.") {
            Some(domain) => {
                theirs == mine
                    || theirs
                        .trim_start_matches("*.")
                        .strip_suffix(domain)
                        .is_some_and(|rest| rest.ends_with('.'))
            }
            None => mine == theirs,
        };
        port && host
    }
}

impl FromStr for Endpoint {
    type Err = String;

    /// `host:port`, `host:*` or `host` (any port).
    fn from_str(text: &str) -> Result<Self, String> {
        let (host, port) = match text.rsplit_once(':') {
            Some((host, "*")) => (host, None),
            Some((host, port)) => (
                host,
                Some(port.parse::<u16>().map_err(|_| {
                    format!("{text:?}: the port {port:?} is not a number 0–65535 (or *)")
                })?),
            ),
            None => (text, None),
        };
        let bare = host.strip_prefix("*.").unwrap_or(host);
        if bare.is_empty() || bare.contains(['*', '/', ' ']) {
            return Err(format!(
                "{text:?} is not an endpoint; write host:port, *.domain:port or host (any port)"
            ));
        }
        Ok(Endpoint {
            host: host.to_ascii_lowercase(),
            port,
            inspect: false,
        })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => write!(f, "{}:*", self.host),
        }
    }
}

/// The network a run may reach; ordered narrowest first by
/// [`Network::within`].
#[derive(
    Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// No route out, no host loopback, no host unix socket (pathname or
    /// abstract) but those the grant exposes, no listening on host ports:
    /// the default of every confined run.
    #[default]
    None,
    /// Only these endpoints, through the run's allow-list proxy, which
    /// has the policy component decide each connection.
    Allow(Vec<Endpoint>),
    /// Anything the host reaches.
    Full,
}

impl Network {
    /// Whether a connection to `host:port` is within this network.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let wanted = Endpoint::at(host, port);
        match self {
            Network::None => false,
            Network::Full => true,
            Network::Allow(endpoints) => endpoints.iter().any(|e| e.covers(&wanted)),
        }
    }

    /// Whether the proxy inspects `host:port`'s HTTPS: an endpoint of this
    /// allow-list marked `inspect` covers it.
    pub fn inspects(&self, host: &str, port: u16) -> bool {
        let wanted = Endpoint::at(host, port);
        match self {
            Network::Allow(endpoints) => endpoints.iter().any(|e| e.inspect && e.covers(&wanted)),
            Network::None | Network::Full => false,
        }
    }

    /// Mark the endpoints of this allow-list that a marked endpoint of
    /// `marked` covers for inspection. A component of a world with no word
    /// for the mark keeps or narrows an endpoint of the grant it was handed;
    /// this way it cannot drop the mark either.
    pub fn keep_inspection_marks(&mut self, marked: &Network) {
        let (Network::Allow(mine), Network::Allow(marked)) = (self, marked) else {
            return;
        };
        for endpoint in mine.iter_mut() {
            endpoint.inspect |= marked.iter().any(|m| m.inspect && m.covers(endpoint));
        }
    }

    /// Mark for inspection what the operator's list `inspected` names: an
    /// endpoint of this allow-list one of them covers is marked, and one of
    /// them that an endpoint here covers more widely (`api.github.com:443`
    /// under `*.github.com`) is added, marked — the grant allows nothing
    /// more, and the rest of the wider endpoint stays a tunnel.
    pub fn inspect_where(&mut self, inspected: &[Endpoint]) {
        let Network::Allow(mine) = self else {
            return;
        };
        for endpoint in mine.iter_mut() {
            endpoint.inspect |= inspected.iter().any(|o| o.covers(endpoint));
        }
        let narrower: Vec<Endpoint> = (inspected.iter())
            .filter(|o| mine.iter().any(|e| e.covers(o)))
            .filter(|o| !mine.iter().any(|e| e.inspect && e.covers(o)))
            .map(|o| Endpoint {
                inspect: true,
                ..o.clone()
            })
            .collect();
        mine.extend(narrower);
    }

    /// [`Network::allows`], with the reason a refused connection is given.
    pub fn decide(&self, host: &str, port: u16) -> Result<(), String> {
        match self.allows(host, port) {
            true => Ok(()),
            false => Err(format!("{host}:{port} is not in this run's network grant")),
        }
    }

    /// Whether this is `none` (the default, left out of JSON).
    pub fn is_none(&self) -> bool {
        *self == Network::None
    }
}

impl Network {
    /// Whether this grant is no wider than `ceiling`.
    pub fn within(&self, ceiling: &Network) -> bool {
        match (self, ceiling) {
            (Network::None, _) | (_, Network::Full) => true,
            (Network::Allow(wanted), Network::Allow(allowed)) => wanted
                .iter()
                .all(|want| allowed.iter().any(|allow| allow.covers(want))),
            (Network::Allow(_) | Network::Full, Network::None)
            | (Network::Full, Network::Allow(_)) => false,
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Network::None => f.write_str("none"),
            Network::Full => f.write_str("full"),
            Network::Allow(endpoints) => {
                let list: Vec<String> = endpoints.iter().map(ToString::to_string).collect();
                write!(f, "allow [{}]", list.join(", "))
            }
        }
    }
}

/// Which sandbox a run gets: the grant. Besides the mode and the workspace
/// root, a policy component decides per command the fields below; the host
/// checks each against the operator's ceiling and enforces it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxPolicy {
    /// The file-effect mode.
    pub mode: SandboxMode,
    /// The directory `workspace-write` may write to.
    pub workspace_root: PathBuf,
    /// More directories `workspace-write` may write to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_roots: Vec<PathBuf>,
    /// Paths kept read-only inside the writable roots (relative: inside
    /// each root), on top of the host's defaults ([`PROTECTED_DEFAULTS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<PathBuf>,
    /// Host defaults lifted, by name (only those the operator allows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprotected: Vec<String>,
    /// Paths hidden from the command (absolute, or `~/…`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_read: Vec<PathBuf>,
    /// The network the command may reach (default `none`).
    #[serde(default, skip_serializing_if = "Network::is_none")]
    pub network: Network,
    /// Host unix sockets exposed to the command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sockets: Vec<PathBuf>,
}

/// Paths protected inside every writable root unless a grant lifts them
/// (and the operator allows that): read-only when present, not creatable
/// when absent. The `.git` names are git's code in every gitdir found in a
/// root, at the top and nested (its `config`, `hooks` and `info`; git's
/// data stays writable, see `sandbox/git.rs`); lifting `.git` lifts them
/// all and lets `git init` make a repository at a root's top.
pub const PROTECTED_DEFAULTS: &[&str] = &[
    ".git",
    ".git/config",
    ".git/hooks",
    ".git/info",
    ".cordon",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
];

impl SandboxPolicy {
    /// A policy of `mode` rooted at `workspace_root`, granting nothing
    /// more (no network).
    pub fn new(mode: SandboxMode, workspace_root: impl Into<PathBuf>) -> Self {
        SandboxPolicy {
            mode,
            workspace_root: workspace_root.into(),
            writable_roots: vec![],
            protected: vec![],
            unprotected: vec![],
            deny_read: vec![],
            network: Network::None,
            sockets: vec![],
        }
    }

    /// Every directory the run may write to: the workspace root and the
    /// extra roots, under `workspace-write`; none otherwise.
    pub fn writable(&self) -> Vec<&Path> {
        match self.mode {
            SandboxMode::WorkspaceWrite => std::iter::once(self.workspace_root.as_path())
                .chain(self.writable_roots.iter().map(PathBuf::as_path))
                .collect(),
            SandboxMode::ReadOnly | SandboxMode::DangerFullAccess => vec![],
        }
    }
}

/// The grant a confined run had, as the host enforced it: every writable
/// root, every protected and hidden path (host defaults included), and
/// what the backend could not enforce.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantFacts {
    /// Directories the command could write to.
    pub writable_roots: Vec<PathBuf>,
    /// Paths kept read-only (and not creatable) inside them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<PathBuf>,
    /// Paths hidden from the command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_read: Vec<PathBuf>,
    /// The network in force.
    pub network: Network,
    /// The host sockets granted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sockets: Vec<PathBuf>,
    /// Fields of the grant the host does not enforce yet (`network`,
    /// `sockets`): the command may reach more than they say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unenforced: Vec<String>,
    /// What this backend enforces only in part, and why (the run's
    /// enforcement is then `partial`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partial: Vec<String>,
    /// What the run got less of than its grant said, and why (an
    /// allow-list without the proxy that would carry it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub narrowed: Vec<String>,
    /// The connections the allow-list proxy refused, in order (a request
    /// the component denied among them: its reason names the request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedConnection>,
    /// The HTTP requests the component decided (world `0.3.0`'s `request`),
    /// in order, the first [`MAX_DECIDED_REQUESTS`] of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<DecidedRequest>,
    /// How many more requests were decided than `requests` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests_unlisted: u64,
}

impl GrantFacts {
    /// The requests the component asked a person about that the run went
    /// without (no approval came with it), in order.
    pub fn awaiting_approval(&self) -> impl Iterator<Item = &DecidedRequest> {
        self.requests.iter().filter(|r| r.asked && !r.allowed)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The most decided requests a run's facts list; the rest are counted.
pub const MAX_DECIDED_REQUESTS: usize = 256;

/// One HTTP request of a run, as the allow-list proxy read it and hands it
/// to the component's `request` (world `0.3.0`): plain HTTP, or a request
/// inside an HTTPS connection the grant marks for inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method as sent (`GET`).
    pub method: String,
    /// `http`, or `https` inside an inspected connection.
    pub scheme: String,
    /// The target host, lower case.
    pub host: String,
    /// The target port.
    pub port: u16,
    /// The path as sent, from `/`.
    pub path: String,
    /// The query without its `?`.
    pub query: Option<String>,
    /// The headers in order, names lower case, a credential's value
    /// withheld ([`WITHHELD`]).
    pub headers: Vec<(String, String)>,
}

/// What a component is shown in place of a credential header's value.
pub const WITHHELD: &str = "<withheld>";

/// The headers whose values a component never sees: they carry a
/// credential.
pub const CREDENTIAL_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie"];

/// A header's value as a component is shown it: [`WITHHELD`] for a
/// credential header (`name` in lower case).
pub fn shown_header_value(name: &str, value: &[u8]) -> String {
    match CREDENTIAL_HEADERS.contains(&name) {
        true => WITHHELD.to_owned(),
        false => String::from_utf8_lossy(value).into_owned(),
    }
}

/// A component's answer for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestVerdict {
    /// Send it as it is.
    Allow,
    /// Refuse it, for the component's reason.
    Deny(String),
    /// Send it with these edits, in order.
    Edit(Vec<HeaderEdit>),
    /// Send it with these edits only if a person approved it for this run
    /// ([`ExecRequest::approved_requests`]); refuse it otherwise, for the
    /// component's reason.
    Ask {
        /// The component's reason, shown to whoever approves.
        reason: String,
        /// The edits made once it is approved, in order.
        edits: Vec<HeaderEdit>,
    },
}

/// A change the host makes to an allowed request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HeaderEdit {
    /// Set a header (name, value), replacing its values.
    Set(String, String),
    /// Remove a header.
    Remove(String),
    /// Attach the operator's credential of this name.
    AttachCredential(String),
}

impl fmt::Display for HeaderEdit {
    /// The edit as the facts list it: names only, never a value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderEdit::Set(name, _) => write!(f, "set {name}"),
            HeaderEdit::Remove(name) => write!(f, "removed {name}"),
            HeaderEdit::AttachCredential(name) => write!(f, "attached credential {name}"),
        }
    }
}

/// A request the component decided, as a run's facts and the audit log
/// record it: no query, no header values (either may carry a secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecidedRequest {
    /// The method.
    pub method: String,
    /// `http` or `https`.
    pub scheme: String,
    /// The target host.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The path, without the query.
    pub path: String,
    /// Whether it was sent.
    pub allowed: bool,
    /// The component asked for a person's approval: `allowed` says
    /// whether the run had it. Approve a refused one by re-sending the run
    /// with [`DecidedRequest::approval`] among its `approvedRequests`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asked: bool,
    /// Why it was refused (the component's reason, or why the host
    /// refused an edit or the call failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The edits the host made before sending it (`set x-trace`,
    /// `removed cookie`, `attached credential github`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edits: Vec<String>,
}

impl DecidedRequest {
    /// The approval that lets this request through when its run is sent
    /// again: its method, host, port and path.
    pub fn approval(&self) -> ApprovedRequest {
        ApprovedRequest {
            method: self.method.clone(),
            host: self.host.clone(),
            port: self.port,
            path: self.path.clone(),
        }
    }
}

/// One HTTP request a person approved for a run, written
/// `METHOD host:port/path` (`POST api.github.com:443/repos/o/r/pulls`): a
/// request the component *asks* about goes through when its method, host,
/// port and path are exactly these (the query is not compared). It widens
/// nothing: the grant, the operator's ceiling and `connect` still decide
/// the connection first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ApprovedRequest {
    /// The method, upper case.
    pub method: String,
    /// The host, lower case.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The path from `/`, without the query.
    pub path: String,
}

/// The longest approved request line.
const MAX_APPROVED_REQUEST: usize = 4096;

impl fmt::Display for ApprovedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        };
        write!(f, "{} {host}:{}{}", self.method, self.port, self.path)
    }
}

impl std::str::FromStr for ApprovedRequest {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let shape = || {
            format!(
                "{:?} is not an approved request: METHOD host:port/path \
                 (e.g. \"POST api.github.com:443/repos/o/r/pulls\")",
                crate::text::reason(text)
            )
        };
        if text.len() > MAX_APPROVED_REQUEST {
            return Err(shape());
        }
        let (method, target) = text.split_once(' ').ok_or_else(shape)?;
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(shape());
        }
        let slash = target.find('/').ok_or_else(shape)?;
        let (authority, path) = target.split_at(slash);
        let (host, port) = authority.rsplit_once(':').ok_or_else(shape)?;
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.strip_suffix(']').ok_or_else(shape)?,
            None if host.contains(':') => return Err(shape()),
            None => host,
        };
        let port: u16 = port.parse().map_err(|_| shape())?;
        let path_ok = path.bytes().all(|b| b.is_ascii_graphic()) && !path.contains(['?', '#']);
        if host.is_empty() || port == 0 || !path_ok {
            return Err(shape());
        }
        Ok(ApprovedRequest {
            method: method.to_ascii_uppercase(),
            host: host.to_ascii_lowercase(),
            port,
            path: path.to_owned(),
        })
    }
}

impl Serialize for ApprovedRequest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ApprovedRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for ApprovedRequest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ApprovedRequest".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An HTTP request a person approved: METHOD host:port/path",
            "maxLength": MAX_APPROVED_REQUEST,
        })
    }
}

/// A connection of an allow-list run that its policy refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefusedConnection {
    /// The destination host, as the command named it.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The component's reason (or why its call failed).
    pub reason: String,
}

/// A policy component's answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run it as this spec (its policy is the grant).
    Allow(ExecSpec),
    /// Do not run it, for the component's reason.
    Deny(String),
    /// Run it only once a person approved: why, and the grant an approved
    /// re-send carries as its own policy.
    Ask {
        /// The component's reason.
        reason: String,
        /// The proposed grant.
        policy: SandboxPolicy,
    },
}

/// The longest timeout any run may have (SPEC.md §3), whatever a request
/// or a component says.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// A caller's request to run one shell command. Everything but the command
/// may be left out; the policy component fills in the defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ExecRequest {
    /// The shell command line.
    pub command: String,
    /// Working directory; the deployment's when absent. Relative paths are
    /// taken from the deployment's working directory.
    pub workdir: Option<PathBuf>,
    /// Timeout in milliseconds; the policy's default when absent.
    pub timeout_ms: Option<u64>,
    /// Extra environment entries; they win over every default and survive
    /// the credential scrub.
    pub env: Vec<(String, String)>,
    /// The request's own sandbox policy; the deployment's when absent.
    pub policy: Option<SandboxPolicy>,
    /// A person approved what the policy component asked for this request
    /// (an *ask*): `policy` is the grant it proposed. The host still checks
    /// it against every ceiling.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
    /// HTTP requests a person approved for this run: a request the policy
    /// component *asks* about is sent only when it is one of these (see
    /// [`ApprovedRequest`]); the run's facts list each asked request with
    /// the approval that would let it through.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approved_requests: Vec<ApprovedRequest>,
    /// Who to ask, while the run lasts, about a request the policy asks a
    /// person about that is not among `approved_requests`; none: it is
    /// refused. Host-only, never serialized.
    #[serde(skip)]
    #[schemars(skip)]
    pub request_approver: Option<RequestApprover>,
    /// Bytes for the command's stdin; `/dev/null` when absent. They stay
    /// in the host: the policy component never sees them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<Vec<u8>>,
    /// A live stdin instead: what the caller sends while the run lasts
    /// ([`StdinStream`]). Host-only, never serialized.
    #[serde(skip)]
    #[schemars(skip)]
    pub stdin_stream: Option<StdinStream>,
    /// A task's stdin stays open for [`crate::TaskHandle::write`] (tasks
    /// only: a foreground run reads a [`StdinStream`] instead).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub open_stdin: bool,
    /// Give a task a terminal of this size as its stdin, stdout and
    /// stderr (tasks only; its stdin is then open for
    /// [`crate::TaskHandle::write`], and its output is one stream).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tty: Option<TerminalSize>,
    /// Tighter limits than the deployment's, each at most the deployment's
    /// (a request may ask for less, never more). Host-only, like `stdin`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<RunLimits>,
}

impl ExecRequest {
    /// A request to run `command` with every default.
    pub fn new(command: impl Into<String>) -> Self {
        ExecRequest {
            command: command.into(),
            ..ExecRequest::default()
        }
    }

    /// The same request with its own sandbox policy.
    pub fn with_policy(mut self, policy: SandboxPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// The same request, approved by a person with `policy` as the grant
    /// (the one an `APPROVAL_REQUIRED` error proposed).
    pub fn approved_with(mut self, policy: SandboxPolicy) -> Self {
        self.policy = Some(policy);
        self.approved = true;
        self
    }

    /// The same request with a working directory.
    pub fn with_workdir(mut self, workdir: impl Into<PathBuf>) -> Self {
        self.workdir = Some(workdir.into());
        self
    }

    /// The same request with a timeout.
    pub fn with_timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = Some(timeout_ms);
        self
    }

    /// The same request with bytes for stdin.
    pub fn with_stdin(mut self, stdin: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(stdin.into());
        self
    }

    /// The same request reading `stream` on stdin while it runs.
    pub fn with_stdin_stream(mut self, stream: StdinStream) -> Self {
        self.stdin_stream = Some(stream);
        self
    }

    /// The same request with one more environment entry.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
}

/// A terminal's size in character cells (default 24 rows of 80 columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalSize {
    /// Rows, 1 to [`TerminalSize::MAX`].
    #[serde(default = "TerminalSize::default_rows")]
    pub rows: u16,
    /// Columns, 1 to [`TerminalSize::MAX`].
    #[serde(default = "TerminalSize::default_cols")]
    pub cols: u16,
}

impl TerminalSize {
    /// The most rows or columns a terminal may have.
    pub const MAX: u16 = 1_000;

    fn default_rows() -> u16 {
        24
    }

    fn default_cols() -> u16 {
        80
    }

    /// Why this size is not one a terminal can have, if it is not.
    pub fn invalid(&self) -> Option<String> {
        let bad = |n: u16| n == 0 || n > TerminalSize::MAX;
        (bad(self.rows) || bad(self.cols)).then(|| {
            format!(
                "tty: {} rows by {} columns; each must be 1 to {}",
                self.rows,
                self.cols,
                TerminalSize::MAX
            )
        })
    }
}

impl Default for TerminalSize {
    fn default() -> Self {
        TerminalSize {
            rows: TerminalSize::default_rows(),
            cols: TerminalSize::default_cols(),
        }
    }
}

/// A command's live stdin: the chunks a caller sends through the
/// [`tokio::sync::mpsc::Sender`] that [`StdinStream::channel`] gave it,
/// copied by the host into the command's stdin pipe (the command never
/// gets the caller's own descriptor: a terminal's ioctls stay the
/// caller's). End of file when every sender is dropped. Clones share the
/// one receiver; a run reads it while it lasts.
#[derive(Clone)]
pub struct StdinStream(std::sync::Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Vec<u8>>>>);

impl StdinStream {
    /// A stream and the sender that feeds it (`depth` chunks may wait).
    pub fn channel(depth: usize) -> (tokio::sync::mpsc::Sender<Vec<u8>>, StdinStream) {
        let (sender, receiver) = tokio::sync::mpsc::channel(depth.max(1));
        let stream = StdinStream(std::sync::Arc::new(tokio::sync::Mutex::new(receiver)));
        (sender, stream)
    }

    /// Copy the stream into `pipe` until it ends or the pipe closes; the
    /// receiver stays in place when the copy is dropped (a run the ladder
    /// plans again reads on). Whether it reached the stream's end (false: the pipe closed first).
    pub(crate) async fn copy_into(&self, pipe: &mut (impl tokio::io::AsyncWrite + Unpin)) -> bool {
        use tokio::io::AsyncWriteExt;
        let mut receiver = self.0.lock().await;
        while let Some(chunk) = receiver.recv().await {
            if pipe.write_all(&chunk).await.is_err() {
                return false;
            }
        }
        true
    }
}

impl std::fmt::Debug for StdinStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StdinStream")
    }
}

impl PartialEq for StdinStream {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for StdinStream {}

/// A request the policy component asks a person about while its run
/// lasts: what [`RequestApprover`] puts to them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AskedRequest {
    /// The request: its method, host, port and path.
    pub request: ApprovedRequest,
    /// The component's reason (bounded, inert text).
    pub reason: String,
}

/// Who a run asks, while it lasts, about a request the policy component
/// asks a person about and the run did not come approved for
/// ([`ExecRequest::approved_requests`]): true sends it. The request waits
/// for the answer (the approver bounds how long); each request is put to
/// it once per run, and its answer stands for the run's later identical
/// requests. Host-only, never serialized: `cordon mcp` asks through the
/// client's elicitation.
#[derive(Clone)]
#[allow(clippy::type_complexity)]
pub struct RequestApprover(
    Arc<
        dyn Fn(AskedRequest) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>>
            + Send
            + Sync,
    >,
);

impl RequestApprover {
    /// An approver answering with `ask`.
    pub fn new<F, Fut>(ask: F) -> Self
    where
        F: Fn(AskedRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = bool> + Send + 'static,
    {
        RequestApprover(Arc::new(move |asked| Box::pin(ask(asked))))
    }

    /// Put `asked` to the person: whether they approved it.
    pub async fn ask(&self, asked: AskedRequest) -> bool {
        (self.0)(asked).await
    }
}

impl std::fmt::Debug for RequestApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestApprover")
    }
}

impl PartialEq for RequestApprover {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RequestApprover {}

/// What the operator configured: the defaults and the ceiling of a host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// The policy for requests that bring none.
    pub policy: SandboxPolicy,
    /// The widest mode this host runs (**host invariant**: enforced whatever
    /// the policy component returns).
    pub max_mode: SandboxMode,
    /// The default working directory.
    pub workdir: PathBuf,
    /// Where writable roots may be (**host invariant**): when not empty,
    /// every workspace a run may write to lies inside one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_roots: Vec<PathBuf>,
    /// Every run's resource limits, and the most a request may ask for
    /// (**host invariant**: a request may ask for less, never more).
    #[serde(default)]
    pub limits: RunLimits,
    /// The widest network a grant may have (**host invariant**; default
    /// `none`: a host reaches no network until its operator says how far).
    #[serde(default, skip_serializing_if = "Network::is_none")]
    pub max_network: Network,
    /// The host sockets a grant may expose (**host invariant**).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sockets: Vec<PathBuf>,
    /// The protected defaults a grant may lift (**host invariant**).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub liftable: Vec<String>,
    /// Files protected in every run whatever the grant (the deployed
    /// policy and config files, when they lie in a writable root).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<PathBuf>,
    /// Paths hidden from every run whatever the grant (**host
    /// invariant**; e.g. a serve client's `[serve.uid.N] deny_read`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_read: Vec<PathBuf>,
    /// Endpoints whose HTTPS the proxy inspects wherever a run's grant
    /// allows them (the operator's `inspect`, and every credential's
    /// hosts): see [`Network::inspect_where`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inspect: Vec<Endpoint>,
    /// The operator's settings for the policy component, as JSON text
    /// (`{}` when none): validated by the component at load.
    #[serde(default = "no_settings")]
    pub settings: String,
}

fn no_settings() -> String {
    "{}".to_owned()
}

impl Deployment {
    /// The default deployment in `dir`: read-only rooted at `dir`, ceiling
    /// `workspace-write`, working directory `dir`, any root allowed.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Deployment {
            policy: SandboxPolicy::new(SandboxMode::ReadOnly, dir.clone()),
            max_mode: SandboxMode::WorkspaceWrite,
            workdir: dir,
            allowed_roots: vec![],
            limits: RunLimits::default(),
            max_network: Network::None,
            sockets: vec![],
            liftable: vec![],
            protected: vec![],
            deny_read: vec![],
            inspect: vec![],
            settings: no_settings(),
        }
    }
}

/// A narrower ceiling for some clients of a host (e.g. one uid of a
/// server's): each field set narrows the deployment's; none widens it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Ceiling {
    /// The widest mode these clients' runs may have.
    #[serde(default)]
    pub max_mode: Option<SandboxMode>,
    /// The widest network their grants may have.
    #[serde(default)]
    pub max_network: Option<Network>,
    /// Where their writable roots may be (each inside the deployment's
    /// allowed roots, when it has some).
    #[serde(default)]
    pub allowed_roots: Option<Vec<PathBuf>>,
    /// Paths hidden from their runs, besides the deployment's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_read: Vec<PathBuf>,
}

impl Deployment {
    /// This deployment under `ceiling`: the default policy keeps its mode
    /// only while within the narrower mode (else `read-only`) and its
    /// network only while within the narrower network (else `none`).
    /// Errors when `ceiling` would widen any ceiling.
    pub fn narrowed(&self, ceiling: &Ceiling) -> Result<Deployment, String> {
        let mut narrowed = self.clone();
        if let Some(mode) = ceiling.max_mode {
            narrowed.max_mode = mode;
            if narrowed.policy.mode > mode {
                narrowed.policy.mode = SandboxMode::ReadOnly;
            }
        }
        if let Some(network) = &ceiling.max_network {
            narrowed.max_network = network.clone();
            if !narrowed.policy.network.within(network) {
                narrowed.policy.network = Network::None;
            }
        }
        if let Some(roots) = &ceiling.allowed_roots {
            narrowed.allowed_roots = roots.clone();
        }
        for path in &ceiling.deny_read {
            if !narrowed.deny_read.contains(path) {
                narrowed.deny_read.push(path.clone());
            }
        }
        narrowed.within(self)?;
        Ok(narrowed)
    }

    /// Every ceiling of this deployment is within `host`'s: mode, network,
    /// allowed roots, sockets and liftable defaults. The error names the
    /// first that is wider.
    pub fn within(&self, host: &Deployment) -> Result<(), String> {
        if self.max_mode > host.max_mode {
            return Err(format!(
                "max_mode {} is wider than the host's {}",
                self.max_mode, host.max_mode
            ));
        }
        if !self.max_network.within(&host.max_network) {
            return Err("max_network is wider than the host's".to_owned());
        }
        if !host.allowed_roots.is_empty() {
            if self.allowed_roots.is_empty() {
                return Err("allowed_roots must be set: the host's are".to_owned());
            }
            for root in &self.allowed_roots {
                if !host.allowed_roots.iter().any(|a| root.starts_with(a)) {
                    return Err(format!(
                        "allowed root {} is outside the host's allowed roots",
                        root.display()
                    ));
                }
            }
        }
        if let Some(socket) = self.sockets.iter().find(|s| !host.sockets.contains(s)) {
            return Err(format!(
                "socket {} is not one the host exposes",
                socket.display()
            ));
        }
        if let Some(name) = self.liftable.iter().find(|n| !host.liftable.contains(n)) {
            return Err(format!("{name} is not liftable on the host"));
        }
        if let Some(path) = host.deny_read.iter().find(|p| !self.deny_read.contains(p)) {
            return Err(format!("{} is hidden on the host", path.display()));
        }
        Ok(())
    }
}

/// The number of processes a run may have at once unless the operator
/// says otherwise: enough for any build, far below a machine's pid space.
pub const DEFAULT_PIDS_LIMIT: u64 = 1024;

/// A run's resource limits (none: unbounded). Enforced by the run's own
/// cgroup where the host can make one, else by the `RLIMIT_NPROC` /
/// `RLIMIT_AS` fallback in cordon's launcher; [`LimitFacts`] says which.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RunLimits {
    /// Processes (and threads) alive at once.
    pub pids: Option<u64>,
    /// Memory in bytes (swap included where the kernel accounts it).
    pub memory_bytes: Option<u64>,
    /// Relative CPU weight, 1–10 000 (100: the kernel's default share).
    pub cpu_weight: Option<u64>,
}

impl Default for RunLimits {
    /// [`DEFAULT_PIDS_LIMIT`] processes; memory and CPU unbounded.
    fn default() -> Self {
        RunLimits {
            pids: Some(DEFAULT_PIDS_LIMIT),
            memory_bytes: None,
            cpu_weight: None,
        }
    }
}

impl RunLimits {
    /// No limit at all.
    pub const NONE: RunLimits = RunLimits {
        pids: None,
        memory_bytes: None,
        cpu_weight: None,
    };
}

/// What enforced a run's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LimitEnforcer {
    /// The run's own cgroup on the v1 hierarchy (`pids`, `memory`, `cpu`,
    /// `freezer` controllers).
    CgroupV1,
    /// The run's own cgroup on the unified (v2) hierarchy.
    CgroupV2,
    /// No cgroup: `RLIMIT_NPROC` (per user, and not binding on root) and
    /// `RLIMIT_AS` (per process), set by cordon's launcher for the command.
    Rlimit,
    /// Nothing: no cgroup and no launcher (an unconfined run, an
    /// operator's runner command).
    None,
}

/// A limit a run ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LimitKind {
    /// A fork or clone failed because the run had `pids` processes.
    Pids,
    /// The run reached its memory limit and the kernel killed a process
    /// of it.
    Memory,
}

/// The limits a run had, what enforced them and which it ran into.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitFacts {
    /// What enforced them.
    pub enforced_by: LimitEnforcer,
    /// The limits in force.
    #[serde(flatten)]
    pub limits: RunLimits,
    /// The limits the run reached (known with a cgroup only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exceeded: Vec<LimitKind>,
}

/// A fully-defaulted request, as resolved by the policy component and
/// canonicalised by the host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecSpec {
    /// The shell command line.
    pub command: String,
    /// Absolute working directory.
    pub workdir: PathBuf,
    /// Effective timeout.
    pub timeout_ms: u64,
    /// Entries laid over the scrubbed host environment, later wins.
    pub env: Vec<(String, String)>,
    /// The sandbox policy of the run (workspace root canonicalised).
    pub policy: SandboxPolicy,
}

/// A backend's message dialect: how its runner failures and its denials
/// look on stderr (case-insensitive substrings of one line).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Signatures {
    /// Lines meaning the runner itself failed.
    pub runner_failure: Vec<String>,
    /// The exit code a runner failure also needs, if the runner has one.
    pub runner_failure_exit: Option<i32>,
    /// Informational lines that are never a runner failure.
    pub runner_notices: Vec<String>,
    /// Lines meaning the sandbox denied a write.
    pub denial: Vec<String>,
}

/// The facts of one confinement, fixed when the host wrapped the argv.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WrapFacts {
    /// The backend.
    pub backend: Backend,
    /// Its enforcement.
    pub enforcement: Enforcement,
    /// Its message dialect.
    pub signatures: Signatures,
}

/// How a run was launched, as handed back to the policy's settle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaunchFacts {
    /// A background task rather than a foreground run.
    pub background: bool,
    /// The confinement; none for an unconfined launch.
    pub wrap: Option<WrapFacts>,
}

/// What the runner reported out of band.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunnerStatus {
    /// The runner started the command.
    Launched,
    /// The runner failed before the command started.
    Failed(String),
    /// No out-of-band report; classify by text.
    #[default]
    Unknown,
}

/// How a launched process ended, as observed by the host.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Outcome {
    /// Exit code; none when killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed the process.
    pub signal: Option<i32>,
    /// Killed because the timeout passed.
    pub timed_out: bool,
    /// Killed because the caller aborted.
    pub aborted: bool,
    /// The retained stderr tail, lossy UTF-8.
    pub stderr_tail: String,
    /// The runner's out-of-band report.
    pub runner_status: RunnerStatus,
}

/// The sandbox facts stamped on a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxFacts {
    /// The mode the run had.
    pub mode: SandboxMode,
    /// The sandbox denied a write.
    pub denied: bool,
    /// Enforcement of the confinement; absent when unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<Enforcement>,
    /// The runner failed (background tasks only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runner_failed: bool,
    /// Where a confined run's `denied` comes from: `kernel` — the run's
    /// denials were read from the kernel's audit records, `denials` is
    /// their list — or `text`, inferred from the exit and stderr's
    /// wording. Absent for an unconfined run (nothing to deny).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// The accesses the kernel refused the run (`evidence: kernel`; the
    /// first [`crate::denials::MAX_DENIALS`], each distinct).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<Denial>,
}

/// Where a run's `denied` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// The kernel's audit records of the run's Landlock domain.
    Kernel,
    /// The exit and stderr's wording (the policy's signatures).
    Text,
}

/// One access the kernel refused a run, as its audit record says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Denial {
    /// The rights refused, as the kernel names them (`fs.write_file`,
    /// `fs.make_reg`, `net.connect_tcp`, …).
    pub blockers: Vec<String>,
    /// The file — or the directory an entry was to be made or removed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The address of a refused connection (`host:port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// What refused it: `landlock` (the run's Landlock domain).
    pub by: String,
}

/// What keeps a spill file alive: the process layer's handle on it. The
/// file is deleted when the last handle is dropped, unless kept.
pub trait SpillHandle: fmt::Debug + Send + Sync {
    /// Where the file is.
    fn path(&self) -> &Path;
    /// Keep the file after the last handle is gone; the caller deletes it.
    fn keep(&self) -> &Path;
}

/// One output stream of a finished run.
///
/// When the stream outgrew its tail, `spill_path` names a file with the
/// complete stream (up to the spill limit). The file lives as long as this
/// value (or a clone) does; [`StreamOutput::keep_spill`] keeps it for good.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamOutput {
    /// The retained tail, decoded as lossy UTF-8.
    pub text: String,
    /// Output was dropped from the front to keep the tail bounded.
    pub truncated: bool,
    /// A file with the complete stream, when it was spilled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_path: Option<PathBuf>,
    #[serde(skip)]
    spill: Option<Arc<dyn SpillHandle>>,
}

impl StreamOutput {
    /// A stream's output: its tail text, whether it was truncated, and the
    /// handle of its spill file (kept alive as long as this value).
    pub fn new(text: String, truncated: bool, spill: Option<Arc<dyn SpillHandle>>) -> Self {
        StreamOutput {
            text,
            truncated,
            spill_path: spill.as_ref().map(|s| s.path().to_path_buf()),
            spill,
        }
    }

    /// Keep the spill file after this value is dropped; the caller then
    /// owns (and deletes) it.
    pub fn keep_spill(&self) -> Option<&Path> {
        self.spill.as_deref().map(SpillHandle::keep)
    }
}

impl PartialEq for StreamOutput {
    fn eq(&self, other: &Self) -> bool {
        (&self.text, self.truncated, &self.spill_path)
            == (&other.text, other.truncated, &other.spill_path)
    }
}

impl Eq for StreamOutput {}

/// The result of a foreground run: facts, never an interpretation. A
/// nonzero exit, a timeout or a denial is a result, not an error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecResult {
    /// Exit code; none when the command died by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended the command (by name in JSON: `"SIGKILL"`).
    #[serde(with = "signal_name")]
    #[schemars(with = "Option<String>")]
    pub signal: Option<i32>,
    /// The host killed the command at its timeout.
    pub timed_out: bool,
    /// The caller aborted the command.
    pub aborted: bool,
    /// The effective timeout.
    pub timeout_ms: u64,
    /// Standard output.
    pub stdout: StreamOutput,
    /// Standard error.
    pub stderr: StreamOutput,
    /// What the sandbox did, as classified by the policy component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxFacts>,
    /// The run's resource limits: what enforced them, which it reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitFacts>,
    /// The grant a confined run had, as the host enforced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantFacts>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operators_inspect_list_marks_what_a_grant_allows_and_adds_nothing_wider() {
        let ep = |s: &str| s.parse::<Endpoint>().unwrap();
        let mut grant = Network::Allow(vec![
            ep("*.github.com:443"),
            ep("registry.npmjs.org:443"),
            ep("example.com:443"),
        ]);
        let before = grant.clone();
        grant.inspect_where(&[
            ep("api.github.com:443"),
            ep("*.npmjs.org:443"),
            ep("other.test:443"),
        ]);
        let Network::Allow(marked) = &grant else {
            unreachable!()
        };
        let shown: Vec<(String, bool)> = marked
            .iter()
            .map(|e| (format!("{}:{}", e.host, e.port.unwrap()), e.inspect))
            .collect();
        assert_eq!(
            shown,
            [
                ("*.github.com:443".to_owned(), false),
                ("registry.npmjs.org:443".to_owned(), true),
                ("example.com:443".to_owned(), false),
                ("api.github.com:443".to_owned(), true),
            ]
        );
        assert!(
            grant.within(&before) && before.within(&grant),
            "allows the same"
        );
        assert!(grant.inspects("api.github.com", 443));
        assert!(!grant.inspects("gist.github.com", 443));
        assert!(!grant.inspects("other.test", 443));
        let mut twice = grant.clone();
        twice.inspect_where(&[ep("api.github.com:443")]);
        assert_eq!(twice, grant, "marking again adds nothing");
    }

    #[test]
    fn networks_order_by_what_they_allow() {
        let ep = |s: &str| s.parse::<Endpoint>().unwrap();
        let npm = Network::Allow(vec![ep("*.npmjs.org:443")]);
        let registry = Network::Allow(vec![ep("registry.npmjs.org:443")]);
        assert!(registry.within(&npm));
        assert!(!npm.within(&registry));
        assert!(!Network::Allow(vec![ep("registry.npmjs.org:80")]).within(&npm));
        assert!(!Network::Allow(vec![ep("evilnpmjs.org:443")]).within(&npm));
        assert!(Network::None.within(&Network::None));
        assert!(npm.within(&Network::Full));
        assert!(!Network::Full.within(&npm));
        assert!(!npm.within(&Network::None));
        assert!(
            Network::Allow(vec![ep("github.com:22")])
                .within(&Network::Allow(vec![ep("GitHub.com")]))
        );
        assert_eq!(ep("github.com:22").to_string(), "github.com:22");
        assert_eq!(ep("host").port, None);
        assert!("a:99999".parse::<Endpoint>().is_err());
        assert!("*:1".parse::<Endpoint>().is_err());
        assert!(npm.allows("registry.npmjs.org", 443));
        assert!(!npm.allows("registry.npmjs.org", 80));
        assert!(!npm.allows("npmjs.org.evil.com", 443));
        assert!(Network::Full.allows("x", 1) && !Network::None.allows("x", 1));
    }

    #[test]
    fn modes_order_by_width_and_round_trip_their_names() {
        assert!(SandboxMode::ReadOnly < SandboxMode::WorkspaceWrite);
        assert!(SandboxMode::WorkspaceWrite < SandboxMode::DangerFullAccess);
        for mode in SandboxMode::ALL {
            assert_eq!(mode.as_str().parse::<SandboxMode>(), Ok(mode));
            assert_eq!(
                serde_json::to_string(&mode).unwrap(),
                format!("\"{}\"", mode.as_str())
            );
        }
        assert!("full".parse::<SandboxMode>().is_err());
    }
}

/// A signal number in JSON by its name (`"SIGKILL"`), as the seed reports
/// it; a number this platform has no name for is `"SIG<N>"`. Reading
/// accepts a name or a number.
pub mod signal_name {
    use serde::{Deserialize, Deserializer, Serializer};

    /// The name of signal `number` on this platform.
    pub fn of(number: i32) -> String {
        nix::sys::signal::Signal::try_from(number)
            .map(|signal| signal.as_str().to_owned())
            .unwrap_or_else(|_| format!("SIG{number}"))
    }

    /// The number of signal `name` (`SIGKILL`, `KILL` or `SIG<N>`).
    pub fn number(name: &str) -> Option<i32> {
        let full = if name.starts_with("SIG") {
            name.to_owned()
        } else {
            format!("SIG{name}")
        };
        if let Ok(signal) = full.parse::<nix::sys::signal::Signal>() {
            return Some(signal as i32);
        }
        full.strip_prefix("SIG")?.parse().ok()
    }

    /// Serialize as the name.
    pub fn serialize<S: Serializer>(
        signal: &Option<i32>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match signal {
            Some(number) => serializer.serialize_str(&of(*number)),
            None => serializer.serialize_none(),
        }
    }

    /// Read a name or a number.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<i32>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Number(i32),
            Name(String),
        }
        match Option::<Either>::deserialize(deserializer)? {
            None => Ok(None),
            Some(Either::Number(number)) => Ok(Some(number)),
            Some(Either::Name(name)) => number(&name)
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown signal {name:?}"))),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn signals_are_named_and_names_read_back() {
            assert_eq!(of(9), "SIGKILL");
            assert_eq!(of(15), "SIGTERM");
            assert_eq!(of(1000), "SIG1000");
            assert_eq!(number("SIGKILL"), Some(9));
            assert_eq!(number("TERM"), Some(15));
            assert_eq!(number("SIG1000"), Some(1000));
            assert_eq!(number("SIGNOPE"), None);
        }
    }
}

/// What happened to one request, as an agent's model is told it (the
/// `render` export of a policy component, `cordon mcp`).
#[derive(Clone, Debug)]
pub enum Told {
    /// It ran.
    Finished(Box<ExecResult>),
    /// The policy refused it before it ran: the reason.
    Refused(String),
    /// It waits for a person's approval: the reason.
    NeedsApproval(String),
    /// A person declined the approval it asked for: the reason.
    Declined(String),
    /// No result: the stable error code and the host's message.
    Failed {
        /// The stable code (`SANDBOX_UNAVAILABLE`, …).
        code: String,
        /// The host's message.
        message: String,
    },
}

/// The call of a run in which a component failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// `resolve`: defaulting the request.
    Resolve,
    /// `plan`: building and confining the argv.
    Plan,
    /// `settle`: classifying the finished run.
    Settle,
    /// `connect`: deciding one connection of a run.
    Connect,
    /// `render`: what an agent's model is told of an outcome.
    Render,
    /// `request`: deciding one HTTP request of a run.
    Request,
}

impl Phase {
    /// The phase's name: `resolve`, `plan`, `settle`, `connect`, `render`
    /// or `request`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Resolve => "resolve",
            Phase::Plan => "plan",
            Phase::Settle => "settle",
            Phase::Connect => "connect",
            Phase::Render => "render",
            Phase::Request => "request",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
