//! TLS inspection only where the grant marks it, tried from outside under
//! every backend against HTTPS servers this test starts on the host's
//! loopback, with a certificate authority the test makes standing in for
//! the public roots (the host trusts it through `SSL_CERT_FILE`).
//!
//! An endpoint marked `inspect` is reached with the run's own authority's
//! leaf (the client sees cordon's chain, and its requests reach the
//! upstream through the proxy's own verified TLS); an unmarked one is
//! tunnelled with the upstream's own certificate; the command trusts both
//! through the bundle its variables name, which holds no private key and
//! is gone with the run; a SOCKS5 tunnel around the inspection is refused.

use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::common::{self, confined_backends, parse, workspace};

/// The test's stand-in for the public roots, and a leaf it issued for
/// 127.0.0.1.
pub(crate) struct TestRoots {
    pub(crate) pem: String,
    leaf: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl TestRoots {
    pub(crate) fn new() -> TestRoots {
        let mut ca = rcgen::CertificateParams::default();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name = rcgen::DistinguishedName::new();
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "cordon e2e public root");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        TestRoots {
            pem: ca_cert.pem(),
            leaf: leaf.der().clone(),
            key: rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        }
    }

    /// An HTTPS server on the loopback presenting the leaf, answering every
    /// request `200 <name>`; the request lines and `Host` headers it saw.
    pub(crate) fn serve(&self, name: &'static str) -> (u16, Arc<Mutex<Vec<String>>>) {
        self.serve_with(move |_| Some(format!("{name}\n").into_bytes()))
    }

    /// An HTTPS server on the loopback presenting the leaf, answering each
    /// request for a path with what `answer` gives for it (`200`), or `404`
    /// for none; the request lines and `Host` headers it saw.
    pub(crate) fn serve_with(
        &self,
        answer: impl Fn(&str) -> Option<Vec<u8>> + Send + 'static,
    ) -> (u16, Arc<Mutex<Vec<String>>>) {
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![self.leaf.clone()], self.key.clone_key())
        .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(vec![]));
        let record = seen.clone();
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let connection = rustls::ServerConnection::new(config.clone()).unwrap();
                let mut tls = rustls::StreamOwned::new(connection, tcp);
                let Some(head) = common::request_head(&mut BufReader::new(&mut tls)) else {
                    continue;
                };
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                record.lock().unwrap().push(head);
                let (status, body) = match answer(&path) {
                    Some(body) => ("200 OK", body),
                    None => ("404 Not Found", b"not found\n".to_vec()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = tls.write_all(head.as_bytes());
                let _ = tls.write_all(&body);
                tls.conn.send_close_notify();
                let _ = tls.flush();
            }
        });
        (port, seen)
    }
}

/// The command: through the proxy, the issuer each endpoint presents and
/// its answer; the bundle its variables name; a SOCKS5 tunnel to the
/// inspected endpoint.
const CLIENT: &str = r#"
import os, socket, ssl, struct, sys, urllib.request
inspected, tunnelled = int(sys.argv[1]), int(sys.argv[2])
proxy = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
def through(port, path):
    s = socket.create_connection(("127.0.0.1", proxy), timeout=10)
    s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (port, port))
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += s.recv(1)
    tls = ssl.create_default_context().wrap_socket(s, server_hostname="127.0.0.1")
    issuer = dict(x[0] for x in tls.getpeercert()["issuer"])["commonName"]
    tls.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % (path.encode(), port))
    answer = b""
    while True:
        try:
            chunk = tls.recv(4096)
        except ssl.SSLError:
            break
        if not chunk:
            break
        answer += chunk
    return issuer, answer.split(b"\r\n\r\n", 1)[1].decode().strip()
print("inspected", *through(inspected, "/in"))
print("tunnelled", *through(tunnelled, "/through"))
print("urllib", urllib.request.urlopen("https://127.0.0.1:%d/lib" % inspected, timeout=10).read().decode().strip())
bundle = os.environ["SSL_CERT_FILE"]
text = open(bundle).read()
same = all(os.environ[v] == bundle for v in ("REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"))
print("bundle", text.count("BEGIN CERTIFICATE") >= 2, "PRIVATE KEY" not in text, same)
s = socket.create_connection(("127.0.0.1", proxy), timeout=10)
s.sendall(b"\x05\x01\x00")
s.recv(2)
s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", inspected))
print("socks", s.recv(10)[1])
print(bundle)
"#;

#[test]
fn only_a_marked_endpoint_is_inspected_and_every_other_is_tunnelled_with_its_own_certificate() {
    for (backend, _) in confined_backends("only_a_marked_endpoint_is_inspected") {
        let ws = workspace();
        let roots = TestRoots::new();
        let (inspected, inspected_seen) = roots.serve("inspected");
        let (tunnelled, tunnelled_seen) = roots.serve("tunnelled");
        let public = ws.path().join("public-roots.pem");
        std::fs::write(&public, &roots.pem).unwrap();
        std::fs::write(ws.path().join("client.py"), CLIENT).unwrap();
        let grant = json!({
            "mode": "read-only",
            "workspaceRoot": ws.path(),
            "network": {"allow": [
                {"host": "127.0.0.1", "port": inspected, "inspect": true},
                {"host": "127.0.0.1", "port": tunnelled},
            ]},
        })
        .to_string();
        let config = ws.path().join("cordon.toml");
        std::fs::write(&config, "max_network = [\"127.0.0.1\"]\n").unwrap();
        let line = format!("python3 client.py {inspected} {tunnelled}");
        let output = common::cordon()
            .current_dir(ws.path())
            .env("SSL_CERT_FILE", &public)
            .args(["run", "--json", "--config", config.to_str().unwrap()])
            .args(["--grant", &grant])
            .args(backend)
            .args(["--", &line])
            .output()
            .unwrap();
        let result = parse(&output);
        assert_eq!(output.status.code(), Some(0), "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..5],
            [
                "inspected cordon run inspection CA inspected",
                "tunnelled cordon e2e public root tunnelled",
                "urllib inspected",
                "bundle True True True",
                "socks 2",
            ],
            "{backend:?}: {result}"
        );
        // The inspected server was reached by the proxy's own TLS, request
        // by request; the tunnelled one by the command's.
        assert_eq!(
            *inspected_seen.lock().unwrap(),
            [
                format!("GET /in HTTP/1.1 Host=127.0.0.1:{inspected}"),
                format!("GET /lib HTTP/1.1 Host=127.0.0.1:{inspected}"),
            ],
            "{backend:?}"
        );
        assert_eq!(
            *tunnelled_seen.lock().unwrap(),
            [format!("GET /through HTTP/1.1 Host=127.0.0.1:{tunnelled}")],
            "{backend:?}"
        );
        assert_eq!(
            result["grant"]["network"]["allow"][0]["inspect"], true,
            "{result}"
        );
        // The bundle went with the run.
        let bundle = std::path::Path::new(lines[5]);
        assert!(
            !bundle.exists(),
            "{backend:?}: {} left behind",
            bundle.display()
        );
        assert!(!bundle.parent().unwrap().exists(), "{backend:?}");
    }
}
