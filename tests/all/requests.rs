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

use crate::common::{self, confined_backends, workspace};
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
        let mut args = vec!["--config", self.config.to_str().unwrap()];
        args.extend(["--policy", policy.to_str().unwrap()]);
        args.extend(["--settings", self.rules.to_str().unwrap()]);
        args.extend(["--grant", self.grant]);
        args.extend(backend);
        common::run_ok_with(dir, self.env, &args, line)
    }
}

/// A read-only grant of the workspace `ws` whose network is `allow`, as
/// `--grant` takes it.
fn read_only_reaching(ws: &std::path::Path, allow: Value) -> String {
    json!({"mode": "read-only", "workspaceRoot": ws, "network": {"allow": allow}}).to_string()
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
        let grant = read_only_reaching(
            ws.path(),
            json!([
                {"host": "127.0.0.1", "port": plain},
                {"host": "127.0.0.1", "port": tls, "inspect": true},
            ]),
        );
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
        let grant = read_only_reaching(
            ws.path(),
            json!([
                {"host": "127.0.0.1", "port": bound},
                {"host": "127.0.0.1", "port": other},
            ]),
        );
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

/// The secret the operator's `gh` credential holds.
const GH_SECRET: &str = "s3cret-for-pull-requests";

/// The command: two pull requests opened by POST (no body), each answer's
/// status and body on a line.
const PULLS: &str = r#"
import sys, urllib.request, urllib.error
port = int(sys.argv[1])
for repo in ("approved", "other"):
    url = "http://127.0.0.1:%d/repos/%s/pulls?draft=1" % (port, repo)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=b""), timeout=10) as answer:
            print(answer.status, answer.read().decode().strip())
    except urllib.error.HTTPError as refused:
        print(refused.code, refused.read().decode().strip())
"#;

#[test]
fn an_asked_request_is_refused_until_a_person_approves_it_then_goes_with_its_credential() {
    for (backend, _) in confined_backends("an_asked_request_is_refused_until") {
        let ws = workspace();
        let (server, seen) = recording_http_server();
        let config = ws.path().join("cordon.toml");
        std::fs::write(
            &config,
            format!(
                "max_network = [\"127.0.0.1\"]\n[credentials.gh]\nhosts = [\"127.0.0.1:{server}\"]\n\
                 from_env = \"CORDON_E2E_GH_SECRET\"\n"
            ),
        )
        .unwrap();
        let rules = ws.path().join("rules.toml");
        std::fs::write(
            &rules,
            "default = \"allow\"\nopaque = \"allow\"\n[[requests]]\n\
             request = \"POST 127.0.0.1/repos/*/pulls\"\ndecision = \"ask\"\n\
             reason = \"opening a pull request\"\ncredential = \"gh\"\n",
        )
        .unwrap();
        std::fs::write(ws.path().join("pulls.py"), PULLS).unwrap();
        let grant = read_only_reaching(ws.path(), json!([{"host": "127.0.0.1", "port": server}]));
        let run = Ruled {
            env: ("CORDON_E2E_GH_SECRET", GH_SECRET),
            config: &config,
            rules: &rules,
            grant: &grant,
        };
        let line = format!("python3 pulls.py {server}");
        let approval = |repo: &str| format!("POST 127.0.0.1:{server}/repos/{repo}/pulls");
        // Nobody approved: both wait, and neither reaches the server.
        let (_, unapproved) = run.run(ws.path(), backend, &line);
        let out = unapproved["stdout"]["text"].as_str().unwrap().to_owned();
        for (line, repo) in out.lines().zip(["approved", "other"]) {
            assert!(line.starts_with("403 "), "{backend:?}: {out}");
            assert!(
                line.contains("opening a pull request"),
                "{backend:?}: {line}"
            );
            let waits = format!("{} is sent only in a run approved for it", approval(repo));
            assert!(line.contains(&waits), "{backend:?}: {line}");
        }
        assert!(seen.lock().unwrap().is_empty(), "{backend:?}");
        let requests = &unapproved["grant"]["requests"];
        assert_eq!(requests[0]["asked"], true, "{unapproved}");
        assert_eq!(requests[0]["allowed"], false, "{unapproved}");
        // One approved: it goes, with the credential the rule attaches; the
        // other still waits.
        let approved = approval("approved");
        let mut backend_and_approval = backend.to_vec();
        backend_and_approval.extend(["--approve-request", &approved]);
        let (_, result) = run.run(ws.path(), &backend_and_approval, &line);
        let out = result["stdout"]["text"].as_str().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "200 ok", "{backend:?}: {result}");
        assert!(lines[1].starts_with("403 "), "{backend:?}: {out}");
        assert_eq!(
            *seen.lock().unwrap(),
            [format!(
                "POST /repos/approved/pulls?draft=1 HTTP/1.1 Host=127.0.0.1:{server} \
                 authorization=Bearer {GH_SECRET}"
            )],
            "{backend:?}"
        );
        let requests = &result["grant"]["requests"];
        assert_eq!(
            (&requests[0]["asked"], &requests[0]["allowed"]),
            (&json!(true), &json!(true)),
            "{result}"
        );
        assert_eq!(requests[0]["edits"], json!(["attached credential gh"]));
        assert_eq!(requests[1]["allowed"], false, "{result}");
        assert!(!result.to_string().contains(GH_SECRET), "{result}");
    }
}

#[test]
fn the_cli_says_which_request_waited_and_how_to_approve_it() {
    let Some((backend, _)) = confined_backends("the_cli_says_which_request_waited")
        .into_iter()
        .next()
    else {
        return;
    };
    let ws = workspace();
    let (server, seen) = recording_http_server();
    let rules = ws.path().join("rules.toml");
    std::fs::write(
        &rules,
        "default = \"allow\"\nopaque = \"allow\"\nrequest_default = \"ask\"\n",
    )
    .unwrap();
    std::fs::write(ws.path().join("pulls.py"), PULLS).unwrap();
    let config = ws.path().join("cordon.toml");
    std::fs::write(&config, "max_network = [\"127.0.0.1\"]\n").unwrap();
    let grant = read_only_reaching(ws.path(), json!([{"host": "127.0.0.1", "port": server}]));
    let policy = common::component("rules-policy.wasm");
    let output = common::cordon()
        .current_dir(ws.path())
        .args(["run", "--config", config.to_str().unwrap()])
        .args(["--policy", policy.to_str().unwrap()])
        .args(["--settings", rules.to_str().unwrap(), "--grant", &grant])
        .args(backend)
        .args(["--", &format!("python3 pulls.py {server}")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    for repo in ["approved", "other"] {
        let hint = format!(
            "cordon: to approve, run again with: --approve-request 'POST 127.0.0.1:{server}/repos/{repo}/pulls'\n"
        );
        assert!(stderr.contains(&hint), "{backend:?}: {stderr}");
    }
    assert!(seen.lock().unwrap().is_empty());
}

/// A bare repository with one commit, served by git's dumb HTTP protocol
/// (its files as they are, after `update-server-info`).
fn served_repository(dir: &std::path::Path) -> std::path::PathBuf {
    let git = |args: &[&str], at: &std::path::Path| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=e2e", "-c", "user.email=e2e@cordon.test"])
            .args([
                "-c",
                "init.defaultBranch=main",
                "-c",
                "protocol.file.allow=always",
            ])
            .args(args)
            .current_dir(at)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&["init", "-q"], &work);
    std::fs::write(work.join("README"), "cloned through cordon\n").unwrap();
    git(&["add", "README"], &work);
    git(&["commit", "-q", "-m", "first"], &work);
    git(&["clone", "-q", "--bare", "work", "repo.git"], dir);
    let bare = dir.join("repo.git");
    git(&["update-server-info"], &bare);
    bare
}

#[test]
fn git_clones_over_https_through_the_proxy_inspected_and_tunnelled() {
    for (backend, _) in confined_backends("git_clones_over_https_through_the_proxy") {
        let ws = workspace();
        let served = tempfile::tempdir().unwrap();
        let bare = served_repository(served.path());
        let roots = TestRoots::new();
        let files = |bare: std::path::PathBuf| {
            move |path: &str| {
                let path = path.split('?').next().unwrap_or(path);
                let relative = path.strip_prefix("/repo.git/")?;
                std::fs::read(bare.join(relative)).ok()
            }
        };
        let (inspected, inspected_seen) = roots.serve_with(files(bare.clone()));
        let (tunnelled, tunnelled_seen) = roots.serve_with(files(bare));
        let public = ws.path().join("public-roots.pem");
        std::fs::write(&public, &roots.pem).unwrap();
        // The operator inspects one of the two (`inspect`), whatever the
        // grant says; the grant names both.
        let config = ws.path().join("cordon.toml");
        std::fs::write(
            &config,
            format!("max_network = [\"127.0.0.1\"]\ninspect = [\"127.0.0.1:{inspected}\"]\n"),
        )
        .unwrap();
        let grant = json!({
            "mode": "workspace-write",
            "workspaceRoot": ws.path(),
            "network": {"allow": [
                {"host": "127.0.0.1", "port": inspected},
                {"host": "127.0.0.1", "port": tunnelled},
            ]},
        })
        .to_string();
        let line = format!(
            "git clone -q https://127.0.0.1:{inspected}/repo.git in && \
             git clone -q https://127.0.0.1:{tunnelled}/repo.git through && cat in/README through/README"
        );
        let mut args = vec!["--config", config.to_str().unwrap(), "--grant", &grant];
        args.extend(backend);
        let public = public.to_str().unwrap();
        let (_, result) = common::run_ok_with(ws.path(), ("SSL_CERT_FILE", public), &args, &line);
        assert_eq!(
            result["stdout"]["text"], "cloned through cordon\ncloned through cordon\n",
            "{backend:?}: {result}"
        );
        // Both servers were asked for the repository's files: the inspected
        // one by the proxy's own TLS, request by request.
        for seen in [&inspected_seen, &tunnelled_seen] {
            let seen = seen.lock().unwrap();
            assert!(
                seen.iter()
                    .any(|head| head.starts_with("GET /repo.git/HEAD ")),
                "{backend:?}: {seen:?}"
            );
        }
        let allow = &result["grant"]["network"]["allow"];
        assert_eq!(allow[0]["inspect"], true, "{backend:?}: {result}");
        assert_eq!(allow[1].get("inspect"), None, "{backend:?}: {result}");
    }
}

#[test]
fn http2_requests_inside_an_inspected_connection_are_decided_one_by_one() {
    for (backend, _) in confined_backends("http2_requests_inside_an_inspected_connection") {
        let ws = workspace();
        let roots = TestRoots::new();
        let (tls, seen) = roots.serve("inspected");
        let public = ws.path().join("public-roots.pem");
        std::fs::write(&public, &roots.pem).unwrap();
        let rules = ws.path().join("rules.toml");
        std::fs::write(&rules, RULES).unwrap();
        let config = ws.path().join("cordon.toml");
        std::fs::write(
            &config,
            format!("max_network = [\"127.0.0.1\"]\ninspect = [\"127.0.0.1:{tls}\"]\n"),
        )
        .unwrap();
        let grant = read_only_reaching(ws.path(), json!([{"host": "127.0.0.1", "port": tls}]));
        // Two GETs on one HTTP/2 connection, then a POST on another.
        let url = |path: &str| format!("https://127.0.0.1:{tls}/{path}");
        let line = format!(
            "curl -s --http2 -o /dev/null -o /dev/null -w '%{{http_version}} %{{http_code}}\\n' {} {} && \
             curl -s --http2 -w ' %{{http_version}} %{{http_code}}\\n' -d x {}",
            url("h2get"),
            url("h2again"),
            url("h2post")
        );
        let run = Ruled {
            env: ("SSL_CERT_FILE", public.to_str().unwrap()),
            config: &config,
            rules: &rules,
            grant: &grant,
        };
        let (_, result) = run.run(ws.path(), backend, &line);
        let out = result["stdout"]["text"].as_str().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[..2], ["2 200", "2 200"], "{backend:?}: {result}");
        assert!(
            lines[2].contains("no posting from this sandbox") && lines[3] == " 2 403",
            "{backend:?}: {result}"
        );
        assert_eq!(
            *seen.lock().unwrap(),
            ["h2get", "h2again"].map(|path| format!(
                "GET /{path} HTTP/1.1 Host=127.0.0.1:{tls} x-cordon-edit=by-policy"
            )),
            "{backend:?}: each HTTP/2 request reached the upstream on its own, edited"
        );
        let methods: Vec<&str> = (result["grant"]["requests"].as_array().unwrap().iter())
            .map(|r| r["method"].as_str().unwrap())
            .collect();
        assert_eq!(methods, ["GET", "GET", "POST"], "{backend:?}: {result}");
    }
}
