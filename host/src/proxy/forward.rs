//! Plain-HTTP forwarding, request by request.
//!
//! A client that sends `GET http://host/…` through the proxy may keep its
//! connection alive and send more requests on it, each naming a target of
//! its own; and each request carries a `Host` header that an upstream
//! serving many names (a CDN, a shared front end) routes by. So the
//! connection is not decided once and then copied: hyper reads and frames
//! every request, and each is decided on its own — the target its URI
//! names through the host's bounds and the component, its `Host` header
//! checked to name that very target — before it is sent, in origin form,
//! on an upstream connection to that target (kept while the client keeps
//! asking the same one). A refusal answers that request (403 with the
//! reason) and is recorded; the connection may go on. Nothing a client
//! sends reaches an upstream undecided.
//!
//! A `CONNECT` is the connection's first request or none: a tunnel asked
//! for on a connection that carried plain requests is refused (clients
//! open a fresh connection for a tunnel).
//!
//! Inside an inspected tunnel ([`super::inspect`]) the same holds over
//! TLS: every request goes to the tunnel's own target, its `Host` header
//! checked against it, and is decided before it is sent on the proxy's own
//! TLS connection to that target.

use std::io;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::inspect::Trust;
use super::requests;
use super::{
    Gate, HEAD_TIMEOUT, MAX_HEAD, Recorded, Refusal, admit, connect_upstream, host_port, note,
};

/// The most HTTP/2 streams one client connection carries at once (each
/// request waits for the connection's one upstream in turn).
const MAX_STREAMS: u32 = 32;

/// A response body: the upstream's, or the proxy's own refusal.
type Body = BoxBody<Bytes, hyper::Error>;

/// Where a connection's requests go.
pub(super) enum Origin {
    /// Plain HTTP: each request names its target in its absolute URI.
    Plain,
    /// An inspected tunnel: every request goes to `host:port`, over TLS
    /// verified with `trust`.
    Inspected {
        host: String,
        port: u16,
        trust: Trust,
    },
}

impl Origin {
    /// The scheme its requests are sent with.
    fn scheme(&self) -> &'static str {
        match self {
            Origin::Plain => "http",
            Origin::Inspected { .. } => "https",
        }
    }

    /// The port a `Host` header without one means.
    fn default_port(&self) -> u16 {
        match self {
            Origin::Plain => 80,
            Origin::Inspected { .. } => 443,
        }
    }
}

/// Serve the requests on `client`, whose first request head the proxy may
/// have read already (`head`), until the client is done.
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    origin: Origin,
    head: Vec<u8>,
    client: S,
    gate: Gate,
    record: std::sync::Arc<Mutex<Recorded>>,
) -> io::Result<()> {
    let upstream = std::sync::Arc::new(tokio::sync::Mutex::new(None::<Upstream>));
    let origin = std::sync::Arc::new(origin);
    let service = hyper::service::service_fn(move |request| {
        let (gate, record, upstream) = (gate.clone(), record.clone(), upstream.clone());
        let origin = origin.clone();
        async move {
            let answer = one(request, &origin, (&gate, &record), &upstream).await;
            Ok::<_, hyper::Error>(answer)
        }
    });
    // HTTP/1.1, or HTTP/2 when the client opens with its preface (ALPN `h2`
    // inside an inspected connection, or prior knowledge in plain HTTP):
    // every request, every stream, goes through `one`.
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEAD as u32)
        .max_concurrent_streams(MAX_STREAMS);
    builder
        .serve_connection(TokioIo::new(Prefixed::new(head, client)), service)
        .await
        .map_err(io::Error::other)
}

/// The upstream connection a client's requests go to while they name its
/// target.
struct Upstream {
    target: (String, u16),
    sender: hyper::client::conn::http1::SendRequest<Incoming>,
}

/// Decide and forward one request; the answer for the client either way.
async fn one(
    request: Request<Incoming>,
    origin: &Origin,
    (gate, record): (&Gate, &Mutex<Recorded>),
    upstream: &tokio::sync::Mutex<Option<Upstream>>,
) -> Response<Body> {
    let (host, port) = match target(&request, origin) {
        Ok(target) => target,
        Err(why) => return refusal(StatusCode::BAD_REQUEST, &why),
    };
    let request_line = (request.method().clone(), request.uri().path().to_owned());
    let default_port = origin.default_port();
    if let Err(why) = same_host(request.headers(), &host, (port, default_port)) {
        note(record, &host, port, &why);
        let reason = format!("{host}:{port} refused: {why}");
        return refusal(StatusCode::FORBIDDEN, &reason);
    }
    let addrs = match admit(gate, record, &host, port).await {
        Ok(addrs) => addrs,
        Err(Refusal::Refused(why)) => {
            let reason = format!("{host}:{port} refused: {why}");
            return refusal(StatusCode::FORBIDDEN, &reason);
        }
        Err(Refusal::Unreachable(why)) => return refusal(StatusCode::BAD_GATEWAY, &why),
    };
    let target = requests::Target {
        scheme: origin.scheme(),
        host: &host,
        port,
    };
    let request = match requests::decide(request, &target, (gate, record)).await {
        Ok(request) => request,
        Err((why, request)) => {
            let (method, path) = (request_line.0, request_line.1);
            let reason = format!(
                "{method} {}://{host}:{port}{path} refused: {why}",
                target.scheme
            );
            drain(request).await;
            return refusal(StatusCode::FORBIDDEN, &reason);
        }
    };
    let mut kept = upstream.lock().await;
    let reusable = kept
        .as_ref()
        .is_some_and(|up| up.target == (host.clone(), port) && !up.sender.is_closed());
    if !reusable {
        *kept = None;
        match connect(&addrs, origin).await {
            Ok(sender) => {
                let target = (host.clone(), port);
                *kept = Some(Upstream { target, sender })
            }
            Err(err) => {
                let why = format!("cannot reach {host}:{port}: {err}");
                return refusal(StatusCode::BAD_GATEWAY, &why);
            }
        }
    }
    let Some(up) = kept.as_mut() else {
        return refusal(StatusCode::BAD_GATEWAY, "no upstream connection");
    };
    let sent = match up.sender.ready().await {
        Ok(()) => {
            let request = origin_form(request, &host, (port, default_port));
            up.sender.send_request(request).await
        }
        Err(err) => Err(err),
    };
    match sent {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body.boxed())
        }
        Err(err) => {
            *kept = None;
            let why = format!("{host}:{port} failed: {err}");
            refusal(StatusCode::BAD_GATEWAY, &why)
        }
    }
}

/// An HTTP/1.1 connection to the first of `addrs` that answers — over TLS
/// for an inspected origin, the upstream verified as the host it names —
/// driven on a task of its own (ended when its sender is dropped).
async fn connect(
    addrs: &[std::net::SocketAddr],
    origin: &Origin,
) -> io::Result<hyper::client::conn::http1::SendRequest<Incoming>> {
    let stream = connect_upstream(addrs).await?;
    match origin {
        Origin::Plain => handshake(stream).await,
        Origin::Inspected { host, trust, .. } => {
            let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err))?;
            let connector = tokio_rustls::TlsConnector::from(trust.config());
            handshake(connector.connect(name, stream).await?).await
        }
    }
}

/// HTTP/1.1 on `stream`, its connection driven on a task of its own.
async fn handshake<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
) -> io::Result<hyper::client::conn::http1::SendRequest<Incoming>> {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(io::Error::other)?;
    tokio::spawn(connection);
    Ok(sender)
}

/// The target a request names: for plain HTTP its absolute URI, `http://`
/// only (a client speaking to the proxy as if it were the origin, or asking
/// for a tunnel on a connection that carried plain requests, is refused);
/// inside an inspected tunnel the tunnel's own, which an absolute URI may
/// name again but never another.
fn target(request: &Request<Incoming>, origin: &Origin) -> Result<(String, u16), String> {
    let uri = request.uri();
    if request.method() == hyper::Method::CONNECT {
        return Err("a tunnel (CONNECT) must be a connection's first request".into());
    }
    if let Origin::Inspected { host, port, .. } = origin {
        let named = uri
            .authority()
            .map(|authority| host_port(authority.as_str(), Some(443)));
        return match named {
            None => Ok((host.clone(), *port)),
            Some(Some((named, named_port)))
                if named.eq_ignore_ascii_case(host) && named_port == *port =>
            {
                Ok((host.clone(), *port))
            }
            Some(_) => Err(format!(
                "{:?} is not this tunnel's {host}:{port}",
                uri.to_string()
            )),
        };
    }
    if uri.scheme_str() != Some("http") {
        return Err(format!(
            "only http:// URLs are proxied in plain HTTP, got {:?}",
            uri.to_string()
        ));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("a bad URL {:?}", uri.to_string()))?;
    host_port(authority.as_str(), Some(80))
        .ok_or_else(|| format!("a bad URL {:?}", uri.to_string()))
}

/// Whether the request's `Host` header, when it has one, names the target
/// its URI names (an upstream serving many names routes by the header).
/// `(port, default)`: the target's port, and the one a header without a
/// port means.
fn same_host(headers: &HeaderMap, host: &str, (port, default): (u16, u16)) -> Result<(), String> {
    let mut named = headers.get_all(header::HOST).iter();
    let (Some(value), None) = (named.next(), named.next()) else {
        return match headers.contains_key(header::HOST) {
            true => Err("the request has more than one Host header".into()),
            false => Ok(()),
        };
    };
    let value = value.to_str().unwrap_or_default();
    match host_port(value, Some(default)) {
        Some((named, named_port)) if named.eq_ignore_ascii_case(host) && named_port == port => {
            Ok(())
        }
        _ => Err(format!(
            "its Host header {value:?} does not name the target its URL names"
        )),
    }
}

/// `request` as its upstream takes it: origin form (path and query), the
/// proxy's own and the hop-by-hop headers gone, a `Host` header naming
/// the decided target.
fn origin_form(
    request: Request<Incoming>,
    host: &str,
    (port, default): (u16, u16),
) -> Request<Incoming> {
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .to_owned();
    parts.uri = path
        .parse()
        .unwrap_or_else(|_| hyper::Uri::from_static("/"));
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove("proxy-authorization");
    if !parts.headers.contains_key(header::HOST) {
        let bracketed = match host.contains(':') {
            true => format!("[{host}]"),
            false => host.to_owned(),
        };
        let named = match port == default {
            true => bracketed,
            false => format!("{bracketed}:{port}"),
        };
        if let Ok(value) = HeaderValue::from_str(&named) {
            parts.headers.insert(header::HOST, value);
        }
    }
    Request::from_parts(parts, body)
}

/// Remove the headers that speak of one hop, not the message: those the
/// `Connection` header lists, and the standard ones (hyper frames the
/// message again on the next hop).
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    for name in listed {
        headers.remove(name.as_str());
    }
    for name in [
        "connection",
        "proxy-connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-authenticate",
    ] {
        headers.remove(name);
    }
    if headers.remove(header::TRANSFER_ENCODING).is_some() {
        // The body is framed again on the next hop; a length beside a
        // transfer coding would frame it twice.
        headers.remove(header::CONTENT_LENGTH);
    }
}

/// Read a refused request's body off the client, up to [`DRAIN_BYTES`]
/// within [`DRAIN_TIME`], so the refusal reaches a client still sending it
/// (an HTTP/2 client told to stop a stream mid-body may take that for an
/// error and never read the answer); past either bound it is dropped.
async fn drain(request: Request<Incoming>) {
    let body = http_body_util::Limited::new(request.into_body(), DRAIN_BYTES);
    let _ = tokio::time::timeout(DRAIN_TIME, body.collect()).await;
}

/// The most of a refused request's body the proxy reads off the client.
const DRAIN_BYTES: usize = 1 << 20;

/// How long the proxy reads a refused request's body.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// The proxy's own answer: `status` with a one-line reason.
fn refusal(status: StatusCode, reason: &str) -> Response<Body> {
    let body = Full::new(Bytes::from(format!("cordon: {reason}\n")))
        .map_err(|never| match never {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

/// A stream whose first bytes are `head` (read from it already), then its
/// own.
struct Prefixed<S> {
    head: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    fn new(head: Vec<u8>, inner: S) -> Self {
        Prefixed { head, at: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.head.len() {
            let rest = &self.head[self.at..];
            let taken = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..taken]);
            self.at += taken;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
