//! Downloads through the allow-list proxy, side by side in interleaved
//! rounds (median each): curl fetching a large body and many small ones
//! from an HTTPS server on the loopback — directly, through `cordon run`
//! with the endpoint tunnelled, and with it inspected (the proxy ends
//! curl's TLS, decides each request and opens its own TLS upstream). The
//! server's certificate comes from a root made here, which the host trusts
//! through `SSL_CERT_FILE` and curl through `--cacert` (inspected: through
//! the run's bundle).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

/// The large body.
const BIG: usize = 256 << 20;
/// Small requests per sample, on one kept-alive connection.
const SMALL: usize = 200;

/// A TLS server on the loopback answering `/big` with [`BIG`] bytes and
/// anything else with two, keeping connections alive; its port, and the
/// root its certificate chains to (PEM).
fn server() -> (u16, String) {
    let mut ca = rcgen::CertificateParams::default();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    // A name of its own: a leaf named like its issuer reads as self-signed.
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "cordon bench root");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let root = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let config = config.clone();
            // Each answer at once (curl waits for it before the next request).
            let _ = tcp.set_nodelay(true);
            std::thread::spawn(move || {
                let connection = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(connection, tcp);
                let chunk = vec![b'x'; 1 << 20];
                loop {
                    let mut reader = BufReader::new(&mut tls);
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) <= 2 {
                            break;
                        }
                    }
                    let big = line.contains(" /big ");
                    let length = if big { BIG } else { 2 };
                    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n");
                    if tls.write_all(head.as_bytes()).is_err() {
                        return;
                    }
                    let sent = match big {
                        true => (0..BIG / chunk.len()).try_for_each(|_| tls.write_all(&chunk)),
                        false => tls.write_all(b"ok"),
                    };
                    if sent.is_err() || tls.flush().is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, root)
}

/// One sample: `argv` run to success, in seconds.
fn timed(argv: &[String], root: &Path) -> f64 {
    let start = Instant::now();
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .env("SSL_CERT_FILE", root)
        .stdout(Stdio::null())
        .status()
        .expect("spawn");
    let took = start.elapsed().as_secs_f64();
    assert!(status.success(), "{argv:?} failed");
    took
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The downloads table (see the module docs), `rounds` rounds.
pub fn downloads(cordon: &str, rounds: usize) {
    let (port, root) = server();
    // Not under /tmp, which a sandbox may replace.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch");
    let roots = dir.path().join("roots.pem");
    std::fs::write(&roots, root).unwrap();
    let config = dir.path().join("cordon.toml");
    std::fs::write(&config, "max_network = [\"127.0.0.1\"]\n").unwrap();
    let grant = |inspect: bool| {
        serde_json::json!({
            "mode": "read-only",
            "workspaceRoot": dir.path(),
            "network": {"allow": [{"host": "127.0.0.1", "port": port, "inspect": inspect}]},
        })
        .to_string()
    };
    let cacert = format!("--cacert {}", roots.display());
    let big = format!("https://127.0.0.1:{port}/big");
    let small = format!("https://127.0.0.1:{port}/small[1-{SMALL}]");
    let one = format!("https://127.0.0.1:{port}/small1");
    let curl = |url: &str, cacert: &str| match url.ends_with("/big") {
        true => format!("curl -sf {cacert} -o /dev/null '{url}'"),
        false => format!("curl -sf {cacert} '{url}'"),
    };
    let through = |inspect: bool, line: String| -> Vec<String> {
        let mut argv: Vec<String> = [cordon, "run", "--config"].map(String::from).to_vec();
        argv.push(config.to_string_lossy().into_owned());
        argv.extend(["--grant".to_owned(), grant(inspect), "--".to_owned(), line]);
        argv
    };
    // rules-policy (world 0.3.0) deciding every inspected request.
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "default = \"allow\"\nopaque = \"allow\"\n[[requests]]\n\
         request = \"GET 127.0.0.1/*\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let decided = |line: String| -> Vec<String> {
        let mut argv = through(true, line);
        let settings = rules.to_string_lossy().into_owned();
        let policy = ["--policy", "builtin:rules-policy", "--settings"].map(String::from);
        argv.splice(2..2, policy.into_iter().chain([settings]));
        argv
    };
    let direct = |line: String| vec!["bash".to_owned(), "-c".to_owned(), line];
    // (name, argv, the case it is compared with)
    let cases: Vec<(&str, Vec<String>, usize)> = vec![
        ("256 MiB directly", direct(curl(&big, &cacert)), 0),
        ("256 MiB, tunnelled", through(false, curl(&big, &cacert)), 0),
        ("256 MiB, inspected", through(true, curl(&big, "")), 0),
        (
            "200 small requests directly",
            direct(curl(&small, &cacert)),
            3,
        ),
        (
            "200 small requests, tunnelled",
            through(false, curl(&small, &cacert)),
            3,
        ),
        (
            "200 small requests, inspected",
            through(true, curl(&small, "")),
            3,
        ),
        (
            "200 small requests, inspected, each decided by rules-policy's `request`",
            decided(curl(&small, "")),
            3,
        ),
        // The same runs with one request: what a run costs whatever its
        // requests (rules-policy's load and resolve among it).
        (
            "1 small request, inspected",
            through(true, curl(&one, "")),
            7,
        ),
        (
            "1 small request, inspected, decided by rules-policy's `request`",
            decided(curl(&one, "")),
            7,
        ),
    ];
    let mut samples = vec![vec![]; cases.len()];
    for _ in 0..rounds {
        for (case, (_, argv, _)) in cases.iter().enumerate() {
            samples[case].push(timed(argv, &roots));
        }
    }
    let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
    println!("\n| through the proxy ({rounds} rounds) | median | vs directly |");
    println!("|---|---|---|");
    for (case, (name, _, base)) in cases.iter().enumerate() {
        let base = medians[*base];
        println!(
            "| {name} | {:.1} ms | {:.2}× |",
            medians[case] * 1000.0,
            medians[case] / base
        );
    }
    let per_request = (medians[5] - medians[4]) / SMALL as f64 * 1e6;
    // The 199 requests more, with a decision each against without.
    let per_decision =
        ((medians[6] - medians[8]) - (medians[5] - medians[7])) / (SMALL - 1) as f64 * 1e6;
    println!(
        "\nInspection and a decision per request cost {per_request:.0} µs a request over the \
         tunnelled run (200 requests on one connection), rules-policy's `request` \
         {per_decision:.0} µs more; 256 MiB: {:.0} MB/s directly, {:.0} \
         tunnelled, {:.0} inspected.",
        BIG as f64 / medians[0] / 1e6,
        BIG as f64 / medians[1] / 1e6,
        BIG as f64 / medians[2] / 1e6
    );
}
