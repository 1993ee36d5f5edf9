//! Property tests of the JSON-RPC decoder, through a real server: any line
//! a client sends gets a clear answer (or, for a notification, none), ids
//! are echoed exactly, and the server keeps serving.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::{test_host, workspace};

/// Methods that neither run a command nor end the connection.
const METHODS: &[&str] = &[
    "list", "read", "kill", "wait", "remove", "release", "probe", "detach", "attach", "nope", "",
];

fn id() -> BoxedStrategy<Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::from),
        Just(Value::Null),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!([1])),
        Just(json!({"a": 1})),
        Just(json!(true)),
    ]
    .boxed()
}

fn params() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(json!({})),
        Just(json!([])),
        Just(json!(null)),
        "[ -~]{0,8}".prop_map(|key| json!({ key: 1 })),
        any::<i64>().prop_map(|n| json!({"taskId": n})),
        "[ -~]{0,40}".prop_map(|s| json!({"taskId": s, "timeoutMs": -1})),
    ]
    .boxed()
}

/// A line: arbitrary bytes, or a request with arbitrary parts, alone or in a batch.
fn line() -> impl Strategy<Value = String> {
    let request = (
        id(),
        prop::sample::select(METHODS),
        params(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(id, method, params, with_id, version)| {
            let mut request = json!({"method": method, "params": params});
            request["jsonrpc"] = json!(if version { "2.0" } else { "1.0" });
            if with_id {
                request["id"] = id;
            }
            request
        });
    prop_oneof![
        "[^\n]{0,80}",
        request.clone().prop_map(|r| r.to_string()),
        prop::collection::vec(request, 0..4).prop_map(|batch| Value::from(batch).to_string()),
    ]
}

/// Whether `id` is one a request may carry (JSON-RPC 2.0: a string, a
/// number, or null).
fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_number() || id.is_null()
}

fn check_reply(reply: &Value) -> Result<(), TestCaseError> {
    prop_assert_eq!(&reply["jsonrpc"], "2.0", "{}", reply);
    prop_assert!(
        reply.get("result").is_some() ^ reply.get("error").is_some(),
        "{}",
        reply
    );
    if let Some(error) = reply.get("error") {
        prop_assert!(error["code"].is_i64(), "{}", reply);
        prop_assert!(
            !error["message"].as_str().unwrap_or("").is_empty(),
            "{}",
            reply
        );
        prop_assert!(error["data"]["code"].is_string(), "{}", reply);
    }
    Ok(())
}

#[test]
fn any_line_gets_a_clear_answer_and_ids_are_echoed_exactly() {
    let ws = workspace();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let host = Arc::new(test_host(ws.path(), 1000));
    let server = Arc::new(cordon::serve::Server::new(host));
    let config = ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let outcome = runner.run(&line(), |line| {
        // A connection of its own: the line, then end of input; the server
        // answers what it read and ends the connection, so every reply to
        // this line (in whatever order) is read, and nothing else.
        let got: Vec<Value> = runtime.block_on(async {
            let (client, end) = tokio::io::duplex(1 << 20);
            let (input, output) = tokio::io::split(end);
            let serving = server.clone();
            let served = tokio::spawn(async move { serving.serve(input, output).await });
            let (reader, mut writer) = tokio::io::split(client);
            writer
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
            writer.shutdown().await.unwrap();
            drop(writer);
            let mut replies = BufReader::new(reader).lines();
            let mut got = Vec::new();
            while let Some(reply) =
                tokio::time::timeout(std::time::Duration::from_secs(10), replies.next_line())
                    .await
                    .expect("the server answers and ends the connection")
                    .unwrap()
            {
                got.push(serde_json::from_str(&reply).expect("every reply is JSON"));
            }
            served.await.unwrap().unwrap();
            got
        });
        let sent: Option<Value> = serde_json::from_str(&line).ok();
        match sent {
            // Not JSON at all: one parse error, id null.
            None if !line.trim().is_empty() => {
                prop_assert_eq!(got.len(), 1, "{:?} -> {:?}", line, got);
                prop_assert_eq!(&got[0]["id"], &Value::Null);
                prop_assert_eq!(&got[0]["error"]["code"], -32700);
            }
            None => {}
            Some(Value::Array(batch)) if !batch.is_empty() => {
                // One array of replies, one per request that is not a
                // notification; each id echoed exactly.
                prop_assert!(got.len() <= 1, "{:?} -> {:?}", line, got);
                let replies = got
                    .first()
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for reply in &replies {
                    check_reply(reply)?;
                }
                for request in &batch {
                    if let Some(id) = request.get("id").filter(|id| valid_id(id))
                        && request["jsonrpc"] == "2.0"
                    {
                        prop_assert!(
                            replies.iter().any(|r| &r["id"] == id),
                            "{} unanswered: {:?}",
                            id,
                            replies
                        );
                    }
                }
            }
            Some(request) => {
                for reply in &got {
                    check_reply(reply)?;
                }
                match request.get("id") {
                    Some(id) if valid_id(id) => {
                        prop_assert_eq!(got.len(), 1, "{:?} -> {:?}", line, got);
                        prop_assert_eq!(&got[0]["id"], id);
                    }
                    // A notification: carried out, never answered; an id of
                    // the wrong type is an invalid request, answered with null.
                    None => prop_assert!(got.is_empty() || got[0]["id"].is_null(), "{:?}", got),
                    Some(_) => {
                        prop_assert_eq!(got.len(), 1, "{:?} -> {:?}", line, got);
                        prop_assert_eq!(&got[0]["id"], &Value::Null);
                    }
                }
            }
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}
