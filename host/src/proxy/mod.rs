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
//! HTTP request's absolute URI, or a SOCKS5 `CONNECT` — and the host asks
//! the component (`connect`, bounded like every call) before it dials;
//! names are resolved here, on the host, never inside, and a name that
//! resolves only to the host's own or private addresses is refused (an
//! allowed name must not be rebound to the host's loopback or LAN; an
//! address the grant names literally is taken as named). A refusal answers
//! the client at once (HTTP 403 with the reason, SOCKS5 "not allowed by
//! ruleset") and is recorded for the run's facts.
//!
//! The protocols are written here, small and strict, rather than taken
//! from a proxy crate: the host needs only the first request of each
//! connection (to learn and decide the destination) and then copies bytes,
//! and every proxy crate brings a server framework of its own.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener};

pub use crate::sandbox::launcher::PROXY_PORT as PORT;

/// The longest HTTP request head the proxy reads before it decides.
const MAX_HEAD: usize = 16 * 1024;

/// Decides one connection: the component's answer for `host:port`.
pub type Decide = Arc<dyn Fn(&str, u16) -> Result<(), String> + Send + Sync>;

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
        }
    }

    /// A fresh socket path for one run's proxy, in a new 0700 directory
    /// of the host's temporary directory.
    pub fn fresh_socket() -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "cordon-proxy-{}-{}-{nanos:x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(Self::holding(Place::Socket(dir.join("proxy.sock"))))
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
    refused: Arc<Mutex<Vec<Refused>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listen at `at` (a fresh socket path in a directory only the host
    /// can write, or a reserved loopback port) and decide every connection
    /// with `decide`.
    pub fn start(at: &ProxyAt, decide: Decide) -> io::Result<Proxy> {
        let refused: Arc<Mutex<Vec<Refused>>> = Arc::default();
        let record = refused.clone();
        let task = match &at.place {
            Place::Socket(path) => {
                let listener = UnixListener::bind(path)?;
                tokio::spawn(async move {
                    while let Ok((stream, _)) = listener.accept().await {
                        let (decide, record) = (decide.clone(), record.clone());
                        tokio::spawn(async move {
                            let _ = serve(stream, decide, record).await;
                        });
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
                    while let Ok((stream, peer)) = listener.accept().await {
                        // The host's own loopback only: the run's command.
                        if !peer.ip().is_loopback() {
                            continue;
                        }
                        let (decide, record) = (decide.clone(), record.clone());
                        tokio::spawn(async move {
                            let _ = serve(stream, decide, record).await;
                        });
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
            refused,
            task,
        })
    }

    /// The connections refused so far.
    pub fn refused(&self) -> Vec<Refused> {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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

/// Ask `decide` off the async threads (a component call may block up to
/// its deadline) and record a refusal.
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

/// Where a decided connection goes: `host` resolved here. A name that
/// resolves only to internal addresses is refused (DNS rebinding must not
/// turn an allowed name into the host's loopback or private network); an
/// address named literally is taken as the grant named it.
async fn resolve(host: &str, port: u16) -> Result<Vec<std::net::SocketAddr>, Refusal> {
    let literal = host.parse::<std::net::IpAddr>().is_ok();
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|err| Refusal::Unreachable(format!("cannot resolve {host}: {err}")))?
        .collect();
    if literal {
        return Ok(addrs);
    }
    let public: Vec<_> = addrs
        .iter()
        .copied()
        .filter(|a| !internal(a.ip()))
        .collect();
    match public.is_empty() {
        true => Err(Refusal::Refused(format!(
            "{host} resolves to an internal address ({}); name the address itself to allow it",
            addrs.first().map_or("none".into(), |a| a.ip().to_string())
        ))),
        false => Ok(public),
    }
}

/// Why a connection did not go through.
enum Refusal {
    /// The policy, or the host's own rule, refused it (recorded).
    Refused(String),
    /// It was allowed but cannot be reached.
    Unreachable(String),
}

/// Decide and resolve one connection; a refusal is recorded.
async fn admit(
    decide: &Decide,
    record: &Mutex<Vec<Refused>>,
    host: &str,
    port: u16,
) -> Result<Vec<std::net::SocketAddr>, Refusal> {
    allowed(decide, record, host, port)
        .await
        .map_err(Refusal::Refused)?;
    let resolved = resolve(host, port).await;
    if let Err(Refusal::Refused(reason)) = &resolved {
        note(record, host, port, reason);
    }
    resolved
}

/// Record a refused connection for the run's facts.
fn note(record: &Mutex<Vec<Refused>>, host: &str, port: u16, reason: &str) {
    record
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Refused {
            host: host.to_owned(),
            port,
            reason: reason.to_owned(),
        });
}

async fn allowed(
    decide: &Decide,
    record: &Mutex<Vec<Refused>>,
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
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: S,
    decide: Decide,
    record: Arc<Mutex<Vec<Refused>>>,
) -> io::Result<()> {
    let mut first = [0u8; 1];
    client.read_exact(&mut first).await?;
    match first[0] {
        5 => socks5(client, &decide, &record).await,
        byte => http(byte, client, &decide, &record).await,
    }
}

/// Where an HTTP request goes, and how to forward it.
#[derive(Debug, PartialEq, Eq)]
enum HttpTarget {
    /// `CONNECT host:port`: a tunnel.
    Tunnel { host: String, port: u16 },
    /// A plain request: its head rewritten to origin form.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
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

/// Parse a request head into its target.
fn http_target(head: &[u8]) -> Result<HttpTarget, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8".to_owned())?;
    let (line, rest) = text.split_once("\r\n").ok_or("no request line")?;
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (words.next(), words.next(), words.next())
    else {
        return Err(format!("a malformed request line: {line:?}"));
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) =
            host_port(target, None).ok_or(format!("a bad CONNECT target {target:?}"))?;
        return Ok(HttpTarget::Tunnel { host, port });
    }
    let url = target.strip_prefix("http://").ok_or(format!(
        "only http:// URLs are proxied in plain HTTP, got {target:?}"
    ))?;
    let (authority, path) = match url.find('/') {
        Some(at) => (&url[..at], &url[at..]),
        None => (url, "/"),
    };
    let (host, port) = host_port(authority, Some(80)).ok_or(format!("a bad URL {target:?}"))?;
    let head = format!("{method} {path} {version}\r\n{rest}").into_bytes();
    Ok(HttpTarget::Forward { host, port, head })
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

async fn http<S: AsyncRead + AsyncWrite + Unpin>(
    first: u8,
    mut client: S,
    decide: &Decide,
    record: &Mutex<Vec<Refused>>,
) -> io::Result<()> {
    let head = read_head(first, &mut client).await?;
    let target = match http_target(&head) {
        Ok(target) => target,
        Err(why) => return http_refuse(&mut client, "400 Bad Request", &why).await,
    };
    let (host, port) = match &target {
        HttpTarget::Tunnel { host, port } | HttpTarget::Forward { host, port, .. } => {
            (host.clone(), *port)
        }
    };
    let addrs = match admit(decide, record, &host, port).await {
        Ok(addrs) => addrs,
        Err(Refusal::Refused(reason)) => {
            return http_refuse(
                &mut client,
                "403 Forbidden",
                &format!("{host}:{port} refused: {reason}"),
            )
            .await;
        }
        Err(Refusal::Unreachable(why)) => {
            return http_refuse(&mut client, "502 Bad Gateway", &why).await;
        }
    };
    let mut upstream = match TcpStream::connect(&addrs[..]).await {
        Ok(upstream) => upstream,
        Err(err) => {
            return http_refuse(
                &mut client,
                "502 Bad Gateway",
                &format!("cannot reach {host}:{port}: {err}"),
            )
            .await;
        }
    };
    match target {
        HttpTarget::Tunnel { .. } => {
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await?;
        }
        HttpTarget::Forward { head, .. } => upstream.write_all(&head).await?,
    }
    splice(client, upstream).await
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

async fn socks5<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: S,
    decide: &Decide,
    record: &Mutex<Vec<Refused>>,
) -> io::Result<()> {
    // Greeting (the version byte is read): NMETHODS, METHODS; no auth.
    let count = client.read_u8().await?;
    let mut methods = vec![0u8; count as usize];
    client.read_exact(&mut methods).await?;
    if !methods.contains(&0) {
        client.write_all(&[5, 0xff]).await?;
        return Ok(());
    }
    client.write_all(&[5, 0]).await?;
    // Request: VER CMD RSV ATYP DST.ADDR DST.PORT.
    let mut fixed = [0u8; 4];
    client.read_exact(&mut fixed).await?;
    let reply = |code: u8| [5, code, 0, 1, 0, 0, 0, 0, 0, 0];
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
            client.write_all(&reply(8)).await?;
            return Ok(());
        }
    };
    let port = client.read_u16().await?;
    if fixed[1] != 1 {
        // Only CONNECT: no BIND, no UDP ASSOCIATE.
        client.write_all(&reply(7)).await?;
        return Ok(());
    }
    let addrs = match admit(decide, record, &host, port).await {
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
    match TcpStream::connect(&addrs[..]).await {
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
    fn request_heads_name_their_destination() {
        assert_eq!(
            http_target(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
            Ok(HttpTarget::Tunnel {
                host: "example.com".into(),
                port: 443
            })
        );
        assert_eq!(
            http_target(b"GET http://127.0.0.1:8080/a?b HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(HttpTarget::Forward {
                host: "127.0.0.1".into(),
                port: 8080,
                head: b"GET /a?b HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            })
        );
        assert!(matches!(
            http_target(b"GET http://example.com HTTP/1.1\r\n\r\n"),
            Ok(HttpTarget::Forward { port: 80, .. })
        ));
        assert_eq!(host_port("[::1]:8443", None), Some(("::1".into(), 8443)));
        assert!(http_target(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(http_target(b"CONNECT nohostport HTTP/1.1\r\n\r\n").is_err());
    }

    #[tokio::test]
    async fn a_name_resolving_to_an_internal_address_is_refused_an_address_named_is_not() {
        assert!(
            matches!(resolve("localhost", 80).await, Err(Refusal::Refused(r)) if r.contains("internal address"))
        );
        assert!(resolve("127.0.0.1", 80).await.is_ok());
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
        let proxy = Proxy::start(&at, decide).unwrap();
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
        let at = ProxyAt::fresh_socket().unwrap();
        let Place::Socket(path) = at.place().clone() else {
            unreachable!()
        };
        let decide: Decide = Arc::new(move |_host: &str, asked: u16| match asked == port {
            true => Ok(()),
            false => Err("not this one".into()),
        });
        let proxy = Proxy::start(&at, decide).unwrap();
        // The wrap's hold goes; the proxy keeps the place.
        drop(at);

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
}
