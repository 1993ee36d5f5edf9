//! TLS inspection, only for the endpoints a grant marks.
//!
//! Intercepting TLS breaks the tools that bring their own roots, pin
//! certificates or present client certificates, so the proxy tunnels every
//! HTTPS connection untouched unless its endpoint is marked `inspect` —
//! where a request-level rule needs to see inside. For those the proxy
//! ends the client's TLS itself with a certificate for the host, issued by
//! the run's own certificate authority ([`Authority`]), and opens its own
//! TLS to the upstream, verified with the host's trust store ([`Trust`]);
//! the requests in between are decided one by one like plain HTTP.
//!
//! The authority is made when the run's proxy is, in the host's memory: its
//! key is never written anywhere, so no run (and no later run) can read it
//! and sign for a host; the run receives only its certificate, in a bundle
//! beside the system's roots ([`Authority::bundle`]). Each leaf is issued
//! for one host, valid for a day, and kept for the run's later connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore, ServerConfig};

/// What the proxy offers the command's client of an inspected connection:
/// HTTP/2 or HTTP/1.1, each request decided on its own either way.
const CLIENT_ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

/// What the proxy asks of the upstream: HTTP/1.1, whatever the client spoke
/// (each request is sent on its own, in origin form).
const UPSTREAM_ALPN: &[&[u8]] = &[b"http/1.1"];

/// One run's certificate authority, its key in memory only.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    certificate: CertificateDer<'static>,
    /// One server configuration per host, issued on first use.
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

/// The crypto every TLS of the proxy's uses: ring's, as the rest of cordon.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A validity from a day ago (clocks differ) to `days` from now.
fn valid_for(params: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(days);
}

impl Authority {
    /// A fresh authority, valid for a week (a run that outlives it gets
    /// leaves its clients refuse, never a longer-lived key).
    pub fn new() -> Result<Authority, rcgen::Error> {
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::OrganizationName, "cordon");
        name.push(DnType::CommonName, "cordon run inspection CA");
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        valid_for(&mut params, 7);
        let key = KeyPair::generate()?;
        let certificate = params.self_signed(&key)?.der().clone();
        Ok(Authority {
            issuer: Issuer::new(params, key),
            certificate,
            leaves: Mutex::default(),
        })
    }

    /// The authority's certificate, PEM.
    pub fn pem(&self) -> String {
        pem_block(&self.certificate)
    }

    /// The bundle a run trusts: this authority's certificate, then the
    /// host's roots (every other host is tunnelled and verified by them).
    pub fn bundle(&self) -> String {
        let mut bundle = self.pem();
        for root in host_roots() {
            bundle.push_str(&pem_block(root));
        }
        bundle
    }

    /// The server side of an inspected connection to `host`: its leaf,
    /// issued now or earlier in the run.
    pub fn server(&self, host: &str) -> Result<Arc<ServerConfig>, String> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(config) = leaves.get(host) {
            return Ok(config.clone());
        }
        let config =
            Arc::new(self.issue(host).map_err(|err| {
                format!("cannot issue the inspection certificate for {host}: {err}")
            })?);
        leaves.insert(host.to_owned(), config.clone());
        Ok(config)
    }

    fn issue(&self, host: &str) -> Result<ServerConfig, Box<dyn std::error::Error>> {
        let mut params = CertificateParams::new(vec![host.to_owned()])?;
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, host.to_owned());
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        valid_for(&mut params, 1);
        let key = KeyPair::generate()?;
        let leaf = params.signed_by(&key, &self.issuer)?;
        let chain = vec![leaf.der().clone(), self.certificate.clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = CLIENT_ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }
}

/// How the proxy verifies an inspected connection's upstream: the host's
/// trust store ([`host_roots`]).
#[derive(Clone, Debug)]
pub struct Trust(Arc<ClientConfig>);

impl Trust {
    /// The host's trust store.
    pub fn host() -> Result<Trust, String> {
        static HOST: std::sync::OnceLock<Result<Trust, String>> = std::sync::OnceLock::new();
        HOST.get_or_init(|| {
            let mut roots = RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(host_roots().iter().cloned());
            match added {
                0 => Err("the host's trust store has no certificate".to_owned()),
                _ => Trust::of(roots),
            }
        })
        .clone()
    }

    /// A client trusting `roots` only.
    pub fn of(roots: RootCertStore) -> Result<Trust, String> {
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|err| err.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = UPSTREAM_ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(Trust(Arc::new(config)))
    }

    /// The client configuration.
    pub fn config(&self) -> Arc<ClientConfig> {
        self.0.clone()
    }
}

/// The host's trust store (`SSL_CERT_FILE`/`SSL_CERT_DIR` where the host
/// sets them), read once: every inspected run's bundle and the upstreams'
/// verification share it.
fn host_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: std::sync::OnceLock<Vec<CertificateDer<'static>>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

/// `der` as a PEM `CERTIFICATE` block.
fn pem_block(der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut block = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        block.push_str(std::str::from_utf8(line).unwrap_or_default());
        block.push('\n');
    }
    block.push_str("-----END CERTIFICATE-----\n");
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_leaf_for_a_host_verifies_against_the_runs_authority_and_only_for_that_host() {
        let authority = Authority::new().unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(authority.certificate.clone()).unwrap();
        let trust = Trust::of(roots).unwrap();
        for (asked, named, verifies) in [
            ("registry.example", "registry.example", true),
            ("127.0.0.1", "127.0.0.1", true),
            ("registry.example", "other.example", false),
        ] {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let acceptor = tokio_rustls::TlsAcceptor::from(authority.server(asked).unwrap());
            let served = tokio::spawn(async move { acceptor.accept(server).await.is_ok() });
            let connector = tokio_rustls::TlsConnector::from(trust.config());
            let name = rustls::pki_types::ServerName::try_from(named.to_owned()).unwrap();
            let connected = connector.connect(name, client).await;
            assert_eq!(
                connected.is_ok(),
                verifies,
                "{asked} as {named}: {connected:?}"
            );
            if verifies {
                assert!(served.await.unwrap());
            }
        }
        // Issued once per host.
        let again = authority.server("registry.example").unwrap();
        assert!(Arc::ptr_eq(
            &again,
            &authority.server("registry.example").unwrap()
        ));
    }

    #[test]
    fn the_bundle_starts_with_the_authority_and_holds_the_hosts_roots() {
        let authority = Authority::new().unwrap();
        let bundle = authority.bundle();
        assert!(bundle.starts_with(&authority.pem()));
        let blocks = bundle.matches("-----BEGIN CERTIFICATE-----").count();
        let host = host_roots().len();
        assert_eq!(blocks, 1 + host);
        assert!(!bundle.contains("PRIVATE KEY"));
    }
}
