//! The allow-list proxy: how a run whose network is an allow-list reaches
//! exactly the endpoints its policy component lets it, connection by
//! connection.
//!
//! Such a run has no network of its own (bwrap gives it a private network
//! namespace). The host listens on a unix socket of its own, one per run;
//! bwrap binds that socket into the sandbox, where cordon's init bridges
//! `127.0.0.1:`[`PORT`] to it, and the command's `HTTP_PROXY`,
//! `HTTPS_PROXY` and `ALL_PROXY` point there. Every connection that comes
//! through names its destination — an HTTP `CONNECT host:port`, a plain
//! HTTP request's absolute URI, or a SOCKS5 `CONNECT` — and the host
//! checks it against the run's checked grant and the operator's ceiling
//! ([`Gate`]) before it asks the component (`connect`, bounded like every
//! call), which can only narrow them; names are resolved here, on the
//! host, never inside, and an internal address (the host's own, link-local
//! such as the cloud metadata service, private), literal or resolved, is
//! refused unless the operator's `max_network` names it. A refusal answers
//! the client at once (HTTP 403 with the reason, SOCKS5 "not allowed by
//! ruleset") and is recorded for the run's facts. One run's proxy carries
//! at most [`MAX_CONNECTIONS`] at once and gives each client
//! [`HEAD_TIMEOUT`] to name its destination, so no run can hold the
//! host's file descriptors.
//!
//! A tunnel (`CONNECT`, SOCKS5) is decided once, by the first request of
//! its connection, and then carries the client's bytes untouched. Plain
//! HTTP is decided request by request ([`forward`]): hyper reads and frames
//! every request of a kept-alive connection, each target is decided and
//! each `Host` header checked against it before anything is sent. The
//! SOCKS5 and `CONNECT` heads are read here, small and strict.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use std::net::IpAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener};

use crate::model::{DecidedRequest, HttpRequest, MAX_DECIDED_REQUESTS, Network, RequestVerdict};

mod forward;
pub mod inspect;
mod requests;

pub use crate::sandbox::launcher::PROXY_PORT as PORT;

/// The longest HTTP request head the proxy reads before it decides.
const MAX_HEAD: usize = 16 * 1024;

/// Decides one connection: the component's answer for `host:port`.
pub type Decide = Arc<dyn Fn(&str, u16) -> Result<(), String> + Send + Sync>;

/// Decides one HTTP request the proxy can read (plain HTTP, or inside an
/// inspected connection): the component's verdict (a failed call is a
/// refusal with its reason).
pub type DecideRequest = Arc<dyn Fn(&HttpRequest) -> RequestVerdict + Send + Sync>;

/// What one run's proxy records for the run's facts and the audit log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The connections (and requests) refused, in order.
    pub refused: Vec<Refused>,
    /// The requests the component decided, the first
    /// [`MAX_DECIDED_REQUESTS`] of them.
    pub requests: Vec<DecidedRequest>,
    /// How many more were decided.
    pub requests_unlisted: u64,
    /// What the run's approver answered for each request put to it (each
    /// is put once per run).
    answered: std::collections::HashMap<crate::model::ApprovedRequest, bool>,
}

impl Recorded {
    /// Record one decided request, or count it past the list's bound.
    fn decided(&mut self, request: DecidedRequest) {
        if self.requests.len() < MAX_DECIDED_REQUESTS {
            self.requests.push(request);
        } else {
            self.requests_unlisted += 1;
        }
    }
}

/// How long a client has to name its destination (an HTTP request head,
/// a SOCKS5 greeting and request) before the proxy closes it.
const HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The most connections one run's proxy carries at once: a run that opens
/// more has the excess closed at once, so it cannot take the host's file
/// descriptors (each carried connection holds two).
pub const MAX_CONNECTIONS: usize = 256;

/// How one run's proxy decides a connection: the host's own bounds first —
/// the run's checked grant and the operator's ceiling, whatever the
/// component answers — then the component, which may only narrow them.
#[derive(Clone)]
pub struct Gate {
    /// The network of the run's checked grant.
    pub grant: Network,
    /// The operator's ceiling (`max_network`).
    pub ceiling: Network,
    /// The component's answer.
    pub decide: Decide,
    /// The component's verdict on each request the proxy can read; none:
    /// a request its connection allowed is sent as it is (a component
    /// whose world has no `request`).
    pub decide_request: Option<DecideRequest>,
    /// The requests a person approved for the run: one the component asks
    /// about is sent only when it is among them.
    pub approved_requests: Vec<crate::model::ApprovedRequest>,
    /// Who to ask, while the run lasts, about an asked request that is not
    /// among `approved_requests`; none: it is refused.
    pub approver: Option<crate::model::RequestApprover>,
    /// The run's credentials: the placeholders it holds, replaced (or a
    /// credential attached) only on requests to a bound endpoint.
    pub credentials: Option<Arc<crate::credentials::RunCredentials>>,
    /// How the endpoints the grant marks `inspect` are inspected; none:
    /// every tunnel is carried untouched.
    pub inspection: Option<Inspection>,
}

/// What the proxy inspects TLS with: the run's authority, and the trust
/// the upstreams are verified with.
#[derive(Clone, Debug)]
pub struct Inspection {
    /// The run's certificate authority (its key in the host's memory).
    pub authority: Arc<inspect::Authority>,
    /// The upstreams' verification.
    pub trust: inspect::Trust,
}

impl Gate {
    /// How `host:port` is inspected, when the grant marks it.
    fn inspection(&self, host: &str, port: u16) -> Option<&Inspection> {
        self.inspection
            .as_ref()
            .filter(|_| self.grant.inspects(host, port))
    }

    /// The host's bounds for `host:port`: within the grant and the ceiling.
    fn bounds(&self, host: &str, port: u16) -> Result<(), String> {
        if !self.grant.allows(host, port) {
            return Err(format!("{host}:{port} is not in this run's network grant"));
        }
        if !self.ceiling.allows(host, port) {
            return Err(format!(
                "{host}:{port} is not within the operator's max_network"
            ));
        }
        Ok(())
    }

    /// Whether the operator's ceiling names `host` itself (not through a
    /// wildcard) for `port`: only then may it be an internal address.
    fn named_by_operator(&self, host: &str, port: u16) -> bool {
        let Network::Allow(endpoints) = &self.ceiling else {
            return false;
        };
        let wanted = host.trim_start_matches('[').trim_end_matches(']');
        endpoints.iter().any(|e| {
            let named = match (e.host.parse::<IpAddr>(), wanted.parse::<IpAddr>()) {
                (Ok(mine), Ok(theirs)) => mine == theirs,
                _ => !e.host.starts_with("*.") && e.host.eq_ignore_ascii_case(wanted),
            };
            named && e.port.is_none_or(|p| p == port)
        })
    }
}

pub use crate::model::RefusedConnection as Refused;

/// The place a run's proxy listens at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A unix socket in a host-only directory, bound into a bwrap sandbox
    /// and bridged there to its loopback's [`PORT`].
    Socket(PathBuf),
    /// A port of the host's loopback, its listener bound ahead: a Landlock
    /// run, in the host's network namespace, connects to it (and to no
    /// other TCP port).
    Loopback(u16),
}

/// Where a run's proxy listens, holding that place from the moment a wrap
/// names it: the fresh socket's directory, or the loopback listener bound
/// ahead. Clones share the hold; when the last clone goes without a proxy
/// ever started there (a plan the host refused, a runner started ahead, a
/// run that failed before it spawned), the place is given back — a wrap
/// never leaks a directory or a listening port, however many a component
/// has the host confine.
#[derive(Clone, Debug)]
pub struct ProxyAt {
    place: Place,
    hold: Arc<Hold>,
    /// TLS inspection, when the grant marks an endpoint for it.
    inspecting: Option<Arc<Inspecting>>,
}

/// A run's TLS inspection from the moment its wrap names it: the authority
/// and trust, and the bundle written for its command (removed, with its
/// directory once empty, when the last holder goes).
#[derive(Debug)]
struct Inspecting {
    inspection: Inspection,
    bundle: PathBuf,
}

impl Drop for Inspecting {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.bundle);
        if let Some(dir) = self.bundle.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A new 0700 directory `PREFIX-PID-N-NANOS` in the host's temporary
/// directory.
fn fresh_dir(prefix: &str) -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}-{nanos:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

impl PartialEq for ProxyAt {
    fn eq(&self, other: &Self) -> bool {
        self.place == other.place
    }
}

impl Eq for ProxyAt {}

/// What a [`ProxyAt`] holds until a proxy starts there.
#[derive(Debug)]
struct Hold {
    place: Place,
    /// A proxy started at the place: it owns it now (and cleans it up).
    started: std::sync::atomic::AtomicBool,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.started.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        match &self.place {
            Place::Loopback(port) => {
                reserved()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(port);
            }
            Place::Socket(path) => {
                if let Some(dir) = path.parent() {
                    let _ = std::fs::remove_dir(dir);
                }
            }
        }
    }
}

impl ProxyAt {
    fn holding(place: Place) -> Self {
        ProxyAt {
            hold: Arc::new(Hold {
                place: place.clone(),
                started: false.into(),
            }),
            place,
            inspecting: None,
        }
    }

    /// A fresh socket path for one run's proxy, in a new 0700 directory
    /// of the host's temporary directory.
    pub fn fresh_socket() -> io::Result<Self> {
        let dir = fresh_dir("cordon-proxy")?;
        Ok(Self::holding(Place::Socket(dir.join("proxy.sock"))))
    }

    /// This place, inspecting the TLS of the endpoints the grant marks: a
    /// fresh authority (its key in memory only), the host's trust for the
    /// upstreams, and the bundle the command trusts written beside the
    /// socket (a loopback place: in a fresh 0700 directory of its own),
    /// readable by the command's user.
    pub fn inspecting(mut self) -> io::Result<Self> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt;
        let unready = |why: String| io::Error::other(format!("no TLS inspection: {why}"));
        let authority = inspect::Authority::new().map_err(|err| unready(err.to_string()))?;
        let trust = inspect::Trust::host().map_err(unready)?;
        let dir = match &self.place {
            Place::Socket(path) => path.parent().map(PathBuf::from),
            Place::Loopback(_) => Some(fresh_dir("cordon-ca")?),
        };
        let bundle = dir
            .ok_or_else(|| io::Error::other("the proxy's place has no directory"))?
            .join("ca-bundle.pem");
        let inspecting = Inspecting {
            bundle,
            inspection: Inspection {
                authority: Arc::new(authority),
                trust,
            },
        };
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&inspecting.bundle)?
            .write_all(inspecting.inspection.authority.bundle().as_bytes())?;
        self.inspecting = Some(Arc::new(inspecting));
        Ok(self)
    }

    /// This place, inspecting TLS ([`ProxyAt::inspecting`]) when any of
    /// `endpoints` is marked `inspect`; as it is otherwise.
    pub fn inspecting_marked(self, endpoints: &[crate::model::Endpoint]) -> io::Result<Self> {
        match endpoints.iter().any(|e| e.inspect) {
            true => self.inspecting(),
            false => Ok(self),
        }
    }

    /// How this place's proxy inspects TLS, when the grant marks endpoints.
    pub fn inspection(&self) -> Option<&Inspection> {
        self.inspecting.as_deref().map(|i| &i.inspection)
    }

    /// The certificate bundle the command trusts, when its TLS is inspected.
    pub fn bundle(&self) -> Option<&std::path::Path> {
        self.inspecting.as_deref().map(|i| i.bundle.as_path())
    }

    /// A port of the host's loopback for a run's proxy: the listener is
    /// bound now (so the port is the run's), and [`Proxy::start`] takes it.
    pub fn reserve_loopback() -> io::Result<Self> {
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        reserved()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(port, listener);
        Ok(Self::holding(Place::Loopback(port)))
    }

    /// Hand a started proxy's socket (and its private directory) to the
    /// user `uid`/`gid` whose run reaches it: a root server's client's
    /// runner, confining as that user, must open it. A loopback port needs
    /// nothing.
    pub fn give_to(&self, uid: u32, gid: u32) -> io::Result<()> {
        let owner = (Some(uid.into()), Some(gid.into()));
        let socket = match &self.place {
            Place::Socket(path) => Some(path.as_path()),
            Place::Loopback(_) => None,
        };
        let bundle = self.bundle();
        let places = [socket, bundle]
            .into_iter()
            .flatten()
            .flat_map(|place| place.parent().into_iter().chain([place]));
        for place in places {
            nix::unistd::chown(place, owner.0, owner.1)?;
        }
        Ok(())
    }

    /// The place.
    pub fn place(&self) -> &Place {
        &self.place
    }

    /// The loopback port the command's clients connect to.
    pub fn client_port(&self) -> u16 {
        match self.place {
            Place::Socket(_) => PORT,
            Place::Loopback(port) => port,
        }
    }
}

type Reserved = Mutex<std::collections::HashMap<u16, std::net::TcpListener>>;

/// Listeners bound ahead for runs not started yet, by port.
fn reserved() -> &'static Reserved {
    static RESERVED: std::sync::OnceLock<Reserved> = std::sync::OnceLock::new();
    RESERVED.get_or_init(Reserved::default)
}

/// The variables by which the common TLS clients (OpenSSL's, Python's
/// requests, Node's, git's, curl's, pip's, cargo's, AWS's) find `bundle`:
/// the run's authority and the host's roots.
pub fn bundle_env(bundle: &std::path::Path) -> Vec<(String, String)> {
    let at = bundle.to_string_lossy().into_owned();
    [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "CURL_CA_BUNDLE",
        "PIP_CERT",
        "CARGO_HTTP_CAINFO",
        "AWS_CA_BUNDLE",
    ]
    .into_iter()
    .map(|name| (name.to_owned(), at.clone()))
    .collect()
}

/// The environment that points a command's clients at the proxy on the
/// loopback's `port`.
pub fn client_env(port: u16) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let mut env = vec![];
    for (name, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
    ] {
        env.push((name.to_owned(), value.clone()));
        env.push((name.to_ascii_lowercase(), value.clone()));
    }
    env
}

/// One run's proxy: listening until dropped.
#[derive(Debug)]
pub struct Proxy {
    at: ProxyAt,
    recorded: Arc<Mutex<Recorded>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listen at `at` (a fresh socket path in a directory only the host
    /// can write, or a reserved loopback port) and decide every connection
    /// through `gate`. At most [`MAX_CONNECTIONS`] are carried at once; a
    /// failed accept (the host out of file descriptors) is waited out, never
    /// the end of the proxy.
    pub fn start(at: &ProxyAt, gate: Gate) -> io::Result<Proxy> {
        let recorded: Arc<Mutex<Recorded>> = Arc::default();
        let carrier = Carrier {
            gate,
            record: recorded.clone(),
            permits: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
        };
        let task = match &at.place {
            Place::Socket(path) => {
                let listener = UnixListener::bind(path)?;
                tokio::spawn(async move {
                    loop {
                        match listener.accept().await {
                            Ok((stream, _)) => carrier.carry(stream),
                            Err(_) => accept_failed().await,
                        }
                    }
                })
            }
            Place::Loopback(port) => {
                let taken = reserved()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(port);
                let listener = taken.ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("loopback port {port} was not reserved"),
                    )
                })?;
                listener.set_nonblocking(true)?;
                let listener = tokio::net::TcpListener::from_std(listener)?;
                tokio::spawn(async move {
                    loop {
                        match listener.accept().await {
                            // The host's own loopback only: the run's command.
                            Ok((stream, peer)) if peer.ip().is_loopback() => {
                                // Answers reach the command at once.
                                let _ = stream.set_nodelay(true);
                                carrier.carry(stream)
                            }
                            Ok(_) => {}
                            Err(_) => accept_failed().await,
                        }
                    }
                })
            }
        };
        // The proxy owns the place now: it cleans it up when it ends.
        at.hold
            .started
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(Proxy {
            at: at.clone(),
            recorded,
            task,
        })
    }

    /// The connections refused so far.
    pub fn refused(&self) -> Vec<Refused> {
        self.recorded().refused
    }

    /// Everything recorded so far: refusals and decided requests.
    pub fn recorded(&self) -> Recorded {
        locked(&self.recorded).clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        if let Place::Socket(path) = &self.at.place {
            let _ = std::fs::remove_file(path);
            if let Some(dir) = path.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// A failed accept — most often the process out of file descriptors — is
/// waited out: the listener stays, and so does every other run's spawn.
async fn accept_failed() {
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}

/// What every connection of one run's proxy shares.
#[derive(Clone)]
struct Carrier {
    gate: Gate,
    record: Arc<Mutex<Recorded>>,
    /// One per connection carried; none left: the next is closed at once.
    permits: Arc<tokio::sync::Semaphore>,
}

impl Carrier {
    /// Carry one accepted connection on a task of its own, or close it when
    /// the run already has [`MAX_CONNECTIONS`].
    fn carry<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(&self, stream: S) {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            return;
        };
        let (gate, record) = (self.gate.clone(), self.record.clone());
        tokio::spawn(async move {
            let _ = serve(stream, gate, record).await;
            drop(permit);
        });
    }
}

/// Whether `ip` is the host's own or its private network's: loopback,
/// unspecified, link-local, private (RFC 1918, unique-local), shared
/// (100.64/10), multicast or broadcast.
fn internal(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_unspecified()
                || v4.is_link_local()
                || v4.is_private()
                || v4.is_multicast()
                || v4.is_broadcast()
                || (v4.octets()[0] == 100 && v4.octets()[1] & 0xc0 == 64)
        }
        std::net::IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || first & 0xfe00 == 0xfc00
                || first & 0xffc0 == 0xfe80
                || v6.to_ipv4_mapped().is_some_and(|v4| internal(v4.into()))
        }
    }
}

/// Where a decided connection goes: `host` resolved here. An internal
/// address — the host's own (loopback, or any of its interfaces'),
/// link-local (the cloud metadata address), private, unique-local —
/// literal or resolved, IPv4, IPv6 or v4-mapped, is refused unless the
/// operator's ceiling names the host or the address itself: neither a
/// component nor DNS rebinding may turn an allowed connection into the
/// host's loopback, its metadata service or its LAN.
async fn resolve(gate: &Gate, host: &str, port: u16) -> Result<Vec<std::net::SocketAddr>, Refusal> {
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|err| Refusal::Unreachable(format!("cannot resolve {host}: {err}")))?
        .collect();
    if gate.named_by_operator(host, port) {
        return Ok(addrs);
    }
    let own = own_addresses();
    let (outside, inside): (Vec<_>, Vec<_>) = addrs
        .iter()
        .copied()
        .partition(|a| !internal(a.ip()) && !own.contains(&a.ip()));
    match (
        outside.is_empty(),
        inside
            .iter()
            .find(|a| !gate.named_by_operator(&a.ip().to_string(), port)),
    ) {
        (false, _) => Ok(outside),
        (true, found) => Err(Refusal::Refused(format!(
            "{host} is or resolves to an internal address ({}); only an operator's \
             max_network that names it lets a run reach it",
            found
                .or(addrs.first())
                .map_or("none".into(), |a| a.ip().to_string())
        ))),
    }
}

/// The addresses of this host's own interfaces.
fn own_addresses() -> Vec<IpAddr> {
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return vec![];
    };
    interfaces
        .filter_map(|interface| {
            let address = interface.address?;
            if let Some(v4) = address.as_sockaddr_in() {
                return Some(IpAddr::V4(v4.ip()));
            }
            address.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
        })
        .collect()
}

/// Why a connection did not go through.
enum Refusal {
    /// The policy, or the host's own rule, refused it (recorded).
    Refused(String),
    /// It was allowed but cannot be reached.
    Unreachable(String),
}

/// Decide and resolve one connection — the host's bounds, then the
/// component, then the address — and record a refusal.
async fn admit(
    gate: &Gate,
    record: &Mutex<Recorded>,
    host: &str,
    port: u16,
) -> Result<Vec<std::net::SocketAddr>, Refusal> {
    if let Err(reason) = gate.bounds(host, port) {
        note(record, host, port, &reason);
        return Err(Refusal::Refused(reason));
    }
    allowed(&gate.decide, record, host, port)
        .await
        .map_err(Refusal::Refused)?;
    let resolved = resolve(gate, host, port).await;
    if let Err(Refusal::Refused(reason)) = &resolved {
        note(record, host, port, reason);
    }
    resolved
}

/// The run's record, held (a panicked holder left it whole: every change
/// to it is one push or insert).
fn locked(record: &Mutex<Recorded>) -> std::sync::MutexGuard<'_, Recorded> {
    record.lock().unwrap_or_else(|p| p.into_inner())
}

/// Record a refused connection for the run's facts.
fn note(record: &Mutex<Recorded>, host: &str, port: u16, reason: &str) {
    locked(record).refused.push(Refused {
        host: host.to_owned(),
        port,
        reason: reason.to_owned(),
    });
}

async fn allowed(
    decide: &Decide,
    record: &Mutex<Recorded>,
    host: &str,
    port: u16,
) -> Result<(), String> {
    let (ask, target) = (decide.clone(), host.to_owned());
    let answer = tokio::task::spawn_blocking(move || ask(&target, port))
        .await
        .unwrap_or_else(|_| Err("the connection decision failed".into()));
    if let Err(reason) = &answer {
        note(record, host, port, reason);
    }
    answer
}

/// One client connection: SOCKS5 when it opens with version 5, else HTTP.
/// The client has [`HEAD_TIMEOUT`] to name its destination.
async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut client: S,
    gate: Gate,
    record: Arc<Mutex<Recorded>>,
) -> io::Result<()> {
    let named = tokio::time::timeout(HEAD_TIMEOUT, async {
        let mut first = [0u8; 1];
        client.read_exact(&mut first).await?;
        match first[0] {
            5 => socks5_target(&mut client).await,
            byte => http_head(byte, &mut client).await,
        }
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no destination named in time"))??;
    match named {
        Named::Socks5 { host, port } => socks5(client, &gate, &record, host, port).await,
        Named::Http(head) => match tunnel_target(&head) {
            Err(why) => http_refuse(&mut client, "400 Bad Request", &why).await,
            Ok(Some((host, port))) => tunnel(client, gate, record, &host, port).await,
            Ok(None) => forward::serve(forward::Origin::Plain, head, client, gate, record).await,
        },
        Named::Done => Ok(()),
    }
}

/// What a client named before the proxy decides.
enum Named {
    /// A SOCKS5 `CONNECT`.
    Socks5 { host: String, port: u16 },
    /// An HTTP request head.
    Http(Vec<u8>),
    /// Nothing to decide (a refused greeting, answered already).
    Done,
}

async fn http_head<S: AsyncRead + Unpin>(first: u8, client: &mut S) -> io::Result<Named> {
    read_head(first, client).await.map(Named::Http)
}

/// Read the request head: bytes up to the blank line.
async fn read_head<S: AsyncRead + Unpin>(first: u8, client: &mut S) -> io::Result<Vec<u8>> {
    let mut head = vec![first];
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
        client.read_exact(&mut byte).await?;
        head.push(byte[0]);
    }
    Ok(head)
}

/// `host:port`, a bracketed IPv6 `[addr]:port`, or `host` with `default`.
fn host_port(authority: &str, default: Option<u16>) -> Option<(String, u16)> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
            match port.parse().ok() {
                Some(port) => (host, port),
                None => (authority, default?),
            }
        }
        _ => (authority, default?),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// The tunnel a request head asks for (`CONNECT host:port`), or none: a
/// plain request, forwarded request by request ([`forward`]).
fn tunnel_target(head: &[u8]) -> Result<Option<(String, u16)>, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8".to_owned())?;
    let (line, _) = text.split_once("\r\n").ok_or("no request line")?;
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(_version)) = (words.next(), words.next(), words.next())
    else {
        return Err(format!("a malformed request line: {line:?}"));
    };
    if !method.eq_ignore_ascii_case("CONNECT") {
        return Ok(None);
    }
    host_port(target, None)
        .map(Some)
        .ok_or(format!("a bad CONNECT target {target:?}"))
}

/// Answer an HTTP client with `status` and a one-line reason, then close.
async fn http_refuse<S: AsyncWrite + Unpin>(
    client: &mut S,
    status: &str,
    reason: &str,
) -> io::Result<()> {
    let body = format!("cordon: {reason}\n");
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(reply.as_bytes()).await?;
    client.shutdown().await
}

/// A `CONNECT` tunnel to `host:port`, decided once: after it the
/// connection's bytes are the client's and the endpoint's own.
async fn tunnel<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut client: S,
    gate: Gate,
    record: Arc<Mutex<Recorded>>,
    host: &str,
    port: u16,
) -> io::Result<()> {
    let addrs = match admit(&gate, &record, host, port).await {
        Ok(addrs) => addrs,
        Err(Refusal::Refused(reason)) => {
            let reason = format!("{host}:{port} refused: {reason}");
            return http_refuse(&mut client, "403 Forbidden", &reason).await;
        }
        Err(Refusal::Unreachable(why)) => {
            return http_refuse(&mut client, "502 Bad Gateway", &why).await;
        }
    };
    if let Some(inspection) = gate.inspection(host, port).cloned() {
        return inspected(client, gate, record, inspection, (host, port)).await;
    }
    let upstream = match connect_upstream(&addrs).await {
        Ok(upstream) => upstream,
        Err(err) => {
            let why = format!("cannot reach {host}:{port}: {err}");
            return http_refuse(&mut client, "502 Bad Gateway", &why).await;
        }
    };
    client.write_all(ESTABLISHED).await?;
    splice(client, upstream).await
}

/// The answer that opens a tunnel.
const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// An inspected tunnel to `host:port`: the client's TLS ended here with the
/// run's leaf for `host`, its requests forwarded one by one ([`forward`]).
async fn inspected<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut client: S,
    gate: Gate,
    record: Arc<Mutex<Recorded>>,
    inspection: Inspection,
    (host, port): (&str, u16),
) -> io::Result<()> {
    let server = match inspection.authority.server(host) {
        Ok(server) => server,
        Err(why) => return http_refuse(&mut client, "502 Bad Gateway", &why).await,
    };
    client.write_all(ESTABLISHED).await?;
    let tls = tokio_rustls::TlsAcceptor::from(server)
        .accept(client)
        .await?;
    let origin = forward::Origin::Inspected {
        host: host.to_owned(),
        port,
        trust: inspection.trust,
    };
    forward::serve(origin, Vec::new(), tls, gate, record).await
}

/// A TCP connection to the first of `addrs` that answers, each write sent
/// at once: a tunnel carries the client's pieces as they come, and Nagle's
/// wait for the peer's delayed ACK made every kept-alive exchange through
/// the proxy milliseconds slower.
async fn connect_upstream(addrs: &[std::net::SocketAddr]) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addrs).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Copy both ways until both ends are done.
async fn splice(
    mut a: impl AsyncRead + AsyncWrite + Unpin,
    mut b: impl AsyncRead + AsyncWrite + Unpin,
) -> io::Result<()> {
    tokio::io::copy_bidirectional(&mut a, &mut b)
        .await
        .map(|_| ())
}

/// The SOCKS5 greeting and request, up to the destination; a greeting or
/// command the proxy does not take is answered here.
async fn socks5_target<S: AsyncRead + AsyncWrite + Unpin>(client: &mut S) -> io::Result<Named> {
    // Greeting (the version byte is read): NMETHODS, METHODS; no auth.
    let count = client.read_u8().await?;
    let mut methods = vec![0u8; count as usize];
    client.read_exact(&mut methods).await?;
    if !methods.contains(&0) {
        client.write_all(&[5, 0xff]).await?;
        return Ok(Named::Done);
    }
    client.write_all(&[5, 0]).await?;
    // Request: VER CMD RSV ATYP DST.ADDR DST.PORT.
    let mut fixed = [0u8; 4];
    client.read_exact(&mut fixed).await?;
    let host = match fixed[3] {
        1 => {
            let mut octets = [0u8; 4];
            client.read_exact(&mut octets).await?;
            std::net::Ipv4Addr::from(octets).to_string()
        }
        3 => {
            let len = client.read_u8().await?;
            let mut name = vec![0u8; len as usize];
            client.read_exact(&mut name).await?;
            String::from_utf8_lossy(&name).into_owned()
        }
        4 => {
            let mut octets = [0u8; 16];
            client.read_exact(&mut octets).await?;
            std::net::Ipv6Addr::from(octets).to_string()
        }
        _ => {
            client.write_all(&socks5_reply(8)).await?;
            return Ok(Named::Done);
        }
    };
    let port = client.read_u16().await?;
    if fixed[1] != 1 {
        // Only CONNECT: no BIND, no UDP ASSOCIATE.
        client.write_all(&socks5_reply(7)).await?;
        return Ok(Named::Done);
    }
    Ok(Named::Socks5 { host, port })
}

/// A SOCKS5 reply with `code` (and an unspecified bound address).
fn socks5_reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

async fn socks5<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: S,
    gate: &Gate,
    record: &Mutex<Recorded>,
    host: String,
    port: u16,
) -> io::Result<()> {
    let reply = socks5_reply;
    if gate.grant.inspects(&host, port) {
        // A SOCKS5 tunnel would carry it past the inspection.
        let why = "its HTTPS is inspected: reach it through the HTTP proxy (HTTPS_PROXY)";
        note(record, &host, port, why);
        client.write_all(&reply(2)).await?;
        return Ok(());
    }
    let addrs = match admit(gate, record, &host, port).await {
        Ok(addrs) => addrs,
        Err(Refusal::Refused(_)) => {
            // 2: connection not allowed by ruleset.
            client.write_all(&reply(2)).await?;
            return Ok(());
        }
        Err(Refusal::Unreachable(_)) => {
            // 4: host unreachable.
            client.write_all(&reply(4)).await?;
            return Ok(());
        }
    };
    match connect_upstream(&addrs).await {
        Ok(upstream) => {
            client.write_all(&reply(0)).await?;
            splice(client, upstream).await
        }
        Err(_) => {
            // 5: connection refused (or unreachable).
            client.write_all(&reply(5)).await?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::UnixStream;

    #[test]
    fn request_heads_name_their_tunnel_or_none() {
        assert_eq!(
            tunnel_target(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
            Ok(Some(("example.com".into(), 443)))
        );
        assert_eq!(
            tunnel_target(b"GET http://127.0.0.1:8080/a?b HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(None)
        );
        assert_eq!(host_port("[::1]:8443", None), Some(("::1".into(), 8443)));
        assert_eq!(
            host_port("example.com", Some(80)),
            Some(("example.com".into(), 80))
        );
        assert!(tunnel_target(b"CONNECT nohostport HTTP/1.1\r\n\r\n").is_err());
        assert!(tunnel_target(b"GET\r\n\r\n").is_err());
    }

    /// A gate over `grant` and `ceiling` whose component answers yes.
    fn yes(grant: Network, ceiling: Network) -> Gate {
        Gate {
            grant,
            ceiling,
            decide: Arc::new(|_: &str, _: u16| Ok(())),
            decide_request: None,
            approved_requests: vec![],
            approver: None,
            credentials: None,
            inspection: None,
        }
    }

    fn endpoint(host: &str, port: Option<u16>) -> crate::model::Endpoint {
        crate::model::Endpoint {
            port,
            ..crate::model::Endpoint::at(host, 0)
        }
    }

    #[tokio::test]
    async fn an_internal_address_literal_or_resolved_is_refused_unless_the_operator_names_it() {
        let open = yes(Network::Full, Network::Full);
        for host in [
            "localhost",
            "127.0.0.1",
            "169.254.169.254",
            "::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(
                matches!(resolve(&open, host, 80).await, Err(Refusal::Refused(r)) if r.contains("internal address")),
                "{host}"
            );
        }
        let named = yes(
            Network::Full,
            Network::Allow(vec![
                endpoint("127.0.0.1", Some(80)),
                endpoint("localhost", None),
            ]),
        );
        assert!(resolve(&named, "127.0.0.1", 80).await.is_ok());
        assert!(resolve(&named, "localhost", 8080).await.is_ok());
        assert!(resolve(&named, "127.0.0.1", 81).await.is_err());
        let wildcard = yes(
            Network::Full,
            Network::Allow(vec![endpoint("*.localhost", None)]),
        );
        assert!(resolve(&wildcard, "a.localhost", 80).await.is_err());
        for ip in [
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["1.1.1.1", "2606:4700::1111"] {
            assert!(!internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn the_host_bounds_a_connection_by_the_grant_and_the_ceiling_whatever_the_component_says() {
        let gate = yes(
            Network::Allow(vec![endpoint("example.com", Some(443))]),
            Network::Allow(vec![endpoint("*.com", None)]),
        );
        assert!(gate.bounds("example.com", 443).is_ok());
        assert!(
            gate.bounds("example.com", 80)
                .unwrap_err()
                .contains("not in this run's network grant")
        );
        let ceiling = yes(
            Network::Full,
            Network::Allow(vec![endpoint("github.com", Some(22))]),
        );
        assert!(
            ceiling
                .bounds("169.254.169.254", 80)
                .unwrap_err()
                .contains("max_network")
        );
    }

    #[test]
    fn clients_are_pointed_at_the_sandboxs_loopback() {
        let env = client_env(PORT);
        assert!(env.contains(&("HTTPS_PROXY".into(), "http://127.0.0.1:3128".into())));
        assert!(env.contains(&("all_proxy".into(), "socks5h://127.0.0.1:3128".into())));
    }

    fn reserved_now(port: u16) -> bool {
        reserved().lock().unwrap().contains_key(&port)
    }

    #[test]
    fn a_place_no_proxy_started_at_is_given_back_with_its_last_hold() {
        let at = ProxyAt::fresh_socket().unwrap();
        let Place::Socket(path) = at.place().clone() else {
            unreachable!()
        };
        let dir = path.parent().unwrap().to_path_buf();
        let copy = at.clone();
        drop(at);
        assert!(dir.is_dir(), "a clone still holds {}", dir.display());
        drop(copy);
        assert!(!dir.exists(), "{} was left behind", dir.display());

        let at = ProxyAt::reserve_loopback().unwrap();
        let port = at.client_port();
        assert!(reserved_now(port));
        drop(at);
        assert!(!reserved_now(port), "the listener on {port} was left bound");
    }

    #[tokio::test]
    async fn a_started_proxy_owns_its_place_until_it_ends() {
        let at = ProxyAt::reserve_loopback().unwrap();
        let port = at.client_port();
        let decide: Decide = Arc::new(|_: &str, _: u16| Err("no".into()));
        let gate = Gate {
            decide,
            decide_request: None,
            approved_requests: vec![],
            approver: None,
            ..yes(Network::Full, Network::Full)
        };
        let proxy = Proxy::start(&at, gate).unwrap();
        drop(at);
        let mut client = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        client
            .write_all(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
        drop(proxy);
    }

    /// A proxy on a fresh socket (its path) whose component allows only
    /// `port` ("not this one" otherwise), within a ceiling of the loopback.
    fn allowing_only(port: u16) -> (Proxy, PathBuf) {
        let decide: Decide = Arc::new(move |_host: &str, asked: u16| match asked == port {
            true => Ok(()),
            false => Err("not this one".into()),
        });
        started(decide, None)
    }

    /// A proxy on a fresh socket (its path) deciding connections and
    /// requests so, within a ceiling of the loopback.
    fn started(decide: Decide, decide_request: Option<DecideRequest>) -> (Proxy, PathBuf) {
        started_approving(decide, decide_request, vec![])
    }

    /// [`started`], with these requests approved by a person.
    fn started_approving(
        decide: Decide,
        decide_request: Option<DecideRequest>,
        approved_requests: Vec<crate::model::ApprovedRequest>,
    ) -> (Proxy, PathBuf) {
        let at = ProxyAt::fresh_socket().unwrap();
        let Place::Socket(path) = at.place().clone() else {
            unreachable!()
        };
        let gate = Gate {
            decide,
            decide_request,
            approved_requests,
            ..yes(
                Network::Full,
                Network::Allow(vec![endpoint("127.0.0.1", None)]),
            )
        };
        (Proxy::start(&at, gate).unwrap(), path)
    }

    #[tokio::test]
    async fn a_tunnel_opens_to_an_allowed_endpoint_and_a_refusal_is_answered_and_recorded() {
        let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = echo.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = stream.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        // The wrap's hold goes with the helper; the proxy keeps the place.
        let (proxy, path) = allowing_only(port);

        let mut client = UnixStream::connect(&path).await.unwrap();
        let connect = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n");
        client.write_all(connect.as_bytes()).await.unwrap();
        let mut reply = vec![0u8; 39];
        client.read_exact(&mut reply).await.unwrap();
        assert_eq!(reply, b"HTTP/1.1 200 Connection established\r\n\r\n");
        client.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        client.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping");

        let mut refused = UnixStream::connect(&path).await.unwrap();
        refused
            .write_all(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        refused.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
        assert!(
            answer.contains("127.0.0.1:1 refused: not this one"),
            "{answer}"
        );
        assert_eq!(
            proxy.refused(),
            [Refused {
                host: "127.0.0.1".into(),
                port: 1,
                reason: "not this one".into()
            }]
        );
        drop(proxy);
        assert!(!path.exists(), "the socket is removed with the proxy");
        assert!(!path.parent().unwrap().exists(), "and its directory");
    }

    /// A loopback HTTP/1.1 server that keeps connections alive and answers
    /// every request with its own path and body; what it was asked (the
    /// request line and `Host` header, one list per connection).
    async fn recording_server() -> (u16, Arc<Mutex<Vec<Vec<String>>>>) {
        use tokio::io::AsyncBufReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let record = record.clone();
                let connection = {
                    let mut seen = record.lock().unwrap();
                    seen.push(vec![]);
                    seen.len() - 1
                };
                tokio::spawn(async move {
                    let mut stream = tokio::io::BufReader::new(stream);
                    loop {
                        let (mut line, mut host, mut length) = (String::new(), None, 0);
                        let mut added = String::new();
                        if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        loop {
                            let mut header = String::new();
                            stream.read_line(&mut header).await.unwrap();
                            let header = header.trim_end().to_owned();
                            if header.is_empty() {
                                break;
                            }
                            let (name, value) = header.split_once(": ").unwrap();
                            match name.to_ascii_lowercase().as_str() {
                                "host" => host = Some(value.to_owned()),
                                "content-length" => length = value.parse().unwrap(),
                                "x-added" => added = format!(" X-Added={value}"),
                                _ => {}
                            }
                        }
                        let mut body = vec![0u8; length];
                        stream.read_exact(&mut body).await.unwrap();
                        let line = line.trim_end().to_owned();
                        let reply = format!("{} {}", line, String::from_utf8_lossy(&body));
                        record.lock().unwrap()[connection]
                            .push(format!("{line} Host={}{added}", host.unwrap_or_default()));
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{reply}",
                            reply.len()
                        );
                        stream.get_mut().write_all(answer.as_bytes()).await.unwrap();
                    }
                });
            }
        });
        (port, seen)
    }

    /// Send `request` on `client` and read one response (its status line
    /// and body, framed by its `Content-Length`).
    async fn exchange(client: &mut UnixStream, request: &str) -> (String, String) {
        client.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(client.read_u8().await.unwrap());
        }
        let head = String::from_utf8(head).unwrap();
        let length: usize = head
            .lines()
            .find_map(|line| {
                line.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_owned)
            })
            .map_or(0, |value| value.trim().parse().unwrap());
        let mut body = vec![0u8; length];
        client.read_exact(&mut body).await.unwrap();
        let status = head.lines().next().unwrap().to_owned();
        (status, String::from_utf8(body).unwrap())
    }

    #[tokio::test]
    async fn every_request_of_a_kept_alive_connection_is_decided_and_its_host_header_checked() {
        let (allowed, allowed_seen) = recording_server().await;
        let (other, other_seen) = recording_server().await;
        let (proxy, path) = allowing_only(allowed);
        let mut client = UnixStream::connect(&path).await.unwrap();
        let get = |port: u16, path: &str, host: &str| {
            format!("GET http://127.0.0.1:{port}{path} HTTP/1.1\r\n{host}\r\n")
        };
        let named = |port: u16| format!("Host: 127.0.0.1:{port}\r\n");

        let answer = exchange(&mut client, &get(allowed, "/one", &named(allowed))).await;
        assert_eq!(answer.0, "HTTP/1.1 200 OK");
        assert_eq!(answer.1, "GET /one HTTP/1.1 ");
        // A body, framed by its length: what follows it is the next request.
        let post = format!(
            "POST http://127.0.0.1:{allowed}/two HTTP/1.1\r\n{}Content-Length: 5\r\n\r\nhello",
            named(allowed)
        );
        let answer = exchange(&mut client, &post).await;
        assert_eq!(answer.1, "POST /two HTTP/1.1 hello");
        // The same connection names another target: decided, refused.
        let answer = exchange(&mut client, &get(other, "/three", &named(other))).await;
        assert_eq!(answer.0, "HTTP/1.1 403 Forbidden");
        assert!(answer.1.contains("not this one"), "{answer:?}");
        // The allowed target, with a Host header naming another: refused.
        let fronted = get(allowed, "/four", "Host: elsewhere.example\r\n");
        let answer = exchange(&mut client, &fronted).await;
        assert_eq!(answer.0, "HTTP/1.1 403 Forbidden");
        assert!(answer.1.contains("Host header"), "{answer:?}");
        // Still the client's connection: a request with no Host header is
        // sent with the decided target's.
        let answer = exchange(&mut client, &get(allowed, "/five", "")).await;
        assert_eq!(answer.0, "HTTP/1.1 200 OK");

        assert_eq!(
            *allowed_seen.lock().unwrap(),
            [[
                format!("GET /one HTTP/1.1 Host=127.0.0.1:{allowed}"),
                format!("POST /two HTTP/1.1 Host=127.0.0.1:{allowed}"),
                format!("GET /five HTTP/1.1 Host=127.0.0.1:{allowed}"),
            ]],
            "one upstream connection, only the decided requests"
        );
        assert!(other_seen.lock().unwrap().is_empty());
        let refused = proxy.refused();
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert_eq!(
            (refused[0].port, refused[0].reason.as_str()),
            (other, "not this one")
        );
        assert_eq!(refused[1].port, allowed);
        assert!(refused[1].reason.contains("Host header"), "{refused:?}");
    }

    #[tokio::test]
    async fn http2_with_prior_knowledge_is_decided_stream_by_stream() {
        use http_body_util::{BodyExt, Empty};
        let (allowed, seen) = recording_server().await;
        let (other, other_seen) = recording_server().await;
        let (proxy, path) = allowing_only(allowed);
        let client = UnixStream::connect(&path).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(client),
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        let mut ask = async |port: u16, path: &str| {
            let request = hyper::Request::get(format!("http://127.0.0.1:{port}{path}"))
                .body(Empty::<bytes::Bytes>::new())
                .unwrap();
            let answer = sender.send_request(request).await.unwrap();
            let status = answer.status().as_u16();
            let body = answer.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        };
        assert_eq!(ask(allowed, "/a").await.0, 200);
        let (status, body) = ask(other, "/b").await;
        assert_eq!(status, 403);
        assert!(body.contains("not this one"), "{body}");
        assert_eq!(ask(allowed, "/c").await.0, 200);
        let seen: Vec<String> = seen.lock().unwrap().concat();
        assert_eq!(
            seen,
            ["/a", "/c"].map(|p| format!("GET {p} HTTP/1.1 Host=127.0.0.1:{allowed}")),
            "each stream sent on its own, in HTTP/1.1, to its decided target"
        );
        assert!(other_seen.lock().unwrap().is_empty());
        assert_eq!(proxy.refused().len(), 1);
    }

    #[tokio::test]
    async fn a_request_decision_allows_denies_or_edits_and_every_one_is_recorded() {
        let (port, seen) = recording_server().await;
        // The component: no POST; a GET goes with a header added.
        let decide: DecideRequest = Arc::new(|request: &HttpRequest| {
            assert!(!format!("{request:?}").contains("s3cret"), "{request:?}");
            match request.method.as_str() {
                "POST" => RequestVerdict::Deny("no posting here".into()),
                _ => RequestVerdict::Edit(vec![crate::model::HeaderEdit::Set(
                    "x-added".into(),
                    format!(
                        "{}?{}",
                        request.path,
                        request.query.clone().unwrap_or_default()
                    ),
                )]),
            }
        });
        let (proxy, path) = started(Arc::new(|_: &str, _: u16| Ok(())), Some(decide));
        let mut client = UnixStream::connect(&path).await.unwrap();
        let head = |method: &str, path: &str| {
            format!(
                "{method} http://127.0.0.1:{port}{path} HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n"
            )
        };
        let answer = exchange(&mut client, &head("GET", "/a?q=1")).await;
        assert_eq!(answer.0, "HTTP/1.1 200 OK");
        let answer = exchange(&mut client, &head("POST", "/b")).await;
        assert_eq!(answer.0, "HTTP/1.1 403 Forbidden");
        assert!(answer.1.contains("no posting here"), "{answer:?}");
        assert_eq!(
            *seen.lock().unwrap(),
            [[format!(
                "GET /a?q=1 HTTP/1.1 Host=127.0.0.1:{port} X-Added=/a?q=1"
            )]],
            "the edit arrives; the denied request never does"
        );
        let recorded = proxy.recorded();
        let decided: Vec<_> = (recorded.requests.iter())
            .map(|r| {
                (
                    r.method.as_str(),
                    r.path.as_str(),
                    r.allowed,
                    r.edits.clone(),
                )
            })
            .collect();
        assert_eq!(
            decided,
            [
                ("GET", "/a", true, vec!["set x-added".to_owned()]),
                ("POST", "/b", false, vec![]),
            ]
        );
        assert_eq!(
            recorded.requests[1].reason.as_deref(),
            Some("no posting here")
        );
        assert!(
            recorded.refused[0]
                .reason
                .contains("POST /b: no posting here")
        );
    }

    #[tokio::test]
    async fn an_asked_request_goes_only_when_a_person_approved_it_and_both_are_recorded() {
        let (port, seen) = recording_server().await;
        // The component: a POST waits for a person, and is marked when sent.
        let decide: DecideRequest =
            Arc::new(|request: &HttpRequest| match request.method.as_str() {
                "POST" => RequestVerdict::Ask {
                    reason: "a person decides posts".into(),
                    edits: vec![crate::model::HeaderEdit::Set(
                        "x-added".into(),
                        "approved".into(),
                    )],
                },
                _ => RequestVerdict::Allow,
            });
        let approved = format!("POST 127.0.0.1:{port}/ok").parse().unwrap();
        let (proxy, path) = started_approving(
            Arc::new(|_: &str, _: u16| Ok(())),
            Some(decide),
            vec![approved],
        );
        let mut client = UnixStream::connect(&path).await.unwrap();
        let head = |path: &str| {
            format!("POST http://127.0.0.1:{port}{path}?q=1 HTTP/1.1\r\ncontent-length: 0\r\n\r\n")
        };
        let answer = exchange(&mut client, &head("/ok")).await;
        assert_eq!(answer.0, "HTTP/1.1 200 OK");
        let answer = exchange(&mut client, &head("/other")).await;
        assert_eq!(answer.0, "HTTP/1.1 403 Forbidden");
        assert!(answer.1.contains("a person decides posts"), "{answer:?}");
        let approval = format!("POST 127.0.0.1:{port}/other");
        assert!(
            answer
                .1
                .contains(&format!("{approval} is sent only in a run approved for it")),
            "{answer:?}"
        );
        let seen = seen.lock().unwrap().concat();
        assert_eq!(seen.len(), 1, "the unapproved POST never arrives: {seen:?}");
        assert!(seen[0].starts_with("POST /ok?q=1 ") && seen[0].contains("X-Added=approved"));
        let recorded = proxy.recorded();
        let decided: Vec<_> = (recorded.requests.iter())
            .map(|r| {
                (
                    r.path.as_str(),
                    r.asked,
                    r.allowed,
                    r.approval().to_string(),
                )
            })
            .collect();
        assert_eq!(
            decided,
            [
                ("/ok", true, true, format!("POST 127.0.0.1:{port}/ok")),
                ("/other", true, false, approval),
            ]
        );
    }

    #[test]
    fn an_approved_request_reads_back_as_written_and_refuses_what_is_not_one() {
        for line in [
            "POST api.github.com:443/repos/o/r/pulls",
            "GET [::1]:8080/",
            "DELETE h.test:1/a%20b",
        ] {
            let approved: crate::model::ApprovedRequest = line.parse().unwrap();
            assert_eq!(approved.to_string(), line);
        }
        let lower: crate::model::ApprovedRequest = "post API.test:80/x".parse().unwrap();
        assert_eq!(lower.to_string(), "POST api.test:80/x");
        for bad in [
            "POST api.test/x",
            "POST api.test:80",
            "POST api.test:0/x",
            "PO5T api.test:80/x",
            "POST api.test:80/x?q=1",
            "POST ::1:80/x",
            "POST api.test:80/a b",
            " api.test:80/x",
        ] {
            let error = bad.parse::<crate::model::ApprovedRequest>().unwrap_err();
            assert!(error.contains("METHOD host:port/path"), "{bad}: {error}");
        }
    }
}
