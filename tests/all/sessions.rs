//! Sessions: what one client starts is neither visible to nor ended by
//! another, through the library ([`cordon::Session`]) and through one
//! [`cordon::serve::Server`] serving two connections at once. Each test
//! checks the host's process table: a session's end kills exactly its own
//! tasks' processes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{self, Client, danger, host_processes_with, processes_gone, workspace};

/// A `sleep` whose argument no other test uses, so the process table
/// tells whose it is. It lasts weeks, so only a session's end ends it: a
/// 34-second one can end by itself in a suite slow enough, which reads as
/// one session killing another's task.
fn sleeper(tag: u32) -> String {
    format!("sleep 3{tag}{:05}", std::process::id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_sees_only_its_own_tasks_and_its_end_kills_only_them() {
    let ws = workspace();
    let host = common::test_host(ws.path(), 64_000);
    let (alice, bob) = (host.session(), host.session());
    let (alices, bobs) = (sleeper(1), sleeper(2));
    let a = alice.start(danger(ws.path(), &alices)).await.unwrap();
    let b = bob.start(danger(ws.path(), &bobs)).await.unwrap();
    common::wait_for_processes(&alices, 1);
    common::wait_for_processes(&bobs, 1);

    assert_ne!(a.id(), b.id(), "task ids are unique across the host");
    assert!(bob.task(a.id()).is_none(), "bob sees alice's task");
    assert!(alice.task(b.id()).is_none(), "alice sees bob's task");
    assert!(
        host.task(a.id()).is_none(),
        "the host's own session sees it"
    );
    assert_eq!(alice.tasks().len(), 1);
    assert!(!bob.remove_task(a.id()));

    alice.shutdown().await;
    assert!(processes_gone(&alices), "alice's task outlived her session");
    assert_eq!(
        host_processes_with(&bobs).len(),
        1,
        "ending alice's session ended bob's task"
    );
    // Bob's session still works, and the host runs for everyone.
    let echo = bob.run(danger(ws.path(), "echo still-here")).await.unwrap();
    assert_eq!(echo.stdout.text, "still-here\n");
    drop(bob);
    assert!(processes_gone(&bobs), "dropping a session kills its tasks");
}

fn run_params(ws: &std::path::Path, command: &str) -> Value {
    json!({
        "command": command,
        "policy": {"mode": "danger-full-access", "workspaceRoot": ws},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_connection_is_a_session_and_closing_one_leaves_the_other_serving() {
    let ws = workspace();
    let host = Arc::new(common::test_host(ws.path(), 64_000));
    let server = Arc::new(cordon::serve::Server::new(host.clone()));
    let (mut alice, alice_served) = Client::connect(&server);
    let (mut bob, bob_served) = Client::connect(&server);
    let (alices, bobs) = (sleeper(3), sleeper(4));
    let began = std::time::Instant::now();

    let a = alice.call("start", run_params(ws.path(), &alices)).await;
    let b = bob.call("start", run_params(ws.path(), &bobs)).await;
    common::wait_for_processes(&alices, 1);
    common::wait_for_processes(&bobs, 1);

    // Neither sees, reads, kills nor removes the other's task.
    assert_eq!(
        bob.call("list", json!({})).await["tasks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    for method in ["read", "kill", "remove"] {
        let err = bob.call(method, json!({"taskId": a["taskId"]})).await;
        assert_eq!(err["data"]["code"], "UNKNOWN_TASK", "{method}: {err}");
    }
    let err = alice.call("read", json!({"taskId": b["taskId"]})).await;
    assert_eq!(err["data"]["code"], "UNKNOWN_TASK", "{err}");
    assert_eq!(
        host_processes_with(&alices).len(),
        1,
        "bob's kill reached alice"
    );

    // Alice hangs up: her session ends, her task dies, bob's lives on.
    drop(alice);
    tokio::time::timeout(Duration::from_secs(20), alice_served)
        .await
        .expect("alice's connection ended")
        .unwrap()
        .unwrap();
    assert!(
        processes_gone(&alices),
        "alice's task outlived her connection"
    );
    assert_eq!(
        host_processes_with(&bobs).len(),
        1,
        "alice's end killed bob's task ({:?} after it started)",
        began.elapsed()
    );
    let echo = bob
        .call("run", run_params(ws.path(), "echo still-serving"))
        .await;
    assert_eq!(echo["stdout"]["text"], "still-serving\n", "{echo}");
    assert_eq!(
        bob.call("read", json!({"taskId": b["taskId"]})).await["status"],
        "running"
    );

    // `shutdown` ends bob's connection and session, not the host.
    assert_eq!(bob.call("shutdown", json!({})).await, json!({}));
    tokio::time::timeout(Duration::from_secs(20), bob_served)
        .await
        .expect("bob's connection ended")
        .unwrap()
        .unwrap();
    assert!(processes_gone(&bobs), "bob's task outlived his connection");
    let after = host
        .run(danger(ws.path(), "echo host-alive"))
        .await
        .unwrap();
    assert_eq!(after.stdout.text, "host-alive\n");
}
