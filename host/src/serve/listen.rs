//! The socket transport: `cordon serve --listen unix:PATH` (or a socket
//! systemd passes in), many clients at once, each connection a session.
//!
//! Why a Unix socket and its peer's credentials: a platform runs one
//! server for many agents, and the kernel tells the server who each client
//! is (`SO_PEERCRED`: uid, gid, pid) — no token to leak. The operator's
//! [`Access`] says which uids and gids may connect at all and which get a
//! narrower ceiling than the host's; a refused client gets one `FORBIDDEN`
//! line and the connection closes.
//!
//! The socket file is created with a umask that leaves it `0600` from its
//! first instant (no window where others may connect), then given its
//! group and mode; it is removed when the listener stops. A stale socket
//! (nobody accepting) is replaced; any other file at the path is refused.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinSet;

use super::Server;
use super::protocol::{self, RpcError};
use crate::error::RunError;
use crate::host::Host;
use crate::model::Ceiling;
use crate::process::identity::Identity;

/// Who is on the other end of a socket connection, as the kernel says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Peer {
    /// The client's user id.
    pub uid: u32,
    /// The client's group id.
    pub gid: u32,
    /// The client's process id, when the kernel gives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
}

/// Which clients a socket listener serves, and under which ceiling
/// (`[serve]` in `cordon.toml`). Root is always admitted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Access {
    /// Users who may connect (the server's own user by default).
    pub uids: Vec<u32>,
    /// Groups whose members (by primary gid) may connect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gids: Vec<u32>,
    /// A narrower ceiling for some users' sessions.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ceilings: BTreeMap<u32, Ceiling>,
    /// Whom some users' runs are, on a server running as root (the
    /// default for a client not listed: the client itself).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub run_as: BTreeMap<u32, RunAs>,
}

/// Whom a socket client's runs are, on a server running as root
/// (`[serve.uid.N] run_as`). A server running as another user runs every
/// client's commands as its own user: it cannot be anyone else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RunAs {
    /// The client's own uid, gid and groups (`SO_PEERCRED` and the user
    /// database).
    #[default]
    Client,
    /// The server's own user (root): the operator's explicit choice.
    Server,
    /// Another user the operator maps the client to (its uid, with the
    /// user database's gid and groups).
    User(u32),
}

impl Access {
    /// Whom `peer`'s runs are: `None` for the server's own user. A root
    /// server runs a client as the client unless the operator said
    /// otherwise; any other server runs everyone as itself.
    pub fn identity(&self, peer: &Peer) -> Result<Option<Identity>, RpcError> {
        if !nix::unistd::geteuid().is_root() || peer.uid == 0 {
            return Ok(None);
        }
        match self.run_as.get(&peer.uid).copied().unwrap_or_default() {
            RunAs::Client => Ok(Some(Identity::of_user(peer.uid, peer.gid))),
            RunAs::Server => Ok(None),
            RunAs::User(0) => Ok(None),
            RunAs::User(uid) => Identity::of_uid(uid).map(Some).map_err(|why| {
                RpcError::forbidden(format!(
                    "the operator maps uid {} to uid {uid} ([serve.uid.{}] run_as), but {why}",
                    peer.uid, peer.uid
                ))
            }),
        }
    }
}

impl Access {
    /// Only the server's own user (and root).
    pub fn owner() -> Self {
        Access {
            uids: vec![nix::unistd::geteuid().as_raw()],
            ..Access::default()
        }
    }

    /// May `peer` connect? The error says who may.
    pub fn admits(&self, peer: &Peer) -> Result<(), RpcError> {
        if peer.uid == 0 || self.uids.contains(&peer.uid) || self.gids.contains(&peer.gid) {
            return Ok(());
        }
        let mut error = RpcError::forbidden(format!(
            "uid {} (gid {}) may not use this server; it admits uids {:?} and gids {:?} \
             (the operator's [serve] allowed_uids and allowed_gids)",
            peer.uid, peer.gid, self.uids, self.gids
        ));
        error.data["uid"] = serde_json::json!(peer.uid);
        Err(error)
    }
}

/// Where a listener listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAt {
    /// A socket file cordon creates (`unix:PATH`).
    Unix(PathBuf),
    /// The socket systemd passed in (`LISTEN_FDS`; fd 3).
    Systemd,
}

impl std::str::FromStr for ListenAt {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "systemd" {
            return Ok(ListenAt::Systemd);
        }
        match text.strip_prefix("unix:") {
            Some(path) if !path.is_empty() => Ok(ListenAt::Unix(PathBuf::from(path))),
            _ => Err(format!(
                "{text:?} is not an address to listen on; use unix:/path/to/socket or systemd"
            )),
        }
    }
}

/// How a socket file is made.
#[derive(Clone, Debug)]
pub struct SocketMode {
    /// Its permission bits (default `0o600`).
    pub mode: u32,
    /// Its group, when members of a group may connect.
    pub group: Option<u32>,
}

impl Default for SocketMode {
    fn default() -> Self {
        SocketMode {
            mode: 0o600,
            group: None,
        }
    }
}

/// A bound listening socket, not yet served; removes its file on drop.
#[derive(Debug)]
pub struct Bound {
    listener: std::os::unix::net::UnixListener,
    /// The socket file cordon created (none for systemd's).
    path: Option<PathBuf>,
}

impl Bound {
    /// Bind `at`. Call before any thread that creates files starts: the
    /// socket is created under a umask of `0177`.
    pub fn bind(at: &ListenAt, mode: &SocketMode) -> io::Result<Bound> {
        match at {
            ListenAt::Systemd => Ok(Bound {
                listener: systemd_listener()?,
                path: None,
            }),
            ListenAt::Unix(path) => {
                // sun_path holds 108 bytes, the last a NUL.
                let length = path.as_os_str().len();
                if length > 107 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "cannot listen on {}: a Unix socket's path is at most 107 bytes and \
                             this one has {length}; choose a shorter path (e.g. under /run)",
                            path.display()
                        ),
                    ));
                }
                clear_stale(path)?;
                // Bound, listening, owned and moded under a private name
                // first, then renamed into place: a client that waits for
                // the file never finds it before it accepts, nor with the
                // wrong group.
                let private = path.with_file_name(format!(".cordon-{}.sock", std::process::id()));
                let staged = match private.as_os_str().len() <= 107 {
                    true => private,
                    false => path.clone(),
                };
                let cannot = |err: io::Error| {
                    io::Error::new(
                        err.kind(),
                        format!("cannot listen on {}: {err}", path.display()),
                    )
                };
                if staged != *path {
                    let _ = std::fs::remove_file(&staged);
                }
                let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
                let bound = std::os::unix::net::UnixListener::bind(&staged);
                nix::sys::stat::umask(old);
                let listener = bound.map_err(cannot)?;
                let published = (|| {
                    if let Some(gid) = mode.group {
                        std::os::unix::fs::chown(&staged, None, Some(gid))?;
                    }
                    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode.mode))?;
                    match staged == *path {
                        true => Ok(()),
                        false => rename_no_replace(&staged, path),
                    }
                })();
                if let Err(err) = published {
                    let _ = std::fs::remove_file(&staged);
                    return Err(cannot(err));
                }
                Ok(Bound {
                    listener,
                    path: Some(path.clone()),
                })
            }
        }
    }

    /// The socket file, when cordon made it.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The listening socket, for the runtime (call inside one).
    pub fn listener(&self) -> io::Result<UnixListener> {
        let listener = self.listener.try_clone()?;
        listener.set_nonblocking(true)?;
        UnixListener::from_std(listener)
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A socket at `path` that nobody accepts on is stale: remove it. Any
/// other file there is refused.
fn clear_stale(path: &Path) -> io::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not a socket; remove it or listen elsewhere",
                path.display()
            ),
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("another server is listening on {}", path.display()),
        )),
        Err(_) => std::fs::remove_file(path),
    }
}

/// The listening socket systemd passed as fd 3 (`LISTEN_PID` must be us).
fn systemd_listener() -> io::Result<std::os::unix::net::UnixListener> {
    const FIRST: RawFd = 3;
    let ours = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|pid| pid.parse::<u32>().ok())
        == Some(std::process::id());
    let count = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    if !ours || count < 1 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "--listen systemd: no socket was passed (LISTEN_PID/LISTEN_FDS); start cordon from \
             a systemd .socket unit, or use --listen unix:PATH",
        ));
    }
    // SAFETY: systemd passes fd 3 open to this process; checked to be a
    // Unix socket below before use.
    let listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(FIRST) };
    listener.local_addr().map_err(|err| {
        io::Error::new(
            err.kind(),
            format!("--listen systemd: fd 3 is not a Unix socket: {err}"),
        )
    })?;
    // SAFETY: removing the variables that named fd 3 for us; no other
    // thread reads the environment yet.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    Ok(listener)
}

impl Server {
    /// Whom [`Server::listen`] admits (default: [`Access::owner`]).
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = Some(access);
        self
    }

    /// Serve every client of `bound` until the stopper is cancelled: each
    /// connection a session of the host (under its uid's ceiling, when the
    /// operator set one), at most `max_connections` at once (a client past
    /// it gets `BUSY` and the connection closes). Returns once every
    /// connection has ended. Must run inside a tokio runtime.
    pub async fn listen(self: &Arc<Self>, bound: Bound) -> io::Result<()> {
        let listener = bound.listener()?;
        let access = self.access.clone().unwrap_or_else(Access::owner);
        let mut connections = JoinSet::new();
        loop {
            let accepted = tokio::select! {
                biased;
                () = self.stop.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            while connections.try_join_next().is_some() {}
            let Ok((stream, _)) = accepted else {
                // EMFILE and the like: let the load pass, keep listening.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let server = self.clone();
            let access = access.clone();
            connections.spawn(async move { server.accepted(stream, &access).await });
        }
        while connections.join_next().await.is_some() {}
        self.clear_detached().await;
        drop(bound);
        Ok(())
    }

    /// One accepted connection: check who it is, then serve it.
    async fn accepted(&self, stream: UnixStream, access: &Access) {
        if self.connections.load(Ordering::Acquire) >= self.options.max_connections {
            let busy = RunError::Busy {
                limit: "maxConnections",
                max: self.options.max_connections,
            };
            return refuse(stream, busy.into()).await;
        }
        let (session, peer) = match admit(&self.host, access, &stream) {
            Ok(admitted) => admitted,
            Err(error) => return refuse(stream, error).await,
        };
        let (read, write) = stream.into_split();
        let _ = self.serve_session(session, Some(peer), read, write).await;
    }
}

/// Who is on the other end of `stream` and the session they get: the
/// operator's `access` decides whether they are served at all, and under
/// which ceiling. Every socket surface (`serve`, `mcp`) admits this way.
pub fn admit(
    host: &Host,
    access: &Access,
    stream: &UnixStream,
) -> Result<(crate::session::Session, Peer), RpcError> {
    let cred = stream
        .peer_cred()
        .map_err(|err| RpcError::forbidden(format!("the peer's credentials are unknown: {err}")))?;
    let peer = Peer {
        uid: cred.uid(),
        gid: cred.gid(),
        pid: cred.pid(),
    };
    refuse_own_run(&peer)?;
    access.admits(&peer)?;
    let session = match access.ceilings.get(&peer.uid) {
        None => host.session(),
        Some(ceiling) => session_under(host, ceiling)?,
    };
    let label = match peer.pid {
        Some(pid) => format!("uid {} gid {} pid {pid}", peer.uid, peer.gid),
        None => format!("uid {} gid {}", peer.uid, peer.gid),
    };
    let session = match access.identity(&peer)? {
        Some(identity) => session.with_identity(identity),
        None => session,
    };
    Ok((session.with_peer(label).approved_through("client"), peer))
}

/// Refuse a peer that is one of this host's own runs (it descends from
/// this process): a confined command must not drive the server that
/// confined it into a wider run. A peer the kernel shows in no PID
/// namespace of ours (pid 0) is outside every run.
fn refuse_own_run(peer: &Peer) -> Result<(), RpcError> {
    let Some(pid) = peer.pid.filter(|pid| *pid > 0) else {
        return Ok(());
    };
    let server = std::process::id() as i32;
    match crate::process::lineage::descends_from(pid, server) {
        Ok(false) => Ok(()),
        Ok(true) => Err(RpcError::forbidden(format!(
            "pid {pid} is a process of one of this server's own runs; a run may not use the \
             server that confines it"
        ))),
        Err(err) => Err(RpcError::forbidden(format!(
            "cannot tell whether pid {pid} is one of this server's runs ({err}); refused"
        ))),
    }
}

/// A session of `host` under `ceiling`.
fn session_under(host: &Host, ceiling: &Ceiling) -> Result<crate::session::Session, RpcError> {
    host.deployment()
        .narrowed(ceiling)
        .and_then(|deployment| host.session_within(deployment))
        .map_err(|why| RpcError::internal(format!("the operator's ceiling for this uid: {why}")))
}

/// Tell a client why it is not served (one JSON-RPC error line), and
/// close. What the client sent
/// meanwhile is read (briefly, boundedly) before the close: closing a
/// socket with unread input resets it, and the reset would destroy the
/// error line before the client reads it.
pub async fn refuse(mut stream: UnixStream, error: RpcError) {
    use tokio::io::AsyncReadExt;
    let mut line = protocol::failure(None, error);
    line.push('\n');
    let _ = tokio::time::timeout(super::FLUSH_BOUND, stream.write_all(line.as_bytes())).await;
    let _ = stream.shutdown().await;
    let drain = async {
        let mut sink = [0u8; 4096];
        let mut left = 64usize << 10;
        while let Ok(n @ 1..) = stream.read(&mut sink).await {
            left = left.saturating_sub(n);
            if left == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
}

/// Rename `from` to `to`, failing (`EEXIST`) rather than replacing
/// anything there (a server that came up meanwhile keeps its socket): a
/// hard link is made without replacing, then the private name removed.
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_or_say_what_is_expected() {
        assert_eq!(
            "unix:/run/cordon.sock".parse::<ListenAt>().unwrap(),
            ListenAt::Unix("/run/cordon.sock".into())
        );
        assert_eq!("systemd".parse::<ListenAt>().unwrap(), ListenAt::Systemd);
        let err = "tcp:127.0.0.1:80".parse::<ListenAt>().unwrap_err();
        assert!(err.contains("unix:/path/to/socket"), "{err}");
        assert!("unix:".parse::<ListenAt>().is_err());
    }

    #[test]
    fn root_the_listed_uids_and_gids_are_admitted() {
        let access = Access {
            uids: vec![1000],
            gids: vec![50],
            ..Access::default()
        };
        let peer = |uid, gid| Peer {
            uid,
            gid,
            pid: None,
        };
        assert!(access.admits(&peer(0, 0)).is_ok());
        assert!(access.admits(&peer(1000, 1000)).is_ok());
        assert!(access.admits(&peer(1001, 50)).is_ok());
        let err = access.admits(&peer(1001, 1001)).unwrap_err();
        assert_eq!(err.data["code"], "FORBIDDEN");
        assert_eq!(err.data["uid"], 1001);
    }

    #[test]
    fn a_path_too_long_for_a_socket_is_named_with_the_limit() {
        let long = PathBuf::from(format!("/run/{}.sock", "x".repeat(120)));
        let err = Bound::bind(&ListenAt::Unix(long), &SocketMode::default()).unwrap_err();
        assert!(err.to_string().contains("at most 107 bytes"), "{err}");
    }

    #[test]
    fn the_socket_appears_listening_and_moded_and_nothing_else_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cordon.sock");
        let mode = SocketMode {
            mode: 0o660,
            ..SocketMode::default()
        };
        let bound = Bound::bind(&ListenAt::Unix(path.clone()), &mode).unwrap();
        std::os::unix::net::UnixStream::connect(&path).expect("it accepts once it is there");
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o660);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "the private name is gone");
        drop(bound);
        assert!(!path.exists());
    }

    #[test]
    fn a_stale_socket_is_replaced_and_another_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let bound = Bound::bind(&ListenAt::Unix(path.clone()), &SocketMode::default()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A live one is not taken over.
        let err = Bound::bind(&ListenAt::Unix(path.clone()), &SocketMode::default()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        drop(bound);
        assert!(!path.exists(), "the socket file goes with the listener");
        std::fs::write(&path, "x").unwrap();
        let err = Bound::bind(&ListenAt::Unix(path), &SocketMode::default()).unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
    }
}
