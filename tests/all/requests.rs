//! Per-request network decisions (world `0.3.0`'s `request`), tried from
//! outside under every backend with `rules-policy` and its `[[requests]]`
//! rules, against an HTTP and an HTTPS server this test starts on the
//! host's loopback (the HTTPS one marked for inspection, its certificate
//! from a test authority the host trusts through `SSL_CERT_FILE`).
//!
//! A `GET` is allowed and arrives upstream with the header the rule sets;
//! a `POST` to the same host is refused with the rule's reason and never
//! arrives; both over plain HTTP and inside the inspected HTTPS; every
//! decision is in the run's facts and its audit record (no query, no
//! header values); the component never sees a credential's value.

use serde_json::{Value, json};

use crate::common::{self, confined_backends, parse, workspace};
use crate::inspection::TestRoots;
use crate::network::recording_http_server;

/// The operator's rules: commands as the example file has them is not the
/// point here — every command runs; requests are what is decided.
const RULES: &str = r#"
default = "allow"
opaque = "allow"

[[requests]]
request = "GET|HEAD 127.0.0.1/*"
decision = "allow"
set_headers = { "x-cordon-edit" = "by-policy" }
remove_headers = ["x-cordon-drop"]
match = ["GET 127.0.0.1:8080/anything", "HEAD 127.0.0.1/"]
not_match = ["POST 127.0.0.1/x"]

[[requests]]
request = "POST 127.0.0.1/*"
decision = "deny"
reason = "no posting from this sandbox"
"#;

/// The command: a GET and a POST to each server through the proxy, with
/// a credential header and a header the rule removes; the status and the
/// body of each answer.
const CLIENT: &str = r#"
import sys, urllib.request, urllib.error
plain, tls = int(sys.argv[1]), int(sys.argv[2])
def ask(url, data=None):
    request = urllib.request.Request(url, data=data, headers={
        "Authorization": "Bearer s3cret-token", "X-Cordon-Drop": "gone"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode().strip()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode().strip()
for url in ("http://127.0.0.1:%d/get?q=1" % plain, "https://127.0.0.1:%d/sget?q=2" % tls):
    print(*ask(url))
    print(*ask(url.replace("get?", "post?"), b"body"))
"#;

fn decided(result: &Value) -> Vec<(String, String, bool, Value)> {
    let requests = result["grant"]["requests"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    requests
        .iter()
        .map(|r| {
            let what = format!(
                "{} {}",
                r["method"].as_str().unwrap(),
                r["path"].as_str().unwrap()
            );
            let scheme = r["scheme"].as_str().unwrap().to_owned();
            (
                scheme,
                what,
                r["allowed"].as_bool().unwrap(),
                r["edits"].clone(),
            )
        })
        .collect()
}

#[test]
fn a_get_is_allowed_with_the_rules_header_and_a_post_refused_with_its_reason_plain_and_inspected() {
    for (backend, _) in confined_backends("a_get_is_allowed_with_the_rules_header") {
        let ws = workspace();
        let logs = tempfile::tempdir().unwrap();
        let roots = TestRoots::new();
        let (plain, plain_seen) = recording_http_server();
        let (tls, tls_seen) = roots.serve("inspected");
        let public = ws.path().join("public-roots.pem");
        std::fs::write(&public, &roots.pem).unwrap();
        std::fs::write(ws.path().join("client.py"), CLIENT).unwrap();
        let rules = ws.path().join("rules.toml");
        std::fs::write(&rules, RULES).unwrap();
        let log = logs.path().join("audit.jsonl");
        let config = ws.path().join("cordon.toml");
        std::fs::write(
            &config,
            format!(
                "max_network = [\"127.0.0.1\"]\naudit_log = {:?}\n",
                log.to_str().unwrap()
            ),
        )
        .unwrap();
        let grant = json!({
            "mode": "read-only",
            "workspaceRoot": ws.path(),
            "network": {"allow": [
                {"host": "127.0.0.1", "port": plain},
                {"host": "127.0.0.1", "port": tls, "inspect": true},
            ]},
        })
        .to_string();
        let policy = common::component("rules-policy.wasm");
        let output = common::cordon()
            .current_dir(ws.path())
            .env("SSL_CERT_FILE", &public)
            .args(["run", "--json", "--config", config.to_str().unwrap()])
            .args(["--policy", policy.to_str().unwrap()])
            .args(["--settings", rules.to_str().unwrap()])
            .args(["--grant", &grant])
            .args(backend)
            .args(["--", &format!("python3 client.py {plain} {tls}")])
            .output()
            .unwrap();
        let result = parse(&output);
        assert_eq!(output.status.code(), Some(0), "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "200 ok", "{backend:?}: {result}");
        assert_eq!(lines[2], "200 inspected", "{backend:?}: {result}");
        for (line, url) in [
            (lines[1], format!("http://127.0.0.1:{plain}/post")),
            (lines[3], format!("https://127.0.0.1:{tls}/spost")),
        ] {
            assert!(line.starts_with("403 "), "{backend:?}: {line}");
            assert!(
                line.contains("no posting from this sandbox"),
                "{backend:?}: {line}"
            );
            assert!(
                line.contains(&format!("POST {url} refused")),
                "{backend:?}: {line}"
            );
        }
        // Upstream: each GET with the rule's header set and the removed one
        // gone; no POST ever arrived.
        assert_eq!(
            *plain_seen.lock().unwrap(),
            [format!(
                "GET /get?q=1 HTTP/1.1 Host=127.0.0.1:{plain} x-cordon-edit=by-policy"
            )],
            "{backend:?}"
        );
        assert_eq!(
            *tls_seen.lock().unwrap(),
            [format!(
                "GET /sget?q=2 HTTP/1.1 Host=127.0.0.1:{tls} x-cordon-edit=by-policy"
            )],
            "{backend:?}"
        );
        // The facts: every decision, in order; no query, no header value.
        let edits = json!(["set x-cordon-edit", "removed x-cordon-drop"]);
        assert_eq!(
            decided(&result),
            [
                ("http".into(), "GET /get".into(), true, edits.clone()),
                ("http".into(), "POST /post".into(), false, Value::Null),
                ("https".into(), "GET /sget".into(), true, edits),
                ("https".into(), "POST /spost".into(), false, Value::Null),
            ],
            "{backend:?}: {result}"
        );
        assert_eq!(
            result["grant"]["requests"][1]["reason"],
            "no posting from this sandbox"
        );
        let refused = result["grant"]["refused"].to_string();
        assert!(
            refused.contains("POST /post: no posting from this sandbox"),
            "{refused}"
        );
        let facts = result["grant"].to_string();
        assert!(
            !facts.contains("q=1") && !facts.contains("s3cret"),
            "{facts}"
        );
        // The audit record of the run says the same.
        let text = std::fs::read_to_string(&log).unwrap();
        let record: Value = text
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .find(|record| record["event"] == "run")
            .unwrap_or_else(|| panic!("no run record in {text}"));
        assert_eq!(record["requests"], result["grant"]["requests"], "{record}");
        assert!(!text.contains("s3cret") && !text.contains("q=2"), "{text}");
    }
}
