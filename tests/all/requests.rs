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

/// A `cordon run` under `rules-policy` with the operator's `config`, the
/// rule file `rules`, the request's `grant` and one variable of the host's.
struct Ruled<'a> {
    env: (&'a str, &'a str),
    config: &'a std::path::Path,
    rules: &'a std::path::Path,
    grant: &'a str,
}

impl Ruled<'_> {
    /// Run `line` in `dir` under `backend`: its output and its result,
    /// which must be a success.
    fn run(
        &self,
        dir: &std::path::Path,
        backend: &[&str],
        line: &str,
    ) -> (std::process::Output, Value) {
        let policy = common::component("rules-policy.wasm");
        let output = common::cordon()
            .current_dir(dir)
            .env(self.env.0, self.env.1)
            .args(["run", "--json", "--config", self.config.to_str().unwrap()])
            .args(["--policy", policy.to_str().unwrap()])
            .args(["--settings", self.rules.to_str().unwrap()])
            .args(["--grant", self.grant])
            .args(backend)
            .args(["--", line])
            .output()
            .unwrap();
        let result = parse(&output);
        assert_eq!(output.status.code(), Some(0), "{backend:?}: {result}");
        (output, result)
    }
}

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
        let line = format!("python3 client.py {plain} {tls}");
        let run = Ruled {
            env: ("SSL_CERT_FILE", public.to_str().unwrap()),
            config: &config,
            rules: &rules,
            grant: &grant,
        };
        let (_, result) = run.run(ws.path(), backend, &line);
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
        // Upstream: each GET with the rule's header set, the removed one
        // gone and the command's own credential as it sent it (only the
        // component was not shown it); no POST ever arrived.
        assert_eq!(
            *plain_seen.lock().unwrap(),
            [format!(
                "GET /get?q=1 HTTP/1.1 Host=127.0.0.1:{plain} authorization=Bearer s3cret-token \
                 x-cordon-edit=by-policy"
            )],
            "{backend:?}"
        );
        assert_eq!(
            *tls_seen.lock().unwrap(),
            [format!(
                "GET /sget?q=2 HTTP/1.1 Host=127.0.0.1:{tls} authorization=Bearer s3cret-token \
                 x-cordon-edit=by-policy"
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

/// The secret values the host holds; no run may ever see them.
const ENV_SECRET: &str = "s3cret-from-the-hosts-env";
const FILE_SECRET: &str = "s3cret-from-a-file";

/// The command: what it can see of its credentials, then requests with
/// the placeholder to the bound server and to another, and one the policy
/// attaches a credential to.
const HOLDER: &str = r#"
import glob, os, sys, urllib.request, urllib.error
bound, other, secret_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
# Given reversed, so that no argv (a /proc/*/cmdline) holds them.
secrets = [s[::-1].encode() for s in sys.argv[4:]]
token = os.environ["API_TOKEN"]
print("placeholder", token.startswith("cordon-credential-api-"), os.environ.get("CORDON_E2E_API_SECRET"))
seen = []
for path in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
    try:
        seen.append(open(path, "rb").read())
    except OSError:
        pass
home = os.environ.get("HOME", "/nonexistent")
places = [os.path.join(d, f) for d, _, fs in os.walk(".") for f in fs]
for top in (home, "/tmp", os.path.dirname(secret_file)):
    try:
        places += [os.path.join(top, name) for name in os.listdir(top)]
    except OSError:
        pass
for path in places:
    try:
        if os.path.isfile(path):
            seen.append(open(path, "rb").read())
    except OSError:
        pass
try:
    seen.append(open(secret_file, "rb").read())
    print("secret file readable")
except OSError:
    print("secret file hidden")
print("secret seen", any(s in blob for blob in seen for s in secrets))
def ask(port, path, value):
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), headers={"Authorization": value})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode().strip()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode().strip()
print(*ask(bound, "/bound", "Bearer " + token))
print(*ask(other, "/other", "Bearer " + token))
print(*ask(bound, "/attach", "none"))
"#;

#[test]
fn a_credential_reaches_its_bound_host_while_the_command_holds_only_a_placeholder() {
    for (backend, _) in confined_backends("a_credential_reaches_its_bound_host") {
        let ws = workspace();
        let secrets = tempfile::tempdir().unwrap();
        let (bound, bound_seen) = recording_http_server();
        let (other, other_seen) = recording_http_server();
        let secret_file = secrets.path().join("filed-token");
        std::fs::write(&secret_file, format!("{FILE_SECRET}\n")).unwrap();
        let log = secrets.path().join("audit.jsonl");
        let config = ws.path().join("cordon.toml");
        std::fs::write(
            &config,
            format!(
                "max_network = [\"127.0.0.1\"]\naudit_log = {log:?}\n\
                 [credentials.api]\nhosts = [\"127.0.0.1:{bound}\"]\n\
                 from_env = \"CORDON_E2E_API_SECRET\"\nenv = \"API_TOKEN\"\n\
                 [credentials.filed]\nhosts = [\"127.0.0.1:{bound}\"]\nfrom_file = {secret_file:?}\n\
                 header = \"x-cordon-filed\"\nformat = \"key {{}}\"\n"
            ),
        )
        .unwrap();
        // The policy attaches `filed` to one path; every other request and
        // command is allowed.
        let rules = ws.path().join("rules.toml");
        std::fs::write(
            &rules,
            "default = \"allow\"\nopaque = \"allow\"\n[[requests]]\n\
             request = \"GET 127.0.0.1/attach\"\ndecision = \"allow\"\ncredential = \"filed\"\n",
        )
        .unwrap();
        std::fs::write(ws.path().join("holder.py"), HOLDER).unwrap();
        let grant = json!({
            "mode": "read-only",
            "workspaceRoot": ws.path(),
            "network": {"allow": [
                {"host": "127.0.0.1", "port": bound},
                {"host": "127.0.0.1", "port": other},
            ]},
        })
        .to_string();
        let reversed = |s: &str| s.chars().rev().collect::<String>();
        let line = format!(
            "python3 holder.py {bound} {other} {} {} {}",
            secret_file.display(),
            reversed(ENV_SECRET),
            reversed(FILE_SECRET)
        );
        let run = Ruled {
            env: ("CORDON_E2E_API_SECRET", ENV_SECRET),
            config: &config,
            rules: &rules,
            grant: &grant,
        };
        let (output, result) = run.run(ws.path(), backend, &line);
        let out = result["stdout"]["text"].as_str().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..4],
            [
                "placeholder True None",
                "secret file hidden",
                "secret seen False",
                "200 ok",
            ],
            "{backend:?}: {result}"
        );
        assert!(lines[4].starts_with("403 "), "{backend:?}: {}", lines[4]);
        assert!(
            lines[4].contains("the credential api, which the operator did not bind to"),
            "{backend:?}: {}",
            lines[4]
        );
        assert_eq!(lines[5], "200 ok", "{backend:?}: {result}");
        // Upstream: the value where bound, attached where the policy asked;
        // the other server never got a request.
        assert_eq!(
            *bound_seen.lock().unwrap(),
            [
                format!(
                    "GET /bound HTTP/1.1 Host=127.0.0.1:{bound} authorization=Bearer {ENV_SECRET}"
                ),
                format!(
                    "GET /attach HTTP/1.1 Host=127.0.0.1:{bound} authorization=none \
                     x-cordon-filed=key {FILE_SECRET}"
                ),
            ],
            "{backend:?}"
        );
        assert!(other_seen.lock().unwrap().is_empty(), "{backend:?}");
        // The facts name the credentials, never their values.
        let requests = &result["grant"]["requests"];
        assert_eq!(requests[0]["edits"], json!(["credential api"]), "{result}");
        assert_eq!(requests[1]["allowed"], false, "{result}");
        assert_eq!(
            requests[2]["edits"],
            json!(["attached credential filed"]),
            "{result}"
        );
        let everything = format!(
            "{}{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(&log).unwrap()
        );
        for secret in [ENV_SECRET, FILE_SECRET] {
            assert!(
                !everything.contains(secret),
                "{backend:?}: {secret} in {everything}"
            );
        }
    }
}
