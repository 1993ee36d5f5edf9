//! A JSON-RPC line client for `cordon serve` over any byte stream (a
//! child's pipes, a Unix socket): replies matched by id, the rest queued.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Panic unless `instance` is valid against the part of the protocol's
/// JSON Schema at `pointer` (`/methods/run/result`, `/error`). Params a
/// test sends on purpose wrong are not checked (see `call_err`).
pub fn conforms(pointer: &str, instance: &Value) {
    use std::sync::OnceLock;
    static VALIDATORS: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> =
        OnceLock::new();
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    let document = DOCUMENT.get_or_init(cordon::serve::schema::document);
    let validator = {
        let mut cache = VALIDATORS.get_or_init(Default::default).lock().unwrap();
        cache
            .entry(pointer.to_owned())
            .or_insert_with(|| {
                let part = cordon::serve::schema::part(document, pointer)
                    .unwrap_or_else(|| panic!("the schema has no {pointer}"));
                Arc::new(jsonschema::validator_for(&part).expect("the schema compiles"))
            })
            .clone()
    };
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not valid against the schema's {pointer}: {errors:?}\n{instance}"
    );
}

/// Replies are matched by id; replies without one (or batches) queue up.
#[derive(Default)]
struct Inbox {
    by_id: HashMap<String, Value>,
    other: Vec<Value>,
    /// Every line as written, in order.
    raw: Vec<String>,
    closed: bool,
}

/// The client side of one connection.
pub struct Rpc {
    writer: Option<Box<dyn Write + Send>>,
    /// A socket to shut down when the client goes (its reader thread holds
    /// a clone that would keep it open).
    socket: Option<std::os::unix::net::UnixStream>,
    inbox: Arc<(Mutex<Inbox>, Condvar)>,
    next_id: u64,
}

impl Rpc {
    /// A client reading replies from `reader`, writing requests to `writer`.
    pub fn new(reader: impl Read + Send + 'static, writer: impl Write + Send + 'static) -> Rpc {
        let inbox = Arc::new((Mutex::new(Inbox::default()), Condvar::new()));
        let filler = inbox.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                let Ok(line) = line else { break };
                let (lock, ready) = &*filler;
                let reply: Value = match serde_json::from_str(&line) {
                    Ok(reply) => reply,
                    // Legal JSON past what serde_json's numbers hold (an
                    // id like 1e400): kept as text only.
                    Err(e) if e.to_string().contains("number out of range") => {
                        lock.lock().unwrap().raw.push(line);
                        ready.notify_all();
                        continue;
                    }
                    Err(e) => panic!("server wrote non-JSON {line:?}: {e}"),
                };
                let mut inbox = lock.lock().unwrap();
                inbox.raw.push(line.clone());
                match reply.get("id") {
                    Some(id) if !id.is_null() && reply.is_object() => {
                        inbox.by_id.insert(id.to_string(), reply);
                    }
                    _ => inbox.other.push(reply),
                }
                ready.notify_all();
            }
            let (lock, ready) = &*filler;
            lock.lock().unwrap().closed = true;
            ready.notify_all();
        });
        Rpc {
            writer: Some(Box::new(writer)),
            socket: None,
            inbox,
            next_id: 0,
        }
    }

    /// A client over a connected Unix socket, which it shuts down when dropped.
    pub fn over(stream: std::os::unix::net::UnixStream) -> Rpc {
        let mut rpc = Rpc::new(stream.try_clone().unwrap(), stream.try_clone().unwrap());
        rpc.socket = Some(stream);
        rpc
    }

    /// Stop writing (EOF for the server).
    pub fn close(&mut self) {
        drop(self.writer.take());
    }

    /// Replies without an id not taken yet.
    pub fn unmatched(&self) -> usize {
        self.inbox.0.lock().unwrap().other.len()
    }

    /// Every line the server wrote so far.
    pub fn raw_lines(&self) -> Vec<String> {
        self.inbox.0.lock().unwrap().raw.clone()
    }

    pub fn send_line(&mut self, line: &str) {
        let writer = self.writer.as_mut().expect("writer open");
        writer.write_all(line.as_bytes()).unwrap();
        writer.write_all(b"\n").unwrap();
        writer.flush().unwrap();
    }

    /// Send a request; returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&request.to_string());
        id
    }

    /// The reply to `id` (waits up to 60 s).
    pub fn reply(&self, id: &Value) -> Value {
        self.reply_within(id, Duration::from_secs(60))
            .unwrap_or_else(|| panic!("no reply to {id}"))
    }

    /// The reply to `id`, if it comes within `bound`.
    pub fn reply_within(&self, id: &Value, bound: Duration) -> Option<Value> {
        let (lock, ready) = &*self.inbox;
        let deadline = Instant::now() + bound;
        let mut inbox = lock.lock().unwrap();
        loop {
            if let Some(reply) = inbox.by_id.remove(&id.to_string()) {
                return Some(reply);
            }
            assert!(
                !inbox.closed,
                "the server closed its end before answering {id}"
            );
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            inbox = ready.wait_timeout(inbox, left).unwrap().0;
        }
    }

    /// The next reply that had no id (or was a batch).
    pub fn other_reply(&self) -> Value {
        let (lock, ready) = &*self.inbox;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut inbox = lock.lock().unwrap();
        loop {
            if !inbox.other.is_empty() {
                return inbox.other.remove(0);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no id-less reply came");
            inbox = ready.wait_timeout(inbox, left).unwrap().0;
        }
    }

    /// Call and return the `result`, panicking on an error reply. The
    /// params and the result are checked against the protocol's schema.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let given = match &params {
            Value::Null => json!({}),
            other => other.clone(),
        };
        conforms(&format!("/methods/{method}/params"), &given);
        let id = self.send(method, params);
        let reply = self.reply(&id);
        assert_eq!(reply["jsonrpc"], "2.0");
        let result = reply
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{method} failed: {reply}"));
        conforms(&format!("/methods/{method}/result"), &result);
        result
    }

    /// Call and return the `error`, panicking on a result. The error is
    /// checked against the protocol's schema.
    pub fn call_err(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let reply = self.reply(&id);
        assert_eq!(reply["id"], id);
        let error = reply
            .get("error")
            .cloned()
            .unwrap_or_else(|| panic!("{method} succeeded: {reply}"));
        conforms("/error", &error);
        error
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        if let Some(socket) = &self.socket {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }
}
