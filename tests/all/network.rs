//! The network of a confined run, tried from outside as root under every
//! backend against listeners this test starts on the host (loopback and
//! unix sockets only), with the host's listeners checked after: under the
//! default `none` a command reaches no host pathname socket, no host
//! abstract socket, no host TCP listener on 127.0.0.1, and cannot listen on
//! a host port; under `full` (a positive control) it reaches them; an
//! exposed socket is reachable only when the grant names it and the
//! operator lets it be exposed; the variables pointing at host sockets are
//! withheld from a closed run.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, confined_backends, run_json, workspace};

/// Listeners on the host: a pathname unix socket, an abstract one and a
/// TCP one on 127.0.0.1, all non-blocking.
struct Listeners {
    unix: UnixListener,
    unix_path: std::path::PathBuf,
    abstract_name: String,
    abstract_socket: UnixListener,
    tcp: TcpListener,
}

impl Listeners {
    fn start(dir: &Path, tag: &str) -> Listeners {
        let unix_path = dir.join(format!("{tag}.sock"));
        let unix = UnixListener::bind(&unix_path).unwrap();
        // Unique per call: a child another test thread forked holds this
        // process's sockets until it execs, so a name reused at once can
        // still be bound (EADDRINUSE).
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let abstract_name = format!("cordon-e2e-net-{}-{tag}-{call}", std::process::id());
        let address = SocketAddr::from_abstract_name(&abstract_name).unwrap();
        let abstract_socket = UnixListener::bind_addr(&address).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        for listener in [&unix, &abstract_socket] {
            listener.set_nonblocking(true).unwrap();
        }
        tcp.set_nonblocking(true).unwrap();
        Listeners {
            unix,
            unix_path,
            abstract_name,
            abstract_socket,
            tcp,
        }
    }

    /// A python line that tries every listener and prints `NAME:ok` or
    /// `NAME:refused` for each.
    fn probe(&self) -> String {
        let port = self.tcp.local_addr().unwrap().port();
        format!(
            "python3 -c \"
import socket
def attempt(name, family, address):
    try:
        s = socket.socket(family)
        s.settimeout(3)
        s.connect(address)
        print(name + ':ok')
    except OSError as e:
        print(name + ':refused')
attempt('unix', socket.AF_UNIX, '{}')
attempt('abstract', socket.AF_UNIX, '\\0{}')
attempt('tcp', socket.AF_INET, ('127.0.0.1', {port}))
\"",
            self.unix_path.display(),
            self.abstract_name
        )
    }

    /// Which listeners saw a connection.
    fn reached(&self) -> Vec<&'static str> {
        let mut reached = vec![];
        let seen = |result: std::io::Result<()>| match result {
            Ok(()) => true,
            Err(err) if err.kind() == ErrorKind::WouldBlock => false,
            Err(err) => panic!("accept: {err}"),
        };
        if seen(self.unix.accept().map(drop)) {
            reached.push("unix");
        }
        if seen(self.abstract_socket.accept().map(drop)) {
            reached.push("abstract");
        }
        if seen(self.tcp.accept().map(drop)) {
            reached.push("tcp");
        }
        reached
    }
}

fn grant(root: &Path, extra: Value) -> String {
    let mut policy = json!({"mode": "read-only", "workspaceRoot": root});
    if let (Value::Object(policy), Value::Object(extra)) = (&mut policy, extra) {
        policy.extend(extra);
    }
    policy.to_string()
}

#[test]
fn under_none_no_host_socket_or_listener_is_reachable_and_under_full_all_are() {
    for (backend, _) in confined_backends("under_none_no_host_socket_or_listener_is_reachable") {
        let ws = workspace();
        let listeners = Listeners::start(ws.path(), "none");
        let mut args = backend.to_vec();
        args.extend(["--mode", "read-only"]);
        let (code, result) = run_json(ws.path(), &args, &listeners.probe());
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert_eq!(
            result["stdout"]["text"], "unix:refused\nabstract:refused\ntcp:refused\n",
            "{backend:?}: {result}"
        );
        assert_eq!(listeners.reached(), Vec::<&str>::new(), "{backend:?}");
        assert_eq!(result["grant"]["network"], "none", "{result}");
        // bash's /dev/tcp and curl fail the same way.
        let port = listeners.tcp.local_addr().unwrap().port();
        let line = format!(
            "(echo x > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo tcp:ok || echo tcp:refused; \
             if command -v curl >/dev/null; then curl -sS --max-time 3 http://127.0.0.1:{port}/ \
             >/dev/null 2>&1 && echo curl:ok || echo curl:refused; fi"
        );
        let (_, result) = run_json(ws.path(), &args, &line);
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(
            out.contains("tcp:refused") && !out.contains(":ok"),
            "{backend:?}: {out}"
        );
        assert_eq!(listeners.reached(), Vec::<&str>::new(), "{backend:?}");

        // Positive control: `full` (within an operator's `full` ceiling)
        // reaches all.
        let full = grant(ws.path(), json!({"network": "full"}));
        let config = common::full_network_config();
        let mut args = backend.to_vec();
        args.extend(["--grant", &full, "--config", config.to_str().unwrap()]);
        let (code, result) = run_json(ws.path(), &args, &listeners.probe());
        assert_eq!(code, 0, "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(
            out.contains("unix:ok") && out.contains("tcp:ok"),
            "{backend:?}: {out}"
        );
        let reached = listeners.reached();
        assert!(
            reached.contains(&"unix") && reached.contains(&"tcp"),
            "{reached:?}"
        );
    }
}

#[tokio::test]
async fn under_none_a_command_cannot_listen_on_a_host_port() {
    let ws = workspace();
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    for (backend, _) in confined_backends("under_none_a_command_cannot_listen_on_a_host_port") {
        let choice = match backend.contains(&"landlock") {
            true => cordon::sandbox::BackendChoice::Landlock,
            false => cordon::sandbox::BackendChoice::Bwrap,
        };
        let host = cordon::Host::builder()
            .deployment(cordon::Deployment::in_dir(ws.path()))
            .sandbox(cordon::sandbox::SandboxConfig {
                backend: choice,
                launcher: Some(env!("CARGO_BIN_EXE_cordon").into()),
                ..Default::default()
            })
            .build()
            .unwrap();
        let line = format!(
            "python3 -c \"
import socket, time
try:
    s = socket.socket()
    s.bind(('127.0.0.1', {port}))
    s.listen()
    print('bound', flush=True)
except OSError:
    print('refused', flush=True)
time.sleep(5)
\""
        );
        let request = common::request(cordon::SandboxMode::ReadOnly, ws.path(), &line);
        let task = host.start(request).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut text = String::new();
        while !text.contains('\n') {
            assert!(Instant::now() < deadline, "no answer: {text:?}");
            text.push_str(&task.read().text);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Whatever it did inside, nothing listens on the host's port.
        let reached = std::net::TcpStream::connect(("127.0.0.1", port));
        assert!(reached.is_err(), "{text}: the host's port {port} answers");
        task.kill();
        task.wait(Some(Duration::from_secs(10))).await;
    }
}

#[test]
fn an_exposed_socket_is_reachable_only_when_granted_and_allowed() {
    for (backend, _) in confined_backends("an_exposed_socket_is_reachable_only_when_granted") {
        let ws = workspace();
        let listeners = Listeners::start(ws.path(), "agent");
        let socket = listeners.unix_path.to_str().unwrap().to_owned();
        let exposing = grant(ws.path(), json!({"sockets": [socket]}));

        // Granted but not allowed by the operator: refused before anything runs.
        let mut args = backend.to_vec();
        args.extend(["--grant", &exposing]);
        let (code, result) = run_json(ws.path(), &args, &listeners.probe());
        assert_eq!(code, 64, "{result}");
        assert_eq!(result["error"]["field"], "policy.sockets");

        // Allowed and granted: reachable (and the run says what that costs).
        let config = ws.path().join("cordon.toml");
        std::fs::write(&config, format!("exposable_sockets = [{socket:?}]\n")).unwrap();
        let mut args = vec!["--config", config.to_str().unwrap()];
        args.extend(backend);
        args.extend(["--grant", &exposing]);
        let (code, result) = run_json(ws.path(), &args, &listeners.probe());
        assert_eq!(code, 0, "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(out.starts_with("unix:ok\n"), "{backend:?}: {out}");
        assert!(out.contains("tcp:refused"), "{backend:?}: {out}");
        assert_eq!(listeners.reached(), vec!["unix"], "{backend:?}");
        assert!(
            result["grant"]["partial"]
                .to_string()
                .contains("sockets: exposing"),
            "{result}"
        );

        // Allowed but not granted: closed.
        let mut args = vec!["--config", config.to_str().unwrap()];
        args.extend(backend);
        args.extend(["--mode", "read-only"]);
        let (_, result) = run_json(ws.path(), &args, &listeners.probe());
        assert!(
            result["stdout"]["text"]
                .as_str()
                .unwrap()
                .starts_with("unix:refused"),
            "{result}"
        );
        assert_eq!(listeners.reached(), Vec::<&str>::new());
    }
}

#[test]
fn the_variables_pointing_at_host_sockets_are_withheld_from_a_closed_run() {
    if !common::bwrap_usable("the_variables_pointing_at_host_sockets_are_withheld") {
        return;
    }
    let ws = workspace();
    let show = "echo ${SSH_AUTH_SOCK-unset} ${DOCKER_HOST-unset} ${DBUS_SESSION_BUS_ADDRESS-unset}";
    let run = |grant: &str, config: Option<&Path>| {
        let mut command = common::cordon();
        command
            .current_dir(ws.path())
            .env("SSH_AUTH_SOCK", "/tmp/ssh-e2e/agent.1")
            .env("DOCKER_HOST", "unix:///run/docker.sock")
            .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/0/bus")
            .args(["run", "--json", "--backend", "bwrap", "--grant", grant]);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let output = command.args(["--", show]).output().unwrap();
        common::parse(&output)["stdout"]["text"].clone()
    };
    assert_eq!(
        run(&grant(ws.path(), json!({})), None),
        "unset unset unset\n"
    );
    // Under `full` the credential scrub still takes the agent and the bus.
    let full = common::full_network_config();
    assert_eq!(
        run(&grant(ws.path(), json!({"network": "full"})), Some(&full)),
        "unset unix:///run/docker.sock unset\n"
    );
    // An exposed agent gets its variable, past the scrub, and nothing else.
    let config = ws.path().join("cordon.toml");
    std::fs::write(&config, "exposable_sockets = [\"/tmp/ssh-e2e/agent.1\"]\n").unwrap();
    let exposing = grant(ws.path(), json!({"sockets": ["/tmp/ssh-e2e/agent.1"]}));
    assert_eq!(
        run(&exposing, Some(&config)),
        "/tmp/ssh-e2e/agent.1 unset unset\n"
    );
}

/// A cordon.toml in `dir` whose `max_network` names `endpoints`: the
/// operator's word that runs may reach these services on the host's
/// loopback (the proxy refuses internal addresses nobody named).
fn ceiling(dir: &Path, endpoints: &[String]) -> PathBuf {
    let path = dir.join("cordon.toml");
    let list: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
    std::fs::write(&path, format!("max_network = [{}]\n", list.join(", "))).unwrap();
    path
}

/// A loopback HTTP server answering every request with `body`, on a thread.
pub fn http_server(body: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    (port, served)
}

#[test]
fn an_allow_list_reaches_its_endpoint_through_the_proxy_and_the_rest_is_refused_with_the_reason() {
    for (backend, _) in confined_backends("an_allow_list_reaches_its_endpoint_through_the_proxy") {
        let ws = workspace();
        let (allowed, allowed_served) = http_server("allowed\n");
        let (other, other_served) = http_server("other\n");
        let policy = grant(
            ws.path(),
            json!({"network": {"allow": [{"host": "127.0.0.1", "port": allowed}]}}),
        );
        // Python's urllib honours HTTP_PROXY; SOCKS5 by hand, as a client
        // such as git-over-ssh's proxy command would speak it, to the port
        // ALL_PROXY names.
        let line = format!(
            "python3 -c \"
import os, socket, struct, urllib.request
def get(port):
    try:
        return urllib.request.urlopen('http://127.0.0.1:%d/' % port, timeout=5).read().decode().strip()
    except Exception as e:
        return 'refused: ' + str(getattr(e, 'code', e))
print('http', get({allowed}))
print('http', get({other}))
proxy = int(os.environ['ALL_PROXY'].rsplit(':', 1)[1])
def socks(port):
    s = socket.create_connection(('127.0.0.1', proxy), timeout=5)
    s.sendall(b'\\\\x05\\\\x01\\\\x00')
    s.recv(2)
    s.sendall(b'\\\\x05\\\\x01\\\\x00\\\\x01' + socket.inet_aton('127.0.0.1') + struct.pack('>H', port))
    reply = s.recv(10)
    if reply[1] != 0:
        return 'refused %d' % reply[1]
    s.sendall(b'GET / HTTP/1.0\\\\r\\\\n\\\\r\\\\n')
    return s.recv(4096).decode().split('\\\\r\\\\n\\\\r\\\\n')[-1].strip()
print('socks', socks({allowed}))
print('socks', socks({other}))
\""
        );
        let config = ceiling(ws.path(), &["127.0.0.1".into()]);
        let mut args = backend.to_vec();
        args.extend(["--config", config.to_str().unwrap(), "--grant", &policy]);
        let (code, result) = run_json(ws.path(), &args, &line);
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert_eq!(
            result["stdout"]["text"],
            "http allowed\nhttp refused: 403\nsocks allowed\nsocks refused 2\n",
            "{backend:?}: {result}"
        );
        assert_eq!(allowed_served.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(
            other_served.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "{backend:?}: a refused endpoint was reached"
        );
        let refused = &result["grant"]["refused"];
        assert_eq!(refused.as_array().unwrap().len(), 2, "{result}");
        assert_eq!(refused[0]["port"], other);
        assert_eq!(
            refused[0]["reason"],
            format!("127.0.0.1:{other} is not in this run's network grant")
        );
        assert_eq!(result["grant"]["network"]["allow"][0]["port"], allowed);
        if backend.contains(&"landlock") {
            // Landlock's TCP rules know ports, not addresses: said.
            assert_eq!(result["sandbox"]["enforcement"], "partial", "{result}");
            assert!(
                result["grant"]["partial"]
                    .to_string()
                    .contains("bound the port, not the address"),
                "{result}"
            );
        }
        // Nothing but the proxy: a direct connection to the allowed
        // endpoint fails, and so does any datagram socket.
        let direct = format!(
            "(echo > /dev/tcp/127.0.0.1/{allowed}) 2>/dev/null && echo direct:ok || echo direct:refused; \
             python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\" \
             2>/dev/null && echo udp:ok || echo udp:refused"
        );
        let (_, result) = run_json(ws.path(), &args, &direct);
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(out.starts_with("direct:refused\n"), "{backend:?}: {result}");
        if backend.contains(&"landlock") {
            assert!(out.contains("udp:refused"), "{backend:?}: {result}");
        }
    }
}

/// A loopback HTTP/1.1 server that keeps connections alive and answers
/// each request with `200`; the request line and `Host` header of every
/// request it was sent, on a thread.
pub(crate) fn recording_http_server() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufReader, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let record = record.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                while let Some(head) = common::request_head(&mut reader) {
                    record.lock().unwrap().push(head);
                    let _ = writer.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
                }
            });
        }
    });
    (port, seen)
}

#[test]
fn every_request_of_a_kept_alive_proxy_connection_is_decided_and_its_host_header_checked() {
    for (backend, _) in confined_backends("every_request_of_a_kept_alive_proxy_connection") {
        let ws = workspace();
        let (allowed, allowed_seen) = recording_http_server();
        let (other, other_seen) = recording_http_server();
        let policy = grant(
            ws.path(),
            json!({"network": {"allow": [{"host": "127.0.0.1", "port": allowed}]}}),
        );
        // One connection to the proxy, four requests on it: the allowed
        // target (a positive control), another target, the allowed target
        // with a Host header naming another (a shared front end routes by
        // it), and the allowed target again.
        std::fs::write(
            ws.path().join("kept.py"),
            format!(
                r#"import os, socket
proxy = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
s = socket.create_connection(("127.0.0.1", proxy), timeout=5)
f = s.makefile("rb")
def ask(port, path, host):
    s.sendall(("GET http://127.0.0.1:%d%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (port, path, host)).encode())
    status = f.readline().decode().split(" ")[1]
    length = 0
    while True:
        line = f.readline().decode().strip()
        if not line:
            break
        name, value = line.split(":", 1)
        if name.lower() == "content-length":
            length = int(value)
    f.read(length)
    return status
print(ask({allowed}, "/one", "127.0.0.1:{allowed}"))
print(ask({other}, "/two", "127.0.0.1:{other}"))
print(ask({allowed}, "/three", "elsewhere.example"))
print(ask({allowed}, "/four", "127.0.0.1:{allowed}"))
"#
            ),
        )
        .unwrap();
        let config = ceiling(ws.path(), &["127.0.0.1".into()]);
        let mut args = backend.to_vec();
        args.extend(["--config", config.to_str().unwrap(), "--grant", &policy]);
        let (code, result) = run_json(ws.path(), &args, "python3 kept.py");
        assert_eq!(code, 0, "{backend:?}: {result}");
        assert_eq!(
            result["stdout"]["text"], "200\n403\n403\n200\n",
            "{backend:?}: {result}"
        );
        assert_eq!(
            *allowed_seen.lock().unwrap(),
            [
                format!("GET /one HTTP/1.1 Host=127.0.0.1:{allowed}"),
                format!("GET /four HTTP/1.1 Host=127.0.0.1:{allowed}"),
            ],
            "{backend:?}: only the decided requests reach the allowed server"
        );
        assert!(
            other_seen.lock().unwrap().is_empty(),
            "{backend:?}: a refused target was reached"
        );
        let refused = result["grant"]["refused"].as_array().unwrap();
        assert_eq!(refused.len(), 2, "{backend:?}: {result}");
        assert_eq!(refused[0]["port"], other, "{result}");
        assert_eq!(refused[1]["port"], allowed, "{result}");
        let why = refused[1]["reason"].as_str().unwrap();
        assert!(why.contains("Host header"), "{backend:?}: {result}");
    }
}

#[test]
fn curl_reaches_an_allowed_endpoint_through_the_proxy_and_a_trapping_connect_refuses_only_its_own()
{
    let Some(curl) = ["/usr/bin/curl", "/bin/curl"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("SKIPPED curl_reaches_an_allowed_endpoint_through_the_proxy: no curl");
        return;
    };
    for (backend, _) in confined_backends("curl_reaches_an_allowed_endpoint_through_the_proxy") {
        let ws = workspace();
        let (allowed, served) = http_server("through the proxy\n");
        let policy = grant(
            ws.path(),
            json!({"network": {"allow": [
                {"host": "127.0.0.1", "port": allowed},
                {"host": "trap", "port": 80},
            ]}}),
        );
        // hostile-policy's connect panics for the host `trap`: that
        // connection is refused, and the next is decided as usual. A name
        // that resolves to the host's loopback, which the operator did not
        // name, is refused by the host before the component is asked.
        let hostile = common::component("hostile-policy.wasm");
        let line = format!(
            "{curl} -sS --max-time 5 http://trap/ 2>&1 | head -c 300; echo; \
             {curl} -sS --max-time 5 http://127.0.0.1:{allowed}/; \
             {curl} -sS --max-time 5 --socks5-hostname \"${{ALL_PROXY#socks5h://}}\" \
             http://127.0.0.1:{allowed}/; \
             {curl} -sS --max-time 5 -x \"$HTTP_PROXY\" http://localhost:{allowed}/"
        );
        let config = ceiling(
            ws.path(),
            &[format!("127.0.0.1:{allowed}"), "trap:80".into()],
        );
        let mut args = vec!["--policy", hostile.to_str().unwrap()];
        args.extend(backend);
        args.extend(["--config", config.to_str().unwrap(), "--grant", &policy]);
        let (code, result) = run_json(ws.path(), &args, &line);
        assert_eq!(code, 0, "{backend:?}: {result}");
        let out = result["stdout"]["text"].as_str().unwrap();
        assert!(out.contains("trap:80 refused"), "{backend:?}: {out}");
        assert!(out.contains("policy component failed in connect"), "{out}");
        assert_eq!(
            out.matches("through the proxy").count(),
            2,
            "{backend:?}: {out}"
        );
        assert!(
            out.contains(&format!(
                "localhost:{allowed} is not in this run's network grant"
            )),
            "{backend:?}: {out}"
        );
        assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 2);
        let refused = &result["grant"]["refused"];
        assert_eq!(refused[0]["host"], "trap", "{result}");
        assert_eq!(refused[1]["host"], "localhost", "{result}");
    }
}

/// The `cordon-proxy-*` directories in `dir`.
fn proxy_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("cordon-proxy-"))
        .collect()
}

#[test]
fn an_allow_list_run_leaves_no_proxy_socket_directory_behind() {
    // Every backend, and the default ladder (whose runner is started ahead
    // of the plan, confining the grant once more than the run uses).
    let mut backends: Vec<&[&str]> = confined_backends("an_allow_list_run_leaves_no_proxy")
        .into_iter()
        .map(|(backend, _)| backend)
        .collect();
    if backends.is_empty() {
        return;
    }
    backends.push(&[]);
    for backend in backends {
        let ws = workspace();
        let tmp = workspace();
        let (port, _) = http_server("ok\n");
        let policy = grant(
            ws.path(),
            json!({"network": {"allow": [{"host": "127.0.0.1", "port": port}]}}),
        );
        let config = common::full_network_config();
        let mut args = backend.to_vec();
        args.extend(["--grant", &policy, "--config", config.to_str().unwrap()]);
        let output = common::cordon()
            .current_dir(ws.path())
            .env("TMPDIR", tmp.path())
            .args(["run", "--json"])
            .args(&args)
            .args(["--", "echo ran"])
            .output()
            .unwrap();
        let result = common::parse(&output);
        assert_eq!(result["stdout"]["text"], "ran\n", "{backend:?}: {result}");
        assert_eq!(
            proxy_dirs(tmp.path()),
            Vec::<String>::new(),
            "{backend:?}: the host left its proxy's directory behind"
        );
    }
}

/// A host nobody configured reaches no network: a grant of the whole
/// network is above its ceiling (`INVALID_REQUEST`, naming the field and
/// the ceiling), and runs once the operator's ceiling is `full`.
#[test]
fn with_no_config_a_grant_of_the_whole_network_is_above_the_ceiling() {
    let ws = workspace();
    let full = grant(ws.path(), json!({"network": "full"}));
    let (code, result) = run_json(ws.path(), &["--grant", &full], "echo ran");
    assert_eq!(code, 64, "{result}");
    assert_eq!(result["error"]["field"], "policy.network", "{result}");
    assert_eq!(result["error"]["ceiling"], "max_network: none", "{result}");
    assert!(result.get("stdout").is_none(), "{result}");
    let config = common::full_network_config();
    let args = ["--grant", &full, "--config", config.to_str().unwrap()];
    let (code, result) = run_json(ws.path(), &args, "echo ran");
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["stdout"]["text"], "ran\n", "{result}");
}
