//! Policies from an OCI registry, against a real registry (the CNCF
//! distribution server Debian ships as `docker-registry`) started by the
//! test on loopback: `policy push`, `run --policy oci://…@sha256:…`, a tag
//! resolved and pinned, a signature required and checked, a tampered blob
//! and a wrong signature refused, `reload` over `serve` by reference.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{component, cordon, workspace};

/// A registry on 127.0.0.1, its storage in a temporary directory; killed on drop.
struct Registry {
    child: Child,
    port: u16,
    storage: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    /// Start one, or skip loudly (fail where CI requires it).
    fn start(test: &str) -> Option<Registry> {
        let found = Command::new("docker-registry")
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success());
        if !found {
            assert!(
                std::env::var_os("CORDON_E2E_REQUIRE_REGISTRY").is_none(),
                "docker-registry is required here (CORDON_E2E_REQUIRE_REGISTRY) but not installed"
            );
            eprintln!(
                "SKIPPED {test}: docker-registry (the CNCF distribution registry) is not installed"
            );
            return None;
        }
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let storage = dir.path().join("data");
            let config = dir.path().join("config.yml");
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                    storage.display()
                ),
            )
            .unwrap();
            let child = Command::new("docker-registry")
                .arg("serve")
                .arg(&config)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut registry = Registry {
                child,
                port,
                storage,
                _dir: dir,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if registry.child.try_wait().unwrap().is_some() {
                    break; // the port was taken meanwhile: try another
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(registry);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = registry.child.kill();
        }
        panic!("the registry did not start on loopback");
    }

    fn reference(&self, path: &str) -> String {
        format!("oci://127.0.0.1:{}/{path}", self.port)
    }

    /// The file the registry keeps blob `digest` in.
    fn blob(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

fn key(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/keys")
        .join(name)
}

/// `cordon ARGS` with a private cache: exit code, stdout, stderr.
fn cordon_with_cache(cache: &Path, args: &[&str]) -> (i32, String, String) {
    let ws = workspace();
    let output = cordon()
        .current_dir(ws.path())
        .env("XDG_CACHE_HOME", cache)
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn push(cache: &Path, file: &Path, reference: &str, sign: bool) -> String {
    let mut args = vec!["policy", "push", file.to_str().unwrap(), reference];
    let signer = key("signer.pem");
    if sign {
        args.extend(["--sign-key", signer.to_str().unwrap()]);
    }
    let (code, stdout, stderr) = cordon_with_cache(cache, &args);
    assert_eq!(code, 0, "push failed: {stderr}");
    let pinned = stdout.trim().to_owned();
    assert!(
        pinned.starts_with(&format!(
            "{}@sha256:",
            reference.rsplit_once(':').unwrap().0
        )),
        "{pinned}"
    );
    pinned
}

/// A config requiring signatures under `public_key`.
fn signed_config(dir: &Path, public_key: &Path) -> PathBuf {
    let config = dir.join("cordon.toml");
    std::fs::write(
        &config,
        format!(
            "[registry]\npublic_key = {:?}\n",
            public_key.to_str().unwrap()
        ),
    )
    .unwrap();
    config
}

#[test]
fn a_pushed_policy_runs_pinned_by_digest_and_a_tag_resolves_to_the_printed_digest() {
    let Some(registry) = Registry::start("registry::pinned") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let reference = registry.reference("policies/strict:v1");
    let pinned = push(
        cache.path(),
        &component("strict-policy.wasm"),
        &reference,
        true,
    );

    // Pinned by digest, signature required: it runs (strict-policy's own name shows it loaded).
    let config = signed_config(cache.path(), &key("signer.pub"));
    let (code, stdout, stderr) = cordon_with_cache(
        cache.path(),
        &[
            "run",
            "--json",
            "--config",
            config.to_str().unwrap(),
            "--policy",
            &pinned,
            "--",
            "echo via-registry",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["stdout"]["text"], "via-registry\n");

    // A tag is resolved and the pinned digest printed: the one the push printed.
    let fresh = tempfile::tempdir().unwrap();
    let (code, _, stderr) =
        cordon_with_cache(fresh.path(), &["run", "--policy", &reference, "--", "true"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains(&format!("is {pinned}")), "{stderr}");

    // `policy pull` says the same, and lands it in the cache: pinned, it
    // then loads with the registry gone.
    let (code, stdout, stderr) = cordon_with_cache(fresh.path(), &["policy", "pull", &reference]);
    assert_eq!((code, stdout.trim()), (0, pinned.as_str()), "{stderr}");
    drop(registry);
    let (code, _, stderr) =
        cordon_with_cache(fresh.path(), &["run", "--policy", &pinned, "--", "true"]);
    assert_eq!(
        code, 0,
        "the pulled component was not kept by digest: {stderr}"
    );
    // A tag is never taken from the cache: it needs the registry.
    let (code, _, stderr) =
        cordon_with_cache(fresh.path(), &["run", "--policy", &reference, "--", "true"]);
    assert_eq!(code, 70, "{stderr}");
    assert!(stderr.contains("registry 127.0.0.1:"), "{stderr}");
}

/// `GET path` from the registry over plain HTTP/1.0: the body.
fn http_get(registry: &Registry, path: &str, accept: &str) -> Vec<u8> {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", registry.port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: {accept}\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let at = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP response");
    assert!(
        response.starts_with(b"HTTP/1.1 200") || response.starts_with(b"HTTP/1.0 200"),
        "{}",
        String::from_utf8_lossy(&response)
    );
    response[at + 4..].to_vec()
}

#[test]
fn a_signature_is_in_cosigns_layout_and_verifies_with_openssl() {
    let Some(registry) = Registry::start("registry::cosign_layout") else {
        return;
    };
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("SKIPPED registry::cosign_layout: openssl is not installed");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let pinned = push(
        cache.path(),
        &component("strict-policy.wasm"),
        &registry.reference("p/cosign:v1"),
        true,
    );
    let digest = pinned.rsplit_once('@').unwrap().1;
    // Beside the component, at sha256-<hex>.sig: a simple-signing payload
    // layer with the signature in its annotation (what cosign writes).
    let tag = format!("{}.sig", digest.replacen(':', "-", 1));
    let manifest: Value = serde_json::from_slice(&http_get(
        &registry,
        &format!("/v2/p/cosign/manifests/{tag}"),
        "application/vnd.oci.image.manifest.v1+json",
    ))
    .unwrap();
    let layer = &manifest["layers"][0];
    assert_eq!(
        layer["mediaType"],
        "application/vnd.dev.cosign.simplesigning.v1+json"
    );
    let payload = http_get(
        &registry,
        &format!("/v2/p/cosign/blobs/{}", layer["digest"].as_str().unwrap()),
        "*/*",
    );
    let payload_json: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(
        payload_json["critical"]["image"]["docker-manifest-digest"],
        digest
    );
    assert_eq!(
        payload_json["critical"]["type"],
        "cosign container image signature"
    );
    assert_eq!(
        payload_json["critical"]["identity"]["docker-reference"],
        format!("127.0.0.1:{}/p/cosign", registry.port)
    );
    // The signature verifies with another implementation: ECDSA P-256 over
    // SHA-256 of the payload, DER, base64.
    let signature = layer["annotations"]["dev.cosignproject.cosign/signature"]
        .as_str()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("payload"), &payload).unwrap();
    std::fs::write(dir.path().join("sig.b64"), signature).unwrap();
    let decoded = Command::new("openssl")
        .args(["base64", "-d", "-A", "-in"])
        .arg(dir.path().join("sig.b64"))
        .arg("-out")
        .arg(dir.path().join("sig.der"))
        .status()
        .unwrap();
    assert!(decoded.success());
    let verified = Command::new("openssl")
        .args(["dgst", "-sha256", "-verify"])
        .arg(key("signer.pub"))
        .arg("-signature")
        .arg(dir.path().join("sig.der"))
        .arg(dir.path().join("payload"))
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
}

#[test]
fn a_tampered_blob_a_wrong_signature_and_a_missing_one_are_refused_and_nothing_runs() {
    let Some(registry) = Registry::start("registry::refused") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let marker = workspace();
    let witness = marker.path().join("ran");
    let command = format!("touch {}", witness.display());

    // Signed by signer.pem; a config that trusts only other.pub refuses it.
    let signed = push(
        cache.path(),
        &component("strict-policy.wasm"),
        &registry.reference("p/signed:v1"),
        true,
    );
    let wrong = signed_config(cache.path(), &key("other.pub"));
    let fresh = tempfile::tempdir().unwrap();
    let (code, _, stderr) = cordon_with_cache(
        fresh.path(),
        &[
            "run",
            "--mode",
            "danger-full-access",
            "--max-mode",
            "danger-full-access",
            "--config",
            wrong.to_str().unwrap(),
            "--policy",
            &signed,
            "--",
            &command,
        ],
    );
    assert_eq!(code, 70, "{stderr}");
    assert!(
        stderr.contains("no signature verifies under the configured public key"),
        "{stderr}"
    );

    // Unsigned, a signature required: refused, naming the tag looked at.
    let unsigned = push(
        cache.path(),
        &component("strict-policy.wasm"),
        &registry.reference("p/unsigned:v1"),
        false,
    );
    let trusting = signed_config(fresh.path(), &key("signer.pub"));
    let (code, _, stderr) = cordon_with_cache(
        fresh.path(),
        &[
            "run",
            "--config",
            trusting.to_str().unwrap(),
            "--policy",
            &unsigned,
            "--",
            &command,
        ],
    );
    assert_eq!(code, 70, "{stderr}");
    assert!(
        stderr.contains("a signature is required") && stderr.contains(".sig"),
        "{stderr}"
    );

    // A blob altered in the registry's storage: refused by digest.
    let pushed = push(
        cache.path(),
        &component("bash-local.wasm"),
        &registry.reference("p/tampered:v1"),
        false,
    );
    let wasm = std::fs::read(component("bash-local.wasm")).unwrap();
    let blob = registry.blob(&cordon::registry::reference::digest_of(&wasm));
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[200] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let (code, _, stderr) = cordon_with_cache(
        fresh.path(),
        &[
            "run",
            "--mode",
            "danger-full-access",
            "--max-mode",
            "danger-full-access",
            "--policy",
            &pushed,
            "--",
            &command,
        ],
    );
    assert_eq!(code, 70, "{stderr}");
    assert!(
        stderr.contains("refusing") && stderr.contains("igest"),
        "{stderr}"
    );

    // A digest the registry does not hold: refused.
    let other = format!(
        "{}@sha256:{}",
        registry.reference("p/signed"),
        "0".repeat(64)
    );
    let (code, _, stderr) = cordon_with_cache(fresh.path(), &["policy", "pull", &other]);
    assert_eq!(code, 70, "{stderr}");

    assert!(!witness.exists(), "a refused policy ran the command");
}

/// A registry that accepts connections and never answers: `policy pull`
/// and a run's `--policy oci://…` start-up fail within the operator's
/// `[registry] timeout_secs`, saying so, and nothing runs.
#[test]
fn a_stalled_registry_fails_within_the_timeout() {
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stalled.local_addr().unwrap().port();
    let dir = workspace();
    let config = dir.path().join("cordon.toml");
    std::fs::write(&config, "[registry]\ntimeout_secs = 2\n").unwrap();
    let config = config.to_str().unwrap();
    let reference = format!("oci://127.0.0.1:{port}/stalled/policy:1");
    let marker = dir.path().join("ran");
    let run = format!("touch {}", marker.display());
    for args in [
        vec!["policy", "pull", &reference, "--config", config],
        vec![
            "run", "--config", config, "--policy", &reference, "--", &run,
        ],
    ] {
        let started = std::time::Instant::now();
        let (code, _, stderr) = cordon_with_cache(dir.path(), &args);
        let took = started.elapsed();
        assert_ne!(code, 0, "{args:?}: {stderr}");
        assert!(stderr.contains("no answer within 2s"), "{args:?}: {stderr}");
        assert!(
            took < std::time::Duration::from_secs(20),
            "{args:?} took {took:?}"
        );
    }
    assert!(!marker.exists(), "a run went ahead without its policy");
    drop(stalled);
}

#[test]
fn serve_reloads_a_policy_by_reference() {
    let Some(registry) = Registry::start("registry::reload") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let pinned = push(
        cache.path(),
        &component("strict-policy.wasm"),
        &registry.reference("p/reload:v2"),
        true,
    );
    let config = signed_config(cache.path(), &key("signer.pub"));
    let ws = workspace();
    let mut server = cordon()
        .current_dir(ws.path())
        .env("XDG_CACHE_HOME", cache.path())
        .args(["serve", "--config", config.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut input = server.stdin.take().unwrap();
    let mut output = BufReader::new(server.stdout.take().unwrap());
    let mut call = |id: u64, method: &str, params: Value| -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(input, "{line}").unwrap();
        let mut reply = String::new();
        output.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap()
    };
    let tagged = registry.reference("p/reload:v2");
    let reloaded = call(1, "reload", json!({"reference": tagged}));
    assert_eq!(reloaded["result"]["reference"], json!(pinned), "{reloaded}");
    assert_eq!(reloaded["result"]["name"], "strict-policy", "{reloaded}");
    assert!(
        reloaded["result"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // Neither both nor none of path and reference.
    let both = call(2, "reload", json!({"reference": tagged, "path": "/x.wasm"}));
    assert_eq!(both["error"]["code"], -32602, "{both}");
    let bad = call(3, "reload", json!({"reference": "oci://nope"}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    // Unsigned under a config that requires a signature: refused, the
    // previous component still in force.
    let unsigned = push(
        cache.path(),
        &component("bash-local.wasm"),
        &registry.reference("p/reload:unsigned"),
        false,
    );
    let refused = call(4, "reload", json!({"reference": unsigned}));
    assert_eq!(
        refused["error"]["data"]["code"], "POLICY_FAILED",
        "{refused}"
    );
    let ran = call(5, "run", json!({"command": "echo still"}));
    assert_eq!(ran["result"]["stdout"]["text"], "still\n", "{ran}");
    drop(input);
    server.wait().unwrap();
}

/// A rule file for rules-policy that refuses `echo` and allows the rest.
fn no_echo(dir: &Path) -> PathBuf {
    let settings = dir.join("no-echo.toml");
    std::fs::write(
        &settings,
        "default = \"allow\"\n\n[[rules]]\nprogram = \"echo\"\ndecision = \"deny\"\n\
         reason = \"the published policy refuses echo\"\n",
    )
    .unwrap();
    settings
}

/// `cordon run --policy REFERENCE EXTRA… -- echo whole` on a fresh cache:
/// exit code, stdout, stderr.
fn run_whole(reference: &str, extra: &[&str]) -> (i32, String, String) {
    let fresh = tempfile::tempdir().unwrap();
    let mut args = vec!["run", "--policy", reference];
    args.extend(extra);
    args.extend(["--", "echo whole"]);
    cordon_with_cache(fresh.path(), &args)
}

#[test]
fn a_whole_policy_runs_with_its_signed_settings_and_refuses_tampering_and_local_overrides() {
    let Some(registry) = Registry::start("registry::whole") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let settings = no_echo(cache.path());
    let signer = key("signer.pem");
    let (code, stdout, stderr) = cordon_with_cache(
        cache.path(),
        &[
            "policy",
            "push",
            "builtin:rules-policy",
            &registry.reference("p/whole:v1"),
            "--settings",
            settings.to_str().unwrap(),
            "--sign-key",
            signer.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let pinned = stdout.trim().to_owned();
    // Control: the same component without settings runs echo.
    let bare = push(
        cache.path(),
        &component("rules-policy.wasm"),
        &registry.reference("p/bare:v1"),
        false,
    );
    let (code, stdout, stderr) = run_whole(&bare, &[]);
    assert_eq!((code, stdout.as_str()), (0, "whole\n"), "{stderr}");

    // Pulled by digest on another cache, signature required (--public-key,
    // no config file): it runs with the settings it carries.
    let public = key("signer.pub");
    let (code, stdout, stderr) = run_whole(&pinned, &["--public-key", public.to_str().unwrap()]);
    assert_eq!(code, 77, "{stdout}{stderr}");
    assert!(
        stderr.contains("the published policy refuses echo"),
        "{stderr}"
    );
    // Under another key it is refused: the signature covers it.
    let other = key("other.pub");
    let (code, _, stderr) = run_whole(&pinned, &["--public-key", other.to_str().unwrap()]);
    assert_eq!(code, 70, "{stderr}");
    assert!(stderr.contains("no signature verifies"), "{stderr}");

    // Settings of the host's own on top: refused, unless overrides are allowed.
    let allow_all = cache.path().join("allow.toml");
    std::fs::write(&allow_all, "default = \"allow\"\n").unwrap();
    let local = ["--settings", allow_all.to_str().unwrap()];
    let (code, _, stderr) = run_whole(&pinned, &local);
    assert_eq!(code, 70, "{stderr}");
    assert!(
        stderr.contains("carries its own settings") && stderr.contains("allow_settings_override"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run_whole(
        &pinned,
        &[&local[..], &["--allow-settings-override"]].concat(),
    );
    assert_eq!((code, stdout.as_str()), (0, "whole\n"), "{stderr}");

    // `policy pull` says it carries settings, and which.
    let fresh = tempfile::tempdir().unwrap();
    let (code, _, stderr) = cordon_with_cache(fresh.path(), &["policy", "pull", &pinned]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("carries its settings (sha256:"), "{stderr}");
    let (_, stdout, stderr) =
        cordon_with_cache(fresh.path(), &["doctor", "--json", "--policy", &pinned]);
    assert!(
        stdout.contains("runs with the settings its artifact carries (sha256:"),
        "{stdout}{stderr}"
    );

    // The settings layer altered in the registry's storage: refused.
    let json = {
        let (code, stdout, stderr) = cordon_with_cache(
            fresh.path(),
            &["policy", "check", "builtin:rules-policy", "--json"],
        );
        assert_eq!(code, 0, "{stderr}");
        stdout
    };
    assert!(!json.is_empty());
    let manifest: Value = serde_json::from_slice(&http_get(
        &registry,
        &format!(
            "/v2/p/whole/manifests/{}",
            pinned.rsplit_once('@').unwrap().1
        ),
        "application/vnd.oci.image.manifest.v1+json",
    ))
    .unwrap();
    let layer = &manifest["layers"][1];
    assert_eq!(
        layer["mediaType"],
        "application/vnd.cordon.policy.settings.v1+json"
    );
    let blob = registry.blob(layer["digest"].as_str().unwrap());
    let text = std::fs::read_to_string(&blob).unwrap();
    std::fs::write(&blob, text.replace("\"deny\"", "\"allow\"")).unwrap();
    let (code, stdout, stderr) = run_whole(&pinned, &[]);
    assert_eq!(code, 70, "{stdout}{stderr}");
    assert!(
        stderr.contains("refusing") && stderr.contains("igest"),
        "{stderr}"
    );
    assert!(!stdout.contains("whole"), "{stdout}");
}
